"""The exact person-level and household-level certificates of ``risk.composition: protect``
(sdc.method.household_person_risk, docs/METHOD.md 7.7; issue 44), checked against a brute-force
enumeration of every household's outcome on tiny files (exact to 1e-12 for the own-class picks,
the other-class bound above the enumerated figure for every rank of the target), and against a
Monte Carlo intruder written apart from the code on sdcMicro's testdata."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from sdc.method.household_person_risk import SourceCells, level_risk


def _rows(c: SourceCells) -> list[list[tuple[int, float]]]:
    """Every household's transition row (destination cell, probability), one per household:
    its near row when it has one, else uniform over its group's other cells."""
    grp = np.asarray(c.group)
    indptr, dest, weight = c.rows()
    out = []
    for j in range(grp.size):
        members = np.flatnonzero(grp == grp[j]) if grp[j] >= 0 else np.array([j])
        near = range(int(indptr[j]), int(indptr[j + 1]))
        m = float(c.move[j]) if (members.size >= 2 or len(near)) and grp[j] >= 0 else 0.0
        if len(near):
            row = [(j, 1.0 - m)] + [(int(dest[e]), m * float(weight[e])) for e in near]
        else:
            row = [(j, 1.0 - m)] + [(int(d), m / (members.size - 1)) for d in members if d != j]
        out += [[(d, p) for d, p in row if p > 0]] * int(c.t[j])
    return out


def _owner(c: SourceCells) -> list[int]:
    return [j for j in range(len(c.t)) for _ in range(int(c.t[j]))]


def _released_class(n: np.ndarray, n2: np.ndarray, cls: int, rank: int) -> int:
    """The realization of sdc.method.household_composition.realize_compositions for the
    member of class ``cls`` with rank ``rank`` (0 = smallest identity) in its class."""
    if rank < n2[cls]:
        return cls
    surplus = np.maximum(n - n2, 0)
    deficit = np.maximum(n2 - n, 0)
    pos = int(surplus[:cls].sum()) + rank - int(n2[cls])
    slots = np.repeat(np.arange(n.size), deficit)
    return int(slots[pos])


def brute_force(c: SourceCells) -> dict[str, float]:
    """Every figure of :class:`LevelRisk`, enumerated: ``own_cell`` (rank 0, the pick in the
    target's true cell, given its count), ``own_class`` (rank 0, own class, any HK),
    ``other`` (another class, every rank), ``unconditional`` (rank 0, own cell, E[1/S])."""
    rows, owner = _rows(c), _owner(c)
    counts = np.asarray(c.counts)
    p_cls = counts.shape[1]
    first = {j: owner.index(j) for j in set(owner)}
    joint: dict = defaultdict(float)
    marg: dict = defaultdict(float)
    unc: dict = defaultdict(float)
    for outcome in itertools.product(*rows):
        prob = float(np.prod([p for _, p in outcome]))
        dest = [d for d, _ in outcome]
        s = defaultdict(int)
        for d in dest:
            for cl in range(p_cls):
                s[(int(c.hk[d]), cl)] += int(counts[d, cl])
        for z, v in s.items():
            marg[(z, v)] += prob
        for j, h in first.items():
            d = dest[h]
            for cl in np.flatnonzero(counts[j] > 0):
                for r in range(int(counts[j, cl])):
                    rc = _released_class(counts[j], counts[d], int(cl), r)
                    z = (int(c.hk[d]), rc)
                    joint[(j, int(cl), r, z, s[z])] += prob
                    if r == 0 and z == (int(c.hk[j]), int(cl)):
                        unc[(j, int(cl))] += prob / s[z]
    out = {"own_cell": 0.0, "own_class": 0.0, "other": 0.0,
           "unconditional": max(unc.values(), default=0.0)}
    for (j, cl, r, z, sv), p in joint.items():
        risk = p / sv / marg[(z, sv)]
        if z[1] == cl and r == 0:
            out["own_class"] = max(out["own_class"], risk)
            if z[0] == int(c.hk[j]):
                out["own_cell"] = max(out["own_cell"], risk)
        elif z[1] != cl:
            out["other"] = max(out["other"], risk)
    return out


def _random_cells(rng: np.random.Generator, n_cls: int) -> SourceCells:
    """A few cells in two groups (a group's cells share a household size, as the
    composition stage's PRBs do) and maybe an unchanged cell."""
    k = int(rng.integers(3, 6))
    t = rng.integers(0, 3, size=k)
    t[:2] = np.maximum(t[:2], 1)
    while _households_space(t, k) > 30_000:
        t[int(np.argmax(t))] -= 1
    group = rng.integers(-1, 2, size=k)
    group[:3] = [0, 0, 1]
    if (group == 1).sum() < 2:
        group[3 if k > 3 else 2] = 1
    group = np.unique(group, return_inverse=True)[1] - (1 if (group == -1).any() else 0)
    size = rng.integers(1, 4, size=k)
    for g in range(int(group.max()) + 1):
        size[group == g] = size[np.flatnonzero(group == g)[0]]
    counts = np.zeros((k, n_cls), np.int64)
    for j in range(k):
        np.add.at(counts[j], rng.integers(0, n_cls, size=int(size[j])), 1)
    n_hk = int(rng.integers(2, 4))
    return SourceCells(rng.integers(0, n_hk, size=k), counts, t, rng.uniform(0.1, 0.9, size=k),
                       group.astype(np.int64), n_hk)


