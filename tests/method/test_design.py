"""``sdc design``: the lattice search over recodings (sdc.method.design, sdc.authoring.design).

- the frontier is exactly the set of Pareto-optimal evaluated nodes (checked against a
  brute-force dominance check over every node of a small lattice, all evaluated);
- every evaluated node's certificate is the release's own (partition_cells + plan_release on
  the node's config), and <= xi;
- pruning is sound: a pruned node is below the entropy floor (recomputed directly);
- the recommended config releases unchanged through the CLI, with the certificate the search
  reported, and its audit passes.
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
from sdc.authoring.design import count_declared, run_design, write_node_config
from sdc.cli.main import app
from sdc.method.design import entropy, pareto_front
from tests.conftest import SHARED_DATA

runner = CliRunner()
SHARED = SHARED_DATA / "adult"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _job(tmp_path: Path, n: int = 3000, seed: int = 2) -> Path:
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.0, 8) + 0.01
    frame = pd.DataFrame({
        "sex": rng.integers(1, 3, n),
        "age": np.clip(rng.normal(40, 15, n).round(), 0, 90).astype(int),
        "country": rng.choice([f"k{i}" for i in range(8)], size=n, p=w / w.sum()),
        "income": rng.lognormal(8, 1, n).round(2),
    })
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    cfg = {"name": "des", "input": {"path": str(data)},
           "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 90]},
                             "country": {"categories": [f"k{i}" for i in range(8)]}},
           "partition": {"sex": "as_is", "age": {"bands": [0, 40]}},
           "risk": {"xi": 0.395, "small_blocks": "merge"},
           "seed": 5,
           "output": {"dir": str(tmp_path / "releases" / "des"), "formats": ["parquet"]}}
    path = tmp_path / "des.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _brute_front(points: np.ndarray) -> set[int]:
    out = set()
    for i, p in enumerate(points):
        dominated = any(np.all(q <= p) and np.any(q < p) for j, q in enumerate(points) if j != i)
        if not dominated:
            out.add(i)
    return out


def test_frontier_is_the_pareto_set_of_the_evaluated_nodes(tmp_path):
    d = run_design(_job(tmp_path), budget=600, min_entropy=0.0)
    r = d.result
    assert r.complete and all(n.status in ("certified", "refused") for n in r.nodes)
    assert len(r.nodes) >= 20  # a real lattice: age bands/top codes x merged countries
    ok = [i for i, n in enumerate(r.nodes) if n.status == "certified"]
    pts = np.array([[r.nodes[i].changed_share, r.nodes[i].loss, r.nodes[i].tvd] for i in ok])
    brute = {ok[i] for i in _brute_front(pts)}
    # equal points are listed once on the frontier: compare as sets of objective vectors
    as_pts = {tuple(np.round(pts[ok.index(i)], 12)) for i in brute}
    assert {tuple(np.round(pts[ok.index(i)], 12)) for i in r.frontier} == as_pts
    assert set(r.frontier) <= brute
    for i in ok:
        assert r.nodes[i].certificate <= 0.395 + 1e-12
    # the recommendation rule: fewest records changed among nodes keeping >= 90% entropy
    good = [i for i in ok if r.nodes[i].entropy_kept >= 0.9]
    best = min(r.nodes[i].changed for i in good)
    assert r.nodes[r.recommended].changed == pytest.approx(best)
    assert r.nodes[r.recommended].entropy_kept >= 0.9


def test_pareto_front_of_known_points():
    pts = np.array([[1, 1, 1], [0, 2, 1], [2, 2, 2], [1, 1, 1], [0, 3, 0]], dtype=float)
    assert pareto_front(pts) == [0, 1, 4]


def test_pruned_nodes_are_below_the_entropy_floor(tmp_path):
    path = _job(tmp_path)
    d = run_design(path, budget=600, min_entropy=0.8)
    r = d.result
    pruned = [i for i, n in enumerate(r.nodes) if n.status == "pruned"]
    assert pruned, "the floor should cut the coarse end of this lattice"
    fine = count_declared(sdc.load_config(path))
    h0 = entropy(fine.frequency)
    for i in pruned:
        cols = [r.cands[k][lev].code_map[fine.key_codes[:, j]]
                for j, (k, lev) in enumerate(zip(r.keys, r.nodes[i].levels, strict=True))]
        _, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        h = entropy(np.bincount(inv.ravel(), weights=fine.frequency))
        assert h / h0 < 0.8


@pytest.mark.e2e
def test_recommended_config_releases_unchanged_with_the_searched_certificate(tmp_path):
    path = _job(tmp_path)
    out = tmp_path / "other" / "new.yaml"
    res = runner.invoke(app, ["design", str(path), "-o", str(out), "--json", "--budget", "600"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rec = doc["recommended"]
    assert doc["written"] == str(out) and rec["certificate"] <= 0.395
    r = runner.invoke(app, ["release", str(out), "--json"])
    assert r.exit_code == 0, r.output
    audit = json.loads((tmp_path / "releases" / "des-design" / "internal" / "audit.json")
                       .read_text())
    assert audit["risk"]["certificate"] == pytest.approx(rec["certificate"], rel=1e-12)
    assert runner.invoke(app, ["audit", str(tmp_path / "releases" / "des-design")]).exit_code == 0


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data/adult (the adult data)")
def test_adult_design_halves_the_changed_records_and_keeps_90_percent_entropy(tmp_path):
    d = run_design(CONFIGS / "adult.yaml", budget=30)
    r = d.result
    cur, rec = r.nodes[r.current], r.nodes[r.recommended]
    assert rec.status == "certified" and rec.certificate <= 0.395
    assert rec.changed <= cur.changed / 2
    assert rec.entropy_kept >= 0.9
    new = write_node_config(d, r.recommended, tmp_path / "adult-design.yaml")
    cfg = sdc.load_config(new)
    assert cfg.recoded_keys  # the recoding it needs is in the config


def test_sparse_numeric_codes_are_never_banded_only_their_rare_categories_merged(tmp_path):
    """PUMA-like codes (40 values spread over 100..8200) are nominal: the design offers merged
    rare categories, no bands or top coding; ages declared as numeric categories (dense) are
    still banded."""
    from sdc.config.load import parse_config
    from sdc.method.design import candidates

    rng = np.random.default_rng(4)
    codes = sorted(int(c) for c in rng.choice(np.arange(100, 8201), 40, replace=False))
    ages = list(range(20, 60))
    cfg = parse_config({"name": "c", "input": {"path": str(tmp_path / "x.csv")},
                        "key_variables": {"puma": {"categories": codes},
                                          "age": {"categories": [str(a) for a in ages]}},
                        "risk": {"xi": 0.395}, "seed": 1,
                        "output": {"dir": str(tmp_path / "r")}}, tmp_path)
    w = rng.pareto(1.0, 40) + 0.01
    found = candidates(cfg, {"puma": w / w.sum() * 10_000, "age": np.full(40, 250.0)})
    puma = [c.name for c in found["puma"]]
    assert any("merged" in n for n in puma), puma
    assert not any("band" in n or "top" in n for n in puma), puma
    assert any("band" in c.name or "top" in c.name for c in found["age"])
