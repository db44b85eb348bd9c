"""``sdc``: the command line agency staff use to run release jobs.

Commands (``sdc COMMAND --help`` for each)::

    sdc init DATA --keys a,b,c     draft a commented config from a data file (observed domains)
    sdc release CONFIG [--force] [--timings]   run the release flow (embedded Prefect)
    sdc plan CONFIG                what a release would do; writes nothing
    sdc design CONFIG [-o NEW]     search recodings for the least-changed certified release
    sdc validate CONFIG [--engine E]   check the config and the input only
    sdc audit RELEASE_DIR          re-verify a published release (exit 1 on any failure)
    sdc approve|reject DIR --as N  publish or discard a release staged for review (--review)
    sdc report RELEASE_DIR         re-render internal/report.html from the JSON reports
    sdc schedule CONFIG...         serve the configs' cron schedules (needs a Prefect server)
    sdc server start|stop|status   a local Prefect server that `sdc release` reuses
    sdc sample [--out DIR]         regenerate data_samples/census_sample.csv
    sdc rr ...                     randomized-response survey designs

``--json`` on release, plan, validate, audit, approve and reject prints one JSON document on stdout, errors
included (schemas: docs/cli_json/, sdc.cli.json_output).

Exit codes: 0 success; 2 bad config, bad input, refused overwrite or a missing file
(something the user fixes); 1 failed audit or any other failure. Errors are printed as one
readable paragraph; ``sdc --debug ...`` shows the traceback and Prefect's own logs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sdc.cli.ranges import in_range, range_text

app = typer.Typer(
    name="sdc",
    help="Publish public-use microdata with identification risk <= xi (NZY unbiased PRAM).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)
_state: dict[str, Any] = {"debug": False}

# exit codes
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: the largest --limit (rows shown) and --budget (seconds: one week) the CLI accepts
MAX_LIMIT, MAX_BUDGET = 10**9, 7 * 24 * 3600.0


# ---------------------------------------------------------------------------------------------
# errors: one readable paragraph, never a bare traceback (unless --debug)
# ---------------------------------------------------------------------------------------------
def _error_types() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(errors the user fixes -> exit 2, known failures -> exit 1). Imported lazily so that
    ``sdc --help`` stays fast and a missing optional module cannot break error reporting."""
    import sdc

    user: list[type[BaseException]] = [sdc.ConfigError, sdc.InputError, sdc.SmallBlockError,
                                       FileNotFoundError, PermissionError, IsADirectoryError,
                                       NotADirectoryError, FileExistsError]
    from flows.run import PrefectServerLostError, PrefectUnreachableError

    user.extend([PrefectUnreachableError, PrefectServerLostError])
    known: list[type[BaseException]] = [sdc.CertificationError]
    for module, name, group in (("sdc.publish.folder", "ReleaseExistsError", user),
                                ("sdc.publish.folder", "ReleaseFolderError", user),
                                ("flows.schedule", "ScheduleError", user),
                                ("flows.server", "ServerError", user),
                                ("sdc.audit.verify", "AuditError", known)):
        try:
            group.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):  # pragma: no cover - module not installed
            pass
    return tuple(user), tuple(known)


def _describe(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-paragraph message) for an exception."""
    user, known = _error_types()
    if isinstance(exc, user):
        if isinstance(exc, OSError) and exc.filename and exc.strerror:
            return EXIT_USAGE, f"{exc.strerror}: {exc.filename}"
        return EXIT_USAGE, str(exc)
    if isinstance(exc, known):
        return EXIT_FAILURE, str(exc)
    return EXIT_FAILURE, (f"{type(exc).__name__}: {exc}. This was not expected; rerun with "
                          "`sdc --debug ...` for the full traceback and report it if it persists")


@contextmanager
def _friendly_errors(json_for: str | None = None) -> Iterator[None]:
    """Errors as one readable paragraph on stderr, or (``json_for`` = the command, under
    ``--json``) as one JSON error document on stdout; the exit code is the same."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        err_console.print("interrupted", style="yellow")
        raise typer.Exit(130) from None
    except Exception as exc:
        if _state["debug"]:
            raise
        code, msg = _describe(exc)
        if json_for is not None:
            from sdc.cli.json_output import error_document, print_document

            print_document(error_document(json_for, code, exc, msg))
            raise typer.Exit(code) from None
        err_console.print("error: ", style="bold red", end="")
        err_console.print(msg, markup=False, soft_wrap=True)  # keep tables in messages intact
        from flows.run import PrefectServerLostError

        if isinstance(exc, PrefectServerLostError) and sys.stderr is sys.__stderr__:
            # at exit Prefect's services would retry sending the run's queued logs and
            # events to the dead server for minutes (measured: 3-5 min); nothing they hold
            # matters any more, so leave now (not inside a test's CliRunner: streams swapped)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        raise typer.Exit(code) from None


#: the width of tables when stdout is not a terminal (a log file, a pipe): wide enough that no
#: table is wrapped or folded (rich's default there is 80 columns)
PLAIN_WIDTH = 4000


def _plain_when_piped() -> None:
    """Not on a terminal and no COLUMNS of the user's: print tables unwrapped, one row per
    line, so the logs of scheduled runs and `sdc plan | less -S` stay readable."""
    if os.environ.get("COLUMNS"):
        return
    for c in (console, err_console):
        c.width = c.width if c.is_terminal else PLAIN_WIDTH


