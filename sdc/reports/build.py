"""Risk and utility reports of a release: ``risk.json``, ``utility.json`` and ``report.html``.

The flow calls :func:`reports_from_aggregates` (through
:func:`sdc.pipeline.report_parts.batch_reports`) once per release and writes
:meth:`Reports.files` into the release's ``internal/`` folder; ``sdc report RELEASE_DIR`` calls :func:`render_release_report`,
which re-renders the HTML from the two JSON files alone (the page is a pure function of them).
:func:`headline` picks the few numbers published as Prefect artifacts.

What every number means: ``docs/REPORTS.md``; the JSON shapes: :mod:`sdc.reports.schema`
(``docs/report_schema/*.json``). The page shows aggregates only: counts, shares, distances,
risks and summary statistics of groups of at least ``numeric_min_group`` records - never a
record-level value, never an id or a direct identifier.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.json_text import dumps_indented
from sdc.method.designs.households import release_household_design
from sdc.method.outcome import ReleaseOutcome
from sdc.reports.aggregate import ReleaseAggregates, partition_set_rows
from sdc.reports.disclosure import risk_summary_cells
from sdc.reports.html import render_html
from sdc.reports.intruder import intruder as intruder_result
from sdc.reports.intruder import plan_design
from sdc.reports.overview import design_of
from sdc.reports.utility import compute_utility

__all__ = ["Reports", "build_risk", "dumps", "headline",
           "render_release_report", "reports_from_aggregates", "series_section",
           "utility_headline"]

RISK_FILE, UTILITY_FILE, HTML_FILE = "risk.json", "utility.json", "report.html"


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------
def _clean(obj: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, NaN/inf to None, floats to 12 significant
    digits (so sums whose last bits depend on summation order serialize identically)."""
    t = type(obj)  # the common exact types first (the reports hold ~40,000 values)
    if t is float:
        return float(f"{obj:.12g}") if math.isfinite(obj) else None
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is dict:
        return {str(k): _clean(v) for k, v in obj.items()}
    if t is list:
        return [_clean(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return float(f"{x:.12g}")
    return obj


def dumps(obj: Any, *, clean: bool = True) -> bytes:
    """Deterministic JSON bytes: sorted keys, 2-space indent, no NaN (null), trailing newline
    (``clean=False``: ``obj`` is :func:`_clean`'s output already, which cleaning again would
    not change)."""
    return (dumps_indented(_clean(obj) if clean else obj, sort_keys=True, allow_nan=False)
            + "\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# risk.json
# --------------------------------------------------------------------------------------------
def _profile_dict(profile: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in str(profile).split(","):
        if part.strip():
            t, m = part.split(":")
            out[str(int(t))] = int(m)
    return out


#: the block table's columns risk.json's ``prbs`` reads
_PRB_COLUMNS = ("prb", "partition_key", "n_partition_sets", "k", "n_records", "profile",
                "theta", "kmin", "max_risk", "max_risk_t", "max_risk_a", "max_risk_pick",
                "max_risk_t_z", "own_max_risk", "other_max_risk", "action",
                "expected_changed", "changed")


def build_risk(original: pd.DataFrame | None, result: ReleaseOutcome, config: ReleaseConfig, *,
               seed: int, n_sim: int = 200, agg: ReleaseAggregates | None = None
               ) -> dict[str, Any]:
    """The content of ``risk.json`` (see :mod:`sdc.reports.schema`).

    Computed from the cell table and the released cells (``agg``, built here when not
    given): sdcMicro's measures per cell (:func:`sdc.reports.aggregate.risk_summary_cells`),
    the partition sets after release by cell, and the intruder on the PRBs' cells.
    """
    xi = float(result.xi)
    weight = config.input.weight
    if agg is None:
        # PRAM never changes a weight, so the input's weights serve "after" too, also when
        # input.drop keeps the weight out of the public file
        from sdc.reports.accumulate import frame_accumulator

        agg = frame_accumulator(original, result, config, numeric=False).aggregates()
    n = int(agg.t_before.sum())
    # before: the cells' t_j; after: the released cells (PRAM moves a record into another
    # existing cell with all its key values, so no re-scan of the released records is needed)
    before = risk_summary_cells(agg.t_before, agg.w_before, xi)
    after = risk_summary_cells(agg.t_after, agg.w_after, xi)
    ps_rows = partition_set_rows(result, agg, xi)

    prbs = []
    # the blocks' rows as Python values (one conversion per column, not a Series per row)
    for b in result.blocks[list(_PRB_COLUMNS)].to_dict("records"):
        prbs.append({
            "prb": int(b["prb"]), "partition_key": str(b["partition_key"]),
            "n_partition_sets": int(b["n_partition_sets"]), "k": int(b["k"]),
            "n_records": int(b["n_records"]), "profile": _profile_dict(b["profile"]),
            "theta": float(b["theta"]), "kmin": int(b["kmin"]),
            "max_risk": float(b["max_risk"]), "max_risk_t": int(b["max_risk_t"]),
            "max_risk_a": int(b["max_risk_a"]), "max_risk_pick": str(b["max_risk_pick"]),
            "max_risk_t_z": int(b["max_risk_t_z"]), "own_max_risk": float(b["own_max_risk"]),
            "other_max_risk": float(b["other_max_risk"]), "action": str(b["action"]),
            "expected_changed": float(b["expected_changed"]), "changed": int(b["changed"]),
            "pass": bool(float(b["max_risk"]) <= xi + 1e-12),
        })

    intruder = intruder_result(result.cells.frequency, result.cell_prb, result.blocks,
                               seed=seed, n_sim=n_sim, xi=xi,
                               **plan_design(getattr(result, "plan", None), result.cell_prb))
    n_changed = agg.n_changed
    at = {k: v for k, v in result.certificate_at.items()}
    return {
        "schema_version": "sdc-risk/1",
        "release": {
            "name": config.name, "n_records": n, "key_variables": config.key_names,
            "partition_variables": config.partition_variables, "weight": weight,
            "xi": xi, "theta": float(result.theta), "kmin": int(result.kmin),
            "theta_mode": config.risk.theta, "small_blocks": config.risk.small_blocks,
            "design": design_of(config, getattr(result, "plan", None),
                                getattr(getattr(result, "households", None), "design", None)),
            **({"perturb": perturb_section(config)} if config.perturb else {}),
        },
        "verdict": {
            "certificate": float(result.certificate), "xi": xi,
            "pass": bool(result.certificate <= xi + 1e-12), "at": at,
            "n_prb": len(prbs), "n_changed": n_changed,
            "share_changed": n_changed / n if n else 0.0,
            "n_partition_sets": len(ps_rows), "merges": list(result.merges),
        },
        "before": before,
        "after": after,
        "partition_sets": ps_rows,
        "prbs": prbs,
        "intruder": intruder,
        **({"dependence": dependence_section(result, config)}
           if getattr(result, "dependence", None) is not None else {}),
    }


def dependence_section(result: Any, config: ReleaseConfig) -> dict[str, Any]:
    """``risk.json``'s ``dependence``: the dependence check's figures per checked non-key
    column (what ``audit.json`` records; docs/METHOD.md), for the page."""
    out = {"columns": [f.as_dict() for f in result.dependence],
           "derived": list(config.derived)}
    st = getattr(result, "households", None)
    if st is not None:  # the household stage's: household columns, members' person columns
        out["households"] = [f.as_dict() for f in getattr(st.result, "dependence", [])]
    return out


def perturb_section(config: ReleaseConfig) -> list[dict[str, Any]]:
    """``risk.json``'s ``release.perturb``: per DP-PRAM variable its eps and whether the
    guarantee holds (a domain taken from the data, ``domain_from_data: true``, is not
    differentially private: the report page says so, as the codebook does)."""
    from sdc.method.perturb import NOT_DP

    return [{"variable": v, "epsilon": float(p.epsilon),
             "differentially_private": not p.domain_from_data,
             "domain": ("public: " + str(len(p.categories)) + " declared categories"
                        if p.categories is not None else NOT_DP)}
            for v, p in config.perturb.items()]


def series_section(risk_vs_previous: dict[str, Any]) -> dict[str, Any]:
    """``risk.json``'s ``series`` object from the flow's comparison with the previous release
    of the series (``audit.json``'s ``series.risk_vs_previous``, docs/SERIES.md): the same
    figures, with the previous release named by its folder name only (no path, no seed).

    Aggregates only: records in both releases, how many changed their released key values
    (share = n_changed / n_common), and the linking intruder's correct-match rate per
    (t_j, a) class and over all targets with a = 1 matching record, next to xi.
    """
    r = risk_vs_previous
    out: dict[str, Any] = {"previous": Path(str(r["previous"])).name}
    if "error" in r:
        out["error"] = str(r["error"])
        return out
    keys = ("n_common", "n_changed", "changed_share", "rate_one_match_series",
            "rate_one_match_single", "xi")
    out.update({k: r[k] for k in keys})
    out["intruder"] = [{k: c[k] for k in ("t", "a", "n_series", "series_rate", "n_single",
                                         "single_rate")} for c in r["intruder"]]
    return out


# --------------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reports:
    """The three report files of a release (contents; the flow writes them into internal/)."""

    risk: dict[str, Any]
    utility: dict[str, Any]
    html: str

    def files(self) -> dict[str, bytes]:
        """``{"risk.json", "utility.json", "report.html"}`` as bytes (deterministic JSON)."""
        # reports_from_aggregates cleaned both documents
        return {RISK_FILE: dumps(self.risk, clean=False),
                UTILITY_FILE: dumps(self.utility, clean=False),
                HTML_FILE: self.html.encode("utf-8")}


def reports_from_aggregates(original: pd.DataFrame | None, result: Any, config: ReleaseConfig,
                            agg: ReleaseAggregates, *, seed: int, n_sim: int = 200,
                            series: dict[str, Any] | None = None,
                            summaries: dict[str, Any] | None = None,
                            moments: dict[str, Any] | None = None,
                            analyses: list[Any] | None = None) -> Reports:
    """Risk (before/after, certificate, Monte Carlo intruder), utility and the HTML page from the release's :class:`sdc.reports.accumulate.
    ReleaseAccumulator`: its ``agg`` and ``summaries`` (:meth:`~sdc.reports.accumulate.
    ReleaseAccumulator.group_summaries`) and ``moments`` (:meth:`~sdc.reports.accumulate.
    ReleaseAccumulator.cell_moments`) and ``analyses`` (its ``utility.analyses`` sums).
    ``original``: the input frame when the release was
    made in memory (a household release's sections are measured from it), else None."""
    risk = build_risk(original, result, config, seed=seed, n_sim=n_sim, agg=agg)
    if series is not None:
        risk["series"] = series_section(series)
    risk = _clean(risk)
    utility = compute_utility(original, result, config, agg=agg, summaries=summaries,
                              moments=moments)
    if analyses:
        utility["analysis"]["analyses"] = [a.result() for a in analyses]
    if config.recoded_keys:
        from sdc.reports.recoding import fine_counts, recoding_section

        left = getattr(getattr(getattr(result, "counted", None), "agg", None), "left_out", None)
        utility["recoding"] = recoding_section(
            config, fine_counts(config, skip=None if left is None else left.rows),
            result.cells.key_codes, result.cells.frequency)
    # a household release brings its households sections, built from its parts
    parts = getattr(result, "household_report", None)
    if parts is not None:
        section = parts["risk"]
        risk["households"] = _clean(section)
        utility["households"] = parts["utility"]
        protect = release_household_design(config, result).protect
        if not section["pass"] and (config.risk.households == "fail" or protect):
            from sdc.errors import HouseholdRiskError

            # under protect every level is certified exactly: nothing above xi is published,
            # whatever risk.households says (issue 44)
            raise HouseholdRiskError(
                f"household file: {section['message']}"
                + ("" if protect else " (risk.households: fail)") + "; nothing was "
                f"written. Fixes: {'; '.join(section['fixes'])}"
                + ("" if protect else "; or set risk.households: warn to publish with the "
                   "measured risk in the report"))
    utility = _clean(utility)
    # not validated against the schema here (0.07-0.25 CPU s per release, pure-Python
    # jsonschema): the tests validate every release path's documents (tests/contract), and
    # documents read back from a folder are validated (render_release_report, sdc audit)
    return Reports(risk, utility, render_html(risk, utility))


def headline(risk: dict[str, Any], utility: dict[str, Any]) -> dict[str, Any]:
    """A few numbers for a Prefect artifact (all JSON scalars)."""
    v = risk["verdict"]
    b, a = risk["before"], risk["after"]
    kv = utility.get("key_variables", [])
    wmax = [e["weighted"]["max_abs_share_difference"] for e in kv if e.get("weighted")]
    return {
        "certificate": v["certificate"], "xi": v["xi"], "pass": v["pass"],
        "n_records": risk["release"]["n_records"], "n_changed": v["n_changed"],
        "share_changed": v["share_changed"], "n_prb": v["n_prb"],
        "er_before": b["sdcmicro"]["expected_reidentifications"],
        "er_after": a["sdcmicro"]["expected_reidentifications"],
        "global_risk_before": b["sdcmicro"]["global_risk"],
        "global_risk_after": a["sdcmicro"]["global_risk"],
        "unique_records_before": b["k_anonymity"][0]["records_violating"],
        "unique_records_after": a["k_anonymity"][0]["records_violating"],
        "intruder_max_estimate": risk["intruder"].get("max_estimate"),
        "max_tvd": max((e["tvd"] for e in kv), default=0.0),
        "max_weighted_share_difference": max(wmax) if wmax else None,
        **{f"utility_{k}": v for k, v in utility_headline(utility).items()
           if not isinstance(v, list)},
    }


def utility_headline(utility: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of what analysts compute (``sdc release --json``'s ``utility``):
    the mean number of keys a moved record changes, the median displacement per ordered
    key, the largest coefficient shift (in SE) and R^2 before/after of the regressions on
    the keys and of every ``utility.analyses`` formula, the largest mean shift (in SE)."""
    an = utility.get("analysis") or {}
    disp = an.get("displacement") or {}
    regs = [r for r in an.get("regressions", []) if not r.get("skipped")]
    shifts = [b["max_abs_shift_se"] for b in an.get("mean_shifts", [])
              if b.get("max_abs_shift_se") is not None]
    rshifts = [r["max_abs_shift_se"] for r in regs if r.get("max_abs_shift_se") is not None]
    return {
        "mean_keys_changed": disp.get("mean_keys_changed"),
        "median_displacement": [{"key": k["name"], "median": k["median"], "p90": k["p90"]}
                                for k in disp.get("keys", [])],
        "max_regression_shift_se": max(rshifts) if rshifts else None,
        "max_mean_shift_se": max(shifts) if shifts else None,
        "regressions": [{"variable": r["variable"], "r2_before": r["r2_before"],
                         "r2_after": r["r2_after"], "max_abs_shift_se": r["max_abs_shift_se"]}
                        for r in regs],
        "analyses": [{"name": a["name"], "r2_before": a["r2_before"], "r2_after": a["r2_after"],
                      "max_abs_shift_se": a["max_abs_shift_se"], "error": a["error"]}
                     for a in an.get("analyses", [])],
    }


def _write_private(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _changed_since_release(internal: Path, name: str) -> str:
    """Why ``internal/name`` is not the file the release wrote (its SHA-256 differs from the
    one ``audit.json`` records), or nothing (the same, or no record to compare with)."""
    import hashlib

    try:
        audit = json.loads((internal / "audit.json").read_text(encoding="utf-8"))
        recorded = (audit.get("internal_files") or {}).get(name)
        now = hashlib.sha256((internal / name).read_bytes()).hexdigest()
    except (OSError, ValueError, AttributeError):
        return ""
    if recorded and now != recorded:
        return (f"its SHA-256 differs from the one internal/audit.json records for {name}: it "
                "was edited after the release")
    return ""


def render_release_report(release_dir: Path) -> Path:
    """Re-render ``RELEASE_DIR/internal/report.html`` from ``risk.json`` and ``utility.json``.

    Only the files the release wrote are rendered: one whose SHA-256 differs from the one
    ``audit.json`` records is refused (``InputError``: exit 2), as is one that does not follow
    the documented schema (``ReportSchemaError``, an ``InputError``); the page is written
    atomically with mode 0600. Returns the path of the page.
    """
    internal = Path(release_dir) / "internal"
    docs = {}
    for name in (RISK_FILE, UTILITY_FILE):
        p = internal / name
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} does not exist; RELEASE_DIR must be a release folder written by "
                "'sdc release' (it holds internal/risk.json and internal/utility.json)"
            )
        changed = _changed_since_release(internal, name)
        if changed:  # an auditor's page shows what the release recorded, nothing edited later
            from sdc.errors import InputError

            raise InputError(
                f"{p} is not the file the release wrote ({changed}); the page is rendered only "
                "from the reports the release wrote, not even with --force (which only lets "
                "it replace a page the release did not write). Restore the file (`sdc audit` "
                "names every changed file) or re-run the release")
        try:
            docs[name] = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            from sdc.errors import InputError

            raise InputError(f"{p} is not valid JSON ({e}); re-run the release to rewrite "
                             "it") from None
    from sdc.reports.schema import validate

    validate(docs[RISK_FILE], docs[UTILITY_FILE], where=str(internal))  # exit 2 naming the field
    out = internal / HTML_FILE
    _write_private(out, render_html(docs[RISK_FILE], docs[UTILITY_FILE]).encode("utf-8"))
    return out
