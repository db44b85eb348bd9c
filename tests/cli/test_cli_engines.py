"""``--engine pandas|streaming|dask`` and ``engine:`` through the CLI: the same release.

The public files (microdata, codebook), the PRB table and the certificate of a streaming and a
dask release equal those of the pandas release of the same input, config and seed; ``sdc
audit`` passes on every one of them; ``sdc plan --engine streaming`` plans the same PRBs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import run_cli
from typer.testing import CliRunner

runner = CliRunner()
KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 44}


run = run_cli


def _timings(r) -> dict:
    line = next(x for x in r.stdout.splitlines() if x.startswith("timings "))
    return json.loads(line.removeprefix("timings "))


def _frame(n: int, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {"pid": rng.permutation(n).astype(np.int64) + 1000}
    for name, levels in KEYS.items():
        w = rng.pareto(1.2, levels) + 0.05
        cols[name] = rng.choice(levels, size=n, p=w / w.sum()).astype(np.int64)
    cols["income"] = rng.lognormal(8, 1, n).round(2)
    cols["hours"] = rng.integers(0, 80, n)
    return pd.DataFrame(cols)


def _job(tmp_path: Path, name: str, input_path: Path, engine=None, fmt="parquet") -> Path:
    cfg = {
        "name": name,
        "input": {"path": str(input_path), "format": fmt, "id_column": "pid"},
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 25, 35, 45, 55, 65]},
                      "race": {"groups": {"white": [0], "black": [1],
                                          "other": list(range(2, 9))}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 2026,
        "output": {"dir": str(tmp_path / "releases" / name), "formats": ["parquet", "csv"]},
    }
    if engine is not None:
        cfg["engine"] = engine
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _public(tmp_path: Path, name: str) -> dict[str, str]:
    pub = tmp_path / "releases" / name / "public"
    return {f.name: _sha(f) for f in sorted(pub.iterdir())}


def _reports(tmp_path: Path, name: str, rename: str | None = None) -> dict[str, str]:
    """risk.json and utility.json (the release's name replaced by ``rename``); the page must
    be the rendering of the two (so equal JSON means an equal page up to the name)."""
    from sdc.reports.html import render_html

    internal = tmp_path / "releases" / name / "internal"
    out = {}
    for f in ("risk.json", "utility.json"):
        text = (internal / f).read_text()
        out[f] = text.replace(f'"name": "{name}"', f'"name": "{rename}"') if rename else text
    page = render_html(*(json.loads((internal / f).read_text())
                         for f in ("risk.json", "utility.json")))
    assert (internal / "report.html").read_text() == page
    return out


def _audit(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "releases" / name / "internal" / "audit.json").read_text())


@pytest.mark.e2e
def test_engine_flag_and_engine_key_through_the_cli(tmp_path):
    """``--engine streaming`` and the config's ``engine:`` key both run the streaming executor
    (the audit record names it) and give a certified release that ``sdc audit`` passes, with
    its reports (the page is the rendering of risk.json and utility.json); ``plan`` and
    ``validate`` take ``--engine`` too (validate's summary is the in-memory one). That the
    streaming release is byte for byte the in-memory one is the contract suite's question
    (tests/contract/test_executors.py, every executor and case)."""
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(_frame(4000), preserve_index=False), inp,
                   row_group_size=1000)
    r = run("release", _job(tmp_path, "st", inp), "--engine", "streaming", "--json")
    assert r.exit_code == 0, r.stdout
    summary = json.loads(r.stdout)
    assert summary["certified"] is True
    assert not any("report" in w for w in summary["warnings"])  # no "reports not built"
    r = run("release", _job(tmp_path, "st2", inp, engine={"kind": "streaming",
                                                            "batch_rows": 777}))
    assert r.exit_code == 0, r.text
    for name in ("st", "st2"):
        assert _audit(tmp_path, name)["engine"] == "streaming"
        assert set(_public(tmp_path, name)) == {"microdata.parquet", "microdata.csv",
                                                 "codebook.md"}
        _reports(tmp_path, name)  # report.html is the rendering of the two
        r = run("audit", tmp_path / "releases" / name)
        assert r.exit_code == 0, r.text
    assert _public(tmp_path, "st") == _public(tmp_path, "st2") | {
        "codebook.md": _public(tmp_path, "st")["codebook.md"]}  # batch size: same files
    r = run("plan", _job(tmp_path, "st", inp), "--engine", "streaming")
    assert r.exit_code == 0, r.text
    assert "certificate" in r.text and "engine streaming" in r.text
    # sdc validate in batches: the same summary as in memory
    docs = {}
    for engine in ("pandas", "streaming"):
        r = run("validate", _job(tmp_path, "st", inp), "--engine", engine, "--json")
        assert r.exit_code == 0, r.stdout
        docs[engine] = json.loads(r.stdout)
    assert docs["streaming"] == docs["pandas"]


@pytest.mark.e2e
def test_streaming_releases_stata_input_through_the_cli(tmp_path):
    """Stata input on the streaming executor (read in chunks, sdc.io.stat_input): exit 0, the
    in-memory executor's public file (the contract suite compares every file)."""
    inp = tmp_path / "in.dta"
    _frame(100).to_stata(inp, write_index=False)
    r = run("release", _job(tmp_path, "dta", inp, fmt="dta"), "--engine", "streaming")
    assert r.exit_code == 0, r.text
    assert (tmp_path / "releases" / "dta" / "public" / "microdata.parquet").exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_dask_release_through_the_cli_on_a_folder_of_parts(tmp_path):
    frame = _frame(6000)
    whole = tmp_path / "whole.parquet"
    frame.to_parquet(whole, index=False)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, idx in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[idx].to_parquet(parts / f"part-{i}.parquet", index=False)
    assert run("release", _job(tmp_path, "pd", whole)).exit_code == 0
    r = run("release", _job(tmp_path, "dk", parts, engine={"kind": "dask", "workers": 2}),
            "--timings")
    assert r.exit_code == 0, r.text
    tasks = _timings(r)["tasks"]  # every step of the engine (it printed "tasks": {} before)
    for step in ("load", "dask: counting cells on the cluster", "dask: releasing records on "
                 "the cluster", "dask: writing the public file in order", "reports", "write"):
        assert step in tasks, tasks
    exp, got = _public(tmp_path, "pd"), _public(tmp_path, "dk")
    assert got["microdata.parquet"] == exp["microdata.parquet"]
    assert got["microdata.csv"] == exp["microdata.csv"]
    assert _audit(tmp_path, "pd")["blocks"] == _audit(tmp_path, "dk")["blocks"]
    assert _audit(tmp_path, "dk")["engine"] == "dask"
    assert _reports(tmp_path, "dk") == _reports(tmp_path, "pd", rename="dk")
    r = run("audit", tmp_path / "releases" / "dk")  # source = folder of parts, counted in batches
    assert r.exit_code == 0, r.text


@pytest.mark.e2e
def test_audit_of_a_streaming_release_catches_a_tampered_public_file(tmp_path):
    inp = tmp_path / "in.parquet"
    _frame(3000).to_parquet(inp, index=False)
    assert run("release", _job(tmp_path, "st", inp), "--engine", "streaming").exit_code == 0
    pub = tmp_path / "releases" / "st" / "public" / "microdata.parquet"
    table = pq.read_table(pub)
    sex = table.column("sex").to_numpy().copy()
    sex[:50] = 1 - sex[:50]  # flip a partition variable: partition-set counts change
    pub.chmod(0o644)
    pq.write_table(table.set_column(table.schema.get_field_index("sex"), "sex", pa.array(sex)),
                   pub)
    r = run("audit", tmp_path / "releases" / "st")
    assert r.exit_code == 1, r.text
    assert "partition" in r.text.lower()


@pytest.mark.e2e
def test_streaming_reports_every_input_problem_with_global_rows(tmp_path):
    frame = _frame(2000)
    frame.loc[[3, 1500], "age"] = 120          # outside 0..91, in two batches of 700
    frame.loc[1999, "puma"] = -1
    inp = tmp_path / "bad.parquet"
    frame.to_parquet(inp, index=False)
    cfg = _job(tmp_path, "bad", inp, engine={"kind": "streaming", "batch_rows": 700})
    for cmd in ("release", "plan"):
        r = run(cmd, cfg)
        assert r.exit_code == 2, r.text
        assert "Traceback" not in r.text
        assert "age" in r.text and "4, 1501" in r.text and "120" in r.text
        assert "puma" in r.text and "2000" in r.text
    assert not (tmp_path / "releases" / "bad").exists()


@pytest.mark.e2e
def test_streaming_release_through_the_cli_does_not_prefetch_the_input(tmp_path, monkeypatch):
    """The CLI reads a pandas job's input while Prefect boots; a batch-engine release must not
    (the prefetch would hold the whole file in memory for nothing): the flow is handed the
    pre-flight's config and checks, never a job read whole."""
    import flows.release as fr

    calls = []
    monkeypatch.setattr(fr, "load_job", lambda p: calls.append(p))
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(_frame(500), preserve_index=False), inp)
    r = run("release", _job(tmp_path, "st", inp), "--engine", "streaming")
    assert r.exit_code == 0, r.text
    assert calls == []


@pytest.mark.e2e
def test_timings_of_the_streaming_engine_name_every_step(tmp_path):
    inp = tmp_path / "in.parquet"
    _frame(3000).to_parquet(inp, index=False)
    r = run("release", _job(tmp_path, "tm", inp), "--engine", "streaming", "--timings")
    assert r.exit_code == 0, r.text
    t = _timings(r)
    tasks = t["tasks"]
    for step in ("load", "streaming: counting cells", "streaming: releasing records",
                 "streaming: writing the public file in order", "reports", "write",
                 "artifacts"):
        assert step in tasks, tasks
    assert all(v >= 0 for v in tasks.values())
    # the steps are consecutive parts of the job: together at most its wall time
    assert sum(tasks.values()) <= t["job_seconds"] + 0.01
    assert t["preflight_seconds"] >= 0 and t["prefect_seconds"] >= 0
