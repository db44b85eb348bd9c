"""The thin client of the ``sdc`` console script (:mod:`sdc.cli.entry`): ``sdc release`` on a
warm local server is handed to the pre-imported worker (:mod:`sdc.cli.worker`) when one runs;
everything else, and a release the worker cannot take, runs in this process
(:mod:`sdc.cli.main`), as before. After such a release it starts a worker for the next ones.

This module imports only the standard library, :mod:`sdc.errors` (the record of Ctrl-C) and
``flows.server`` when a worker's state file exists; it imports no other module of ``sdc.cli``:
the protocol's names live here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from sdc.errors import INTERRUPTS

__all__ = ["FORWARDED", "PREFIX", "WORKER_LOCK", "WORKER_LOG", "WORKER_SOCKET", "WORKER_STATE",
           "cgroup", "guarded", "interrupted", "limits", "mount_ns", "quick_exit", "run",
           "start_worker", "tell_interrupted", "through_worker", "worker_eligible"]

WORKER_STATE = "sdc-worker.json"
WORKER_SOCKET = "sdc-worker.sock"
WORKER_LOCK = "sdc-worker.lock"
WORKER_LOG = "sdc-worker.log"
#: signals the client passes on to the run (Ctrl-C, Ctrl-\\, a hang-up, a kill)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: the request's length prefix (8 bytes, network order) carries the descriptors
PREFIX = struct.Struct("!Q")
#: resource limits a child takes from the client (it can lower them, not raise them)
LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CPU",
          "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_NPROC", "RLIMIT_MEMLOCK")


def limits() -> dict[str, list[int]]:
    """This process's resource limits (soft, hard) of :data:`LIMITS`."""
    import resource

    return {name: list(resource.getrlimit(getattr(resource, name))) for name in LIMITS
            if hasattr(resource, name)}


def cgroup() -> str:
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return ""


def mount_ns() -> int:
    try:
        return os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return 0


def worker_eligible(argv: list[str], env: dict[str, str] | None = None) -> bool:
    """A command the worker may run: ``sdc release ...`` without ``--no-reuse`` (no process
    left behind) or ``--help``, no configured ``PREFECT_API_URL``, ``SDC_WORKER`` not 0."""
    env = os.environ if env is None else env
    return (bool(argv) and argv[0] == "release"
            and not {"--no-reuse", "--help", "-h"} & set(argv[1:])
            and env.get("SDC_WORKER", "1") != "0" and not env.get("PREFECT_API_URL"))


def _home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def _trusted_json(path: Path) -> dict | None:
    """A state file's content if it is a regular file of the user, writable by the user only."""
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _worker_of_this_server(home: Path) -> dict | None:
    """The worker's state when it and the server it names are the live processes sdc started
    (flows.server's rules) and that server is the one of ``sdc-server.json``."""
    data = _trusted_json(home / WORKER_STATE)
    if data is None:
        return None
    from flows.server import LocalServer, inspect_server, inspect_state

    v = inspect_state()
    try:
        if (v.state != "ours" or v.server is None or v.server.pid != data["server_pid"]
                or v.server.start_ticks != data["server_start_ticks"]):
            return None
        me = LocalServer(pid=int(data["pid"]), url="", start_ticks=int(data["start_ticks"]),
                         boot_id=data.get("boot_id"))
    except (KeyError, TypeError, ValueError):
        return None
    return data if inspect_server(me).state == "ours" else None


def _request(argv: list[str]) -> dict:
    mask = os.umask(0)
    os.umask(mask)
    return {"argv": argv, "env": dict(os.environ), "executable": sys.executable,
            "umask": mask, "groups": sorted(os.getgroups()), "gid": os.getgid(),
            "nice": os.nice(0), "affinity": sorted(os.sched_getaffinity(0)),
            "limits": limits(), "cgroup": cgroup(), "mount_ns": mount_ns()}


class _Relay:
    """The client's handler of :data:`FORWARDED`: a signal that arrives before the worker has
    started the run is kept (Ctrl-C right after ``sdc release`` must neither kill the client
    with a traceback nor be lost), then sent to the run once it has started."""

    def __init__(self) -> None:
        self.conn: socket.socket | None = None
        self.pending: list[int] = []

    def __call__(self, sig: int, _frame: object) -> None:
        if self.conn is None:
            self.pending.append(sig)
        else:
            self.send(sig)

    def send(self, sig: int) -> None:
        assert self.conn is not None
        with contextlib.suppress(OSError):
            self.conn.sendall(json.dumps({"signal": sig}).encode() + b"\n")

    def started(self, conn: socket.socket) -> None:
        self.conn = conn
        for sig in self.pending:
            self.send(sig)


def through_worker(argv: list[str]) -> int | None:
    """Run ``sdc ARGV`` in the worker; its exit code, or None when no worker may run it (the
    caller then runs it in-process). Signals are relayed to the run (:class:`_Relay`); one
    received before a run started ends the command as it would in process (Ctrl-C: exit 130)."""
    relay = _Relay()
    before = {sig: signal.signal(sig, relay) for sig in FORWARDED}
    code = None
    try:
        code = _through_worker(argv, relay)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if code is None and relay.pending:
        sig = relay.pending[0]
        if sig == signal.SIGINT:
            print("interrupted", file=sys.stderr)
            return 130
        signal.raise_signal(sig)  # the default action of a hang-up or kill: end as in process
        return 128 + sig
    return code


