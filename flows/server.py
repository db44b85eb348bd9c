"""``sdc server start|stop|status``: a local Prefect server that ``sdc release`` reuses.

An interactive ``sdc release`` without ``PREFECT_API_URL`` starts Prefect's temporary API for
the one command (several seconds of a short run). Staff who run many releases in a session
start one server instead, once::

    sdc server start      # prefect server start on 127.0.0.1, in the background
    sdc release ...       # uses it (no temporary API), as if PREFECT_API_URL named it
    sdc server stop

The server is a child of nobody (its own session): it keeps running until ``sdc server stop``
(it was asked for). Its pid, URL and log file are kept in ``$PREFECT_HOME/sdc-server.json``
(owner-only); ``sdc release`` reads that file only when ``PREFECT_API_URL`` is not set, and uses
the server only when its process is alive. A configured ``PREFECT_API_URL`` always wins.

This module must not import Prefect (``sdc release`` reads the state before importing it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sdc.publish.folder import pid_alive

__all__ = ["LocalServer", "local_server", "server_status", "start_server", "stop_server"]


class ServerError(RuntimeError):
    """The local server cannot be started or stopped (CLI exit 2)."""


def _home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def state_file() -> Path:
    """``$PREFECT_HOME/sdc-server.json``."""
    return _home() / "sdc-server.json"


@dataclass
class LocalServer:
    """A server ``sdc server start`` started."""

    pid: int
    url: str
    log: str

    def alive(self) -> bool:
        return pid_alive(self.pid)

    def healthy(self, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=timeout) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False


def local_server() -> LocalServer | None:
    """The server of ``sdc server start`` if its state file names a live process."""
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
        srv = LocalServer(int(data["pid"]), str(data["url"]), str(data.get("log", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return srv if srv.alive() else None


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def start_server(host: str = "127.0.0.1", port: int = 4200, timeout: float = 120.0) -> LocalServer:
    """Start ``prefect server start`` in the background and wait until it answers.

    Returns the running server (the one already running, if any). Raises :class:`ServerError`
    when the port is taken or the server does not answer within ``timeout``.
    """
    running = local_server()
    if running is not None:
        return running
    if not _port_free(host, port):
        raise ServerError(f"port {port} on {host} is in use (another Prefect server?); use "
                          "`sdc server start --port N`, or set PREFECT_API_URL to that server")
    home = _home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = home / "sdc-server.log"
    prefect = Path(sys.executable).with_name("prefect")
    cmd = ([str(prefect)] if prefect.exists() else [sys.executable, "-m", "prefect"]) + [
        "server", "start", "--host", host, "--port", str(port)]
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
                                start_new_session=True)
    finally:
        os.close(fd)
    srv = LocalServer(proc.pid, f"http://{host}:{port}/api", str(log))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"the Prefect server exited with code {proc.returncode} before it "
                              f"answered; see {log}")
        if srv.healthy():
            tmp = state_file().with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": srv.pid, "url": srv.url, "log": srv.log}, f)
            os.replace(tmp, state_file())
            return srv
        time.sleep(0.2)
    _terminate(proc.pid)
    raise ServerError(f"the Prefect server did not answer within {timeout:.0f} s; see {log}")


def _terminate(pid: int, grace: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child: poll for its end
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            done = 0
        if done:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop_server() -> LocalServer | None:
    """Stop the server of ``sdc server start`` (its process group); None if none runs."""
    srv = local_server()
    with contextlib.suppress(FileNotFoundError):
        state_file().unlink()
    if srv is None:
        return None
    _terminate(srv.pid)
    return srv


def server_status() -> tuple[LocalServer | None, bool]:
    """(the running server or None, whether it answers its health check)."""
    srv = local_server()
    return srv, bool(srv is not None and srv.healthy())
