"""The pre-imported release worker (sdc.cli.worker) and the thin ``sdc`` entry (sdc.cli.entry):
which runs it takes, which workers the client trusts, and end to end with the reused local
server (tests/flows/test_server.py's started-once-shared-and-idle-stopped test joined here: one
server for both): the same files as in process, exit codes and Ctrl-C passed through, the idle
stop of the server stops it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.server import process_start
from sdc.cli import thin as entry
from sdc.cli.worker import (
    CLI_ENV_DEFAULTS,
    _changed,
    compare_request,
    limits,
    module_files,
    relevant_env,
)

BIN = Path(sys.executable).parent


def test_which_commands_the_worker_may_run():
    env = {"PREFECT_HOME": "/x"}
    assert entry.worker_eligible(["release", "a.yaml", "--force"], env)
    assert not entry.worker_eligible(["release", "a.yaml", "--no-reuse"], env)
    assert not entry.worker_eligible(["release", "--help"], env)
    assert not entry.worker_eligible(["--debug", "release", "a.yaml"], env)
    assert not entry.worker_eligible(["plan", "a.yaml"], env)
    assert not entry.worker_eligible([], env)
    assert not entry.worker_eligible(["release", "a.yaml"], {**env, "SDC_WORKER": "0"})
    assert not entry.worker_eligible(["release", "a.yaml"],
                                     {**env, "PREFECT_API_URL": "http://h:4200/api"})


def _baseline() -> dict:
    return {"executable": sys.executable, "env": relevant_env({**os.environ, **CLI_ENV_DEFAULTS}),
            "groups": sorted(os.getgroups()), "cgroup": "c", "mount_ns": 1, "nice": 0,
            "limits": {"RLIMIT_AS": [2**30, 2**31]}}


def _req(**changes) -> dict:
    req = {"executable": sys.executable, "env": dict(os.environ), "groups": sorted(os.getgroups()),
           "gid": os.getgid(), "cgroup": "c", "mount_ns": 1, "nice": 0,
           "limits": {"RLIMIT_AS": [2**29, 2**30]}}
    return {**req, **changes}


def test_a_run_the_worker_cannot_reproduce_is_refused():
    base = _baseline()
    assert compare_request(_req(), base) == ""
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "DEBUG-not-the-workers"}
    assert "PREFECT_LOGGING_LEVEL" in compare_request(_req(env=env), base)
    env = {**os.environ, "OMP_NUM_THREADS": "7"} if os.environ.get("OMP_NUM_THREADS") != "7" \
        else {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    assert "OMP_NUM_THREADS" in compare_request(_req(env=env), base)
    # what the CLI sets itself before importing Prefect is not a difference
    env = {k: v for k, v in os.environ.items() if k not in CLI_ENV_DEFAULTS}
    assert compare_request(_req(env=env), {**base, "env": relevant_env(
        {**env, **CLI_ENV_DEFAULTS})}) == ""
    # the API URL is the run's business (the client never sends a run with one)
    assert compare_request(_req(env={**os.environ, "PREFECT_API_URL": "x"}), base) == ""
    assert "Python" in compare_request(_req(executable="/usr/bin/python9"), base)
    assert "groups" in compare_request(_req(gid=os.getgid() + 1), base)
    assert "cgroup" in compare_request(_req(cgroup="other"), base)
    assert "priority" in compare_request(_req(nice=-1), base)
    assert compare_request(_req(nice=5), base) == ""  # the child lowers its own
    assert "RLIMIT_AS" in compare_request(_req(limits={"RLIMIT_AS": [2**29, 2**32]}), base)
    assert "RLIMIT_AS" in compare_request(_req(limits={"RLIMIT_AS": [-1, -1]}), base)
    assert isinstance(limits(), dict)


def test_a_changed_module_file_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    files = module_files()
    assert sys.modules["json"].__file__ in files and _changed(files) == ""
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    files[str(f)] = (f.stat().st_mtime_ns, f.stat().st_size)
    assert _changed(files) == ""
    f.write_text("x = 22\n")
    assert _changed(files) == str(f)
    f.unlink()
    assert _changed(files) == str(f)
    (tmp_path / "profiles.toml").write_text("")  # Prefect's profiles appeared
    assert _changed(module_files() | {}) == "" and _changed(files) != ""


def _sleeper() -> subprocess.Popen:
    p = subprocess.Popen(["sleep", "300"])
    deadline = time.monotonic() + 120  # exec of sleep waits for a CPU under make test
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"sleep"):
                break
        time.sleep(0.01)
    return p


def _write(path: Path, data: dict, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.chmod(path, mode)


def test_a_foreign_or_stale_worker_is_never_used(tmp_path, monkeypatch):
    """The client sends nothing (no descriptors, no environment) to a socket whose process is
    not the live worker its owner-only state file names, for the server of sdc-server.json."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("PREFECT_HOME", str(home))
    (home / "sdc-server.lease").touch(mode=0o600)
    me = os.getpid()
    _write(home / "sdc-server.json", {"pid": me, "url": "http://127.0.0.1:9/api",
                                      "start_ticks": process_start(me)[0], "token": "t"})
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "sdc-worker.sock"))
    listener.listen(4)
    listener.settimeout(0.2)
    sleeper = _sleeper()
    try:
        state = {"pid": sleeper.pid, "start_ticks": process_start(sleeper.pid)[0],
                 "server_pid": me, "server_start_ticks": process_start(me)[0]}

        def nothing_sent() -> bool:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return True  # never connected
            with conn:
                conn.settimeout(0.5)
                try:
                    return conn.recv(1) == b""
                except TimeoutError:
                    return True

        # a live process of ours is named, but another process (this one) holds the socket
        _write(home / "sdc-worker.json", state)
        assert entry.through_worker(["release", "x.yaml"]) is None and nothing_sent()
        # the named process started at another time (its pid reused)
        _write(home / "sdc-worker.json", {**state, "start_ticks": state["start_ticks"] + 1})
        assert entry.through_worker(["release", "x.yaml"]) is None and nothing_sent()
        # a worker of another server
        _write(home / "sdc-worker.json", {**state, "server_pid": sleeper.pid})
        assert entry.through_worker(["release", "x.yaml"]) is None and nothing_sent()
        # a state file others may write
        _write(home / "sdc-worker.json", state, mode=0o622)
        assert entry.through_worker(["release", "x.yaml"]) is None and nothing_sent()
        # a dead worker
        sleeper.kill()
        sleeper.wait()
        _write(home / "sdc-worker.json", state)
        assert entry.through_worker(["release", "x.yaml"]) is None and nothing_sent()
        # and a worker that refuses: the client runs the command itself
        _write(home / "sdc-worker.json", {**state, "pid": me, "start_ticks":
                                          process_start(me)[0]})
        listener.settimeout(10)
        import threading

        got: dict = {}

        def refuse() -> None:
            conn, _ = listener.accept()
            with conn:
                head, fds, _, _ = socket.recv_fds(conn, 8, 8)
                got["fds"] = len(fds)
                for fd in fds:
                    os.close(fd)
                conn.sendall(b'{"refused": "test"}\n')

        t = threading.Thread(target=refuse)
        t.start()
        assert entry.through_worker(["release", "x.yaml"]) is None
        t.join(10)
        assert got == {"fds": 4}
    finally:
        listener.close()
        with contextlib.suppress(ProcessLookupError):
            sleeper.kill()
        sleeper.wait()


