"""The weighted mode (docs/METHOD.md 7.11): exact tests of its risk and expected totals against
brute-force enumeration, its weight sums, and a Monte Carlo test of unbiased weighted totals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from sdc import release_frame
from sdc.config.model import ReleaseConfig
from sdc.method.risk import max_risk
from sdc.method.theta import solve_theta
from sdc.method.transition import CellDesign
from sdc.method.transition import expected_totals as _expected
from sdc.method.transition_risk import group_risk
from sdc.method.weighted import WeightSums, weighted_design


def expected_totals(x, m, g):
    """E[X*] of move probabilities m and uniform destinations inside groups g."""
    n = len(m)
    return _expected(x, CellDesign(np.asarray(m, float), np.asarray(g, np.int64),
                                   np.zeros(n + 1, np.int64), np.zeros(0, np.int64),
                                   np.zeros(0)))


def _outcomes(t: np.ndarray, m: np.ndarray):
    """Every joint outcome of the records of one group (uniform destinations among the
    other cells): (probability, released cell of every record, cell of every record)."""
    k = t.size
    cell = np.repeat(np.arange(k), t)
    per = []
    for j in cell:
        opts = [(j, 1.0 - m[j])] + [(d, m[j] / (k - 1)) for d in range(k) if d != j]
        per.append(opts)
    for combo in itertools.product(*per):
        p = math.prod(q for _, q in combo)
        if p > 0:
            yield p, np.array([c for c, _ in combo]), cell


@pytest.mark.parametrize("t, m", [
    ([1, 1, 2], [0.9, 0.6, 0.35]),
    ([1, 1, 1, 1], [1.0, 0.7, 0.5, 0.8]),
    ([2, 1], [0.3, 0.95]),
    ([1, 2, 2], [0.2, 0.1, 0.45]),
])
def test_group_risk_is_the_brute_force_risk(t, m):
    """max over targets, picked cells and a of P(B in z, S_z = a) / (a P(S_z = a)),
    enumerated over every joint outcome of the records, equals group_risk."""
    t, m = np.array(t), np.array(m)
    k = t.size
    best = own = other = 0.0
    for j in range(k):
        b = int(np.flatnonzero(np.repeat(np.arange(k), t) == j)[0])  # the target record
        for z in range(k):
            hit: dict[int, float] = {}
            tot: dict[int, float] = {}
            for p, rel, _ in _outcomes(t, m):
                a = int((rel == z).sum())
                tot[a] = tot.get(a, 0.0) + p
                if rel[b] == z:
                    hit[a] = hit.get(a, 0.0) + p
            r = max((hit.get(a, 0.0) / (a * tot[a]) for a in tot if a > 0 and tot[a] > 0),
                    default=0.0)
            best = max(best, r)
            if z == j:
                own = max(own, r)
            else:
                other = max(other, r)
    got = group_risk(t, m)
    assert got.max_risk == pytest.approx(best, abs=1e-12)
    assert got.own_max == pytest.approx(own, abs=1e-12)
    assert got.other_max == pytest.approx(other, abs=1e-12)


@pytest.mark.parametrize("profile", [{1: 5}, {1: 200, 2: 80}, {1: 2, 2: 1}, {2: 3}, {1: 1, 2: 1}])
@pytest.mark.parametrize("theta", [solve_theta(0.395), 0.6, 1.0])
def test_group_risk_with_nzy_probabilities_is_max_risk(profile, theta):
    t = np.repeat(list(profile), list(profile.values()))
    a, b = group_risk(t, theta / t), max_risk(profile, theta)
    assert (a.max_risk, a.own_max, a.other_max) == pytest.approx(
        (b.max_risk, b.own_max, b.other_max), abs=1e-12)


def test_expected_totals_are_the_brute_force_expectations():
    """A tiny file of two groups: E[W*_l] and E[S_l] enumerated over every joint outcome."""
    t = np.array([1, 2, 1, 1, 1])
    w_rec = np.array([3.0, 1.0, 2.5, 4.0, 1.5, 2.0])      # records in cell order
    group = np.array([0, 0, 0, 1, 1])
    m = np.array([0.8, 0.3, 0.5, 0.9, 0.4])
    cell = np.repeat(np.arange(5), t)
    W = np.bincount(cell, weights=w_rec)
    e_w, e_t = np.zeros(5), np.zeros(5)
    for g in (0, 1):
        cells = np.flatnonzero(group == g)
        recs = np.flatnonzero(np.isin(cell, cells))
        for p, rel, _ in _outcomes(t[cells], m[cells]):
            dest = cells[rel]
            e_w += p * np.bincount(dest, weights=w_rec[recs], minlength=5)
            e_t += p * np.bincount(dest, minlength=5)
    assert expected_totals(W, m, group) == pytest.approx(e_w, abs=1e-12)
    assert expected_totals(t.astype(float), m, group) == pytest.approx(e_t, abs=1e-12)


def test_balanced_design_keeps_weighted_totals_exactly():
    """m_j = c / W_j within a group: E[W*_l] = W_l for every cell (module docstring)."""
    rng = np.random.default_rng(3)
    t = rng.integers(1, 3, 40)
    W = t * rng.uniform(90, 110, 40)
    group = np.repeat(np.arange(5), 8)
    m = np.concatenate([0.7 * W[group == g].min() / W[group == g] for g in range(5)])
    assert expected_totals(W, m, group) == pytest.approx(W, rel=1e-12)


def test_weight_sums_do_not_depend_on_batches():
    rng = np.random.default_rng(1)
    w = rng.lognormal(5, 1.5, 20000)
    codes = rng.integers(0, 300, 20000) * 7 + 3
    keys = np.unique(codes)
    one = WeightSums.of(codes, w).result(keys)
    many = WeightSums()
    for s in range(0, w.size, 777):
        many.merge(WeightSums.of(codes[s:s + 777], w[s:s + 777]))
    assert np.array_equal(one, many.result(keys))
    assert one == pytest.approx([math.fsum(w[codes == c]) for c in keys], rel=1e-15)


def test_weighted_design_certifies_every_group_and_falls_back_visibly():
    """Groups of similar mean weight, each certified <= xi; a PRB whose weights no c can
    balance keeps NZY's design and says so."""
    rng = np.random.default_rng(7)
    k1, k2 = 40, 6
    t = np.concatenate([rng.integers(1, 3, k1), np.ones(k2, np.int64)])
    wbar = np.concatenate([rng.choice([100.0, 104.0, 300.0, 310.0], k1),
                           [100.0, 100, 100, 400, 400, 400]])
    W = t * wbar
    cell_prb = np.concatenate([np.zeros(k1, np.int64), np.ones(k2, np.int64)])
    prb_cells = np.arange(k1 + k2)
    theta = solve_theta(0.395)
    d = weighted_design(cell_prb, prb_cells, np.array([0, k1]), t, W, np.array([theta, theta]),
                        0.395, size=5)
    g = d.groups
    assert (g["max_risk"] <= 0.395).all()
    assert set(g.loc[g["prb"] == 0, "design"]) == {"weighted"}
    assert (g.loc[g["prb"] == 0, "weight_max"] / g.loc[g["prb"] == 0, "weight_min"]).max() < 1.1
    assert list(g.loc[g["prb"] == 1, "design"]) == ["nzy"]
    bal = np.flatnonzero(cell_prb == 0)
    assert expected_totals(W, d.cell_move, d.cell_group)[bal] == pytest.approx(W[bal], rel=1e-12)


