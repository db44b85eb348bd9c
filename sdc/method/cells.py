"""Key-variable encoding, cells and cell frequencies (docs/METHOD.md sections 1 and 3).

Every key variable is encoded to integer codes 0..size-1 in its declared domain order (the
``missing`` category, when declared, is the last code). A record's cell is the tuple of its key
codes, combined into one integer by mixed radix. The full cross-product is never allocated:
only the non-empty cells exist, found by hashing the combined codes (``pandas.factorize``), and
when the cross-product would not fit in 63 bits the running code is compacted to the codes of
the combinations actually present before the next variable is added.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sdc.config.model import KeyVariable, ReleaseConfig
from sdc.errors import InputError

__all__ = ["CellTable", "cell_codes", "cell_key_codes", "code_counts", "combine_codes",
           "encode_cells", "encode_key", "fits_one_code", "narrow_codes", "radix_sizes",
           "split_codes"]

#: mixed-radix cell codes are int64; a key space of this many cells or more does not fit
_MAX_CODE = 2**62


def _rows_sample(mask: np.ndarray, limit: int = 5) -> str:
    rows = np.flatnonzero(mask)[:limit] + 1
    return ", ".join(str(r) for r in rows)


def encode_key(values: pd.Series, name: str, kv: KeyVariable) -> np.ndarray:
    """Codes 0..size-1 of one key column, in declared domain order.

    Raises :class:`~sdc.errors.InputError` naming the column, the bad values, how many rows
    and the first data rows (1-based) when a value is outside the declared domain, or empty
    under ``missing: error``.
    """
    is_int = values.dtype.kind in "iu"
    nullable = isinstance(values.dtype, pd.api.extensions.ExtensionDtype)
    if is_int and not nullable and kv.range is not None and len(values):
        # the common case of a batch engine's pass: plain integers, all inside the range
        # (two reductions instead of the masks below, which then name the bad rows)
        lo, hi = kv.range
        raw = values.to_numpy()
        if int(raw.min()) >= lo and int(raw.max()) <= hi:
            return np.subtract(raw, lo, dtype=np.int64)
    # plain numpy integer columns cannot hold missing values; nullable ones (Int64) can
    isna = (np.zeros(len(values), dtype=bool) if is_int and not nullable
            else values.isna().to_numpy())
    n_missing = int(isna.sum())
    if n_missing and kv.missing == "error":
        raise InputError(
            f"column {name!r}: {n_missing} row(s) have no value (rows {_rows_sample(isna)}); "
            f"fill them in, or declare 'missing: category' for {name} in key_variables"
        )
    int_categories = kv.categories is not None and all(
        isinstance(c, int) and not isinstance(c, bool) for c in kv.categories)
    if is_int and kv.range is not None:
        lo, hi = kv.range
        codes = values.to_numpy(dtype=np.int64, na_value=lo) - lo
        bad = ~isna & ((codes < 0) | (codes > hi - lo))
    elif is_int and int_categories and max(kv.categories) - min(kv.categories) <= 10_000_000:
        # lookup table over [min, max] of the declared integer categories
        cmin = min(kv.categories)
        lut = np.full(max(kv.categories) - cmin + 1, -1, dtype=np.int64)
        lut[np.asarray(kv.categories, dtype=np.int64) - cmin] = np.arange(len(kv.categories))
        off = values.to_numpy(dtype=np.int64, na_value=cmin) - cmin
        inside = (off >= 0) & (off < lut.size)
        codes = np.where(inside, lut[np.where(inside, off, 0)], -1)
        bad = ~isna & (codes < 0)
    elif kv.range is not None:
        lo, hi = kv.range
        num = pd.to_numeric(values, errors="coerce")
        arr = num.to_numpy(dtype=float, na_value=np.nan)
        bad = ~isna & (np.isnan(arr) | (arr != np.floor(arr)) | (arr < lo) | (arr > hi))
        codes = np.where(isna | bad, 0, arr - lo).astype(np.int64)
    else:
        index = pd.Index(kv.categories)
        codes = index.get_indexer(values.where(~values.isna(), None)
                                  if values.dtype == object else values)
        codes = np.asarray(codes, dtype=np.int64)
        bad = ~isna & (codes < 0)
    if bad.any():
        bad_vals = pd.unique(values[bad])[:5]
        domain = (f"integers {kv.range[0]}..{kv.range[1]}" if kv.range is not None
                  else f"{list(kv.categories)[:12]}{' ...' if len(kv.categories) > 12 else ''}")
        raise InputError(
            f"column {name!r}: {int(bad.sum())} row(s) hold values outside the declared domain "
            f"{domain}, e.g. {[_py(v) for v in bad_vals]} (rows {_rows_sample(bad)}); fix the "
            f"data or add the values to key_variables.{name}"
        )
    if n_missing:
        codes[isna] = kv.size - 1
    return codes


def _py(v: object) -> object:
    return v.item() if isinstance(v, np.generic) else v


@dataclass(frozen=True)
class CellTable:
    """The non-empty cells of a file.

    Attributes
    ----------
    record_cell : (n,) int64
        Cell index of every record; cells are numbered in lexicographic order of their key codes.
    key_codes : (C, p) int64
        Key codes of every non-empty cell (column order = ``names``).
    frequency : (C,) int64
        t_j, the number of records in cell j.
    names : list of str
        Key variable names.
    """

    record_cell: np.ndarray
    key_codes: np.ndarray
    frequency: np.ndarray
    names: list[str]
    #: value of every ``derived:`` column per cell (:mod:`sdc.method.derived`), when known
    derived: dict | None = None

    @property
    def n_cells(self) -> int:
        return int(self.frequency.size)


def radix_sizes(config: ReleaseConfig) -> list[int]:
    """The domain sizes of ``config``'s key variables, the radices of the mixed-radix cell code
    that numbers a cell the same in every batch (:func:`cell_codes`).

    Raises :class:`~sdc.errors.InputError` when the key space has 2**62 cells or more: one
    int64 code cannot number it, and every executor's pipeline needs that code.
    """
    sizes = [config.key_variables[v].size for v in config.key_names]
    total = 1
    for s in sizes:
        total *= s
    if total >= _MAX_CODE:
        raise InputError(
            f"the key variables {config.key_names} have {total:.3g} possible cells; a release "
            "numbers cells by one 62-bit code and needs fewer than 2**62. Generalize (bands, "
            "groups, recode) or drop a key variable"
        )
    return sizes


def split_codes(codes: np.ndarray, sizes: list[int], *, per_key: bool = False) -> np.ndarray:
    """(n, p) int64 per-variable codes of mixed-radix codes (the inverse of combining them:
    ``c = ((k_1 * s_2 + k_2) * s_3 + k_3) ...``); ``per_key``: each key's column contiguous
    (for per-key work on many records), else each cell's row."""
    n = np.size(codes)
    out = (np.empty((len(sizes), n), dtype=np.int64).T if per_key
           else np.empty((n, len(sizes)), dtype=np.int64))
    rest = np.asarray(codes, dtype=np.int64)
    for j in range(len(sizes) - 1, -1, -1):
        rest, out[:, j] = np.divmod(rest, sizes[j])
    return out


