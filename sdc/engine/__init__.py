"""The NZY engine: pure functions of arrays and frames, no file system, no Prefect.

partition (records -> cell table) -> plan (cell table -> PRBs, theta, certificate) -> apply
(records -> released records). Only :mod:`.partition` (and :mod:`.cells`) and :mod:`.apply`
touch records; everything else works on cells, partition sets and PRB profiles.
"""
