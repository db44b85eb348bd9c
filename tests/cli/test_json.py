"""`--json` on plan, validate, audit and release: one JSON document on stdout, valid against
its schema (docs/cli_json/), with the same figures as the tables; errors as JSON documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sdc
from sdc.cli.json_output import SCHEMAS, validate, write_schemas

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def run_json(*args, code: int = 0) -> dict:
    from sdc.cli.main import app

    r = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert r.exit_code == code, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)                   # the whole of stdout is one JSON document
    validate(doc)
    return doc


def test_docs_schemas_are_current(tmp_path):
    write_schemas(tmp_path)
    for name in SCHEMAS:
        assert (tmp_path / f"{name}.schema.json").read_text() == \
            (REPO / "docs" / "cli_json" / f"{name}.schema.json").read_text(), \
            "run: python -m sdc.cli.json_output docs/cli_json"


def test_validate_json(make_small_job):
    doc = run_json("validate", make_small_job(n=600), "--json")
    assert doc["command"] == "validate" and doc["valid"] is True
    assert doc["n_records"] == 600 and doc["n_columns"] == 8
    assert doc["key_variables"] == ["sex", "age", "race", "region"]


def test_plan_json_matches_the_engine(make_small_job):
    cfg = make_small_job(n=2000)
    doc = run_json("plan", cfg, "--json")
    from sdc.release.job import plan_job

    p = plan_job(cfg)
    assert doc["n_prbs"] == p.n_prbs == len(doc["blocks"])
    assert doc["n_partition_sets"] == len(doc["partition_sets"])
    assert doc["certificate"] == pytest.approx(p.certificate)
    assert doc["kmin"] == 5 and doc["theta"] == pytest.approx(sdc.solve_theta(0.395))
    assert doc["changed"] == p.changed                      # integer seed: known
    assert sum(b["k"] for b in doc["blocks"]) == doc["n_sensitive_cells"]
    # the terminal's warnings are in the document (issue 34): > 20% expected to change here
    assert doc["expected_changed"] / doc["n_records"] > 0.2
    assert len(doc["warnings"]) == 1 and "(expected figure)" in doc["warnings"][0]
    assert f"sdc design {cfg}" in doc["warnings"][0]


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_errors_are_json_with_exit_codes(make_small_job, tmp_path, command):
    doc = run_json(command, make_small_job(risk={"xi": 0.2}), "--json", code=2)
    assert doc["command"] == "error" and doc["for"] == command and doc["exit_code"] == 2
    assert doc["error"] == "ConfigError" and "xi" in doc["message"]
    assert "got xi = 0.2 (got 0.2)" not in doc["message"]
    doc = run_json(command, tmp_path / "none.yaml", "--json", code=2)
    assert "does not exist" in doc["message"]


def test_audit_json_missing_folder(tmp_path):
    doc = run_json("audit", tmp_path / "nope", "--json", code=2)
    assert doc["for"] == "audit" and "does not exist" in doc["message"]


@pytest.mark.e2e
def test_release_and_audit_json(prefect_harness, make_small_job):
    cfg = make_small_job("json-job", n=2000)
    doc = run_json("release", cfg, "--json")
    out = sdc.load_config(cfg).output_dir
    assert doc["release_dir"] == str(out) and doc["certified"] is True
    assert doc["n_records"] == 2000
    assert doc["public_files"] == ["codebook.md", "microdata.csv", "microdata.parquet"]
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert doc["certificate"] == pytest.approx(audit["risk"]["certificate"])
    assert doc["records_changed"] == audit["counts"]["records_changed"]
    # issue 34: the warnings the terminal prints (here "> 20% changed") are in --json's list
    assert doc["records_changed"] / doc["n_records"] > 0.2, doc["records_changed"]
    changed = [w for w in doc["warnings"] if "of the records have changed key values" in w]
    assert len(changed) == 1 and f"sdc design {cfg}" in changed[0], doc["warnings"]

    err = run_json("release", cfg, "--json", code=2)          # exists: refused, as JSON
    assert err["error"] == "ReleaseExistsError" and "--force" in err["message"]

    doc = run_json("audit", out, "--json")
    assert doc["passed"] is True and doc["n_failed"] == 0 and doc["n_checks"] >= 5
    pub = out / "public" / "microdata.csv"
    pub.chmod(0o644)
    pub.write_text(pub.read_text().replace("\n1,", "\n2,", 1))
    doc = run_json("audit", out, "--json", code=1)
    assert doc["passed"] is False and doc["n_failed"] >= 1


def _staged(tmp_path, approvers=("alice",)):
    """A release staged for review, made without running a release (no Prefect)."""
    from sdc.io.write import sha256_bytes
    from sdc.publish.review import stage_release

    public = {"microdata.csv": b"record_id,sex\n1,1\n", "codebook.md": b"# codebook\n"}
    internal = {"blocks.parquet": b"x"}
    # the approvers come from the config (here its copy in audit.json: no config file)
    text = f"review: {{approvers: {json.dumps(list(approvers))}}}\n"
    audit = {"public_files": {k: sha256_bytes(v) for k, v in public.items()},
             "internal_files": {k: sha256_bytes(v) for k, v in internal.items()},
             "config": {"text": text, "sha256": sha256_bytes(text.encode()),
                        "source_path": None}}
    internal["audit.json"] = json.dumps(audit).encode()
    out = tmp_path / "releases" / "rev"
    stage_release(out, public, internal, force=False, approvers=list(approvers))
    return out


def test_approve_and_reject_json(tmp_path):
    out = _staged(tmp_path)
    staged = out.parent / "rev.staged"
    doc = run_json("approve", out, "--as", "mallory", "--json", code=2)
    assert doc["command"] == "error" and doc["for"] == "approve"
    assert doc["error"] == "ReviewError" and "not among the approvers" in doc["message"]
    doc = run_json("reject", out, "--as", "mallory", "--json", code=2)
    assert doc["for"] == "reject" and "not among the approvers" in doc["message"]
    assert staged.is_dir() and not out.exists()
    doc = run_json("approve", staged, "--as", "alice", "--comment", "checked", "--json")
    assert doc["command"] == "approve" and doc["decision"] == "approved"
    assert doc["via"] == "folder" and doc["flow_run_id"] is None
    assert doc["by"] == "alice" and doc["comment"] == "checked"
    assert doc["release_dir"] == str(out.absolute()) and doc["staged_dir"] == str(staged)
    rev = json.loads((out / "internal" / "audit.json").read_text())["review"]
    assert doc["manifest_sha256"] == rev["approved_manifest_sha256"]
    assert doc["at"] == rev["approved_at"]
    # nothing left to decide: an error document, exit 2
    doc = run_json("reject", out, "--as", "alice", "--json", code=2)
    assert doc["for"] == "reject" and "already approved by alice" in doc["message"]
    # a second staging, rejected
    other = _staged(tmp_path / "b", approvers=())
    doc = run_json("reject", other, "--as", "carol", "--json")
    assert doc["command"] == "reject" and doc["decision"] == "rejected"
    assert doc["via"] == "folder" and doc["comment"] == ""
    assert not (other.parent / "rev.staged").exists() and not other.exists()
