"""The dependence check's record scatters in chunks (issue 48): the key codes' extremes per
bucket (:func:`extreme_tables`) and the ordered table's bins (``order._relative_bins``) are
made chunk by chunk so that a chunk stays in the core's cache; the tables must be the ones the
one-array algorithm gives (per key ``extreme_table`` over all records, the bins of one float
array), on random and real files, whatever the chunk size."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from eusilc_helpers import export_eusilc

from sdc.method.dependence import order as O
from sdc.method.dependence import tables as T
from sdc.method.dependence.counting import DependenceCounter
from sdc.method.dependence.pairs import frame_kinds, pair_plan

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _per_key(bucket: np.ndarray, codes: np.ndarray, size: int,
             dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The one-array algorithm: ``extreme_table`` per key over every record."""
    lo = np.stack([T.extreme_table(np.minimum, bucket, codes[:, k].astype(dt), size)
                   for k in range(codes.shape[1])])
    hi = np.stack([T.extreme_table(np.maximum, bucket, codes[:, k].astype(dt), size)
                   for k in range(codes.shape[1])])
    return lo, hi


def _real(name: str) -> pd.DataFrame:
    path = {"testdata": SHARED / "sdcmicro" / "testdata.csv",
            "adult": SHARED / "adult" / "adult.csv"}[name]
    if not path.is_file():
        pytest.skip(f"{path} absent (the shared data folder ../shared/data)")
    return pd.read_csv(path, sep=None, engine="python")