def fits_one_code(sizes: Sequence[int]) -> bool:
    """Whether a key space with these radices has fewer than 2**62 cells: one int64
    mixed-radix code (:func:`combine_codes`) numbers it."""
    return math.prod(sizes) < _MAX_CODE


def combine_codes(columns: Iterable[np.ndarray], sizes: Sequence[int], n: int) -> np.ndarray:
    """(n,) int64 mixed-radix code ``c = ((k_1 * s_2 + k_2) * s_3 + k_3) ...`` of the
    per-variable codes ``columns`` (one (n,) array per variable, radices ``sizes``; the caller
    makes sure they :func:`fit <fits_one_code>`). Sorting the codes sorts the rows
    lexicographically; :func:`split_codes` is the inverse."""
    code = np.zeros(n, dtype=np.int64)
    for c, s in zip(columns, sizes, strict=True):
        code *= s
        code += c
    return code


def cell_codes(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray:
    """(n,) int64 mixed-radix cell code of every record of ``frame`` (any batch).

    Sorting the codes sorts the cells lexicographically by key codes, the cell numbering of
    :func:`encode_cells`, so a cell table merged from batches equals the whole file's.
    Raises :class:`~sdc.errors.InputError` (from :func:`encode_key`) for a key value outside
    its domain; rows in the message are 1-based within ``frame``.
    """
    kvs = config.key_variables
    return combine_codes((encode_key(frame[v], v, kvs[v]) for v in config.key_names),
                         radix_sizes(config), len(frame))


def cell_key_codes(frame: pd.DataFrame, config: ReleaseConfig) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cell_codes` of ``frame`` and the (n, p) key codes they combine (each key's
    column contiguous, as ``split_codes(codes, sizes, per_key=True)`` gives them): one
    encoding per key instead of a split of the combined codes afterwards."""
    kvs, sizes = config.key_variables, radix_sizes(config)
    keys = np.empty((len(sizes), len(frame)), dtype=narrow_codes(sizes)).T
    for j, v in enumerate(config.key_names):
        keys[:, j] = encode_key(frame[v], v, kvs[v])
    return combine_codes((keys[:, j] for j in range(len(sizes))), sizes, len(frame)), keys


def narrow_codes(sizes: Sequence[int]) -> np.dtype:
    """The narrowest integer dtype that holds every code below ``sizes``' largest radix
    (uint8, int16, int32 or int64): the dependence check's per-key ``ufunc.at`` tables of
    narrow codes are smaller and faster (same minima and maxima)."""
    top = max(sizes, default=1)
    for dt in (np.uint8, np.int16, np.int32):
        if top - 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


#: key spaces up to this many cells are counted by one bincount (at most 128 MB of counts)
_DENSE_COUNT = 1 << 24


def code_counts(codes: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct codes, counts) of mixed-radix cell codes with radices ``sizes``:
    ``np.unique(codes, return_counts=True)``, by one ``np.bincount`` over the key space when
    it has at most max(n, 2**16) (and 2**24) cells (O(n), 20x faster than the sort at 5M)."""
    codes = np.asarray(codes, dtype=np.int64)
    total = math.prod(sizes)
    if total <= min(max(codes.size, 1 << 16), _DENSE_COUNT):
        counts = np.bincount(codes, minlength=total)
        u = np.flatnonzero(counts).astype(np.int64, copy=False)
        return u, counts[u].astype(np.int64, copy=False)
    u, c = np.unique(codes, return_counts=True)
    return u, c.astype(np.int64)


def encode_cells(codes: list[np.ndarray], sizes: list[int], names: list[str]) -> CellTable:
    """Combine per-variable codes into cells without allocating the cross-product (when it
    would not fit in :func:`cell_codes`' int64 code, the running code is compacted to the
    combinations present before the next variable is added)."""
    n = codes[0].size if codes else 0
    combined = np.zeros(n, dtype=np.int64)
    radix = 1
    compacted = False
    for i, (c, s) in enumerate(zip(codes, sizes, strict=True)):
        if i == 0:
            combined = c.astype(np.int64, copy=True)
            radix = s
            continue
        if radix * s >= _MAX_CODE:
            combined, _ = pd.factorize(combined, sort=True)
            combined = combined.astype(np.int64, copy=False)
            radix = int(combined.max()) + 1 if n else 1
            compacted = True
        combined *= s
        combined += c
        radix *= s
    record_cell, uniques = pd.factorize(combined, sort=True)
    record_cell = record_cell.astype(np.int64, copy=False)
    n_cells = uniques.size
    frequency = np.bincount(record_cell, minlength=n_cells).astype(np.int64)
    if not compacted:
        key_codes = split_codes(uniques, sizes)
    else:  # first record of each cell carries its key codes
        _, first = np.unique(record_cell, return_index=True)
        key_codes = np.column_stack([c[first] for c in codes]).astype(np.int64)
    return CellTable(record_cell, key_codes, frequency, list(names))
