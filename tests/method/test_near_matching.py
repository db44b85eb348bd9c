"""The matching kernel of the near design (``risk.near: {kernel: matching}``, sdc.method.near;
docs/METHOD.md 7.12, docs/HOUSEHOLDS.md "Near compositions"; issue 44): W is exactly doubly
stochastic with 2s destinations of weight 1/(2s); the first matching is the least-cost
derangement (checked by enumerating every derangement of tiny PRBs); the record cost is the
number of persons whose released keys change (checked against the realization of the
composition stage); a cell with a fragile class gets a destination that takes it away; the
exact person- and household-level certificates of a matching W equal the enumeration of every
household's outcome; the composition stage's released cell counts stay unbiased (z from the
exact variance) and its changed persons agree with their exact expectation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sdc.config.model import NearSpec
from sdc.method.household_composition import realize_compositions
from sdc.method.household_person_risk import SourceCells, level_risk
from sdc.method.near import (
    KeyMetric,
    fragile_classes,
    matching_destinations,
    near_transition,
    record_cost,
)


def _compositions(rng: np.random.Generator, k: int, size: int, n_cls: int) -> np.ndarray:
    out = np.zeros((k, n_cls), np.int64)
    for j in range(k):
        np.add.at(out[j], rng.integers(0, n_cls, size=size), 1)
    return out


def _stage(rng: np.random.Generator, k: int, size: int, n_cls: int, n_hk: int):
    """Codes (household key, composition) of k distinct cells of one household size and the
    metrics of a composition stage (the household key scaled as key_metrics does)."""
    seen, rows, comps = set(), [], []
    while len(rows) < k:
        n = _compositions(rng, 1, size, n_cls)[0]
        a = int(rng.integers(0, n_hk))
        if (a, tuple(n)) in seen:
            continue
        seen.add((a, tuple(n)))
        rows.append((a, len(comps)))
        comps.append(n)
    metrics = [KeyMetric("region", "nominal", scale=size + 1.0, size=n_hk),
               KeyMetric("household_composition", "composition", counts=np.array(comps))]
    return np.array(rows, np.int64), metrics


@pytest.mark.parametrize("seed", range(12))
def test_matching_w_is_doubly_stochastic(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(5, 40))
    codes, metrics = _stage(rng, k, int(rng.integers(3, 5)), 4, 3)  # >= 60 possible cells
    t = rng.integers(1, 3, size=k)
    for neighbours in (4, 6):
        opts = NearSpec(neighbours=neighbours, kernel="matching")
        if k - 1 < neighbours:
            continue
        tr, info = near_transition(codes, np.zeros(k, np.uint64), t, 0.7, metrics, opts)
        assert info["w"] == "near" and info["kernel"] == "matching"
        w = np.zeros((k, k))
        indptr, indices, weights = tr.csr()
        rows = np.repeat(np.arange(k), np.diff(indptr))
        np.add.at(w, (rows, indices), weights)
        assert np.allclose(w.sum(axis=1), 1.0, atol=1e-15)
        assert np.allclose(w.sum(axis=0), 1.0, atol=1e-15)
        assert np.all(np.diag(w) == 0.0)
        assert set(np.unique(w)) <= {0.0, 1.0 / neighbours}   # distinct destinations


@pytest.mark.parametrize("seed", range(8))
def test_first_matching_is_the_least_cost_derangement(seed):
    rng = np.random.default_rng(100 + seed)
    k = 6
    cost = rng.integers(0, 5, size=(k, k)).astype(float)
    best = min(sum(cost[i, p[i]] for i in range(k))
               for p in itertools.permutations(range(k)) if all(p[i] != i for i in range(k)))
    dest = matching_destinations(cost, 3)
    assert sum(cost[i, dest[i, 0]] for i in range(k)) == best
    assert all(len(set(dest[i])) == 3 and i not in dest[i] for i in range(k))


@pytest.mark.parametrize("seed", range(6))
def test_record_cost_counts_the_persons_that_change(seed):
    """record_cost(j, l) = the persons of a household of cell j released in cell l whose keys
    differ, as the composition stage releases them (realize_compositions; every member takes
    the released household keys)."""
    rng = np.random.default_rng(200 + seed)
    size, n_cls = int(rng.integers(1, 6)), 5
    codes, metrics = _stage(rng, 12, size, n_cls, 3)
    cost = record_cost(codes, metrics)
    counts = metrics[1].counts[codes[:, 1]]
    for j, ell in itertools.product(range(12), repeat=2):
        cls = np.repeat(np.arange(n_cls), counts[j])
        new = realize_compositions(np.zeros(size, np.int64), cls,
                                   rng.permutation(size).astype(np.uint64),
                                   counts[j][None], counts[ell][None])
        changed = size if codes[j, 0] != codes[ell, 0] else int((new != cls).sum())
        assert cost[j, ell] == changed


def test_a_fragile_class_gets_a_destination_that_takes_it_away():
    """Cell 0 holds class 3, which no non-sensitive household of its household keys holds: one
    of its destinations has no member of class 3 or other household keys, although every
    cheaper destination keeps it."""
    counts = np.array([[2, 0, 0, 1], [1, 1, 0, 1], [2, 0, 1, 0], [1, 0, 1, 1], [0, 2, 0, 1],
                       [1, 1, 1, 0], [3, 0, 0, 0]])
    codes = np.column_stack([np.zeros(7, np.int64), np.arange(7)])
    metrics = [KeyMetric("region", "nominal", scale=4.0, size=1),
               KeyMetric("household_composition", "composition", counts=counts)]
    sensitive = np.array([True] * 6 + [False])      # cell 6 (no class 3) never moves
    fragile = fragile_classes(codes, np.array([1, 1, 1, 1, 1, 1, 5]), sensitive, metrics, 0.395)
    assert fragile[0].tolist() == [False, False, False, True, False]  # last: the size
    dest = matching_destinations(record_cost(codes[:6], metrics), 2)
    plain = {int(d) for d in dest[0]}
    assert all(counts[d, 3] > 0 for d in plain)      # the plain matchings keep class 3
    from sdc.method.near import _keeps

    keeps = _keeps(codes[:6], metrics, fragile[:6])
    dest = matching_destinations(record_cost(codes[:6], metrics), 2, keeps)
    assert any(counts[d, 3] == 0 for d in dest[0])


def _brute_force(c: SourceCells) -> dict[str, float]:
    from test_household_person_risk import brute_force

    return brute_force(c)


@pytest.mark.parametrize("seed", range(8))
def test_matching_rows_certify_as_enumerated(seed):
    """A matching W's exact person-level and household-level figures equal the enumeration of
    every household's outcome (5 households of one size, one per cell, 2 household-key
    values)."""
    assert_matching_certifies_as_enumerated(np.random.default_rng(300 + seed),
                                            NearSpec(neighbours=4, kernel="matching"))


def assert_matching_certifies_as_enumerated(rng: np.random.Generator, spec: NearSpec) -> None:
    """The matching W of ``spec`` on 5 households of one size (one per cell, >= 6 possible
    cells): the exact person-level and household-level figures equal the enumeration."""
    k, size, n_cls = 5, int(rng.integers(2, 4)), 2
    codes, metrics = _stage(rng, k, size, n_cls, 2)
    t = np.ones(k, np.int64)
    tr, _ = near_transition(codes, np.zeros(k, np.uint64), t, 1.0, metrics, spec)
    theta = float(rng.uniform(0.3, 0.9))
    indptr, indices, weights = tr.csr()
    counts = metrics[1].counts[codes[:, 1]]
    c = SourceCells(codes[:, 0], counts, t, np.full(k, theta), np.zeros(k, np.int64), 2,
                    indptr, indices, weights)
    bf = _brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    assert r.unconditional == pytest.approx(bf["unconditional"], abs=1e-12)
    one = SourceCells(codes[:, 0], np.ones((k, 1), np.int64), t, np.full(k, theta),
                      np.zeros(k, np.int64), 2, indptr, indices, weights)
    assert level_risk(one).max_risk == pytest.approx(_brute_force(one)["own_cell"], abs=1e-12)


def test_released_counts_unbiased_and_changed_persons_as_expected():
    """The composition stage under the matching kernel on a generated household file: every
    released (household keys, composition) count's mean over 40 seeds within 4.5 standard
    errors of the original (z = (mean - t) / (sd / sqrt(40)), sd the count's SD over the
    seeds; a two-sided t_39 tail of 6e-5 per cell, a few hundred cells), a count that never
    varies equal to the original; the mean changed persons within 4 SD / sqrt(40) of
    expected_persons_changed (households draw independently)."""
    import yaml

    from sdc.config.load import parse_config
    from sdc.method.cells import encode_key
    from sdc.method.household_batches import household_identity
    from sdc.method.household_composition import (
        composition_stage,
        composition_table,
        expected_persons_changed,
        person_classes,
        plan_composition_stage,
    )
    from sdc.method.households import household_codes
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    cfg = parse_config(yaml.safe_load("""
name: m
input: {path: x.csv, household_id: hh_id, id_column: person_id}
key_variables:
  region: {range: [1, 6], level: household}
  sex: {categories: [1, 2]}
  age: {range: [0, 95], recode: {bands: [0, 16, 25, 50, 65]}}