def test_cells_of_one_mean_weight_stay_one_group_with_nzy_design():
    """Cells whose mean weights are equal (to the last bits: 100/3 summed three times) are
    one weight group whatever their number: NZY's design on them (m_j = theta / t_j) keeps
    every weighted total already, and a cut into groups of ``size`` cells only narrows the
    destinations (sdcMicro's testdata under protect: 17.3% of records changed against
    13.5%). Cells of another mean weight in the same PRB still get their own group."""
    rng = np.random.default_rng(3)
    k = 23
    t = rng.integers(1, 4, k)
    third = 100.0 / 3
    W = t * (third + third + third)  # 100.00000000000001 x t: equal mean weights
    W[::2] = t[::2] * 100.0
    theta = solve_theta(0.395)
    d = weighted_design(np.zeros(k, np.int64), np.arange(k), np.array([0]), t, W,
                        np.array([theta]), 0.395, size=5)
    assert len(d.groups) == 1 and d.groups["design"].iat[0] == "weighted"
    assert d.cell_move == pytest.approx(theta / t, rel=1e-12)
    assert expected_totals(W, d.cell_move, d.cell_group) == pytest.approx(W, rel=1e-12)
    W2 = W.copy()  # the first 12 cells' weights doubled: two levels, two groups at least
    order = np.argsort(W / t, kind="stable")
    W2[order[:12]] *= 2.0
    d2 = weighted_design(np.zeros(k, np.int64), np.arange(k), np.array([0]), t, W2,
                         np.array([theta]), 0.395, size=5)
    g = d2.groups
    assert len(g) >= 2 and (g["weight_max"] / g["weight_min"] < 1 + 1e-9).all()
    assert (g["max_risk"] <= 0.395).all()


