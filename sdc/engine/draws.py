"""Randomness of a release: record-keyed draws, plus named streams for non-record work.

Public functions (the contract other engines build on; ``released_cells`` is in
:mod:`sdc.engine.apply`)::

    record_identity(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray   # (n,) uint64
    unique_identities(identity: np.ndarray, tiebreak: np.ndarray) -> np.ndarray # (n,) uint64
    cell_identity(key_codes: np.ndarray, config: ReleaseConfig) -> np.ndarray   # (C,) uint64
    keyed_hash(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray       # uint64
    keyed_uniform(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray    # [0, 1)
    rendezvous(seed, purpose, identity, own, candidate_id) -> np.ndarray        # local index
    trie_order(seed, purpose, candidate_id, group, n_groups) -> (order, sorted_hash, bounds)
    trie_rendezvous(seed, purpose, identity, own, group, sorted_hash, bounds)  # position
    draw_tiebreak(cell_id: np.ndarray, in_prb: np.ndarray) -> np.ndarray      # (n,) uint64
    DrawPlan(cell_prb, cell_frequency, cell_id, prb_theta)      # .dest_trie(seed)
    stream(seed: int, key: str) -> np.random.Generator   # named streams (public row order,
                                                         # intruder simulation), not records

Why and how (design text in docs/METHOD.md section 7.3): a record's uniforms depend only on the
seed and the record's own *identity* (a hash of ``input.id_column``, or of its non-key,
non-dropped, non-perturbed values in sorted column order), so a record whose t_j, theta and PRB
did not change is released identically in every release of a series.

- ``keyed_hash`` is SipHash-2-4 of ``a || b`` (little-endian uint64 words) under the key
  ``SHA-256("sdc-draws-v1|<purpose>|<seed in decimal>")[:16]``, on uint64 numpy arrays
  (byte-identical on every platform; a test checks the paper's test vector); uniforms are
  ``(h >> 11) * 2**-53``.
- Value hashing (unkeyed): integers, integral floats, booleans and dates by ``fmix64``; other
  floats by their IEEE bits (-0.0 as 0, NaN as missing); strings by SipHash-2-4 under a fixed
  public key via ``pandas.util.hash_array`` (a test recomputes it with the reference SipHash).
- Move iff ``u1 < theta / t_j`` (monotone coupling); destination by trie rendezvous: the PRB's
  cells sorted by ``keyed_hash(seed, "dest:cell", cell_id)`` are the leaves of a 16-ary trie and
  the record runs an exponential race with rates n_c at every node, so P(l) = 1/(k - 1).
- The flat rendezvous (highest random weight, O(k) per record) is kept for DP-PRAM
  (``perturb:``), whose k is a declared category count; its weight matrix is built in chunks of
  at most ``_CHUNK`` entries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["DrawPlan", "all_identities", "cell_identity", "draw_key", "draw_tiebreak",
           "drawing_identities", "fmix64", "identity_columns", "key_words", "keyed_hash", "keyed_uniform", "record_identity", "rendezvous",
           "siphash24", "stream", "trie_order", "trie_rendezvous", "unique_identities",
           "value_hash"]

_U64 = np.uint64
_MASK = (1 << 64) - 1
_NA = _U64(0x9E3779B97F4A7C15)           # hash of a missing value
_TAG_STR = _U64(0x5BD1E9955BD1E995)      # strings vs integers with equal hashes stay apart
_TAG_FLOAT = _U64(0xC2B2AE3D27D4EB4F)
_TAG_DUP = _U64(0x165667B19E3779F9)
# fixed public key of the unkeyed string hash (pandas.util.hash_array wants 16 ASCII chars)
_STR_KEY = "sdc-identity-v1!"
_CHUNK = 1 << 16          # weight-matrix block: 512 KiB, stays in cache
_HASH_CHUNK = 1 << 14     # SipHash block (measured: 80 ns/value vs 330 ns at 10^6 values)


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
    size = int(np.prod(shape))
    if size > _HASH_CHUNK:
        # cache-sized blocks: 4x faster than whole-column temporaries at 10^6 values
        a = np.broadcast_to(a, shape).ravel()
        b = np.broadcast_to(b, shape).ravel()
        out = np.empty(size, dtype=_U64)
        for s in range(0, size, _HASH_CHUNK):
            out[s:s + _HASH_CHUNK] = siphash24(k0, k1, a[s:s + _HASH_CHUNK], b[s:s + _HASH_CHUNK])
        return out.reshape(shape)
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
        # DatetimeArray/TimedeltaArray integers (a tz-aware column's to_numpy() is objects)
        out = _hash_ints(np.asarray(s.array.asi8, dtype=np.int64))
    else:
        arr = s.to_numpy(dtype=object, na_value=None)
        if isna.any():
            arr = arr.copy()
            arr[isna] = ""
        # strings as they are; anything else (mixed objects) by its str()
        try:
            out = _hash_strings(arr)
        except TypeError:
            try:
                out = _hash_strings(np.asarray([str(v) for v in pd.unique(arr)], dtype=object)[
                    pd.factorize(arr)[0]])
            except TypeError:  # unhashable values (nested columns: dicts, lists): by str()
                out = _hash_strings(np.asarray(np.frompyfunc(str, 1, 1)(arr), dtype=object))
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
    dup = pd.Series(identity).duplicated(keep=False).to_numpy()
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


# -- the NZY destination: hierarchical (trie) rendezvous ---------------------------------------
_GOLDEN = _U64(0x9E3779B97F4A7C15)       # SplitMix64's Weyl increment
_TRIE_CHUNK = 4096                       # movers per block of the (movers x 16) race


def trie_order(seed: int, purpose: str, candidate_id: np.ndarray, group: np.ndarray,
               n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort candidates by (group, keyed hash, id): the leaves of the 16-ary trie of each group.

    Parameters
    ----------
    seed : int
    purpose : str
        ``"dest"`` for NZY; the cell hash is ``H_l = keyed_hash(seed, purpose + ":cell", id_l)``.
    candidate_id : (C,) uint64
        Stable ids of the candidates (cells).
    group : (C,) int
        Group (PRB) of each candidate, in ``0 .. n_groups - 1``.
    n_groups : int

    Returns
    -------
    order : (C,) int64
        Candidate indices sorted by (group, H_l, id_l).
    sorted_hash : (C,) uint64
        ``H_l`` in that order.
    bounds : (n_groups + 1,) int64
        Group g occupies ``order[bounds[g]:bounds[g + 1]]``.
    """
    candidate_id = np.asarray(candidate_id, dtype=_U64)
    group = np.asarray(group, dtype=np.int64)
    h = keyed_hash(seed, purpose + ":cell", candidate_id)
    order = np.lexsort((candidate_id, h, group))
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1)).astype(np.int64)
    return order.astype(np.int64), h[order], bounds


