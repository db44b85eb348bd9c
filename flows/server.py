"""``sdc server start|stop|status`` and the reused server of ``sdc release``: a local Prefect API
in the background, owned by the user, in ``$PREFECT_HOME`` (default ``~/.prefect``).

Without ``PREFECT_API_URL``, the first ``sdc release`` starts a local server (on a free port of
127.0.0.1) and later runs reuse it instead of starting Prefect's temporary API each time; it
stops itself after ``SDC_SERVER_IDLE_MINUTES`` (default :data:`DEFAULT_IDLE_MINUTES`) without
a run or a request, or with ``sdc server stop``. ``sdc release --no-reuse`` (or
``SDC_SERVER_IDLE_MINUTES=0``) keeps the temporary API per run. ``sdc server start`` starts (or
keeps) one that runs until ``sdc server stop``. The process itself is
:mod:`flows.server_process` (its docstring says what it runs and how it stops).

**Identity.** ``$PREFECT_HOME/sdc-server.json`` (owner-only) records what identifies the
process that was started: its pid, its start time (field 22 of ``/proc/PID/stat``, clock ticks
after boot), the boot id, and a random token whose HMAC the server proves on
``/sdc-identity``. A state file is trusted only when it is the user's own and not writable by
others, the pid is a live process of the user with that start time in this boot, and the
server at the URL proves the token. ``stop`` signals that process only (through a pidfd, so a
pid reused meanwhile cannot be hit) and says "stopped" only when it has exited; a state file
naming a dead process or another program is reported as such and removed, and nothing is
signalled.

**Two runs at once.** A run holds a shared ``flock`` on ``sdc-server.lease`` while it uses the
server (the idle watchdog stops nothing while one is held), and starting a server happens under
an exclusive ``flock`` on ``sdc-server.lock``: the loser waits and reuses the winner's server
once it answers.

This module must not import Prefect (``sdc release`` reads the state before importing it).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["DEFAULT_IDLE_MINUTES", "Launch", "LocalServer", "Reuse", "ServerError", "Verdict",
           "acquire_reused_server", "boot_id", "idle_minutes_setting", "inspect_server", "local_server",
           "pinned_home", "server_status", "start_server", "state_file", "stop_server"]

#: minutes a reused server keeps running after the last run or request
DEFAULT_IDLE_MINUTES = 15.0
IDLE_ENV = "SDC_SERVER_IDLE_MINUTES"


class ServerError(RuntimeError):
    """The local server cannot be started or stopped (CLI exit 2)."""


#: this thread's home when pinned by :func:`pinned_home` (else ``$PREFECT_HOME``)
_pinned = threading.local()


def _home() -> Path:
    home = getattr(_pinned, "home", None)
    return home if home is not None else \
        Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


@contextlib.contextmanager
def pinned_home(home: Path) -> Iterator[None]:
    """This thread acts on ``home``'s server, whatever ``$PREFECT_HOME`` says meanwhile (the
    environment is the process's: a background thread reading it raced a test that set its
    own home, and took that test's server as the session's)."""
    _pinned.home = Path(home)
    try:
        yield
    finally:
        _pinned.home = None


def state_file() -> Path:
    """``$PREFECT_HOME/sdc-server.json``."""
    return _home() / "sdc-server.json"


def idle_minutes_setting() -> float:
    """``SDC_SERVER_IDLE_MINUTES`` (minutes >= 0; 0: no reused server), else the default."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_MINUTES
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 <= value <= 7 * 24 * 60):
        raise ServerError(f"{IDLE_ENV}={raw!r} is not a number of minutes from 0 to 10080 (a "
                          f"week); set it to e.g. {DEFAULT_IDLE_MINUTES:g}, or 0 to start "
                          "Prefect's temporary API for every run instead")
    return value


# ---------------------------------------------------------------------------------------------
# process identity
# ---------------------------------------------------------------------------------------------
def boot_id() -> str | None:
    """This boot's id (Linux), None without one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> tuple[int, str] | None:
    """(start time in clock ticks after boot, state letter) of a live process, None if there
    is none (or no ``/proc``)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    return int(rest[19]), rest[0]


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"


