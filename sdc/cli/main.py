"""``sdc``: the command line agency staff use to run release jobs.

Commands (``sdc COMMAND --help`` for each)::

    sdc init DATA --keys a,b,c     draft a commented config from a data file (observed domains)
    sdc release CONFIG [--force] [--timings]   run the release flow (embedded Prefect)
    sdc plan CONFIG                what a release would do; writes nothing
    sdc design CONFIG [-o NEW]     search recodings for the least-changed certified release
    sdc validate CONFIG [--executor E]   check the config and the input only
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

This module is the entry point (``sdc = "sdc.cli.main:main"``): the app, its root options and
the command table; each command group lives in its own module (``release_cmd``, ``plan_cmd``,
``design_cmd``, ``audit_cmd``, ``review_cmd``, ``server_cmd``, ``init``, ``rr``), the shared
console and error handling in ``sdc.cli.common``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from sdc.cli import (
    audit_cmd,
    correct_cmd,
    design_cmd,
    plan_cmd,
    release_cmd,
    review_cmd,
    server_cmd,
)
from sdc.cli.caught import catch_warnings
from sdc.cli.common import (
    console,
    err_console,
    friendly_errors,
    plain_when_piped,
    quiet_prefect,
    state,
)
from sdc.cli.init import make_init_command
from sdc.cli.rr import rr_app


class _Commands(TyperGroup):
    """The command table; under ``--json`` a usage error (a missing argument, an unknown
    option) is a JSON error document on stdout too, exit 2, like every other error of a
    ``--json`` command (it used to print nothing on stdout, only click's box on stderr)."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        if not standalone_mode or "--json" not in argv:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Exit as e:
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except typer.TyperException as e:  # click's usage errors (typer vendors click)
            from sdc.cli.json_output import SCHEMAS, error_document, print_document

            command = next((a for a in argv if not a.startswith("-")), "")
            if command not in SCHEMAS["error"]["properties"]["for"]["enum"]:
                e.show()                  # a command without --json: click's own message
                sys.exit(int(getattr(e, "exit_code", 2)))
            code = int(getattr(e, "exit_code", 2))
            print_document(error_document(command, code, e, e.format_message()))
            sys.exit(code)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_Commands,
    name="sdc",
    help="Publish public-use microdata with identification risk <= xi (NZY unbiased PRAM).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and Prefect's logs.")]
    = False,
) -> None:
    """Publish public-use microdata with identification risk <= xi (NZY unbiased PRAM)."""
    state["debug"] = debug
    plain_when_piped()
    if not debug:          # numpy's RuntimeWarnings: one line, or in the --json document
        catch_warnings(err_console)
    if "prefect" in sys.modules:
        return  # Prefect read its settings at import (e.g. under tests): env changes are moot
    # no telemetry calls from an agency machine (they also fail noisily without internet):
    # the server's, and the Prefect SDK's own (in a terminal it records "milestones")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    if not debug and ctx.invoked_subcommand != "schedule":
        quiet_prefect()


def sample(
    out: Annotated[Path, typer.Option("--out", help="Folder to write census_sample.csv into.")]
    = Path("data_samples"),
    force: Annotated[bool, typer.Option("--force", help="Replace a census_sample.csv there "
                                        "whose bytes differ from the sample's.")] = False,
) -> None:
    """Regenerate the census-like demo sample (byte-identical on every run)."""
    with friendly_errors():
        from sdc.samples import write_census_sample

        with console.status(f"writing the census sample into {escape(str(out))}"):
            path = write_census_sample(out, force=force)
        console.print(f"[green]Sample written to[/green] {escape(str(path))}")


# the command table, in the order `sdc --help` lists it
app.command()(release_cmd.release)
app.command()(plan_cmd.plan)
app.command()(design_cmd.design)
app.command()(plan_cmd.validate)
app.command()(audit_cmd.audit)
app.command()(audit_cmd.report)
app.command()(server_cmd.schedule)
app.command()(review_cmd.approve)
app.command()(review_cmd.reject)
app.add_typer(server_cmd.server_app, name="server")
app.command()(sample)
app.command("init")(make_init_command(friendly_errors, console))
app.command()(correct_cmd.correct)
app.add_typer(rr_app, name="rr", help="Randomized-response survey designs.")


def main() -> None:
    """The console script of older installs (``sdc = "sdc.cli.main:main"``): as
    :func:`sdc.cli.entry.main` (a warm ``sdc release`` runs in the pre-imported worker,
    :mod:`sdc.cli.thin`)."""
    from sdc.cli.thin import run

    run(lambda: app(prog_name="sdc"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
