"""The pre-imported release worker: ``sdc release`` on a warm local server without the imports.

A warm ``sdc release`` spends most of its CPU importing Prefect's client, pandas, pyarrow,
pandera and the engine (about 2 CPU s of 4) before its 1-2 s job. The worker is a process that
has imported all of it once and forks a child per run; the child runs the very same CLI
(``sdc.cli.main.app``) with the caller's argv, environment, working folder, umask, limits and
stdin/stdout/stderr, against the same reused Prefect server, so it writes the same files as
the in-process command. The ``sdc`` entry (:mod:`sdc.cli.entry`) is a thin client: when a
worker of the reused server runs, it connects, passes its file descriptors over an
owner-only unix socket (``SCM_RIGHTS``), forwards signals (Ctrl-C) and exits with the run's
exit code; otherwise, and with ``--no-reuse`` or ``--debug``, it runs the command in-process
as before.

**Lifetime.** A release that used the reused local server (``SDC_SERVER_IDLE_MINUTES`` > 0,
``SDC_WORKER`` not ``0``) starts a worker when none runs (``python -m sdc.cli.worker``, in
the background, its log ``$PREFECT_HOME/sdc-worker.log``). The worker belongs to that server:
it exits as soon as the server process exits (its idle stop, ``sdc server stop``), after the
runs it holds have finished; a run holds the server's lease, so the idle stop waits for it.
Nothing of the worker outlives the server.

**Identity.** ``$PREFECT_HOME/sdc-worker.json`` (owner-only) records the worker's pid, start
time and boot id, and the server's pid and start time; the client trusts it only under the
rules of :mod:`flows.server` (a regular file of the user, not writable by others, naming a live
process of the user with that start time in this boot), only while the server it names is the
server of ``sdc-server.json``, and only when the kernel says the process at the other end of
the socket (``SO_PEERCRED``) is that pid of the same uid. The worker accepts only peers of its
own uid. A worker refuses a run (the client then runs it in-process) whose environment differs
in what Prefect and the libraries read at import (``PREFECT_*``, ``PYTHON*``, locale, ``HOME``,
``TMPDIR``, thread settings), whose Python differs, whose groups, cgroup, mount namespace or
limits it cannot reproduce, or when any imported module's file changed since it imported it
(the worker then exits: the next release starts a fresh one).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from sdc.cli.thin import (
    FORWARDED,
    PREFIX,
    WORKER_LOCK,
    WORKER_SOCKET,
    WORKER_STATE,
    cgroup,
    limits,
    mount_ns,
    quick_exit,
)

__all__ = ["CLI_ENV_DEFAULTS", "IMPORT_ENV", "compare_request", "main", "relevant_env"]

#: what ``sdc``'s root callback sets before Prefect is imported (no ``--debug``): a worker's
#: Prefect was imported with these, and a client's environment gets them the same way
CLI_ENV_DEFAULTS = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
                    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING"}
#: environment variables read at import or start-up (prefixes and names): they must be equal
IMPORT_ENV = (("PREFECT_", "PYTHON", "LC_", "OMP_", "OPENBLAS_", "MKL_", "ARROW_", "NUMEXPR_",
               "POLARS_", "DASK_", "GOTO_", "VECLIB_", "MALLOC_", "JEMALLOC_", "PANDERA_"),
              ("DO_NOT_TRACK", "LANG", "LANGUAGE", "HOME", "TMPDIR", "TEMP", "TMP",
               "VIRTUAL_ENV"))
MAX_REQUEST = 4 * 2**20
#: modules a release imports during its run (listed by running the demo after _preimport)
LATER_IMPORTS = (
    "anyio._backends._asyncio", "fastapi", "fastapi.encoders", "graphviz", "http.cookies",
    "opentelemetry.metrics", "opentelemetry._logs", "prefect.utilities.visualization",
    "pandas.core.arrays.arrow._arrow_utils", "pandas.core.methods.to_dict",
    "pandas.io.formats.csvs", "pandera.backends.pandas.register",
    "pandera.accessors.pandas_accessor", "pandera.api.geopandas.container",
    "pandera.backends.pandas.builtin_hypotheses", "pandera.backends.register_checks",
    "pandera.backends.pandas.container", "pandera.backends.pandas.components",
    "typer._adapters", "typer._click.decorators", "pydantic.color", "rich.status",
    "rich._emoji_codes", "starlette.applications", "flows.ephemeral", "flows.schedule",
    "flows.server", "sdc.io.guard", "sdc.io.pin", "sdc.reports.expected",
    "sdc.reports.recoding", "sdc.reports.schema", "sdc.publish.review",
    "sdc.pipeline.households", "sdc.pipeline.household_count", "sdc.pipeline.household_public",
    "sdc.pipeline.household_stage",
    "jsonschema",
    "encodings.idna", "encodings.utf_8_sig")


def home_dir() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment Prefect and the libraries read when imported."""
    prefixes, names = IMPORT_ENV
    return {k: v for k, v in env.items()
            if (k.startswith(prefixes) or k in names) and k != "PREFECT_API_URL"}


