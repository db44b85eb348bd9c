"""The review gate: stage (owner-only), approve (publish, recorded in audit.json) or reject."""

from __future__ import annotations

import json
import stat

import pytest
from conftest import run_cli
from typer.testing import CliRunner

from sdc.publish.review import ReviewError, approve, manifest_sha256, reject

runner = CliRunner()


run = run_cli


@pytest.mark.e2e
def test_stage_approve_audit(make_small_job, tmp_path):
    cfg = make_small_job("rev", n=1500, review={"required": True,
                                                "approvers": ["alice", "bob"]})
    out = tmp_path / "releases" / "rev"
    staged = tmp_path / "releases" / "rev.staged"
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    assert "staged for review" in r.text and "sdc approve" in r.text
    assert not out.exists() and staged.is_dir()
    assert stat.S_IMODE(staged.stat().st_mode) == 0o700  # nobody else reads it, public/ too
    record = json.loads((staged / "internal" / "review.json").read_text())
    audit = json.loads((staged / "internal" / "audit.json").read_text())
    assert record["status"] == "pending" and record["manifest_sha256"] == manifest_sha256(audit)
    assert "internal/report.html" in "".join(f"internal/{n}" for n in audit["internal_files"])
    # issue 34: `sdc audit` of a good staged release passes and says it is staged ...
    r = run("audit", staged, columns=1000)  # wide: the long temporary path never wraps a cell
    assert r.exit_code == 0, r.text
    assert "review: staged, awaiting approval" in r.text and "STAGED for review" in r.text
    # ... and fails one with a file added after staging
    (staged / "public" / "extra.csv").write_text("id\n1\n")
    r = run("audit", staged, columns=1000)
    assert r.exit_code == 1 and "added: public/extra.csv" in r.text, r.text
    (staged / "public" / "extra.csv").unlink()
    # a second release while one awaits review is refused before anything runs
    r = run("release", cfg)
    assert r.exit_code == 2 and "awaits review" in r.text
    # not an approver
    r = run("approve", out, "--as", "mallory")
    assert r.exit_code == 2 and "not among the approvers" in r.text
    assert not out.exists()
    r = run("approve", staged, "--as", "alice", "--comment", "risk table checked")
    assert r.exit_code == 0, r.text
    assert out.is_dir() and not staged.exists()
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    audit = json.loads((out / "internal" / "audit.json").read_text())
    rev = audit["review"]
    assert rev["approved_by"] == "alice" and rev["comment"] == "risk table checked"
    assert rev["approved_manifest_sha256"] == record["manifest_sha256"] == manifest_sha256(audit)
    r = run("audit", out, columns=1000)
    assert r.exit_code == 0, r.text
    assert "review: published files are the approved ones" in r.text
    # issue 34: an approver outside the config's approvers fails the audit
    audit["review"]["approved_by"] = "mallory"
    (out / "internal" / "audit.json").write_text(json.dumps(audit))
    r = run("audit", out, columns=1000)
    assert r.exit_code == 1 and "not among the config's review.approvers" in r.text, r.text
    audit["review"]["approved_by"] = "alice"
    # the audit fails when audit.json's hashes are not the approved ones
    audit["public_files"]["codebook.md"] = "0" * 64
    (out / "internal" / "audit.json").write_text(json.dumps(audit))
    r = run("audit", out, columns=1000)
    assert r.exit_code == 1
    # ... and when a release that requires a review carries no approval
    del audit["review"]
    (out / "internal" / "audit.json").write_text(json.dumps(audit))
    r = run("audit", out, columns=1000)
    assert r.exit_code == 1 and "records no approval" in r.text
    with pytest.raises(ReviewError, match="already published"):
        approve(out, "alice")


@pytest.mark.e2e
def test_flag_review_reject_and_tampering(make_small_job, tmp_path):
    cfg = make_small_job("flag", n=1500)
    out = tmp_path / "releases" / "flag"
    staged = tmp_path / "releases" / "flag.staged"
    r = run("release", cfg, "--review", "--engine", "streaming")
    assert r.exit_code == 0, r.text
    assert staged.is_dir() and not out.exists()
    # a staged file changed during the review: approval refused
    pub = staged / "public" / "codebook.md"
    pub.write_text(pub.read_text() + "\nedited\n")
    with pytest.raises(ReviewError, match="changed after it was staged"):
        approve(staged, "anyone")
    assert not out.exists()
    r = run("reject", out, "--as", "carol", "--comment", "edited")
    assert r.exit_code == 0, r.text
    assert not staged.exists() and not out.exists()
    with pytest.raises(ReviewError, match="no release awaits review"):
        reject(out, "carol")