risk: {xi: 0.5, composition: protect, destinations: near,
       near: {neighbours: 4, kernel: matching}, theta: calibrated}
seed: 1
output: {dir: out}
"""), None, source="test")
    from sdc.io.recode import recode_frame

    f = recode_frame(frame, cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = composition_table(code, pc, first.size, n_cls)
    hk = np.column_stack([encode_key(f["region"].iloc[first], "region",
                                     cfg.key_variables["region"])])
    ident = household_identity(f.iloc[first], cfg)
    planned = plan_composition_stage(hk, tab, cfg)
    cp = planned[0]
    assert cp.plan is not None and cp.plan.transitions is not None
    e, var = expected_persons_changed(cp, tab)
    codes = cp.codes
    cell_key = lambda c: c[:, 0] * tab.n_compositions + c[:, 1]  # noqa: E731
    keys = np.unique(cell_key(codes))
    orig = np.array([(cell_key(codes) == x).sum() for x in keys], float)
    runs, changed = [], []
    for seed in range(40):
        st = composition_stage(ident, hk, tab, cfg, seed, planned=planned)
        rel = cell_key(st.released_codes)
        runs.append([(rel == x).sum() for x in keys])
        size = tab.size[tab.household]
        hk_moved = (st.released_codes[:, 0] != hk[:, 0])
        moved = np.abs(tab.counts[tab.household]
                       - tab.counts[st.released_composition]).sum(axis=1) // 2
        changed.append(int(np.where(hk_moved, size, moved).sum()))
    runs = np.array(runs, float)
    sd = runs.std(axis=0, ddof=1)
    live = sd > 0
    z = (runs.mean(axis=0)[live] - orig[live]) / (sd[live] / math.sqrt(40))
    assert live.sum() > 20 and np.abs(z).max() <= 4.5, np.abs(z).max()
    assert np.array_equal(runs[0, ~live], orig[~live])
    assert abs(np.mean(changed) - e) <= 4 * math.sqrt(var / 40), (np.mean(changed), e)