def compare_request(req: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Why the worker cannot run ``req`` exactly as the client would ("" when it can)."""
    if req.get("executable") != baseline["executable"]:
        return f"another Python ({req.get('executable')})"
    env = {**CLI_ENV_DEFAULTS, **req.get("env", {})}
    mine, theirs = baseline["env"], relevant_env(env)
    if mine != theirs:
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        return "the environment differs in " + ", ".join(keys[:5])
    if sorted(req.get("groups", [])) != baseline["groups"] or req.get("gid") != os.getgid():
        return "other groups"
    if req.get("cgroup") != baseline["cgroup"] or req.get("mount_ns") != baseline["mount_ns"]:
        return "another cgroup or mount namespace"
    if req.get("nice", 0) < baseline["nice"]:
        return "a higher priority than the worker's"
    for name, (soft, hard) in req.get("limits", {}).items():
        have = baseline["limits"].get(name)
        if have is None:
            continue
        if _above(hard, have[1]) or _above(soft, hard):
            return f"a higher {name} than the worker's"
    return ""


def _above(a: int, b: int) -> bool:
    inf = resource.RLIM_INFINITY
    return b != inf and (a == inf or a > b)


# ---------------------------------------------------------------------------------------------
# the worker process
# ---------------------------------------------------------------------------------------------
def _preimport() -> None:
    """What a release imports (the CLI, Prefect's client and engines, the job's modules)."""
    import sdc.cli.main  # noqa: F401
    from flows.release import warm_imports
    from flows.run import run_release  # noqa: F401

    warm_imports()
    import importlib

    import prefect.artifacts  # noqa: F401
    import prefect.client.orchestration  # noqa: F401
    import prefect.events.clients  # noqa: F401
    import prefect.flow_engine  # noqa: F401
    import prefect.logging.handlers  # noqa: F401
    import prefect.task_engine  # noqa: F401

    import sdc.cli.json_output  # noqa: F401
    import sdc.executors.registry  # noqa: F401
    import sdc.release.preflight  # noqa: F401

    for name in LATER_IMPORTS:  # what a demo release imported after the above (measured)
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _build_cli_once() -> None:
    """Typer builds the CLI's click command from every command's signature at each call of
    ``app()`` (~27 ms); the worker builds it once and its children (one run each, forked)
    use that object. Typer's own ``app()`` still runs (its exception hook and wrapping)."""
    import typer.main

    from sdc.cli.main import app

    built, make = typer.main.get_command(app), typer.main.get_command

    def get_command(typer_instance: Any) -> Any:
        return built if typer_instance is app else make(typer_instance)

    typer.main.get_command = get_command


def module_files() -> dict[str, tuple[int, int]]:
    """(mtime ns, size) of the source of every imported module."""
    out: dict[str, tuple[int, int]] = {}
    home = home_dir()  # Prefect's profiles: read at import
    for f in (os.environ.get("PREFECT_PROFILES_PATH") or str(home / "profiles.toml"),):
        try:
            st = os.stat(f)
            out[f] = (st.st_mtime_ns, st.st_size)
        except OSError:
            out[f] = (-1, -1)
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and f not in out:
            with contextlib.suppress(OSError):
                st = os.stat(f)
                out[f] = (st.st_mtime_ns, st.st_size)
    return out


def _changed(files: dict[str, tuple[int, int]]) -> str:
    for f, (mtime, size) in files.items():
        try:
            st = os.stat(f)
        except OSError:
            if mtime == -1:
                continue
            return f
        if (st.st_mtime_ns, st.st_size) != (mtime, size):
            return f
    return ""


def _log(text: str) -> None:
    print(f"sdc-worker {os.getpid()} {time.strftime('%H:%M:%S')}: {text}", flush=True)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _remove_if_mine(home: Path) -> None:
    state = home / WORKER_STATE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(state.read_text(encoding="utf-8")).get("pid") == os.getpid():
            state.unlink()
            with contextlib.suppress(OSError):
                (home / WORKER_SOCKET).unlink()


class Job:
    """A run handed to a forked child: the request and the descriptors it came with."""

    def __init__(self, req: dict[str, Any], fds: list[int]) -> None:
        self.req, self.fds = req, fds


class Worker:
    """The accept loop (single-threaded: it forks)."""

    def __init__(self, home: Path, server: Any, server_fd: int, listener: socket.socket,
                 baseline: dict[str, Any], files: dict[str, tuple[int, int]]) -> None:
        self.home, self.server, self.server_fd = home, server, server_fd
        self.listener: socket.socket | None = listener
        self.baseline, self.files = baseline, files
        self.runs: dict[int, tuple[socket.socket, int]] = {}  # pidfd -> (conn, pid)
        self.hung_up: set[socket.socket] = set()  # clients gone before their run ended
        self.closing = False
        self.terminated = False

    def stop_accepting(self, why: str) -> None:
        if self.listener is not None:
            _log(f"stopping ({why})")
            self.listener.close()
            self.listener = None
            _remove_if_mine(self.home)
        self.closing = True

    def loop(self) -> Job | None:
        """Serve until the server exits; in a forked child, return its :class:`Job`."""
        while not (self.closing and not self.runs):
            if self.terminated:
                self.stop_accepting("SIGTERM")
            watch: list[Any] = [self.server_fd, *self.runs]
            watch += [c for c, _ in self.runs.values() if c not in self.hung_up]
            if self.listener is not None:
                watch.append(self.listener)
            ready, _, _ = select.select(watch, [], [], 1.0)
            for r in ready:
                if isinstance(r, int) and r == self.server_fd:
                    self.stop_accepting("the Prefect server exited")
                elif isinstance(r, int):
                    self.finished(r)
                elif r is self.listener:
                    job = self.accept()
                    if job is not None:
                        return job
                else:
                    self.message(r)
        return None

    def accept(self) -> Job | None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return None
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid():
                raise OSError(f"a client of uid {uid}")
            conn.settimeout(10.0)
            req, fds = _receive(conn)
            why = compare_request(req, self.baseline)
            if not why and (changed := _changed(self.files)):
                why = f"{changed} changed since the worker imported it"
                self.stop_accepting(why)
            if why:
                _send(conn, {"refused": why})
                raise OSError(why)
            # a signal the client forwards right after the fork waits (blocked) until the
            # child has taken the CLI's handlers
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            pid = -1
            try:
                pid = os.fork()
            finally:
                if pid != 0:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        except (OSError, ValueError) as e:
            _log(f"refused a run: {e}")
            for fd in fds:
                os.close(fd)
            conn.close()
            return None
        if pid == 0:  # the child: leave the loop, keep nothing of the worker (signals blocked)
            conn.close()
            for c, _ in self.runs.values():
                c.close()
            for fd in (self.server_fd, *self.runs):
                os.close(fd)
            if self.listener is not None:
                self.listener.close()
            return Job(req, fds)
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        self.runs[os.pidfd_open(pid)] = (conn, pid)
        _log(f"run {pid} started")
        with contextlib.suppress(OSError):
            _send(conn, {"pid": pid})
        return None

    def finished(self, pidfd: int) -> None:
        conn, pid = self.runs.pop(pidfd)
        self.hung_up.discard(conn)
        os.close(pidfd)
        _, status, ru = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        _log(f"run {pid} ({ru.ru_utime + ru.ru_stime:.2f} CPU s, peak "
             f"{ru.ru_maxrss / 1024:.0f} MB) exited with {code}")
        with contextlib.suppress(OSError):
            _send(conn, {"exit": code if code >= 0 else 128 - code})
        conn.close()

    def message(self, conn: socket.socket) -> None:
        """A client's signal to forward, or its end (it died: the run gets SIGTERM)."""
        pid = next(p for c, p in self.runs.values() if c is conn)
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:  # keep the run's entry: the exit is reaped from its pidfd
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            self.hung_up.add(conn)
            return
        for line in data.splitlines():
            with contextlib.suppress(ValueError, OSError, TypeError):
                sig = int(json.loads(line)["signal"])
                if sig in FORWARDED:
                    os.kill(pid, sig)


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.sendall(json.dumps(msg).encode() + b"\n")


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, PREFIX.size, 8)
    if len(head) != PREFIX.size:
        raise ValueError("a truncated request")
    (n,) = PREFIX.unpack(head)
    if n > MAX_REQUEST or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        raise ValueError("a malformed request")
    body = b""
    while len(body) < n:
        chunk = conn.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    try:
        return json.loads(body), fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise


