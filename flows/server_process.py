"""The process of ``sdc``'s local Prefect server: ``python -m flows.server_process``.

Started by :mod:`flows.server` (``sdc server start``, or the first ``sdc release`` that reuses
a server); never imported by the CLI. What it runs: Prefect's own API application
(``prefect.server.api.server:create_app``, as ``prefect server start`` runs it) under uvicorn,
wrapped in a small ASGI layer that

- answers ``GET /sdc-identity?nonce=N`` with ``{"pid": P, "proof": HMAC-SHA256(token, N),
  "csrf": B}``: the token is a secret only the starter knows (it is in the owner-only state
  file), so a client can tell *this* server from any other process that later holds the port;
  ``B`` is whether the API's CSRF protection is on (its ``server.api.csrf_protection_enabled``),
  which spares each run's client the probe of ``/csrf-token`` Prefect makes before its first
  write (one request, ~50 ms on a busy small machine);
- records the time of the last request (HTTP or websocket) and the number in flight.

A watchdog thread stops the server (uvicorn's graceful shutdown) when it has been idle for
``idle_minutes``: no request in flight, none for that long, and no ``sdc release`` holding a
*lease* (a shared ``flock`` on ``$PREFECT_HOME/sdc-server.lease``, held for the whole run). To
decide, it takes that lock exclusively and keeps it until the process has exited, so a run
never starts on a server that is going away (the run waits, then starts a new one). The idle
time is read from the state file at every check, so ``sdc server start`` can turn a reused
server into one that runs until ``sdc server stop``. A server whose ``$PREFECT_HOME`` was
removed (no state file, no lease file: nobody can find or stop it) stops once no request is in
flight; before, the watchdog failed to open the lease file every 5 s and the server ran on.

Start-up (Linux, POSIX): the port is bound first (0: any free port), then the process forks;
the parent prints ``"PID PORT"`` and exits at once, the child (the server, adopted by init: no
zombie in a long-lived starter) redirects its output to the log and imports Prefect.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

IDENTITY_PATH = "/sdc-identity"


class Watched:
    """ASGI wrapper: the identity endpoint, and the time of the last request."""

    def __init__(self, app: Any, token: bytes, csrf: bool = True) -> None:
        self.app = app
        self.token = token
        self.csrf = csrf
        self.last = time.monotonic()
        self.active = 0

    def touch(self) -> None:
        self.last = time.monotonic()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        if scope["type"] == "http" and scope.get("path") == IDENTITY_PATH:
            await self._identity(scope, send)
            return
        self.active += 1
        self.touch()
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.touch()

    async def _identity(self, scope: dict, send: Any) -> None:
        from urllib.parse import parse_qs

        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        nonce = (query.get("nonce") or [""])[0][:256]
        proof = hmac.new(self.token, nonce.encode(), hashlib.sha256).hexdigest()
        body = json.dumps({"pid": os.getpid(), "proof": proof, "csrf": self.csrf}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _state_idle_minutes(state: Path, default: float | None) -> float | None:
    """The idle time the state file sets for this process (None: run until stopped)."""
    try:
        data = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default
    if not isinstance(data, dict) or data.get("pid") != os.getpid():
        return default
    value = data.get("idle_minutes", default)
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return default


def watchdog(server: Any, watched: Watched, home: Path, idle_minutes: float | None,
             stop: threading.Event) -> None:
    """Stop ``server`` once idle for the state file's ``idle_minutes`` (see the docstring)."""
    while not stop.is_set():
        try:
            if _idle_check(server, watched, home, idle_minutes, stop):
                return
        except Exception as e:  # never die silently: a dead watchdog never stops the server
            print(f"sdc: idle watchdog: {type(e).__name__}: {e}", flush=True)
            stop.wait(5.0)