def _quiet_prefect() -> None:
    """Keep Prefect's console logging (INFO lines, telemetry, task tracebacks) out of the
    user's way; set before Prefect is imported. Logs still reach the Prefect API (UI).
    ``--debug`` and any value the user sets themselves win."""
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and Prefect's logs.")]
    = False,
) -> None:
    """Publish public-use microdata with identification risk <= xi (NZY unbiased PRAM)."""
    _state["debug"] = debug
    _plain_when_piped()
    if "prefect" in sys.modules:
        return  # Prefect read its settings at import (e.g. under tests): env changes are moot
    # no telemetry calls from an agency machine (they also fail noisily without internet):
    # the server's, and the Prefect SDK's own (in a terminal it records "milestones")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    if not debug and ctx.invoked_subcommand != "schedule":
        _quiet_prefect()


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _fmt_int(v: Any) -> str:
    return f"{int(v):,}"


def _kv_table(rows: list[tuple[str, str]], title: str | None = None) -> Table:
    t = Table(show_header=False, title=title, title_justify="left", box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    for k, v in rows:
        t.add_row(Text(k), Text(v))  # user data: never rich markup
    return t


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------
ConfigArg = Annotated[Path, typer.Argument(help="The release job's YAML config.",
                                           show_default=False)]
ReleaseDirArg = Annotated[Path, typer.Argument(help="A release folder (the config's output.dir).",
                                               show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout "
                                       "(errors too; schemas in docs/cli_json/).",
                                       is_eager=True)]  # known to the range checks


@app.command()
def release(
    config: ConfigArg,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing release (the old "
                                        "one stays until the new one is complete).")] = False,
    new_series: Annotated[bool, typer.Option(
        "--new-series", help="Start a new seed for an output pattern that already has releases "
        "under another seed. A new seed is an independent randomization: records released "
        "before become linkable and their true key values leak.")] = False,
    discard_extra_files: Annotated[bool, typer.Option(
        "--discard-extra-files", help="With --force: also delete files staff put into the "
        "release folder (an approval, a signature). Without it --force refuses and lists "
        "them.")] = False,
    as_json: JsonOpt = False,
    timings: Annotated[bool, typer.Option("--timings", help="Also print the seconds of every "
                                          "step and of Prefect's start-up, as one JSON line "
                                          "starting with 'timings ' (not with --json).")] = False,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="pandas (in memory, default) | streaming (one machine, out of core) | "
        "dask (LocalCluster, or engine.scheduler of the config); overrides the config's "
        "engine:.", show_default=False)] = None,
    review: Annotated[bool, typer.Option(
        "--review", help="Stage the release (owner-only <release>.staged) for review instead "
        "of publishing it; `sdc approve` publishes it (as the config's review: does).")]
    = False,
    wait_for_review: Annotated[bool, typer.Option(
        "--wait-for-review", help="With a review (--review or the config's review:): wait "
        "until `sdc approve` or `sdc reject` (another terminal) decides; exit 0 when approved "
        "and published, 2 when rejected. Ctrl-C stops waiting and leaves the release "
        "staged.")] = False,
    no_reuse: Annotated[bool, typer.Option(
        "--no-reuse", help="Start Prefect's temporary API for this run only, instead of "
        "starting a local server that later runs reuse (it stops after "
        "SDC_SERVER_IDLE_MINUTES, default 15, without a run; docs/OPERATIONS.md). A server "
        "that runs already (`sdc server start`) is still used.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="List every small-block merge (partition sets joined) in the "
        "summary; without it the summary counts them and names the largest (the full list "
        "is in the report).")] = False,
) -> None:
    """Run the release flow for CONFIG and publish the release folder."""
    import time

    t0 = time.perf_counter()
    from datetime import UTC, datetime

    started = datetime.now(UTC).isoformat(timespec="seconds")   # --wait-for-review
    with _friendly_errors("release" if as_json else None):
        # everything that can be refused is refused here, at once and in one message, before
        # Prefect is imported or its server started (the flow checks them again)
        from sdc.release.preflight import preflight

        loaded = preflight(config, force=force, new_series=new_series, engine=engine,
                           discard_extra_files=discard_extra_files).config
        preflight_seconds = time.perf_counter() - t0
        from flows.run import run_release

        quiet = nullcontext() if as_json else None  # stdout holds the JSON document only
        with quiet or console.status(f"release {escape(str(config))}: starting") as status:
            def show(step: str) -> None:
                status.update(f"release {escape(str(config))}: {step}")

            summary, startup = run_release(
                config, loaded, force=force, new_series=new_series, engine=engine,
                review=review or wait_for_review, discard_extra_files=discard_extra_files,
                reuse=not no_reuse, progress=None if as_json else show, t0=t0)
        if wait_for_review:  # the run is over: wait on the staged folder (any server or none)
            _await_review(summary, as_json, started)
        total = time.perf_counter() - t0
        summary["total_seconds"] = round(total, 3)
        if as_json:
            from sdc.cli.json_output import print_document, release_document

            print_document(release_document({**summary, "config_path": str(config)}))
            if (summary.get("review") or {}).get("status") == "rejected":
                raise typer.Exit(EXIT_USAGE)
            return
        _print_release_summary({**summary, "config_path": str(config)}, verbose=verbose)
        if timings:
            import json

            cpu = os.times()
            out = {"total_seconds": round(total, 3),
                   "cpu_seconds": round(cpu.user + cpu.system, 3), "preflight_seconds":
                   round(preflight_seconds, 3), "job_seconds": summary.get("seconds"),
                   "prefect_seconds": round(total - (summary.get("seconds") or 0.0), 3),
                   "tasks": summary.get("timings", {})}
            out.update(startup)
            console.print("timings " + json.dumps(out), markup=False, soft_wrap=True,
                          highlight=False)


