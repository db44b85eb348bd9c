"""Every ``sdc`` command through typer's test runner, with its error paths (exit codes 0/1/2,
one readable paragraph, no traceback). Only the release tests run the flow."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from typer.testing import CliRunner

import sdc
from sdc.cli.main import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


run = run_cli


def assert_clean_error(result, code: int, *needles: str) -> None:
    assert result.exit_code == code, result.text
    assert "Traceback" not in result.text
    assert result.text.startswith("error: ") or "error: " in result.text
    for n in needles:
        assert n in result.text, (n, result.text)


def test_help_lists_every_command():
    r = run("--help")
    assert r.exit_code == 0
    for cmd in ("release", "plan", "validate", "audit", "report", "schedule", "sample"):
        assert cmd in r.text
    r = run()  # no arguments: the help, as a usage error
    assert r.exit_code == 2 and "Usage: sdc" in r.text


def test_rr_is_mounted():
    r = run("rr", "--help")
    assert r.exit_code == 0, r.text
    assert "Usage: sdc rr" in r.text and "Randomized-response survey designs" in r.text


# --- validate -------------------------------------------------------------------------------
def test_validate_ok(make_small_job):
    r = run("validate", make_small_job(n=600))
    assert r.exit_code == 0, r.text
    assert "config and input are valid" in r.text and "600 / 8" in r.text


def test_validate_bad_config_names_the_key(make_small_job):
    cfg = make_small_job(risk={"xii": 0.4})
    assert_clean_error(run("validate", cfg), 2, "risk.xii", "unknown key")


def test_validate_missing_config():
    assert_clean_error(run("validate", "no/such/config.yaml"), 2, "does not exist")


def test_validate_bad_input_lists_problems(make_small_job):
    from conftest import small_frame

    bad = small_frame(300)
    bad.loc[[1, 2], "race"] = 9
    assert_clean_error(run("validate", make_small_job(frame=bad)), 2, "race")


def test_validate_missing_input(make_small_job, tmp_path):
    cfg = make_small_job(input={"path": str(tmp_path / "gone.csv")})
    assert_clean_error(run("validate", cfg), 2, "gone.csv")


def test_debug_shows_the_exception(make_small_job):
    cfg = make_small_job(risk={"xii": 0.4})
    r = runner.invoke(app, ["--debug", "validate", str(cfg)])
    assert isinstance(r.exception, sdc.ConfigError)


def test_unexpected_error_exit_1(make_small_job, monkeypatch):
    import sdc.release.job

    def boom(path, **kw):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sdc.release.job, "validate_release_input", boom)
    assert_clean_error(run("validate", make_small_job()), 1, "RuntimeError: disk on fire",
                       "--debug")


# --- plan -----------------------------------------------------------------------------------
def test_plan_prints_and_writes_nothing(make_census_job, tmp_path):
    cfg = make_census_job()
    r = run("plan", cfg, "--limit", "3")
    assert r.exit_code == 0, r.text
    for needle in ("Partition sets (42)", "Post-randomization blocks (42)", "theta (theorem) 0.7990",
                   "kmin 5", "expected changed records", "certificate 0.39", "<= xi",
                   "... and 39 more"):
        assert needle in r.text, needle
    assert not (tmp_path / "secrets").exists() and not (tmp_path / "releases").exists()


def test_plan_small_block_failure(make_small_job):
    cfg = make_small_job(n=300, partition={"sex": "as_is", "race": "as_is",
                                           "age": {"bands": list(range(0, 91, 5))}},
                         risk={"small_blocks": "fail"})
    assert_clean_error(run("plan", cfg), 2, "kmin", "small_blocks")


# --- release, audit, report (the flow runs here) --------------------------------------------
@pytest.mark.e2e
def test_release_audit_report(prefect_harness, make_small_job):
    cfg = make_small_job("cli-job", n=2000)
    out = sdc.load_config(cfg).output_dir

    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    assert f"Release written to {out}" in r.text and "certificate" in r.text

    assert_clean_error(run("release", cfg), 2, "already exists", "--force")

    r = run("audit", out)
    assert r.exit_code == 0, r.text
    assert "audit passed" in r.text and "FAIL" not in r.text

    html = out / "internal" / "report.html"
    html.unlink()
    r = run("report", out)
    assert r.exit_code == 0, r.text
    assert "Report written to" in r.text and html.is_file()
    assert run("report", out).exit_code == 0      # the release's own page: re-rendered
    html.write_text("<p>the reviewer's notes</p>")  # not the page the release wrote (issue 34)
    assert_clean_error(run("report", out), 2, str(html), "--force", "audit.json")
    assert html.read_text() == "<p>the reviewer's notes</p>"
    assert run("report", out, "--force").exit_code == 0

    # a modified public file fails the audit: exit 1 and a FAIL row
    csv = out / "public" / "microdata.csv"
    csv.write_bytes(csv.read_bytes().replace(b"\n", b"\r\n", 1))
    r = run("audit", out)
    assert r.exit_code == 1, r.text
    assert "FAIL" in r.text and "audit FAILED" in r.text


def test_release_bad_config_is_clean(make_small_job):
    """Fails in the config load before Prefect is involved: exit 2, one paragraph."""
    cfg = make_small_job(risk={"xi": 0.2})
    assert_clean_error(run("release", cfg), 2, "xi")


def test_audit_errors(tmp_path):
    assert_clean_error(run("audit", tmp_path / "nope"), 2, "does not exist")
    (tmp_path / "notarelease").mkdir()
    assert_clean_error(run("audit", tmp_path / "notarelease"), 1, "audit.json")


def test_report_missing_folder(tmp_path):
    assert_clean_error(run("report", tmp_path / "nope"), 2, "does not exist")


# --- schedule -------------------------------------------------------------------------------
def test_schedule_refuses_without_server(make_small_job):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    cfg = make_small_job(schedule={"cron": "0 6 1 * *"})
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        r = run("schedule", cfg)
    assert_clean_error(r, 2, "PREFECT_API_URL is not set", "prefect server start")


def _dead_api_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/api"


def test_schedule_and_release_with_a_dead_server(make_small_job):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    cfg = make_small_job(schedule={"cron": "0 6 1 * *"})
    with temporary_settings(updates={PREFECT_API_URL: _dead_api_url()}):
        assert_clean_error(run("schedule", cfg), 2, "no Prefect server answers there")
        # exit 2: a dead server is the user's to fix (start it or unset the URL)
        assert_clean_error(run("release", cfg), 2, "no Prefect server answers there",
                           "unset PREFECT_API_URL")


def test_schedule_serves_scheduled_configs(prefect_harness, make_small_job, monkeypatch):
    """Against the harness's live API; prefect.serve itself is replaced (the real thing is
    in test_schedule.py)."""
    import prefect

    served = []
    monkeypatch.setattr(prefect, "serve", lambda *deps, **kw: served.extend(deps))
    monthly = make_small_job("monthly", schedule={"cron": "0 6 1 * *", "timezone": "UTC"})
    adhoc = make_small_job("adhoc")
    r = run("schedule", monthly, adhoc)
    assert r.exit_code == 0, r.text
    assert f"skipped {adhoc.resolve()}" in r.text
    assert "serving release/monthly: cron '0 6 1 * *' (UTC)" in r.text
    assert [d.name for d in served] == ["monthly"]
    assert served[0].parameters == {"config_path": str(monthly.resolve()), "force": False,
                                    "wait_for_review": True}

    r = run("schedule", "--force", monthly)
    assert r.exit_code == 0 and served[-1].parameters["force"] is True

    assert_clean_error(run("schedule", adhoc), 2, "none of the given configs has a schedule")
    bad = make_small_job("badcron", schedule={"cron": "0 25 * * *"})
    assert_clean_error(run("schedule", bad), 2, "schedule.cron")


# --- sample ---------------------------------------------------------------------------------
def test_sample_regenerates_the_committed_file(tmp_path):
    r = run("sample", "--out", tmp_path / "ds")
    assert r.exit_code == 0, r.text
    written = tmp_path / "ds" / "census_sample.csv"
    assert "Sample written to" in r.text
    assert written.read_bytes() == (REPO / "data_samples" / "census_sample.csv").read_bytes()


def test_sample_unwritable_target(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    r = run("sample", "--out", blocker / "sub")
    assert r.exit_code == 2, r.text
    assert "Traceback" not in r.text and "error: " in r.text


def test_config_yaml_error_is_clean(tmp_path):
    cfg = tmp_path / "broken.yaml"
    cfg.write_text("name: x\ninput: [unclosed\n")
    assert_clean_error(run("plan", cfg), 2, "not valid YAML", "line")
    cfg.write_text(yaml.safe_dump({"name": "x"}))
    assert_clean_error(run("plan", cfg), 2, "required key is missing")


def test_plan_shows_small_block_actions_and_merges_verbatim(make_small_job):
    """Merge descriptions contain [brackets]: printed as text, never eaten as rich markup."""
    from sdc.release.job import plan_job

    cfg = make_small_job(n=400, partition={"sex": "as_is", "race": "as_is",
                                           "age": {"bands": list(range(0, 91, 10))}})
    merges = plan_job(cfg).merges
    assert any("[" in m for m in merges)
    r = run("plan", cfg)
    assert r.exit_code == 0, r.text
    assert "Small-block actions" in r.text and "merged+theorem" in r.text
    assert f"{len(merges)} merge steps made" in r.text and "(the steps: --verbose)" in r.text
    # the verdict is the last line on screen (issue 49)
    assert r.stdout.rstrip().splitlines()[-1].split()[0] == "certificate"
    r = run("plan", cfg, "--verbose")
    assert r.exit_code == 0, r.text
    for m in merges:
        assert " ".join(m.split()) in " ".join(r.text.split()), m


def test_release_timings(prefect_harness, make_small_job):
    """--timings: one JSON line with the job's seconds per task next to the total; the summary's
    time row splits the job from Prefect's start-up and bookkeeping."""
    import json

    cfg = make_small_job("timed-job", n=1500)
    r = run("release", cfg, "--timings")
    assert r.exit_code == 0, r.text
    line = next(x for x in r.stdout.splitlines() if x.startswith("timings "))
    t = json.loads(line.removeprefix("timings "))
    tasks = list(t["tasks"])  # the one flow's tasks, the executor's own steps in between
    assert tasks[0] == "load" and tasks[-3:] == ["reports", "write", "artifacts"], tasks
    for step in ("pandas: counting cells", "pandas: releasing records",
                 "pandas: writing the public file in order"):
        assert step in tasks, tasks
    # each figure is rounded to ms: allow that much per task
    assert 0 < sum(t["tasks"].values()) <= t["job_seconds"] + 0.01
    assert t["job_seconds"] <= t["total_seconds"]
    assert t["prefect_seconds"] == pytest.approx(t["total_seconds"] - t["job_seconds"], abs=2e-3)
    assert "s job +" in r.text and "Prefect start-up" in r.text
    # without the option: no timings line
    r = run("release", cfg, "--force")
    assert r.exit_code == 0, r.text
    assert "timings {" not in r.stdout