@pytest.mark.e2e
@pytest.mark.slow
def test_flow_pauses_for_the_decision_on_a_server(make_small_job, tmp_path, prefect_harness):
    """On a Prefect server (the session's test server), the flow stages the release and pauses
    with a typed input; a refused decision (not an approver) pauses it again; `sdc approve`
    with the run id resumes it and the run publishes the release."""
    import threading
    import time

    from flows.release import release
    from flows.review import paused_run_of

    cfg = make_small_job("paused", n=1500, review={"required": True, "approvers": ["alice"]})
    staged = tmp_path / "releases" / "paused.staged"
    out = tmp_path / "releases" / "paused"
    result: dict = {}

    def go():
        result["summary"] = release(config_path=str(cfg), wait_for_review=True)

    th = threading.Thread(target=go, daemon=True)
    th.start()

    def paused_run() -> str:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            review = staged / "internal" / "review.json"
            if review.is_file():
                run_id = json.loads(review.read_text())["flow_run_id"]
                if run_id and paused_run_of(run_id):
                    return run_id
            time.sleep(0.5)
        raise AssertionError("the flow run never paused for review")

    run_id = paused_run()
    assert not out.exists()
    # not an approver: refused before anything is sent (issue 47: it used to exit 0 "sent")
    from flows.review import paused_run as paused_state

    before = paused_state(run_id)
    r = run("approve", run_id, "--as", "mallory")
    assert r.exit_code == 2, r.text
    assert "'mallory' is not among the approvers" in " ".join(r.text.split())
    assert paused_state(run_id).state_id == before.state_id  # still the same pause
    r = run("approve", str(out), "--as", "mallory")  # by the folder: the same check first
    assert r.exit_code == 2, r.text
    assert paused_state(run_id).state_id == before.state_id
    assert not out.exists()
    r = run("approve", run_id, "--as", "alice", "--comment", "fine")
    assert r.exit_code == 0, r.text
    assert "which approved and published it" in " ".join(r.text.split())
    th.join(timeout=300)
    summary = result["summary"]
    assert summary["review"]["status"] == "approved"
    assert summary["release_dir"] == str(out.absolute())
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert audit["review"]["approved_by"] == "alice"
    assert audit["review"]["flow_run_id"] == run_id


def _stage(tmp_path, approvers=("alice",)):
    """A release staged for review without running one (no Prefect)."""
    from sdc.io.write import sha256_bytes
    from sdc.publish.review import stage_release

    public = {"microdata.csv": b"record_id,sex\n1,1\n", "codebook.md": b"# codebook\n"}
    internal = {"blocks.parquet": b"x"}
    audit = {"public_files": {k: sha256_bytes(v) for k, v in public.items()},
             "internal_files": {k: sha256_bytes(v) for k, v in internal.items()}}
    internal["audit.json"] = json.dumps(audit).encode()
    out = tmp_path / "releases" / "w"
    stage_release(out, public, internal, force=False, approvers=list(approvers))
    return out


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_await_decision_sees_the_other_process_decide(tmp_path, decision):
    """`--wait-for-review` with the embedded API waits on the files: the staged folder is
    published (approved, with who and when from audit.json) or deleted (rejected)."""
    import threading
    import time

    from sdc.publish.review import await_decision

    out = _stage(tmp_path)
    with pytest.raises(ReviewError, match="no decision within 0.2 s"):
        await_decision(out, poll_seconds=0.05, timeout_seconds=0.2)

    def decide():
        time.sleep(0.3)
        (approve if decision == "approve" else reject)(out, "alice", "looked at it")

    th = threading.Thread(target=decide)
    th.start()
    got = await_decision(out, poll_seconds=0.05, timeout_seconds=60)
    th.join()
    if decision == "approve":
        assert got["status"] == "approved" and got["name"] == "alice"
        assert got["comment"] == "looked at it" and got["release_dir"] == str(out)
        assert (out / "internal" / "audit.json").is_file()
    else:
        assert got["status"] == "rejected" and got["release_dir"] is None
        assert not out.exists()
    with pytest.raises(ReviewError, match="no release awaits review"):
        await_decision(out, poll_seconds=0.05, timeout_seconds=1)
    # decided before the wait began: the approval's time tells (since = when it was staged)
    assert await_decision(out, since="2000-01-01T00:00:00+00:00")["status"] == \
        ("approved" if decision == "approve" else "rejected")
    assert await_decision(out, since="2999-01-01T00:00:00+00:00")["status"] == "rejected"


@pytest.mark.e2e
def test_release_waits_for_review_on_the_command_line(make_small_job, tmp_path):
    """`sdc release --wait-for-review` (embedded Prefect, or the session's server when another
    test started it) stages, waits on the staged folder, and exits 0 once
    `sdc approve` (here from another thread, as from another terminal) has published it;
    a rejection ends the wait with exit 2."""
    import threading
    import time

    cfg = make_small_job("wait", n=1500, review={"required": True, "approvers": ["alice"]})
    out = tmp_path / "releases" / "wait"
    staged = tmp_path / "releases" / "wait.staged"

    def decide(command):
        deadline = time.monotonic() + 600
        while not (staged / "internal" / "review.json").is_file():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(0.5)
        (approve if command == "approve" else reject)(staged, "alice")

    th = threading.Thread(target=decide, args=("reject",))
    th.start()
    r = run("release", cfg, "--wait-for-review")
    th.join()
    assert r.exit_code == 2, r.text
    assert "release rejected" in r.text and not out.exists() and not staged.exists()
    th = threading.Thread(target=decide, args=("approve",))
    th.start()
    r = run("release", cfg, "--wait-for-review", "--json")
    th.join()
    assert r.exit_code == 0, r.text
    from sdc.cli.json_output import validate

    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["review"]["status"] == "approved" and doc["review"]["name"] == "alice"
    assert doc["review"]["release_dir"] == str(out)
    assert (out / "internal" / "audit.json").is_file() and not staged.exists()
    assert run("audit", out, columns=1000).exit_code == 0