def _child_uniforms(h_node: np.ndarray) -> np.ndarray:
    """(m, 16) uniforms in the open interval (0, 1) from one keyed 64-bit value per row.

    Child c's value is the (c+1)-th output of SplitMix64 seeded with ``h_node``:
    ``fmix64(h_node + (c + 1) * 0x9E3779B97F4A7C15)``; the uniform is
    ``((v >> 11) + 1/2) * 2**-53``, never 0 or 1, so ``-log(U)`` is finite and positive.
    """
    with np.errstate(over="ignore"):
        v = h_node[:, None] + np.arange(1, 17, dtype=_U64)[None, :] * _GOLDEN
    _fmix_inplace(v)
    u = (v >> _U64(11)).astype(np.float64)
    u += 0.5
    u *= 2.0 ** -53
    return u


def trie_rendezvous(seed: int, purpose: str, identity: np.ndarray, own: np.ndarray,
                    group: np.ndarray, sorted_hash: np.ndarray,
                    bounds: np.ndarray) -> np.ndarray:
    """Hierarchical weighted rendezvous: uniform over the other candidates of the record's group.

    The candidates of a group, sorted by their keyed hash ``H_l`` (:func:`trie_order`), are the
    leaves of a 16-ary trie whose level-d digit is bits ``60 - 4d .. 63 - 4d`` of ``H_l``. A
    record starts at the root (the whole group) and at every node runs an exponential race
    between the node's children: child c has rate ``n_c`` = number of candidates under c other
    than the record's own, and time ``E_c = -log(U_c) / n_c`` with ``U_c`` the (c+1)-th output of
    SplitMix64 seeded with ``keyed_hash(seed, purpose + ":trie:" + str(d), identity, prefix)``
    (``prefix`` = the node's 4d-bit path, depth d in the key). The record descends into
    ``argmin_c E_c`` over the children with ``n_c > 0`` until its node holds exactly one
    candidate, which is the choice.

    Law. With independent uniforms, ``P(argmin = c) = n_c / N`` (N = sum of n_c: the
    exponential race), so the probability of reaching a leaf l is the telescoping product
    ``prod_d n_{d+1} / N_d = 1 / N_0 = 1 / (k - 1)`` (own candidate excluded, k candidates), or
    ``1 / k`` when ``own`` is -1: exactly uniform. A record's choice depends only on the seed,
    its identity and the set of candidate hashes of its group, never on other records.

    Stability. When a candidate joins or leaves, only the rates ``n_c`` on its own root-to-leaf
    path change by one. At a node with N candidates, the coupled race (same uniforms) changes
    its winner with probability ``(N - n_c) / (N (N + 1)) <= 1 / (N + 1)``, and a record passes
    that node with probability ``N / (k - 1)``: the expected share of records whose choice
    changes is about ``depth / k`` (depth ~ log16 k + 1), and a changed record moves into the
    joining candidate's subtree (join) or out of the leaving one's (leave).

    Cost: O(16 log16 k) per record, plus O(C) per level for the node labels of all candidates.
    When two candidates share all 64 bits of ``H_l`` (probability ~k^2 / 2^65), the last step
    picks the ``floor(U N)``-th of them (U keyed on depth 16): still uniform.

    Parameters
    ----------
    seed : int
    purpose : str
    identity : (m,) uint64
        Record identities (distinct).
    own : (m,) int
        Position in the sorted arrays of the record's own candidate (excluded), or -1.
    group : (m,) int
        Group of each record.
    sorted_hash, bounds
        From :func:`trie_order`.

    Returns
    -------
    (m,) int64 position in the sorted arrays (``order[position]`` is the candidate), -1 when the
    group has no candidate other than the record's own.
    """
    identity = np.asarray(identity, dtype=_U64)
    own = np.asarray(own, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    H = np.asarray(sorted_hash, dtype=_U64)
    bounds = np.asarray(bounds, dtype=np.int64)
    m = identity.size
    out = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return out
    lo, hi = bounds[group], bounds[group + 1]
    act = np.arange(m)
    gstart = np.zeros(H.size, dtype=bool)
    gstart[bounds[:-1][np.diff(bounds) > 0]] = True
    cs = np.arange(1, 16, dtype=np.int64)
    for d in range(17):
        own_in = (own[act] >= lo) & (own[act] < hi)
        n_cand = hi - lo - own_in
        done = n_cand <= 1
        if done.any():
            i = act[done]
            out[i] = np.where(n_cand[done] == 1,
                              lo[done] + (own_in[done] & (own[i] == lo[done])), -1)
            keep = ~done
            act, lo, hi, own_in, n_cand = act[keep], lo[keep], hi[keep], own_in[keep], n_cand[keep]
        if act.size == 0:
            break
        if d == 16:
            # two or more candidates share all 64 bits: floor(U N)-th of them, skipping own
            u = keyed_uniform(seed, f"{purpose}:trie:16", identity[act], H[lo])
            j = lo + np.minimum((u * n_cand).astype(np.int64), n_cand - 1)
            out[act] = j + (own_in & (own[act] <= j))
            break
        shift = _U64(60 - 4 * d)
        digit = ((H >> shift) & _U64(15)).astype(np.int64)
        if d == 0:
            start = gstart
        else:
            up = H >> _U64(64 - 4 * d)
            start = gstart.copy()
            start[0] = True
            start[1:] |= up[1:] != up[:-1]
        node = np.cumsum(start, dtype=np.int64) - 1
        label = node * 16 + digit          # nondecreasing: nodes in order, digits sorted within
        prefix = np.zeros(act.size, dtype=_U64) if d == 0 else H[lo] >> _U64(64 - 4 * d)
        h_node = keyed_hash(seed, f"{purpose}:trie:{d}", identity[act], prefix)
        # the 15 inner child boundaries of every distinct node holding a record (sorted
        # queries: one binary search per node and child, not per record)
        nid = node[lo]
        present = np.zeros(int(node[-1]) + 1, dtype=bool)
        present[nid] = True
        uniq = np.flatnonzero(present)
        inner = np.searchsorted(label, (uniq[:, None] * 16 + cs[None, :]).ravel())
        inner = inner.reshape(uniq.size, 15)
        slot = np.cumsum(present, dtype=np.int64) - 1
        new_lo, new_hi = lo.copy(), hi.copy()
        for s in range(0, act.size, _TRIE_CHUNK):
            e = min(act.size, s + _TRIE_CHUNK)
            r = np.arange(e - s)
            b = np.empty((e - s, 17), dtype=np.int64)
            b[:, 0], b[:, 16] = lo[s:e], hi[s:e]
            b[:, 1:16] = inner[slot[nid[s:e]]]
            n = np.diff(b, axis=1)
            oi = own_in[s:e]
            n[r[oi], digit[own[act[s:e][oi]]]] -= 1
            u = _child_uniforms(h_node[s:e])
            np.log(u, out=u)
            with np.errstate(divide="ignore"):
                u /= n                     # -E_c; n_c = 0 gives -inf and never wins
            c = np.argmax(u, axis=1)
            new_lo[s:e], new_hi[s:e] = b[r, c], b[r, c + 1]
        lo, hi = new_lo, new_hi
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

    def dest_trie(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The destination tries of all PRBs under ``seed`` (:func:`trie_order` with purpose
        ``"dest"``), computed once per plan and seed (batch engines call the per-record step
        once per batch).

        Returns
        -------
        cells : (S,) int64
            The sensitive cells sorted by (PRB, H_l, cell id).
        sorted_hash : (S,) uint64
        bounds : (B + 1,) int64
            PRB b's cells are ``cells[bounds[b]:bounds[b + 1]]``.
        position : (C,) int64
            Position of every cell in ``cells``; -1 for non-sensitive cells.
        """
        cache = self.__dict__.setdefault("_trie_cache", {})
        if seed not in cache:
            sens = np.flatnonzero(self.cell_prb >= 0)
            order, sorted_hash, bounds = trie_order(seed, "dest", self.cell_id[sens],
                                                    self.cell_prb[sens], self.prb_theta.size)
            cells = sens[order]
            position = np.full(self.cell_prb.size, -1, dtype=np.int64)
            position[cells] = np.arange(cells.size)
            cache.clear()
            cache[seed] = (cells, sorted_hash, bounds, position)
        return cache[seed]

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
    same distinct identities in every engine (METHOD.md section 7.3)."""
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
