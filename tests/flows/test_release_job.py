"""One release job (issues 45 and 47): the config read once per run, one pre-flight for the
command line, the flow and the scheduled deployment, and the review gate held on every path.

The flow-level tests run on the session's Prefect API (``prefect_harness``); a paused run that
must stay alive runs in a thread of this process (its waiting process is this one), a run whose
process must die runs in a subprocess killed by its pid.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import run_cli

from sdc.errors import InputError
from sdc.release.preflight import preflight

REVIEW = {"required": True, "approvers": ["alice"]}


def _snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder``: (inode, mtime ns, SHA-256): a folder nobody touched has
    the same snapshot."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_ino, st.st_mtime_ns,
                                               hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _state(run_id: str):
    from uuid import UUID

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(run_id)).state


def _paused_run(staged: Path, timeout: float = 300.0, other_than: str | None = None) -> str:
    """The id of the live run paused for the release staged in ``staged``."""
    from flows.review import paused_run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            run_id = json.loads((staged / "internal" / "review.json").read_text())["flow_run_id"]
        except (OSError, ValueError, KeyError):
            run_id = None
        if run_id and run_id != other_than and paused_run(run_id).live:
            return run_id
        time.sleep(0.3)
    raise AssertionError(f"no run paused for review of {staged}")


# ---------------------------------------------------------------------------------------------
# the config read once; one pre-flight
# ---------------------------------------------------------------------------------------------
def _count_config_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every parse of a config *file* (``load_config`` -> ``parse_config(source="config
    '...'")``) from now on."""
    import sdc.config.load as load

    reads: list[str] = []
    real = load.parse_config

    def counted(data, base_dir=None, **kw):
        if str(kw.get("source", "")).startswith("config '"):
            reads.append(kw["source"])
        return real(data, base_dir, **kw)

    monkeypatch.setattr(load, "parse_config", counted)
    return reads


@pytest.mark.e2e
def test_sdc_release_reads_its_config_once(prefect_harness, make_small_job, monkeypatch):
    """Issue 45: one `sdc release` parsed its config 4 times (pre-flight, prefetch, the flow's
    engine, the load task) and checked the target, seed and series twice. Now the pre-flight
    reads it, and the flow takes that read; a run started without `sdc release` (a schedule)
    reads it once in its own pre-flight."""
    from flows.release import release

    cfg = make_small_job("once", n=600)
    reads = _count_config_reads(monkeypatch)
    r = run_cli("release", str(cfg))
    assert r.exit_code == 0, r.text
    assert len(reads) == 1, reads
    reads.clear()
    release(config_path=str(cfg), force=True)          # as a scheduled run calls it
    assert len(reads) == 1, reads


def test_the_preflight_refuses_a_staged_release_to_a_scheduled_run(make_small_job, tmp_path):
    """`sdc release --force` may replace a release awaiting review; a scheduled run never does
    (its predecessor's paused run waits on it), not even when served with --force."""
    cfg = make_small_job("pending")
    staged = tmp_path / "releases" / "pending.staged"
    (staged / "internal").mkdir(parents=True)
    with pytest.raises(InputError, match="a release awaits review .* or rerun with --force"):
        preflight(cfg)
    preflight(cfg, force=True)
    for force in (False, True):
        with pytest.raises(InputError, match="a scheduled run never replaces a release "
                                             "awaiting review"):
            preflight(cfg, force=force, scheduled=True)


# ---------------------------------------------------------------------------------------------
# scheduled runs and the review gate
# ---------------------------------------------------------------------------------------------
def _deployment_parameters(cfg: Path, force: bool) -> dict:
    """The parameters `sdc schedule` gives every run of the config's deployment."""
    from flows.schedule import build_deployments, collect_schedules

    jobs, _ = collect_schedules([cfg])
    (dep,) = build_deployments(jobs, force=force)
    return dict(dep.parameters)