def _through_worker(argv: list[str], relay: _Relay) -> int | None:
    """:func:`through_worker`'s exchange; holds the server's lease until the run has ended."""
    import fcntl

    home = _home()
    try:
        lease = os.open(home / "sdc-server.lease", os.O_RDWR)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(lease, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # the server is stopping
            return None
        data = _worker_of_this_server(home)
        if data is None or relay.pending:
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(10.0)
            conn.connect(str(home / WORKER_SOCKET))
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid() or pid != data["pid"]:
                return None  # not the worker the state file names
            body = json.dumps(_request(argv)).encode()
            cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                socket.send_fds(conn, [PREFIX.pack(len(body))], [0, 1, 2, cwd])
            finally:
                os.close(cwd)
            conn.sendall(body)
            reader = conn.makefile("rb")
            first = json.loads(reader.readline() or b"{}")
            if "pid" not in first:
                if os.environ.get("SDC_WORKER_VERBOSE"):
                    print(f"sdc: the worker refused the run: {first.get('refused')}",
                          file=sys.stderr)
                return None
            conn.settimeout(None)
            relay.started(conn)
            return _wait(reader)
        except (OSError, ValueError):
            return None
        finally:
            conn.close()
    finally:
        os.close(lease)


def _wait(reader: object) -> int:
    """The run's exit code, once the worker sends it (signals go on through the relay). A lost
    connection is the run's end without a code (1), never None: the caller would then run the
    release a second time in its own process."""
    while True:
        try:
            line = reader.readline()  # type: ignore[attr-defined]
        except OSError:  # the worker died (connection reset)
            line = b""
        if not line:
            print("sdc: error: the release worker ended without an exit code; rerun the "
                  "command (SDC_WORKER=0 runs it in this process)", file=sys.stderr)
            return 1
        with contextlib.suppress(ValueError, KeyError, TypeError):
            return int(json.loads(line)["exit"])


def _idle_minutes() -> float:
    try:
        return float(os.environ.get("SDC_SERVER_IDLE_MINUTES", "").strip() or 15.0)
    except ValueError:
        return 0.0


def start_worker(argv: list[str]) -> bool:
    """After a release in this process: start a worker for the reused local server when the
    release could have used one and none runs (True when one was started)."""
    if not worker_eligible(argv) or _idle_minutes() <= 0:
        return False
    import fcntl

    from flows.server import inspect_state

    home = _home()
    if not (home / "sdc-server.json").exists() or inspect_state().state != "ours":
        return False
    try:
        lock = os.open(home / WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a worker runs (or starts)
        return False
    finally:
        os.close(lock)
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    log = os.open(home / WORKER_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        subprocess.Popen([sys.executable, "-c", "from sdc.cli.worker import main; main()"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=home, env=env,
                         start_new_session=True)
    except OSError:
        return False
    finally:
        os.close(log)
    return True


def run(app: Callable[[], None]) -> None:
    """The console script: ``sdc release`` through a worker when one may run it, else
    ``app()`` (the CLI) in this process, then start a worker for the next releases."""
    argv = sys.argv[1:]
    if worker_eligible(argv):
        code = through_worker(argv)
        if code is not None:
            sys.exit(code)
    from flows.run import launch_early

    launch_early(argv)  # `release --no-reuse`: its temporary API boots while the CLI imports
    try:
        guarded(app)
        code: Any = 0
    except SystemExit as done:
        if not argv or argv[0] != "release":
            raise
        code = done.code
    finally:
        with contextlib.suppress(Exception):
            start_worker(argv)
    quick_exit(code)  # a release: without the interpreter's teardown of its heap (0.3-0.9 s)


#: Ctrl-C in this command: the signals received, and whether "interrupted" was printed
_interrupt: dict[str, Any] = {"signals": INTERRUPTS, "told": False}


def interrupted() -> bool:
    """Whether Ctrl-C reached this command: any error after it is its consequence (Prefect,
    pydantic or typer may turn the KeyboardInterrupt into another exception or a silent exit),
    so the command ends as interrupted (exit 130), not as a failure."""
    return bool(_interrupt["signals"])


def tell_interrupted(write: Callable[[str], object] | None = None) -> None:
    """Print "interrupted" on stderr, once per command."""
    if not _interrupt["told"]:
        _interrupt["told"] = True
        (write or (lambda text: print(text, file=sys.stderr)))("interrupted")


def _on_sigint(sig: int, _frame: object) -> None:
    _interrupt["signals"].append(sig)
    raise KeyboardInterrupt


def guarded(app: Callable[[], None]) -> None:
    """``app()``; Ctrl-C exits 130 with one line "interrupted", wherever it arrives: before a
    command, within one, where typer's argument parsing swallows it (exit 130, silent), or
    where a library swallows the KeyboardInterrupt and the command runs on (the publish step
    then refuses: :func:`sdc.errors.raise_if_interrupted`)."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        app()
        if interrupted():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        tell_interrupted()
        sys.exit(130)
    except SystemExit:
        if interrupted():
            tell_interrupted()
            sys.exit(130)
        raise
    except Exception:
        if interrupted():
            tell_interrupted()
            sys.exit(130)
        raise
    finally:
        if before is signal.default_int_handler:
            signal.signal(signal.SIGINT, before)


def quick_exit(code: Any) -> NoReturn:
    """End the process as the interpreter would, without its teardown: wait for the
    non-daemon threads and run the threading and ``atexit`` hooks (Prefect drains its log
    and event services there, logging flushes its handlers), flush stdout and stderr, then
    ``os._exit``. What is skipped is freeing every object and module of the ~2,200 a release
    imports (0.3-0.9 CPU s after a 5M release), which nobody waits for but the caller: the
    worker's child ends so, and so does an in-process ``sdc release`` (:func:`run`)."""
    import atexit
    import threading

    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, exit 1
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code & 0xFF)
