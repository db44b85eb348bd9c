"""The dependence counter's two ways to every table (issue 48): over the records (scatters of
every record's key codes), or over a batch's distinct (cell, value) and (cell, bin) pairs when
the batch has few of them (one bincount over cells x values, the intervals scattered per
pair). The tables must be the same bytes whichever way a batch took, so the figures and the
release do not depend on the batch size; each way is forced here on the same batches."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc.method.dependence import DependenceCounter
from sdc.method.dependence import order as order_mod
from sdc.method.dependence import tables as tables_mod
from sdc.method.dependence.pairs import PairPlan, SyntheticColumn


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    sizes = [2, 7, 30]
    kc = np.stack([rng.integers(0, s, n) for s in sizes], axis=1).astype(np.uint8)
    cell = (kc[:, 0].astype(np.int64) * sizes[1] + kc[:, 1]) * sizes[2] + kc[:, 2]
    three = rng.integers(0, 3, n).astype(float)
    three[rng.random(n) < 0.1] = np.nan  # records without a value: not in the ordered table
    frame = pd.DataFrame({
        "binary": rng.integers(0, 2, n),
        "three": three,
        "small": rng.integers(0, 40, n),
        "dep": kc[:, 2].astype(np.int64) * 3,  # a function of a key: intervals of one value
        "wide": rng.normal(size=n),
        "text": rng.choice(list("abcde"), n),
    })
    return frame, cell, kc, sizes


def _count(frame: pd.DataFrame, cell: np.ndarray, kc: np.ndarray, sizes: list[int],
           batches: int) -> DependenceCounter:
    pairs = PairPlan((SyntheticColumn("+", "binary", "small"),
                      SyntheticColumn("/", "small", "three")), ("binary", "small", "three"),
                     (), ("binary", "small", "three"))
    c = DependenceCounter(list(frame.columns), 3, 4, sizes=sizes, merge_every=3, pairs=pairs)
    for b in np.array_split(np.arange(len(frame)), batches):
        c.add(frame.iloc[b], cell[b], kc[b])
    return c


def _tables(c: DependenceCounter) -> list[np.ndarray]:
    out = []
    for col in c.columns:
        v, p = c.tables(col)
        out += [*v, *p]
        for _q, (u, n) in sorted(c.combos(col).items()):
            out += [u, n]
    for key in [*c.columns, *(s.key for s in c.pairs.columns)]:
        part = c.order_table(key)
        if part is not None:
            out += [np.array([part.e, part.img_lo, part.img_hi]), part.bins, part.n, part.lo,
                    part.hi, part.pcell, part.pbin, part.pcount]
    return out


@pytest.mark.parametrize("batches", [1, 5])
def test_pairs_and_records_give_the_same_tables(monkeypatch: pytest.MonkeyPatch,
                                                batches: int) -> None:
    frame, cell, kc, sizes = _frame(60_000, 3)
    got = {}
    for way in ("pairs", "records"):
        on = way == "pairs"
        monkeypatch.setattr(tables_mod, "dense_fits", lambda space, n, on=on: on)
        monkeypatch.setattr(order_mod, "few_bins", lambda cells, bins, n, on=on: on)
        got[way] = _tables(_count(frame, cell, kc, sizes, batches))
    assert len(got["pairs"]) == len(got["records"]) > 50
    for a, b in zip(got["pairs"], got["records"], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    monkeypatch.undo()  # the thresholds as they are: one of the two ways per table
    for a, b in zip(_tables(_count(frame, cell, kc, sizes, batches)), got["records"],
                    strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_the_thresholds_choose_the_pairs_for_few_values() -> None:
    """With 1M records in 38,000 cells a column of 80 values is counted by one bincount of
    its (cell, value) pairs, one of 2 values is scattered over its pairs in order; the
    thresholds themselves (not the tables) are what this pins."""
    assert tables_mod.dense_fits(38_000 * 80, 1_000_000)
    assert not tables_mod.dense_fits(38_000 * 4096, 1_000_000)
    assert order_mod.few_bins(38_000, 2, 1_000_000)
    assert not order_mod.few_bins(38_000, 80, 1_000_000)


@pytest.mark.parametrize("batches", [1, 4])
def test_the_value_table_and_the_records_give_the_same_ordered_table(
        monkeypatch: pytest.MonkeyPatch, batches: int) -> None:
    """A column of few values has its ordered table reduced from its value table's buckets
    (``order.value_order_part``, issue 48) instead of scattered from every record: the same
    bytes as the records' way, for numbers with missing values, integers, text with missing
    values and text written as ISO dates (ordered as days)."""
    frame, cell, kc, sizes = _frame(40_000, 5)
    rng = np.random.default_rng(9)
    text = rng.choice(["north", "south", "east", None], len(frame))
    frame["text"] = pd.Series(text, dtype=object)
    frame["day"] = rng.choice(["1987-03-14", "2001-12-31", "1999-01-01", "x"], len(frame))
    from sdc.method.dependence import counting as counting_mod

    got = _tables(_count(frame, cell, kc, sizes, batches))
    monkeypatch.setattr(counting_mod, "value_order_part",
                        lambda values, bucket, table, pairs, cells:
                        order_mod.order_part(values, cells))
    want = _tables(_count(frame, cell, kc, sizes, batches))
    assert len(got) == len(want) > 50
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_a_bucket_of_two_images_takes_the_records_way() -> None:
    """Two values in one value bucket (a hash collision in the batch; here made so): the
    bucket has no one image, so the ordered table is scattered from the records, whatever the
    value table says; a bucket holding a value and a missing one too."""
    rng = np.random.default_rng(2)
    n = 5_000
    kc = rng.integers(0, 4, (n, 2)).astype(np.uint8)
    cell = kc[:, 0].astype(np.int64) * 4 + kc[:, 1]
    fcode, fcell = tables_mod.factorize_sorted(cell)
    cells = tables_mod.BatchCells.of(fcode, fcell, kc, np.ones(fcell.size, bool))
    x = pd.Series(rng.integers(0, 6, n).astype(float))
    x[rng.random(n) < 0.05] = np.nan
    want = order_mod.order_part(x, cells)
    z = np.zeros(0, np.int64)
    for bucket in (np.where(x.isin([1.0, 2.0]), 1, x.fillna(7)).astype(np.int64),  # 1 and 2
                   np.where(x.isna(), 3, x).astype(np.int64)):  # 3 and missing
        table = (np.unique(bucket), z, z, z)  # never read: the records' way is taken
        got = order_mod.value_order_part(x, bucket, table, (z, z, z), cells)
        for f in ("e", "img_lo", "img_hi", "bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize("sizes", [(3, 7), (5000, 4000)])  # a dense count / np.unique
def test_a_key_pairs_distribution_is_the_same_either_way(sizes: tuple[int, int]) -> None:
    """MeasureContext._pair: the pair's distinct combinations and their share of the records
    are np.unique's and a bincount over them (the same float sums, bit for bit), whether the
    pair's codes are counted densely or by a sort."""
    from sdc.method.dependence.measure import MeasureContext

    rng = np.random.default_rng(3)
    n_cells = 2000
    ctx = object.__new__(MeasureContext)
    ctx.kc = np.column_stack([rng.integers(0, s, n_cells) for s in sizes])
    ctx.sizes = list(sizes)
    ctx.t = rng.integers(1, 50, n_cells).astype(np.float64) * 0.1
    ctx.n_total = float(ctx.t.sum())
    ctx._pairs = {}
    uc, pjoint, _ = ctx._pair(0, 1)
    jc = ctx.kc[:, 0] * sizes[1] + ctx.kc[:, 1]
    want, inv = np.unique(jc, return_inverse=True)
    assert np.array_equal(uc, want)
    assert np.array_equal(pjoint, np.bincount(inv, weights=ctx.t) / ctx.n_total)