def _setup_child(job: Job) -> list[str]:
    """Make this forked child the client's process (descriptors, folder, environment, limits,
    priority); the CLI's argv."""
    req = job.req
    stdin, stdout, stderr, cwd = job.fds
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.fchdir(cwd)
    os.close(cwd)
    os.umask(int(req["umask"]))
    os.environ.clear()
    os.environ.update({**CLI_ENV_DEFAULTS, **req["env"]})
    time.tzset()
    with contextlib.suppress(OSError):
        os.nice(int(req.get("nice", 0)) - os.nice(0))
    with contextlib.suppress(OSError, AttributeError, ValueError):
        os.sched_setaffinity(0, req["affinity"])
    for name, (soft, hard) in req.get("limits", {}).items():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            resource.setrlimit(getattr(resource, name), (soft, hard))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _fresh_streams()
    return ["sdc", *req["argv"]]


def _fresh_streams() -> None:
    """New ``sys.std*`` on descriptors 0-2 (buffered as Python buffers a terminal or a file),
    and the CLI's consoles re-made for them (colors, width)."""
    import io

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        tty = os.isatty(fd)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buf = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(buf, encoding=old.encoding, errors=old.errors,
                                  line_buffering=tty or fd == 2)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    from sdc.cli import common as cli

    cli.console.__init__(highlight=False)
    cli.err_console.__init__(stderr=True, highlight=False)