def _await_review(summary: dict, as_json: bool, since: str) -> None:
    """``--wait-for-review``: after the run, wait until the staged release is approved
    or rejected by `sdc approve` / `sdc reject` (any process) and record the outcome in
    ``summary["review"]``. Ctrl-C stops waiting (exit 130); the release stays staged."""
    rev = summary.get("review")
    if rev is None or rev.get("status") != "pending":
        return
    from sdc.publish.review import await_decision

    staged = str(rev["staged_dir"])
    msg = (f"release staged for review in {escape(staged)}: waiting for `sdc approve "
           f"{escape(staged)} --as NAME` or `sdc reject ...` (Ctrl-C stops waiting; the release "
           "stays staged)")
    try:
        with nullcontext() if as_json else console.status(msg):
            outcome = await_decision(Path(rev["release_dir"]), since=since)
    except KeyboardInterrupt:
        err_console.print(f"stopped waiting: the release stays staged in {staged} for "
                          "`sdc approve` / `sdc reject`", markup=False)
        raise typer.Exit(130) from None
    summary["review"] = {**rev, **outcome}
    if outcome["status"] == "approved":
        summary["release_dir"] = outcome["release_dir"]


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _print_release_summary(s: dict[str, Any], verbose: bool = False) -> None:
    from sdc.config.model import certificate_text

    rows = [
        ("records", _fmt_int(s["n"])),
        ("partition sets", _fmt_int(s["n_partition_sets"])),
        ("PRBs", _fmt_int(s["n_prbs"])),
        (f"theta ({s['theta_mode']})", f"{s['theta']:.4f}   kmin = {s['kmin']}"),
        ("certificate", f"{certificate_text(s['certificate'], s['xi'])} xi = {s['xi']}"),
        ("records changed", f"{_fmt_int(s['records_changed'])} "
                            f"(expected {s['expected_changed']:,.1f})"),
    ]
    hh = s.get("households")
    if hh:
        how = ("certified" if hh["composition_mode"] == "protect" else
               "measured, riskiest class")
        rows.append(("households", f"{_fmt_int(hh['n'])} ({_fmt_int(hh['changed'])} changed), "
                                   f"{hh['prbs']} household PRBs; composition intruder "
                                   f"{how} {hh['composition']:.4f}"))
    if s["merges"] and verbose:
        rows.append(("merges", "\n".join(s["merges"])))
    elif s["merges"]:
        big = s.get("largest_merge")
        largest = ("" if not big else
                   f"; largest: {big['partition_sets']} partition sets"
                   + (f" ({big['stage']} stage)" if big.get("stage") else "")
                   + f": {_clip(big['partition_key'], 100)}")
        rows.append(("merges", f"{len(s['merges'])}{largest} (the full list: --verbose, "
                               "and the report's section 2)"))
    if s.get("seconds") is not None:
        total = s.get("total_seconds")
        rows.append(("time", f"{s['seconds']:.1f} s job" if total is None else
                     f"{total:.1f} s = {s['seconds']:.1f} s job + "
                     f"{max(total - s['seconds'], 0.0):.1f} s Prefect start-up and bookkeeping"))
    console.print(_kv_table(rows, title=f"Release {s['name']}"))
    from sdc.cli.json_output import release_warnings

    for w in release_warnings(s, str(s.get("config_path") or "CONFIG")):  # = --json's list
        console.print(f"warning: {w}", style="yellow", markup=False)
    if s.get("seed_created"):
        console.print(f"created the seed file {s.get('seed_file')} (mode 0600): back it up, "
                      "it is what makes a rerun byte-identical", style="yellow", markup=False)
    rev = s.get("review")
    if rev is not None and rev.get("status") == "approved":
        console.print(f"[green]approved[/green] by {escape(str(rev.get('name')))}; "
                      f"[green]Release written to[/green] {escape(str(rev['release_dir']))}")
        return
    if rev is not None and rev.get("status") == "rejected":
        by = f" by {rev['name']}" if rev.get("name") else " (sdc reject)"
        err_console.print(f"release rejected{escape(by)}: the staged release was deleted and "
                          "nothing was published", style="bold red")
        raise typer.Exit(EXIT_USAGE)
    if rev is not None:
        who = ", ".join(rev["approvers"]) or "a named reviewer"
        console.print(f"[yellow]Release staged for review[/yellow] in "
                      f"{escape(str(rev['staged_dir']))} (owner-only; nothing is published). "
                      f"{escape(who)} approves with: sdc approve {escape(str(rev['staged_dir']))}"
                      " --as NAME [--comment TEXT]   (or: sdc reject ... --as NAME)")
        return
    console.print(f"[green]Release written to[/green] {escape(str(s['release_dir']))}")