@pytest.mark.waits
@pytest.mark.e2e
@pytest.mark.slow
def test_a_job_scheduled_every_minute_with_a_review_gate(prefect_harness, make_small_job,
                                                         tmp_path):
    """Issue 47's done-when, without ten real minutes: the runs a cron of one minute starts for
    ten minutes, each called with the served deployment's own parameters (served with
    --force). Minute 1 stages its release and pauses; minutes 2-4 find it awaiting review and
    fail with the message, never touching the staged folder (a second run used to write over
    it and put its id into review.json); alice approves by the paused run's id at minute 4,
    the run publishes and completes; minute 5 stages the next release and pauses, minutes
    6-10 fail as before, alice approves. At the end no run is left Running or Paused, two
    completed and eight failed, and the published release is the second one, approved."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from flows.release import release

    cfg = make_small_job("minutely", n=800, review=REVIEW, schedule={"cron": "* * * * *"})
    params = _deployment_parameters(cfg, force=True)
    assert params["wait_for_review"] is True and params["force"] is True
    staged = tmp_path / "releases" / "minutely.staged"
    out = tmp_path / "releases" / "minutely"
    results: dict[int, dict] = {}

    def scheduled_run(minute: int) -> threading.Thread | None:
        """One scheduled run: a run that stages pauses (in a thread, as its own process in
        `sdc schedule`); a refused one fails at once."""
        if staged.exists():
            before = _snapshot(staged)
            with pytest.raises(InputError, match="a scheduled run never replaces a release "
                                                 "awaiting review"):
                release(**params)
            assert _snapshot(staged) == before, f"minute {minute} touched the staged release"
            return None
        th = threading.Thread(target=lambda: results.__setitem__(minute, release(**params)),
                              daemon=True)
        th.start()
        return th

    approved = []
    paused_thread = None
    first_run = None
    for minute in range(1, 11):
        th = scheduled_run(minute)
        if th is not None:
            paused_thread = th
            first_run = _paused_run(staged, other_than=first_run)
        if minute in (4, 10):  # alice approves by the paused run's id
            r = run_cli("approve", first_run, "--as", "alice", "--comment", f"minute {minute}")
            assert r.exit_code == 0, r.text
            assert "which approved and published it" in " ".join(r.text.split())
            paused_thread.join(timeout=300)
            assert not paused_thread.is_alive()
            assert _state(first_run).is_completed()
            approved.append(first_run)
    assert len(approved) == 2 and not staged.exists()
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert audit["review"]["approved_by"] == "alice"
    assert audit["review"]["flow_run_id"] == approved[1]
    assert audit["review"]["comment"] == "minute 10"
    assert [results[m]["review"]["status"] for m in sorted(results)] == ["approved", "approved"]
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(like_="minutely")))
    states = sorted(r.state.type.value for r in runs)
    assert states == ["COMPLETED"] * 2 + ["FAILED"] * 8, states
    assert not [r for r in runs if r.state.is_running() or r.state.is_paused()]
    failed = [r for r in runs if r.state.is_failed()]
    assert all(r.name == "minutely.yaml" for r in failed)  # which config: in the run list
    assert all("a scheduled run never replaces a release awaiting review" in
               (r.state.message or "") for r in failed), [r.state.message for r in failed]
    assert {r.name for r in runs if r.state.is_completed()} == {"minutely (minutely.yaml)"}
    # the paused run's log says who must approve and the command
    want = f"waits for the decision of alice: `sdc approve {approved[1]} --as NAME"
    assert want in _run_log(approved[1], want)


def _run_log(run_id: str, want: str, timeout: float = 30.0) -> str:
    """The flow run's log lines on the server (sent in batches: wait for ``want``)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(log_filter=LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[UUID(run_id)])))
        text = "\n".join(line.message for line in logs)
        if want in text:
            break
        time.sleep(0.5)
    return text


@pytest.mark.e2e
@pytest.mark.slow
def test_approving_a_run_whose_process_is_gone_is_refused(prefect_harness, make_small_job,
                                                          tmp_path):
    """Issue 47: after `sdc schedule` was stopped, `sdc approve RUN_ID` said "sent 'approve'"
    (exit 0, also for a non-approver), nothing was published and the run showed "Running" for
    ever. Now a decision reaches a live paused run or is refused with exit 2 and the next step
    (the approver list first); approving the folder publishes and ends the orphaned run."""
    from prefect.settings import PREFECT_API_URL

    cfg = make_small_job("orphan", n=600, review=REVIEW)
    staged = tmp_path / "releases" / "orphan.staged"
    out = tmp_path / "releases" / "orphan"
    code = ("from flows.release import release; "
            f"release(config_path={str(cfg)!r}, wait_for_review=True)")
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        run_id = _paused_run(staged)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # as a stopped service: its runs' processes end
        proc.wait(timeout=60)
    before = _snapshot(staged)
    for who in ("alice", "mallory"):
        r = run_cli("approve", run_id, "--as", who)
        text = " ".join(r.text.split())
        assert r.exit_code == 2, r.text
        assert "has exited" in text and "nothing was sent" in text, text
        assert f"sdc approve {staged}" in text, text  # the next step
    assert _state(run_id).is_paused()  # not resumed into a "Running" nobody runs
    assert _snapshot(staged) == before and not out.exists()
    r = run_cli("approve", str(out), "--as", "mallory")
    assert r.exit_code == 2 and "not among the approvers" in " ".join(r.text.split())
    r = run_cli("approve", str(out), "--as", "alice")
    assert r.exit_code == 0, r.text
    assert json.loads((out / "internal" / "audit.json").read_text())["review"][
        "approved_by"] == "alice"
    state = _state(run_id)
    assert state.is_cancelled() and "approved by alice on the staged folder" in state.message


