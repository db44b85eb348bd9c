"""The out-of-core quartile select (sdc.reports.quantiles) against pandas' quantiles.

Exact tests: the order statistics are exact values and the interpolation is pandas' formula,
so the quartiles must be bit-identical to ``groupby(...).quantile(q)`` (linear), whatever the
batching, the histogram width and the collect budget.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from sdc.reports.quantiles import ImageMap, QuantileSelect, float_image, image_float, images


def run_select(x: np.ndarray, g: np.ndarray, n_groups: int, batches: int = 5,
               **kw) -> tuple[np.ndarray, list[np.ndarray], int]:
    sel = QuantileSelect(n_groups, **kw)
    parts = np.array_split(np.random.default_rng(0).permutation(x.size), batches)
    passes = 0
    while True:
        for idx in parts:
            keep, u = images(x[idx])
            sel.add(g[idx][keep], u)
        passes += 1
        if not sel.end_round():
            break
    n, qs = sel.quartiles()
    return n, qs, passes


def pandas_quartiles(x, g, n_groups):
    s = pd.Series(x).groupby(g)
    return [s.quantile(q).reindex(range(n_groups)).to_numpy() for q in (0.25, 0.5, 0.75)]


def data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.lognormal(2, 3, n) * rng.choice([-1.0, 1.0], n)
    x[rng.random(n) < 0.5] = 0.0          # heavy ties
    x[rng.random(n) < 0.03] = -0.0        # signed zeros
    x[rng.random(n) < 0.05] = np.nan      # missing
    x[rng.random(n) < 0.1] = 7.25         # ties at a non-zero value
    g = rng.integers(0, 40, n)
    g[g == 3] = 4                          # group 3 empty
    g[g == 38] = 37
    g[1] = 38                              # group 38 has exactly one element
    x[1] = -3.5
    return x, g, 41                        # group 40 empty too


@pytest.mark.parametrize("kw", [{}, {"hist_bins": 1 << 8}, {"hist_bins": 1 << 8,
                                                               "collect_values": 10},
                                {"collect_values": 1 << 30}])
def test_quartiles_equal_pandas_bit_for_bit(kw):
    x, g, G = data(30_000, 1)
    n, qs, passes = run_select(x, g, G, **kw)
    assert np.array_equal(n, np.bincount(g[~np.isnan(x)], minlength=G))
    for got, exp in zip(qs, pandas_quartiles(x, g, G), strict=True):
        assert np.array_equal(got, exp, equal_nan=True)
        # +0.0, never -0.0 (pandas' interpolation gives +0.0 for any two zeros)
        assert not np.any(np.signbit(got[got == 0]))
    assert np.isnan(qs[1][3]) and np.isnan(qs[1][40]) and n[3] == 0
    assert n[38] == 1 and qs[0][38] == qs[2][38] == -3.5
    if kw.get("collect_values") == 10:
        assert passes > 2  # several digit rounds were needed


def test_all_equal_values_resolve_in_one_refinement_pass():
    x = np.zeros(100_000)
    x[:10] = 1.0
    g = np.zeros(x.size, dtype=np.int64)
    _, qs, passes = run_select(x, g, 1, collect_values=100)
    assert passes == 2 and qs[1][0] == 0.0


def test_empty_input_and_all_nan():
    sel = QuantileSelect(3)
    sel.add(np.zeros(0, np.int64), np.zeros(0, np.uint64))
    assert not sel.end_round()
    n, qs = sel.quartiles()
    assert n.tolist() == [0, 0, 0] and all(np.isnan(q).all() for q in qs)
    keep, u = images(np.array([np.nan, np.nan]))
    assert not keep.any() and u.size == 0


def test_image_is_order_preserving_and_invertible():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(0, 1e6, 1000), [np.inf, -np.inf, 0.0, 5e-324, -5e-324,
                                                    np.finfo(float).max]])
    u = float_image(x)
    assert np.array_equal(np.argsort(x, kind="stable"), np.argsort(u, kind="stable"))
    assert np.array_equal(image_float(u), x)
    assert float_image(np.array([-0.0]))[0] == float_image(np.array([0.0]))[0]


def test_merge_of_partial_selects_equals_one_select():
    x, g, G = data(8_000, 3)
    whole = run_select(x, g, G, batches=1)[1]
    sel = QuantileSelect(G, hist_bins=1 << 9, collect_values=20)
    halves = np.array_split(np.arange(x.size), 2)
    while True:
        for idx in halves:  # two "tasks", merged
            part = sel.spawn()
            keep, u = images(x[idx])
            part.add(g[idx][keep], u)
            sel.merge(pickle.loads(pickle.dumps(part)))
        if not sel.end_round():
            break
    for a, b in zip(sel.quartiles()[1], whole, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_without_the_slot_lookup_table(monkeypatch):
    """Many (group, prefix) pairs: the slots are found by binary search instead."""
    from sdc.reports import quantiles

    monkeypatch.setattr(quantiles, "LUT_MAX", 0)
    x, g, G = data(20_000, 4)
    _, qs, passes = run_select(x, g, G, hist_bins=1 << 9, collect_values=30)
    assert passes > 2
    for got, exp in zip(qs, pandas_quartiles(x, g, G), strict=True):
        assert np.array_equal(got, exp, equal_nan=True)


def test_partials_of_a_finished_select_merge_as_nothing():
    x, g, G = data(3_000, 6)
    sel = QuantileSelect(G)
    keep, u = images(x)
    sel.add(g[keep], u)
    while sel.end_round():
        sel.add(g[keep], u)
    before = [q.copy() for q in sel.quartiles()[1]]
    part = pickle.loads(pickle.dumps(sel.spawn()))
    assert part.hist.size == 0
    sel.merge(part)
    for a, b in zip(sel.quartiles()[1], before, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("kw", [{}, {"hist_bins": 1 << 8, "collect_values": 10}])
def test_mirrored_groups_counted_by_their_differences(kw):
    """Groups G..2G-1 given as "groups 0..G-1 plus signed differences" in the first round
    (how the accumulator counts the released groups: only the moved records differ) give
    the quartiles of the directly counted groups, bit for bit; later rounds count directly."""
    x, g, G = data(20_000, 5)
    rng = np.random.default_rng(6)
    g_after = g.copy()
    moved = rng.random(g.size) < 0.02
    g_after[moved] = rng.integers(0, G, int(moved.sum()))
    both_x = np.concatenate([x, x])
    both_g = np.concatenate([g, g_after + G])
    n_ref, q_ref, _ = run_select(both_x, both_g, 2 * G, **kw)
    sel = QuantileSelect(2 * G, mirror=G, **kw)
    parts = np.array_split(np.arange(x.size), 4)
    while True:
        for idx in parts:
            keep, u = images(x[idx])
            gb, ga = g[idx][keep], g_after[idx][keep]
            if sel.round == 1:
                sel.add(gb, u, (0, G), digit=sel.first_digits(u))
                ch = gb != ga
                sel.add_signed(ga[ch] + G, u[ch], 1)
                sel.add_signed(gb[ch] + G, u[ch], -1)
            else:
                sel.add(np.concatenate([gb, ga + G]), np.concatenate([u, u]))
        if not sel.end_round():
            break
    n, qs = sel.quartiles()
    np.testing.assert_array_equal(n, n_ref)
    for a, b in zip(qs, q_ref, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="first round"):
        sel.add_signed(g[:1], float_image(x[:1]), 1)


# -- known ranges: the image map ---------------------------------------------------------------
def run_mapped(x, g, n_groups, image_map, batches=5, **kw):
    sel = QuantileSelect(n_groups, image_map=image_map, **kw)
    parts = np.array_split(np.random.default_rng(0).permutation(x.size), batches)
    passes = 0
    while True:
        for idx in parts:
            keep, u, inside = image_map.images(x[idx])
            assert inside
            sel.add(g[idx][keep], u)
        passes += 1
        if not sel.end_round():
            break
    return sel.quartiles()[1], passes


@pytest.mark.parametrize("kw", [{}, {"hist_bins": 1 << 8, "collect_values": 10}])
def test_quartiles_with_a_float_range_map_equal_pandas(kw):
    """Images shifted to start at the minimum's: the same order statistics, bit for bit
    (signed zeros, ties, negative and positive values, NaN)."""
    x, g, G = data(30_000, 11)
    ok = x[~np.isnan(x)]
    m = ImageMap.of_range(float(ok.min()), float(ok.max()), integral=False)
    assert m.kind == "float" and not m.identity
    qs, _ = run_mapped(x, g, G, m, **kw)
    for got, exp in zip(qs, pandas_quartiles(x, g, G), strict=True):
        assert np.array_equal(got, exp, equal_nan=True)


def test_a_narrow_float_range_spends_the_first_digit_on_the_differing_bits():
    """Lognormal values from ~50 to ~10^7 span about 2^57 images: the first 13-bit digit splits
    every binade in 256 bins instead of 2, so far fewer values are left for the next round
    (deterministic data: the counts are fixed, the bound has a margin of 1.5x)."""
    rng = np.random.default_rng(3)
    x = rng.lognormal(10, 1, 200_000).round()
    g = rng.integers(0, 20, x.size)
    plain = QuantileSelect(20, hist_bins=20 << 13)
    m = ImageMap.of_range(float(x.min()), float(x.max()), integral=False)
    mapped = QuantileSelect(20, hist_bins=20 << 13, image_map=m)
    assert m.known_bits >= 5
    for sel, u in ((plain, images(x)[1]), (mapped, m.images(x)[1])):
        sel.add(g, u)
        sel.end_round()
    # values in the slots of the second round: the mapped select keeps a small fraction
    kept = []
    for sel, u in ((plain, images(x)[1]), (mapped, m.images(x)[1])):
        idx, _ = sel.prefilter(u)
        kept.append(idx.size)
    assert kept[1] * 10 < kept[0], kept  # measured: 82,515 vs 5,398 of 200,000
    qs, _ = run_mapped(x, g, 20, m)
    for got, exp in zip(qs, pandas_quartiles(x, g, 20), strict=True):
        assert np.array_equal(got, exp, equal_nan=True)


def test_an_integer_range_map_resolves_in_the_first_round():
    """hours 0..79 as integers: 7 bits, one round, exact (and with NaN and negatives)."""
    rng = np.random.default_rng(4)
    x = rng.integers(-5, 80, 50_000).astype(float)
    x[rng.random(x.size) < 0.02] = np.nan
    g = rng.integers(0, 30, x.size)
    m = ImageMap.of_range(-5.0, 79.0, integral=True)
    assert m.kind == "int" and m.known_bits == 64 - 7
    qs, passes = run_mapped(x, g, 30, m)
    assert passes == 1
    for got, exp in zip(qs, pandas_quartiles(x, g, 30), strict=True):
        assert np.array_equal(got, exp, equal_nan=True)
    # a constant column: span 0, still one round
    qs, passes = run_mapped(np.full(100, 3.0), np.zeros(100, np.int64), 1,
                            ImageMap.of_range(3.0, 3.0, integral=True))
    assert passes == 1 and [q[0] for q in qs] == [3.0, 3.0, 3.0]


def test_values_outside_the_range_are_reported_not_mapped():
    f = ImageMap.of_range(1.0, 10.0, integral=False)
    i = ImageMap.of_range(1.0, 10.0, integral=True)
    for m in (f, i):
        assert m.images(np.array([1.0, 10.0, np.nan]))[2]
        assert not m.images(np.array([0.5, 3.0]))[2]      # below low
        assert not m.images(np.array([3.0, 10.5]))[2]     # above high
        keep, u, inside = m.images(np.array([2.0, np.nan, 7.0]))
        assert inside and keep.tolist() == [True, False, True]
        assert np.array_equal(m.values(u), [2.0, 7.0])
    # ranges that cannot be used fall back to the plain float image
    assert ImageMap.of_range(np.nan, 1.0, False).identity
    assert ImageMap.of_range(0.0, np.inf, False).identity
    assert ImageMap.of_range(0.5, 3.0, integral=True).kind == "float"  # not integers
    assert ImageMap.of_range(0.0, 2.0**60, integral=True).kind == "float"  # beyond 2^53
