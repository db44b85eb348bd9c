"""The reviewer's page ``report.html``: Jinja2 templates (autoescaped) fed by plain data.

``templates/report.html.j2`` lays out the page, ``templates/macros.html.j2`` holds the table
cells and number formats, ``templates/charts.html.j2`` draws the SVG charts whose geometry
:mod:`sdc.reports.charts` computes, and ``templates/report.css`` is inlined. No HTML is built
in Python: this module only derives figures (the worst TVD, the pair matrix, chart geometry)
and formats numbers as text; the templates escape every string they print.

The page is a pure function of ``risk.json`` and ``utility.json``: self-contained (inline CSS
and SVG, no script), it opens offline.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from sdc.reports import charts

__all__ = ["TEMPLATES", "page_data", "render_html"]

TEMPLATES = Path(__file__).resolve().parent / "templates"

DASH, MINUS = "–", "−"   # en dash for a missing value, the minus sign for negative numbers


# --------------------------------------------------------------------------------------------
# number formats (text; the templates decide the markup)
# --------------------------------------------------------------------------------------------
def fmt_count(x: Any) -> str:
    """An integer with thousands separators; a dash for a missing value."""
    return DASH if x is None else f"{int(x):,}"


def fmt_num(x: Any, d: int = 4) -> str:
    """A number with ``d`` decimals and thousands separators; a dash for a missing value."""
    return DASH if x is None else f"{float(x):,.{d}f}"


def fmt_pct(x: Any, d: int = 2) -> str:
    """A share as a percentage with ``d`` decimals; a dash for a missing value."""
    return DASH if x is None else f"{100.0 * float(x):.{d}f}%"


def fmt_signed(x: Any, d: int = 0) -> str:
    """A difference with its sign (rounded to an integer for ``d = 0``); exactly ``"0"`` when
    it rounds to zero, which the templates grey out."""
    if x is None:
        return DASH
    v = float(x)
    if (d and abs(v) < 0.5 * 10**-d) or (not d and round(v) == 0):
        return "0"
    s = f"{v:+,.{d}f}" if d else f"{int(round(v)):+,}"
    return s.replace("-", MINUS)


def fmt_pp(x: Any, d: int = 3) -> str:
    """A share difference in percentage points, signed; ``"0"`` when it rounds to zero."""
    if x is None:
        return DASH
    v = 100.0 * float(x)
    if abs(v) < 0.5 * 10**-d:
        return "0"
    return f"{v:+.{d}f}".replace("-", MINUS)


def fmt_cert(certificate: float, xi: float, d: int = 5) -> str:
    """The certificate with ``d`` decimals, and more where fewer would make the comparison with
    xi read wrong (0.394996 next to xi = 0.395 is not "0.39500")."""
    from sdc.config.model import certificate_text

    return certificate_text(float(certificate), float(xi), digits=d).rsplit(" ", 1)[0]


def fmt_er(x: Any) -> str:
    """Expected re-identifications: one decimal below 100, whole numbers above (27,390 rather
    than "27,390.0"); a dash for a missing value."""
    if x is None:
        return DASH
    v = float(x)
    return f"{v:,.1f}" if abs(v) < 100 else f"{round(v):,}"


def fmt_fixed(x: float, d: int = 1) -> str:
    """A coordinate with ``d`` decimals (``f"{x:.{d}f}"``)."""
    return f"{float(x):.{d}f}"


def fmt_g(x: float) -> str:
    """Python's general format (``0.395``, ``0.05``)."""
    return f"{float(x):g}"


@lru_cache(maxsize=1)
def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no private temp folder to be had: compile every time
        return None


