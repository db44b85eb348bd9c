"""Report assembly (sdc.report): schema, determinism, confidentiality, re-rendering, and the page
as a browser renders it."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.reports.build import Reports, dumps, headline, render_release_report
from sdc.reports.html import render_html
from sdc.reports.schema import RISK_SCHEMA, UTILITY_SCHEMA, ReportSchemaError, validate
from tests.release_helpers import reports_of

ROOT = Path(__file__).resolve().parents[2]
SEED = 20240601


@pytest.fixture(scope="module")
def census() -> tuple[pd.DataFrame, sdc.ReleaseConfig, Any, Reports]:
    cfg = sdc.load_config(ROOT / "configs" / "census_demo.yaml")
    frame = pd.read_csv(cfg.input_path)
    result = sdc.release_frame(frame, cfg, seed=SEED)
    return frame, cfg, result, reports_of(result, cfg, seed=SEED)


def test_files_validate_and_are_strict_json(census) -> None:
    *_, rep = census
    files = rep.files()
    assert set(files) == {"risk.json", "utility.json", "report.html"}

    def no_constants(x: str) -> None:
        raise AssertionError(f"non-standard JSON constant {x}")

    risk = json.loads(files["risk.json"], parse_constant=no_constants)
    utility = json.loads(files["utility.json"], parse_constant=no_constants)
    validate(risk, utility)
    assert risk == rep.risk and utility == rep.utility
    # sorted keys, stable bytes
    assert files["risk.json"] == dumps(risk)
    text = files["risk.json"].decode()
    assert text.endswith("\n") and "NaN" not in text and "Infinity" not in text


def test_documented_schema_files_are_current() -> None:
    for name, schema in (("risk.schema.json", RISK_SCHEMA), ("utility.schema.json", UTILITY_SCHEMA)):
        p = ROOT / "docs" / "report_schema" / name
        assert json.loads(p.read_text()) == schema, (
            f"{p} is stale: run python -m sdc.reports.schema docs/report_schema")


def test_schema_rejects_a_bad_document(census) -> None:
    *_, rep = census
    bad = json.loads(json.dumps(rep.risk))
    bad["verdict"]["certificate"] = "low"
    with pytest.raises(ReportSchemaError, match=r"risk.json: field verdict/certificate"):
        validate(bad, rep.utility)
    bad_u = json.loads(json.dumps(rep.utility))
    del bad_u["pairs"]
    with pytest.raises(ReportSchemaError, match="utility.json"):
        validate(rep.risk, bad_u)


def test_census_content(census) -> None:
    frame, cfg, result, rep = census
    risk, utility = rep.risk, rep.utility
    v = risk["verdict"]
    assert v["pass"] and v["certificate"] <= cfg.risk.xi
    assert v["certificate"] == pytest.approx(result.certificate)
    assert v["n_prb"] == len(result.blocks) == len(risk["prbs"])
    assert v["n_changed"] == result.n_changed
    assert all(p["pass"] and p["max_risk"] <= cfg.risk.xi for p in risk["prbs"])
    # before: the engine's own cell frequencies
    t = result.cells.frequency
    b = risk["before"]
    assert b["n_cells"] == t.size
    assert {c["class"]: c["cells"] for c in b["frequency_classes"]}["1"] == int((t == 1).sum())
    assert b["sensitive"]["records"] == int(t[t * cfg.risk.xi < 1].sum())
    assert b["k_anonymity"][0]["records_violating"] == int((t == 1).sum())
    # after: recomputed from the released frame with a plain groupby
    counts = result.frame.value_counts(cfg.key_names)
    a = risk["after"]
    assert a["n_cells"] == len(counts)
    assert a["k_anonymity"][1]["records_violating"] == int(counts[counts < 3].sum())
    # per partition set: records are never moved across partition sets (no merges here)
    assert not result.merges
    assert all(p["n_records"] == p["n_records_after"] for p in risk["partition_sets"])
    assert sum(p["sensitive_records_before"] for p in risk["partition_sets"]) == b["sensitive"]["records"]
    assert risk["intruder"]["n_sim"] == 200
    # headline numbers for the Prefect artifact
    h = headline(risk, utility)
    assert h["pass"] is True and h["n_records"] == len(frame)
    assert h["unique_records_before"] == int((t == 1).sum())
    assert all(isinstance(x, bool | int | float | type(None)) for x in h.values())


def test_deterministic_and_row_order_invariant(census) -> None:
    frame, cfg, _, rep = census
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    result2 = sdc.release_frame(shuffled, cfg, seed=SEED)
    rep2 = reports_of(result2, cfg, seed=SEED)
    f1, f2 = rep.files(), rep2.files()
    assert f1["risk.json"] == f2["risk.json"]
    assert f1["utility.json"] == f2["utility.json"]
    assert f1["report.html"] == f2["report.html"]


def test_html_has_no_identifier_or_id(census) -> None:
    frame, cfg, _, rep = census
    page = rep.html
    tokens = set(re.findall(r"[A-Za-z0-9_]+", page))
    ids = set(frame[cfg.input.id_column].astype(str))
    assert not tokens & ids, sorted(tokens & ids)[:5]
    # full names are "First Last": collect every capitalized word pair on the page
    pairs = set(re.findall(r"[A-Z][a-z]+ [A-Z][a-z]+", page))
    names = set(frame["full_name"].astype(str))
    assert not pairs & names, sorted(pairs & names)[:5]
    # and no name at all, however written
    for name in frame["full_name"].drop_duplicates().head(2000):
        assert name not in page
    assert "person_id" not in page and "full_name" not in page
    # self-contained: no external resource
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page


def test_render_release_report(census, tmp_path: Path) -> None:
    *_, rep = census
    internal = tmp_path / "internal"
    internal.mkdir(mode=0o700)
    for name, data in rep.files().items():
        (internal / name).write_bytes(data)
    (internal / "report.html").write_text("old")
    out = render_release_report(tmp_path)
    assert out == internal / "report.html"
    assert out.read_text(encoding="utf-8") == rep.html  # the page is a function of the JSON
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert [p.name for p in internal.iterdir() if p.name.startswith(".")] == []
    (internal / "utility.json").unlink()
    with pytest.raises(FileNotFoundError, match="utility.json"):
        render_release_report(tmp_path)


def test_render_rejects_edited_json(census, tmp_path: Path) -> None:
    *_, rep = census
    internal = tmp_path / "internal"
    internal.mkdir()
    files = rep.files()
    (internal / "utility.json").write_bytes(files["utility.json"])
    (internal / "risk.json").write_text('{"schema_version": "sdc-risk/1"}')
    with pytest.raises(ReportSchemaError, match="risk.json"):
        render_release_report(tmp_path)


def test_small_release_without_prb() -> None:
    """A release where nothing is sensitive still gets a complete, valid report."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": range(60), "sex": np.repeat([1, 2], 30),
                          "grp": np.tile(["a", "b", "c"], 20), "x": rng.normal(size=60)})
    cfg = sdc.parse_config({"name": "tiny", "input": {"path": "x.csv", "id_column": "id"},
                            "key_variables": {"sex": {"categories": [1, 2]},
                                              "grp": {"categories": ["a", "b", "c"]}},
                            "risk": {"xi": 0.395}}, base_dir=Path("."))
    result = sdc.release_frame(frame, cfg, seed=1)
    rep = reports_of(result, cfg, seed=1, n_sim=20)
    assert rep.risk["prbs"] == [] and rep.risk["intruder"]["classes"] == []
    assert rep.risk["verdict"]["pass"]
    assert "<svg" in rep.html and render_html(rep.risk, rep.utility) == rep.html