@app.command()
def plan(
    config: ConfigArg,
    limit: Annotated[int, typer.Option(help="Show at most this many partition sets / PRBs "
                                       f"({range_text(0, MAX_LIMIT, integer=True)}).",
                                       callback=in_range(0, MAX_LIMIT, integer=True))]
    = 60,
    as_json: JsonOpt = False,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="pandas | streaming | dask: how the records are read and counted "
        "(overrides the config's engine:).", show_default=False)] = None,
) -> None:
    """Show what a release would do (partition sets, PRBs, theta, certificate); write nothing."""
    with _friendly_errors("plan" if as_json else None):
        from sdc.release.job import plan_job

        if as_json:  # every partition set and PRB, no --limit
            from sdc.cli.json_output import plan_document, print_document

            print_document(plan_document(plan_job(config, engine=engine), str(config)))
            return

        with console.status(f"planning {escape(str(config))}"):
            p = plan_job(config, engine=engine)
        ps = Table(title=f"Partition sets ({p.n_partition_sets})", title_justify="left")
        for col in ("partition set", "records", "cells", "sensitive cells", "sensitive records",
                    "PRB"):
            ps.add_column(col, justify="left" if col == "partition set" else "right")
        for r in p.partition_sets.head(limit).itertuples(index=False):
            ps.add_row(Text(str(r.partition_key)), _fmt_int(r.n_records), _fmt_int(r.n_cells),
                       _fmt_int(r.n_sensitive_cells), _fmt_int(r.n_sensitive_records),
                       "-" if int(r.prb) < 0 else str(int(r.prb)))
        console.print(ps)
        if p.n_partition_sets > limit:
            console.print(f"... and {p.n_partition_sets - limit} more (--limit)")
        bt = Table(title=f"Post-randomization blocks ({p.n_prbs})", title_justify="left")
        for col in ("PRB", "k", "records", "profile t:cells", "theta", "max risk", "action",
                    "exp. changed", "partition set(s)"):
            bt.add_column(col, justify="left" if col in ("partition set(s)", "profile t:cells",
                                                         "action") else "right",
                          overflow="fold")
        for r in p.blocks.head(limit).itertuples(index=False):
            bt.add_row(str(r.prb), _fmt_int(r.k), _fmt_int(r.n_records), str(r.profile),
                       f"{r.theta:.4f}", f"{r.max_risk:.4f}", str(r.action),
                       f"{r.expected_changed:.1f}", Text(str(r.partition_key)))
        console.print(bt)
        if p.n_prbs > limit:
            console.print(f"... and {p.n_prbs - limit} more (--limit)")
        small = p.small_block_actions
        if len(small):
            st = Table(title=f"Small-block actions ({len(small)} PRBs; kmin = {p.kmin}, policy "
                             f"{p.small_blocks})", title_justify="left")
            for col in ("PRB", "k", "theta", "max risk", "action", "partition set(s)"):
                st.add_column(col, overflow="fold",
                              justify="left" if col in ("action", "partition set(s)") else "right")
            for r in small.itertuples(index=False):
                st.add_row(str(r.prb), _fmt_int(r.k), f"{r.theta:.4f}", f"{r.max_risk:.4f}",
                           str(r.action), Text(str(r.partition_key)))
            console.print(st)
        actions = (", ".join(f"{a}: {n}" for a, n in small["action"].value_counts().items())
                   if len(small) else "none (every PRB has k >= kmin and uses the theorem's "
                   "theta)")
        from sdc.config.model import certificate_text

        rows = [
            ("config", str(p.config_path)),
            ("records", _fmt_int(p.n_records)),
            ("non-empty cells", f"{_fmt_int(p.n_cells)} ({_fmt_int(p.n_sensitive_cells)} "
                                f"sensitive, {_fmt_int(p.n_sensitive_records)} records)"),
            ("partition sets / PRBs", f"{p.n_partition_sets} / {p.n_prbs}"),
            ("xi", f"{p.xi}"),
            (f"theta ({p.theta_mode})", f"{p.theta:.4f}"),
            ("kmin", str(p.kmin)),
            (f"small blocks ({p.small_blocks})", actions),
            ("expected changed records", f"{p.expected_changed:,.1f} (sum of theta * k)"),
            ("certificate", f"{certificate_text(p.certificate, p.xi)} xi"),
            ("release folder", f"{p.output_dir}" + (" (exists: `sdc release` needs --force)"
                                                    if p.release_exists else "")),
        ]
        if p.changed is not None:
            rows.insert(9, ("changed records with the seed", _fmt_int(p.changed)))
        for m in p.merges:
            rows.append(("merge", m))
        console.print(_kv_table(rows, title=f"Plan for {p.name} (nothing written)"))
        for n in p.notes:
            console.print(f"note: {n}", style="yellow", markup=False)
        from sdc.cli.json_output import plan_warnings

        for w in plan_warnings(p, str(config)):  # = --json's list
            console.print(f"warning: {w}", style="yellow", markup=False)


@app.command()
def design(
    config: ConfigArg,
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Write the recommended design as a release config here.",
        show_default=False)] = None,
    budget: Annotated[float, typer.Option(
        "--budget", help="Seconds for planning lattice nodes (the rest stay unevaluated); "
        f"{range_text(0, MAX_BUDGET, lo_open=True)}.",
        callback=in_range(0, MAX_BUDGET, lo_open=True, what="seconds of search"))]
    = 60.0,
    keep: Annotated[float, typer.Option(
        "--keep", help="Share of its own entropy every key of the recommended design keeps at "
        "least (the per-key floor); in (0, 1].",
        callback=in_range(0, 1, lo_open=True, what="a share of the entropy"))] = 0.7,
    target: Annotated[float, typer.Option(
        "--target", help="Share of records changed the recommendation aims at (or less); in "
        "(0, 1).", callback=in_range(0, 1, lo_open=True, hi_open=True,
                                     what="a share of the records"))]
    = 0.08,
    limit: Annotated[int, typer.Option(help="Show at most this many frontier points "
                                       f"({range_text(0, MAX_LIMIT, integer=True)}).",
                                       callback=in_range(0, MAX_LIMIT, integer=True))] = 25,
    as_json: JsonOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing -o file (never "
                                        "the job's own config, input, seed or hierarchy "
                                        "files).")] = False,
) -> None:
    """Find recodings of the keys that change fewer records at the same xi.

    Searches the lattice of recodings for the certified release that changes the fewest records;
    prints the Pareto frontier (records changed, entropy lost, a bound on the key-table TVD) and
    the recommended design (docs/DESIGN.md)."""
    with _friendly_errors("design" if as_json else None):
        from sdc.authoring.design import design_document, run_design, write_node_config
        from sdc.io.guard import job_files, refuse_overwrite

        if out is not None:  # before the search: refused at once, not after --budget seconds
            refuse_overwrite(out, force=force, option="-o", protected=job_files(config))
        if as_json:
            d = run_design(config, budget=budget, keep=keep, target=target)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            with Progress("[progress.description]{task.description}", BarColumn(),
                          MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                          transient=True) as bar:
                task = bar.add_task("design: lattice nodes", total=None)
                d = run_design(config, budget=budget, keep=keep, target=target,
                               progress=lambda done, total: bar.update(task, completed=done,
                                                                        total=total))
        doc = design_document(d)
        written = None
        if out is not None and d.result.recommended is not None:
            refuse_overwrite(out, force=force, option="-o", protected=job_files(config))
            written = write_node_config(d, d.result.recommended, out)
            doc["written"] = str(written)
        if as_json:
            from sdc.cli.json_output import print_document

            print_document({"command": "design", "ok": True, **doc})
            return
        _print_design(doc, limit)
        if out is not None and written is None:
            err_console.print("no design keeps the requested entropy: nothing written",
                              style="yellow")
            raise typer.Exit(EXIT_USAGE)