@pytest.mark.e2e
def test_a_staged_release_is_awaiting_review_not_completed(prefect_harness, make_small_job):
    """Issue 47: a run that staged its release (`sdc release --review`) showed "Completed" in
    the run list; its final state is now named "Awaiting review"."""
    from flows.artifacts import AWAITING_REVIEW
    from flows.release import release

    cfg = make_small_job("awaiting", n=500, review=REVIEW)
    state = release(config_path=str(cfg), return_state=True)
    assert state.name == AWAITING_REVIEW and "awaiting approval by alice" in state.message
    summary = state.result()
    assert summary["review"]["status"] == "pending"


@pytest.mark.waits
@pytest.mark.e2e
@pytest.mark.slow
def test_a_real_one_minute_cron_with_a_review_gate(server_home, make_small_job, tmp_path,
                                                   monkeypatch):
    """The same done-when with the real thing for a few minutes: `sdc schedule` serving a cron
    of one minute (with --force) on sdc's own server (`sdc server start`: Prefect's scheduler
    service runs there; the test harness's API has none). The first tick stages and
    pauses; a later tick is refused and fails without touching the staged folder; alice
    approves by the run id (exit 0 once the run published); Ctrl-C stops the service. No run
    of the job is left Running or Paused."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.server import start_server, stop_server

    cfg = make_small_job("cron1", n=500, review=REVIEW, schedule={"cron": "* * * * *"})
    staged = tmp_path / "releases" / "cron1.staged"
    out = tmp_path / "releases" / "cron1"
    monkeypatch.setenv("PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS", "5")
    srv, _ = start_server(port=_free_port())
    api = srv.url
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_API_URL=api,
               PREFECT_RUNNER_POLL_FREQUENCY="2", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PYTHONUNBUFFERED="1")
    log = tmp_path / "serve.log"

    def runs() -> list:
        with temporary_settings(updates={PREFECT_API_URL: api}):
            with get_client(sync_client=True) as client:
                return client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    tags=FlowRunFilterTags(all_=["release:cron1"])))

    def wait(predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert serve.poll() is None, log.read_text(errors="replace")[-4000:]
            if predicate():
                return
            time.sleep(1.0)
        raise AssertionError(f"timed out waiting for {what}\n"
                             f"{log.read_text(errors='replace')[-4000:]}")

    with open(log, "w") as f:
        serve = subprocess.Popen(
            [str(Path(sys.executable).parent / "sdc"), "schedule", "--force", str(cfg)],
            env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait(lambda: (staged / "internal" / "review.json").is_file(), 200, "the first tick")
        with temporary_settings(updates={PREFECT_API_URL: api}):  # this test's server, not the
            first = _paused_run(staged, timeout=120)               # session's (xdist workers)
        before = _snapshot(staged)
        wait(lambda: any(r.state.is_failed() for r in runs()), 150, "a refused tick")
        assert _snapshot(staged) == before
        failed = [r for r in runs() if r.state.is_failed()]
        assert all("never replaces a release awaiting review" in (r.state.message or "")
                   for r in failed), [r.state.message for r in failed]
        with temporary_settings(updates={PREFECT_API_URL: api}):
            r = run_cli("approve", first, "--as", "alice")
            assert r.exit_code == 0, r.text
            assert _state(first).is_completed()
        assert json.loads((out / "internal" / "audit.json").read_text())["review"][
            "flow_run_id"] == first
        os.killpg(serve.pid, signal.SIGINT)
        assert serve.wait(timeout=60) == 0
        left = [(r.name, r.state.name) for r in runs()
                if r.state.is_running() or r.state.is_paused() or r.state.is_pending()]
        assert not left, left
        assert UUID(first)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        stop_server()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
