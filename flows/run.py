"""Running the release flow for a command: which Prefect API it talks to (a configured server,
``sdc server start``'s, or a temporary one started here while the input is read), and a server
lost during the run turned into a clear error. ``sdc release`` calls :func:`run_release` and
prints; it holds no Prefect logic of its own (docs/ARCHITECTURE.md).

Importing this module imports nothing of Prefect: the temporary API must start before Prefect
is imported (:mod:`flows.ephemeral`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["PrefectServerLostError", "PrefectUnreachableError", "check_prefect_api",
           "early_api", "launch_early", "prefect_api_configured", "run_release", "run_settings",
           "server_lost", "use_local_server"]


class PrefectUnreachableError(RuntimeError):
    """PREFECT_API_URL names a server that does not answer (exit 2: start it or unset it)."""


class PrefectServerLostError(RuntimeError):
    """The Prefect API stopped answering during the run: exit 2 when nothing was published;
    ``published`` is the release folder (or the folder staged for review) when the run had
    written it before the server went away (``sdc release`` then exits 0 with a warning)."""

    def __init__(self, message: str, published: Path | None = None) -> None:
        super().__init__(message)
        self.published = published


def prefect_api_configured() -> bool:
    """A Prefect API is already configured: PREFECT_API_URL in the environment, or in the
    settings of an already imported Prefect (a test harness, an embedding program)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if "prefect" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return bool(PREFECT_API_URL.value())
    return False


def use_local_server() -> None:
    """Without a configured API: use the server sdc started (``sdc server start``, or a reused
    one) when it is the process sdc started and proves its token (flows.server)."""
    if prefect_api_configured() or "prefect" in sys.modules:  # Prefect read its settings
        return
    from flows.server import local_server

    srv = local_server()
    if srv is not None and srv.healthy():
        os.environ["PREFECT_API_URL"] = srv.url


def check_prefect_api() -> str | None:
    """The configured Prefect API URL after checking that it answers (None: embedded mode).

    Without this, a stopped server shows up as an obscure connection error from deep inside
    Prefect after a long wait."""
    from flows.schedule import prefect_api

    url, problem = prefect_api()
    if url is None:
        return None
    if problem is not None:
        raise PrefectUnreachableError(
            f"PREFECT_API_URL is set to {url}, but no Prefect server answers there "
            f"({type(problem).__name__}: {problem}). Start it (`prefect server start`, see "
            "docs/OPERATIONS.md), or unset PREFECT_API_URL to run with Prefect's embedded API"
        )
    return url