def _survey(n: int = 6000, seed: int = 11) -> pd.DataFrame:
    """Generated survey: four keys, weights by stratum (ratio 4) with noise."""
    rng = np.random.default_rng(seed)
    stratum = rng.integers(0, 4, n)
    return pd.DataFrame({
        "pid": np.arange(n),
        "sex": rng.integers(0, 2, n),
        "age": np.minimum(rng.gamma(4, 9, n).astype(int), 90),
        "race": rng.choice(5, n, p=[.7, .15, .08, .05, .02]),
        "edu": rng.choice(8, n, p=[.02, .05, .1, .3, .25, .15, .1, .03]),
        "w": (np.array([50.0, 90, 140, 200])[stratum] * rng.uniform(0.97, 1.03, n)).round(2),
    })


def _config(weighted: bool) -> ReleaseConfig:
    return ReleaseConfig.model_validate({
        "name": "weighted-mc", "input": {"path": "unused.csv", "id_column": "pid",
                                         "weight": "w"},
        "key_variables": {"sex": {"range": [0, 1]}, "age": {"range": [0, 90]},
                          "race": {"range": [0, 4]}, "edu": {"range": [0, 7]}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 20, 40, 60]}},
        "risk": {"xi": 0.395, "small_blocks": "merge", "weighted": weighted},
        "seed": 1,
    })


def test_weighted_totals_unbiased_monte_carlo():
    """40 releases with different seeds. For every cell of a weight-balanced group the mean
    released weighted total is within 4.5 standard errors of the exact expectation W_l, the SE
    from the exact variance of a sum of independent records,
    Var(W*_l) = sum_i w_i^2 P_i(l) (1 - P_i(l)), over sqrt(40); at most 2% of those cells
    beyond 3 SE (chance: 0.27%). Under NZY (unweighted) the same file shows the bias.

    The plan (PRBs, theta, the weighted design) does not depend on the seed (``plan_cells``
    takes none), so the file is released once through ``release_frame`` (seed 1000: the whole
    pipeline, its certificate checked) and the 40 seeds are drawn from that release's own plan
    with the release's draw function (:func:`released_cells` on ``draw_plan(plan)``, every
    record's identity as the release computed it): the draws of seed 1000 are checked equal,
    record by record, to the release's released cells, so every replicate is the released
    cells a release with that seed writes (40 full releases planned the same design 40 times:
    ~18-26 CPU s; now ~1)."""
    frame = _survey()
    cfg = _config(True)
    runs = 40
    first = release_frame(frame, cfg, seed=1000)
    assert first.certificate <= 0.395
    from sdc.method.designs import plan_release
    from sdc.method.draws import record_identity
    from sdc.method.partition import partition_frame
    from sdc.method.plan import draw_plan
    from sdc.method.postrandomize import released_cells

    plan = first.plan
    design = plan.weighted
    W = np.asarray(first.counted.weight_total, float)
    m, g = design.cell_move, design.cell_group
    balanced = np.isin(g, design.groups.loc[design.groups["design"] == "weighted",
                                            "group"].to_numpy())
    assert balanced.sum() > 50
    # exact variance: record i of cell j lands in l with P = 1 - m_j (l = j) or m_j/(k_g - 1)
    k_g = np.bincount(g[g >= 0])
    rec_cell = first.record_cell
    n_cells = first.cells.n_cells
    w = frame["w"].to_numpy()
    assert np.allclose(W, np.bincount(rec_cell, weights=w, minlength=n_cells))
    var = np.zeros(n_cells)
    for gg in np.unique(g[balanced]):
        cells = np.flatnonzero(g == gg)
        inside = np.isin(rec_cell, cells)
        src = rec_cell[inside]
        for dest in cells:
            p = np.where(src == dest, 1 - m[src], m[src] / (k_g[gg] - 1))
            var[dest] = (w[inside] ** 2 * p * (1 - p)).sum()
    # the release's draws: its plan, its identities (pid is unique: no tiebreak step)
    assert first.counted.identities_unique
    dplan = draw_plan(plan, cfg)
    drawing = np.flatnonzero(dplan.cell_prb[rec_cell] >= 0)
    identity = record_identity(frame, cfg)[drawing]
    totals = np.zeros((runs, n_cells))
    for r in range(runs):
        rel = rec_cell.copy()
        rel[drawing] = released_cells(dplan, rec_cell[drawing], identity, 1000 + r)
        if r == 0:
            assert np.array_equal(rel, first.released_cell)  # what the release wrote
        totals[r] = np.bincount(rel, weights=w, minlength=n_cells)
    se = np.sqrt(var / runs)
    z = (totals.mean(axis=0) - W)[balanced] / se[balanced]
    assert np.abs(z).max() < 4.5, np.abs(z).max()
    assert (np.abs(z) > 3).mean() <= 0.02
    # NZY on the same file: the exact bias is visible (summed |bias| >> 0)
    part = partition_frame(frame, cfg)
    W0 = np.bincount(part.cells.record_cell, weights=w, minlength=part.cells.n_cells)
    d0 = plan_release(part, _config(False)).cell_design()
    bias_nzy = np.abs(expected_totals(W0, d0.move, d0.group) - W0).sum() / W0.sum()
    bias_w = np.abs(expected_totals(W, m, g) - W).sum() / W.sum()
    assert bias_w < bias_nzy / 5, (bias_w, bias_nzy)