def _keyed(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(cell ids, key codes (n, p) uint8, sizes) of ``keys`` (missing as its own code)."""
    codes, sizes = [], []
    for k in keys:
        c, u = pd.factorize(frame[k], sort=True)
        codes.append(np.where(c < 0, len(u), c))
        sizes.append(len(u) + 1)
    cell = np.zeros(len(frame), np.int64)
    for c, s in zip(codes, sizes, strict=True):
        cell = cell * s + c
    return cell, np.stack(codes, 1).astype(np.uint8), sizes


REAL_KEYS = {"testdata": ["urbrur", "roof", "walls", "water", "sex"],
             "adult": ["sex", "age", "race", "marital-status", "native-country"]}


@pytest.mark.parametrize("dt", [np.uint8, np.int16, np.int64])
def test_extreme_tables_equal_the_per_key_scatters_on_random_records(monkeypatch, dt) -> None:
    """Random buckets (skewed, with empty rows) and key codes over several chunks (a small
    ``CHUNK``, and one chunk): the same lo and hi tables as one scatter per key."""
    rng = np.random.default_rng(48)
    n, size = 50_000, 3_000
    bucket = np.minimum(rng.zipf(1.3, n), size - 1).astype(np.int64)
    codes = np.asfortranarray(np.stack([rng.integers(0, s, n) for s in (2, 92, 9, 5, 44)], 1)
                              .astype(dt))
    want = _per_key(bucket, codes, size, np.dtype(dt))
    for chunk in (997, 1 << 12, 1 << 17):
        monkeypatch.setattr(T, "CHUNK", chunk)
        lo, hi = T.extreme_tables(bucket, codes, size)
        assert lo.dtype == np.dtype(dt)
        np.testing.assert_array_equal(lo, want[0])
        np.testing.assert_array_equal(hi, want[1])
    # a table in a wider dtype than the codes (the counter's dense value tables)
    lo, hi = T.extreme_tables(bucket, codes.astype(np.uint8), size, np.int16)
    np.testing.assert_array_equal(lo, _per_key(bucket, codes, size, np.dtype(np.int16))[0])


@pytest.mark.parametrize("name", ["testdata", "adult"])
def test_extreme_tables_equal_the_per_key_scatters_on_real_files(monkeypatch, name) -> None:
    """sdcMicro's testdata and adult: every non-key column's value buckets (folded hashes)
    as buckets, chunks of 997 records: the same tables as one scatter per key."""
    from sdc.method.draws import value_hash

    frame = _real(name)
    _, codes, _ = _keyed(frame, REAL_KEYS[name])
    codes = np.asfortranarray(codes)
    monkeypatch.setattr(T, "CHUNK", 997)
    for c in frame.columns:
        if c in REAL_KEYS[name]:
            continue
        bucket = (value_hash(frame[c]) & np.uint64((1 << T.HASH_BITS) - 1)).astype(np.int64)
        lo, hi = T.extreme_tables(bucket, codes, 1 << T.HASH_BITS)
        want = _per_key(bucket, codes, 1 << T.HASH_BITS, codes.dtype)
        np.testing.assert_array_equal(lo, want[0])
        np.testing.assert_array_equal(hi, want[1])


def _one_array_bins(x: np.ndarray, e: int, lo: float, valid: np.ndarray | None,
                    past: int) -> tuple[np.ndarray, int]:
    """The one-array algorithm of ``_relative_bins`` (before issue 48)."""
    if valid is not None:
        x = np.where(valid, x, lo)
    y = x * (2.0 ** -e)
    np.floor(y, out=y)
    base = math.floor(lo * (2.0 ** -e))
    if base:
        y -= base
    out = y.astype(np.int64)
    if valid is not None:
        out[~valid] = past
    return out, int(base)


def test_relative_bins_in_chunks_equal_one_array(monkeypatch) -> None:
    """Lognormal, negative and tiny numbers with NaN and infinite values not valid, over
    several chunks: the same bins and base as computed in one float array."""
    rng = np.random.default_rng(7)
    n = 20_000
    for x in (rng.lognormal(10, 2, n).round(), rng.normal(-5, 1e6, n),
              rng.uniform(0, 1e-300, n)):
        x[rng.random(n) < 0.03] = np.nan
        x[rng.random(n) < 0.01] = np.inf
        valid = np.isfinite(x)
        lo, hi = float(x[valid].min()), float(x[valid].max())
        e = O._order_width("num", lo, hi)
        for chunk in (1_001, 1 << 16):
            monkeypatch.setattr(O, "_CHUNK", chunk)
            got = O._relative_bins("num", x, e, lo, valid, 1 << O.ORDER_BITS)
            want = _one_array_bins(x, e, lo, valid, 1 << O.ORDER_BITS)
            assert got[1] == want[1]
            np.testing.assert_array_equal(got[0], want[0])
            xv = np.where(valid, x, lo)
            np.testing.assert_array_equal(O._relative_bins("num", xv, e, lo)[0],
                                          _one_array_bins(xv, e, lo, None, 0)[0])


def _all_tables(frame: pd.DataFrame, keys: list[str], batches: int,
                hints: bool = False) -> dict[str, np.ndarray]:
    """Every table the counter keeps of ``frame`` (value tables, (cell, value) pairs, key
    pair combinations, ordered tables of columns and synthetic pairs), as the streaming
    count pass merges: an empty counter merges the batches' counters in order. ``hints``: it
    publishes its mixed bins (``MixedBins``) and each later batch's counter skips their
    records."""
    cell, codes, sizes = _keyed(frame, keys)
    cols = [c for c in frame.columns if c not in keys]

    class _Input:
        weight = None

    class _Config:
        input = _Input()

    plan = pair_plan(cols, frame_kinds(frame[cols]), _Config())
    counter = DependenceCounter(cols, len(keys), 3, sizes=sizes, pairs=plan)
    counter.publish = O.MixedBins() if hints else None
    for part in np.array_split(np.arange(len(frame)), batches):
        c = DependenceCounter(cols, len(keys), 3, sizes=sizes, pairs=plan,
                              known=counter.publish)
        c.add(frame.iloc[part].reset_index(drop=True), cell[part], codes[part])
        counter.merge(c)
    out: dict[str, np.ndarray] = {}
    for col in cols:
        (v, p) = counter.tables(col)
        out.update({f"{col}/v{i}": a for i, a in enumerate(v)})
        out.update({f"{col}/p{i}": a for i, a in enumerate(p)})
        for q, (u, n) in counter.combos(col).items():
            out[f"{col}/c{q}"] = np.concatenate([u, n])
    for key in counter._order:
        t = counter.order_table(key)
        if t is not None:
            for f in ("bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
                out[f"{key!r}/{f}"] = getattr(t, f)
            out[f"{key!r}/e"] = np.array([t.e, t.img_lo, t.img_hi])
    return out


def _frames(name: str, tmp_path_factory) -> tuple[pd.DataFrame, list[str]]:
    if name == "eusilc":  # laeken's synthetic EU-SILC (skips without R's laeken)
        f = pd.read_csv(export_eusilc(tmp_path_factory))
        return f, ["db040", "rb090", "pb220a", "hsize"]
    if name == "random":
        rng = np.random.default_rng(3)
        n = 6_000
        f = pd.DataFrame({"sex": rng.integers(0, 2, n), "age": rng.integers(0, 92, n),
                          "reg": rng.integers(0, 44, n)})
        f["income"] = rng.lognormal(10, 1, n).round()
        f.loc[rng.random(n) < 0.05, "income"] = np.nan
        f["hours"] = rng.integers(0, 80, n)
        f["months"] = f["age"] * 12 + rng.integers(0, 12, n)
        f["w"] = rng.uniform(50, 300, n)
        return f, ["sex", "age", "reg"]
    return _real(name), REAL_KEYS[name]


@pytest.mark.parametrize("name", ["random", "testdata", "adult", "eusilc"])
def test_the_counter_tables_do_not_depend_on_the_chunks(monkeypatch, tmp_path_factory,
                                                        name) -> None:
    """The whole counter (one batch; three merged on the random file) with chunks of 997 records equals the
    counter with one chunk (the one-array algorithm: ``CHUNK`` above the records), table by
    table, bit for bit."""
    frame, keys = _frames(name, tmp_path_factory)
    for batches in ((1, 3) if name == "random" else (1,)):
        monkeypatch.setattr(T, "CHUNK", 1 << 40)
        monkeypatch.setattr(O, "_CHUNK", 1 << 40)
        want = _all_tables(frame, keys, batches)
        monkeypatch.setattr(T, "CHUNK", 997)
        monkeypatch.setattr(O, "_CHUNK", 997)
        got = _all_tables(frame, keys, batches)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


@pytest.mark.parametrize("chunk", [997, 1 << 12])
@pytest.mark.parametrize("per_key", [False, True])
def test_skipping_mixed_buckets_keeps_what_the_ordered_table_reads(monkeypatch, chunk,
                                                                  per_key) -> None:
    """``extreme_tables(skip_mixed=w)`` (the ordered tables, issue 48): the records of a
    bucket already wider than w on every key are not scattered; per bucket and key the table
    still holds the exact interval when it spans at most w + 1 codes, every other bucket
    hi - lo > w on the same keys as the full scatter; and records were skipped (a skewed
    bucket of many records, mixed early). w one for all keys or per key (``key_spreads``:
    a key of 2 codes keeps one code only). ``OrderPart`` keeps intervals up to ``SPREAD``."""
    np.testing.assert_array_equal(O.key_spreads([2, 5, 9, 16, 44, 70], 6), [0, 0, 1, 3, 7, 7])
    np.testing.assert_array_equal(O.key_spreads(None, 2), [O.SPREAD] * 2)
    w = O.key_spreads([40, 92, 9], 3)[:, None] if per_key else O.SPREAD
    rng = np.random.default_rng(11)
    n, size = 60_000, 5_000
    bucket = np.minimum(rng.zipf(1.2, n), size - 1).astype(np.int64)
    codes = np.stack([rng.integers(0, s, n) for s in (40, 92, 30)], 1).astype(np.uint8)
    pure = bucket % 7 == 3  # buckets whose records agree on key 1 (and some on all keys)
    codes[pure, 1] = (bucket[pure] % 92).astype(np.uint8)
    band = bucket % 11 == 5  # buckets whose records lie in a band of 4 codes of key 2
    codes[band, 2] = (bucket[band] % 20 + rng.integers(0, 4, int(band.sum()))).astype(np.uint8)
    codes[bucket % 49 == 3] = 4
    codes = np.asfortranarray(codes)
    monkeypatch.setattr(T, "CHUNK", chunk)
    lo, hi = T.extreme_tables(bucket, codes, size)
    slo, shi = T.extreme_tables(bucket, codes, size,
                                skip_mixed=w.ravel() if per_key else w)
    reached = lo <= hi
    width = hi.astype(np.int64) - lo
    kept = reached & (width <= w)
    assert (kept & (width > 0)).any() and (reached & ~kept).any()
    np.testing.assert_array_equal(slo[kept], lo[kept])
    np.testing.assert_array_equal(shi[kept], hi[kept])
    np.testing.assert_array_equal(shi.astype(np.int64) - slo > w, reached & ~kept)
    assert (slo != lo).any()  # skipped records: not the full extremes everywhere
    w = O.SPREAD
    part = O.OrderPart("num", 0, 0.0, 1.0, np.arange(3), np.ones(3, np.int64),
                       np.array([[1, 2], [3, 3], [0, 5]]), np.array([[1, 4], [3, 3], [0, 6 + w]]),
                       *(np.zeros(0, np.int64),) * 3)
    np.testing.assert_array_equal(part.lo, [[1, 2], [3, 3], [0, 0]])  # [0, MIXED]: too wide
    np.testing.assert_array_equal(part.hi, [[1, 4], [3, 3], [0, O.MIXED]])


def test_scratch_is_one_buffer_per_thread_and_name_up_to_a_batch() -> None:
    """The images' scratch: the same memory at a thread's next call with the same name (no
    fresh pages per image and batch), another buffer for another name or thread, and above
    ``SCRATCH_KEEP`` values a new array each call that the thread does not keep."""
    import threading

    a = O.scratch("t-image", 1000, np.float64)
    b = O.scratch("t-image", 500, np.float64)
    assert np.shares_memory(a, b) and b.size == 500
    assert not np.shares_memory(a, O.scratch("t-bins", 1000, np.int64))
    other = []
    t = threading.Thread(target=lambda: other.append(O.scratch("t-image", 1000, np.float64)))
    t.start()
    t.join()
    assert not np.shares_memory(a, other[0])
    big = O.SCRATCH_KEEP + 1
    x, y = O.scratch("t-image", big, np.float64), O.scratch("t-image", big, np.float64)
    assert x.size == big and not np.shares_memory(x, y)
    assert np.shares_memory(a, O.scratch("t-image", 1000, np.float64))  # the kept one



@pytest.mark.parametrize("name", ["random", "testdata"])
def test_the_counter_tables_do_not_depend_on_the_scratch(monkeypatch, tmp_path_factory,
                                                         name) -> None:
    """Three batches counted one after the other on this thread (each image and batch reusing
    the scratch of the one before, shorter or longer) give, table by table, the tables of
    fresh arrays at every call (``SCRATCH_KEEP`` 0)."""
    frame, keys = _frames(name, tmp_path_factory)
    monkeypatch.setattr(O, "SCRATCH_KEEP", 0)
    want = _all_tables(frame, keys, 3)
    monkeypatch.setattr(O, "SCRATCH_KEEP", 1 << 21)
    O.scratch("image", 7, np.float64)[:] = np.nan  # a stale buffer of another size first
    O.scratch("bins", 7, np.int64)[:] = -1
    got = _all_tables(frame, keys, 3)
    assert got.keys() == want.keys()
    assert any(k.startswith("SyntheticColumn") or "+" in k for k in got)  # images were made
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


@pytest.mark.parametrize("share_out", [0.0, 0.01, 0.9])
def test_key_hist_counts_the_codes_of_the_records_with_a_value(share_out) -> None:
    """``BatchCells.key_hist`` (the distribution the check in order measures runs against):
    per key the count of each code among the records ``valid``, however many are outside
    (none, few: the batch's counts less theirs; most: from the cells)."""
    rng = np.random.default_rng(3)
    n = 20_000
    codes = np.stack([rng.integers(0, s, n) for s in (2, 70, 9)], 1).astype(np.int16)
    cell = codes[:, 0].astype(np.int64) * 1000 + codes[:, 1] * 10 + codes[:, 2]
    fcode, fcell = T.factorize_sorted(cell)
    cells = T.BatchCells.of(fcode, fcell, codes, np.ones(fcell.size, bool))
    valid = rng.random(n) >= share_out
    for got, k in zip(cells.key_hist(valid), range(3), strict=True):
        want = np.bincount(codes[valid, k])
        np.testing.assert_array_equal(got[:want.size], want)
        assert not got[want.size:].any()
    for got, k in zip(cells.key_hist(None), range(3), strict=True):
        np.testing.assert_array_equal(got, np.bincount(codes[:, k]))


def _hinted_tables(frame: pd.DataFrame, keys: list[str], batches: int,
                   hints: bool) -> tuple[dict[str, np.ndarray], int]:
    """:func:`_all_tables` and the records the ordered tables' ``extreme_tables`` scattered
    (the skip must happen for the test to mean anything)."""
    scattered = [0]
    real = T.extreme_tables

    def spy(bucket, key_codes, size, dtype=None, skip_mixed=None, known=None):
        if skip_mixed is not None:
            scattered[0] += int(bucket.size if known is None else (~known[bucket]).sum())
        return real(bucket, key_codes, size, dtype, skip_mixed, known)

    O.extreme_tables = spy
    try:
        return _all_tables(frame, keys, batches, hints), scattered[0]
    finally:
        O.extreme_tables = real


@pytest.mark.parametrize("name", ["random", "testdata", "adult", "eusilc"])
def test_the_mixed_bins_of_earlier_batches_change_no_table(monkeypatch, tmp_path_factory,
                                                           name) -> None:
    """A batch's ordered tables skip the records of bins that the batches merged before have
    mixed on every key (``MixedBins``, issue 48): the merged tables are bit for bit those
    without the skip, and fewer records were scattered. On the random file the batches'
    value ranges differ (a column 50x wider in the second batch, one 50x narrower in the
    third), so the known bins are coarser and finer than a batch's own. Tables of 2**8 bins
    (not 2**16): the batches of these files scatter their records only when they hold more
    records than the table has rows."""
    frame, keys = _frames(name, tmp_path_factory)
    if name == "random":
        n = len(frame)
        third = np.arange(n) // (n // 3)
        frame = frame.assign(wide=frame["w"] * np.where(third == 1, 50.0, 1.0),
                             narrow=frame["w"] / np.where(third == 2, 50.0, 1.0))
    monkeypatch.setattr(T, "CHUNK", 997)
    monkeypatch.setattr(O, "ORDER_BITS", 8)
    batches = 3 if name == "random" else 4
    want, full = _hinted_tables(frame, keys, batches, hints=False)
    got, fewer = _hinted_tables(frame, keys, batches, hints=True)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    assert fewer < full


def test_known_rows_map_the_known_bins_onto_a_batch_of_another_width() -> None:
    """``_known_rows``: a batch bin (width 2**e, ``present + base``) is known when it lies in
    a known bin (known coarser) or holds one (known finer); another kind: nothing."""
    present = np.array([0, 1, 2, 5])
    base = 8  # the batch's bins 8, 9, 10, 13 at width 2**3
    known = ("num", 4, np.array([4, 6]))  # width 2**4: bin 4 holds 8, 9; bin 6 holds 13
    np.testing.assert_array_equal(np.flatnonzero(O._known_rows(known, "num", 3, present, base, 7)),
                                  [0, 1, 5])
    finer = ("num", 2, np.array([21, 27]))  # width 2**2: 21 lies in 10, 27 in 13
    np.testing.assert_array_equal(np.flatnonzero(O._known_rows(finer, "num", 3, present, base, 7)),
                                  [2, 5])
    assert O._known_rows(("str", 3, np.array([8])), "num", 3, present, base, 7) is None
    assert O._known_rows(("num", 3, np.array([99])), "num", 3, present, base, 7) is None
    bins = O.MixedBins()
    part = O.OrderPart("num", 3, 0.0, 1.0, np.array([8, 9, 10]), np.ones(3, np.int64),
                       np.array([[0, 0], [0, 1], [0, 0]]),
                       np.array([[20, 20], [20, 1], [0, 0]]), *(np.zeros(0, np.int64),) * 3)
    bins.publish("x", part)  # bin 8 is mixed on both keys, bin 9 on one only
    kind, e, mixed = bins.of("x")
    assert (kind, e) == ("num", 3)
    np.testing.assert_array_equal(mixed, [8])
