"""Randomness of a release: record-keyed draws, plus named streams for non-record work.

Public functions (the contract other engines build on; ``released_cells`` is in
:mod:`sdc.engine.apply`)::

    record_identity(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray   # (n,) uint64
    unique_identities(identity: np.ndarray, tiebreak: np.ndarray) -> np.ndarray # (n,) uint64
    cell_identity(key_codes: np.ndarray, config: ReleaseConfig) -> np.ndarray   # (C,) uint64
    keyed_hash(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray       # uint64
    keyed_uniform(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray    # [0, 1)
    rendezvous(seed, purpose, identity, own, candidate_id) -> np.ndarray        # local index
    draw_tiebreak(cell_id: np.ndarray, in_prb: np.ndarray) -> np.ndarray      # (n,) uint64
    DrawPlan(cell_prb, cell_frequency, cell_id, prb_theta)
    stream(seed: int, key: str) -> np.random.Generator   # named streams (public row order,
                                                         # intruder simulation), not records

Why. The release job is rerun every month on a file that changes a little. If a record's draws
depended on its position among the other records, one added record would redraw the whole PRB,
and an intruder linking a respondent across months by the (unchanged, public) non-key values
would see its released cell jump around: the modal released cell over the series gives the true
one away. Here a record's uniforms depend only on the seed and the record's own *identity*, so
a record whose t_j, theta and PRB did not change is released identically month after month.

Identity (:func:`record_identity`). With ``input.id_column`` it is a hash of the id. Otherwise
it is a hash of the record's values in every non-key, non-dropped column except the
DP-perturbed ones (what an intruder links on), columns taken in sorted name order so column
order does not matter. Records that
share an identity are made distinct by :func:`unique_identities` (a global step), so draws
stay independent across records, which the exact risk of METHOD.md section 6 assumes.

The keyed function. ``keyed_hash(seed, purpose, a, b)`` is SipHash-2-4 (Aumasson & Bernstein,
2012), a keyed pseudo-random function, of the 16-byte message ``a || b`` (little-endian uint64
words), under the 128-bit key made of the first 16 bytes of
``SHA-256("sdc-draws-v1|<purpose>|<seed in decimal>")``. It is implemented here on uint64 numpy
arrays (so no Python loop over records, and the output is byte-identical on every platform and
every numpy/pandas version: only wrapping 64-bit additions, xors, shifts and rotations), and a
test checks it against the reference test vector of the SipHash paper. Uniforms are
``(h >> 11) * 2**-53``, exact multiples of 2^-53 in [0, 1).

Value hashing (unkeyed; the key enters afterwards). Integers (and integral floats, booleans,
dates as int64) are mixed with the SplitMix64 finalizer ``fmix64`` implemented here; other
floats by their IEEE bits (-0.0 as 0, NaN as missing); strings by SipHash-2-4 of their UTF-8
bytes under a fixed public key via ``pandas.util.hash_array`` (C code; a test recomputes it
with the reference SipHash so a change in pandas would fail the tests instead of silently
changing identities); a missing value by a fixed constant.

The NZY step (:func:`sdc.engine.apply.released_cells`). For a record in cell c_j (frequency t_j) of a PRB with
theta and k cells:

- move iff ``u1 < theta / t_j`` with ``u1 = keyed_uniform(seed, "move", identity)``
  (monotone coupling: when t_j or theta changes, the decision changes only for records whose u1
  lies between the old and the new threshold);
- a moving record goes to the argmax over the *other* k - 1 cells l of the PRB of the weight
  ``w_l = fmix64(keyed_hash(seed, "dest", identity) ^ keyed_hash(seed, "cell", cell_id_l))``
  (rendezvous / highest-random-weight hashing). For a fixed record the k - 1 weights are
  distinct pseudo-random 64-bit numbers (fmix64 is a bijection and the cell hashes are
  distinct), so the argmax is uniform over the other cells: exactly eq. 5.3. When a cell joins
  the PRB the destination changes only if the new cell beats the old winner (probability
  1/k); when a cell leaves, only the records that went there are redirected.

So P(move) = theta / t_j and P(dest = l | move) = 1 / (k - 1): the law of every record is the
NZY law (eq. 5.3), distinct identities give independent records, and unbiasedness and the
exact certificate are unchanged. ``cell_id`` is :func:`cell_identity`, a hash of the cell's
decoded key values: the same cell has the same weight whatever other cells exist.

Memory of the rendezvous step: the (moving records x (k - 1)) weight matrix is built in chunks
of at most ``_CHUNK`` entries (cache-sized: measured 3x faster than large blocks).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["DrawPlan", "cell_identity", "draw_key", "draw_tiebreak", "fmix64", "identity_columns",
           "key_words", "keyed_hash", "keyed_uniform", "record_identity", "rendezvous",
           "siphash24", "stream", "unique_identities", "value_hash"]

_U64 = np.uint64
_MASK = (1 << 64) - 1
_NA = _U64(0x9E3779B97F4A7C15)           # hash of a missing value
_TAG_STR = _U64(0x5BD1E9955BD1E995)      # strings vs integers with equal hashes stay apart
_TAG_FLOAT = _U64(0xC2B2AE3D27D4EB4F)
_TAG_DUP = _U64(0x165667B19E3779F9)
# fixed public key of the unkeyed string hash (pandas.util.hash_array wants 16 ASCII chars)
_STR_KEY = "sdc-identity-v1!"
_CHUNK = 1 << 16          # weight-matrix block: 512 KiB, stays in cache


# -- 64-bit mixing -----------------------------------------------------------------------------
def fmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Stafford's mix13): a bijection of uint64 with full avalanche.

    ``x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27; x *= 0x94d049bb133111eb;
    x ^= x >> 31`` (mod 2^64). Returns a new array.
    """
    x = np.array(x, dtype=_U64, copy=True)
    _fmix_inplace(x)
    return x


