"""The in-memory executor: the whole file read once (the pandas reader,
:func:`sdc.io.read.read_input`: CSV, Parquet, SPSS, Stata) and released as one batch by the
same pipelines as the other executors (:mod:`sdc.pipeline.release`,
:mod:`sdc.pipeline.households`); :meth:`InMemory.frames` gives the kept frame again,
nothing is read twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pyarrow as pa

from sdc.config.model import EngineSpec, ReleaseConfig

__all__ = ["InMemory", "open_memory"]


class InMemory:
    """The runner of a file held in memory: one batch, the whole frame (global row numbers
    as index)."""

    checked = ""
    where = ""
    scratch = None

    def __init__(self, config: ReleaseConfig, frame: pd.DataFrame | None = None) -> None:
        from sdc.io.read import read_input

        self.config = config
        self.frame = read_input(config) if frame is None else frame

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None,
            columns: list[str] | None = None) -> Iterator[Any]:
        """``fn(frame, 0, *shared, *per_piece(0))``: the one part (every column is there;
        ``columns`` is what a batch reader would read)."""
        yield fn(self.frame, 0, *shared, *(per_piece(0) if per_piece is not None else ()))

    def frames(self, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
        yield self.frame

    def input_columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def row_count(self) -> int:
        return len(self.frame)

    def public_schema(self) -> pa.Schema:
        from sdc.io.batches import public_schema_for

        return public_schema_for(self.config, self.frame)

    def numeric_columns(self) -> list[str]:
        from sdc.reports.utility import numeric_columns

        return numeric_columns(self.frame, self.config)

    def value_ranges(self, columns: list[str]) -> dict[str, tuple[float, float, bool]]:
        return {}  # measured by the count pass (one batch)

    def is_integer(self, column: str) -> bool:
        return self.frame[column].dtype.kind in "iu"


@contextmanager
def open_memory(config: ReleaseConfig, spec: EngineSpec | None = None, *,
                frame: pd.DataFrame | None = None,
                progress: Callable[[str], None] | None = None) -> Iterator[InMemory]:
    """The in-memory runner of ``config``'s file (``frame``: the input already read, the
    flow's prefetch; else read here)."""
    if progress is not None:
        progress("reading the input")
    yield InMemory(config, frame)