def server_lost(exc: BaseException, url: str | None, out_dir: Path,
                started: float, where: str | None = None) -> PrefectServerLostError | None:
    """A :class:`PrefectServerLostError` when ``exc`` (or an exception it was raised from)
    is a lost connection to the Prefect API (``httpx.TransportError``), else None. ``where``
    names the server (default: ``at URL``, or the temporary one without a URL); whether the
    run published is read from the folders: the release's (or its staged folder's)
    ``internal/audit.json`` written since ``started``."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - Prefect depends on it
        return None
    e: BaseException | None = exc
    seen: set[int] = set()
    while e is not None and id(e) not in seen and not isinstance(e, httpx.TransportError):
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    if e is None or id(e) in seen:
        return None
    from sdc.publish.review import staged_path

    published = None
    for folder in (out_dir, staged_path(out_dir)):
        try:
            if (folder / "internal" / "audit.json").stat().st_mtime >= started:
                published = folder
        except OSError:
            pass
    where = where or (f"at {url}" if url else "(the temporary one this command started)")
    if published is not None:
        what = ("staged for review in" if published != out_dir else "published to")
        return PrefectServerLostError(
            f"the Prefect server {where} stopped answering during the run ({type(e).__name__}: "
            f"{e}), after the release was {what} {str(published)!r}: the release is complete "
            f"(check it with `sdc audit {published}`); only Prefect's record of the run is "
            "incomplete. Restart the server (`sdc server start` or `prefect server start`) "
            "before the next run", published)
    return PrefectServerLostError(
        f"the Prefect server {where} stopped answering during the run "
        f"({type(e).__name__}: {e}). Nothing was published (an earlier release, if any, is "
        "unchanged). Restart the server (`sdc server start` or `prefect server start`) and "
        "rerun, or unset PREFECT_API_URL to run with Prefect's embedded API")


@contextmanager
def lost_server(url: str | None, out_dir: Path,
                where: Callable[[], str | None] = lambda: None) -> Iterator[None]:
    """Turn a lost connection to the Prefect API during the run into
    :class:`PrefectServerLostError` (see :func:`server_lost`); ``where()`` names the server
    once the run knows which it used."""
    started = time.time() - 1.0
    try:
        yield
    except Exception as exc:
        lost = server_lost(exc, url, out_dir, started, where())
        if lost is None:
            raise
        raise lost from exc


_early: list[Any] = []  # the temporary API sdc's entry launched (launch_early)


def early_api(reuse: bool) -> Any:
    """Prefect's temporary API started now, before the pre-flight, when the run will use one:
    no configured API, no local server sdc started running, and no reused server to start
    (``reuse`` False or ``SDC_SERVER_IDLE_MINUTES`` 0), and a ``PREFECT_HOME`` the pre-flight
    accepts. Else None (:func:`run_release` finds or starts the API itself). The server then
    boots during the whole pre-flight too; a refused pre-flight stops it (``stop()``, or at
    exit). The one :func:`launch_early` started, if any, is handed over."""
    if _early:
        return _early.pop()
    from flows.server import idle_minutes_setting, local_server

    if prefect_api_configured() or (reuse and idle_minutes_setting() > 0):
        return None
    if local_server() is not None:
        return None
    from sdc.release.preflight import prefect_home_problem

    if prefect_home_problem() is not None:  # the pre-flight refuses it: no server there
        return None
    from flows.ephemeral import TemporaryAPI

    return TemporaryAPI.start()


def launch_early(argv: list[str]) -> None:
    """``sdc release ... --no-reuse``: the temporary API launched by the console script before
    it imports the CLI (typer, rich, pydantic: ~0.1-0.2 s), for :func:`early_api` to hand
    over. Whatever fails here is left to the command (it asks again, and refuses)."""
    if argv[:1] != ["release"] or "--no-reuse" not in argv[1:] or {"--help", "-h"} & {*argv}:
        return
    try:
        api = early_api(reuse=False)
    except Exception:  # noqa: BLE001 (the command's own early_api raises it where it should)
        return
    if api is not None:
        _early.append(api)


def _api_for_run(reuse: bool, temp_api: Any = None) -> tuple[Any, Any]:
    """(the reused server's lease or None, a temporary API or None) for a run without a
    configured API: the server sdc started if one runs; else, with ``reuse`` and
    ``SDC_SERVER_IDLE_MINUTES`` > 0, a server started now for this and later runs; else
    Prefect's temporary API for this run only (flows.server, flows.ephemeral)."""
    from flows.ephemeral import TemporaryAPI
    from flows.server import acquire_reused_server, idle_minutes_setting

    if temp_api is not None:  # started before the pre-flight (early_api)
        return None, temp_api
    if prefect_api_configured():
        return None, None
    idle = idle_minutes_setting()
    lease = acquire_reused_server(idle, start=reuse and idle > 0)
    if lease is not None:
        return lease, None
    return None, TemporaryAPI.start()


@contextmanager
def _run_settings(url: str | None, csrf_off: bool = False) -> Iterator[None]:
    """Prefect's settings for one release run: the API ``url`` (None: as configured) and no
    flow-run heartbeats unless ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` is set. A heartbeat
    (every 180 s by default) would be sent once at the start of a run that lasts seconds,
    and the flow's end waits up to 1 s (0.5 s on average) for the heartbeat thread's sleep;
    the command itself reports a run that fails (docs/OPERATIONS.md). ``csrf_off``: the
    server proved (its identity, :meth:`flows.server.LocalServer.healthy`) that its CSRF
    protection is off, so the client does not probe ``/csrf-token`` first."""
    import prefect.context

    context = prefect.context.get_settings_context()
    with prefect.context.SettingsContext(
            profile=context.profile, settings=run_settings(url, context.settings, csrf_off)):
        yield


#: the local result storage folder -> (the flow it was made from, the flow with the folder)
_flows_made: dict[Path, tuple[Any, Any]] = {}


def release_flow() -> Any:
    """:func:`flows.release.release` with the current settings' local result storage named
    (``with_options(result_storage=PREFECT_RESULTS_LOCAL_STORAGE_PATH)``, kept per folder).
    Nothing of a release run is persisted (the flow and its tasks: ``persist_result=False``),
    but a flow without a result storage asks the server for its default storage block twice a
    run (Prefect's ``update_for_flow``: two GETs of ~50 ms each on a small machine)."""
    import prefect.context

    from flows.release import release

    path = Path(prefect.context.get_settings_context().settings.results.local_storage_path)
    made = _flows_made.get(path)
    if made is None or made[0] is not release:
        made = _flows_made[path] = (release, release.with_options(result_storage=path))
    return made[1]


#: (url, heartbeats off, CSRF probe off, the settings they update) -> the updated settings
#: (see run_settings)
_settings_made: dict[tuple[str | None, bool, bool, int], tuple[Any, Any]] = {}


def run_settings(url: str | None, base: Any = None, csrf_off: bool = False) -> Any:
    """Prefect's settings for a run (:func:`_run_settings`): ``base`` (default: the current
    settings) updated as ``temporary_settings`` would (``Settings.copy_with_update``, which
    builds and validates a whole new ``Settings`` from every source: ~0.1-0.3 CPU s). The
    result is kept per (url, heartbeats, CSRF probe, base settings object): the release worker
    makes its server's once, before it forks a child per run."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_CLIENT_CSRF_SUPPORT_ENABLED,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    )

    if base is None:
        import prefect.context

        base = prefect.context.get_settings_context().settings
    beats_off = not os.environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    key = (url, beats_off, csrf_off, id(base))
    made = _settings_made.get(key)
    if made is not None and made[0] is base:
        return made[1]
    updates: dict[Any, Any] = {} if url is None else {PREFECT_API_URL: url}
    if beats_off:
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    if csrf_off:
        updates[PREFECT_CLIENT_CSRF_SUPPORT_ENABLED] = False
    settings = base.copy_with_update(updates=updates)
    _settings_made[key] = (base, settings)
    return settings


def run_release(config_path: Path, checked: Any, *, force: bool = False,
                new_series: bool = False, engine: str | None = None, review: bool = False,
                discard_extra_files: bool = False, reuse: bool = True,
                progress: Callable[[str], None] | None = None,
                t0: float | None = None, temp_api: Any = None,
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run :func:`flows.release.release` for ``config_path`` (``checked``: its
    :class:`~sdc.release.preflight.Preflight`, whose config the run uses: the config is read
    once) and return ``(summary, startup)``.

    The API: a configured PREFECT_API_URL (checked to answer), else the local server sdc
    started (``sdc server start``, or the reused one: started now when none runs, unless
    ``reuse`` is False), else Prefect's temporary API started in a subprocess right now. While
    a server boots, an in-memory executor's input is read in a thread
    (:func:`flows.release.prefetch_job`) and the tasks' imports are paid. ``startup`` holds
    which API was used and its start-up figures for ``--timings``. ``progress(text)`` is told
    every step. ``temp_api``: the temporary API :func:`early_api` started before the
    pre-flight, used instead of finding one.
    """
    t0 = time.perf_counter() if t0 is None else t0
    say = progress or (lambda text: None)
    lease, temp_api = _api_for_run(reuse, temp_api)
    failed = True
    try:
        summary, startup = _run_with(lease, temp_api, config_path, checked, say, t0,
                                     {"config_path": str(config_path), "force": force,
                                      "new_series": new_series, "engine": engine,
                                      "review": review,
                                      "discard_extra_files": discard_extra_files})
        failed = False
        return summary, startup
    finally:
        if lease is not None:
            lease.close(failed=failed)


def _run_with(lease: Any, temp_api: Any, config_path: Path, checked: Any,
              say: Callable[[str], None], t0: float,
              kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    import contextlib

    from flows.client import client_context
    from flows.release import prefetch_job, progress_callback
    from sdc.executors import get_executor
    from sdc.release.job import resolve_engine

    config = checked.config

    api = check_prefect_api()
    if api and temp_api is not None:  # a profile names a server: use it
        temp_api.stop()
        temp_api = None
    if api and lease is not None:
        lease.close(failed=True)
        lease = None
    booting = temp_api is not None or (lease is not None and lease.launch is not None)
    # the flow takes the pre-flight's config and checks; an executor that reads the input
    # whole: read it in a thread while Prefect starts
    whole = get_executor(resolve_engine(config, kwargs["engine"]).kind).reads_whole_input
    kwargs = {**kwargs, "prefetched": prefetch_job(checked, read_input=whole)}
    if whole and booting:  # the server's boot time: import what the tasks import
        from flows.release import warm_imports

        warm_imports()
    startup: dict[str, Any] = {"prefect_api": "temporary" if temp_api is not None else
                               lease.how if lease is not None else "configured"}
    if lease is not None:
        say("starting the local Prefect server" if lease.launch is not None else
            f"connecting to {lease.server.url}")
    else:
        say(f"connecting to {api}" if api else "starting Prefect (embedded)")
    url = api or (temp_api.url if temp_api is not None else None)
    from prefect import tags

    def where() -> str | None:  # the reused server is not the temporary API of this command
        if lease is not None:
            srv = lease.server
            return (f"at {srv.url} (the local server sdc started, pid {srv.pid})"
                    if srv is not None else "(the local server sdc was starting)")
        return None

    with lost_server(url, config.output_dir.absolute(), where), progress_callback(say), \
            tags(f"release:{config.name}"):
        if temp_api is None and lease is None:  # a configured API, else Prefect's embedded
            with _run_settings(None), client_context() if api else contextlib.nullcontext():
                return release_flow()(**kwargs), startup
        waited_from = time.perf_counter() - t0
        if lease is not None:
            url = lease.wait()
            if lease.ready_seconds is not None:  # started by this run
                startup.update({"api_server_url": url,
                                "api_server_ready_seconds": round(lease.ready_seconds, 3),
                                "cli_ready_seconds": round(waited_from, 3)})
        else:
            startup.update({"api_server_url": url,
                            "api_server_ready_seconds": round(temp_api.wait(), 3),
                            "cli_ready_seconds": round(waited_from, 3)})
        csrf_off = lease is not None and lease.server is not None and lease.server.csrf is False
        with _run_settings(url, csrf_off), client_context():
            summary = release_flow()(**kwargs)
    if temp_api is not None:
        startup["api_server_peak_rss_mb"] = temp_api.current_peak_rss_mb()
    return summary, startup
