"""Cron schedules: every config with a ``schedule:`` becomes a served Prefect deployment.

``sdc schedule CONFIG...`` loads the configs, skips (and reports) those without a
``schedule:``, builds one deployment of the :func:`flows.release.release` flow per remaining
config, named after the config's ``name``, with its cron and timezone and the parameter
``config_path`` (absolute), and serves them with :func:`prefect.serve`: a long-running process
that polls the Prefect API for scheduled (or manually triggered) runs and executes them in
subprocesses.

Cron needs a real Prefect server. The embedded (ephemeral) API that ``sdc release`` uses lives
only as long as one process and has no scheduler, so :func:`require_server` refuses plainly when
``PREFECT_API_URL`` is not set.
"""

from __future__ import annotations

import signal
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sdc

__all__ = [
    "ScheduleError",
    "ScheduledJob",
    "build_deployments",
    "collect_schedules",
    "prefect_api",
    "require_server",
    "serve_deployments",
    "watch_server",
]

NO_SERVER_MESSAGE = (
    "PREFECT_API_URL is not set, so there is no Prefect server to hold the schedules: cron "
    "schedules need a real Prefect server (the embedded one that `sdc release` starts lives only "
    "for one run and never schedules anything). Start one with `prefect server start` (it "
    "listens on http://127.0.0.1:4200), then set PREFECT_API_URL=http://127.0.0.1:4200/api "
    "(export it, or `prefect config set PREFECT_API_URL=...`) and run `sdc schedule` again. "
    "See docs/OPERATIONS.md for running both as services"
)


class ScheduleError(RuntimeError):
    """Schedules cannot be served (no server, nothing to schedule, duplicate names)."""


@dataclass(frozen=True)
class ScheduledJob:
    """One config to serve: deployment ``release/<name>`` with its cron and timezone."""

    name: str
    config_path: Path
    cron: str
    timezone: str


def prefect_api() -> tuple[str | None, Exception | None]:
    """The configured Prefect API URL (None: embedded mode) and, if set, why it does not
    answer its health check (None: it answers). Shared by ``sdc release`` and ``sdc schedule``.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return None, None
    from flows.client import httpx_settings

    with get_client(sync_client=True, httpx_settings=httpx_settings()) as client:
        return str(url), client.api_healthcheck()


def require_server(*, check: bool = True) -> str:
    """The configured Prefect API URL, or :class:`ScheduleError` saying how to get one.

    Reads Prefect's settings, so both the environment variable and a Prefect profile
    (``prefect config set PREFECT_API_URL=...``) count. With ``check``, the server must also
    answer its health check.
    """
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise ScheduleError(NO_SERVER_MESSAGE)
    if check:
        _, problem = prefect_api()
        if problem is not None:
            raise ScheduleError(
                f"PREFECT_API_URL is set to {url}, but no Prefect server answers there "
                f"({type(problem).__name__}: {problem}). Start it with `prefect server start` "
                "(see docs/OPERATIONS.md) and run `sdc schedule` again"
            )
    return str(url)


def collect_schedules(config_paths: Sequence[str | Path]) -> tuple[list[ScheduledJob],
                                                                      list[tuple[Path, str]]]:
    """Load every config; return the scheduled jobs and the skipped ``(path, reason)`` pairs.

    A config that does not parse is an error (``sdc.ConfigError``), not a skip: a typo must not
    silently drop a monthly release. Raises :class:`ScheduleError` when nothing is left or two
    configs share a ``name`` (deployment names must be unique).
    """
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    jobs: list[ScheduledJob] = []
    skipped: list[tuple[Path, str]] = []
    for raw in config_paths:
        path = Path(raw).expanduser().resolve()
        cfg = sdc.load_config(path)
        if cfg.schedule is None:
            skipped.append((path, f"config {cfg.name!r} has no schedule: section"))
            continue
        cron, tz = cfg.schedule.cron, cfg.schedule.timezone
        try:
            zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise sdc.ConfigError(
                f"config {str(path)!r}: schedule.timezone {tz!r} is not an IANA time zone "
                "(e.g. UTC, Europe/Paris, America/New_York)"
            ) from None
        try:
            CronSchedule(cron=cron, timezone=tz)
        except ValidationError:
            raise sdc.ConfigError(
                f"config {str(path)!r}: schedule.cron {cron!r} is not a valid cron expression "
                "(5 fields: minute hour day-of-month month day-of-week, e.g. '0 6 1 * *'; "
                "random/hashed R and H fields are not supported)"
            ) from None
        jobs.append(ScheduledJob(cfg.name, path, cron, tz))
    names = [j.name for j in jobs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        where = "; ".join(f"{j.name}: {j.config_path}" for j in jobs if j.name in dupes)
        raise ScheduleError(
            f"configs share the name(s) {dupes} ({where}); each scheduled config needs its own "
            "name, which becomes the deployment name release/<name>"
        )
    if not jobs:
        listed = "; ".join(f"{p}: {why}" for p, why in skipped)
        raise ScheduleError(
            f"none of the given configs has a schedule ({listed}); add e.g. "
            "`schedule: {cron: \"0 6 1 * *\", timezone: UTC}` to a config"
        )
    return jobs, skipped


def build_deployments(jobs: Sequence[ScheduledJob], *, force: bool = False) -> list[Any]:
    """One ``RunnerDeployment`` of the release flow per job (cron + timezone, absolute
    ``config_path``). The entrypoint is the module path ``flows.release:release`` so runs work
    whatever the service's working directory. ``force`` is passed to every scheduled run."""
    from prefect.flows import EntrypointType
    from prefect.schedules import Cron

    from flows.release import release

    return [
        release.to_deployment(
            name=j.name,
            schedule=Cron(j.cron, timezone=j.timezone),
            # a config with review: waits in a paused run for the decision (UI or sdc approve)
            parameters={"config_path": str(j.config_path), "force": force,
                        "wait_for_review": True},
            description=f"Release job {j.name} ({j.config_path}), cron {j.cron!r} {j.timezone}",
            tags=["sdc", "release", f"release:{j.name}"],
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
        for j in jobs
    ]


def watch_server(url: str, say: Any, *, interval: float = 10.0) -> Any:
    """Start a daemon thread that checks ``<url>/health`` every ``interval`` seconds while
    ``sdc schedule`` serves, and calls ``say(text)`` once when the server stops answering
    and once when it answers again. Prefect's runner keeps polling a server that went away
    without saying so (one websocket traceback, then silence); scheduled runs cannot start
    meanwhile. Returns the thread's stop event."""
    import threading
    import time
    import urllib.request

    stop = threading.Event()
    health = url.rstrip("/") + "/health"

    def loop() -> None:
        down_since: str | None = None
        while not stop.wait(interval):
            try:
                with urllib.request.urlopen(health, timeout=5) as r:
                    ok = r.status == 200
                err = ""
            except OSError as e:
                ok, err = False, f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if not ok and down_since is None:
                down_since = time.strftime("%H:%M:%S")
                say(f"the Prefect server at {url} stopped answering ({err or 'unhealthy'}): "
                    "scheduled runs cannot start, and a run in progress fails, until it is "
                    "back. Restart it (`prefect server start`, or `sdc server start`); `sdc "
                    "schedule` keeps waiting and serves again when it answers")
            elif ok and down_since is not None:
                say(f"the Prefect server at {url} answers again (it was down since "
                    f"{down_since}); serving the schedules")
                down_since = None

    threading.Thread(target=loop, name="sdc-server-watch", daemon=True).start()
    return stop



#: attempts to start Prefect's runner, and the seconds before each retry
SERVE_ATTEMPTS = 4
SERVE_RETRY_SECONDS = (2.0, 4.0, 8.0)


class _NoShutdownCancellations:
    """A logging filter for the ``asyncio`` logger while ``sdc schedule`` serves: Ctrl-C
    cancels the runner's pending tasks (its control channel's connection handler), and
    asyncio's default exception handler logged each cancelled callback as an ERROR with two
    chained tracebacks ("Exception in callback StreamReaderProtocol.connection_made"). A
    task cancelled at shutdown is no error; every other record passes."""

    def filter(self, record: Any) -> bool:
        import asyncio

        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)


