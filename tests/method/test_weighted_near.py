"""Weighted x near (docs/METHOD.md 7.11-7.12): one Transition per PRB, block-diagonal over its
weight groups, m_j = c_g / W_j, W uniform or near inside a group.

Exact tests: the specialised uniform-W routine (``group_risk``) is the general certificate
with w_jl = 1/(k - 1); the certificate of a grouped PRB and its exact expected totals equal a
brute-force enumeration of every record's released cell. Monte Carlo: 40 releases of a
generated survey under weighted x near; weighted cell totals unbiased within the exact
standard error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from enumerated_risk import enumerated_parts

from sdc.config.model import ReleaseConfig
from sdc.method.designs import plan_release
from sdc.method.draws import drawing_identities, unique_identities
from sdc.method.partition import partition_frame
from sdc.method.plan import draw_plan
from sdc.method.postrandomize import released_cells
from sdc.method.transition import Transition, cell_design, expected_totals
from sdc.method.transition_risk import certify, group_risk, neighbourhood_risk, transition_max_risk
from tests.method.test_weighted import _survey


@pytest.mark.parametrize("case", range(8))
def test_group_risk_is_the_general_certificate_with_the_uniform_w(case):
    """group_risk(t, m) (unequal m, uniform W, never materialised) equals the general
    mechanism-aware certificate of transition_risk on the explicit uniform W: one rule."""
    rng = np.random.default_rng(300 + case)
    k = int(rng.integers(2, 8))
    t = rng.integers(1, 4, size=k)
    m = rng.uniform(0.05, 1.0, size=k)
    explicit = Transition(t, m, *Transition(t, m).csr())
    a, b = group_risk(t, m), transition_max_risk(explicit)
    assert a.max_risk == pytest.approx(b.max_risk, abs=1e-12)
    assert a.own_max == pytest.approx(b.own_max, abs=1e-12)
    assert a.other_max == pytest.approx(b.other_max, abs=1e-12)


def _tiny_prb() -> tuple[Transition, np.ndarray]:
    """Five cells in two weight groups: {0, 2, 4} with a near-type W (a mix of the two
    cyclic shifts), {1, 3} uniform; m_j = c_g / W_j. Returns the Transition and the records'
    weights (cell order)."""
    t = np.array([1, 1, 2, 1, 1])
    w = np.array([10.0, 50.0, 9.0, 12.0, 55.0, 11.0])          # records of cells 0,1,2,2,3,4
    cell = np.repeat(np.arange(5), t)
    W = np.bincount(cell, weights=w, minlength=5)
    group = np.array([0, 1, 0, 1, 0])
    c = {0: 0.8 * W[[0, 2, 4]].min(), 1: 0.7 * W[[1, 3]].min()}
    move = np.array([c[int(g)] / W[j] for j, g in enumerate(group)])
    # near rows of group 0 (cells 0, 2, 4): 0 -> 2 (0.7), 4 (0.3); 2 -> 4 (0.7), 0 (0.3);
    # 4 -> 0 (0.7), 2 (0.3): doubly stochastic, zero diagonal. Group 1 rows empty (uniform).
    indptr = np.array([0, 2, 2, 4, 4, 6])
    indices = np.array([2, 4, 0, 4, 0, 2])
    weights = np.array([0.7, 0.3, 0.3, 0.7, 0.7, 0.3])
    return Transition(t, move, indptr, indices, weights, kind="near", group=group), w


def _enumerate(tr: Transition, w: np.ndarray):
    """Every joint outcome of the records: (probability, released cell of every record)."""
    P = tr.matrix()
    cell = np.repeat(np.arange(tr.k), tr.frequency)
    for out in itertools.product(range(tr.k), repeat=cell.size):
        p = math.prod(P[cell[i], out[i]] for i in range(cell.size))
        if p > 0:
            yield p, np.array(out)


def test_grouped_transition_matrix_is_block_diagonal_and_balanced():
    tr, w = _tiny_prb()
    P = tr.matrix()
    assert P.sum(axis=1) == pytest.approx(np.ones(5), abs=1e-15)
    assert P[np.ix_([0, 2, 4], [1, 3])].max() == 0 and P[np.ix_([1, 3], [0, 2, 4])].max() == 0
    assert tr.dense()[[1, 3]][:, [1, 3]] == pytest.approx(np.array([[0, 1], [1, 0]]))


def test_expected_totals_are_the_brute_force_expectations():
    """E[W*_l] and E[S_l] from the transition probabilities (Transition.expected and the
    cell-table layout) equal the enumeration over every joint outcome; with m_j = c_g / W_j
    the weighted totals are exact (E[W*] = W) while the counts drift."""
    tr, w = _tiny_prb()
    cell = np.repeat(np.arange(tr.k), tr.frequency)
    W = np.bincount(cell, weights=w, minlength=tr.k)
    e_w, e_t = np.zeros(tr.k), np.zeros(tr.k)
    for p, out in _enumerate(tr, w):
        e_w += p * np.bincount(out, weights=w, minlength=tr.k)
        e_t += p * np.bincount(out, minlength=tr.k)
    assert tr.expected(W) == pytest.approx(e_w, abs=1e-12)
    assert tr.expected(tr.frequency) == pytest.approx(e_t, abs=1e-12)
    assert e_w == pytest.approx(W, abs=1e-9)
    assert np.abs(e_t - tr.frequency).max() > 1e-3
    # the same through the cell-table layout, the PRB at cells 3..7 of a table of 9
    d = cell_design([tr], np.arange(3, 8), np.array([0]), 9)
    big = np.zeros(9)
    big[3:8] = W
    assert expected_totals(big, d)[3:8] == pytest.approx(e_w, abs=1e-12)
    assert d.group[3:8].tolist() == [0, 1, 0, 1, 0] and (d.group[[0, 1, 2, 8]] == -1).all()


def test_certificate_of_a_grouped_prb_is_the_brute_force_risk():
    """certify: max over the groups of the mechanism-aware risk (and, for the near group, the
    neighbourhood intruder) equals the enumeration of every joint outcome."""
    tr, w = _tiny_prb()
    near_rows = np.diff(tr.indptr) > 0
    mech, nb, cell = enumerated_parts(tr, _enumerate(tr, w))
    want = max(mech, float(nb[near_rows[cell]].max()))
    got = certify(tr)
    assert got.max_risk == pytest.approx(want, abs=1e-12)
    near_group = tr.restrict(np.array([0, 2, 4]))
    assert not near_group.uniform
    assert neighbourhood_risk(near_group).max_risk == pytest.approx(
        float(nb[near_rows[cell]].max()), abs=1e-12)


def _config(destinations: str) -> ReleaseConfig:
    return ReleaseConfig.model_validate({
        "name": "weighted-near-mc", "input": {"path": "unused.csv", "id_column": "pid",
                                              "weight": "w"},
        "key_variables": {"sex": {"range": [0, 1]}, "age": {"range": [0, 90]},
                          "race": {"range": [0, 4]}, "edu": {"range": [0, 7]}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 20, 40, 60]}},
        "risk": {"xi": 0.395, "small_blocks": "merge", "weighted": True,
                 "destinations": destinations},
        "seed": 1,
    })


def _released_cells(frame, plan, cfg, seeds):
    """Every record's released cell under ``plan`` for each of ``seeds`` in turn: the
    per-record step every executor runs (record-keyed draws of the PRB records,
    :func:`released_cells`); the draw plan and the drawing identities, which do not depend
    on the seed, made once."""
    dplan = draw_plan(plan, cfg)
    rec = plan.partitioned.cells.record_cell
    rows = np.flatnonzero(plan.cell_prb[rec] >= 0)
    ident = unique_identities(*drawing_identities(frame, rec, dplan, cfg))
    for seed in seeds:
        out = rec.copy()
        out[rows] = released_cells(dplan, rec[rows], ident, int(seed))
        yield out


def _planned(frame, cfg):
    part = partition_frame(frame, cfg)
    W = np.bincount(part.cells.record_cell, weights=frame["w"].to_numpy(),
                    minlength=part.cells.n_cells)
    return part, W, plan_release(part, cfg, W)


def test_weighted_near_totals_unbiased_monte_carlo():
    """40 releases (seeds 2000-2039) of one weighted x near plan. Exact variance of a cell's
    released weighted total: records move independently, so Var(W*_l) = sum_i w_i^2 P_i(l)
    (1 - P_i(l)) with P_i(l) the entry (cell of i, l) of its PRB's transition matrix; the SE
    of the mean of 40 releases is sqrt(Var / 40). For every cell of a weight-balanced group
    the mean is within 4.5 SE of W_l (Bonferroni over ~1,000 cells at 4.5 SE: a false alarm
    has probability ~0.7%), and at most 2% of them beyond 3 SE (chance: 0.27%). The released
    counts' means agree with their exact (drifting) expectations the same way. Moved records
    change fewer keys than under weighted x uniform (the point of near)."""
    frame = _survey()
    cfg = _config("near")
    part, W, plan = _planned(frame, cfg)
    assert plan.certificate <= 0.395
    wd = plan.weighted
    assert (wd.groups["w"] == "near").mean() > 0.8
    n_c = part.cells.n_cells
    rec = part.cells.record_cell
    w = frame["w"].to_numpy()
    var_w, var_t = np.zeros(n_c), np.zeros(n_c)
    for b, tr in enumerate(plan.transitions):
        cells = plan.prb_cells[plan.prb_start[b]:plan.prb_start[b] + tr.k]
        P = tr.matrix()
        local = np.full(n_c, -1)
        local[cells] = np.arange(tr.k)
        inside = np.flatnonzero(local[rec] >= 0)
        p_rec = P[local[rec[inside]]]              # (records, k): P_i(l)
        var_w[cells] = (w[inside, None] ** 2 * p_rec * (1 - p_rec)).sum(axis=0)
        var_t[cells] = (p_rec * (1 - p_rec)).sum(axis=0)
    runs = 40
    tot_w, tot_t = np.zeros((runs, n_c)), np.zeros((runs, n_c))
    keys_changed = []
    codes = part.cells.key_codes
    for r, released in enumerate(_released_cells(frame, plan, cfg, 2000 + np.arange(runs))):
        tot_w[r] = np.bincount(released, weights=w, minlength=n_c)
        tot_t[r] = np.bincount(released, minlength=n_c)
        moved = released != rec
        keys_changed.append((codes[rec[moved]] != codes[released[moved]]).sum(axis=1))
    balanced = np.isin(wd.cell_group, wd.groups.loc[wd.groups["design"] == "weighted",
                                                    "group"].to_numpy())
    assert balanced.sum() > 300
    z = (tot_w.mean(axis=0) - W)[balanced] / np.sqrt(var_w[balanced] / runs)
    assert np.abs(z).max() < 4.5, np.abs(z).max()
    assert (np.abs(z) > 3).mean() <= 0.02
    et = expected_totals(part.cells.frequency, plan.cell_design())
    sens = wd.cell_group >= 0
    zt = (tot_t.mean(axis=0) - et)[sens] / np.sqrt(var_t[sens] / runs)
    assert np.abs(zt).max() < 4.5 and (np.abs(zt) > 3).mean() <= 0.02
    near_keys = np.concatenate(keys_changed).mean()
    # weighted x uniform on the same file, same seeds: moves go anywhere in the group
    ucfg = _config("uniform")
    _, _, uplan = _planned(frame, ucfg)
    uni = []
    for released in _released_cells(frame, uplan, ucfg, 2000 + np.arange(runs)):
        moved = released != rec
        uni.append((codes[rec[moved]] != codes[released[moved]]).sum(axis=1))
    uni_keys = np.concatenate(uni).mean()
    assert near_keys < uni_keys, (near_keys, uni_keys)
