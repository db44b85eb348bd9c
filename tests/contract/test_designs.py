"""The contract of every registered transition design (sdc/method/designs; scikit-learn's
``parametrize_with_checks`` is the model): each design the registry knows runs through the same
checks, a design added by one :func:`register_design` call included.

- planning: the plan carries the design, certifies at most xi, and the certificate is the
  maximum of every PRB's exact certificate (:func:`certify` of its (m, W)) and of 1/t_j over
  the non-sensitive cells;
- W: a zero diagonal, rows summing to 1, and columns summing to 1 inside every group where the
  design claims it doubly stochastic; moves in [0, 1];
- the exact certificate equals a brute-force enumeration of every joint outcome of the records
  of the small PRBs (the intruder who picks a released record of any cell z, and the
  neighbourhood intruder on CSR rows, as :mod:`sdc.method.transition_risk` defines them);
- unbiasedness: what the design keeps (counts, or the weighted totals of its weight-balanced
  groups) is exact in expectation from the transition probabilities, and the mean of 120
  releases (record-keyed draws, seeds 5000-5119) is within 4.5 standard errors of the exact
  expectation for every cell, at most 2% beyond 3 SE. The SE is exact: records move
  independently, so Var(X*_l) = sum_i x_i^2 P_i(l) (1 - P_i(l)) (x_i = 1 for counts, the
  weight for weighted totals) and the SE of a mean of R releases is sqrt(Var / R); 4.5 SE over
  a few hundred cells is a false alarm with probability below 0.2% (Bonferroni), 2% beyond 3 SE
  against 0.27% expected;
- the audit's re-derivation: the design planned again from the same cell table (the design's
  own ``plan``, not the planning memo of this folder) gives the same W (digests), moves and
  certificate;
- every executor's bytes: the released cell of a record is a function of the record alone
  (record-keyed draws), so releasing the records in one batch, in batches of 7 and in reverse
  order gives the same cells (what every executor does; the built-in designs' whole releases
  are also held to the in-memory one's bytes by tests/contract/test_executors.py: near,
  weighted, weighted-near).

The fourth design, "next cell" (a record that moves goes to the lexicographically next cell of
its PRB, cyclically: W a cyclic permutation, doubly stochastic; theta per PRB the smallest
whose exact certificate is <= xi), lives in this file only and is added by one registration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from enumerated_risk import enumerated_risk

from sdc.config.model import ReleaseConfig
from sdc.errors import CertificationError
from sdc.method.designs import (
    design_names,
    expected_cell_totals,
    get_design,
    plan_release,
    prb_transitions_of,
    register_design,
    with_transitions,
)
from sdc.method.draws import drawing_identities, unique_identities
from sdc.method.partition import partition_frame
from sdc.method.plan import draw_plan, plan_prbs
from sdc.method.postrandomize import released_cells
from sdc.method.risk import calibrate_with
from sdc.method.transition import Transition, nzy_move, uniform_transition
from sdc.method.transition_risk import certify


# -- the fourth design: written here, registered once ---------------------------------------------
@dataclass(frozen=True)
class NextCell:
    """A moving record goes to the next cell of its PRB (cells in key order, the last to the
    first): W is the cyclic permutation, m_j = theta_b / t_j with theta_b the smallest whose
    exact certificate is <= xi."""

    name: str = "next cell"
    title: str = "next cell"
    description: str = ("a moving record takes the key values of the next rare combination of "
                        "its block (cyclically)")
    needs_weights: bool = False
    doubly_stochastic: bool = True
    nzy_moves: bool = False          # theta is calibrated here: the transitions carry m_j
    unbiased: str = "counts"
    near: bool = False
    weighted: bool = False
    codebook: tuple[str, ...] = ()
    weight_note: str | None = None

    def plan(self, part, config, weight_total=None):
        base = plan_prbs(part, config)
        t = part.cells.frequency
        transitions = []
        for b, start in zip(base.block_plan.blocks, base.prb_start, strict=True):
            tb = t[base.prb_cells[int(start):int(start) + b.k]]
            if b.k < 2:
                transitions.append(uniform_transition(tb, 0.0))
                continue
            ring = np.roll(np.arange(b.k, dtype=np.int64), -1)   # j -> j + 1, the last -> 0

            def at(theta: float, tb=tb, ring=ring) -> Transition:
                return Transition(tb, nzy_move(tb, theta), np.arange(tb.size + 1, dtype=np.int64),
                                  ring, np.ones(tb.size), float(theta), "next cell")

            theta = calibrate_with(lambda th, at=at: certify(at(th)).max_risk <= part.xi,
                                   float(min(1.0, tb.min())))
            if theta is None:
                raise CertificationError(f"next cell: no theta certifies a PRB of {b.k} cells")
            transitions.append(at(theta))
        return with_transitions(base, transitions, self)


register_design(NextCell())

DESIGNS = design_names()
XI = 0.6


def test_the_fourth_design_is_registered_beside_the_built_in_ones():
    assert DESIGNS[:4] == ("uniform", "near", "weighted", "weighted x near")
    assert "next cell" in DESIGNS


# -- data ------------------------------------------------------------------------------------------
def _config(name: str = "designs") -> ReleaseConfig:
    return ReleaseConfig.model_validate({
        "name": name, "input": {"path": "unused.csv", "id_column": "pid", "weight": "w"},
        "key_variables": {"sex": {"range": [0, 1]}, "age": {"range": [0, 90]},
                          "race": {"range": [0, 4]}, "edu": {"range": [0, 7]}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 20, 40, 60]}},
        "risk": {"xi": XI, "small_blocks": "merge"}, "seed": 1,
    })


def _survey(n: int = 900, seed: int = 5) -> pd.DataFrame:
    """Generated survey: four keys, weights by stratum (ratio 4) with noise."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": np.arange(n), "sex": rng.integers(0, 2, n),
        "age": np.minimum(rng.gamma(4, 9, n).astype(int), 90),
        "race": rng.choice(5, n, p=[.7, .15, .08, .05, .02]),
        "edu": rng.choice(8, n, p=[.02, .05, .1, .3, .25, .15, .1, .03]),
        "w": (np.array([50.0, 90, 140, 200])[rng.integers(0, 4, n)]
              * rng.uniform(0.97, 1.03, n)).round(2),
    })


