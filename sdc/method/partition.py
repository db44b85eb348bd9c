"""Records -> cell table and partition sets: the counting pass (docs/METHOD.md sections 1-3).

:func:`partition_frame` is one of the only two steps of a release that touch records (the other
is :mod:`sdc.pipeline.release`): it encodes the key variables, finds the non-empty cells and their
frequencies t_j, generalizes the partition variables and assigns every cell to its partition
set, and flags the sensitive cells (t_j < 1/xi). Everything after it works on the cell table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.method.cells import CellTable, encode_cells, encode_key
from sdc.method.generalize import Generalization, generalize_domain
from sdc.method.theta import kmin as kmin_of
from sdc.method.theta import solve_theta

__all__ = ["Partitioned", "check_columns", "partition_cells", "partition_frame",
           "partition_labels", "split_missing"]


def check_columns(frame: pd.DataFrame, config: ReleaseConfig, identifiers: bool = True) -> None:
    need = {f"key_variables.{k}": k for k in config.key_names}
    if identifiers and config.input.id_column:
        need["input.id_column"] = config.input.id_column
    for d in (config.input.drop if identifiers else []):
        if d not in frame.columns:
            raise InputError(
                f"column {d!r} (named in input.drop) is not in the input; the input has "
                f"{list(frame.columns)[:20]}. Fix the column name in the config"
            )
    for d in (config.derived if identifiers else []):
        if d not in frame.columns:
            raise InputError(
                f"column {d!r} (named in derived:) is not in the input; the input has "
                f"{list(frame.columns)[:20]}. Fix the column name in the config"
            )
    for i, a in enumerate(config.utility.analyses if identifiers else []):
        absent = [v for v in a.variables if v not in frame.columns]
        if absent:
            raise InputError(
                f"utility.analyses[{i}] ({a.formula!r}) uses column {absent[0]!r}, which is not "
                f"in the input (columns {list(frame.columns)[:20]}); fix the formula or the "
                "input header")
    missing = {w: c for w, c in need.items() if c not in frame.columns}
    if missing:
        w, c = next(iter(missing.items()))
        raise InputError(
            f"column {c!r} (named in {w}) is not in the input, which has columns "
            f"{list(frame.columns)[:20]}; fix the name in the config or the input header"
        )
    dup = frame.columns[frame.columns.duplicated()].tolist()
    if dup:
        raise InputError(f"the input has duplicated column names {dup}; make them unique")


@dataclass(frozen=True)
class Partitioned:
    """Cells, partition sets and sensitive cells of a file: everything before randomness.

    ``cell_partition_set[j]`` is the partition set of cell j; ``partition_keys[s]`` its label
    (e.g. ``"sex=Male | age=18-24 | race=white"``); ``ps_codes[s]`` its generalized codes;
    ``sensitive[j]`` is ``t_j < 1/xi``.
    """

    cells: CellTable
    cell_partition_set: np.ndarray
    ps_codes: np.ndarray
    partition_keys: list[str]
    generalizations: list[Generalization]
    sensitive: np.ndarray
    xi: float
    theta: float
    kmin: int

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.cells.record_cell]


def partition_frame(frame: pd.DataFrame, config: ReleaseConfig) -> Partitioned:
    """Encode the keys of ``frame``, find its non-empty cells, partition sets and sensitive cells.

    Pure and deterministic; used by :func:`release_frame`, by the audit (on the original and on
    the released file) and by the reports.
    """
    check_columns(frame, config, identifiers=False)
    if len(frame) == 0:
        raise InputError("the input has no records; nothing to release")
    keys = config.key_names
    kvs = config.key_variables
    codes = [encode_key(frame[v], v, kvs[v]) for v in keys]
    return partition_cells(encode_cells(codes, [kvs[v].size for v in keys], keys), config)


def partition_cells(cells: CellTable, config: ReleaseConfig) -> Partitioned:
    """Partition sets and sensitive cells of a cell table (counted in memory or merged from
    batches): every cell's partition set is the combination of its generalized partition
    variables' codes, numbered lexicographically; then :func:`split_missing`."""
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
        g_codes = [g.code_map[cells.key_codes[:, keys.index(v)]]
                   for v, g in zip(pvars, gens, strict=True)]
        ps = encode_cells(g_codes, [len(g.labels) for g in gens], pvars)
        cell_ps, ps_codes = ps.record_cell, ps.key_codes
    else:
        cell_ps = np.zeros(cells.n_cells, dtype=np.int64)
        ps_codes = np.zeros((1, 0), dtype=np.int64)
    labels = partition_labels(pvars, gens, ps_codes)
    cell_ps, ps_codes, labels = split_missing(cell_ps, ps_codes, labels, cells.key_codes, config)
    sensitive = cells.frequency * xi < 1.0
    return Partitioned(cells, cell_ps, ps_codes, labels, gens, sensitive, xi, theta, km)


def partition_labels(pvars: list[str], gens: list, ps_codes: np.ndarray) -> list[str]:
    """The label of every partition set, ``"v1=label | v2=label"`` (``"all records"`` without
    partition variables): one text per variable and generalized code, joined per set (a
    household file's person stage has ~10^5 partition sets)."""
    n_ps = ps_codes.shape[0]
    if not pvars:
        return ["all records"] * n_ps
    parts = [np.asarray([f"{v}={lab}" for lab in g.labels], dtype=object)[ps_codes[:, i]]
             for i, (v, g) in enumerate(zip(pvars, gens, strict=True))]
    return [" | ".join(row) for row in zip(*parts, strict=True)]


def split_missing(cell_ps: np.ndarray, ps_codes: np.ndarray, labels: list[str],
                  key_codes: np.ndarray, config: ReleaseConfig
                  ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Split the partition sets by the cells' missing-value pattern (docs/METHOD.md 7.9).

    For every key with ``missing: category`` and ``missing_moves: false``, the
    cells where it is missing form partition sets of their own (label suffix
    ``missing: <keys>``; one more ``ps_codes`` column holding the pattern, never merged
    along), so post-randomization never moves a record into or out of "missing": a blank in
    the public file is a real blank. Unchanged when no cell has such a missing value.
    """
    keys = config.key_names
    pat = np.zeros(key_codes.shape[0], dtype=np.int64)
    for i, v in enumerate(keys):
        kv = config.key_variables[v]
        if kv.missing == "category" and not kv.missing_moves:
            pat |= (key_codes[:, i] == kv.size - 1).astype(np.int64) << i
    if not pat.any():
        return cell_ps, ps_codes, labels
    width = len(keys)
    uniq, new_ps = np.unique(cell_ps.astype(np.int64) * (1 << width) + pat, return_inverse=True)
    old, bits = uniq >> width, uniq & ((1 << width) - 1)
    codes = np.column_stack([ps_codes[old], bits]).astype(np.int64)
    out = []
    for o, b in zip(old.tolist(), bits.tolist(), strict=True):
        if not b:
            out.append(labels[o])
            continue
        miss = "missing: " + ", ".join(v for i, v in enumerate(keys) if b >> i & 1)
        out.append(miss if labels[o] == "all records" else f"{labels[o]} | {miss}")
    return new_ps.astype(np.int64).reshape(-1), codes, out
