"""The filter intruder's compatibility sums (sdc.method.dependence.compatible): the PRBs computed
on their own as matrices give exactly (bit for bit) the sums of the flat triples, and both the
brute-force definition (a loop over every informing pair and every cell of its PRB)."""

from __future__ import annotations

import numpy as np
import pytest

import sdc.method.dependence.compatible as compatible


def _case(seed: int) -> tuple[tuple, dict]:
    """Random PRBs over random cells (3 keys), values with intervals on some keys and key-pair
    combinations on one pair, informing (PRB, value) pairs with weights."""
    rng = np.random.default_rng(seed)
    sizes = [4, 30, 7]
    n_cells = int(rng.integers(40, 400))
    kc = np.column_stack([rng.integers(0, s, n_cells) for s in sizes])
    k_prb = rng.integers(1, 60, 12)
    k_prb = k_prb[np.cumsum(k_prb) <= n_cells]
    prb_cells = rng.permutation(n_cells)[:int(k_prb.sum())]
    prb_start = np.r_[0, np.cumsum(k_prb)[:-1]]
    nv = int(rng.integers(5, 80))
    inform = rng.random((nv, 3)) < 0.4
    lo = np.column_stack([rng.integers(0, s, nv) for s in sizes])
    vlo, vhi = lo, lo + np.column_stack([rng.integers(0, s, nv) for s in sizes])
    span = sizes[0] * sizes[1]
    inf_q = rng.random(nv) < 0.3
    seen = rng.integers(0, nv * span, 200)
    combo = {(0, 1): (inf_q, np.unique(seen), span)}
    n = int(rng.integers(50, 2000))
    prb = rng.integers(0, k_prb.size, n)
    vi = rng.integers(0, nv, n)
    w = rng.random(n) * rng.choice([1e-3, 1.0, 1e4], n)
    return ((prb, vi, w, inform, vlo, vhi, combo),
            {"kc": kc, "sizes": sizes, "prb_cells": prb_cells, "prb_start": prb_start,
             "k_prb": k_prb, "n_cells": n_cells})


def _brute(args: tuple, kw: dict) -> np.ndarray:
    prb, vi, w, inform, vlo, vhi, combo = args
    kc, sizes = kw["kc"], kw["sizes"]
    acc = np.zeros(kw["n_cells"])
    for b, v, x in zip(prb.tolist(), vi.tolist(), w.tolist(), strict=True):
        s = int(kw["prb_start"][b])
        for j in kw["prb_cells"][s:s + int(kw["k_prb"][b])].tolist():
            ok = all(not inform[v, k] or vlo[v, k] <= kc[j, k] <= vhi[v, k] for k in range(3))
            for (k1, k2), (inf_q, qcodes, span) in combo.items():
                if inf_q[v]:
                    ok = ok and (v * span + kc[j, k1] * sizes[k2] + kc[j, k2]) in set(
                        qcodes.tolist())
            acc[j] += x * ok
    return acc


@pytest.mark.parametrize("seed", range(12))
def test_matrices_per_prb_equal_the_flat_triples_bit_for_bit(seed, monkeypatch):
    args, kw = _case(seed)
    monkeypatch.setattr(compatible, "WIDE", 1 << 60)  # every PRB flat
    flat = compatible.informing(*args, **kw)
    monkeypatch.setattr(compatible, "WIDE", 1)  # every PRB on its own
    wide = compatible.informing(*args, **kw)
    monkeypatch.setattr(compatible, "WIDE", 200)  # some of each
    mixed = compatible.informing(*args, **kw)
    assert np.array_equal(flat, wide) and np.array_equal(flat, mixed)
    monkeypatch.setattr(compatible, "MATRIX", 64)  # many chunks: the same up to rounding
    np.testing.assert_allclose(compatible.informing(*args, **kw), flat, rtol=1e-12)
    np.testing.assert_allclose(flat, _brute(args, kw), rtol=1e-12, atol=0)


