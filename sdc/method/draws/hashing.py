"""64-bit hashing of the keyed draws: fmix64, SipHash-2-4 (``keyed_hash``, ``keyed_uniform``
under a key derived from the seed and a purpose) and the unkeyed hash of values (integers,
floats, strings, dates) that record identities are built from (docs/METHOD.md section 7.3)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

__all__ = ["MISSING_HASH", "draw_key", "fmix64", "fmix_inplace", "hash_ints",
           "hash_strings", "keyed_hash", "keyed_uniform", "name_hash", "siphash24",
           "value_hash"]

_U64 = np.uint64
_MASK = (1 << 64) - 1
MISSING_HASH = _U64(0x9E3779B97F4A7C15)           # hash of a missing value
_TAG_STR = _U64(0x5BD1E9955BD1E995)      # strings vs integers with equal hashes stay apart
_TAG_FLOAT = _U64(0xC2B2AE3D27D4EB4F)
# fixed public key of the unkeyed string hash (pandas.util.hash_array wants 16 ASCII chars)
_STR_KEY = "sdc-identity-v1!"
_HASH_CHUNK = 1 << 14     # SipHash block (measured: 80 ns/value vs 330 ns at 10^6 values)


# -- 64-bit mixing -----------------------------------------------------------------------------
def fmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Stafford's mix13): a bijection of uint64 with full avalanche.

    ``x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27; x *= 0x94d049bb133111eb;
    x ^= x >> 31`` (mod 2^64). Returns a new array.
    """
    x = np.array(x, dtype=_U64, copy=True)
    fmix_inplace(x)
    return x


_FMIX_BLOCK = 1 << 15  # 256 KB of uint64: the five steps run on a block while it is in cache


def fmix_inplace(x: np.ndarray) -> None:
    """:func:`fmix64` of a uint64 array in place, a cache-sized block at a time with one
    scratch block (3x faster than whole-array steps with temporaries at 5M values)."""
    flat = x.reshape(-1) if x.flags.c_contiguous else None
    if flat is None or flat.size <= _FMIX_BLOCK:
        x ^= x >> _U64(30)
        x *= _U64(0xBF58476D1CE4E5B9)
        x ^= x >> _U64(27)
        x *= _U64(0x94D049BB133111EB)
        x ^= x >> _U64(31)
        return
    scratch = np.empty(_FMIX_BLOCK, dtype=_U64)
    for i in range(0, flat.size, _FMIX_BLOCK):  # a loop over blocks, not records
        y = flat[i:i + _FMIX_BLOCK]
        t = scratch[:y.size]
        np.right_shift(y, _U64(30), out=t)
        y ^= t
        y *= _U64(0xBF58476D1CE4E5B9)
        np.right_shift(y, _U64(27), out=t)
        y ^= t
        y *= _U64(0x94D049BB133111EB)
        np.right_shift(y, _U64(31), out=t)
        y ^= t


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
def name_hash(name: str) -> np.uint64:
    return _U64(int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(),
                               "little"))


def hash_ints(x: np.ndarray) -> np.ndarray:
    out = np.asarray(x, dtype=np.int64).view(_U64).copy()
    fmix_inplace(out)
    return out


def hash_strings(values: np.ndarray) -> np.ndarray:
    """SipHash-2-4 (fixed public key) of the UTF-8 bytes of each string, then fmix64."""
    codes, uniques = pd.factorize(values)
    u = pd.util.hash_array(np.asarray(uniques, dtype=object), hash_key=_STR_KEY,
                           categorize=False) ^ _TAG_STR
    return np.where(codes >= 0, u[np.maximum(codes, 0)], MISSING_HASH)


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
        return np.where(codes >= 0, cat_h[np.maximum(codes, 0)], MISSING_HASH)
    isna = s.isna().to_numpy()
    if dtype.kind == "b" or (dtype.kind in "iu"):
        if dtype.kind == "u" and dtype.itemsize == 8:
            arr = s.to_numpy(dtype=_U64, na_value=0).view(np.int64)
        else:
            arr = s.to_numpy(dtype=np.int64, na_value=0)
        out = hash_ints(arr)
    elif dtype.kind == "f":
        arr = s.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            # NaN fails both tests, +-inf the second
            integral = arr == np.floor(arr)
            integral &= np.abs(arr) < 2.0 ** 63
        every, some = bool(integral.all()), bool(integral.any())
        if every:  # (an empty column too: all() of no value holds, any() does not)
            some = True
        if some:
            out = (arr if every else np.where(integral, arr, 0)).astype(np.int64)
            out = out.view(_U64)
            fmix_inplace(out)  # hash_ints of a fresh array: no second copy
        if not every:  # (no integral value, as a weight: its bits' hash only)
            bits = arr.view(_U64) ^ _TAG_FLOAT
            fmix_inplace(bits)
            out = np.where(integral, out, bits) if some else bits
    elif dtype.kind in "mM":
        # DatetimeArray/TimedeltaArray integers (a tz-aware column's to_numpy() is objects)
        out = hash_ints(np.asarray(s.array.asi8, dtype=np.int64))
    else:
        arr = s.to_numpy(dtype=object, na_value=None)
        if isna.any():
            arr = arr.copy()
            arr[isna] = ""
        # strings as they are; anything else (mixed objects) by its str()
        try:
            out = hash_strings(arr)
        except TypeError:
            try:
                out = hash_strings(np.asarray([str(v) for v in pd.unique(arr)], dtype=object)[
                    pd.factorize(arr)[0]])
            except TypeError:  # unhashable values (nested columns: dicts, lists): by str()
                out = hash_strings(np.asarray(np.frompyfunc(str, 1, 1)(arr), dtype=object))
    if isna.any():
        out = np.where(isna, MISSING_HASH, out)
    return np.asarray(out, dtype=_U64)
