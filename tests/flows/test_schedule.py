"""Schedules: config ``schedule:`` -> served Prefect deployment with cron and timezone.

The slow test runs ``sdc schedule`` for real (its own PREFECT_HOME) against the session's Prefect
API (the harness's server process), triggers a run of the served deployment through the API and
waits for the release folder. The process it starts is stopped by PID (its own process group)
in a finally.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sdc
from flows.schedule import (
    NO_SERVER_MESSAGE,
    ScheduleError,
    build_deployments,
    collect_schedules,
    require_server,
)

BIN = Path(sys.executable).parent
SDC = BIN / "sdc"


def _clean_env(prefect_home: Path) -> dict[str, str]:
    """The current environment without any PREFECT_* setting, on a private PREFECT_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PYTHONUNBUFFERED": "1",
    })
    return env


# ---------------------------------------------------------------------------------------------
# plain functions
# ---------------------------------------------------------------------------------------------
def test_collect_schedules_keeps_scheduled_and_reports_skipped(make_small_job):
    a = make_small_job("monthly", schedule={"cron": "0 6 1 * *", "timezone": "Europe/Paris"})
    b = make_small_job("adhoc")
    jobs, skipped = collect_schedules([a, b])
    assert [(j.name, j.cron, j.timezone, j.config_path) for j in jobs] == [
        ("monthly", "0 6 1 * *", "Europe/Paris", a.resolve())]
    assert skipped == [(b.resolve(), "config 'adhoc' has no schedule: section")]


def test_collect_schedules_errors(make_small_job):
    plain = make_small_job("adhoc")
    with pytest.raises(ScheduleError, match="none of the given configs has a schedule"):
        collect_schedules([plain])
    bad_tz = make_small_job("tz", schedule={"cron": "0 6 1 * *", "timezone": "Mars/Olympus"})
    with pytest.raises(sdc.ConfigError, match=r"schedule.timezone 'Mars/Olympus'"):
        collect_schedules([bad_tz])
    bad_cron = make_small_job("cron", schedule={"cron": "99 6 1 * *"})
    with pytest.raises(sdc.ConfigError, match=r"schedule.cron '99 6 1 \* \*'"):
        collect_schedules([bad_cron])
    one = make_small_job("same", schedule={"cron": "0 6 1 * *"})
    two = one.with_name("copy.yaml")
    two.write_text(one.read_text())
    with pytest.raises(ScheduleError, match=r"share the name\(s\) \['same'\]"):
        collect_schedules([one, two])


def test_build_deployments_cron_timezone_parameters(make_small_job):
    cfg = make_small_job("monthly", schedule={"cron": "30 5 2 * *", "timezone": "America/Chicago"})
    jobs, _ = collect_schedules([cfg])
    (dep,) = build_deployments(jobs, force=True)
    assert dep.name == "monthly"
    assert dep.flow_name == "release"
    assert dep.entrypoint == "flows.release.release"
    assert dep.parameters == {"config_path": str(cfg.resolve()), "force": True,
                              "wait_for_review": True}
    (sched,) = dep.schedules
    assert sched.schedule.cron == "30 5 2 * *"
    assert sched.schedule.timezone == "America/Chicago"


def test_require_server_refuses_without_api_url():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(ScheduleError) as e:
            require_server()
    assert str(e.value) == NO_SERVER_MESSAGE
    assert "prefect server start" in NO_SERVER_MESSAGE and "PREFECT_API_URL" in NO_SERVER_MESSAGE
    dead = f"http://127.0.0.1:{_free_port()}/api"
    with temporary_settings(updates={PREFECT_API_URL: dead}):
        assert require_server(check=False) == dead
        with pytest.raises(ScheduleError, match="no Prefect server answers there"):
            require_server()


def test_require_server_accepts_a_live_server(prefect_harness):
    from prefect.settings import PREFECT_API_URL

    assert require_server() == PREFECT_API_URL.value()