def _idle_check(server: Any, watched: Watched, home: Path, idle_minutes: float | None,
                stop: threading.Event) -> bool:
    """One check of :func:`watchdog` (after its wait); True once the server was told to stop."""
    state, lease = home / "sdc-server.json", home / "sdc-server.lease"
    idle = _state_idle_minutes(state, idle_minutes)
    seconds = None if idle is None else idle * 60.0
    stop.wait(5.0 if seconds is None else min(5.0, max(0.2, seconds / 10)))
    if not getattr(server, "started", False) or server.should_exit:
        return False
    if not home.is_dir():  # PREFECT_HOME removed: no client can find this server any more
        if watched.active:
            return False
        print(f"sdc: {home} is gone, stopping", flush=True)
        server.should_exit = True
        return True
    if seconds is None:
        return False
    if watched.active:
        watched.touch()
        return False
    fd = os.open(lease, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a run holds a lease: in use
        os.close(fd)
        watched.touch()
        return False
    if time.monotonic() - watched.last < seconds or watched.active:
        os.close(fd)  # releases the lock
        return False
    # idle: keep the lease locked until the process exits (runs wait, then start anew)
    print(f"sdc: idle for {idle:g} min, stopping", flush=True)
    server.should_exit = True
    return True


def _remove_state(home: Path) -> None:
    """Remove the state file if it names this process (the starter wrote it)."""
    state = home / "sdc-server.json"
    with contextlib.suppress(OSError, ValueError):
        if json.loads(state.read_text(encoding="utf-8")).get("pid") == os.getpid():
            state.unlink()


def ui_settings_env(host: str, port: int) -> None:
    """Point the UI of this server at its own API (``/ui-settings``' ``api_url``).

    Prefect's UI asks ``/ui-settings`` where the API is; without ``PREFECT_UI_API_URL`` the
    answer is built from ``PREFECT_SERVER_API_HOST`` / ``PREFECT_SERVER_API_PORT`` (default
    4200), not from the port this process bound: on any other port (a free port for the reused
    server, ``sdc server start --port P``) every page of the UI, and every "View at" link of
    a flow's log, opened an error. Set before Prefect is imported (it reads its settings
    then); a value the user's environment carried for some other server is replaced."""
    url = f"http://{host}:{port}/api"
    for name in ("PREFECT_UI_API_URL", "PREFECT_SERVER_UI_API_URL"):
        os.environ.pop(name, None)
    os.environ["PREFECT_SERVER_UI_API_URL"] = url
    os.environ["PREFECT_SERVER_API_HOST"] = host
    os.environ["PREFECT_SERVER_API_PORT"] = str(port)


def _daemonize(log: Path, sock: socket.socket) -> None:
    """Fork: the parent prints "PID PORT" and exits; the child continues as the server."""
    pid = os.fork()
    if pid:
        print(f"{pid} {sock.getsockname()[1]}", flush=True)
        os._exit(0)
    with contextlib.suppress(OSError):
        if log.stat().st_size > 5 * 2**20:  # keep one previous log of a reasonable size
            os.replace(log, log.with_suffix(".log.1"))
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m flows.server_process")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--idle-minutes", type=float, default=None)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--services", choices=["full", "ephemeral"], default="full")
    args = ap.parse_args(argv)
    token = os.environ.pop("SDC_SERVER_TOKEN", "").encode()
    if not token:
        sys.exit("SDC_SERVER_TOKEN is not set")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        print(f"error: cannot bind {args.host}:{args.port}: {e.strerror or e}", flush=True)
        sys.exit(3)
    sock.set_inheritable(True)
    ui_settings_env(args.host, sock.getsockname()[1])
    _daemonize(args.log, sock)
    print(f"sdc: server pid {os.getpid()} on {args.host}:{sock.getsockname()[1]}, "
          f"idle stop {args.idle_minutes} min, started {time.ctime()}", flush=True)

    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import get_current_settings

    app = create_app(final=True, ephemeral=args.services == "ephemeral")
    watched = Watched(app, token, bool(get_current_settings().server.api.csrf_protection_enabled))
    level = os.environ.get("PREFECT_SERVER_LOGGING_LEVEL", "WARNING").lower()
    config = uvicorn.Config(watched, log_level=level, lifespan="on",
                            timeout_graceful_shutdown=10, ws_ping_interval=20.0)
    server = uvicorn.Server(config)
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    stop = threading.Event()
    dog = threading.Thread(target=watchdog, args=(server, watched, home, args.idle_minutes, stop),
                           name="sdc-idle-watchdog", daemon=True)
    dog.start()
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        _remove_state(home)
        print(f"sdc: server stopped {time.ctime()}", flush=True)


if __name__ == "__main__":  # pragma: no cover - run as a process
    main()
