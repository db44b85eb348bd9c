"""The codebook section *Uncertainty added by post-randomization* (docs/DATA_USERS.md).

Publishes exactly: xi, theta_bar (:func:`sdc.method.variance.theta_bound`: the theorem's theta,
a function of xi, or 1) and, for every category v of every key variable x that PRAM can
change, c_x(v) = the number of sensitive cells with x = v rounded up
(:func:`sdc.method.variance.publishable_count`), with the resulting bound on the standard
deviation the perturbation adds to the released count of x = v:
sqrt(2 theta_bar min(c_x(v), sum_{w != v} c_x(w))). Nothing per PRB, no theta per block.
Why this is safe is argued in docs/DATA_USERS.md section 4. The codebook carries the recipe
itself (a data user has the public folder, not the project's docs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdc.config import AsIs, ReleaseConfig
from sdc.method.designs import release_design
from sdc.method.outcome import ReleaseOutcome
from sdc.method.variance import (
    publishable_count,
    sensitive_cells_by_category,
    theta_bound,
    variance_bound,
)
from sdc.release.markdown import md_code, md_text

__all__ = ["misclassification_markdown", "uncertainty_figures", "uncertainty_markdown"]

_MAX_ROWS = 60  # categories listed per key variable


def uncertainty_figures(config: ReleaseConfig, result: ReleaseOutcome) -> dict[str, Any]:
    """The published figures: ``theta_bar`` and per key variable a list of
    (category, c rounded up, variance bound) for every declared category."""
    cells = result.cells
    names = list(cells.names)
    sizes = [config.key_variables[k].size for k in names]
    counts = sensitive_cells_by_category(cells.key_codes, result.cell_prb >= 0, sizes)
    thetas = result.blocks["theta"].to_numpy(dtype=float) if len(result.blocks) else np.array([])
    tb = theta_bound(config.risk.xi, thetas)
    out: dict[str, Any] = {"xi": float(config.risk.xi), "theta_bar": float(tb), "variables": {}}
    for k, c in zip(names, counts, strict=True):
        kv = config.key_variables[k]
        dom = kv.domain + ([None] if kv.missing == "category" else [])
        pub = np.zeros(len(c), dtype=np.int64)  # publishable_count(0) == 0
        nz = np.flatnonzero(np.asarray(c) > 0)
        pub[nz] = [publishable_count(x) for x in np.asarray(c)[nz]]  # loop over categories
        rest = pub.sum() - pub
        bound = variance_bound(pub, tb, rest)
        out["variables"][k] = list(zip(dom, pub.tolist(), np.asarray(bound, dtype=float).tolist(),
                                       strict=True))
    return out


def uncertainty_markdown(config: ReleaseConfig, result: ReleaseOutcome) -> list[str]:
    """Codebook lines of the section (see the module docstring)."""
    fig = uncertainty_figures(config, result)
    tb = fig["theta_bar"]
    if release_design(config, result).weighted:
        kept = ("Survey-weighted totals and shares of key-variable combinations are unbiased, "
                "as stated under Disclosure control (with the exception given there); "
                "unweighted counts may drift slightly.")
    else:
        kept = ("Counts and proportions of key-variable combinations are unbiased: the "
                "expected released count of every combination equals its original count."
                + (" Survey-weighted totals are not kept unbiased by this design (see "
                   "Disclosure control for by how much)." if config.input.weight else ""))
    lines = [
        "## Uncertainty added by post-randomization",
        "",
        kept + " Relationships between the key variables and other variables (a mean by a "
        "key's categories, a regression coefficient on a key) are attenuated: a moved record "
        "keeps its other values under new key values.",
        "",
        "**How to use the figures below.** The variance of an estimate from this file is its "
        "sampling variance, computed as you would on the original file (e.g. p(1 - p)/n for "
        "a proportion under simple random sampling, or with the survey's design), plus the "
        "variance the perturbation adds, bounded as follows:",
        "",
        f"- theta_bar = {tb:.2f}: every post-randomization block used theta <= theta_bar"
        + (" (the theorem's theta for xi, a function of xi alone, rounded up)." if tb < 1 else
           " (some small block needed its own larger theta; every theta is below 1)."),
        f"- One full combination of all key values: added variance at most 2 theta_bar = "
        f"{2 * tb:.2f}.",
        "- Category v of key variable x: added variance of its count at most "
        "2 theta_bar min(c(v), sum of c over the other categories); x in a set V of "
        "categories: 2 theta_bar min(sum of c over V, sum of c outside V); a two-way "
        "combination x = v and y = w (or any set inside it): at most "
        "2 theta_bar min(c_x(v), c_y(w)). c is the number of rare combinations with that "
        "value, rounded up (to 10, or two significant digits), listed below.",
        "- A generalized value of a partition variable kept as is: no added variance "
        "(outside merged partition sets).",
        "- A proportion of the n records: divide the bound by n^2."
        + (" A weighted total: multiply the bound by the square of the file's largest "
           "weight." if config.input.weight else ""),
        "- Add the bound to the sampling variance; its square root is a conservative added "
        "standard error (the bound is at least the exact added variance).",
    ]
    for k, rows in fig["variables"].items():
        rule = config.partition.get(k)
        if rule == "as_is" or isinstance(rule, AsIs):
            lines += ["", f"### {md_code(k)}", "", "Kept as is (partition variable): no added "
                      "variance outside merged partition sets."]
            continue
        kv = config.key_variables[k]
        lines += ["", f"### {md_code(k)}", "", "| value | label | c (rare combinations, rounded up) "
                  "| added variance of the count at most | added SD at most |",
                  "|---|---|---|---|---|"]
        positive = [r for r in rows if r[1] > 0]  # one pass (a range may have millions)
        shown = positive[:_MAX_ROWS]
        for v, c, b in shown:
            label = kv.labels.get(v, "") if v is not None else "(missing)"
            lines.append(f"| {md_text('' if v is None else v)} | {md_text(label)} | {c:,} | {b:,.1f} | "
                         f"{math.sqrt(b):,.1f} |")
        hidden = len(positive) - len(shown)
        zero = len(rows) - len(positive)  # counts are >= 0
        if hidden:
            lines.append(f"| ... | | {hidden} more values | | |")
        if zero:
            lines += ["", f"{zero} value(s) have no rare combination: their counts carry no "
                      "added variance."]
    return lines


#: a key with at most this many categories gets its full matrix in the codebook
FULL_MATRIX = 12


def _p(x: float) -> str:
    """A probability to 3 decimals; a positive one below 0.0005 as "<0.001"."""
    return "<0.001" if 0 < x < 0.0005 else f"{x:.3f}"


def misclassification_markdown(config: ReleaseConfig, result: ReleaseOutcome,
                               min_group: int = 10) -> list[str]:
    """The codebook section *Misclassification by key*: per key that PRAM can change,
    P(released w | original v) from the design's exact expectation given the original
    frequencies (:func:`sdc.method.misclassification.key_misclassification`), rounded to
    3 decimals, for original categories of at least ``min_group`` records; the full matrix for
    keys of at most :data:`FULL_MATRIX` categories, else each category's probability of being
    kept and its three likeliest other values. Why this is safe: docs/METHOD.md,
    "Publishing the per-key misclassification"."""
    from sdc.method.misclassification import key_misclassification
    from sdc.reports.expected import transition_design

    if config.input.household_id is not None:
        return []   # the household keys move in the household stage: not this design
    try:
        _, design = transition_design(result)
    except (AttributeError, KeyError, ValueError):   # an outcome without a design
        return []
    t = np.asarray(result.cells.frequency, dtype=np.float64)
    kc = np.asarray(result.cells.key_codes)
    names = list(result.cells.names)
    out: list[str] = []
    for j, k in enumerate(names):
        kv = config.key_variables[k]
        if kv.size > 10_000:   # a key of 10^4+ values: no table a reader could use
            continue
        m = key_misclassification(t, kc[:, j], kv.size, design)
        n_v = m.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(n_v[:, None] > 0, m / np.maximum(n_v, 1)[:, None], 0.0)
        rows = np.flatnonzero((n_v >= min_group) & (np.diag(p) < 1 - 5e-4))
        if not rows.size:
            continue
        dom = kv.domain + ([None] if kv.missing == "category" else [])

        def name(c: int, dom: list = dom, kv: Any = kv) -> str:
            v = dom[c]
            lab = kv.labels.get(v, "") if v is not None else "(missing)"
            return md_text("" if v is None else v) + (f" ({md_text(lab)})" if lab else "")

        out += ["", f"### {md_code(k)}", ""]
        if kv.size <= FULL_MATRIX:
            seen = np.flatnonzero(n_v >= min_group)
            out += ["| original \\ released | " + " | ".join(name(c) for c in seen) + " |",
                    "|---|" + "---|" * len(seen)]
            out += [f"| {name(r)} | " + " | ".join(_p(p[r, c]) for c in seen) + " |"
                    for r in seen]
        else:
            out += ["| original value | kept | likeliest other released values |",
                    "|---|---|---|"]
            for r in rows:
                other = [c for c in np.argsort(-p[r], kind="stable") if c != r and p[r, c] > 0]
                out.append(f"| {name(r)} | {_p(p[r, r])} | "
                           + ", ".join(f"{name(c)}: {_p(p[r, c])}" for c in other[:3]) + " |")
        kept = len(np.flatnonzero(n_v >= min_group)) - rows.size
        if kept and kv.size > FULL_MATRIX:
            out.append(f"\n{kept} other value(s) of at least {min_group} records: kept with "
                       "probability above 0.9995.")
    if not out:
        return []
    return ["", "## Misclassification by key", "",
            "P(released value w | original value v) for every key that post-randomization can "
            "change: the design's exact expectation given the original file's frequencies "
            f"(not a simulation), rounded to 3 decimals; values of fewer than {min_group} "
            "records are not listed. A record that moves takes a whole other combination of "
            "key values, so the keys' misclassifications are not independent of each other. "
            "Uses: the released shares q of a key are, in expectation, P' p (P this matrix, p "
            "the original shares), so p = (P')^-1 q corrects a table of one key (the matrix "
            "method; it adds variance where P is close to singular); for a regression on a key, "
            "MC-SIMEX (Kuchenhoff, Mwalili & Lesaffre 2006, Biometrics 62) adds further "
            "misclassification P^lambda for lambda = 0.5 ... 2 and extrapolates the "
            "coefficients back to lambda = -1 (R package simex, function mcsimex, with this "
            "matrix as mc.matrix)."] + out