def _tiny_config() -> ReleaseConfig:
    return ReleaseConfig.model_validate({
        "name": "tiny", "input": {"path": "unused.csv", "id_column": "pid", "weight": "w"},
        "key_variables": {"a": {"range": [0, 5]}, "b": {"range": [0, 6]}},
        "partition": {"a": "as_is"}, "risk": {"xi": XI, "small_blocks": "merge"}, "seed": 1,
    })


def _tiny() -> pd.DataFrame:
    """Partition sets a = 0..5 of 3 to 5 singleton cells (PRBs of at most 5 records: 5^5
    joint outcomes) and a cell of 2 records each (not sensitive at xi = 0.6)."""
    rows = []
    for a in range(6):
        rows += [(a, b) for b in range(3 + a % 3)] + [(a, 6), (a, 6)]
    ab = np.array(rows)
    w = 10.0 + 7.0 * (np.arange(len(ab)) % 5)
    return pd.DataFrame({"pid": np.arange(len(ab)), "a": ab[:, 0], "b": ab[:, 1], "w": w})


_PLANS: dict = {}


def _planned(name: str, frame: pd.DataFrame, cfg: ReleaseConfig):
    """(partitioned, W_j, the design's plan), planned once per design and data set."""
    key = (name, cfg.name)
    if key not in _PLANS:
        _PLANS[key] = _plan(name, frame, cfg)
    return _PLANS[key]


def _plan(name: str, frame: pd.DataFrame, cfg: ReleaseConfig):
    part = partition_frame(frame, cfg)
    W = np.bincount(part.cells.record_cell, weights=frame["w"].to_numpy(),
                    minlength=part.cells.n_cells)
    return part, W, plan_release(part, cfg, W, design=get_design(name))


def _prb_cells(plan, b: int, k: int) -> np.ndarray:
    return plan.prb_cells[int(plan.prb_start[b]):int(plan.prb_start[b]) + k]


# -- the checks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", DESIGNS)
def test_plan_carries_its_design_and_its_exact_certificate(name):
    cfg = _config()
    part, _, plan = _planned(name, _survey(), cfg)
    design = get_design(name)
    assert plan.design == design
    assert plan.certificate <= XI + 1e-12
    risks = [certify(tr).max_risk for tr in prb_transitions_of(plan)]
    t = part.cells.frequency
    ns = plan.cell_prb < 0
    want = max(risks + ([1.0 / t[ns].min()] if ns.any() else []))
    assert plan.certificate == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("name", DESIGNS)
def test_w_has_a_zero_diagonal_and_is_doubly_stochastic_where_claimed(name):
    _, _, plan = _planned(name, _survey(), _config())
    design = get_design(name)
    for tr in prb_transitions_of(plan):
        assert ((tr.move >= 0) & (tr.move <= 1)).all()
        if tr.k < 2:
            continue
        for members in tr.groups():
            if members.size < 2:
                continue
            d = tr.restrict(members).dense()
            assert np.diag(d) == pytest.approx(np.zeros(members.size), abs=0)
            assert d.sum(axis=1) == pytest.approx(np.ones(members.size), abs=1e-12)
            if design.doubly_stochastic:
                assert d.sum(axis=0) == pytest.approx(np.ones(members.size), abs=1e-12)


