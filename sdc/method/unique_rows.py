"""The distinct rows of an integer table, as ``np.unique(a, axis=0, return_inverse=True)``
gives them, fast.

NumPy's row-wise unique views each row as one structured item and sorts those (a comparison
per field per step): eusilc's ``sdc init`` spent ~40% of its CPU there (the member bands'
class shift, the composition tables, the missingness patterns). Rows of non-negative-shiftable
integers whose value ranges multiply to less than 2^62 are ranked by one int64 key each (the
mixed-radix number of the row, first column most significant: the same lexicographic order),
wider ones by one ``np.lexsort`` of the columns; other dtypes go to NumPy. Same rows, same
order, same inverse.
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique_rows"]

_LIMIT = 1 << 62


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows of the 2-D integer array ``a`` in lexicographic order, the index of each
    row of ``a`` among them): ``np.unique(a, axis=0, return_inverse=True)`` with the inverse
    flat."""
    a = np.asarray(a)
    if (a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0
            or not (a.dtype.kind == "i" or (a.dtype.kind == "u" and a.dtype.itemsize < 8))):
        rows, inv = np.unique(a, axis=0, return_inverse=True)
        return rows, inv.reshape(-1)
    lo = a.min(axis=0).astype(object)
    span = (a.max(axis=0).astype(object) - lo) + 1
    total = 1
    for s in span:
        total *= int(s)
    if total >= _LIMIT:  # wide rows: one stable sort by every column, last to first
        order = np.lexsort(a.T[::-1])
        s = a[order]
        new = np.empty(s.shape[0], dtype=bool)
        new[0] = True
        new[1:] = (s[1:] != s[:-1]).any(axis=1)
        inv = np.empty(s.shape[0], dtype=np.int64)
        inv[order] = np.cumsum(new) - 1
        return s[new], inv
    key = np.zeros(a.shape[0], dtype=np.int64)
    for j in range(a.shape[1]):
        key = key * np.int64(int(span[j])) + (a[:, j].astype(np.int64) - np.int64(int(lo[j])))
    keys, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return a[first], inv.reshape(-1)
