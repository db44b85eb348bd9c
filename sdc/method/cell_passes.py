"""The two record passes, one batch at a time: count cells, then release records.

A release needs records only twice (docs/METHOD.md section 1): to count the cells (t_j of every
non-empty cell) and to apply each record's released cell, which is a pure per-record map once
the plan is known (record-keyed draws, :mod:`sdc.method.draws`). This module holds the
per-batch pieces every executor shares (pandas = one batch, streaming = batches in a loop,
Dask = one batch per partition); what happens between the passes is
:func:`sdc.method.designs.plan_release` on the cell table, identical for every engine.

Cells are identified across batches by their mixed-radix code
(:func:`sdc.method.cells.cell_codes`): sorting the codes sorts the cells lexicographically by
key codes, exactly the cell numbering of :func:`sdc.method.cells.encode_cells`, so a cell
table merged from batches equals the one of the whole file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import KeyVariable, ReleaseConfig
from sdc.errors import InputError
from sdc.method.cells import CellTable, cell_codes, code_counts, radix_sizes, split_codes
from sdc.method.dependence import DependenceCounter, key_sizes, pair_plan, small_limit
from sdc.method.dependence import checked_columns as dependence_columns
from sdc.method.derived import DerivedCollector, apply_derived, cell_describer
from sdc.method.partition import partition_cells

# cell_codes (engine.cells) and partition_cells (engine.partition) are re-exported: the two
# record-pass steps every batch needs, defined once where the in-memory engine's are
__all__ = ["CellCounter", "CellLocator", "DependenceThread", "add_dependence", "cell_codes", "cell_table",
           "decode_released", "derived_cells", "new_dependence_counter", "partition_cells",
           "record_key_codes"]


def record_key_codes(codes: np.ndarray, config: ReleaseConfig) -> np.ndarray:
    """(n, p) key codes of mixed-radix cell codes (the inverse of :func:`cell_codes`)."""
    return split_codes(codes, radix_sizes(config), per_key=True)


def new_dependence_counter(columns: list[str], config: ReleaseConfig,
                           kinds: Mapping[str, str] | None = None) -> DependenceCounter:
    """The dependence check's counter of a batch engine (the columns it measures, of the
    input's ``columns``; ``kinds``: the columns that may pair, from the input's schema,
    :func:`sdc.method.dependence.schema_kinds`: no pairs without)."""
    checked = dependence_columns(columns, config)
    return DependenceCounter(checked, len(config.key_names), small_limit(config),
                             sizes=key_sizes(config),
                             pairs=pair_plan(checked, kinds or {}, config))


def add_dependence(counter: DependenceCounter, frame: pd.DataFrame, codes: np.ndarray,
                   config: ReleaseConfig, key_codes: np.ndarray | None = None,
                   split: bool = False) -> None:
    """Add one batch (its mixed-radix cell codes; ``key_codes``: the (n, p) key codes they
    combine, when known) to the dependence counter (``split``: the pairs' arithmetic images
    on a second thread, :meth:`DependenceCounter.add`)."""
    if counter.columns and len(codes):
        counter.add(frame, codes,
                    record_key_codes(codes, config) if key_codes is None else key_codes,
                    split=split)


class DependenceThread:
    """:func:`add_dependence` of one batch on a thread (a runner holding the whole file: the
    check's ~1.2 CPU s at 5M runs beside the plan and the apply pass on the second core;
    numpy's hashes, sorts and scatters and pandas' factorize release the GIL), then on a
    thread too the measure :meth:`measure_later` hands it once the plan is known. The batch's
    columns are only read. :meth:`result` joins: the counter and the measure's figures (None:
    not measured), or the error."""

    def __init__(self, counter: DependenceCounter, frame: pd.DataFrame, codes: np.ndarray,
                  config: ReleaseConfig, key_codes: np.ndarray | None = None) -> None:
        self.counter = counter
        self._error: BaseException | None = None
        self._figures: list | None = None
        self._thread = self._start(lambda: add_dependence(counter, frame, codes, config,
                                                          key_codes, split=True))

    @classmethod
    def counted(cls, counter: DependenceCounter) -> DependenceThread:
        """A check whose counting is done (a runner in batches merged it over the count
        pass): only the measure runs on a thread (:meth:`measure_later`), beside the
        identity and apply passes (~0.4 CPU s at 10M records that were a step of one core)."""
        self = cls.__new__(cls)
        self.counter, self._error, self._figures, self._thread = counter, None, None, None
        return self

    def _start(self, work: Callable[[], None], after: Any = None) -> Any:
        import threading

        def run() -> None:
            if after is not None:
                after.join()
                if self._error is not None:
                    return
            try:
                work()
            except BaseException as exc:  # re-raised by result() in the caller's thread
                self._error = exc

        thread = threading.Thread(target=run, name="sdc-dependence-check", daemon=True)
        thread.start()
        return thread

    def measure_later(self, measure: Callable[[DependenceCounter], list]) -> None:
        """``measure(counter)`` on a thread once the counting is done (its figures)."""
        def work() -> None:
            self._figures = measure(self.counter)

        self._thread = self._start(work, after=self._thread)

    def result(self) -> tuple[DependenceCounter, list | None]:
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self.counter, self._figures


def derived_cells(cells: CellTable, cell_ids: np.ndarray, collector: DerivedCollector | None,
                  config: ReleaseConfig) -> CellTable:
    """``cells`` with the value of every ``derived:`` column per cell (``cell_ids``: the
    sorted cell codes the collector saw); raises :class:`~sdc.method.derived.DerivedError`
    for a column that is not a function of the cell."""
    if collector is None or not collector.columns:
        return cells
    describe = cell_describer(cells.key_codes, config)
    values = {c: collector.values(c, cell_ids, describe) for c in collector.columns}
    return dataclasses.replace(cells, derived=values)


class CellCounter:
    """Merge per-batch cell counts: ``add(codes)`` per batch, then :meth:`result`.

    Memory is O(number of non-empty cells), never O(records): each batch is reduced to its
    distinct codes and counts, and the pending reductions are merged every ``merge_every``
    batches.
    """

    def __init__(self, merge_every: int = 8) -> None:
        self._codes: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self.merge_every = merge_every
        self.n_records = 0

    def add(self, codes: np.ndarray, sizes: list[int] | None = None) -> None:
        """Add a batch's cell codes (``sizes``: their radices, for a dense count)."""
        if sizes is not None:
            self.add_counts(*code_counts(codes, sizes))
            return
        u, c = np.unique(codes, return_counts=True)
        self.add_counts(u, c.astype(np.int64))

    def add_counts(self, codes: np.ndarray, counts: np.ndarray) -> None:
        """Add already reduced (distinct code, count) pairs (e.g. from a Dask partition)."""
        self._codes.append(np.asarray(codes, dtype=np.int64))
        self._counts.append(np.asarray(counts, dtype=np.int64))
        self.n_records += int(np.sum(counts))
        if len(self._codes) >= self.merge_every:
            self._merge()

    def _merge(self) -> None:
        if len(self._codes) <= 1:
            return
        codes = np.concatenate(self._codes)
        counts = np.concatenate(self._counts)
        u, inv = np.unique(codes, return_inverse=True)
        self._codes = [u]
        self._counts = [np.bincount(inv, weights=counts, minlength=u.size).astype(np.int64)]

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct cell codes, t_j)."""
        self._merge()
        if not self._codes:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self._codes[0], self._counts[0]


def cell_table(codes: np.ndarray, counts: np.ndarray, config: ReleaseConfig) -> CellTable:
    """The :class:`CellTable` of merged counts (``record_cell`` is empty: no records here)."""
    return CellTable(np.zeros(0, dtype=np.int64), split_codes(codes, radix_sizes(config)),
                     counts.astype(np.int64), list(config.key_names))


_LUT_MAX = 1 << 24


class CellLocator:
    """Global cell index of a record from its cell code: a dense lookup table when the key
    cross-product has at most 2**24 cells (one gather per record), else a binary search in the
    sorted codes. Raises :class:`~sdc.errors.InputError` for a code that was not counted (the
    file changed between the passes)."""

    def __init__(self, sorted_cell_codes: np.ndarray, config: ReleaseConfig) -> None:
        self.codes = np.asarray(sorted_cell_codes, dtype=np.int64)
        total = 1
        for s in radix_sizes(config):
            total *= s
        self.lut = None
        if total <= _LUT_MAX:
            self.lut = np.full(total, -1, dtype=np.int64)
            self.lut[self.codes] = np.arange(self.codes.size, dtype=np.int64)

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        if self.lut is not None:
            idx = self.lut[codes]
            ok = bool((idx >= 0).all())
        else:
            idx = np.searchsorted(self.codes, codes)
            idx = np.minimum(idx, max(self.codes.size - 1, 0))
            ok = self.codes.size > 0 and np.array_equal(self.codes[idx], codes)
        if not ok:
            raise InputError("the input changed between the counting pass and the release pass "
                             "(a record's cell was not counted); rerun the release")
        return idx.astype(np.int64, copy=False)


def released_column(values: pd.Series, rows: np.ndarray, new_codes: np.ndarray,
                    kv: KeyVariable) -> pd.Series:
    """``values`` (a key column) with the records ``rows`` taking the domain values of
    ``new_codes`` (the missing category, when declared, is the last code and decodes to a
    missing value).

    One dtype rule for every engine: the column keeps its input dtype whenever that dtype can
    hold the released values (numbers are written into a numeric column directly, anything
    else through an object column cast back), and becomes an object column only when a numpy
    integer or boolean column receives a missing value (a batch without missing values of a
    file that has them).
    """
    missing = kv.missing == "category"
    ints = kv.range_values()  # a range's integers: the loops below, vectorized
    dom = kv.domain + ([None] if missing else []) if ints is None else None
    col = values.to_numpy(copy=True)
    gets_missing = missing and bool((new_codes == kv.size - 1).any())
    number = ints is not None or all(
        x is None or (isinstance(x, int | float) and not isinstance(x, bool)) for x in dom)
    if number and col.dtype.kind == "f":  # stays float (missing category = NaN)
        col[rows] = (np.array([np.nan if x is None else float(x) for x in dom]) if dom is not None
                     else np.append(ints.astype(float), [np.nan] * missing))[new_codes]
    elif number and col.dtype.kind in "iu" and not gets_missing and (ints is not None or all(
            float(x).is_integer() for x in dom if x is not None)):
        col[rows] = (np.array([0 if x is None else x for x in dom], dtype=np.int64)
                     if dom is not None else np.append(ints, [0] * missing))[new_codes]
    else:
        if col.dtype != object:
            col = col.astype(object)
        if dom is None:
            dom = kv.domain + ([None] if missing else [])
        col[rows] = np.asarray(dom, dtype=object)[new_codes]
    out = pd.Series(col, index=values.index, name=values.name, copy=False)  # (owned: no copy)
    plain = not isinstance(values.dtype, pd.api.extensions.ExtensionDtype)
    if out.dtype != values.dtype and not (gets_missing and plain and values.dtype.kind in "iub"):
        out = out.astype(values.dtype)
    return out


def decode_released(frame: pd.DataFrame, record_cell: np.ndarray, released_cell: np.ndarray,
                    cells: CellTable, config: ReleaseConfig) -> pd.DataFrame:
    """The released records of a batch (or of the whole file): ``frame`` minus
    ``input.drop``, every moved record taking all key values of its released cell
    (:func:`released_column`) and, with ``cells.derived``, the derived values of it."""
    out = frame.drop(columns=list(config.input.drop))
    moved = np.flatnonzero(released_cell != record_cell)
    if not moved.size:
        return out
    if cells.derived:
        out = apply_derived(out, record_cell, released_cell, cells.derived)
    for j, v in enumerate(config.key_names):
        new_codes = cells.key_codes[released_cell[moved], j]
        diff = new_codes != cells.key_codes[record_cell[moved], j]
        if diff.any():
            out[v] = released_column(out[v], moved[diff], new_codes[diff],
                                     config.key_variables[v])
    return out
