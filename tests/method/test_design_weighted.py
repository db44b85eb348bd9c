"""``sdc design`` for a weighted job (``risk.weighted``; docs/DESIGN.md, "Weighted jobs").

- the balance figures are exact: the variance of every released weighted total against the
  dense transition matrix (1e-12), the expected totals and variances against a Monte Carlo of
  record-keyed releases (fixed seeds; tolerances from the variance, see each test);
- the rule: nodes are planned with the weighted design in the rule's order until the best
  balanced one, which is recommended (fake planner: which nodes were planned, in what order);
- end to end through the CLI: the recommendation is balanced, its figures are the configured
  design's (the release's own utility.json agrees), the frontier shows every planned point's
  weighted bias.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import sdc
from sdc.cli.main import app
from sdc.method.design import Node
from sdc.method.design.balance import (
    BEYOND_MAX,
    BIAS_MAX,
    balance_figures,
    beyond_share,
    variance_totals,
)
from sdc.method.design.search import _balance
from sdc.method.transition import CellDesign, Transition, cell_design, expected_totals

runner = CliRunner()


def _random_design(rng: np.random.Generator) -> tuple[CellDesign, list[Transition], int]:
    """Two PRBs: one of two uniform groups, one with a near (CSR) W of 6 cells."""
    t1 = rng.integers(1, 5, 7)
    tr1 = Transition(t1, rng.uniform(0.05, 0.6, 7), kind="uniform",
                     group=np.array([0, 0, 0, 1, 1, 1, 1]))
    k = 6   # W = (P + P^-1) / 2 on a cycle: doubly stochastic, zero diagonal
    indptr = np.arange(k + 1) * 2
    indices = np.array([[(j - 1) % k, (j + 1) % k] for j in range(k)])
    indices.sort(axis=1)
    tr2 = Transition(rng.integers(1, 5, k), rng.uniform(0.05, 0.6, k), indptr,
                     indices.ravel(), np.full(2 * k, 0.5), kind="near")
    prb_cells = np.arange(13)
    return cell_design([tr1, tr2], prb_cells, np.array([0, 7]), 15), [tr1, tr2], 15


def test_variance_of_weighted_totals_is_the_dense_matrix_formula():
    """Var W*_l = sum_j Q_j p_jl (1 - p_jl) (records independent), against P built densely."""
    rng = np.random.default_rng(3)
    design, trs, n = _random_design(rng)
    q = rng.uniform(1, 50, n)
    want = np.zeros(n)
    for tr, cells in zip(trs, (np.arange(7), np.arange(7, 13)), strict=True):
        p = np.zeros((tr.k, tr.k))
        for members in tr.groups():
            sub = tr.restrict(members)
            p[np.ix_(members, members)] = sub.matrix()
        want[cells] = (q[cells, None] * p * (1 - p)).sum(axis=0)
    assert np.allclose(variance_totals(q, design), want, rtol=1e-12, atol=1e-12)


def test_beyond_share_is_the_chance_level_when_unbiased_and_grows_with_the_bias():
    var = np.ones(1000)
    assert beyond_share(np.zeros(1000), var) == pytest.approx(0.0027, abs=1e-4)
    # bias of 3 SE of a 30-release mean: half the cells land beyond 3 SE
    assert beyond_share(np.full(1000, 3 / np.sqrt(30)), var) == pytest.approx(0.5, abs=1e-3)


def _weighted_job(tmp_path: Path, n: int = 3000, seed: int = 4) -> Path:
    """A weighted survey: the weight depends on age and region (so weight groups matter)."""
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(45, 16, n).round(), 18, 90).astype(int)
    region = rng.integers(1, 6, n)
    frame = pd.DataFrame({
        "pid": np.arange(n), "sex": rng.integers(1, 3, n), "age": age,
        "region": region, "tenure": rng.choice(["own", "rent", "other"], n, p=[.6, .3, .1]),
        "w": np.round(rng.lognormal(0, 0.4, n) * (50 + 4 * age + 60 * region), 2),
        "income": rng.lognormal(9, 1, n).round(2)})
    data = tmp_path / "survey.csv"
    frame.to_csv(data, index=False)
    cfg = {"name": "wdes", "input": {"path": str(data), "id_column": "pid", "weight": "w"},
           "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [18, 90]},
                             "region": {"categories": [1, 2, 3, 4, 5]},
                             "tenure": {"categories": ["own", "rent", "other"]}},
           "partition": {"sex": "as_is", "age": {"bands": [18, 40, 65]}},
           "risk": {"xi": 0.395, "small_blocks": "merge", "weighted": True},
           "seed": 5,
           "output": {"dir": str(tmp_path / "releases" / "wdes"), "formats": ["parquet"]}}
    path = tmp_path / "wdes.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_balance_figures_agree_with_a_monte_carlo_of_releases(tmp_path):
    """The exact expected weighted totals and their variances against R = 400 record-keyed
    releases (seeds 100..499) of the weighted design. Means: every cell's z = (mean - E) /
    sqrt(Var / R) is N(0, 1) (CLT; a released total is a sum of independent records), so
    beyond 4.5 for at most a few of ~700 cells (P(|z| > 4.5) = 7e-6 each). Variances: the
    sum over cells of the sample variances over the exact sum; each sample variance has
    relative SD sqrt(2 / (R - 1)) = 0.071 for normal totals, and a sum of such estimates
    at most that (whatever their correlation): 4 SD = 0.28 never fails by chance."""
    from sdc.method.designs import plan_release
    from sdc.method.partition import partition_frame
    from sdc.method.weighted import WeightSums
    from tests.method.test_weighted_near import _released_cells

    cfg = sdc.load_config(_weighted_job(tmp_path))
    frame = sdc.read_input(cfg)
    w = frame["w"].to_numpy(np.float64)
    part = partition_frame(frame, cfg)
    rc = part.cells.record_cell
    cells = np.arange(part.cells.n_cells)
    wt = WeightSums.of(rc, w).result(cells)
    q = np.bincount(rc, weights=w * w, minlength=cells.size)
    plan = plan_release(part, cfg, wt)
    design = plan.cell_design()
    e, var = expected_totals(wt, design), variance_totals(q, design)
    R = 400
    tot = np.stack([np.bincount(rel, weights=w, minlength=cells.size)
                    for rel in _released_cells(frame, plan, cfg, 100 + np.arange(R))])
    on = var > 0
    z = (tot.mean(0) - e)[on] / np.sqrt(var[on] / R)
    assert on.sum() > 200 and np.sum(np.abs(z) > 4.5) <= 2
    ratio = tot.var(0, ddof=1)[on].sum() / var[on].sum()
    assert abs(ratio - 1) < 4 * np.sqrt(2 / (R - 1))
    fig = balance_figures(plan, wt, q)
    assert fig["weighted_bias"] == pytest.approx(np.abs(e - wt).sum() / wt.sum(), rel=1e-12)
    assert fig["certificate"] <= cfg.risk.xi + 1e-12


def test_weighted_phase_plans_in_the_rule_order_until_a_balanced_node():
    """_balance: the rule's best node is planned first; an unbalanced one is set aside and
    the next planned, until the best remaining node is planned and balanced."""
    def node(share, kept):
        return Node((0,), entropy_kept=kept, changed=share * 1000, changed_share=share,
                    key_kept={"a": 1.0}, min_key_kept=1.0, displacement_sd=0.0,
                    status="certified")

    nodes = [node(0.05, 0.99), node(0.06, 0.98), node(0.07, 0.97), node(0.05, 0.90)]
    bias = {0.99: 0.03, 0.98: 0.002, 0.97: 0.001, 0.90: 0.0}
    planned: list[float] = []

    def run(jobs):
        out = []
        for _levels, _variant in jobs:
            i = next(i for i, nd in enumerate(nodes) if nd.configured is None
                     and nd.entropy_kept not in planned)
            kept = nodes[i].entropy_kept
            planned.append(kept)
            out.append({"configured": {"weighted_bias": bias[kept], "weighted_beyond": 0.0,
                                       "certificate": 0.39, "changed": nodes[i].changed,
                                       "n_records": 1000}})
        return out

    done, checked = _balance(nodes, run, 0.395, 0.7, 0.08, 1, lambda: True)
    assert done and checked == 2 and planned == [0.99, 0.98]
    assert nodes[0].balanced is False and nodes[1].balanced and nodes[2].configured is None
    from sdc.method.design import recommend

    rec, verdict, _ = recommend(nodes, accept=lambda nd: bool(nd.balanced))
    assert rec == 1


def test_weighted_design_recommends_a_balanced_node_with_the_release_figures(tmp_path):
    """Through the CLI: the weighted job's recommendation keeps weighted totals balanced
    (its exact bias and share beyond 3 SE under the rule's limits), the figures shown are the
    configured design's (planned from the records: equal to the node's cell-level figures),
    and the written config releases with that expected bias in utility.json."""
    path = _weighted_job(tmp_path)
    out = tmp_path / "designed.yaml"
    r = runner.invoke(app, ["design", str(path), "--json", "--budget", "60", "-o", str(out)],
                      env={"COLUMNS": "1000"})
    assert r.exit_code == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["weighted"] is True
    rec, cf = doc["recommended"], doc["recommended_configured"]
    assert rec["balanced"] is True and "weighted totals balanced" in doc["verdict"]
    node = rec["configured"]
    assert cf["weighted_bias"] <= BIAS_MAX and cf["weighted_beyond"] <= BEYOND_MAX
    for k in ("weighted_bias", "weighted_beyond", "weighted_fallback", "certificate",
              "changed"):
        assert cf[k] == pytest.approx(node[k], rel=1e-9), k
    assert rec["share_changed"] == pytest.approx(cf["share_changed"], rel=1e-9)
    shown = [p for p in doc["frontier"] if p["configured"] is not None]
    assert rec["node"] in [p["node"] for p in shown]
    r = runner.invoke(app, ["release", str(out)], env={"COLUMNS": "1000"})
    assert r.exit_code == 0, r.stdout + r.stderr
    rel_dir = Path(yaml.safe_load(out.read_text())["output"]["dir"])
    if not rel_dir.is_absolute():
        rel_dir = out.parent / rel_dir
    util = json.loads((rel_dir / "internal" / "utility.json").read_text())
    assert util["expected_totals"]["mode"] == "weighted"
    assert util["expected_totals"]["weighted"]["share"] == pytest.approx(cf["weighted_bias"],
                                                                          rel=1e-6)


def test_coarse_and_no_partition_variants_of_a_weighted_job(tmp_path):
    """``coarse``: a numeric key in at most about COARSE_BANDS round-number bands, a nominal
    key with <= COARSE_NOMINAL values as is, the others free; ``none``: no partition."""
    from sdc.authoring.design import count_declared
    from sdc.method.design import candidates, partition_variant
    from sdc.method.design.evaluate import COARSE_BANDS

    cfg = sdc.load_config(_weighted_job(tmp_path))
    fine = count_declared(cfg)
    marg = {k: np.bincount(fine.key_codes[:, i], weights=fine.frequency,
                           minlength=cfg.input_key_variables[k].size).astype(np.int64)
            for i, k in enumerate(cfg.key_names)}
    cands = candidates(cfg, marg)
    levels = tuple(0 for _ in cfg.key_names)
    coarse = partition_variant(cfg, cands, levels, "coarse")
    # region 1..5 reads as an ordered number (dense, unlabelled); tenure (3 nominal) is free
    assert set(coarse) == {"sex", "age", "region"} and coarse["sex"] == "as_is"
    assert 2 <= len(coarse["age"]["bands"]) <= COARSE_BANDS + 1
    assert partition_variant(cfg, cands, levels, "none") is None


def test_a_weighted_job_with_a_bad_weight_is_refused_with_the_rows(tmp_path):
    """A weight that is missing or not positive breaks the weighted design: exit 2, the column,
    the count and the rows named (1-based), before any search."""
    path = _weighted_job(tmp_path, n=400)
    data = tmp_path / "survey.csv"
    frame = pd.read_csv(data)
    frame.loc[[3, 10], "w"] = [0.0, np.nan]
    frame.to_csv(data, index=False)
    r = runner.invoke(app, ["design", str(path), "--budget", "5"], env={"COLUMNS": "1000"})
    assert r.exit_code == 2, r.stdout + r.stderr
    text = " ".join((r.stdout + r.stderr).split())
    assert "'w'" in text and "2 record(s)" in text and "rows 4, 11" in text