def _pct(x: Any) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def _print_household_design(doc: dict[str, Any], limit: int) -> None:
    """``sdc design`` of a household file (sdc.authoring.household_design)."""
    c = doc["current"]
    console.print(_kv_table([
        ("config", doc["config"]), ("records", _fmt_int(doc["records"])), ("xi", str(doc["xi"])),
        ("the config as written", f"{c['status']}" + (f": {c['note']}" if c["note"] else "")),
        ("candidates", f"{doc['nodes']['total']} (risk.composition: protect, person keys "
                       f"recoded; {doc['nodes']['certified']} certified)"),
    ], title="Design search (household file: both stages, the composition intruder)"))
    t = Table(title="Certified household designs (* recommended)", title_justify="left")
    for col in ("", "records changed", "households changed", "composition cert.",
                "person intruder", "recoding"):
        t.add_column(col, justify="left" if col in ("", "recoding") else "right",
                     overflow="fold")
    rec = doc["recommended"]["node"] if doc["recommended"] else None
    for p in doc["frontier"][:limit]:
        recoding = "; ".join(f"{k}: {v['recode']}" for k, v in p["recoding"].items()) or "none"
        t.add_row("*" if p["node"] == rec else "", _pct(p["share_changed"]),
                  _fmt_int(p["households_changed"]), f"{p['certificate']:.4f}",
                  f"{p['composition'].get('person_max_cell_estimate', 0):.4f}", Text(recoding))
    console.print(t)
    if rec is None:
        console.print("no household design is certified at this xi: coarser household keys "
                      "or a larger xi", style="yellow")
        return
    r = doc["recommended"]
    console.print(f"recommended: risk.composition: protect, {_pct(r['share_changed'])} of "
                  f"records changed, composition certificate {r['certificate']:.4f} <= xi",
                  markup=False)
    if doc.get("written"):
        console.print(f"wrote {doc['written']}: run `sdc release {doc['written']}`", markup=False)


def _print_design(doc: dict[str, Any], limit: int) -> None:
    if doc.get("household_file"):
        _print_household_design(doc, limit)
        return
    nodes = doc["nodes"]
    console.print(_kv_table([
        ("config", doc["config"]),
        ("records", _fmt_int(doc["records"])),
        ("xi", str(doc["xi"])),
        ("entropy of the declared key table", f"{doc['entropy_declared']:.3f} bits"),
        ("lattice nodes", f"{nodes['total']} ({nodes['certified']} certified, {nodes['pruned']} "
                          f"pruned below the entropy floor, {nodes['refused']} refused, "
                          f"{nodes['not_evaluated']} not evaluated)"),
        ("search", f"{doc['seconds']:.1f} s" + ("" if doc["complete"] else
                                                " (time budget reached: --budget)")),
    ], title="Design search"))
    t = Table(title=f"Pareto frontier ({len(doc['frontier'])} points; * recommended, "
                    "= the config as it is)", title_justify="left")
    for col in ("", "changed", "entropy kept", "lowest key", "keys moved", "displacement",
                "TVD bound", "recoding", "partition"):
        t.add_column(col, justify="left" if col in ("", "recoding", "partition") else "right",
                     overflow="fold")
    rec = doc["recommended"]["node"] if doc["recommended"] else None
    cur = doc["current"]["node"] if doc["current"] else None
    for p in doc["frontier"][:limit]:
        mark = ("*" if p["node"] == rec else "") + ("=" if p["node"] == cur else "")
        recoding = "; ".join(f"{k}: {v['name']}" for k, v in p["recoding"].items()) or "none"
        t.add_row(mark, _pct(p["share_changed"]), _pct(p["entropy_kept"]),
                  _pct(p["min_key_entropy_kept"]),
                  "-" if p["keys_changed_when_moved"] is None
                  else f"{p['keys_changed_when_moved']:.2f}", _disp(p), f"{p['tvd_bound']:.4f}",
                  Text(recoding), p["partition_variant"])
    console.print(t)
    if len(doc["frontier"]) > limit:
        console.print(f"... and {len(doc['frontier']) - limit} more (--limit)")
    c = doc["current"]
    if c is not None:
        console.print(f"the config as it is: {_pct(c['share_changed'])} of records changed "
                      f"(expected), certificate {c['certificate']:.4f}", markup=False)
    if rec is None:
        console.print(f"no evaluated design keeps {_pct(doc['keep'])} of every key's entropy",
                      style="yellow")
        return
    r = doc["recommended"]
    console.print(f"recommended ({doc['verdict']}): {_pct(r['share_changed'])} changed, "
                  f"{_pct(r['entropy_kept'])} of the key table's entropy kept, TVD bound "
                  f"{r['tvd_bound']:.4f}, certificate {r['certificate']:.4f} <= xi",
                  markup=False, soft_wrap=True)
    for k, v in r["key_entropy_kept"].items():
        rc = r["recoding"].get(k)
        what = (f"recode: {v_rule(rc['recode'])} ({rc['name']}, {rc['released_values']} "
                "released values)" if rc else "declared values")
        d = r["displacement"].get(k)
        tvd = r["key_tvd_uniform_spread"].get(k)
        if rc and tvd:
            what += f"; TVD of its distribution spread uniformly within classes {tvd:.3f}"
        console.print(f"  {k}: keeps {_pct(v)} of its own entropy; {what}"
                      + (f"; a moved record's {k} moves by {d:.2f} on average"
                         if d is not None else ""), markup=False, soft_wrap=True)
    console.print(f"  partition ({r['partition_variant']}): {r['partition'] or 'none'}",
                  markup=False, soft_wrap=True)
    if r.get("keys_changed_when_moved") is not None:
        console.print(f"  a moved record changes {r['keys_changed_when_moved']:.2f} keys on "
                      "average", markup=False)
    for g in doc.get("given_up") or []:
        console.print(f"not reached: {g}", style="yellow", markup=False, soft_wrap=True)
    if doc.get("written"):
        console.print(f"wrote {doc['written']}: run `sdc release {doc['written']}`", markup=False)