def serve_deployments(deployments: Sequence[Any], url: str, say: Any) -> None:
    """:func:`prefect.serve` the deployments until stopped. A runner that fails to start
    (``RuntimeError: Runner failed to start: event_emitter - Unable to authenticate to the
    event stream``: a busy server closed its websocket during the handshake) is started
    again after 2, 4 and 8 s, each time said with ``say(text)``; after the last attempt a
    :class:`ScheduleError` names the server and the fix (it was an unexpected error, exit 1)."""
    import logging
    import threading
    import time

    from prefect import serve

    logging.getLogger("asyncio").addFilter(_NoShutdownCancellations())
    if threading.current_thread() is not threading.main_thread():
        _serve(deployments, url, say, serve, time.sleep)
        return
    previous = signal.signal(signal.SIGINT, _stop_like_sigterm())
    try:
        _serve(deployments, url, say, serve, time.sleep)
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_like_sigterm() -> Any:
    """The SIGINT handler while serving: Ctrl-C runs the runner's own graceful stop, as
    SIGTERM does (it cancels the runs in flight, pauses the schedules, and serve returns);
    Ctrl-C used to leave the runs "Running" and print tracebacks. Before the runner handles
    SIGTERM, or at a second Ctrl-C: KeyboardInterrupt."""
    asked: list[int] = []

    def handle(sig: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGTERM)
        if asked or not callable(handler):
            raise KeyboardInterrupt
        asked.append(sig)
        handler(signal.SIGTERM, frame)

    return handle


def _serve(deployments: Sequence[Any], url: str, say: Any, serve: Any, sleep: Any) -> None:
    for attempt in range(SERVE_ATTEMPTS):
        try:
            serve(*deployments, print_starting_message=attempt == 0)
            return
        except RuntimeError as e:
            if not str(e).startswith("Runner failed to start"):
                raise
            reason = str(e).removeprefix("Runner failed to start: ")
            if attempt + 1 == SERVE_ATTEMPTS:
                raise ScheduleError(
                    f"the Prefect server at {url} did not let the schedule runner connect "
                    f"({SERVE_ATTEMPTS} attempts; {reason}). Check that the server answers "
                    "(`sdc server status`, or its log) and that PREFECT_API_URL and "
                    "PREFECT_API_AUTH_STRING match it, then rerun `sdc schedule`") from e
            wait = SERVE_RETRY_SECONDS[attempt]
            say(f"the schedule runner could not connect to the Prefect server at {url} "
                f"({reason}); trying again in {wait:g} s")
            sleep(wait)
