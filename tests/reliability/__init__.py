"""Reliability suite: bad input, crashes, reruns, leaks, large and odd input."""