def _this_process_as_worker(tmp_path: Path, monkeypatch) -> socket.socket:
    """A home whose server and worker are this process, listening on the worker's socket."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("PREFECT_HOME", str(home))
    (home / "sdc-server.lease").touch(mode=0o600)
    me, ticks = os.getpid(), process_start(os.getpid())[0]
    _write(home / "sdc-server.json", {"pid": me, "url": "http://127.0.0.1:9/api",
                                      "start_ticks": ticks, "token": "t"})
    _write(home / "sdc-worker.json", {"pid": me, "start_ticks": ticks, "server_pid": me,
                                      "server_start_ticks": ticks})
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "sdc-worker.sock"))
    listener.listen(4)
    listener.settimeout(10)
    return listener


@pytest.mark.parametrize("answer", ["started", "refused"])
def test_ctrl_c_before_the_run_has_started_is_kept(tmp_path, monkeypatch, capsys, answer):
    """Ctrl-C between the request and the worker's answer (CI: the test's Ctrl-C came as the
    worker logged the run, before the client had its handlers: a traceback, exit -2) is kept:
    sent to the run once it has started, or, when the worker refuses, the command ends as
    interrupted (130) instead of running in this process."""
    import threading

    listener = _this_process_as_worker(tmp_path, monkeypatch)
    relays: list = []

    class Relay(entry._Relay):
        def __init__(self) -> None:
            super().__init__()
            relays.append(self)

    monkeypatch.setattr(entry, "_Relay", Relay)
    got: dict = {}

    def worker() -> None:
        conn, _ = listener.accept()
        with conn:
            head, fds, _, _ = socket.recv_fds(conn, 8, 8)
            for fd in fds:
                os.close(fd)
            reader = conn.makefile("rb")
            reader.read(entry.PREFIX.unpack(head)[0])  # the request
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            _wait_for(lambda: relays and relays[0].pending, 120, "the client to keep Ctrl-C")
            if answer == "refused":
                conn.sendall(b'{"refused": "test"}\n')
                return
            conn.sendall(b'{"pid": 1}\n')
            got["line"] = reader.readline()
            conn.sendall(b'{"exit": 130}\n')

    t = threading.Thread(target=worker)
    t.start()
    try:
        code = entry.through_worker(["release", "x.yaml"])
    finally:
        t.join(20)
        listener.close()
    assert code == 130
    assert signal.getsignal(signal.SIGINT) is not relays[0]  # the handlers are restored
    if answer == "started":
        assert json.loads(got["line"]) == {"signal": signal.SIGINT}
        assert capsys.readouterr().err == ""  # the run says it, through the same stderr
    else:
        assert capsys.readouterr().err == "interrupted\n"


def test_a_lost_worker_ends_the_command_with_1_not_a_second_run(capsys):
    """Once the run has started, a connection the worker drops (EOF) or resets (OSError) ends
    the command with 1 and a message; None would make the client run the release again."""
    class Reset:
        def readline(self) -> bytes:
            raise ConnectionResetError(104, "Connection reset by peer")

    class Eof:
        def readline(self) -> bytes:
            return b""

    for reader in (Reset(), Eof()):
        assert entry._wait(reader) == 1
        assert "ended without an exit code" in capsys.readouterr().err


def test_an_interrupted_command_ends_130_with_one_line(monkeypatch, capsys):
    """Ctrl-C is noted where it arrives; whatever a library makes of it (typer's argument
    parsing: a silent exit 130; Prefect/pydantic: another exception; a Cython callback:
    nothing, the command goes on) the command ends 130 with one "interrupted"."""
    import typer

    from sdc.cli.common import friendly_errors

    def ctrl_c_then(exc: BaseException):
        def app() -> None:
            try:
                entry._on_sigint(signal.SIGINT, None)
            except KeyboardInterrupt:
                raise exc from None
        return app

    def swallowed() -> None:  # a Cython callback: "Exception ignored in", the run goes on
        try:
            entry._on_sigint(signal.SIGINT, None)
        except KeyboardInterrupt:
            pass

    for app in (swallowed, ctrl_c_then(SystemExit(0))):  # and then ends well: still 130
        monkeypatch.setattr(entry, "_interrupt", {"signals": [], "told": False})
        with pytest.raises(SystemExit) as done:
            entry.guarded(app)
        assert done.value.code == 130 and capsys.readouterr().err == "interrupted\n"
    for exc in (SystemExit(130), SystemExit(1), ValueError("Task run is not set")):
        monkeypatch.setattr(entry, "_interrupt", {"signals": [], "told": False})
        with pytest.raises(SystemExit) as done:
            entry.guarded(ctrl_c_then(exc))
        assert done.value.code == 130 and capsys.readouterr().err == "interrupted\n"

    monkeypatch.setattr(entry, "_interrupt", {"signals": [signal.SIGINT], "told": False})
    with pytest.raises(typer.Exit) as done, friendly_errors():
        raise ValueError("Task run is not set")
    assert done.value.exit_code == 130 and "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(entry, "_interrupt", {"signals": [], "told": False})
    with pytest.raises(SystemExit) as done:
        entry.guarded(lambda: sys.exit(3))  # no Ctrl-C: the code stands
    assert done.value.code == 3 and capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------------
def _gone(pid: int) -> bool:
    now = process_start(pid)
    return now is None or now[1] in ("Z", "X")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "SDC_WORKER")}
    env.update(COLUMNS="200", **extra)
    return env


def _digests(folder: Path) -> dict[str, str]:
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            if f.name == "audit.json":  # the one field that differs between any two runs
                doc = json.loads(data)
                doc.pop("created_at", None)
                data = json.dumps(doc, sort_keys=True).encode()
            out[str(f.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return out


def _runs(home: Path) -> list[str]:
    log = home / "sdc-worker.log"
    return [x for x in log.read_text().splitlines() if " run " in x] if log.exists() else []


def _timings(stdout: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith("timings "))[8:])


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.waits
@pytest.mark.slow
@pytest.mark.e2e
def test_reused_server_and_its_worker_end_to_end(server_home, make_small_job):
    """The reused local server and its release worker, one server for both:

    - two ``sdc release`` at once: one starts the local server, the other waits and reuses it;
      a run on it starts the worker (owner-only state file and socket, tied to the server);
    - through the worker the next releases write the same files as in process, pass exit codes
      0 and 2 and Ctrl-C (130) through;
    - a run's lease keeps the server up (the test holds one as a long run would, from the
      start: the short idle time cannot stop the server between the test's runs); let go, the
      idle server stops by itself (here after 0.05 min), removes its state file, and the
      worker stops with it.

    ``--no-reuse`` starts neither server nor worker: tests/flows/test_ephemeral.py (one run
    for it; this test and tests/flows/test_server.py each used to make their own)."""
    import fcntl

    from flows.server import local_server, state_file

    sdc = str(BIN / "sdc")
    env = _env(SDC_SERVER_IDLE_MINUTES="0.05")
    cfg = make_small_job("worker", n=2000)
    other = make_small_job("reuse", n=500)
    out = cfg.parent.parent / "releases" / "worker"

    def run(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sdc, "release", str(cfg), *args], env={**env, **kw},
                              capture_output=True, text=True, timeout=600)

    lease = os.open(server_home / "sdc-server.lease", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lease, fcntl.LOCK_SH)
    try:
        runs = [subprocess.Popen([sdc, "release", str(c), "--timings", "--force"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for c in (cfg, other)]
        outs = [p.communicate(timeout=600) for p in runs]
        assert [p.returncode for p in runs] == [0, 0], outs
        how = sorted(_timings(o)["prefect_api"] for o, _ in outs)
        assert how == ["reused", "started"], how
        srv = local_server()
        assert srv is not None and srv.healthy() and srv.idle_minutes == 0.05
        assert state_file().stat().st_mode & 0o077 == 0

        _wait_for(lambda: (server_home / "sdc-worker.json").exists(), 300, "the worker")
        worker = json.loads((server_home / "sdc-worker.json").read_text())
        assert (server_home / "sdc-worker.json").stat().st_mode & 0o077 == 0
        assert (server_home / "sdc-worker.sock").stat().st_mode & 0o077 == 0
        server = json.loads((server_home / "sdc-server.json").read_text())
        assert worker["server_pid"] == server["pid"] == srv.pid

        n = len(_runs(server_home))
        r = run("--force")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Release written to" in r.stdout
        assert len(_runs(server_home)) == n + 2  # through the worker: started + exited
        assert [x.split(": ", 1)[1] for x in _runs(server_home)][-1].endswith("exited with 0")
        via_worker = _digests(out)
        r = run("--force", SDC_WORKER="0")  # in process
        assert r.returncode == 0, r.stdout + r.stderr
        assert len(_runs(server_home)) == n + 2  # not through the worker
        assert _digests(out) == via_worker and len(via_worker) >= 8

        r = run()  # the release exists: exit 2, its message on the client's stderr
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--force" in r.stderr
        assert _runs(server_home)[-1].endswith("exited with 2")

        # Ctrl-C: the client passes it to the run, which stops as in process (exit 130)
        p = subprocess.Popen([sdc, "release", str(cfg), "--force"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        n = len(_runs(server_home))
        _wait_for(lambda: len(_runs(server_home)) > n, 60, "the run to start")
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 130, stdout + stderr
        assert "interrupted" in stderr

        # the lease held: over twice the idle time (the watchdog checks every 0.3 s), still up
        time.sleep(7)
        assert local_server() is not None and srv.healthy()
    finally:
        os.close(lease)

    # idle: the server stops, and with it the worker
    _wait_for(lambda: _gone(srv.pid), 60, "the idle stop")
    assert not state_file().exists()
    assert "idle for 0.05 min, stopping" in (server_home / "sdc-server.log").read_text()
    _wait_for(lambda: _gone(worker["pid"]), 30, "the worker to stop with its server")
    assert not (server_home / "sdc-worker.json").exists()
    assert not (server_home / "sdc-worker.sock").exists()
