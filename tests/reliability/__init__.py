"""Reliability suite (issue 6): bad input, crashes, reruns, leaks, large and odd input."""