def serve(home: Path) -> Job | None:
    """The worker: lock, find its server, import, listen; returns a :class:`Job` in a child."""
    from flows.server import inspect_state

    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = os.open(home / WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _log("another worker runs in this home")
        return None
    v = inspect_state()
    if v.state != "ours" or v.server is None:
        _log("no local server sdc started runs in this home")
        return None
    server = v.server
    server_fd = os.pidfd_open(server.pid)
    t0 = time.perf_counter()
    _preimport()
    from flows.run import release_flow, run_settings

    server.healthy()  # learns whether the server's CSRF protection is on (the runs ask again)
    run_settings(server.url, csrf_off=server.csrf is False)  # a run's settings, made once
    release_flow()  # and the flow with its result storage
    _build_cli_once()
    files = module_files()
    sock = home / WORKER_SOCKET
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()  # ours to replace: this process holds the worker lock
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(sock))
    finally:
        os.umask(old)
    listener.listen(16)
    # the worker itself ignores what a client forwards to its run (it stops on SIGTERM or with
    # its server); blocked, they reach a child once it has the CLI's handlers
    signal.pthread_sigmask(signal.SIG_BLOCK, set(FORWARDED) - {signal.SIGTERM})
    baseline = {"executable": sys.executable, "env": relevant_env(dict(os.environ)),
                "groups": sorted(os.getgroups()), "cgroup": cgroup(), "mount_ns": mount_ns(),
                "nice": os.nice(0), "limits": limits()}
    now = inspect_state().server
    if now is None or (now.pid, now.start_ticks) != (server.pid, server.start_ticks):
        _log("the server changed while the worker started")  # replaced or stopped
        listener.close()
        sock.unlink()
        return None
    from flows.server import boot_id, process_start

    me = process_start(os.getpid())
    _write_json(home / WORKER_STATE, {
        "pid": os.getpid(), "start_ticks": me[0] if me else None, "boot_id": boot_id(),
        "server_pid": server.pid, "server_start_ticks": server.start_ticks,
        "socket": str(sock), "started_at": time.time()})
    _log(f"ready in {time.perf_counter() - t0:.2f} s for the server pid {server.pid} "
         f"({len(files)} modules imported)")
    worker = Worker(home, server, server_fd, listener, baseline, files)
    signal.signal(signal.SIGTERM, lambda *_: setattr(worker, "terminated", True))
    try:
        job = worker.loop()
    finally:
        if os.getpid() == worker_pid:
            worker.stop_accepting("done")
    if job is None:
        _log("stopped")
    else:
        os.close(lock)
    return job


worker_pid = os.getpid()


def main() -> None:
    """``python -m sdc.cli.worker``: serve until the server exits; a forked child runs the
    CLI for its client and exits with the CLI's exit code."""
    global worker_pid
    worker_pid = os.getpid()
    # as the console script: its folder first on sys.path, never the current folder
    sys.path[0] = str(Path(sys.executable).parent)
    job = serve(home_dir())
    if job is None:
        return
    sys.argv = _setup_child(job)
    from sdc.cli.main import app
    from sdc.cli.thin import guarded

    def child() -> None:
        # a signal the client forwarded while the child was set up arrives here
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {*FORWARDED, signal.SIGTERM})
        app(prog_name="sdc")

    try:
        guarded(child)
        code: Any = 0
    except SystemExit as done:
        code = done.code
    quick_exit(code)


if __name__ == "__main__":  # pragma: no cover - run as a process
    main()