def test_tables_are_not_wrapped_when_stdout_is_not_a_terminal(make_census_job):
    """Piped output (a scheduled run's log): one PRB per line, nothing folded at 80 columns."""
    from typer.testing import CliRunner

    from sdc.cli.main import app

    cfg = make_census_job()
    r = CliRunner().invoke(app, ["plan", str(cfg), "--limit", "3"], env={"COLUMNS": None})
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if "theorem" in line]
    assert rows and all("sex=Male | age=0-17 | race=" in line for line in rows[:3]), rows
    assert max(len(line.rstrip()) for line in r.stdout.splitlines()) > 80


def test_design_and_plan_fit_80_columns_and_wrap_at_words(make_census_job):
    """On an 80-column terminal (COLUMNS=80) `sdc design` and `sdc plan` print no line over 80
    characters, break no number ("-1" / "3.2 SE" on two lines was the terminal hard-wrapping
    unwrapped text) and end with their verdict (issue 49)."""
    import re

    cfg = make_census_job()
    r = CliRunner().invoke(app, ["design", str(cfg), "--budget", "5"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert "(narrow terminal:" in r.stdout and "TVD bound" in r.stdout
    # a wrapped line never ends inside a number: no line ends with a digit or sign that the
    # next line continues with a digit, a point or "SE"
    for a, b in zip(lines, lines[1:], strict=False):
        assert not (re.search(r"[-+−\d.]$", a) and re.match(r"[\d.]", b)), (a, b)
    assert any(x.startswith("recommended (") for x in lines)
    r = CliRunner().invoke(app, ["plan", str(cfg), "--limit", "3"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(x) for x in r.stdout.splitlines()) <= 80
    assert r.stdout.rstrip().splitlines()[-1].split()[0] == "certificate"