def test_sdc_schedule_without_server_exits_plainly(make_small_job, tmp_path):
    """The real entry point, in a clean environment: exit 2, the plain message, no traceback."""
    cfg = make_small_job("monthly", schedule={"cron": "0 6 1 * *"})
    proc = subprocess.run([str(SDC), "schedule", str(cfg)], env=_clean_env(tmp_path / "ph"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "PREFECT_API_URL is not set" in err
    assert "prefect server start" in err
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("failures", [2, 4])
def test_a_runner_that_fails_to_start_is_retried_then_refused(
        failures: int, prefect_harness, make_small_job, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen under load (CI-like): Prefect's runner failed to start because the server closed
    the event stream's websocket during the handshake, and `sdc schedule` ended with exit 1
    and "This was not expected". Now it tries again (2, 4, 8 s) with a warning each time;
    after the 4th failure, exit 2 naming the server and what to check."""
    import prefect
    from typer.testing import CliRunner

    import flows.schedule
    from sdc.cli.main import app

    calls = []

    def serve(*deployments, **kw):
        calls.append(kw.get("print_starting_message", True))
        if len(calls) <= failures:
            raise RuntimeError("Runner failed to start: event_emitter \u2014 Unable to "
                               "authenticate to the event stream.")

    monkeypatch.setattr(prefect, "serve", serve)
    monkeypatch.setattr(flows.schedule, "SERVE_RETRY_SECONDS", (0.0, 0.0, 0.0))
    cfg = make_small_job("monthly", schedule={"cron": "0 6 1 * *"})
    res = CliRunner().invoke(app, ["schedule", str(cfg)], env={"COLUMNS": "1000"})
    text = " ".join((res.stdout + res.stderr).split())
    assert text.count("trying again in 0 s") == min(failures, 3), text
    assert calls[0] is True and not any(calls[1:])  # Prefect's banner printed once
    if failures < 4:
        assert res.exit_code == 0, text
        assert len(calls) == failures + 1
    else:
        assert res.exit_code == 2, text
        assert len(calls) == 4
        assert "did not let the schedule runner connect (4 attempts; event_emitter" in text
        assert "This was not expected" not in text


# ---------------------------------------------------------------------------------------------
# for real: server + sdc schedule + prefect deployment run
# ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, logs: list[Path], step: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    tails = "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-4000:]}"
                      for p in logs if p.exists())
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


def _stop(proc: subprocess.Popen | None) -> None:
    """SIGTERM to the process group we created for ``proc``, then SIGKILL if it lingers."""
    if proc is None or proc.poll() is not None:
        return
    pgid = os.getpgid(proc.pid)
    os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.e2e
def test_schedule_serves_and_runs_for_real(prefect_harness, make_small_job, tmp_path):
    """``sdc schedule`` (a real process) serving a config against the session's Prefect API
    (the harness: a real server process, shared by the worker's tests instead of a ``prefect
    server start`` of its own); a run of the served deployment is triggered through the API
    (what ``prefect deployment run`` does, without its process start per try) and the served
    process writes the release; SIGTERM pauses the schedules."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    cfg = make_small_job("sched-job", schedule={"cron": "0 6 1 1 *", "timezone": "Europe/Paris"})
    release_dir = tmp_path / "releases" / "sched-job"
    api = str(PREFECT_API_URL.value())
    # the served process asks for runs every second instead of Prefect's 10 s: the triggered
    # run starts ~5 s sooner on average (the same run, the same release)
    client_env = dict(_clean_env(tmp_path / "prefect-home"), PREFECT_API_URL=api,
                      PREFECT_RUNNER_POLL_FREQUENCY="1")
    serve_log = tmp_path / "serve.log"
    logs = [serve_log]
    serve = None

    def deployment() -> object:
        with temporary_settings(updates={PREFECT_API_URL: api}):
            with get_client(sync_client=True) as client:
                return client.read_deployment_by_name("release/sched-job")

    try:
        with open(serve_log, "w") as out:
            serve = subprocess.Popen([str(SDC), "schedule", str(cfg)], env=client_env,
                                     cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)

        def served() -> bool:
            assert serve.poll() is None, "sdc schedule exited early"
            try:
                deployment()
            except Exception:  # ObjectNotFound until the service registered it
                return False
            return True

        _wait(served, 120, "the deployment release/sched-job to exist", logs, step=0.5)

        # the served deployment carries the config's cron, timezone and absolute config path
        dep = deployment()
        assert dep.parameters["config_path"] == str(cfg.resolve())
        (sched,) = dep.schedules
        assert (sched.schedule.cron, sched.schedule.timezone) == ("0 6 1 1 *", "Europe/Paris")
        assert sched.active
        assert not dep.paused

        with temporary_settings(updates={PREFECT_API_URL: api}):
            with get_client(sync_client=True) as client:
                client.create_flow_run_from_deployment(dep.id)  # scheduled now

        _wait(lambda: (release_dir / "internal" / "audit.json").exists(), 180,
              "the release folder from the triggered run", logs)
        assert sorted(p.name for p in (release_dir / "public").iterdir()) == [
            "codebook.md", "microdata.csv", "microdata.parquet"]
        from sdc.audit.verify import verify_release

        assert verify_release(release_dir).ok

        # stopping the service (SIGTERM, as systemd does) pauses its schedules
        _stop(serve)
        assert serve.returncode == 0, serve_log.read_text(errors="replace")[-4000:]
        # the pause is requested by the service while it shuts down; give the API a moment to
        # show it (one fresh-clone run read the deployment before the pause was visible)
        _wait(lambda: bool(deployment().paused), 30,
              "the deployment to be paused after SIGTERM", logs, step=0.5)
    finally:
        _stop(serve)


@pytest.mark.slow
@pytest.mark.e2e
def test_ctrl_c_stops_the_schedule_cleanly(prefect_harness, make_small_job, tmp_path):
    """Issue 47: Ctrl-C on `sdc schedule` printed four tracebacks (asyncio's report of the
    runner's cancelled tasks) and left the run it was executing "Running" for ever. Now
    Ctrl-C (SIGINT to the terminal's process group: the service and its runs' processes) is
    the runner's graceful stop: exit 0, no traceback, the run paused for review is cancelled
    (not left Paused/Running; its staged release stays for `sdc approve DIR`), the schedules
    are paused."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    cfg = make_small_job("ctrl-c", n=500, schedule={"cron": "0 6 1 1 *"},
                         review={"required": True, "approvers": ["alice"]})
    staged = tmp_path / "releases" / "ctrl-c.staged"
    api = str(PREFECT_API_URL.value())
    env = dict(_clean_env(tmp_path / "prefect-home"), PREFECT_API_URL=api,
               PREFECT_RUNNER_POLL_FREQUENCY="1")
    log = tmp_path / "serve.log"

    def interruptible() -> None:  # as a terminal starts it: SIGINT not ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    def client():
        return get_client(sync_client=True)

    serve = None
    try:
        with open(log, "w") as out:
            serve = subprocess.Popen([str(SDC), "schedule", str(cfg)], env=env, cwd=tmp_path,
                                     stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=interruptible)
        with temporary_settings(updates={PREFECT_API_URL: api}):
            def deployment():
                with client() as c:
                    return c.read_deployment_by_name("release/ctrl-c")

            def served() -> bool:
                assert serve.poll() is None, log.read_text()
                try:
                    deployment()
                except Exception:
                    return False
                return True

            _wait(served, 120, "the deployment", [log], step=0.5)
            with client() as c:
                run_id = c.create_flow_run_from_deployment(deployment().id).id

            def paused() -> bool:
                with client() as c:
                    state = c.read_flow_run(UUID(str(run_id))).state
                return state is not None and state.is_paused()

            _wait(paused, 180, "the run to pause for review", [log], step=0.5)
            before = log.stat().st_size  # what the service printed before the Ctrl-C
            os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C in the terminal
            assert serve.wait(timeout=60) == 0, log.read_text()[-4000:]
            text = log.read_bytes()[before:].decode(errors="replace")
            # no traceback from the stop (a server that stalled under the suite's load earlier
            # makes Prefect's event client log one of its own before the Ctrl-C: not checked)
            assert "Traceback" not in text, text[-4000:]
            assert "CancelledError" not in log.read_text(errors="replace")
            with client() as c:
                state = c.read_flow_run(UUID(str(run_id))).state
            assert state.is_cancelled(), state
            assert staged.is_dir()
            _wait(lambda: bool(deployment().paused), 30, "the schedules to pause", [log])
    finally:
        _stop(serve)
