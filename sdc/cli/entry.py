"""The ``sdc`` console script (``sdc = "sdc.cli.entry:main"``): imports the CLI only when the
command runs in this process (:mod:`sdc.cli.thin`: a warm ``sdc release`` runs in the
pre-imported worker)."""

from __future__ import annotations

from sdc.cli.thin import run

__all__ = ["main"]


def _app() -> None:
    from sdc.cli.main import app

    app(prog_name="sdc")


def main() -> None:
    """Console-script entry point."""
    run(_app)
