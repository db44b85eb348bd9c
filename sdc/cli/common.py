"""What every ``sdc`` command shares: the consoles, the exit codes, errors as one readable
paragraph (or a JSON error document under ``--json``), table helpers and the common arguments.

Exit codes: 0 success; 2 bad config, bad input, refused overwrite, a missing file, a full disk
or a file-size limit (something the user fixes); 1 failed audit or any other failure.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, SupportsInt

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sdc.cli.thin import interrupted, tell_interrupted


class _Console(Console):
    """rich's console; on a file or a pipe (not a terminal) lines lose the spaces rich pads
    them with to the table's or console's width (a log file had lines of 210 characters)."""

    def _render_buffer(self, buffer: Any) -> str:
        text = super()._render_buffer(buffer)
        return text if self.is_terminal else _TRAILING.sub("", text)


_TRAILING = re.compile(r"[ \t]+(?=\n)")  # a print with end="" keeps its spaces
console = _Console(highlight=False)
err_console = _Console(stderr=True, highlight=False)
#: the CLI's run-wide switches (``sdc --debug``)
state: dict[str, Any] = {"debug": False}

# exit codes
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: the largest --limit (rows shown) and --budget (seconds: one week) the CLI accepts
MAX_LIMIT, MAX_BUDGET = 10**9, 7 * 24 * 3600.0


# ---------------------------------------------------------------------------------------------
# errors: one readable paragraph, never a bare traceback (unless --debug)
# ---------------------------------------------------------------------------------------------
def error_types() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
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
                                ("sdc.audit.report", "AuditError", known)):
        try:
            group.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):  # pragma: no cover - module not installed
            pass
    return tuple(user), tuple(known)


#: a message's value longer than this is shown by its start, its end and its length
LONG_VALUE = 1000
#: a message longer than this keeps its start and its end (where the fix is said)
LONG_MESSAGE = 8000
_LONG_QUOTED = re.compile(  # a quote opens after no letter ("variable's" opens nothing)
    rf"""(?<!\w)'([^'\n]{{{LONG_VALUE},}})'(?!\w)|(?<!\w)"([^"\n]{{{LONG_VALUE},}})"(?!\w)|"""
    rf"""([^\s'"]{{{LONG_VALUE + 100},}})""")


def _cut(text: str) -> str:
    return (f"{text[:LONG_VALUE // 2]}…{text[-20:]} [{len(text):,} characters]")


def shorten(message: str) -> str:
    """``message`` with every long value cut (a 1 MB label aliased 50,000 times once made a
    100 KB error): a quoted value over :data:`LONG_VALUE` characters or an unbroken run over
    ``LONG_VALUE + 100`` shows its start, end and length; a message still over
    :data:`LONG_MESSAGE` characters keeps its start and end."""
    def cut(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return f"'{_cut(m.group(1))}'"
        if m.group(2) is not None:
            return f'"{_cut(m.group(2))}"'
        return _cut(m.group(3))

    if len(message) <= LONG_VALUE:
        return message
    out = _LONG_QUOTED.sub(cut, message)
    if len(out) > LONG_MESSAGE:
        half = LONG_MESSAGE // 2
        out = f"{out[:half]} … [{len(out) - LONG_MESSAGE:,} characters cut] … {out[-half:]}"
    return out


def describe(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-paragraph message) for an exception; long values cut (:func:`shorten`)."""
    code, msg = _describe(exc)
    return code, shorten(msg)


def _describe(exc: BaseException) -> tuple[int, str]:
    user, known = error_types()
    if isinstance(exc, OSError) and not isinstance(exc, user):
        from sdc.io.guard import DISK_FULL, disk_full_error

        if exc.errno in DISK_FULL:  # a writer that did not name it itself: still exit 2
            return EXIT_USAGE, str(disk_full_error(exc, done="the command stopped there"))
    if isinstance(exc, user):
        if isinstance(exc, OSError) and exc.filename and exc.strerror:
            return EXIT_USAGE, f"{exc.strerror}: {exc.filename}"
        return EXIT_USAGE, str(exc)
    if isinstance(exc, known):
        return EXIT_FAILURE, str(exc)
    return EXIT_FAILURE, (f"{type(exc).__name__}: {exc}. This was not expected; rerun with "
                          "`sdc --debug ...` for the full traceback and report it if it persists")


@contextmanager
def friendly_errors(json_for: str | None = None) -> Iterator[None]:
    """Errors as one readable paragraph on stderr, or (``json_for`` = the command, under
    ``--json``) as one JSON error document on stdout; the exit code is the same."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        tell_interrupted(lambda text: err_console.print(text, style="yellow"))
        raise typer.Exit(130) from None
    except Exception as exc:
        if state["debug"]:
            raise
        if interrupted():  # Ctrl-C, turned into another error by a library (Prefect, pydantic)
            tell_interrupted(lambda text: err_console.print(text, style="yellow"))
            raise typer.Exit(130) from None
        code, msg = describe(exc)
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


def plain_when_piped() -> None:
    """Not on a terminal and no COLUMNS of the user's: print tables unwrapped, one row per
    line, so the logs of scheduled runs and `sdc plan | less -S` stay readable. A COLUMNS of
    the user's is read at every command (the consoles outlive one command in a test runner or
    the release worker)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        for c in (console, err_console):
            c.width = int(columns)
        return
    for c in (console, err_console):
        c.width = c.width if c.is_terminal else PLAIN_WIDTH


def quiet_prefect() -> None:
    """Keep Prefect's console logging (INFO lines, telemetry, task tracebacks) out of the
    user's way; set before Prefect is imported. Logs still reach the Prefect API (UI).
    ``--debug`` and any value the user sets themselves win."""
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def fmt_int(v: SupportsInt | str) -> str:
    return f"{int(v):,}"


def kv_table(rows: list[tuple[str, str]], title: str | None = None) -> Table:
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
def _json_mode(value: bool) -> bool:
    """``--json`` given: Python warnings (numpy's RuntimeWarnings) go into the document's
    ``warnings`` instead of stderr (:mod:`sdc.cli.caught`)."""
    from sdc.cli import caught

    caught.state["json"] = bool(value)
    return value


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout "
                                       "(errors too; schemas in docs/cli_json/).",
                                       is_eager=True, callback=_json_mode)]  # known to the range checks


def executor_value(value: str | None) -> str | None:
    """``--executor`` (``--engine``, its old name): ``memory`` (or ``pandas``, its old name),
    ``streaming``, ``dask``; given to the release layer as the registered name. An unknown name
    passes through and is refused there, with the registered ones. The config layer is
    imported only when the option is given (``sdc --help`` stays cheap)."""
    if value is None:
        return None
    from sdc.config.sections import executor_name

    return executor_name(value)


def executor_option(what: str) -> Any:
    """The ``--executor`` option (alias ``--engine``) of a command; ``what`` ends its help."""
    return typer.Option(
        "--executor", "--engine", help=f"memory (the file in memory) | streaming (one machine, out "
        f"of core) | dask (a Dask cluster); {what}. Overrides the config's executor:. "
        "(--engine and the value pandas: their old names.)", show_default=False,
        callback=lambda value: executor_value(value))


def user_error(message: str) -> Exception:
    """An error the user fixes (exit 2)."""
    import sdc

    return sdc.InputError(message)
