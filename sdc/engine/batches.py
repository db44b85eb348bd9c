"""The two record passes, one batch at a time: count cells, then release records.

A release needs records only twice (METHOD.md section 1): to count the cells (t_j of every
non-empty cell) and to apply each record's released cell, which is a pure per-record map once
the plan is known (record-keyed draws, :mod:`sdc.engine.draws`). This module holds the
per-batch pieces every executor shares (pandas = one batch, streaming = batches in a loop,
Dask = one batch per partition); what happens between the passes is
:func:`sdc.engine.plan.plan_release` on the cell table, identical for every engine.

Cells are identified across batches by their mixed-radix code
``c = (((k_1) * s_2 + k_2) * s_3 + k_3) ...`` (k_i = key code, s_i = domain size): sorting the
codes sorts the cells lexicographically by key codes, exactly the cell numbering of
:func:`sdc.engine.cells.encode_cells`, so a cell table merged from batches equals the one of
the whole file.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.engine.cells import CellTable, encode_key
from sdc.engine.dependence import DependenceCounter, key_sizes, small_limit
from sdc.engine.dependence import checked_columns as dependence_columns
from sdc.engine.derived import DerivedCollector, apply_derived, cell_describer
from sdc.engine.generalize import generalize_domain
from sdc.engine.partition import Partitioned, partition_labels, split_missing
from sdc.engine.theta import kmin as kmin_of
from sdc.engine.theta import solve_theta
from sdc.errors import InputError

__all__ = ["CellCounter", "CellLocator", "add_dependence", "cell_codes", "cell_table",
           "decode_released", "derived_cells", "new_dependence_counter", "partition_cells",
           "record_key_codes"]

_MAX_CODE = 2**62


def _radix(config: ReleaseConfig) -> list[int]:
    sizes = [config.key_variables[v].size for v in config.key_names]
    total = 1
    for s in sizes:
        total *= s
    if total >= _MAX_CODE:
        raise InputError(
            f"the key variables {config.key_names} have {total:.3g} possible cells; the batch "
            "engines number cells by one 62-bit code and need fewer than 2**62. Generalize or "
            "drop a key variable, or use --engine pandas"
        )
    return sizes


def record_key_codes(codes: np.ndarray, config: ReleaseConfig) -> np.ndarray:
    """(n, p) key codes of mixed-radix cell codes (the inverse of :func:`cell_codes`)."""
    sizes = _radix(config)
    out = np.empty((len(sizes), codes.size), dtype=np.int64).T  # contiguous per key
    rest = np.asarray(codes, dtype=np.int64)
    for j in range(len(sizes) - 1, -1, -1):
        rest, out[:, j] = np.divmod(rest, sizes[j])
    return out


def new_dependence_counter(columns: list[str], config: ReleaseConfig) -> DependenceCounter:
    """The dependence check's counter of a batch engine (the columns it measures, of the
    input's ``columns``)."""
    return DependenceCounter(dependence_columns(columns, config), len(config.key_names),
                             small_limit(config), sizes=key_sizes(config))


def add_dependence(counter: DependenceCounter, frame: pd.DataFrame, codes: np.ndarray,
                   config: ReleaseConfig) -> None:
    """Add one batch (its mixed-radix cell codes) to the dependence counter."""
    if counter.columns and len(codes):
        counter.add(frame, codes, record_key_codes(codes, config))


def derived_cells(cells: CellTable, cell_ids: np.ndarray, collector: DerivedCollector | None,
                  config: ReleaseConfig) -> CellTable:
    """``cells`` with the value of every ``derived:`` column per cell (``cell_ids``: the
    sorted cell codes the collector saw); raises :class:`~sdc.engine.derived.DerivedError`
    for a column that is not a function of the cell."""
    if collector is None or not collector.columns:
        return cells
    describe = cell_describer(cells.key_codes, config)
    values = {c: collector.values(c, cell_ids, describe) for c in collector.columns}
    return dataclasses.replace(cells, derived=values)


