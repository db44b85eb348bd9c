"""Utility figures (sdc.reports.utility): hand arithmetic on a designed release, exact zeros when
nothing changes, and the census demo's race counts (partition groups) unchanged."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.method.cells import encode_cells
from sdc.reports.utility import NUMERIC_MIN_GROUP, compute_utility, hellinger, tvd

ROOT = Path(__file__).resolve().parents[2]


def test_tvd_hellinger_by_hand() -> None:
    p, q = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    # TVD = 1/2 (|0.5 - 0.25| + |0.5 - 0.75|) = 0.25
    assert tvd(p, q) == pytest.approx(0.25)
    # H^2 = 1/2 ((sqrt .5 - sqrt .25)^2 + (sqrt .5 - sqrt .75)^2)
    h2 = 0.5 * ((math.sqrt(0.5) - 0.5) ** 2 + (math.sqrt(0.5) - math.sqrt(0.75)) ** 2)
    assert hellinger(p, q) == pytest.approx(math.sqrt(h2))
    assert tvd(p, p) == 0.0 and hellinger(p, p) == 0.0
    assert tvd(np.array([1.0, 0]), np.array([0, 1.0])) == 1.0
    assert hellinger(np.array([1.0, 0]), np.array([0, 1.0])) == pytest.approx(1.0)


def _config(weight: str | None = "w") -> sdc.ReleaseConfig:
    return sdc.parse_config({
        "name": "hand", "input": {"path": "x.csv", "id_column": "id", "drop": ["name"],
                                   "weight": weight},
        "key_variables": {"sex": {"categories": [1, 2], "labels": {1: "Male", 2: "Female"}},
                          "grp": {"categories": ["a", "b", "c"]}},
        "partition": {"sex": "as_is"}, "risk": {"xi": 0.395}}, base_dir=Path("."))


def test_designed_release_by_hand() -> None:
    """24 records; 2 of them moved by hand: record 0 (sex 1, grp a -> b), record 12 (sex 2,
    grp c -> a). Everything below is arithmetic on that design."""
    n = 24
    sex = np.array([1] * 12 + [2] * 12)
    grp = np.array(["a"] * 6 + ["b"] * 6 + ["c"] * 12, dtype=object)
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "name": ["x"] * n, "sex": sex,
                          "grp": grp, "inc": np.arange(n, dtype=float), "w": np.full(n, 2.0)})
    frame.loc[0, "w"] = 10.0
    cfg = _config()
    sex_c = sex - 1
    grp_c = pd.Index(["a", "b", "c"]).get_indexer(grp)
    cells = encode_cells([sex_c, grp_c], [2, 3], ["sex", "grp"])
    # released codes: record 0 -> grp b (code 1), record 12 -> grp a (code 0)
    rel_grp = grp_c.copy()
    rel_grp[0], rel_grp[12] = 1, 0
    # the released cell of each record: find the cell with (sex, released grp)
    lookup = {tuple(k): j for j, k in enumerate(cells.key_codes.tolist())}
    lookup[(1, 0)] = max(lookup.values()) + 1  # (sex 2, grp a) does not exist in the original
    key_codes = np.vstack([cells.key_codes, [[1, 0]]])
    cells = type(cells)(cells.record_cell, key_codes, np.append(cells.frequency, 0), cells.names)
    released_cell = np.array([lookup[(s, g)] for s, g in zip(sex_c, rel_grp, strict=True)])
    released = frame.drop(columns=["name"]).copy()
    released.loc[0, "grp"], released.loc[12, "grp"] = "b", "a"
    result = SimpleNamespace(
        cells=cells, released_cell=released_cell, frame=released,
        changed=released_cell != cells.record_cell,
        partition_sets=pd.DataFrame({"partition_set": [0, 1],
                                     "partition_key": ["sex=1", "sex=2"]}),
        record_partition_set=sex_c,
        cell_partition_set=key_codes[:, 0],  # partition by sex: the cell's sex code
    )
    u = compute_utility(frame, result, cfg)
    kv = {e["name"]: e for e in u["key_variables"]}
    # grp original a 6, b 6, c 12; released a 5+1 = 6, b 6+1 = 7, c 11
    g = {c["value"]: c for c in kv["grp"]["categories"]}
    assert [(g[x]["original"], g[x]["released"], g[x]["difference"]) for x in "abc"] == [
        (6, 6, 0), (6, 7, 1), (12, 11, -1)]
    # TVD = 1/2 (0 + 1/24 + 1/24) = 1/24
    assert kv["grp"]["tvd"] == pytest.approx(1 / 24)
    h2 = 0.5 * ((math.sqrt(6 / 24) - math.sqrt(7 / 24)) ** 2
                + (math.sqrt(12 / 24) - math.sqrt(11 / 24)) ** 2)
    assert kv["grp"]["hellinger"] == pytest.approx(math.sqrt(h2))
    assert kv["grp"]["n_changed"] == 2 and kv["grp"]["share_changed"] == pytest.approx(2 / 24)
    assert kv["sex"]["tvd"] == 0.0 and kv["sex"]["n_changed"] == 0
    assert kv["sex"]["partition_rule"] == "as_is"
    assert [c["label"] for c in kv["sex"]["categories"]] == ["Male", "Female"]
    # weighted: total 10 + 23 * 2 = 56. a: orig 10 + 5*2 = 20, released 5*2 + 2 (rec 12) = 12
    # b: orig 12, released 12 + 10 = 22; c: orig 24, released 22
    # a and b hold fewer than NUMERIC_MIN_GROUP records: their weighted totals are withheld
    assert g["a"]["weighted_suppressed"] and g["a"]["weighted_original"] is None
    assert g["b"]["weighted_suppressed"] and g["b"]["weighted_released"] is None
    assert not g["c"]["weighted_suppressed"]
    assert (g["c"]["weighted_original"], g["c"]["weighted_released"]) == (24.0, 22.0)
    assert g["c"]["weighted_share_difference"] == pytest.approx(-2 / 56)
    # the distances still use every category: |12-20| + |22-12| + |22-24| = 20
    assert kv["grp"]["weighted"]["tvd"] == pytest.approx(0.5 * (8 + 10 + 2) / 56)
    # pair (sex, grp): two records moved to different cells: TVD = 1/2 * 4/24
    pair = u["pairs"][0]
    assert (pair["a"], pair["b"]) == ("sex", "grp")
    assert pair["tvd"] == pytest.approx(4 / 48)
    assert pair["cells_original"] == 3 and pair["cells_released"] == 4
    # changed: overall 2/24; by partition set: 1 of 12 each
    assert u["changed"]["overall"] == {"n_changed": 2, "share": pytest.approx(2 / 24)}
    assert [x["n_changed"] for x in u["changed"]["by_partition_set"]] == [1, 1]
    # numeric: inc = row number. By grp before: a = rows 0..5 (mean 2.5), after: a = rows
    # 1..5 and 12 -> mean (15 + 12) / 6 = 4.5; quartiles of [1, 2, 3, 4, 5, 12] (linear):
    # q1 = 2.25, median 3.5, q3 = 4.75. Groups of 6 < NUMERIC_MIN_GROUP are suppressed, so
    # check the unsuppressed c group: before rows 12..23 (mean 17.5), after rows 13..23 -> 18.
    assert NUMERIC_MIN_GROUP == 10
    blk = next(b for b in u["numeric"] if b["variable"] == "inc" and b["by"] == "grp")
    rows = {r["value"]: r for r in blk["rows"]}
    assert rows["a"]["before"]["suppressed"] and rows["a"]["before"]["mean"] is None
    assert rows["c"]["before"]["mean"] == pytest.approx(17.5)
    assert rows["c"]["after"]["mean"] == pytest.approx(18.0)
    assert rows["c"]["after"]["median"] == pytest.approx(18.0)
    assert rows["c"]["after"]["q1"] == pytest.approx(15.5)  # 13 + 0.25 * 10
    blk_sex = next(b for b in u["numeric"] if b["variable"] == "inc" and b["by"] == "sex")
    assert blk_sex["rows"][0]["before"]["mean"] == pytest.approx(5.5)  # rows 0..11
    # numeric columns exclude keys, id, dropped identifiers and the weight
    assert {b["variable"] for b in u["numeric"]} == {"inc"}


def _no_change_frame() -> pd.DataFrame:
    # every cell has t = 12 >= 1/xi: nothing is sensitive, nothing can move
    rng = np.random.default_rng(5)
    sex = np.repeat([1, 2], 36)
    grp = np.tile(np.repeat(["a", "b", "c"], 12), 2)
    return pd.DataFrame({"id": [f"r{i:03d}" for i in range(72)], "name": ["z"] * 72,
                         "sex": sex, "grp": grp, "inc": rng.normal(100, 10, 72),
                         "w": rng.uniform(1, 5, 72)})


def test_no_change_release_is_exactly_zero() -> None:
    frame = _no_change_frame()
    cfg = _config()
    result = sdc.release_frame(frame, cfg, seed=3)
    assert result.n_changed == 0 and len(result.blocks) == 0
    u = compute_utility(frame, result, cfg)
    for e in u["key_variables"]:
        assert e["tvd"] == 0.0 and e["hellinger"] == 0.0 and e["n_changed"] == 0
        assert e["max_abs_difference"] == 0
        assert e["weighted"] == {"tvd": 0.0, "hellinger": 0.0, "max_abs_difference": 0.0,
                                 "max_abs_share_difference": 0.0}
        for c in e["categories"]:
            assert c["difference"] == 0 and c["share_difference"] == 0.0
            assert c["weighted_difference"] == 0.0 and c["weighted_share_difference"] == 0.0
    for p in u["pairs"]:
        assert p["tvd"] == 0.0 and p["weighted_tvd"] == 0.0
    for blk in u["numeric"]:
        for r in blk["rows"]:
            assert r["before"] == r["after"]
    assert u["changed"]["overall"] == {"n_changed": 0, "share": 0.0}


def test_census_demo_race_white_black_unchanged() -> None:
    cfg_path = ROOT / "configs" / "census_demo.yaml"
    cfg = sdc.load_config(cfg_path)
    frame = pd.read_csv(cfg.input_path)
    result = sdc.release_frame(frame, cfg, seed=20240601)
    u = compute_utility(frame, result, cfg)
    race = next(e for e in u["key_variables"] if e["name"] == "race")
    by_label = {c["label"]: c for c in race["categories"]}
    # race groups white = [1], black = [2] are partition sets of their own
    for label in ("White", "Black"):
        assert by_label[label]["difference"] == 0
        assert by_label[label]["original"] == int((frame["race"] == (1 if label == "White" else 2)).sum())
    # the other categories move a little (NZY review Table 2: a few dozen at most)
    assert any(c["difference"] != 0 for c in race["categories"])
    assert max(abs(c["difference"]) for c in race["categories"]) < 150
    assert {g["label"]: g["difference"] for g in race["generalized_totals"]} == {
        "white": 0, "black": 0, "other": 0}
    # sex is partitioned as is: nothing moves
    sex = next(e for e in u["key_variables"] if e["name"] == "sex")
    assert sex["n_changed"] == 0 and sex["tvd"] == 0.0
