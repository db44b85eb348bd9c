"""Near-cell destinations, statistically (docs/METHOD.md 7.12): every cell count unbiased, and
the Monte Carlo intruders (own cell, the most likely other cell, the neighbourhood) below xi
on the demo and on adult. Fixed seeds; tolerances from the variance (said at each test)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc.config.load import load_config
from sdc.method.designs import plan_release
from sdc.method.draws import drawing_identities, unique_identities
from sdc.method.partition import partition_frame
from sdc.method.plan import draw_plan
from sdc.method.postrandomize import released_cells

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"


def _setup(name: str):
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    cfg = cfg.model_copy(update={"risk": cfg.risk.model_copy(update={"destinations": "near"})})
    frame = pd.read_csv(cfg.resolve(cfg.input.path), sep=cfg.input.delimiter)
    part = partition_frame(frame, cfg)
    plan = plan_release(part, cfg)
    dplan = draw_plan(plan, cfg)
    rec = part.cells.record_cell
    rows = np.flatnonzero(plan.cell_prb[rec] >= 0)
    ident = unique_identities(*drawing_identities(frame, rec, dplan, cfg))
    return cfg, plan, dplan, rec[rows], ident


@pytest.fixture(scope="module")
def near_setup():
    """``near_setup(name)``: :func:`_setup` made once per config for the tests of the module
    (the demo's near plan is read by two of them; read only)."""
    made: dict[str, tuple] = {}

    def setup(name: str) -> tuple:
        if name not in made:
            made[name] = _setup(name)
        return made[name]

    return setup


def _releases(dplan, cell, ident, seeds):
    for s in seeds:
        yield released_cells(dplan, cell, ident, int(s))


def test_every_cell_count_is_unbiased_under_near(near_setup):
    """R = 60 releases of the demo's sensitive records. For every cell l, the mean released
    count minus t_l, divided by its standard error sqrt(Var S_l / R) with Var S_l the exact
    variance of a sum of independent Bernoullis (sum over records of p (1 - p), p = P(record
    -> l) from the transition designs), is a z-score: their mean square is 1 within
    4 sqrt(2 / n_cells) (chi-square), and no |z| exceeds 5.5 (Bonferroni over ~18,000 cells)."""
    cfg, plan, dplan, cell, ident = near_setup("census_demo")
    n_cells = plan.partitioned.cells.n_cells
    t = plan.partitioned.cells.frequency
    R = 60
    total = np.zeros(n_cells)
    for rel in _releases(dplan, cell, ident, np.arange(R) + 1000):
        total += np.bincount(rel, minlength=n_cells)
    var = np.zeros(n_cells)
    for b, tr in enumerate(plan.transitions):
        cells = plan.prb_cells[plan.prb_start[b]:plan.prb_start[b] + tr.k]
        P = tr.matrix() if tr.k < 4000 else None
        assert P is not None
        var[cells] += (tr.frequency[:, None] * P * (1 - P)).sum(axis=0)
        assert np.allclose(tr.expected_released(), tr.frequency, atol=1e-9)
    sens = var > 0
    z = (total[sens] / R - t[sens]) / np.sqrt(var[sens] / R)
    assert abs(float(np.mean(z ** 2)) - 1.0) < 4 * np.sqrt(2.0 / sens.sum())
    assert np.abs(z).max() < 5.5


@pytest.mark.parametrize("name", ["census_demo", "adult"])
def test_monte_carlo_intruders_stay_below_xi(name, near_setup):
    """R = 24 releases. For every target record of a sensitive cell j the intruder picks one
    record uniformly among those released in (a) j, (b) the cell z != j with the largest w_jz
    (W's most likely destination), (c) N(j) = j and its W-neighbours; his success is
    1{target picked}. Per intruder and per t_j, the mean success over targets and releases
    must be <= xi + 3 SE, SE the standard error of the mean of the R per-release means (their
    binomial-type variance estimated from the releases)."""
    if name == "adult" and not ADULT.is_file():
        pytest.skip(f"{ADULT} is absent (the shared data folder is not beside the repository)")
    cfg, plan, dplan, cell, ident = near_setup(name)
    xi = cfg.risk.xi
    n_cells = plan.partitioned.cells.n_cells
    t = plan.partitioned.cells.frequency
    # per cell: its most likely other destination and its neighbourhood (CSR of W-rows)
    ip, dc, dw = dplan.dest_indptr, dplan.dest_cell, dplan.dest_weight
    near_cell = np.diff(ip)[cell] > 0
    cell, ident = cell[near_cell], ident[near_cell]
    best = np.full(n_cells, -1)
    for j in np.unique(cell):
        row = slice(ip[j], ip[j + 1])
        best[j] = dc[row][np.argmax(dw[row])]
    R = 24
    out = {k: [] for k in ("own", "other", "neighbourhood")}
    for rel in _releases(dplan, cell, ident, np.arange(R) + 77):
        full = plan.partitioned.cells.frequency.astype(np.int64).copy()
        # released counts of every cell: non-drawing records stay, drawing ones as drawn
        moved_in = np.bincount(rel, minlength=n_cells)
        moved_out = np.bincount(cell, minlength=n_cells)
        S = full - moved_out + moved_in
        own = (rel == cell) / np.maximum(S[cell], 1)
        other = (rel == best[cell]) / np.maximum(S[best[cell]], 1)
        # neighbourhood: S_N(j) = S_j + sum of S over j's row; target in N(j) always
        rowsum = np.add.reduceat(S[dc], ip[:-1][np.diff(ip) > 0])
        s_n = np.zeros(n_cells)
        s_n[np.diff(ip) > 0] = rowsum
        s_n += S
        nb = 1.0 / s_n[cell]
        for key, v in (("own", own), ("other", other), ("neighbourhood", nb)):
            out[key].append([v[t[cell] == tt].mean() for tt in (1, 2)])
    for key, vals in out.items():
        v = np.asarray(vals)            # (R, 2)
        mean = v.mean(axis=0)
        se = v.std(axis=0, ddof=1) / np.sqrt(R)
        assert (mean <= xi + 3 * se).all(), (name, key, mean, se)
