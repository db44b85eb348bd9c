"""``sdc server start|stop|status`` (the local Prefect server `sdc release` reuses) and
``sdc schedule CONFIG...`` (serve the configs' cron schedules on a Prefect server)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sdc.cli.common import EXIT_FAILURE, console, err_console, friendly_errors
from sdc.cli.ranges import in_range

if TYPE_CHECKING:  # flows.server imports Prefect's settings: only when a command runs
    from flows.server import Verdict


def schedule(
    configs: Annotated[list[Path], typer.Argument(help="Release configs; those with a "
                                                  "schedule: are served.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Scheduled runs replace the existing "
                                        "release (otherwise a run fails if it exists).")] = False,
) -> None:
    """Serve the configs' cron schedules as Prefect deployments (needs PREFECT_API_URL)."""
    with friendly_errors():
        from flows.schedule import build_deployments, collect_schedules, require_server

        url = require_server()
        jobs, skipped = collect_schedules(configs)
        for path, why in skipped:
            console.print(f"skipped {path}: {why}", style="yellow", markup=False)
        for j in jobs:
            console.print(f"serving release/{j.name}: cron {j.cron!r} ({j.timezone}) "
                          f"config {j.config_path}", markup=False)
        console.print(f"Prefect API: {url}. Stop with Ctrl-C (schedules are paused on exit).",
                      markup=False)
        deployments = build_deployments(jobs, force=force)
        import logging

        from flows.schedule import serve_deployments, watch_server

        def warn(text: str) -> None:
            err_console.print(f"warning: {text}", style="yellow", markup=False)

        # a server that goes away: one clear line (and one when it is back) instead of
        # Prefect's websocket traceback followed by silence
        logging.getLogger("prefect.FlowRunCancellingObserver").setLevel(logging.ERROR)
        watch_server(url, warn, interval=float(os.environ.get("SDC_SERVER_WATCH_SECONDS", "10")))
        serve_deployments(deployments, url, warn)


server_app = typer.Typer(help="The local Prefect server that `sdc release` reuses (start-up in "
                         "well under a second instead of a temporary API per run).",
                         no_args_is_help=True, add_completion=False)


@server_app.command("start")
def server_start(
    port: Annotated[int | None, typer.Option(
        help="Port on 127.0.0.1 (1-65535; default 4200).", show_default=False,
        callback=in_range(1, 65535, integer=True, what="a TCP port"))] = None,
    idle_minutes: Annotated[float | None, typer.Option(
        "--idle-minutes", help="Stop after this many minutes without a run or a request "
        "(0.1-10080; default: run until `sdc server stop`).", show_default=False,
        callback=in_range(0.1, 10080, what="minutes"))] = None,
) -> None:
    """Start the local Prefect server on 127.0.0.1 in the background (until `sdc server stop`).

    A server sdc started that runs already (also one a release started) is kept, and runs
    from now on until `sdc server stop` (or --idle-minutes)."""
    with friendly_errors():
        from flows.server import start_server

        with console.status("starting the Prefect server"):
            srv, started = start_server(port=port, idle_minutes=idle_minutes)
        until = ("until `sdc server stop`" if idle_minutes is None else
                 f"until {idle_minutes:g} minutes without a run, or `sdc server stop`")
        console.print(f"Prefect server {'started' if started else 'already running'}: "
                      f"{srv.url} (pid {srv.pid}, log {srv.log}); it runs {until}. "
                      "`sdc release` uses it while PREFECT_API_URL is unset; the UI is at "
                      f"{srv.root}.", markup=False)


def _stale(v: Verdict) -> str:
    return (f"no server was running: {v.detail}; nothing was signalled and the stale "
            "state file was removed" if v.state in ("dead", "foreign") and v.server is not None
            else f"no server was running ({v.detail})" if v.detail else "no server was running")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the server sdc started (`sdc server start`, or the one `sdc release` reuses).

    Only the process sdc started is signalled (same pid and start time, see
    docs/OPERATIONS.md). Exit 0 when it was stopped or none was running (a stale state file
    naming a dead process or another program is reported, removed, and nothing signalled);
    2 if the server would not exit."""
    with friendly_errors():
        from flows.server import stop_server

        v = stop_server()
        if v.state == "ours" and v.server is not None:
            console.print(f"stopped the Prefect server {v.server.url} (pid {v.server.pid})",
                          markup=False)
        else:
            console.print(_stale(v), markup=False)


@server_app.command("status")
def server_status() -> None:
    """Is the server sdc started running and answering (exit 0), or not (exit 1)?"""
    with friendly_errors():
        from flows.server import server_status as status

        v, ok = status()
        if v.state != "ours" or v.server is None:
            console.print(_stale(v).replace("the stale state file was removed",
                                            "`sdc server stop` removes the stale state file"),
                          markup=False)
            raise typer.Exit(EXIT_FAILURE)
        srv = v.server
        until = ("until `sdc server stop`" if srv.idle_minutes is None else
                 f"stops after {srv.idle_minutes:g} minutes without a run")
        console.print(f"{srv.url} (pid {srv.pid}, {until}): "
                      f"{'answers' if ok else 'does NOT answer'}", markup=False)
        if not ok:
            raise typer.Exit(EXIT_FAILURE)
