"""The Python warnings of a command (``warnings.warn``: numpy's RuntimeWarnings, a library's
UserWarning): each printed once as one ``warning:`` line on stderr, or, under ``--json``, kept
off stderr and listed in the document's ``warnings`` (:func:`sdc.cli.json_output.print_document`).
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["catch_warnings", "caught_warnings", "state"]

#: ``json``: the command was given ``--json`` (set by the option's callback)
state: dict[str, Any] = {"json": False}
_warnings: list[str] = []
_console: Any = None


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    text = f"{category.__name__}: {message}"
    if text in _warnings:
        return
    _warnings.append(text)
    if not state["json"] and _console is not None:   # one line, not Python's file:line dump
        _console.print(f"warning: {text}", style="yellow", markup=False, soft_wrap=True)


def catch_warnings(console: Any) -> None:
    """From now on (one command), collect Python warnings and print them on ``console``
    (stderr) unless the command turns out to be a ``--json`` one."""
    global _console
    _warnings.clear()
    state["json"] = False
    _console = console
    warnings.showwarning = _show_warning


def caught_warnings() -> list[str]:
    """The Python warnings of this command so far, each once, as "Category: message"."""
    return list(_warnings)