@pytest.mark.parametrize("name", DESIGNS)
def test_exact_certificate_is_the_brute_force_risk_of_small_prbs(name):
    cfg = _tiny_config()
    _, _, plan = _planned(name, _tiny(), cfg)
    transitions = prb_transitions_of(plan)
    assert 3 <= len(transitions) and max(int(tr.frequency.sum()) for tr in transitions) <= 5
    for tr in transitions:
        assert certify(tr).max_risk == pytest.approx(enumerated_risk(
            tr, np.diff(tr.indptr) > 0 if not tr.uniform else np.zeros(tr.k, dtype=bool)),
            abs=1e-12)


def _release(frame, plan, cfg, seeds, order: np.ndarray | None = None,
             batch: int | None = None):
    """Every record's released cell for each of ``seeds`` in turn (the per-record step every
    executor runs), the drawing records taken in ``order`` and ``batch`` at a time."""
    dplan = draw_plan(plan, cfg)
    rec = plan.partitioned.cells.record_cell
    rows = np.flatnonzero(plan.cell_prb[rec] >= 0)
    ident = unique_identities(*drawing_identities(frame, rec, dplan, cfg))
    idx = np.arange(rows.size) if order is None else order
    step = batch or max(idx.size, 1)
    for seed in seeds:
        out = rec.copy()
        for s in range(0, idx.size, step):
            part = idx[s:s + step]
            out[rows[part]] = released_cells(dplan, rec[rows[part]], ident[part], int(seed))
        yield out


@pytest.mark.parametrize("name", DESIGNS)
def test_kept_totals_are_unbiased_exactly_and_by_monte_carlo(name):
    cfg = _config()
    frame = _survey()
    part, W, plan = _planned(name, frame, cfg)
    design = get_design(name)
    weighted = design.unbiased == "weighted totals"
    t = part.cells.frequency.astype(np.float64)
    x_rec = frame["w"].to_numpy() if weighted else np.ones(len(frame))
    x = W if weighted else t
    keep = plan.cell_prb >= 0
    if weighted:  # the weight-balanced groups (a group no c certifies keeps NZY's counts)
        g = plan.weighted.groups
        keep = np.isin(plan.weighted.cell_group, g.loc[g["design"] == "weighted", "group"])
    assert keep.sum() > 50
    expected = expected_cell_totals(plan, x)
    assert expected[keep] == pytest.approx(x[keep], rel=1e-9)
    # the exact variance of every cell's released total
    rec = part.cells.record_cell
    n_c = part.cells.n_cells
    var = np.zeros(n_c)
    for b, tr in enumerate(prb_transitions_of(plan)):
        cells = _prb_cells(plan, b, tr.k)
        local = np.full(n_c, -1)
        local[cells] = np.arange(tr.k)
        inside = np.flatnonzero(local[rec] >= 0)
        p_rec = tr.matrix()[local[rec[inside]]]
        var[cells] = (x_rec[inside, None] ** 2 * p_rec * (1 - p_rec)).sum(axis=0)
    runs = 120
    total = np.zeros(n_c)
    for released in _release(frame, plan, cfg, 5000 + np.arange(runs)):
        total += np.bincount(released, weights=x_rec, minlength=n_c)
    sens = (plan.cell_prb >= 0) & (var > 0)
    z = (total / runs - expected)[sens] / np.sqrt(var[sens] / runs)
    assert np.abs(z).max() < 4.5, np.sort(np.abs(z))[-5:]
    assert (np.abs(z) > 3).mean() <= 0.02


@pytest.mark.parametrize("name", DESIGNS)
def test_the_audit_re_derives_the_same_design(name):
    cfg = _config()
    part, W, plan = _planned(name, _survey(), cfg)
    again = _plan(name, _survey(), cfg)[2]   # planned afresh (no cache, no memo in between)
    first, second = prb_transitions_of(plan), prb_transitions_of(again)
    assert [tr.digest() for tr in first] == [tr.digest() for tr in second]
    assert all(np.array_equal(a.move, b.move) for a, b in zip(first, second, strict=True))
    assert again.certificate == plan.certificate
    assert again.design == plan.design


@pytest.mark.parametrize("name", DESIGNS)
def test_released_cells_are_the_same_whatever_the_batches(name):
    cfg = _config()
    frame = _survey()
    _, _, plan = _planned(name, frame, cfg)
    [whole] = _release(frame, plan, cfg, [77])
    n = int((plan.cell_prb[plan.partitioned.cells.record_cell] >= 0).sum())
    assert np.array_equal(whole, next(_release(frame, plan, cfg, [77], batch=7)))
    assert np.array_equal(whole, next(_release(frame, plan, cfg, [77],
                                               order=np.arange(n)[::-1], batch=13)))
    assert (whole != plan.partitioned.cells.record_cell).any()
