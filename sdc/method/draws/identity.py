"""Record and cell identities: the stable 64-bit identity a record's draws are keyed by
(:func:`record_identity`, made distinct by :func:`unique_identities`), the identity of a cell
(:func:`cell_identity`), and the identities of a batch's drawing records
(:func:`drawing_identities`, :func:`all_identities`) every engine draws with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.draws.hashing import (
    MISSING_HASH,
    fmix_inplace,
    hash_ints,
    hash_strings,
    name_hash,
    value_hash,
)

__all__ = ["all_identities", "cell_identity", "draw_tiebreak", "drawing_identities",
           "identity_columns", "record_identity", "unique_identities"]

_U64 = np.uint64
_TAG_DUP = _U64(0x165667B19E3779F9)


def identity_columns(frame: pd.DataFrame, config: Any) -> list[str]:
    """The columns a record's identity is made of: ``[id_column]``, else every column that is
    not a key variable, not dropped and not DP-perturbed (``perturb:``; its released values are
    random), in sorted name order."""
    idc = config.input.id_column
    if idc is not None:
        return [idc]
    skip = set(config.key_names) | set(config.input.drop) | set(config.perturb or {})
    return sorted(c for c in frame.columns if c not in skip)


def record_identity(frame: pd.DataFrame, config: Any) -> np.ndarray:
    """Stable 64-bit identity of every record of ``frame`` (a whole file or any batch).

    Parameters
    ----------
    frame : DataFrame
        Records (original values) with at least the columns of :func:`identity_columns`.
    config : ReleaseConfig
        Its ``input.id_column``, ``input.drop`` and key variables are used.

    Returns
    -------
    (n,) uint64. A per-record function: a record gets the same identity in any batch, in any
    row order and in next month's file as long as its id (or its non-key values) is the same.
    Without an id column and without any non-key column every record gets the same identity
    and :func:`unique_identities` separates them (they are then only stable as a multiset).
    """
    cols = identity_columns(frame, config)
    acc = np.zeros(len(frame), dtype=_U64)
    for c in cols:
        v = value_hash(frame[c]) ^ name_hash(c)
        fmix_inplace(v)
        acc ^= v
        fmix_inplace(acc)
    return acc


def unique_identities(identity: np.ndarray,
                      tiebreak: np.ndarray | Callable[[], np.ndarray]) -> np.ndarray:
    """Make shared identities distinct, independently of row order (a global step).

    Among the records sharing an identity, sorted by ``tiebreak`` (use the cell id of the
    record's true cell: records equal in identity and cell are interchangeable), the first keeps
    its identity and the r-th (r >= 1) gets ``fmix64(identity ^ fmix64(r ^ TAG))``.

    Parameters
    ----------
    identity, tiebreak : (n,) uint64
        ``tiebreak`` may be a function returning it: it is only needed (and called) when some
        identities are shared.

    Returns
    -------
    (n,) uint64 with distinct values (up to 64-bit collisions of the mix, probability ~n^2/2^65).
    """
    identity = np.asarray(identity, dtype=_U64)
    if identity.size < 2:
        return identity.copy()
    srt = np.sort(identity)  # one sort decides (a third of a hash table's cost at 5M)
    if not bool((srt[1:] == srt[:-1]).any()):
        return identity.copy()
    del srt
    if callable(tiebreak):
        tiebreak = tiebreak()
    dup = pd.Series(identity, copy=False).duplicated(keep=False).to_numpy()
    out = identity.copy()
    rows = np.flatnonzero(dup)
    order = rows[np.lexsort((np.asarray(tiebreak, dtype=_U64)[rows], identity[rows]))]
    ids = identity[order]
    start = np.r_[True, ids[1:] != ids[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    rank = (np.arange(order.size) - first).astype(_U64)
    salt = rank ^ _TAG_DUP
    fmix_inplace(salt)
    new = ids ^ salt
    fmix_inplace(new)
    out[order] = np.where(rank > 0, new, ids)
    return out


def _domain_hashes(values: list) -> np.ndarray:
    """Hash of every value of a key variable's domain (loop over domain values, not records)."""
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        return hash_ints(np.asarray(values, dtype=np.int64))
    out = np.empty(len(values), dtype=_U64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = MISSING_HASH
        elif isinstance(v, int | np.integer) and not isinstance(v, bool):
            out[i] = hash_ints(np.asarray([v], dtype=np.int64))[0]
        else:
            out[i] = hash_strings(np.asarray([str(v)], dtype=object))[0]
    return out


def cell_identity(key_codes: np.ndarray, config: Any) -> np.ndarray:
    """Stable 64-bit identity of cells from their decoded key values (not their index).

    Parameters
    ----------
    key_codes : (C, p) int
        Key codes of the cells, columns in ``config.key_names`` order (``CellTable.key_codes``).
    config : ReleaseConfig

    Returns
    -------
    (C,) uint64: the same cell (same key values) has the same id in every release of a job.
    """
    key_codes = np.asarray(key_codes)
    names = list(config.key_names)
    kvs = config.key_variables
    acc = np.zeros(key_codes.shape[0], dtype=_U64)
    for j in sorted(range(len(names)), key=lambda i: names[i]):
        kv = kvs[names[j]]
        ints = kv.range_values()
        if ints is not None:  # a range: hashed as one array (the loop below, vectorized)
            lut = hash_ints(ints)
            if kv.missing == "category":
                lut = np.append(lut, MISSING_HASH)
        else:
            lut = _domain_hashes(kv.domain + ([None] if kv.missing == "category" else []))
        lut = lut ^ name_hash(names[j])
        v = lut[key_codes[:, j]]
        fmix_inplace(v)
        acc ^= v
        fmix_inplace(acc)
    return acc


def draw_tiebreak(cell_id: np.ndarray, in_prb: np.ndarray) -> np.ndarray:
    """The ``tiebreak`` for :func:`unique_identities`: the record's cell id, with the top bit
    cleared for records of a PRB and set for the others.

    Duplicates are then ranked PRB records first, so the identities of PRB records are the same
    whether :func:`unique_identities` runs over the PRB records only (the NZY draws) or over all
    records (DP-PRAM, the internal records file).
    """
    top = _U64(1 << 63)
    cid = np.asarray(cell_id, dtype=_U64) & ~top
    return np.where(np.asarray(in_prb, dtype=bool), cid, cid | top)


def drawing_identities(frame: pd.DataFrame, record_cell: np.ndarray, plan: Any,
                       config: Any) -> tuple[np.ndarray, np.ndarray]:
    """(identity, tiebreak) of the records of ``frame`` (a batch or the whole file) that draw,
    the records of PRBs, in row order: the arguments of :func:`unique_identities` for the NZY
    draws. ``plan``: anything with per-cell ``cell_prb`` and ``cell_id`` (a :class:`DrawPlan`).

    The tiebreak is :func:`draw_tiebreak`'s for PRB records, so shared identities become the
    same distinct identities in every engine (docs/METHOD.md section 7.3)."""
    record_cell = np.asarray(record_cell, dtype=np.int64)
    drawing = np.flatnonzero(plan.cell_prb[record_cell] >= 0)
    if not drawing.size:
        return np.zeros(0, _U64), np.zeros(0, _U64)
    if drawing.size < len(frame) // 2:  # hash only the drawing records (same values)
        ident = record_identity(frame.iloc[drawing], config)
    else:
        ident = record_identity(frame, config)[drawing]
    return (np.asarray(ident, _U64),
            draw_tiebreak(plan.cell_id[record_cell[drawing]], np.True_))


def all_identities(frame: pd.DataFrame, record_cell: np.ndarray, plan: Any,
                   config: Any) -> tuple[np.ndarray, np.ndarray]:
    """(identity, tiebreak) of every record of ``frame``: for the draws that every record
    makes (``perturb:``) and the internal records file; PRB records rank first among shared
    identities, so theirs come out as in :func:`drawing_identities`."""
    record_cell = np.asarray(record_cell, dtype=np.int64)
    return (np.asarray(record_identity(frame, config), _U64),
            draw_tiebreak(plan.cell_id[record_cell], plan.cell_prb[record_cell] >= 0))