def _households_space(t: np.ndarray, k: int) -> int:
    return int(k ** int(t.sum()))


@pytest.mark.parametrize("seed", range(24))
def test_person_level_equals_the_enumeration(seed):
    rng = np.random.default_rng(seed)
    c = _random_cells(rng, 2)
    bf = brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    assert r.unconditional == pytest.approx(bf["unconditional"], abs=1e-12)
    assert r.other >= bf["other"] - 1e-12
    assert r.any_cell == max(r.own_class, r.other)


def _with_near_rows(c: SourceCells, rng: np.random.Generator) -> SourceCells:
    """``c`` with a near row (a random subset of its group's other cells, random weights)
    for every cell of group 0."""
    grp = np.asarray(c.group)
    k = grp.size
    rows: list[list[tuple[int, float]]] = [[] for _ in range(k)]
    g0 = np.flatnonzero(grp == 0)
    for j in g0:
        others = g0[g0 != j]
        pick = others[rng.random(others.size) < 0.7]
        pick = pick if pick.size else others[:1]
        w = rng.uniform(0.2, 1.0, size=pick.size)
        rows[j] = list(zip(pick.tolist(), (w / w.sum()).tolist(), strict=True))
    indptr = np.r_[0, np.cumsum([len(r) for r in rows])]
    dest = np.array([d for r in rows for d, _ in r], np.int64)
    weight = np.array([w for r in rows for _, w in r])
    return SourceCells(c.hk, c.counts, c.t, c.move, c.group, c.n_hk, indptr, dest, weight)


@pytest.mark.parametrize("seed", range(16))
def test_near_rows_equal_the_enumeration(seed):
    """Near destinations (risk.destinations: near, the household design's candidates)."""
    rng = np.random.default_rng(500 + seed)
    c = _with_near_rows(_random_cells(rng, 2), rng)
    bf = brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    assert r.unconditional == pytest.approx(bf["unconditional"], abs=1e-12)
    assert r.other >= bf["other"] - 1e-12


@pytest.mark.parametrize("seed", range(8))
def test_household_level_equals_the_enumeration(seed):
    """One class, one member per household: the HK intruder, exact."""
    rng = np.random.default_rng(100 + seed)
    c = _random_cells(rng, 1)
    c = SourceCells(c.hk, np.ones((c.hk.size, 1), np.int64), c.t, c.move, c.group, c.n_hk)
    bf = brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    assert r.unconditional == pytest.approx(bf["unconditional"], abs=1e-12)
    assert bf["other"] == 0.0 and r.other == 0.0


def test_a_singular_household_alone_in_its_class_is_found():
    """A household whose HK is drawn uniformly over 4 combinations (a singular size), the
    only one of its composition: wherever it lands its members are alone in their cells, so
    the mechanism-aware intruder who sees a count of 1 finds them (1.0), and the pick in the
    true cell succeeds with probability 1/4 unconditionally; a second such household halves
    neither exactly (enumerated)."""
    n = 4
    one = SourceCells(np.arange(n), np.tile([[1, 1]], (n, 1)), np.r_[1, np.zeros(n - 1, int)],
                      np.full(n, 0.75), np.zeros(n, np.int64), n)
    r = level_risk(one)
    assert r.any_cell == pytest.approx(1.0) and r.max_risk == pytest.approx(1.0)
    assert r.unconditional == pytest.approx(0.25)
    two = SourceCells(np.arange(n), np.tile([[1, 1]], (n, 1)), np.r_[1, 1, np.zeros(n - 2, int)],
                      np.full(n, 0.75), np.zeros(n, np.int64), n)
    bf = brute_force(two)
    r = level_risk(two)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.unconditional == pytest.approx(bf["unconditional"], abs=1e-12)


