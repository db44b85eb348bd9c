"""The NZY method: pure functions of arrays and frames, no file system, no Prefect.

partition (records -> cell table) -> plan (cell table -> PRBs, theta, certificate: :mod:`.plan`,
:mod:`.risk`) -> apply (records -> released records). Only :mod:`.partition`, :mod:`.cells`,
:mod:`.cell_passes`, :mod:`.apply` and the household steps touch records; everything else works
on cells, partition sets and PRB profiles (docs/METHOD.md).
"""
