"""The in-memory executor: the whole file read once (the pandas reader,
:func:`sdc.io.read.read_input`: CSV, Parquet, SPSS, Stata) and released as one batch by the
same pipeline as the other executors (:mod:`sdc.pipeline.passes`, with the person or
household file's stage); :meth:`InMemory.frames` gives the kept frame again,
nothing is read twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import EngineSpec, ReleaseConfig

if TYPE_CHECKING:
    from sdc.method.outcome import ReleaseOutcome

__all__ = ["InMemory", "open_memory", "release_frame"]


class InMemory:
    """The runner of a file held in memory: one batch, the whole frame (global row numbers
    as index)."""

    checked = ""
    where = ""
    scratch = None
    whole = True  # the apply pass keeps its one batch's records in memory (no spill)

    def __init__(self, config: ReleaseConfig, frame: pd.DataFrame | None = None) -> None:
        from sdc.io.read import read_input

        self.config = config
        self.frame = read_input(config) if frame is None else frame
        self._public_schema: pa.Schema | None = None

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
        """The public schema (:func:`~sdc.io.public_files.public_schema_for`), made once: a
        release asks for it in the count and the apply pass, and for a CSV input it infers the
        types from the file's first 16 MB block (~0.1 s for the 2.7 MB census sample)."""
        if self._public_schema is None:
            from sdc.io.batches import public_schema_for

            self._public_schema = public_schema_for(self.config, self.frame)
        return self._public_schema

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


def release_frame(frame: pd.DataFrame, config: ReleaseConfig, seed: int, *,
                  out_dir: Path | None = None) -> ReleaseOutcome:
    """Post-randomize the risky records of ``frame`` with NZY PRAM and certify the result: the
    library's call of the one pipeline (:func:`sdc.pipeline.run.release`: count, plan,
    apply; a household file's stages too) run by the in-memory runner on ``frame`` as one
    batch, the public files into ``out_dir`` (with the internal ``records.parquet``; None: no
    public file, the records kept in ``public_table`` only, or a throw-away folder when a
    column's type would not read back from Parquet unchanged or for a household file). ``config``'s hierarchy files must be
    loaded (``sdc.load_config`` does it) and ``frame`` in released values
    (``sdc.read_input`` recodes).

    The outcome is the one every executor gives (:class:`~sdc.method.outcome.ReleaseOutcome`:
    blocks, certificate, cell table, ...) with the released records kept: ``frame`` (the
    input's index and columns minus ``input.drop``; the id column as in the input),
    ``record_cell`` / ``released_cell`` / ``changed`` per record in input order, and
    ``public_table`` (the public file's records, public order, ``record_id`` first). The outcome
    of a record depends only on the seed, the plan, its own cell and its own identity (id,
    else its non-key values): not on row order or on which other records exist, except
    through its own t_j, theta and PRB. The report aggregates (``accumulator``, what
    :func:`sdc.pipeline.report_parts.batch_reports` builds risk.json and utility.json from)
    are summed when first used, not during the call (a person file). Raises as ``sdc release`` does
    (:class:`~sdc.errors.InputError`, :class:`~sdc.errors.SmallBlockError`,
    :class:`~sdc.method.dependence.DependenceError`).
    """
    import dataclasses
    import tempfile

    from sdc.pipeline.run import release

    runner = InMemory(config, frame.reset_index(drop=True))
    if out_dir is not None:
        res = release(runner, config, seed, Path(out_dir), keep=True, intruder=False,
                      reports=False, records_path=Path(out_dir) / "records.parquet")
        _keep_public(res)
    else:
        with tempfile.TemporaryDirectory(prefix="sdc-frame-") as tmp:
            res = release(runner, config, seed, Path(tmp), keep=True, intruder=False,
                          reports=False, files=False)
            _keep_public(res)
    kept = res.released
    res.cells = dataclasses.replace(res.cells, record_cell=kept.record_cell)
    left = getattr(getattr(res.counted, "agg", None), "left_out", None)  # exposed_sizes: drop
    if left is not None:  # the rows released (a mask: np.setdiff1d sorts by a hash table)
        rest = np.ones(len(frame), dtype=bool)
        rest[np.asarray(left.rows, dtype=np.int64)] = False
        frame = frame.iloc[np.flatnonzero(rest)]
    res.frame = _released_frame(frame, kept.table, config)
    return res


def _keep_public(res: ReleaseOutcome) -> None:
    """The public records as written (``record_id`` first, public order) kept in
    ``res.public_table`` (read back from the Parquet file when no SPSS/Stata file kept them)."""
    if res.public_table is None and "microdata.parquet" in res.files:
        import pyarrow.parquet as pq

        res.public_table = pq.read_table(res.files["microdata.parquet"]).replace_schema_metadata()


def _released_frame(frame: pd.DataFrame, table: pa.Table, config: ReleaseConfig) -> pd.DataFrame:
    """The kept public columns as a frame shaped like the input: its index, its columns
    minus ``input.drop`` in input order, the id and household id columns as they were, every
    column in the input's dtype where its values allow. A column whose released values are
    the input's (a non-key column: numbers compared without a copy) is the input's column,
    not a conversion of the table's (at 5M records the conversion's fresh pages cost more
    than the comparison)."""
    ids = {c for c in (config.input.id_column, config.input.household_id) if c}
    keys = set(config.key_names)
    cols = [c for c in frame.columns if c not in set(config.input.drop)]
    dropped = [c for c in frame.columns if c not in cols]
    # the input's columns as they are (no copy: a new frame's constructor would consolidate
    # them into 2-D blocks); a released column replaces the input's
    data = frame.drop(columns=dropped) if dropped else frame.copy(deep=False)
    for c in cols:
        if c in ids or c not in table.column_names:
            continue
        got = _numbers(table.column(c), frame[c].dtype)
        if got is not None:  # a view of the table's numbers (read only)
            # a key column is the table's (PRAM moved some of its records: no comparison of
            # the whole column, ~30 ms a column at 5M), any other the input's when equal
            same = c not in keys and np.array_equal(got, frame[c].to_numpy(),
                                                    equal_nan=got.dtype.kind == "f")
            if not same:
                data[c] = pd.Series(got, index=frame.index, name=c, copy=False)
            continue
        out = table.column(c).to_pandas()
        out.index = frame.index
        if out.dtype != frame[c].dtype:
            try:
                out = out.astype(frame[c].dtype)
            except (TypeError, ValueError):
                pass
        data[c] = out
    return data


def _numbers(column: pa.ChunkedArray, dtype: Any) -> np.ndarray | None:
    """A released column's numbers as a view of the table (no copy) when they have the input's
    numpy ``dtype`` and no missing value, else None (the caller converts the table's)."""
    if (not isinstance(dtype, np.dtype) or dtype.kind not in "iuf" or column.null_count
            or column.num_chunks != 1):
        return None
    try:
        got = column.chunk(0).to_numpy(zero_copy_only=True)
    except (pa.ArrowInvalid, NotImplementedError):
        return None
    return got if got.dtype == dtype else None