def _proc_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


@dataclass
class LocalServer:
    """A server started by ``sdc`` (as its state file records it)."""

    pid: int
    url: str
    log: str = ""
    start_ticks: int | None = None
    boot_id: str | None = None
    token: str = ""
    idle_minutes: float | None = None
    started_at: float = field(default_factory=time.time)
    #: whether the server's CSRF protection is on, as its proven identity last said (None:
    #: not asked yet, or a server that does not say)
    csrf: bool | None = field(default=None, compare=False, repr=False)

    @property
    def root(self) -> str:
        return self.url.removesuffix("/api")

    def healthy(self, timeout: float = 2.0) -> bool:
        """The server at the URL proves the token (a legacy server: answers /api/health)."""
        if not self.token:
            return _get_json(self.url + "/health", timeout) is not None
        nonce = secrets.token_hex(16)
        data = _get_json(f"{self.root}/sdc-identity?nonce={nonce}", timeout)
        if not isinstance(data, dict) or data.get("pid") != self.pid:
            return False
        want = hmac.new(self.token.encode(), nonce.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(str(data.get("proof", "")), want):
            return False
        csrf = data.get("csrf")
        self.csrf = csrf if isinstance(csrf, bool) else None
        return True

    def alive(self) -> bool:
        """The recorded process runs (same pid, same start time, this boot)."""
        return inspect_server(self).state == "ours"


def _get_json(url: str, timeout: float) -> Any:
    import urllib.error  # here: the thin CLI client imports this module without it
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read() or b"null") if r.status == 200 else None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return None


@dataclass
class Verdict:
    """What a state file names: ``ours`` (the process sdc started, alive), ``dead`` (it has
    exited), ``foreign`` (the pid is another process, or the file is not trustworthy), or
    ``none`` (no state file)."""

    state: Literal["ours", "dead", "foreign", "none"]
    server: LocalServer | None = None
    detail: str = ""


