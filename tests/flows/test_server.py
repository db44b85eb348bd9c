"""``sdc server start|stop|status`` (flows.server) and the migration marker of flows.ephemeral."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.ephemeral import migrated_marker, warm_database
from flows.server import (
    DEFAULT_IDLE_MINUTES,
    ServerError,
    idle_minutes_setting,
    inspect_state,
    local_server,
    process_start,
    state_file,
    stop_server,
)

BIN = Path(sys.executable).parent


def test_marker_needs_the_database_and_this_version(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", raising=False)
    from importlib.metadata import version

    migrated_marker().write_text(f"prefect {version('prefect')}\n")
    assert not warm_database()  # no database file: it must be created (migrated)
    (tmp_path / "prefect.db").write_bytes(b"")
    assert warm_database()
    migrated_marker().write_text("prefect 0.0.1\n")  # another Prefect version migrated it
    assert not warm_database()
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://x/y")
    assert migrated_marker() is None and not warm_database()  # the user's database: never


def _sleeper() -> subprocess.Popen:
    """An unrelated live process of the user (a stale state file will name it), once it runs
    ``sleep`` (not the forked test process any more)."""
    p = subprocess.Popen(["sleep", "300"])
    deadline = time.monotonic() + 120  # exec of sleep waits for a CPU under make test
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"sleep"):
                break
        time.sleep(0.01)
    return p


def _stale_state(pid: int, **extra) -> None:
    data = {"pid": pid, "url": "http://127.0.0.1:9/api", "log": "", "token": "t" * 64,
            "boot_id": None, **extra}
    fd = os.open(state_file(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)


def test_state_of_a_dead_server_is_ignored(server_home):
    assert local_server() is None and inspect_state().state == "none"
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    _stale_state(p.pid, start_ticks=1)
    assert local_server() is None
    v = inspect_state()
    assert v.state == "dead" and "has exited" in v.detail


@pytest.mark.parametrize("legacy", [False, True], ids=["start-time", "old-state-file"])
def test_stop_never_signals_an_unrelated_live_process(server_home, legacy):
    """A stale state file whose pid now names another live process of the user (pid reuse
    after a crash or reboot): `sdc server stop` signals nothing, says so, removes the file;
    `status` exits 1. Without a start time (an older sdc's file) the command line decides."""
    from sdc.cli.main import app

    sleeper = _sleeper()
    try:
        start = process_start(sleeper.pid)
        assert start is not None
        _stale_state(sleeper.pid, **({} if legacy else {"start_ticks": start[0] - 1}))
        assert local_server() is None
        v = inspect_state()
        assert v.state == "foreign" and "sleep 300" in v.detail, v
        r = CliRunner().invoke(app, ["server", "status"])
        assert r.exit_code == 1 and "not the server sdc started" in r.output, r.output
        assert state_file().exists()  # status changes nothing
        r = CliRunner().invoke(app, ["server", "stop"])
        assert r.exit_code == 0, r.output
        assert "no server was running" in r.output and "nothing was signalled" in r.output
        assert "stopped" not in r.output.replace("nothing was signalled", "")
        assert not state_file().exists()
        time.sleep(0.2)
        assert sleeper.poll() is None  # alive: never signalled
    finally:
        sleeper.kill()
        sleeper.wait()


def test_state_file_of_another_owner_or_writable_by_others_is_ignored(server_home):
    sleeper = _sleeper()
    try:
        _stale_state(sleeper.pid, start_ticks=process_start(sleeper.pid)[0])
        assert inspect_state().state == "ours"  # the same process: trusted ...
        os.chmod(state_file(), 0o622)            # ... unless others may have written it
        v = inspect_state()
        assert v.state == "foreign" and v.server is None and "writable by you only" in v.detail
        assert stop_server().state == "foreign"
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stop_signals_only_the_recorded_process(server_home):
    """The process the state file identifies (pid + start time) is the one stopped: "stopped"
    only once it has exited."""
    from sdc.cli.main import app

    sleeper = _sleeper()
    try:
        _stale_state(sleeper.pid, start_ticks=process_start(sleeper.pid)[0])
        r = CliRunner().invoke(app, ["server", "stop"])
        assert r.exit_code == 0 and "stopped the Prefect server" in r.output, r.output
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert not state_file().exists()
        r = CliRunner().invoke(app, ["server", "stop"])
        assert r.exit_code == 0 and r.output.strip() == "no server was running"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_idle_setting(monkeypatch):
    monkeypatch.delenv("SDC_SERVER_IDLE_MINUTES", raising=False)
    assert idle_minutes_setting() == DEFAULT_IDLE_MINUTES
    monkeypatch.setenv("SDC_SERVER_IDLE_MINUTES", "2.5")
    assert idle_minutes_setting() == 2.5
    for bad in ("-1", "soon", "nan", "1e9"):
        monkeypatch.setenv("SDC_SERVER_IDLE_MINUTES", bad)
        with pytest.raises(ServerError, match="SDC_SERVER_IDLE_MINUTES"):
            idle_minutes_setting()


def _gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped by its new parent counts)."""
    now = process_start(pid)
    return now is None or now[1] in ("Z", "X")


def _timings(stdout: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith("timings "))[8:])


def _start_server(env: dict[str, str]) -> None:
    """`sdc server start` on a free port (a real process that outlives the command)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run([str(BIN / "sdc"), "server", "start", "--port", str(port)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(COLUMNS="200", **extra)
    return env


# The reused server (two runs at once: one starts it, the other reuses it; a run's lease keeps
# it up; idle, it stops by itself and removes its state file) is tested together with its
# release worker, on one server: tests/cli/test_worker.py::test_reused_server_and_its_worker_
# end_to_end; its --no-reuse run: tests/flows/test_ephemeral.py.


@pytest.mark.waits
@pytest.mark.slow
@pytest.mark.e2e
def test_server_start_release_stop(server_home, make_small_job):
    """`sdc server start` runs a server (outliving the command) that `sdc release` uses (no
    temporary API); `sdc server stop` ends it; nothing is left running. Start and release are
    real processes; status and stop run in-process (typer's CliRunner: the same command, exit
    code and output, without a process start each)."""
    from sdc.cli.main import app

    env = _env()
    sdc = str(BIN / "sdc")
    pid = None
    try:
        _start_server(env)
        pid = json.loads(state_file().read_text())["pid"]
        assert state_file().stat().st_mode & 0o077 == 0
        srv = local_server()  # its proven identity says its CSRF protection is off (default)
        assert srv is not None and srv.csrf is None and srv.healthy() and srv.csrf is False
        assert "csrf" not in json.loads(state_file().read_text())  # asked at each run
        cfg = make_small_job("srv", n=1000)
        r = subprocess.run([sdc, "release", str(cfg), "--timings"], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _timings(r.stdout)["prefect_api"] == "reused"  # no temporary API
        status = CliRunner().invoke(app, ["server", "status"])
        assert status.exit_code == 0, status.output
    finally:
        r = CliRunner().invoke(app, ["server", "stop"])
    assert "stopped the Prefect server" in r.output, r.output
    assert pid is not None and _gone(pid)
    assert CliRunner().invoke(app, ["server", "status"]).exit_code == 1


@pytest.mark.waits
def test_a_server_with_csrf_protection_says_so_and_its_runs_send_the_token(server_home,
                                                                          make_small_job):
    """A local server started with Prefect's CSRF protection on answers ``"csrf": true`` in
    its identity, so its runs keep the client's CSRF support (the token probe): the release
    writes to the API (flow run, states, artifacts) and exits 0. With protection off (the
    default, test_server_start_release_stop) the runs skip the probe."""
    from sdc.cli.main import app

    sdc = str(BIN / "sdc")
    pid = None
    try:
        _start_server(_env(PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED="true"))
        srv = local_server()
        assert srv is not None
        pid = srv.pid
        assert srv.healthy() and srv.csrf is True
        cfg = make_small_job("csrf", n=500)
        r = subprocess.run([sdc, "release", str(cfg), "--timings"], env=_env(SDC_WORKER="0"),
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _timings(r.stdout)["prefect_api"] == "reused"
        assert "403" not in r.stdout + r.stderr and "CSRF" not in r.stdout + r.stderr
    finally:
        CliRunner().invoke(app, ["server", "stop"])
    assert pid is not None and _gone(pid)


@pytest.mark.waits
def test_watchdog_stops_a_server_whose_home_was_removed(tmp_path):
    """A server whose PREFECT_HOME is gone (a test run's basetemp rotated away, a user's rm -rf)
    has no state file and no lease file: nobody can find or stop it. The watchdog stops it once
    no request is in flight (it used to fail opening the lease file every 5 s and run on), and
    a server whose home exists is not stopped by that rule."""
    import threading
    from types import SimpleNamespace

    from flows.server_process import Watched, _idle_check

    watched = Watched(app=None, token=b"t")
    server = SimpleNamespace(started=True, should_exit=False)
    gone = tmp_path / "gone"
    watched.active = 1  # a request in flight: keep serving it
    assert not _idle_check(server, watched, gone, 0.01, threading.Event())
    assert not server.should_exit
    watched.active = 0
    assert _idle_check(server, watched, gone, None, threading.Event())  # even "run until stop"
    assert server.should_exit
    home = tmp_path / "home"
    home.mkdir()
    busy = SimpleNamespace(started=True, should_exit=False)
    watched.touch()
    assert not _idle_check(busy, watched, home, 10.0, threading.Event())  # not idle 10 min
    assert not busy.should_exit


@pytest.mark.waits
@pytest.mark.slow
@pytest.mark.e2e
def test_ui_settings_name_the_servers_own_port(server_home, monkeypatch):
    """Issue 47: the UI of sdc's server asked its API at 127.0.0.1:4200 whatever port the
    server listened on (``/ui-settings`` answered ``api_url: http://127.0.0.1:4200/api``), so
    the UI and every "View at ..." link of a flow log opened an error page. A server started on
    another port (`sdc server start --port P`; the reused server takes a free port the same
    way) now names its own. A value the environment carried for some other server is
    replaced."""
    import socket
    import urllib.request

    from sdc.cli.main import app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert port != 4200
    monkeypatch.setenv("PREFECT_UI_ENABLED", "true")
    monkeypatch.setenv("PREFECT_UI_API_URL", "http://127.0.0.1:4200/api")
    try:
        r = CliRunner().invoke(app, ["server", "start", "--port", str(port)])
        assert r.exit_code == 0, r.output
        root = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{root}/ui-settings", timeout=30) as resp:
            settings = json.loads(resp.read())
        assert settings["api_url"] == f"{root}/api", settings
        with urllib.request.urlopen(f"{settings['api_url']}/health", timeout=30) as resp:
            assert resp.status == 200
    finally:
        CliRunner().invoke(app, ["server", "stop"])


@pytest.mark.waits
@pytest.mark.slow
@pytest.mark.e2e
def test_the_persistent_server_killed_after_the_release_was_published(server_home,
                                                                        make_small_job,
                                                                        tmp_path):
    """Issue 47: `sdc server stop` (or a crash) of the persistent server while a release was
    publishing made `sdc release` exit 2 and call it "the temporary one this command
    started". The release is published: exit 0 with a warning naming the local server."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sdc = str(BIN / "sdc")
    marks = tmp_path / "marks"
    env = _env(SDC_WORKER="0", SDC_CHECKPOINT_DIR=str(marks), SDC_PAUSE_AT="before_rename",
               SDC_PAUSE_SECONDS="8", PREFECT_CLIENT_MAX_RETRIES="1")
    r = subprocess.run([sdc, "server", "start", "--port", str(port)], env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = make_small_job("lost", n=600)
    out_dir = tmp_path / "releases" / "lost"
    run = subprocess.Popen([sdc, "release", str(cfg)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (marks / "before_rename").exists():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
            time.sleep(0.2)
        stop_server()  # within the run's 8 s pause before the publishing rename
        text, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    text = " ".join(text.split())
    assert run.returncode == 0, text
    assert f"the Prefect server at http://127.0.0.1:{port}/api (the local server sdc " \
           "started" in text, text
    assert "temporary" not in text and f"Release written to {out_dir}" in text, text
    assert (out_dir / "internal" / "audit.json").is_file()


def test_a_pinned_home_holds_in_its_thread_whatever_prefect_home_says(tmp_path, monkeypatch):
    """The test session's server thread waits for its server in the session's home while tests
    set their own ``PREFECT_HOME``: pinned, the thread reads and leases the session's state
    file (``flows.server.pinned_home``); the other threads follow ``$PREFECT_HOME``. Before,
    the thread read the environment of the moment, took a test's server as the session's and
    every later run of the worker failed once that server stopped."""
    import threading

    from flows.server import acquire_reused_server, pinned_home, state_file

    session, test_home = tmp_path / "session", tmp_path / "test"
    monkeypatch.setenv("PREFECT_HOME", str(test_home))
    seen: dict[str, object] = {}

    def pinned() -> None:
        with pinned_home(session):
            seen["state"] = state_file()
            seen["lease"] = acquire_reused_server(10.0, start=False)  # none runs: None
        seen["after"] = state_file()

    t = threading.Thread(target=pinned)
    t.start()
    t.join()
    assert seen["state"] == session / "sdc-server.json"
    assert seen["lease"] is None and (session / "sdc-server.lease").is_file()
    assert not (test_home / "sdc-server.lease").exists()
    assert seen["after"] == state_file() == test_home / "sdc-server.json"