def _band_runs_one_try_at_a_time(part, ctx, k, cum, total, lo, hi, inform) -> None:
    """The band runs as they were computed before (one try after the other): the reference."""
    import math

    from sdc.method.dependence.measure import ALPHA
    from sdc.method.dependence.order import key_bands

    size_k = ctx.sizes[k]
    tries = [(s, o) for s in key_bands(size_k) for o in (0, s // 2)]
    if not tries or not part.n.size:
        return
    limit = math.log(ALPHA) - math.log(max(ctx.n_total, 1.0)) - math.log(len(tries))
    at = np.flatnonzero(part.hi[:, k] - part.lo[:, k] < size_k)
    if not at.size:
        return
    blo_k, bhi_k, n = part.lo[at, k], part.hi[at, k], part.n[at]
    gap = np.r_[True, np.diff(at) != 1]
    for s, o in tries:
        band = (blo_k + o) // s
        inband = band == (bhi_k + o) // s
        brk = gap | np.r_[True, ~inband[1:] | ~inband[:-1] | (band[1:] != band[:-1])]
        starts = np.flatnonzero(brk)
        run = np.cumsum(brk) - 1
        size = np.add.reduceat(n, starts)[run]
        first = np.clip(band * s - o, 0, size_k)
        last = np.clip(band * s - o + s, 0, size_k)
        pband = (cum[last] - cum[first]) / total
        with np.errstate(divide="ignore"):
            inf = inband & (size >= 2) & (size * np.log(np.maximum(pband, 1e-300)) < limit)
        rlo = np.minimum.reduceat(blo_k, starts)[run]
        rhi = np.maximum.reduceat(bhi_k, starts)[run]
        better = inf & (rhi - rlo < hi[at, k] - lo[at, k])
        lo[at[better], k] = rlo[better]
        hi[at[better], k] = rhi[better]
        inform[at[better], k] = True


@pytest.mark.parametrize("seed", range(20))
def test_band_runs_of_all_tries_at_once_equal_one_try_at_a_time(seed):
    """measure._band_runs computes every (band, offset) as a row of one matrix; it narrows the
    intervals exactly as trying them in order did, on ordered tables with runs of narrow bins
    (long runs inform beyond chance, short ones do not), bins of other widths and MIXED."""
    from types import SimpleNamespace

    from sdc.method.dependence.measure import _band_runs
    from sdc.method.dependence.order import MIXED

    rng = np.random.default_rng(seed)
    size_k = int(rng.choice([9, 40, 92]))
    m = int(rng.integers(1, 3000))
    centre = np.repeat(rng.integers(0, size_k, m // 20 + 1), rng.integers(1, 60, m // 20 + 1))[:m]
    centre = np.r_[centre, rng.integers(0, size_k, m - centre.size)]
    blo = np.clip(centre - rng.integers(0, 3, m), 0, size_k - 1)
    bhi = np.clip(centre + rng.integers(0, 3, m), 0, size_k - 1)
    wide = rng.random(m) < 0.05
    blo[wide], bhi[wide] = 0, MIXED
    part = SimpleNamespace(lo=blo[:, None].astype(np.int64), hi=bhi[:, None].astype(np.int64),
                           n=rng.integers(1, 400, m).astype(np.float64))
    hist = rng.integers(1, 1000, size_k).astype(np.float64)
    cum, total = np.r_[0.0, np.cumsum(hist)], float(hist.sum())
    ctx = SimpleNamespace(sizes=[size_k], n_total=float(rng.choice([1e3, 1e5, 1e7])))
    start_lo = np.zeros((m, 1), np.int64)
    start_hi = np.full((m, 1), size_k - 1, np.int64)
    pure = rng.random(m) < 0.1  # bins the pure runs already pinned
    start_lo[pure, 0] = start_hi[pure, 0] = centre[pure]
    got = [start_lo.copy(), start_hi.copy(), pure[:, None].copy()]
    want = [start_lo.copy(), start_hi.copy(), pure[:, None].copy()]
    _band_runs(part, ctx, 0, cum, total, *got)
    _band_runs_one_try_at_a_time(part, ctx, 0, cum, total, *want)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)
    assert seed or (got[2] & ~pure[:, None]).any()  # some bins were narrowed here