def _sorted_reference(x: np.ndarray, cell: np.ndarray, kc: np.ndarray,
                      small_limit: int) -> dict[str, order_mod.OrderPart]:
    """The sorted relations as an intruder makes them: the records sorted by value (then
    cell), each record's distinct-value neighbours read off the sorted column."""
    from sdc.method.dependence.tables import BatchCells, factorize_sorted

    order = np.lexsort((cell, x))
    xs, cs, ks = x[order], cell[order], np.asfortranarray(kc[order], dtype=np.int64)
    fcode, fcell = factorize_sorted(cs)
    cells = BatchCells.of(fcode, fcell, ks,
                          np.bincount(fcode, minlength=fcell.size) < small_limit)
    out = {}
    n = xs.size
    prev, nxt, rank = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    distinct = sorted(set(xs.tolist()))
    for i, v in enumerate(xs):  # brute force: a test of a few hundred records
        g = distinct.index(v)
        alone = int((xs == v).sum()) == 1
        if alone and g > 0:
            prev[i] = v - distinct[g - 1]
        if alone and g + 1 < len(distinct):
            nxt[i] = distinct[g + 1] - v
        rank[i] = int((xs < v).sum())
    for op, img in (("diff:previous", prev), ("diff:next", nxt), ("rank", rank)):
        valid = np.isfinite(img)
        out[op] = order_mod.image_part("num", np.where(valid, img, 0.0), valid, cells)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sorted_relations_need_no_sorted_records(seed: int) -> None:
    """sorted_parts reads each record's distinct value group from np.unique, never putting the
    records in order: the same ordered tables as the records sorted by value (brute force),
    with ties, -0.0 beside 0.0, negative values, and in any order of the records."""
    from sdc.method.dependence.relations import sorted_parts

    rng = np.random.default_rng(seed)
    n = 400
    # seed 2: mostly distinct values (np.unique); else few (hashed, then sorted)
    x = (rng.normal(size=n) if seed == 2 else rng.integers(-20, 60, n).astype(float) * 0.5)
    x[rng.random(n) < 0.05] = -0.0
    x[:3] = [1e6, -1e6, 0.0]
    kc = np.stack([rng.integers(0, 2, n), rng.integers(0, 9, n)], axis=1).astype(np.uint8)
    cell = kc[:, 0].astype(np.int64) * 9 + kc[:, 1]
    ref = _sorted_reference(x, cell, kc, 5)
    perm = rng.permutation(n)
    for got in (sorted_parts(x, cell, kc, 5), sorted_parts(x[perm], cell[perm], kc[perm], 5)):
        assert got.keys() == ref.keys()
        for op, part in got.items():
            want = ref[op]
            assert (part.e, part.img_lo, part.img_hi) == (want.e, want.img_lo, want.img_hi)
            for f in ("bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
                np.testing.assert_array_equal(getattr(part, f), getattr(want, f), err_msg=op)


@pytest.mark.parametrize(("kind", "hashed"), [("few values", True), ("mostly distinct", False),
                                              ("one value", True)])
def test_distinct_groups_is_np_unique(kind: str, hashed: bool,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The sorted relations' groups: hashed then sorted for few distinct values, sorted whole
    for mostly distinct ones; either way np.unique's values, inverse and counts (-0.0 and
    0.0 one value, as np.unique has them)."""
    from sdc.method.dependence import relations

    factorized = []
    real = relations.pd.factorize
    monkeypatch.setattr(relations.pd, "factorize",
                        lambda *a, **k: (factorized.append(1), real(*a, **k))[1])
    rng = np.random.default_rng(3)
    n = 20_000
    x = {"few values": rng.integers(-8, 8, n) * 0.25,
         "mostly distinct": rng.normal(size=n),
         "one value": np.full(n, 7.5)}[kind]
    x[rng.random(n) < 0.01] = -0.0
    x[rng.random(n) < 0.01] = 0.0
    want = np.unique(x, return_inverse=True, return_counts=True)
    got = relations._distinct_groups(x)
    assert bool(factorized) is hashed
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b.reshape(-1))