def _testdata_protect(tmp_path):
    """sdcMicro's testdata with the composition stage of tests/method/
    test_household_composition.py (urbrur, water, walls; sex, age in 3 bands; xi 0.395)."""
    import pandas as pd
    import yaml
    from household_helpers import TESTDATA

    from sdc.config.load import load_config
    from sdc.io.recode import recode_frame
    from sdc.method.cells import encode_key
    from sdc.method.household_composition import (
        composition_plan,
        composition_table,
        person_classes,
    )
    from sdc.method.households import household_codes

    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    raw = {"name": "t", "input": {"path": str(TESTDATA), "household_id": "ori_hid"},
           "key_variables": {
               "urbrur": {"categories": [1, 2], "level": "household"},
               "water": {"categories": list(range(1, 10)), "level": "household"},
               "walls": {"categories": [2, 3, 9], "level": "household"},
               "sex": {"categories": [1, 2]},
               "age": {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}},
           "risk": {"xi": 0.395, "small_blocks": "calibrate", "composition": "protect"},
           "seed": 1}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    f = recode_frame(pd.read_csv(TESTDATA), cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = composition_table(code, pc, first.size, n_cls)
    hk = np.column_stack([encode_key(f[k].iloc[first], k, cfg.key_variables[k])
                          for k in cfg.household_keys])
    return cfg, tab, hk, composition_plan(hk, tab, cfg)


@pytest.mark.slow
def test_monte_carlo_intruder_written_apart_agrees(tmp_path):
    """A Monte Carlo intruder written apart from the code (the stage simulated from the
    plan's cells, PRBs and theta: m_j = theta/t_j, uniform over the PRB's other cells;
    singular households' HK uniform), 4,000 replays on sdcMicro's testdata: for the 40
    moving targets of largest exact own-cell risk, the intruder's success given every count
    s seen at least 150 times agrees with the exact R(s) within 4 standard errors (binomial
    SE of the success frequency among those replays; 4 SE: a few hundred comparisons), and
    the unconditional success E[1{B in its cell}/S] within 4 SE of its exact value (of the
    bound when counts reach beyond the scan of s)."""
    from sdc.method.household_person_risk import composition_sources, level_risk

    cfg, tab, hk, cp = _testdata_protect(tmp_path)
    trace: dict = {}
    exact = level_risk(composition_sources(cp, tab), trace=trace)
    assert exact.max_risk <= cfg.risk.xi
    plan = cp.plan
    cells = plan.partitioned.cells
    kc = np.asarray(cells.key_codes)
    n_c = kc.shape[0]
    t = np.asarray(cells.frequency)
    theta = np.array([b.theta for b in plan.block_plan.blocks])
    prb = np.asarray(plan.cell_prb)
    move = np.where(prb >= 0, theta[np.maximum(prb, 0)] / t, 0.0)
    members = {b: np.flatnonzero(prb == b) for b in np.unique(prb[prb >= 0])}
    hk_rows = np.unique(hk, axis=0)
    hk_of_cell = np.array([int(np.flatnonzero((hk_rows == r).all(axis=1))[0])
                           for r in kc[:, :-1]])
    hh_cell = np.asarray(cp.cell)                 # cells of the non-singular households
    sing = np.asarray(cp.singular)
    sing_counts = tab.counts[tab.household[sing]]
    rng = np.random.default_rng(20261205)
    n_rep = 4000
    rel = np.repeat(hh_cell[None], n_rep, axis=0)
    moved = rng.random(rel.shape) < move[rel]
    for mem in members.values():
        sel = moved & np.isin(rel, mem)
        pick = rng.integers(0, mem.size - 1, size=int(sel.sum()))
        own_pos = np.searchsorted(mem, rel[sel])
        rel[sel] = mem[pick + (pick >= own_pos)]
    rel_hk = hk_of_cell[rel]
    rel_counts = tab.counts[kc[rel, -1]]           # (n_rep, H', P)
    sing_rel_hk = rng.integers(0, hk_rows.shape[0], size=(n_rep, sing.size))
    moving = sorted(((k, v) for k, v in trace.items() if k[0] < n_c),
                    key=lambda kv: -kv[1][1].max())[:40]
    checked = 0
    for (j, cl), (s_vals, r_exact, unc_exact) in moving:
        a = hk_of_cell[j]
        s_count = (np.where(rel_hk == a, rel_counts[..., cl], 0).sum(axis=1)
                   + np.where(sing_rel_hk == a, sing_counts[:, cl][None], 0).sum(axis=1))
        h0 = int(np.flatnonzero(hh_cell == j)[0])  # the target's household; its rank-0 member
        b_in = (rel_hk[:, h0] == a) & (rel_counts[:, h0, cl] >= 1)
        hit = np.where(b_in, 1.0 / np.maximum(s_count, 1), 0.0)
        se = hit.std(ddof=1) / np.sqrt(n_rep)
        if s_count.max() <= s_vals[-1]:  # every count inside the scan: the figure is exact
            assert abs(hit.mean() - unc_exact) <= 4 * se + 1e-9, (j, cl, hit.mean(), unc_exact)
        else:  # counts beyond the scan are bounded by its end: an upper bound
            assert hit.mean() <= unc_exact + 4 * se + 1e-9, (j, cl, hit.mean(), unc_exact)
        for s, r in zip(s_vals, r_exact, strict=True):
            seen = s_count == s
            if seen.sum() < 150 or s < 1:
                continue
            p_hat = b_in[seen].mean() / s
            se = np.sqrt(max(r * s * (1 - r * s), 1e-12) / seen.sum()) / s
            assert abs(p_hat - r) <= 4 * se + 1e-9, (j, cl, s, p_hat, r, se)
            checked += 1
    assert checked >= 40