def _disp(p: dict[str, Any]) -> str:
    d = p.get("displacement") or {}
    return ", ".join(f"{k} {v:.1f}" for k, v in d.items()) or "-"


def v_rule(rule: Any) -> str:
    """A recoding rule on one line, as YAML flow style shows it."""
    if isinstance(rule, dict):
        return "{" + ", ".join(f"{k}: {v_rule(v)}" for k, v in rule.items()) + "}"
    if isinstance(rule, list):
        return "[" + ", ".join(v_rule(v) for v in rule) + "]"
    return str(rule)


@app.command()
def validate(
    config: ConfigArg,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="pandas | streaming | dask: how the records are read and checked "
        "(overrides the config's engine:).", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the config and its input (schema, domains, ids, weights) without releasing."""
    with _friendly_errors("validate" if as_json else None):
        from sdc.release.job import validate_release_input

        if as_json:
            from sdc.cli.json_output import print_document, validate_document

            print_document(validate_document(validate_release_input(config, engine=engine)))
            return

        with console.status(f"validating {escape(str(config))}"):
            v = validate_release_input(config, engine=engine)
        console.print(_kv_table([
            ("config", str(v.config_path)),
            ("input", f"{v.input_path} (sha256 {v.input_sha256[:16]}...)"),
            ("records / columns", f"{_fmt_int(v.n_records)} / {v.n_columns}"),
            ("key variables", ", ".join(v.key_variables)),
            ("non-empty cells", f"{_fmt_int(v.n_cells)} ({_fmt_int(v.n_sensitive_cells)} "
                                "sensitive)"),
            ("partition sets", _fmt_int(v.n_partition_sets)),
        ], title=f"{v.name}: config and input are valid"))


@app.command()
def audit(
    release_dirs: Annotated[list[Path], typer.Argument(
        help="A release folder; with --series, the releases of a series in order.",
        show_default=False, metavar="RELEASE_DIR...")],
    series: Annotated[bool, typer.Option(
        "--series", help="Measure the risk of a release series from the releases' internal "
        "data: share of records in consecutive releases whose released key values changed, "
        "and the linking intruder's correct-match rate per (t_j, a) next to xi. Exit 1 when "
        "the rate with one matching record exceeds xi.")] = False,
    source: Annotated[Path | None, typer.Option(
        "--source", help="The input file (or folder of parts) at its new place, when it moved "
        "since the release; its SHA-256 must still match the recorded one.",
        show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-verify a release: source hash, partition sets, PRBs, certificate <= xi, file hashes.

    With --series DIR [DIR ...]: measure the risk of the series."""
    if series:
        _audit_series(release_dirs, as_json)
        return
    with _friendly_errors("audit" if as_json else None):
        from sdc.audit.verify import verify_release

        if len(release_dirs) != 1:
            raise sdc_user_error(f"sdc audit takes one release folder ({len(release_dirs)} "
                                 "given); to measure a series of releases add --series")
        release_dir = release_dirs[0]

        if not release_dir.is_dir():
            raise FileNotFoundError(f"release folder {str(release_dir)!r} does not exist")
        if as_json:
            from sdc.cli.json_output import audit_document, print_document

            doc = audit_document(verify_release(release_dir, source), release_dir)
            print_document(doc)
            if not doc["passed"]:
                raise typer.Exit(EXIT_FAILURE)
            return
        with console.status(f"auditing {escape(str(release_dir))}"):
            report = verify_release(release_dir, source)
        t = Table(title=escape(f"Audit of {release_dir}"), title_justify="left")
        t.add_column("check")
        t.add_column("result")
        t.add_column("detail")
        for c in report.checks:
            t.add_row(Text(c.name), "[green]pass[/green]" if c.ok else "[bold red]FAIL[/bold red]",
                      Text(str(c.detail)))
        console.print(t)
        failed = [c for c in report.checks if not c.ok]
        if failed or not report.ok:
            err_console.print(f"audit FAILED: {len(failed)} of {len(report.checks)} checks",
                              style="bold red")
            raise typer.Exit(EXIT_FAILURE)
        from sdc.publish.review import is_staged

        staged = (" (a release STAGED for review, not published: `sdc approve` publishes it)"
                  if is_staged(release_dir) else "")
        console.print(f"[green]audit passed[/green]: {len(report.checks)} checks{escape(staged)}")


def sdc_user_error(message: str) -> Exception:
    import sdc

    return sdc.InputError(message)


def _audit_series(release_dirs: list[Path], as_json: bool) -> None:
    """``sdc audit --series``: the measured series risk (sdc.series.risk)."""
    with _friendly_errors("audit" if as_json else None):
        from sdc.series.risk import series_risk_of_dirs

        for d in release_dirs:
            if not d.is_dir():
                raise FileNotFoundError(f"release folder {str(d)!r} does not exist")
        risk = series_risk_of_dirs(release_dirs)
        rate = risk.rate_a1("series_rate")
        ok = rate <= risk.xi
        if as_json:
            import json

            doc = {"command": "audit-series", "releases": [str(d) for d in release_dirs],
                   "passed": ok, **risk.to_dict()}
            print(json.dumps(doc, indent=2, default=float))
            if not ok:
                raise typer.Exit(EXIT_FAILURE)
            return
        t = Table(title="Records present in consecutive releases", title_justify="left")
        for c in ("release", "previous", "records in both", "released keys changed", "share"):
            t.add_column(c)
        for r in risk.changed.itertuples():
            t.add_row(Text(str(release_dirs[r.release])), Text(str(release_dirs[r.release - 1])),
                      f"{r.n_common:,}", f"{r.n_changed:,}", f"{r.share:.2%}")
        console.print(t)
        t = Table(title=f"Linking intruder over {risk.n_releases} releases (modal released "
                  f"cell) vs the last release alone; xi = {risk.xi}", title_justify="left")
        for c in ("t_j", "a", "targets", "series rate", "targets (last only)", "rate (last only)"):
            t.add_column(c)
        for r in risk.intruder.itertuples():
            t.add_row(str(r.t), str(r.a), f"{r.n_series:,}", f"{r.series_rate:.4f}",
                      f"{r.n_single:,}", f"{r.single_rate:.4f}")
        console.print(t)
        msg = (f"correct-match rate with one matching record: series {rate:.4f}, last release "
               f"alone {risk.rate_a1('single_rate'):.4f}, xi {risk.xi} (measured, not certified:"
               " see docs/SERIES.md)")
        if not ok:
            err_console.print("series risk ABOVE xi: " + msg, style="bold red")
            raise typer.Exit(EXIT_FAILURE)
        console.print("[green]series risk within xi[/green]: " + msg)


@app.command()
def report(
    release_dir: ReleaseDirArg,
    force: Annotated[bool, typer.Option("--force", help="Replace an internal/report.html that "
                                        "the release did not write (its SHA-256 differs from "
                                        "audit.json's).")] = False,
) -> None:
    """Re-render internal/report.html of a release from its risk and utility JSON."""
    with _friendly_errors():
        from sdc.reports.build import render_release_report

        if not release_dir.is_dir():
            raise FileNotFoundError(f"release folder {str(release_dir)!r} does not exist")
        _refuse_foreign_report(release_dir, force)
        with console.status(f"rendering the report of {escape(str(release_dir))}"):
            path = render_release_report(release_dir)
        console.print(f"[green]Report written to[/green] {escape(str(path))}")


def _refuse_foreign_report(release_dir: Path, force: bool) -> None:
    """``sdc report`` rewrites internal/report.html only when it is absent or the one the
    release wrote (its SHA-256 is audit.json's); anything else needs --force."""
    import json

    from sdc.io.guard import OverwriteError, refuse_overwrite
    from sdc.io.write import sha256_file

    html = release_dir / "internal" / "report.html"
    if not (html.exists() or html.is_symlink()):
        return
    try:
        audit = json.loads((release_dir / "internal" / "audit.json").read_text(encoding="utf-8"))
        recorded = (audit.get("internal_files") or {}).get("report.html")
        ours = (recorded is not None and html.is_file() and not html.is_symlink()
                and sha256_file(html) == recorded)
    except (OSError, ValueError, AttributeError):
        ours = False
    if ours:
        return
    try:
        refuse_overwrite(html, force=force, option="sdc report: the page")
    except OverwriteError as e:
        raise OverwriteError(f"{e} (it is not the page the release wrote: its SHA-256 differs "
                             "from internal/audit.json's)") from None


@app.command()
def schedule(
    configs: Annotated[list[Path], typer.Argument(help="Release configs; those with a "
                                                  "schedule: are served.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Scheduled runs replace the existing "
                                        "release (otherwise a run fails if it exists).")] = False,
) -> None:
    """Serve the configs' cron schedules as Prefect deployments (needs PREFECT_API_URL)."""
    with _friendly_errors():
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

        from prefect import serve

        from flows.schedule import watch_server

        # a server that goes away: one clear line (and one when it is back) instead of
        # Prefect's websocket traceback followed by silence
        logging.getLogger("prefect.FlowRunCancellingObserver").setLevel(logging.ERROR)
        watch_server(url, lambda text: err_console.print(f"warning: {text}", style="yellow",
                                                         markup=False),
                     interval=float(os.environ.get("SDC_SERVER_WATCH_SECONDS", "10")))
        serve(*deployments)


AsOpt = Annotated[str, typer.Option("--as", help="The reviewer's name (one of the config's "
                                    "review.approvers, if it lists any).", show_default=False)]
CommentOpt = Annotated[str | None, typer.Option("--comment", help="Recorded with the decision.",
                                                show_default=False)]


RunOrDirArg = Annotated[str, typer.Argument(
    help="A release folder (or its .staged folder), or the id of a flow run paused for review.",
    show_default=False, metavar="RUN|RELEASE_DIR")]


def _send_to_paused_run(target: str, decision: str, name: str, comment: str | None,
                        quiet: bool = False, discard_extra_files: bool = False) -> str | None:
    """When the staged release (or the run id given) belongs to a flow run paused for review
    on a reachable Prefect API, send it the decision (the run applies it), say so (unless
    ``quiet``) and return the run's id; None when there is no such run."""
    import json
    import uuid

    from sdc.publish.review import REVIEW_FILE, ReviewError, target_of

    run_id: str | None = None
    given_run = False
    if not Path(target).exists():
        try:
            run_id, given_run = str(uuid.UUID(target)), True
        except ValueError:
            run_id = None
    if run_id is None:
        review = target_of(Path(target))[1] / "internal" / REVIEW_FILE
        try:
            run_id = json.loads(review.read_text(encoding="utf-8")).get("flow_run_id")
        except (OSError, ValueError):
            run_id = None
    if run_id is None:
        return None
    from flows.run import prefect_api_configured, use_local_server

    use_local_server()
    if not prefect_api_configured():
        if given_run:
            raise ReviewError("a flow run id needs the Prefect server it runs on: set "
                              "PREFECT_API_URL (or start `sdc server start`)")
        return None
    from flows.review import paused_run_of, send_decision

    if not paused_run_of(run_id):
        if given_run:
            raise ReviewError(f"flow run {run_id} is not paused for review on the configured "
                              "Prefect server")
        return None
    send_decision(run_id, decision, name, comment, discard_extra_files=discard_extra_files)
    if not quiet:
        console.print(f"sent '{decision}' by {escape(name)} to the paused flow run {run_id}; "
                      "the run checks the decision and publishes or discards the release (see "
                      "its logs in the Prefect UI)")
    return run_id


def _decide(command: str, target: str, name: str, comment: str | None, as_json: bool,
            discard_extra_files: bool = False) -> None:
    """``sdc approve`` / ``sdc reject``: to the paused flow run when there is one, else on the
    staged folder; a JSON document on stdout under ``--json``."""
    decision = "approve" if command == "approve" else "reject"
    with _friendly_errors(command if as_json else None):
        run_id = _send_to_paused_run(target, decision, name, comment, quiet=as_json,
                                     discard_extra_files=discard_extra_files)
        d = None
        if run_id is None:
            from sdc.publish import review

            d = (review.approve(Path(target), name, comment,
                                discard_extra_files=discard_extra_files)
                 if command == "approve" else review.reject(Path(target), name, comment))
        if as_json:
            from sdc.cli.json_output import decision_document, print_document

            print_document(decision_document(command, d, name=name, comment=comment,
                                             flow_run_id=run_id))
            return
        if d is None:
            return
        if command == "approve":
            console.print(f"[green]approved[/green] by {escape(d.name)} at {d.at}; published "
                          f"{escape(str(d.release_dir))} (manifest SHA-256 "
                          f"{d.manifest_sha256})")
        else:
            console.print(f"rejected by {escape(d.name)} at {d.at}: deleted "
                          f"{escape(str(d.staged_dir))}; nothing was published", markup=True)


@app.command()
def approve(target: RunOrDirArg, name: AsOpt, comment: CommentOpt = None,
            as_json: JsonOpt = False,
            discard_extra_files: Annotated[bool, typer.Option(
                "--discard-extra-files",
                help="When the approval replaces an existing release: also delete files staff "
                     "put into it (an approval, a signature). Without it the approval refuses "
                     "and lists them.")] = False) -> None:
    """Publish a release staged for review (its folder, or the paused flow run's id).

    RELEASE_DIR or RELEASE_DIR.staged, or the paused flow run's id: the staged files are checked
    against what was staged, the approval recorded in audit.json."""
    _decide("approve", target, name, comment, as_json, discard_extra_files)


@app.command()
def reject(target: RunOrDirArg, name: AsOpt, comment: CommentOpt = None,
           as_json: JsonOpt = False) -> None:
    """Discard a release staged for review (its staged folder is deleted)."""
    _decide("reject", target, name, comment, as_json)


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
    with _friendly_errors():
        from flows.server import start_server

        with console.status("starting the Prefect server"):
            srv, started = start_server(port=port, idle_minutes=idle_minutes)
        until = ("until `sdc server stop`" if idle_minutes is None else
                 f"until {idle_minutes:g} minutes without a run, or `sdc server stop`")
        console.print(f"Prefect server {'started' if started else 'already running'}: "
                      f"{srv.url} (pid {srv.pid}, log {srv.log}); it runs {until}. "
                      "`sdc release` uses it while PREFECT_API_URL is unset; the UI is at "
                      f"{srv.root}.", markup=False)


def _stale(v: Any) -> str:
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
    with _friendly_errors():
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
    with _friendly_errors():
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


app.add_typer(server_app, name="server")


@app.command()
def sample(
    out: Annotated[Path, typer.Option("--out", help="Folder to write census_sample.csv into.")]
    = Path("data_samples"),
    force: Annotated[bool, typer.Option("--force", help="Replace a census_sample.csv there "
                                        "whose bytes differ from the sample's.")] = False,
) -> None:
    """Regenerate the census-like demo sample (byte-identical on every run)."""
    with _friendly_errors():
        from sdc.samples import write_census_sample

        with console.status(f"writing the census sample into {escape(str(out))}"):
            path = write_census_sample(out, force=force)
        console.print(f"[green]Sample written to[/green] {escape(str(path))}")


from sdc.cli.init import make_init_command  # noqa: E402 - after the main app's commands
from sdc.cli.rr import rr_app  # noqa: E402 - after the main app's commands

app.command("init")(make_init_command(_friendly_errors, console))

app.add_typer(rr_app, name="rr", help="Randomized-response survey designs.")


def main() -> None:
    """Console-script entry point (``sdc = "sdc.cli.main:main"``)."""
    app(prog_name="sdc")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