@pytest.mark.slow
def test_page_renders_in_headless_chromium(census, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); the page cannot "
                    "be rendered in a browser here")
    *_, rep = census
    page = tmp_path / "report.html"
    page.write_text(rep.html, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--user-data-dir={profile}"]
        dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=180, check=True).stdout
        shot = tmp_path / "shot.png"
        subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1280,2000",
                        page.as_uri()], capture_output=True, timeout=180, check=True)
    # the browser parsed the page: charts (inline SVG with drawn bars) and tables are there
    n_keys = len(rep.utility["key_variables"])
    assert dom.count("<svg") >= n_keys + 3   # one chart per key + PRB risk, sizes, intruder
    assert dom.count("<rect") > 100
    assert dom.count("<table") >= n_keys + 4
    assert "CERTIFIED" in dom and "Disclosure review" in dom
    assert shot.is_file() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_certificate_and_expected_reidentifications_read_right_on_the_page() -> None:
    """A certificate 4e-6 below xi is not shown as xi ("0.39500 <= 0.395"), and expected
    re-identifications above 100 are whole numbers, not "27,390.0"."""
    from sdc.reports.html import fmt_cert, fmt_er

    assert fmt_cert(0.394996, 0.395) == "0.394996"
    assert float(fmt_cert(0.394996, 0.395)) < 0.395
    assert fmt_cert(0.2, 0.395) == "0.20000"
    assert fmt_cert(0.395, 0.395) == "0.39500"
    assert fmt_er(27390.04) == "27,390" and fmt_er(12.34) == "12.3" and fmt_er(None) == "–"
