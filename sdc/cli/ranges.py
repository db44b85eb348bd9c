"""Valid ranges of the CLI's numeric options: a value outside is a usage error (exit 2) whose
message names the option and its range, before the command does anything.

``typer.Option(..., callback=in_range(0, 1, lo_open=True))`` -> ``sdc design --keep 1.5``:
"Invalid value for '--keep': 1.5 is not in the valid range: in (0, 1] (a share of the
entropy)"; under ``--json`` (an eager option: parsed first) the same message as a JSON error
document on stdout. Non-finite values (nan, inf, which click parses as floats) are outside
every range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer

__all__ = ["in_range", "range_text"]


def range_text(lo: float | None, hi: float | None, *, lo_open: bool = False,
               hi_open: bool = False, integer: bool = False) -> str:
    """``(0, 1]``, ``[1, 65535]`` (integers: "an integer in [1, 65535]"), ``> 0``."""
    def fmt(x: float) -> str:
        return str(int(x)) if integer else f"{x:g}"

    kind = "an integer " if integer else ""
    if lo is not None and hi is not None:
        return (f"{kind}in {'(' if lo_open else '['}{fmt(lo)}, {fmt(hi)}"
                f"{')' if hi_open else ']'}")
    if lo is not None:
        return f"{kind}{'>' if lo_open else '>='} {fmt(lo)}"
    if hi is not None:
        return f"{kind}{'<' if hi_open else '<='} {fmt(hi)}"
    return "a finite number"


def in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
             hi_open: bool = False, integer: bool = False,
             what: str = "") -> Callable[[Any], Any]:
    """A typer callback refusing a value outside the range (None passes: an optional option
    not given). ``what`` says what the option means, added to the message."""
    text = range_text(lo, hi, lo_open=lo_open, hi_open=hi_open, integer=integer)

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        v = float(value) if not isinstance(value, int) else value
        ok = (isinstance(v, int) or math.isfinite(v)) and \
            (lo is None or (v > lo if lo_open else v >= lo)) and \
            (hi is None or (v < hi if hi_open else v <= hi))
        if not ok:
            msg = f"{value!r} is not in the valid range: {text}" + (f" ({what})" if what else "")
            if ctx.params.get("as_json"):  # --json is eager: known before this option
                from sdc.cli.json_output import error_document, print_document

                name = f"'{param.opts[0]}'" if param.opts else "option"
                print_document(error_document(
                    ctx.info_name or "sdc", 2, typer.BadParameter(msg),
                    f"Invalid value for {name}: {msg}"))
                raise typer.Exit(2)
            raise typer.BadParameter(msg)
        return value

    return check
