"""``sdc design`` of a household file, run: the file read in its declared values, the
households of exposed sizes left out for the candidates (``risk.exposed_sizes: drop``, said
in the table and the JSON), the config as written judged as ``sdc release`` judges it, and
the candidates evaluated (:mod:`sdc.authoring.household_design`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdc.authoring.household_design import (
    DesignResult,
    HouseholdDesign,
    evaluate_household_designs,
)
from sdc.authoring.household_recommend import recommend
from sdc.config.model import ReleaseConfig

__all__ = ["run_household_design"]


def run_household_design(path: Path, config: ReleaseConfig,
                         base: dict[str, Any]) -> HouseholdDesign:
    """Read the household file in its declared values and evaluate the designs."""
    from sdc.io.read import read_input
    from sdc.method.household_exposed import applies, exposed_households, frame_without_exposed

    # the protect candidates release without the households of exposed sizes (drop)
    raw = read_input(config.declared_view())
    frame, base = frame_without_exposed(raw, config, base)
    left = exposed_households(raw, config) if len(frame) < len(raw) else None
    current, cands = evaluate_household_designs(frame, config, base, path.resolve().parent)
    if left is not None and config.risk.exposed_sizes == "refuse" and applies(config):
        # judged on the file without them, the config as written would pass: it refuses
        current.status, current.note = "refused", (
            f"exposed household sizes {_sizes(left)}: `sdc release` refuses the config as "
            "written (risk.exposed_sizes: refuse); the candidates leave them out "
            f"(risk.exposed_sizes: drop: {_left_text(left)})")
    rec = recommend(cands)
    return HouseholdDesign(path.resolve(), config, base, current, cands, DesignResult(rec), left)


def _sizes(left: dict[str, Any]) -> str:
    return ", ".join(f"{s} ({n} household{'s' * (n > 1)})" for s, n in left["sizes"].items())


def _left_text(left: dict[str, Any]) -> str:
    """What ``risk.exposed_sizes: drop`` leaves out, in words."""
    return (f"{left['households']:,} households, {left['persons']:,} persons "
            f"({left['share']:.2%}) left out")