#: names a plain dict answers as attributes (its methods): looked up as Jinja would
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _Environment(jinja2.Environment):
    """Jinja's environment, whose ``x.name`` reads a plain dict's item first: the page data
    are dicts, and Jinja's default tries ``getattr`` first and pays an ``AttributeError`` for
    every lookup (a quarter of the rendering). Names of dict's own attributes (``items``,
    ...) go Jinja's way, so every lookup resolves to what Jinja's own order gives."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The Jinja2 environment, one per process (its templates compiled once; Jinja checks a
    template file's time at each use): templates from :data:`TEMPLATES`, autoescaping on,
    undefined names are errors, number formats as filters. Compiled templates are cached by
    Jinja's ``FileSystemBytecodeCache`` (an owner-only folder of the user in the temp folder,
    checked by Jinja; keyed by the template source's checksum): 0.1 CPU s of a process's first
    release."""
    env = _Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        bytecode_cache=_bytecode_cache(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(count=fmt_count, num=fmt_num, pct=fmt_pct, signed=fmt_signed, pp=fmt_pp,
                       fixed=fmt_fixed, g=fmt_g, tick=charts.fmt_tick, cert=fmt_cert, er=fmt_er,
                       shift=fmt_shift)
    env.globals.update(
        zip=lambda *seqs: zip(*seqs, strict=True),
        color={"before": charts.BEFORE, "after": charts.AFTER, "xi": charts.XI_COLOR,
               "exact": charts.EXACT},
    )
    return env


# --------------------------------------------------------------------------------------------
# what the page shows, derived from the two documents (data only)
# --------------------------------------------------------------------------------------------
_RULE_TEXT = {
    "as_is": "partition variable (as is): counts preserved unless PRBs were merged",
    "bands": "partition variable (bands): band totals preserved unless PRBs were merged",
    "groups": "partition variable (groups): group totals preserved unless PRBs were merged",
    "hierarchy": "partition variable (hierarchy): generalized totals preserved unless PRBs were merged",
}


def _key_variable(e: dict[str, Any]) -> dict[str, Any]:
    cats = e["categories"]
    rule = e.get("partition_rule")
    return {
        "e": e,
        "rule_text": _RULE_TEXT.get(rule, str(rule)) if rule else None,
        "chart": charts.before_after_chart(
            [str(c["label"]) for c in cats], [c["original"] for c in cats],
            [c["released"] for c in cats], f"{e['name']}: original vs released counts"),
        "rows": [c for c in cats if not (c["original"] == 0 and c["released"] == 0)],
    }


def _pair_matrix(pairs: list[dict[str, Any]], names: list[str],
                 weighted: bool) -> dict[str, Any]:
    """TVD of every pair: unweighted above the diagonal, weighted below (when there is a
    weight); ``alpha`` = 0.08 + 0.45 min(v / vmax, 1) shades a cell."""
    m = {(p["a"], p["b"]): p for p in pairs}
    vmax = max([p["tvd"] for p in pairs] + [p["weighted_tvd"] or 0 for p in pairs])

    def cell(v: float | None) -> dict[str, Any]:
        if v is None:
            return {"kind": "empty"}
        a = 0 if vmax <= 0 else min(v / vmax, 1.0)
        return {"kind": "value", "value": v, "alpha": 0.08 + 0.45 * a}

    rows = []
    for i, r in enumerate(names):
        cells = []
        for j, c in enumerate(names):
            if i == j:
                cells.append({"kind": "diagonal"})
            elif i < j:
                cells.append(cell(m[(r, c)]["tvd"]))
            else:
                cells.append(cell(m[(c, r)]["weighted_tvd"]) if weighted else {"kind": "empty"})
        rows.append({"name": r, "cells": cells})
    return {"names": names, "rows": rows}


def fmt_shift(x: Any, d: int = 1) -> str:
    """A shift with its sign and ``d`` decimals (the digits it needs,
    :func:`sdc.reports.analysis.shift_digits`); ``"0"`` only when it is exactly zero."""
    if x is None:
        return DASH
    v = float(x)
    if v == 0:
        return "0"
    return f"{v:+,.{int(d)}f}".replace("-", MINUS)


def _numeric_block(blk: dict[str, Any]) -> dict[str, Any]:
    from sdc.reports.analysis import shift_digits

    rows, max_shift = [], 0.0
    for r in blk["rows"]:
        b, a = r["before"], r["after"]
        shift = (a["mean"] - b["mean"]) if (a["mean"] is not None and b["mean"] is not None) \
            else None
        if shift is not None:
            max_shift = max(max_shift, abs(shift))
        rows.append({"row": r, "shift": shift})
    # the digits the largest shift needs (two significant digits; at least one decimal)
    return {"variable": blk["variable"], "by": blk["by"], "rows": rows, "max_shift": max_shift,
            "digits": shift_digits(max_shift)}


def _analysis(u: dict[str, Any] | None) -> dict[str, Any] | None:
    """Section "What analysts compute": the documents' ``analysis`` with the headline
    figures picked (largest coefficient shift, largest mean shift)."""
    if not u:
        return None
    regs = [r for r in u.get("regressions", []) if not r.get("skipped")]
    shifts = [b for b in u.get("mean_shifts", []) if b.get("max_abs_shift_se") is not None]
    analyses = u.get("analyses", [])
    worst_reg = max(regs, key=lambda r: r["max_abs_shift_se"] or 0.0, default=None)
    worst_shift = max(shifts, key=lambda b: b["max_abs_shift_se"], default=None)
    regs = sorted(regs, key=lambda r: -(r["max_abs_shift_se"] or 0.0))
    shifts = sorted(shifts, key=lambda b: -b["max_abs_shift_se"])
    return {"u": u, "regressions": regs, "skipped": [r for r in u.get("regressions", [])
                                                      if r.get("skipped")],
            "shifts": shifts, "analyses": analyses, "worst_reg": worst_reg,
            "worst_shift": worst_shift, "displacement": u.get("displacement", {})}


def page_data(risk: dict[str, Any], utility: dict[str, Any]) -> dict[str, Any]:
    """Everything ``report.html.j2`` prints, from the two JSON documents only. Long lists come
    in the order that matters: riskiest PRBs and partition sets first, largest shifts first."""
    from sdc.reports import overview
    from sdc.reports.expected import weighted_totals_words

    rel = risk["release"]
    v = risk["verdict"]
    xi = v["xi"]
    weighted = rel.get("weight") is not None
    intr = risk["intruder"]
    kv = utility.get("key_variables", [])
    prbs = risk.get("prbs", [])
    pairs = utility.get("pairs", [])
    ch = utility.get("changed", {})
    chg = {x["partition_key"]: x for x in ch.get("by_partition_set", [])}
    analysis = _analysis(utility.get("analysis"))
    losses = overview.analyst_losses(utility.get("analysis"))
    hh = risk.get("households")
    hhu = utility.get("households")
    if hhu:
        hhu = {**hhu, "keys": [{**k, "values": overview.numeric_first(k["values"])}
                               for k in hhu.get("keys", [])]}
    riskiest = sorted(prbs, key=lambda p: (-p["max_risk"], p["prb"]))
    psets = sorted(risk.get("partition_sets", []),
                   key=lambda p: (-p.get("sensitive_records_before", 0), p["partition_key"]))
    b = risk["before"]
    return {
        "title": f"Disclosure review: {rel['name']}",
        "rel": rel, "v": v, "xi": xi, "at": v.get("at") or {}, "weighted": weighted,
        "design": rel.get("design"),
        "expected": utility.get("expected_totals"),
        "b": b, "a": risk["after"], "intr": intr, "ov": intr.get("overall", {}),
        "unique_before": b["k_anonymity"][0]["records_violating"] if b.get("k_anonymity")
        else None,
        "max_before": (1.0 / min(int(c["min"]) for c in b["frequency_classes"] if c["cells"])
                       if any(c["cells"] for c in b.get("frequency_classes", [])) else None),
        "kv": [_key_variable(e) for e in sorted(kv, key=lambda e: -e["share_changed"])],
        "worst": max(kv, key=lambda e: e["tvd"]) if kv else None,
        "prbs": [{"p": p, "profile": ", ".join(
            f"{t}:{m}" for t, m in sorted(p["profile"].items(), key=lambda x: int(x[0])))}
            for p in riskiest],
        "n_fail": sum(1 for p in prbs if not p["pass"]),
        "merge_counts": overview.merge_counts(v, prbs),
        "prb_chart": charts.prb_risk_chart(prbs, xi),
        "size_chart": charts.histogram_chart(
            [p["k"] for p in prbs], "PRB size histogram", "cells per PRB (k)", rel["kmin"],
            f"kmin = {rel['kmin']}"),
        "intruder_chart": charts.intruder_chart(
            [c for c in intr.get("classes", []) if c.get("pick", "own") == "own"], xi),
        "pairs": _pair_matrix(pairs, rel["key_variables"], weighted) if pairs else None,
        "numeric": [_numeric_block(blk) for blk in utility.get("numeric", [])],
        "analysis": analysis, "losses": losses, "top_losses": losses[:3],
        "n_flagged": sum(1 for x in losses if x["flagged"]), "noise_se": overview.NOISE_SE,
        "pmse": (utility.get("analysis") or {}).get("pmse"),
        "changes_chart": overview.changes_chart(ch.get("by_key_variable", []),
                                                rel["n_records"]),
        "shift_chart": overview.shift_chart(losses) if losses else None,
        "dependence": risk.get("dependence"),
        "numeric_min_group": utility["release"].get("numeric_min_group"),
        "changed": ch, "changed_overall": ch.get("overall", {}),
        "partition_sets": [{"p": p, "c": chg.get(p["partition_key"], {})} for p in psets],
        "series": risk.get("series"),  # None: first release of its series (section omitted)
        "utility_box": _utility_box(v, ch, kv, utility.get("recoding")),
        "weighted_words": weighted_totals_words(utility.get("expected_totals"),
                                                rel.get("weight")),
        "hh": hh, "hhu": hhu,
    }


def _utility_box(v: dict[str, Any], ch: dict[str, Any], kv: list[dict[str, Any]],
                 recoding: dict[str, Any] | None) -> dict[str, Any]:
    """The verdict box's utility side: records changed, the largest key-marginal TVD, the
    recoding loss, and the warnings of :func:`sdc.reports.recoding.change_warnings`."""
    from sdc.reports.recoding import change_warnings

    by_key = {e["name"]: e["share"] for e in ch.get("by_key_variable", [])}
    worst = max(kv, key=lambda e: e["tvd"]) if kv else None
    return {
        "share_changed": v.get("share_changed", 0.0),
        "worst_tvd": worst["tvd"] if worst else None,
        "worst_name": worst["name"] if worst else None,
        "recoding": recoding,
        "warnings": change_warnings(float(v.get("share_changed", 0.0)), by_key),
    }


def render_html(risk: dict[str, Any], utility: dict[str, Any]) -> str:
    """The reviewer's page, from the two JSON documents only. Self-contained (inline CSS/SVG)."""
    return environment().get_template("report.html.j2").render(page_data(risk, utility))