def _fmix_inplace(x: np.ndarray) -> None:
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


def _sipround(v0, v1, v2, v3):
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(k0: int, k1: int, a: np.ndarray, b: np.ndarray | int = 0) -> np.ndarray:
    """SipHash-2-4 of the 16-byte messages ``a[i] || b[i]`` (little-endian uint64 words).

    Parameters
    ----------
    k0, k1 : int
        The 128-bit key as two little-endian 64-bit words.
    a, b : uint64 arrays (broadcast together) or ints.

    Returns
    -------
    uint64 array: the standard SipHash-2-4 value of each message.
    """
    a = np.asarray(a, dtype=_U64)
    b = np.broadcast_to(np.asarray(b, dtype=_U64), a.shape) if np.ndim(b) == 0 else np.asarray(b, dtype=_U64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    with np.errstate(over="ignore"):
        v0 = np.full(shape, (k0 ^ 0x736F6D6570736575) & _MASK, dtype=_U64)
        v1 = np.full(shape, (k1 ^ 0x646F72616E646F6D) & _MASK, dtype=_U64)
        v2 = np.full(shape, (k0 ^ 0x6C7967656E657261) & _MASK, dtype=_U64)
        v3 = np.full(shape, (k1 ^ 0x7465646279746573) & _MASK, dtype=_U64)
        for m in (a, b):
            v3 ^= m
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
            v0 ^= m
        last = _U64(16 << 56)
        v3 ^= last
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= last
        v2 ^= _U64(0xFF)
        for _ in range(4):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        return v0 ^ v1 ^ v2 ^ v3


def draw_key(seed: int, purpose: str) -> tuple[int, int]:
    """The 128-bit SipHash key of ``purpose`` under release seed ``seed`` (two 64-bit words)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {type(seed).__name__}")
    d = hashlib.sha256(f"sdc-draws-v1|{purpose}|{int(seed)}".encode()).digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:16], "little")


def keyed_hash(seed: int, purpose: str, a: np.ndarray, b: np.ndarray | int = 0) -> np.ndarray:
    """SipHash-2-4 of ``a || b`` under the key of (``seed``, ``purpose``); uint64."""
    k0, k1 = draw_key(seed, purpose)
    return siphash24(k0, k1, a, b)


def keyed_uniform(seed: int, purpose: str, a: np.ndarray, b: np.ndarray | int = 0) -> np.ndarray:
    """Uniforms in [0, 1): ``(keyed_hash(seed, purpose, a, b) >> 11) * 2**-53``."""
    h = keyed_hash(seed, purpose, a, b)
    return (h >> _U64(11)).astype(np.float64) * (2.0 ** -53)


# -- identities --------------------------------------------------------------------------------
def _name_hash(name: str) -> np.uint64:
    return _U64(int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(),
                               "little"))


def _hash_ints(x: np.ndarray) -> np.ndarray:
    out = np.asarray(x, dtype=np.int64).view(_U64).copy()
    _fmix_inplace(out)
    return out


def _hash_strings(values: np.ndarray) -> np.ndarray:
    """SipHash-2-4 (fixed public key) of the UTF-8 bytes of each string, then fmix64."""
    codes, uniques = pd.factorize(values)
    u = pd.util.hash_array(np.asarray(uniques, dtype=object), hash_key=_STR_KEY,
                           categorize=False) ^ _TAG_STR
    return np.where(codes >= 0, u[np.maximum(codes, 0)], _NA)


def value_hash(values: pd.Series | np.ndarray) -> np.ndarray:
    """Unkeyed, byte-stable 64-bit hash of every value of a column (see the module docstring).

    Equal values hash equal whatever the column's dtype: 3, 3.0 and True-as-1 agree, so a
    column read as float one month (because of a missing value) and as int the next keeps its
    hashes. Strings hash by their UTF-8 bytes; missing values to one constant.
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        cat_h = value_hash(pd.Series(np.asarray(dtype.categories, dtype=object)))
        codes = s.cat.codes.to_numpy()
        return np.where(codes >= 0, cat_h[np.maximum(codes, 0)], _NA)
    isna = s.isna().to_numpy()
    if dtype.kind == "b" or (dtype.kind in "iu"):
        if dtype.kind == "u" and dtype.itemsize == 8:
            arr = s.to_numpy(dtype=_U64, na_value=0).view(np.int64)
        else:
            arr = s.to_numpy(dtype=np.int64, na_value=0)
        out = _hash_ints(arr)
    elif dtype.kind == "f":
        arr = s.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(arr) & (arr == np.floor(arr)) & (np.abs(arr) < 2.0 ** 63)
        out = _hash_ints(np.where(integral, arr, 0).astype(np.int64))
        if not integral.all():
            bits = arr.view(_U64).copy() ^ _TAG_FLOAT
            _fmix_inplace(bits)
            out = np.where(integral, out, bits)
    elif dtype.kind in "mM":
        out = _hash_ints(s.to_numpy().view(np.int64))
    else:
        arr = s.to_numpy(dtype=object, na_value=None)
        if isna.any():
            arr = arr.copy()
            arr[isna] = ""
        # strings as they are; anything else (mixed objects) by its str()
        try:
            out = _hash_strings(arr)
        except TypeError:
            out = _hash_strings(np.asarray([str(v) for v in pd.unique(arr)], dtype=object)[
                pd.factorize(arr)[0]])
    if isna.any():
        out = np.where(isna, _NA, out)
    return np.asarray(out, dtype=_U64)


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
        v = value_hash(frame[c]) ^ _name_hash(c)
        _fmix_inplace(v)
        acc ^= v
        _fmix_inplace(acc)
    return acc


def unique_identities(identity: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Make shared identities distinct, independently of row order (a global step).

    Among the records sharing an identity, sorted by ``tiebreak`` (use the cell id of the
    record's true cell: records equal in identity and cell are interchangeable), the first keeps
    its identity and the r-th (r >= 1) gets ``fmix64(identity ^ fmix64(r ^ TAG))``.

    Parameters
    ----------
    identity, tiebreak : (n,) uint64

    Returns
    -------
    (n,) uint64 with distinct values (up to 64-bit collisions of the mix, probability ~n^2/2^65).
    """
    identity = np.asarray(identity, dtype=_U64)
    dup = pd.Series(identity).duplicated(keep=False).to_numpy()
    if not dup.any():
        return identity.copy()
    out = identity.copy()
    rows = np.flatnonzero(dup)
    order = rows[np.lexsort((np.asarray(tiebreak, dtype=_U64)[rows], identity[rows]))]
    ids = identity[order]
    start = np.r_[True, ids[1:] != ids[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    rank = (np.arange(order.size) - first).astype(_U64)
    salt = rank ^ _TAG_DUP
    _fmix_inplace(salt)
    new = ids ^ salt
    _fmix_inplace(new)
    out[order] = np.where(rank > 0, new, ids)
    return out


def _domain_hashes(values: list) -> np.ndarray:
    """Hash of every value of a key variable's domain (loop over domain values, not records)."""
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        return _hash_ints(np.asarray(values, dtype=np.int64))
    out = np.empty(len(values), dtype=_U64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = _NA
        elif isinstance(v, int | np.integer) and not isinstance(v, bool):
            out[i] = _hash_ints(np.asarray([v], dtype=np.int64))[0]
        else:
            out[i] = _hash_strings(np.asarray([str(v)], dtype=object))[0]
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
        dom = list(kv.domain) + ([None] if kv.missing == "category" else [])
        lut = _domain_hashes(dom) ^ _name_hash(names[j])
        v = lut[key_codes[:, j]]
        _fmix_inplace(v)
        acc ^= v
        _fmix_inplace(acc)
    return acc


# -- the NZY step ------------------------------------------------------------------------------
def rendezvous(seed: int, purpose: str, identity: np.ndarray, own: np.ndarray,
               candidate_id: np.ndarray) -> np.ndarray:
    """Highest-random-weight choice among ``candidate_id`` excluding each record's ``own``.

    Parameters
    ----------
    seed : int
    purpose : str
        Names the randomization (``"dest"`` for NZY, ``"dp-pram:<var>"`` for DP-PRAM).
    identity : (m,) uint64
    own : (m,) int
        Index into ``candidate_id`` of the record's own cell/category (excluded), or -1.
    candidate_id : (k,) uint64
        Stable ids of the candidates (distinct).

    Returns
    -------
    (m,) int64 index into ``candidate_id``: argmax over l != own of
    ``fmix64(H_r ^ H_l)``, ``H_r = keyed_hash(seed, purpose, identity)``,
    ``H_l = keyed_hash(seed, purpose + ":cell", candidate_id_l)``. Uniform over the other
    candidates; unchanged when a candidate that does not win joins or leaves.
    """
    identity = np.asarray(identity, dtype=_U64)
    own = np.asarray(own, dtype=np.int64)
    m, k = identity.size, np.asarray(candidate_id).size
    out = np.empty(m, dtype=np.int64)
    if m == 0:
        return out
    if k < 2:
        raise ValueError("rendezvous needs at least 2 candidates")
    hr = keyed_hash(seed, purpose, identity)
    hc = keyed_hash(seed, purpose + ":cell", np.asarray(candidate_id, dtype=_U64))
    step = max(1, _CHUNK // k)
    buf = np.empty(min(m, step) * k, dtype=_U64)
    tmp = np.empty_like(buf)
    for s in range(0, m, step):
        e = min(m, s + step)
        w = buf[:(e - s) * k].reshape(e - s, k)
        t = tmp[:(e - s) * k].reshape(e - s, k)
        # fmix64(H_r ^ H_l) in place, on a cache-sized block
        np.copyto(w, hc[None, :])        # (faster than a broadcasting xor into w)
        w ^= hr[s:e, None]
        np.right_shift(w, _U64(30), out=t)
        w ^= t
        w *= _U64(0xBF58476D1CE4E5B9)
        np.right_shift(w, _U64(27), out=t)
        w ^= t
        w *= _U64(0x94D049BB133111EB)
        np.right_shift(w, _U64(31), out=t)
        w ^= t
        rows = np.arange(e - s)
        o = own[s:e]
        has = o >= 0
        w[rows[has], o[has]] = 0
        best = np.argmax(w, axis=1)
        # a weight of exactly 0 ties with the excluded own cell (probability 2^-64): take the
        # first other candidate, deterministically
        bad = has & (best == o)
        if bad.any():
            best[bad] = np.where(o[bad] == 0, 1, 0)
        out[s:e] = best
    return out


@dataclass(frozen=True)
class DrawPlan:
    """The global plan the per-record NZY step needs, as plain arrays.

    Attributes
    ----------
    cell_prb : (C,) int64
        PRB of each cell, -1 for non-sensitive cells.
    cell_frequency : (C,) int64
        t_j.
    cell_id : (C,) uint64
        :func:`cell_identity` of each cell.
    prb_theta : (B,) float64
        theta of each PRB.
    """

    cell_prb: np.ndarray
    cell_frequency: np.ndarray
    cell_id: np.ndarray
    prb_theta: np.ndarray

    def prb_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(cells of all PRBs sorted by (PRB, cell index), start offsets per PRB (B + 1))."""
        sens = np.flatnonzero(self.cell_prb >= 0)
        sens = sens[np.argsort(self.cell_prb[sens], kind="stable")]
        bounds = np.searchsorted(self.cell_prb[sens], np.arange(self.prb_theta.size + 1))
        return sens, bounds


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


# -- named streams (work that is not per record) ------------------------------------------------
def key_words(key: str) -> tuple[int, ...]:
    """Stable 4 x 32-bit words of SHA-256(key)."""
    d = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return tuple(int.from_bytes(d[i : i + 4], "little") for i in range(0, 16, 4))


def stream(seed: int, key: str) -> np.random.Generator:
    """The random stream for ``key`` under release seed ``seed`` (a non-negative integer).

    ``Generator(PCG64(SeedSequence(seed, spawn_key=H(key))))``, H = the first 128 bits of
    SHA-256 of the key. Used for work that is not a record's outcome (the public row order, the
    intruder simulation of the report); a record's outcome never uses a stream.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    ss = np.random.SeedSequence(int(seed), spawn_key=key_words(key))
    return np.random.Generator(np.random.PCG64(ss))
