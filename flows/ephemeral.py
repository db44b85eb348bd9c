"""Prefect's temporary API, started early and in parallel with the job's own start-up.

Without ``PREFECT_API_URL``, Prefect starts a temporary API server for a flow run the first
time the run needs a client: it imports the whole server package in the calling process
(``prefect.server.api.server``, only to reach the class that launches the subprocess), then
launches ``uvicorn prefect.server.api.server:create_app`` in a subprocess, which imports the
same package again, creates or migrates the SQLite database and starts the ephemeral
services, and polls ``/api/health`` until it answers. Measured on the project's 2-core
machine that is 5-9 s before the first task runs, all of it in series with the job.

:class:`TemporaryAPI` launches exactly the same server (same module, same ``create_app``
factory, same ephemeral flags ``PREFECT__SERVER_EPHEMERAL`` / ``PREFECT__SERVER_FINAL``, UI
off) as the first thing ``sdc release`` does, *before* it imports Prefect, pandas or the
engine, and hands its URL to the flow with ``prefect.settings.temporary_settings``. The server
boots on the second core while the CLI imports and reads the config; the calling process never
imports the server package. The server is stopped at interpreter exit, after Prefect's own
exit handlers have delivered the run's last logs and events (and, on Linux, it gets SIGTERM
if the CLI dies, so a killed run does not leave it behind).

This module must not import Prefect: its point is to run before Prefect is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["TemporaryAPI", "mark_migrated", "migrated_marker", "warm_database"]

#: What the temporary server does not need for one flow run (Prefect settings, environment):
#: no telemetry, no automations (triggers/actions would never fire before the server stops),
#: and no block-type registration (the flow uses no blocks; a real server registers them
#: itself when it starts on the same database).
CHEAP_SERVER_SETTINGS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
}


def migrated_marker() -> Path | None:
    """The file that says Prefect's default SQLite database in ``PREFECT_HOME`` is migrated to
    the installed Prefect version (None with a database URL of the user's: never skipped)."""
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL") or os.environ.get(
            "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        return None
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    return home / ".sdc-database-migrated"


def _marker_text() -> str:
    from importlib.metadata import version

    return f"prefect {version('prefect')}\n"


def warm_database() -> bool:
    """The database exists and a temporary server of this Prefect version migrated it before:
    the next one need not check its migrations again (``PREFECT_SERVER_DATABASE_MIGRATE_ON_START``
    false, about 0.3-1 s of the server's start-up)."""
    marker = migrated_marker()
    if marker is None or not (marker.parent / "prefect.db").is_file():
        return False
    try:
        return marker.read_text() == _marker_text()
    except (OSError, UnicodeDecodeError):
        return False


def mark_migrated() -> None:
    """Record that a server of this Prefect version migrated the database (a server that
    answers has run its migrations)."""
    marker = migrated_marker()
    if marker is None or not (marker.parent / "prefect.db").is_file():
        return
    with contextlib.suppress(OSError):
        marker.write_text(_marker_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM the server when the process that started it dies (even on SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class TemporaryAPI:
    """A temporary Prefect API server in a subprocess (see the module docstring).

    ``TemporaryAPI.start()`` returns None when no temporary server should be started: a
    ``PREFECT_API_URL`` is set in the environment, ``PREFECT_SERVER_EPHEMERAL_ENABLED`` is
    false, or Prefect is not installed.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.started = time.perf_counter()
        self.ready_after: float | None = None
        self.peak_rss_mb: float | None = None
        self.process: subprocess.Popen[bytes] | None = self._launch()
        # atexit runs its handlers last-registered-first: registered now, before Prefect is
        # imported, this stop runs after Prefect's own exit handlers have sent the last logs
        # and events of the run to this server
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @classmethod
    def start(cls) -> TemporaryAPI | None:
        if os.environ.get("PREFECT_API_URL"):
            return None
        if os.environ.get("PREFECT_SERVER_EPHEMERAL_ENABLED", "").lower() in ("0", "false"):
            return None
        if importlib.util.find_spec("prefect") is None:
            return None
        return cls(_free_port())

    def _launch(self) -> subprocess.Popen[bytes]:
        spec = importlib.util.find_spec("prefect")
        app_dir = str(Path(next(iter(spec.submodule_search_locations))).parent)
        env = {**CHEAP_SERVER_SETTINGS, **os.environ, "PREFECT_UI_ENABLED": "0",
               "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        self.migrates = not warm_database()
        if not self.migrates:
            env.setdefault("PREFECT_SERVER_DATABASE_MIGRATE_ON_START", "false")
        env.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port",
             str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    def wait(self, timeout: float | None = None) -> float:
        """Block until ``/api/health`` answers; return the seconds since the launch.

        Raises RuntimeError if the server exits or does not answer within ``timeout``
        (default ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``, else 60 s).
        """
        if self.ready_after is not None:
            return self.ready_after
        if timeout is None:
            timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 60))
        deadline = time.perf_counter() + timeout
        retried = False
        while time.perf_counter() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                if code == 3 and not retried:  # uvicorn: port taken meanwhile; one more try
                    retried = True
                    self.port = _free_port()
                    self.process = self._launch()
                    continue
                raise RuntimeError(f"the temporary Prefect API server exited with code {code} "
                                   "before it answered; run with --debug to see its output")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        self.ready_after = time.perf_counter() - self.started
                        if self.migrates:
                            mark_migrated()
                        return self.ready_after
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"the temporary Prefect API server did not answer within {timeout:.0f} s; set "
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS higher on a busy machine, or "
            "start a server (`prefect server start`) and set PREFECT_API_URL"
        )

    def current_peak_rss_mb(self) -> float | None:
        """The server's peak RSS so far (Linux ``VmHWM``), None if unknown."""
        if self.process is None:
            return self.peak_rss_mb
        try:
            with open(f"/proc/{self.process.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 5 s) and record its peak RSS."""
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        deadline = time.perf_counter() + 5.0
        while time.perf_counter() < deadline:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                self.peak_rss_mb = ru.ru_maxrss / 1024
                p.returncode = os.waitstatus_to_exitcode(status)
                return
            time.sleep(0.02)
        p.kill()
        _, _, ru = os.wait4(p.pid, 0)
        self.peak_rss_mb = ru.ru_maxrss / 1024
        p.returncode = -9

    def __enter__(self) -> TemporaryAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
