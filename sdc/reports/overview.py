"""The first screen of the reviewer's page (data only, no HTML): the release's design in its own
words, the analyst-facing losses ranked against the 2 SE noise line, the merge counts under
one name each, and the geometry of the two overview charts (records changed by key, the
largest shifts in SE). :mod:`sdc.reports.html` puts them on the page; the templates draw them.
"""

from __future__ import annotations

from typing import Any

from sdc.config.model import ReleaseConfig
from sdc.method.designs import HouseholdDesign, household_design_of
from sdc.method.designs import design_of as configured_design

__all__ = ["NOISE_SE", "analyst_losses", "changes_chart", "design_of", "merge_counts",
           "numeric_first", "shift_chart"]

#: a shift within +-2 SE of the original estimate is within its own sampling noise
NOISE_SE = 2.0


def design_of(config: ReleaseConfig, plan: Any = None,
              household: HouseholdDesign | None = None) -> dict[str, str]:
    """``{"name", "description"}`` of the release's design: the plan's own (``plan.design``,
    :mod:`sdc.method.designs`: uniform NZY, near-cell, weighted (x near), any registered one),
    else the one its config picks; for a household file the config's, led by the household
    design's words (``household``, the release's ``households.design``; None: the one the
    config picks)."""
    own = getattr(plan, "design", None)
    if own is None or config.input.household_id is not None:
        own = configured_design(config)
    name, words = str(own.title), str(own.description)
    if config.input.household_id is not None:
        hd = household_design_of(config) if household is None else household
        name = f"{hd.title}, {name}"
        words = hd.description + words
    return {"name": name, "description": words}


def analyst_losses(analysis: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every estimate an analyst computes from the page's ``analysis`` (the agency's formulas'
    coefficients, the regressions on the keys, the group means), largest |shift| in SE first:
    ``what``, ``before``, ``after``, ``se``, ``shift_se``, ``ci_overlap``, ``digits``,
    ``flagged`` (beyond the 2 SE noise line). Intercepts and withheld groups are left out."""
    if not analysis:
        return []
    out: list[dict[str, Any]] = []

    def add(what: str, x: dict[str, Any], before: str, after: str, se: str, digits: int,
            unit: float = 1.0, suffix: str = "") -> None:
        s = x.get("shift_se")
        if s is None or x.get(before) is None or x.get(after) is None:
            return
        out.append({"what": what, "before": unit * x[before], "after": unit * x[after],
                    "se": None if x.get(se) is None else unit * x[se], "shift_se": s,
                    "ci_overlap": x.get("ci_overlap"), "digits": digits, "suffix": suffix,
                    "flagged": abs(s) > NOISE_SE})

    for a in analysis.get("analyses", []):
        for t in a.get("terms", []):
            if t["term"].lower() not in ("intercept", "(intercept)"):
                add(f"{a['name']}: coefficient of {t['term']}", t, "before", "after",
                    "se_before", int(t.get("digits", 4)))
    for r in analysis.get("regressions", []):
        for t in r.get("terms", []):
            if t["term"] != "(intercept)":
                add(f"{r['variable']} ~ keys: coefficient of {t['term']}", t, "before",
                    "after", "se_before", 4)
    for b in analysis.get("mean_shifts", []):
        for row in b.get("rows", []):
            if row.get("suppressed"):
                continue
            unit = 100.0 if b.get("binary") else 1.0
            add(f"{'share' if b.get('binary') else 'mean'} of {b['variable']} where "
                f"{b['by']} = {row['label']}", row, "mean_before", "mean_after", "se_before",
                int(row.get("digits", 1)) + 1, unit, "%" if b.get("binary") else "")
    out.sort(key=lambda x: -abs(x["shift_se"]))
    return out


def merge_counts(verdict: dict[str, Any], prbs: list[dict[str, Any]]) -> dict[str, int]:
    """The three merge counts, each with one name: ``steps`` (the merge log: one block joined
    to another, ``risk.json`` verdict.merges, ``sdc plan``'s list), ``merged_prbs`` (PRBs made
    of several partition sets: the codebook's "places", audit.json's ``merges`` entries) and
    ``merged_sets`` (the partition sets inside them)."""
    multi = [p for p in prbs if int(p.get("n_partition_sets", 1)) > 1]
    return {"steps": len(verdict.get("merges", [])), "merged_prbs": len(multi),
            "merged_sets": sum(int(p["n_partition_sets"]) for p in multi)}


def numeric_first(values: list[dict[str, Any]], key: str = "value") -> list[dict[str, Any]]:
    """``values`` sorted numerically by ``key`` when every value reads as a number (region
    1, 2, ..., 10), else as text."""
    def num(v: Any) -> float | None:
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    if values and all(num(x.get(key)) is not None for x in values):
        return sorted(values, key=lambda x: num(x.get(key)))
    return sorted(values, key=lambda x: str(x.get(key)))


# --------------------------------------------------------------------------------------------
# the two overview charts: horizontal bars (numbers and labels only)
# --------------------------------------------------------------------------------------------
_ROW, _LABEL_W, _WIDTH, _TOP = 22, 230, 540, 26


def _label(text: str, n: int = 34) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def changes_chart(by_key: list[dict[str, Any]], n_records: int) -> dict[str, Any]:
    """Records whose value of each key changed, as horizontal bars (largest first), scaled
    to the largest."""
    rows = sorted(by_key, key=lambda x: -int(x["n_changed"]))
    vmax = max([int(x["n_changed"]) for x in rows] + [1])
    plot = _WIDTH - _LABEL_W - 90
    bars = []
    for i, x in enumerate(rows):
        w = plot * int(x["n_changed"]) / vmax
        bars.append({"label": _label(str(x["name"])), "y": _TOP + i * _ROW, "width": w,
                     "n": int(x["n_changed"]), "share": float(x["share"]),
                     "text_x": _LABEL_W + w + 6})
    return {"width": _WIDTH, "height": _TOP + len(rows) * _ROW + 8, "left": _LABEL_W,
            "bars": bars, "title": "Records whose value of each key changed",
            "n_records": n_records}


def shift_chart(losses: list[dict[str, Any]], n: int = 10) -> dict[str, Any]:
    """The ``n`` largest shifts in SE as bars from 0, with the ±2 SE noise lines."""
    rows = losses[:n]
    smax = max([abs(x["shift_se"]) for x in rows] + [NOISE_SE * 1.5])
    half = (_WIDTH - _LABEL_W - 100) / 2    # the last 80 units hold the values
    zero = _LABEL_W + 20 + half

    def x_of(v: float) -> float:
        return zero + half * v / smax

    bars = []
    for i, x in enumerate(rows):
        s = float(x["shift_se"])
        x0, x1 = sorted((zero, x_of(s)))
        bars.append({"label": _label(x["what"]), "y": _TOP + i * _ROW, "x": x0,
                     "width": max(x1 - x0, 1.0), "shift_se": s, "flagged": x["flagged"],
                     "text_x": _WIDTH - 4})
    height = _TOP + max(len(rows), 1) * _ROW + 8
    return {"width": _WIDTH, "height": height, "zero": zero, "bars": bars,
            "noise": [x_of(-NOISE_SE), x_of(NOISE_SE)], "top": _TOP - 6, "bottom": height - 4,
            "title": "Largest shifts of what analysts compute, in SE of the original estimate"}
