"""``sdc design`` / ``sdc init``: the number each recoded class of an ordered numeric key is
released as (sdc.authoring.design_values; docs/DESIGN.md "Released values").

Exact tests: the mean and sd shifts against brute force on the expanded records; the choice
of ``value:`` (the smaller mean shift; lower edges under Stata output; the config's own value
kept); the open-class suggestion; and the written config carries the choice and releases.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from conftest import run_cli

from sdc.authoring.design_values import value_figures, value_lines, with_value
from sdc.config.model import KeyVariable


def _expand(vals, counts):
    return np.repeat(np.asarray(vals, dtype=float), np.asarray(counts))


def test_shifts_are_the_brute_force_ones():
    kv = KeyVariable(range=(9, 16))
    counts = np.array([374, 621, 601, 12433, 5424, 2625, 0, 7423])  # census2000 educ
    rule = {"bands": [9, 10, 12, 14, 16]}
    fig = value_figures("educ", kv, rule, counts)
    x = _expand(range(9, 17), counts)
    se = x.std(ddof=1) / np.sqrt(x.size)
    low = _expand([9, 10, 10, 12, 12, 14, 14, 16], counts)
    mid = _expand([9, 10.5, 10.5, 12.5, 12.5, 14.5, 14.5, 16], counts)
    for how, r in (("lower", low), ("midpoint", mid)):
        got = fig["values"][how]
        assert np.isclose(got["mean_shift_se"], (r.mean() - x.mean()) / se, rtol=1e-12)
        se_sd = x.std(ddof=1) / np.sqrt(2 * (x.size - 1))
        assert np.isclose(got["sd_shift_se"], (r.std(ddof=1) - x.std(ddof=1)) / se_sd,
                          rtol=1e-12)
    # lower edges: -0.204 years = -19.7 SE of the mean; midpoints (declared range: 14-15 is
    # released as 14.5) move it less in absolute value, so the design writes midpoint
    assert round(fig["values"]["lower"]["mean_shift_se"], 1) == -19.7
    assert fig["value"] == fig["write_value"] == "midpoint"
    assert with_value(rule, fig) == {**rule, "value": "midpoint"}
    assert "+" in value_lines("educ", fig)[0] and "-19.7 SE" in value_lines("educ", fig)[0]
    # the class 12-13 (12.5) still moves the mean: 70% of its records are 12 (12,433 of
    # 17,857), so the design names the heap and the breaks that keep it apart
    heap = fig["heap"]
    assert heap["mode"] == 12 and heap["class_value"] == 12.5 and heap["breaks"] == [12, 13]
    assert np.isclose(heap["share"], 12433 / 17857)
    x12 = _expand([12, 13], [12433, 5424])
    assert np.isclose(heap["mean_shift_se"], (12.5 - x12).sum() / x.size / se)
    assert "breaks:" in value_lines("educ", fig)[-1]


def test_the_choice_follows_the_smaller_shift_stata_and_the_config():
    kv = KeyVariable(range=(0, 9))
    heaped = np.array([50, 1, 50, 1, 50, 1, 50, 1, 50, 1])     # mass on the lower edges
    fig = value_figures("k", kv, {"bands": [0, 2, 4, 6, 8]}, heaped)
    assert fig["value"] == "lower" and fig["write_value"] == "lower"
    assert fig["heap"] is None                      # lower edges: the released values are exact
    flat = np.full(10, 30)
    assert value_figures("k", kv, {"bands": [0, 2, 4, 6, 8]}, flat)["value"] == "midpoint"
    dta = value_figures("k", kv, {"bands": [0, 2, 4, 6, 8]}, flat, ["parquet", "dta"])
    assert dta["value"] == "lower" and "Stata" in dta["why"]
    own = value_figures("k", kv, {"bands": [0, 2, 4, 6, 8], "value": "lower"}, flat)
    assert own["value"] == "lower" and own["write_value"] is None
    # text keys, groups and nominal codes get no figures
    assert value_figures("k", kv, {"groups": {"a": [0, 1]}}, flat) is None
    assert value_figures("k", kv, None, flat) is None


def test_open_classes_get_their_file_mean_written():
    kv = KeyVariable(range=(-4, 63))
    vals = np.arange(-4, 64)
    rng = np.random.default_rng(2)
    counts = np.bincount(np.clip(rng.gamma(2.2, 8.5, 28000).astype(int) - 4, -4, 63) + 4,
                         minlength=vals.size)
    fig = value_figures("exper", kv, {"top": 50, "bottom": -1}, counts)
    assert fig["write_value"] is None                      # no closed class: nothing to write
    oc = fig["open_classes"]
    top = [d for d in oc["declare"] if d["field"] == "top_value"]
    assert len(top) == 1 and top[0]["edge"] == 50
    inside = vals >= 50
    assert top[0]["class_mean"] == round((counts[inside] * vals[inside]).sum()
                                         / counts[inside].sum(), 1)
    # the combined shift, brute force: every declared class at its suggested mean
    r = np.where(vals >= 50, top[0]["class_mean"], np.where(vals <= -1, -1, vals)).astype(float)
    for d in oc["declare"]:
        if d["field"] == "bottom_value":
            r[vals <= -1] = d["class_mean"]
    x, y = _expand(vals, counts), _expand(r, counts)
    assert np.isclose(oc["mean_shift_se"], (y.mean() - x.mean()) / (x.std(ddof=1)
                                                                     / np.sqrt(x.size)))
    assert "top_value" in " ".join(value_lines("exper", fig))
    # written (issue 49): the rule carries the file means, and the figures are those of the
    # release with them (the mean moves as little as the suggestion said)
    declared = {d["field"]: d["class_mean"] for d in oc["declare"]}
    assert fig["write_declared"] == declared
    rule = with_value({"top": 50, "bottom": -1}, fig)
    assert rule["top_value"] == top[0]["class_mean"] and rule["top"] == 50
    assert np.isclose(fig["values"][fig["value"]]["mean_shift_se"], oc["mean_shift_se"])
    assert "written `top_value" in " ".join(value_lines("exper", fig))
    # a Stata file labels whole numbers only: a fractional class mean is not written
    dta = value_figures("exper", kv, {"top": 50, "bottom": -1}, counts, ("dta",))
    kept = {d["field"] for d in oc["declare"] if float(d["class_mean"]).is_integer()}
    assert set(with_value({"top": 50, "bottom": -1}, dta)) - {"top", "bottom", "value"} == kept
    # the config's own declaration is kept, never replaced
    own = value_figures("exper", kv, {"top": 50, "bottom": -1, "top_value": 55}, counts)
    assert with_value({"top": 50, "bottom": -1, "top_value": 55}, own)["top_value"] == 55


def test_design_writes_the_choice_and_the_release_holds_midpoints(tmp_path: Path):
    """Ages heaped nowhere over 1,500 records and 30 regions: the design bands age, writes
    ``value: midpoint`` with the shift figures in the comment, and the written config
    releases float ages that are class midpoints or open-class edges."""
    rng = np.random.default_rng(4)
    n = 1500
    frame = pd.DataFrame({"age": rng.integers(16, 96, n), "region": rng.integers(1, 31, n),
                          "sex": rng.integers(1, 3, n)})
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    cfg = {"name": "v", "input": {"path": str(data)},
           "key_variables": {"age": {"range": [16, 95]}, "region": {"range": [1, 30]},
                             "sex": {"categories": [1, 2]}},
           "risk": {"xi": 0.395}, "seed": 2 ** 40 + 3,
           "output": {"dir": str(tmp_path / "rel"), "formats": ["parquet"]}}
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "v-design.yaml"
    r = run_cli("design", path, "-o", out, "--budget", "20", columns=400)
    assert r.exit_code == 0, r.text
    written = yaml.safe_load(out.read_text())
    rec = written["key_variables"]["age"].get("recode")
    assert rec is not None and "bands" in rec and rec.get("value") == "midpoint", rec
    # ages 90-95 uniform: the open class's mean (about 92.5) is written, and released
    assert 90 < rec.get("top_value", 0) < 95, rec
    assert "SE of the mean" in out.read_text() and "SE of the mean" in r.text
    rel = run_cli("release", out)
    assert rel.exit_code == 0, rel.text
    pub = pd.read_parquet(next((tmp_path / "rel-design").rglob("public/microdata.parquet")))
    edges = np.asarray(rec["bands"], dtype=float)
    lo = np.maximum(edges, 16)
    hi = np.append(edges[1:] - 1, 95)
    # the open top class at its edge, or at its mean in the file when the design wrote it
    allowed = set(((lo + hi) / 2)[:-1]) | {float(rec.get("top_value", lo[-1]))}
    assert pub["age"].dtype == np.float64 and set(pub["age"]) <= allowed
    assert rec["top_value"] in set(pub["age"])