def test_weighted_mode_needs_a_weight():
    """risk.weighted: true without input.weight is a config error (exit 2 through the CLI's
    config loading) saying why and what to set; household files are accepted (both stages
    weighted, docs/HOUSEHOLDS.md)."""
    base = _config(True).model_dump()
    base["input"]["weight"] = None
    with pytest.raises(ValueError, match="risk.weighted: true needs input.weight"):
        ReleaseConfig.model_validate(base)
    hh = _config(True).model_dump()
    hh["input"]["household_id"] = "hid"
    hh["key_variables"]["sex"]["level"] = "household"
    ReleaseConfig.model_validate(hh)  # household files: both stages weighted
    hh["risk"]["composition"] = "protect"
    ReleaseConfig.model_validate(hh)  # the composition stage weighted


def _runs_one_end_at_a_time(v: np.ndarray, size: int) -> list[int]:
    """The runs' dynamic programme one run end at a time (the definition)."""
    k = v.size
    if k < 2 * size:
        return [0, k]
    best, prev = np.full(k + 1, np.inf), np.zeros(k + 1, dtype=np.int64)
    best[0] = 0.0
    for e in range(size, k + 1):
        starts = np.arange(max(0, e - 2 * size + 1), e - size + 1)
        cost = best[starts] + (v[e - 1] - v[starts])
        i = int(np.argmin(cost))
        best[e], prev[e] = cost[i], starts[i]
    out = [k]
    while out[-1] > 0:
        out.append(int(prev[out[-1]]))
    return out[::-1]


@pytest.mark.parametrize("seed", range(4))
def test_runs_in_blocks_of_ends_are_the_one_at_a_time_programme(seed):
    """_runs decides `size` run ends at a time: the same boundaries (ties included: equal
    and rounded mean weights) as the programme taken one end at a time."""
    from sdc.method.weighted import _runs

    rng = np.random.default_rng(seed)
    for _ in range(200):
        size, k = int(rng.integers(2, 9)), int(rng.integers(1, 120))
        v = np.sort([rng.normal(size=k), np.round(rng.normal(size=k), 1), np.zeros(k)][_ % 3])
        assert _runs(v, size).tolist() == _runs_one_end_at_a_time(v, size)


@pytest.mark.parametrize("seed", range(3))
def test_weight_sums_by_count_and_by_sort_agree(seed):
    """The exact limb sums per (cell, exponent) by one count over a compact code range equal
    those by a sort (the same codes spread 10^12 apart: a range no count covers)."""
    from sdc.method.weighted import _reduce

    rng = np.random.default_rng(seed)
    n = 20_000
    codes = rng.integers(0, 3_000, n)
    w = [rng.uniform(50, 300, n), rng.lognormal(0, 6, n), np.full(n, 100 / 3)][seed]
    mant, e = np.frexp(w)
    big = (mant * 2.0**53).astype(np.int64)
    limbs = (big & (2**18 - 1), (big >> 18) & (2**18 - 1), big >> 36)
    dense = _reduce(codes, e.astype(np.int64), limbs)
    spread = _reduce(codes * 10**12, e.astype(np.int64), limbs)
    assert np.array_equal(dense[0] * 10**12, spread[0])
    for a, b in zip(dense[1:], spread[1:], strict=True):
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
    assert np.array_equal(WeightSums.of(codes, w).result(np.unique(codes)),
                          WeightSums.of(codes * 10**12, w).result(np.unique(codes) * 10**12))