def cell_codes(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray:
    """(n,) int64 mixed-radix cell code of every record of ``frame`` (any batch).

    Raises :class:`~sdc.errors.InputError` (from :func:`~sdc.engine.cells.encode_key`) for a key
    value outside its domain; rows in the message are 1-based within ``frame``.
    """
    sizes = _radix(config)
    code = np.zeros(len(frame), dtype=np.int64)
    for v, s in zip(config.key_names, sizes, strict=True):
        code *= s
        code += encode_key(frame[v], v, config.key_variables[v])
    return code


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

    def add(self, codes: np.ndarray) -> None:
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
    sizes = _radix(config)
    key_codes = np.empty((codes.size, len(sizes)), dtype=np.int64)
    rest = codes.copy()
    for j in range(len(sizes) - 1, -1, -1):
        rest, key_codes[:, j] = np.divmod(rest, sizes[j])
    return CellTable(np.zeros(0, dtype=np.int64), key_codes, counts.astype(np.int64),
                     list(config.key_names))


def partition_cells(cells: CellTable, config: ReleaseConfig) -> Partitioned:
    """Partition sets and sensitive cells of a cell table (the part of
    :func:`sdc.engine.partition.partition_frame` after counting; works on cells only)."""
    if cells.n_cells == 0:
        raise InputError("the input has no records; nothing to release")
    xi = config.risk.xi
    theta = solve_theta(xi)
    km = kmin_of(theta)
    keys = config.key_names
    kvs = config.key_variables
    pvars = config.partition_variables
    gens = [generalize_domain(v, kvs[v], config.partition[v]) for v in pvars]
    if pvars:
        g = np.zeros(cells.n_cells, dtype=np.int64)
        for v, gen in zip(pvars, gens, strict=True):
            g = g * len(gen.labels) + gen.code_map[cells.key_codes[:, keys.index(v)]]
        uniq, cell_ps = np.unique(g, return_inverse=True)
        ps_codes = np.empty((uniq.size, len(pvars)), dtype=np.int64)
        rest = uniq.copy()
        for j in range(len(pvars) - 1, -1, -1):
            rest, ps_codes[:, j] = np.divmod(rest, len(gens[j].labels))
        cell_ps = cell_ps.astype(np.int64)
    else:
        cell_ps = np.zeros(cells.n_cells, dtype=np.int64)
        ps_codes = np.zeros((1, 0), dtype=np.int64)
    labels = partition_labels(pvars, gens, ps_codes)
    cell_ps, ps_codes, labels = split_missing(cell_ps, ps_codes, labels, cells.key_codes, config)
    sensitive = cells.frequency * xi < 1.0
    return Partitioned(cells, cell_ps, ps_codes, labels, gens, sensitive, xi, theta, km)


_LUT_MAX = 1 << 24


class CellLocator:
    """Global cell index of a record from its cell code: a dense lookup table when the key
    cross-product has at most 2**24 cells (one gather per record), else a binary search in the
    sorted codes. Raises :class:`~sdc.errors.InputError` for a code that was not counted (the
    file changed between the passes)."""

    def __init__(self, sorted_cell_codes: np.ndarray, config: ReleaseConfig) -> None:
        self.codes = np.asarray(sorted_cell_codes, dtype=np.int64)
        total = 1
        for s in _radix(config):
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


def _decode(kv, codes: np.ndarray) -> np.ndarray:
    dom = kv.domain + ([None] if kv.missing == "category" else [])
    return np.asarray(dom, dtype=object)[codes]


def decode_released(frame: pd.DataFrame, record_cell: np.ndarray, released_cell: np.ndarray,
                    cells: CellTable, config: ReleaseConfig) -> pd.DataFrame:
    """The released records of a batch: ``frame`` minus ``input.drop``, every moved record
    taking all key values of its released cell (values decoded from the declared domain)."""
    out = frame.drop(columns=list(config.input.drop))
    moved = np.flatnonzero(released_cell != record_cell)
    if not moved.size:
        return out
    if cells.derived:
        out = apply_derived(out, record_cell, released_cell, cells.derived)
    for j, v in enumerate(config.key_names):
        kv = config.key_variables[v]
        new_codes = cells.key_codes[released_cell[moved], j]
        diff = new_codes != cells.key_codes[record_cell[moved], j]
        if not diff.any():
            continue
        col = out[v].to_numpy(copy=True)
        dom = kv.domain + ([None] if kv.missing == "category" else [])
        number = all(x is None or (isinstance(x, int | float) and not isinstance(x, bool))
                     for x in dom)
        rows, new = moved[diff], new_codes[diff]
        if number and col.dtype.kind == "f":  # stays float (missing category = NaN)
            col[rows] = np.array([np.nan if x is None else float(x) for x in dom])[new]
        elif number and col.dtype.kind in "iu" and None not in dom and all(
                float(x).is_integer() for x in dom):
            col[rows] = np.array(dom, dtype=np.int64)[new]
        else:
            if col.dtype != object:
                col = col.astype(object)
            col[rows] = _decode(kv, new)
        out[v] = pd.Series(col, index=out.index, name=v)
    return out
