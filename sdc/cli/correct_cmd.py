"""``sdc correct PUBLIC_DIR``: a data user's MC-SIMEX correction of a regression on one key,
from the public folder alone (:mod:`sdc.release.correct`; docs/DATA_USERS.md section 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from sdc.cli.common import console, friendly_errors


def correct(
    public_dir: Annotated[Path, typer.Argument(help="A release's public folder (codebook.md "
                                               "and microdata).", show_default=False)],
    key: Annotated[str, typer.Option("--key", help="The key variable (its full "
                                     "misclassification matrix is in the codebook).",
                                     show_default=False)],
    outcome: Annotated[str, typer.Option("--outcome", help="The outcome column.",
                                         show_default=False)],
    outcome_value: Annotated[str | None, typer.Option(
        "--outcome-value", help="Regress the indicator outcome == VALUE (a text outcome).",
        show_default=False)] = None,
    reference: Annotated[str | None, typer.Option(
        "--reference", help="The key's reference value (default: the most frequent).",
        show_default=False)] = None,
    b: Annotated[int, typer.Option("--b", min=2, max=10_000,
                                   help="Refits per lambda.")] = 50,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the added "
                                      "misclassification.")] = 0,
) -> None:
    """Correct a regression of an outcome on one key for the perturbation (MC-SIMEX with the
    codebook's misclassification matrix); prints the public file's and the corrected
    coefficients."""
    with friendly_errors(None):
        from sdc.release.correct import correct_public

        with console.status("MC-SIMEX"):
            r = correct_public(public_dir, key, outcome, outcome_value=outcome_value,
                               reference=reference, b=b, seed=seed)
        t = Table(title=f"{outcome} ~ {key} (reference {r['reference']}; n = {r['n']:,}; "
                        "MC-SIMEX, one key at a time)", title_justify="left")
        for col in ("term", "public file", "corrected"):
            t.add_column(col, justify="left" if col == "term" else "right", no_wrap=True)
        for name, a, c in zip(r["terms"], r["naive"], r["corrected"], strict=True):
            t.add_row(Text(name), f"{a:.4f}", f"{c:.4f}")
        console.print(t)
