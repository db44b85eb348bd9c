"""Recoding of released key values (``key_variables.X.recode``) on every engine.

A recoded release is certified on the recoded cell table, its public files hold the released
(recoded) values only, the three engines give byte-identical public files and reports, and
``sdc audit`` re-derives everything, the recoding loss included. A config without ``recode:``
is untouched (the config object is the same as before the feature).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli
from typer.testing import CliRunner

import sdc
from sdc.config.load import parse_config
from sdc.config.model import ConfigError

runner = CliRunner()


run = run_cli


def _frame(n: int = 4000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.1, 12) + 0.02
    return pd.DataFrame({
        "pid": rng.permutation(n).astype(np.int64) + 100,
        "sex": rng.integers(1, 3, n),
        "age": rng.integers(0, 91, n),
        "country": rng.choice([f"c{i:02d}" for i in range(12)], size=n, p=w / w.sum()),
        "race": rng.choice([1, 2, 3, 4], size=n, p=[0.7, 0.2, 0.06, 0.04]),
        "income": rng.lognormal(8, 1, n).round(2),
    })


RECODE = {"age": {"bands": [0, 20, 40, 60, 80]},
          "country": {"groups": {"other": [f"c{i:02d}" for i in range(6, 12)]}},
          "race": {"top": 3}}


def _config(tmp_path: Path, name: str, data: Path, engine: str, recode: bool = True) -> Path:
    kv = {"sex": {"categories": [1, 2], "labels": {1: "Male", 2: "Female"}},
          "age": {"range": [0, 90]},
          "country": {"categories": [f"c{i:02d}" for i in range(12)]},
          "race": {"categories": [1, 2, 3, 4], "labels": {1: "White", 2: "Black"}}}
    if recode:
        for k, r in RECODE.items():
            kv[k]["recode"] = r
    cfg = {"name": "rec",
           "input": {"path": str(data), "format": "parquet", "id_column": "pid"},
           "key_variables": kv,
           "partition": {"sex": "as_is", "age": {"bands": [0, 40]}},
           "risk": {"xi": 0.395, "small_blocks": "merge"},
           "seed": 99,
           "output": {"dir": str(tmp_path / "releases" / name), "formats": ["parquet", "csv"]},
           "engine": {"kind": engine, **({"batch_rows": 700} if engine == "streaming" else {})}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_recoded_config_has_the_released_domains(tmp_path):
    data = tmp_path / "d.parquet"
    _frame(50).to_parquet(data)
    cfg = sdc.load_config(_config(tmp_path, "r", data, "pandas"))
    # numbers stay numbers: a band is released as its lower edge, a top code as its edge,
    # and the label says what each number stands for
    assert cfg.key_variables["age"].domain == [0, 20, 40, 60, 80]
    assert cfg.key_variables["age"].labels == {0: "0-19", 20: "20-39", 40: "40-59",
                                               60: "60-79", 80: "80+"}
    assert cfg.key_variables["country"].domain == ["other", *[f"c{i:02d}" for i in range(6)]]
    assert cfg.key_variables["race"].domain == [1, 2, 3]
    assert cfg.key_variables["race"].labels == {1: "White", 2: "Black", 3: "3+"}
    assert cfg.input_key_variables["age"].range == (0, 90)
    # the partition bands [0, 40) / [40, inf) become groups of released bands
    assert cfg.partition["age"].groups == {"0-39": [0, 20], "40+": [40, 60, 80]}
    plain = sdc.load_config(_config(tmp_path, "p", data, "pandas", recode=False))
    assert plain.recoded_keys == [] and plain.input_key_variables is plain.key_variables
    assert plain.risk.merge_along is None


def test_a_partition_finer_than_the_recoding_is_refused(tmp_path):
    data = tmp_path / "d.parquet"
    _frame(50).to_parquet(data)
    raw = yaml.safe_load(_config(tmp_path, "r", data, "pandas").read_text())
    raw["partition"]["age"] = {"bands": [0, 30, 60]}
    with pytest.raises(ConfigError, match=r"partition.age.*'20-39'.*as_is"):
        parse_config(raw, tmp_path)
    raw["partition"]["age"] = "as_is"
    assert parse_config(raw, tmp_path).partition["age"] == "as_is"
    raw["key_variables"]["country"]["recode"] = {"groups": {"x": ["nowhere"]}}
    with pytest.raises(ConfigError, match="'nowhere' is not a declared category"):
        parse_config(raw, tmp_path)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.e2e
def test_recoded_release_is_certified_identical_and_audited_on_every_engine(tmp_path):
    frame = _frame()
    data = tmp_path / "d.parquet"
    frame.to_parquet(data, row_group_size=1000)
    pub: dict[str, dict[str, str]] = {}
    util: dict[str, str] = {}
    for engine in ("pandas", "streaming", "dask"):
        path = _config(tmp_path, engine, data, engine)
        r = run("release", path)
        assert r.exit_code == 0, r.text
        rel = tmp_path / "releases" / engine
        pub[engine] = {f.name: _sha(f) for f in sorted((rel / "public").iterdir())}
        util[engine] = (rel / "internal" / "utility.json").read_text().replace(engine, "E")
        a = run("audit", rel)
        assert a.exit_code == 0, a.text
        assert "recoding loss = recorded" in a.text
        audit = json.loads((rel / "internal" / "audit.json").read_text())
        assert audit["risk"]["certificate"] <= 0.395
    assert pub["pandas"] == pub["streaming"] == pub["dask"]
    assert util["pandas"] == util["streaming"] == util["dask"]
    rel = tmp_path / "releases" / "pandas"
    out = pd.read_parquet(rel / "public" / "microdata.parquet")
    # only released values are published; non-key columns exactly as they went in
    assert out["age"].dtype.kind == "i" and out["race"].dtype.kind == "i"
    assert set(out["age"]) <= {0, 20, 40, 60, 80}
    assert set(out["race"]) <= {1, 2, 3}
    csv = pd.read_csv(rel / "public" / "microdata.csv")
    assert csv["age"].dtype.kind == "i" and set(csv["race"]) <= {1, 2, 3}
    assert set(out["country"]) <= {"other", *[f"c{i:02d}" for i in range(6)]}
    assert sorted(out["income"]) == sorted(frame["income"])
    codebook = (rel / "public" / "codebook.md").read_text()
    assert "60-79" in codebook and "3+" in codebook
    rec = json.loads((rel / "internal" / "utility.json").read_text())["recoding"]
    by = {k["name"]: k for k in rec["keys"]}
    # every age is in a band of 20 years: all records coarsened; race 3 and 4 -> "3+"
    assert by["age"]["records_coarsened"] == len(frame)
    assert by["race"]["records_coarsened"] == int(frame["race"].isin([3, 4]).sum())
    counts = frame["age"].value_counts().to_numpy()
    p = counts / counts.sum()
    assert by["age"]["entropy_before"] == pytest.approx(float(-(p * np.log2(p)).sum()))
    assert 0 < by["age"]["entropy_kept"] < 1


@pytest.mark.e2e
def test_audit_catches_a_tampered_recoding_loss(tmp_path):
    data = tmp_path / "d.parquet"
    _frame(2000).to_parquet(data)
    path = _config(tmp_path, "t", data, "pandas")
    assert run("release", path).exit_code == 0
    rel = tmp_path / "releases" / "t"
    u = rel / "internal" / "utility.json"
    doc = json.loads(u.read_text())
    doc["recoding"]["keys"][0]["records_coarsened"] += 1
    u.write_text(json.dumps(doc))
    a = run("audit", rel)
    assert a.exit_code != 0
    assert "recoding loss = recorded" in a.text


def test_without_recode_the_release_is_unchanged(tmp_path):
    """No ``recode:``: the reader returns the very frame object, the utility report has no
    recoding section (so existing outputs keep their bytes)."""
    from sdc.io.recode import recode_frame

    data = tmp_path / "d.parquet"
    frame = _frame(300)
    frame.to_parquet(data)
    cfg = sdc.load_config(_config(tmp_path, "p", data, "pandas", recode=False))
    assert recode_frame(frame, cfg) is frame
    res = sdc.release_frame(frame, cfg, seed=1)
    from tests.release_helpers import reports_of

    assert "recoding" not in reports_of(res, cfg, seed=1, n_sim=5).utility


def test_band_labels_say_what_is_in_them(tmp_path):
    """Labels from the declared domain: ages 18..19 under the edge 15 are "18-19", a
    negative start reads "-4 to 9", a top code is labelled by its smallest value, a bottom
    code by its largest; values released are the class edges (numbers)."""
    from sdc.config.model import Bands, KeyVariable, TopBottom
    from sdc.config.recode import recode_classes, released_values

    age = KeyVariable(range=(18, 64))
    cmap, labels = recode_classes("age", age, Bands(bands=[15, 20, 30, 60]))
    assert labels == ["18-19", "20-29", "30-59", "60+"]
    assert released_values(age, None, cmap, labels) == [18, 20, 30, 60]
    exp = KeyVariable(range=(-4, 63))
    _, labels = recode_classes("exp", exp, Bands(bands=[-5, 10, 20]))
    assert labels == ["-4 to 9", "10-19", "20+"]
    rule = TopBottom(top=42.5, bottom=-1)
    cmap, labels = recode_classes("exp", exp, rule)
    assert labels[0] == "-1 or less" and labels[-1] == "43+"
    vals = released_values(exp, rule, cmap, labels)
    assert vals[0] == -1 and vals[-1] == 43