def _read_state() -> tuple[LocalServer | None, str]:
    """(the state file's server, why it is not trusted: "" if it is)."""
    path = state_file()
    try:
        st = path.lstat()
    except OSError:
        return None, ""
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None, (f"{path} is not a regular file of yours, writable by you only; it was "
                      "ignored")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        srv = LocalServer(pid=int(data["pid"]), url=str(data["url"]), log=str(data.get("log", "")),
                          start_ticks=(None if data.get("start_ticks") is None
                                       else int(data["start_ticks"])),
                          boot_id=data.get("boot_id"), token=str(data.get("token") or ""),
                          idle_minutes=(None if data.get("idle_minutes") is None
                                        else float(data["idle_minutes"])),
                          started_at=float(data.get("started_at") or 0.0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, f"{path} is not a state file sdc wrote; it was ignored"
    if srv.pid <= 1:
        return None, f"{path} names pid {srv.pid}; it was ignored"
    return srv, ""


def inspect_server(srv: LocalServer) -> Verdict:
    """Whether ``srv``'s recorded process is the live process sdc started (see the module
    docstring); never signals anything."""
    now = process_start(srv.pid)
    if now is None or now[1] in ("Z", "X"):
        if now is None and not Path("/proc").is_dir():  # no /proc: the token decides
            ok = bool(srv.token) and srv.healthy()
            return Verdict("ours" if ok else "dead", srv, "" if ok else
                           f"the server sdc started (pid {srv.pid}) does not answer")
        return Verdict("dead", srv, f"the server sdc started (pid {srv.pid}) has exited")
    boot = boot_id()
    other = (f"pid {srv.pid} is now another process ({_cmdline(srv.pid)}), not the server sdc "
             "started")
    if srv.boot_id and boot and srv.boot_id != boot:
        return Verdict("foreign", srv, other + " (the machine restarted since)")
    if _proc_uid(srv.pid) != os.getuid():
        return Verdict("foreign", srv, other + " (of another user)")
    if srv.start_ticks is None:  # a state file of an older sdc: `prefect server start`
        cmd = _cmdline(srv.pid)
        if "prefect" in cmd and "server" in cmd:
            return Verdict("ours", srv, "")
        return Verdict("foreign", srv, other)
    if now[0] != srv.start_ticks:
        return Verdict("foreign", srv, other + " (started at another time)")
    return Verdict("ours", srv, "")


def inspect_state() -> Verdict:
    """The verdict on ``$PREFECT_HOME/sdc-server.json``."""
    srv, problem = _read_state()
    if srv is None:
        return Verdict("foreign" if problem else "none", None, problem)
    return inspect_server(srv)


def local_server() -> LocalServer | None:
    """The server sdc started if its state file names it and it is alive (see
    :func:`inspect_server`; whether it answers: :meth:`LocalServer.healthy`)."""
    v = inspect_state()
    return v.server if v.state == "ours" else None


def _write_state(srv: LocalServer, home: Path | None = None) -> None:
    home = _home() if home is None else home
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / "sdc-server.json"
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({k: v for k, v in asdict(srv).items() if k != "csrf"}, f)  # asked each run
    os.replace(tmp, path)


def _remove_state_of(srv: LocalServer | None) -> None:
    """Remove the state file if it still names ``srv`` (or any untrusted content)."""
    cur, _ = _read_state()
    if cur is None or srv is None or (cur.pid, cur.start_ticks) == (srv.pid, srv.start_ticks):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            path = state_file()
            if path.lstat().st_uid == os.getuid():
                path.unlink()


# ---------------------------------------------------------------------------------------------
# locks
# ---------------------------------------------------------------------------------------------
def _flock(name: str, kind: int, timeout: float) -> int | None:
    """An fd of ``$PREFECT_HOME/name`` locked with ``kind`` (None after ``timeout`` s)."""
    home = _home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(home / name, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def _unlock(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# starting
# ---------------------------------------------------------------------------------------------
def _server_env() -> dict[str, str]:
    from flows.ephemeral import CHEAP_SERVER_SETTINGS, warm_database

    env = {**CHEAP_SERVER_SETTINGS, **os.environ}
    env.pop("PREFECT_API_URL", None)
    if warm_database():
        env.setdefault("PREFECT_SERVER_DATABASE_MIGRATE_ON_START", "false")
    env.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    root = str(Path(__file__).resolve().parents[1])  # flows.server_process importable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


class Launch:
    """A server process being started in ``$PREFECT_HOME`` (see :mod:`flows.server_process`);
    :meth:`wait` records it in that home's state file once it answers."""

    def __init__(self, port: int = 0, idle_minutes: float | None = None,
                 services: str = "full") -> None:
        self.home = home = _home()
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.log = home / "sdc-server.log"
        self.token = secrets.token_hex(32)
        self.idle_minutes = idle_minutes
        self.started = time.perf_counter()
        env = {**_server_env(), "SDC_SERVER_TOKEN": self.token}
        cmd = [sys.executable, "-m", "flows.server_process", "--port", str(port),
               "--log", str(self.log), "--services", services]
        if idle_minutes is not None:
            cmd += ["--idle-minutes", str(idle_minutes)]
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True, text=True)
        line = p.stdout.readline() if p.stdout else ""
        _, err = p.communicate(timeout=60)
        fields = line.split()
        if p.returncode != 0 or len(fields) != 2:
            reason = (line + err).strip().splitlines()
            if p.returncode == 3:
                raise ServerError(f"port {port} on 127.0.0.1 is in use (another Prefect "
                                  "server?); use `sdc server start --port N`, or set "
                                  "PREFECT_API_URL to that server")
            raise ServerError("the Prefect server could not be started: "
                              + (reason[-1] if reason else f"exit code {p.returncode}"))
        self.pid, self.port = int(fields[0]), int(fields[1])
        ident = process_start(self.pid)
        self.server = LocalServer(pid=self.pid, url=f"http://127.0.0.1:{self.port}/api",
                                  log=str(self.log), start_ticks=ident[0] if ident else None,
                                  boot_id=boot_id(), token=self.token,
                                  idle_minutes=idle_minutes)
        self.ready_after: float | None = None

    def wait(self, timeout: float = 120.0) -> LocalServer:
        """Block until the server proves its token; record it in the state file."""
        if self.ready_after is not None:
            return self.server
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if inspect_server(self.server).state != "ours":
                raise ServerError(f"the Prefect server exited before it answered; see {self.log}")
            if self.server.healthy(timeout=2.0):
                self.ready_after = time.perf_counter() - self.started
                _write_state(self.server, self.home)
                if _home() == self.home:
                    from flows.ephemeral import mark_migrated

                    mark_migrated()
                return self.server
            time.sleep(0.05)
        _terminate(self.server)
        raise ServerError(f"the Prefect server did not answer within {timeout:.0f} s; see "
                          f"{self.log} (on a busy machine set PREFECT_SERVER_EPHEMERAL_STARTUP_"
                          "TIMEOUT_SECONDS higher)")

    def stop(self) -> None:
        """Stop the server this launch started (ready or not); only that process."""
        _terminate(self.server)

    def abandon(self) -> None:
        """Stop the server when the run that started it failed before it was ready."""
        if self.ready_after is None:
            _terminate(self.server)


def _startup_timeout() -> float:
    try:
        return float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 120))
    except ValueError:
        return 120.0


def start_server(port: int | None = None, idle_minutes: float | None = None,
                 timeout: float | None = None) -> tuple[LocalServer, bool]:
    """Start the local server (``port`` None: 4200) that runs until ``sdc server stop``
    (``idle_minutes`` None) or until idle that long; ``(server, started)``. A server sdc started
    that runs already is kept (its idle time set to ``idle_minutes``; ``started`` False);
    raises :class:`ServerError` when the port is taken, or it runs on another ``port``."""
    timeout = _startup_timeout() if timeout is None else timeout
    lock = _flock("sdc-server.lock", fcntl.LOCK_EX, timeout)
    if lock is None:
        raise ServerError("another sdc command is starting the server; try again in a minute")
    try:
        v = inspect_state()
        if v.state == "ours" and v.server is not None and v.server.healthy():
            srv = v.server
            if port is not None and srv.url != f"http://127.0.0.1:{port}/api":
                raise ServerError(f"a server sdc started runs at {srv.url}; stop it first "
                                  f"(`sdc server stop`) to start one on port {port}")
            srv.idle_minutes = idle_minutes
            _write_state(srv)
            return srv, False
        if v.state in ("dead", "foreign"):
            _remove_state_of(v.server)
        launch = Launch(4200 if port is None else port, idle_minutes, "full")
        return launch.wait(timeout), True
    finally:
        _unlock(lock)


# ---------------------------------------------------------------------------------------------
# stopping
# ---------------------------------------------------------------------------------------------
def _terminate(srv: LocalServer, grace: float = 15.0) -> bool:
    """SIGTERM (then SIGKILL after ``grace`` s) the process ``srv`` records, only if it still
    is that process; True once it has exited."""
    try:
        pidfd = os.pidfd_open(srv.pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):  # pragma: no cover - no pidfd (old kernel)
        pidfd = None
    try:
        if inspect_server(srv).state != "ours":  # checked after the pidfd was opened
            return inspect_server(srv).state == "dead"
        _signal(srv.pid, pidfd, signal.SIGTERM)
        if _wait_exit(srv, pidfd, grace):
            return True
        _signal(srv.pid, pidfd, signal.SIGKILL)
        return _wait_exit(srv, pidfd, 5.0)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _signal(pid: int, pidfd: int | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:  # pragma: no cover
            os.kill(pid, sig)


def _wait_exit(srv: LocalServer, pidfd: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pidfd is not None:
            with contextlib.suppress(OSError):
                if select.select([pidfd], [], [], 0.1)[0]:
                    return True
        else:  # pragma: no cover
            time.sleep(0.1)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(srv.pid, os.WNOHANG)  # our child (tests): reap it
        if inspect_server(srv).state != "ours":
            return True
    return False


def stop_server() -> Verdict:
    """Stop the server sdc started. The verdict: ``ours`` (it was stopped), ``none`` (no state
    file), ``dead`` / ``foreign`` (a stale state file, removed; nothing was signalled). Raises
    :class:`ServerError` if the process would not exit."""
    v = inspect_state()
    if v.state == "ours" and v.server is not None:
        if not _terminate(v.server):
            raise ServerError(f"the Prefect server (pid {v.server.pid}) did not exit after "
                              "SIGTERM and SIGKILL")
        _remove_state_of(v.server)
        return v
    if v.state in ("dead", "foreign"):
        _remove_state_of(v.server)
    return v


def server_status() -> tuple[Verdict, bool]:
    """(the verdict on the state file, whether the server proves its identity at its URL)."""
    v = inspect_state()
    return v, bool(v.state == "ours" and v.server is not None and v.server.healthy())


# ---------------------------------------------------------------------------------------------
# the reused server of `sdc release`
# ---------------------------------------------------------------------------------------------
@dataclass
class Reuse:
    """A run's use of the reused server: a shared lease until :meth:`close`; ``url`` is known
    once :meth:`wait` returned (at once when the server ran already)."""

    lease: int | None
    server: LocalServer | None = None
    launch: Launch | None = None
    start_lock: int | None = None
    how: str = "reused"

    def wait(self, timeout: float | None = None) -> str:
        """The server's API URL, after it answers (started by this run: until it does)."""
        if self.launch is not None and self.server is None:
            try:
                self.server = self.launch.wait(_startup_timeout() if timeout is None else timeout)
            finally:
                _unlock(self.start_lock)
                self.start_lock = None
        assert self.server is not None
        return self.server.url

    @property
    def ready_seconds(self) -> float | None:
        return None if self.launch is None else self.launch.ready_after

    def close(self, failed: bool = False) -> None:
        """End the run's lease (``failed``: stop a server this run started that never got
        ready)."""
        if failed and self.launch is not None:
            self.launch.abandon()
        _unlock(self.start_lock)
        _unlock(self.lease)
        self.start_lock = self.lease = None


def acquire_reused_server(idle_minutes: float, start: bool = True,
                          timeout: float | None = None) -> Reuse | None:
    """The local server for one run: the running one if sdc started it and it proves its
    token, else (``start``) one started now that stops after ``idle_minutes`` without use
    (under the start lock; a concurrent run waits for it and reuses it). None when none runs
    and ``start`` is False, or no lease can be had within ``timeout`` (a server busy
    stopping): the run then uses a temporary API."""
    timeout = _startup_timeout() if timeout is None else timeout
    try:
        lease = _flock("sdc-server.lease", fcntl.LOCK_SH, min(timeout, 30.0))
    except OSError:  # PREFECT_HOME not writable: no server to share
        return None
    if lease is None:
        return None
    try:
        v = inspect_state()
        if v.state == "ours" and v.server is not None and v.server.healthy():
            return Reuse(lease, v.server)
        if not start:
            _unlock(lease)
            return None
        lock = _flock("sdc-server.lock", fcntl.LOCK_EX, timeout)
        if lock is None:
            raise ServerError("another sdc command has been starting the local Prefect server "
                              f"for {timeout:.0f} s; see {_home() / 'sdc-server.log'}, or run "
                              "with --no-reuse")
        v = inspect_state()  # a concurrent run may have started it meanwhile
        if v.state == "ours" and v.server is not None and v.server.healthy():
            _unlock(lock)
            return Reuse(lease, v.server)
        if v.state == "ours" and v.server is not None:  # alive but not answering: replace it
            _terminate(v.server)
        if v.state != "none":
            _remove_state_of(v.server)
        try:
            launch = Launch(0, idle_minutes, "full")
        except BaseException:
            _unlock(lock)
            raise
        return Reuse(lease, None, launch, lock, how="started")
    except BaseException:
        _unlock(lease)
        raise
