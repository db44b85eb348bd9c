"""The release flow's summary: the JSON-friendly return value of a run (certificate next to
xi, blocks, records changed, the household stages) and the Prefect artifacts' markdown and
PRB table. Aggregates only: nothing record-level."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.method.outcome import ReleaseOutcome
from sdc.method.plan import expected_changed

__all__ = ["artifact_key", "blocks_table", "household_warnings", "pair_warnings", "summarize",
           "summary_markdown"]


def summarize(config: ReleaseConfig, result: ReleaseOutcome, *, n_records: int,
              release_dir: Path | None = None, seed_created: bool = False,
              seed_file: Path | None = None,
              warnings: list[str] | None = None, seconds: float | None = None) -> dict[str, Any]:
    """The flow's return value: plain JSON types only, nothing record-level.

    ``expected_changed`` is sum over PRBs of theta_b * k_b (NZY: a record of a cell with
    frequency t moves with probability theta/t, and the t records of the cell give theta in
    expectation, so each PRB changes theta * k records on average); in the weighted mode the
    sum of t_j m_j of its design (:func:`sdc.method.plan.expected_changed`). A household
    file's is the persons both stages (or the composition stage) change, with its SD
    (``expected_changed_sd``; :func:`sdc.pipeline.household_result.expected_changes`).
    """
    blocks = result.blocks
    expected = expected_changed(
        blocks, getattr(result, "weighted", None)
        or getattr(getattr(result, "plan", None), "weighted", None))[0]
    sd = None
    st = getattr(result, "households", None)
    if st is not None and getattr(st, "expected_changed", None) is not None:
        # a household file: both stages (or the composition stage), exact (issue 44)
        expected, sd = float(st.expected_changed), float(np.sqrt(st.expected_changed_var))
    return {
        "name": config.name,
        "release_dir": str(release_dir) if release_dir is not None else None,
        "n": int(n_records),
        "n_partition_sets": int(len(result.partition_sets)),
        "n_prbs": int(len(blocks)),
        "n_cells": int(result.cells.n_cells),
        "n_sensitive_cells": int(result.sensitive_cell.sum()),
        "theta": float(result.theta),
        "theta_mode": config.risk.theta,
        "kmin": int(result.kmin),
        "xi": float(result.xi),
        "certificate": float(result.certificate),
        "certified": bool(result.certificate <= result.xi + 1e-12),
        "records_changed": int(result.n_changed),
        "expected_changed": expected,
        "expected_changed_sd": sd,
        "actions": {str(k): int(v) for k, v in blocks["action"].value_counts().items()},
        "merges": list(result.merges),
        "largest_merge": _largest_merge(result),
        "households": _household_summary(result),
        "seed_created": bool(seed_created),
        "seed_file": str(seed_file) if seed_file is not None else None,
        "warnings": list(warnings or []),
        "seconds": round(seconds, 3) if seconds is not None else None,
    }


def _household_summary(result: Any) -> dict[str, Any] | None:
    """A household release's stage figures for the run summary (None: a person file)."""
    st = getattr(result, "households", None)
    if st is None:
        return None
    comp = getattr(st, "composition", None) or {}
    return {"n": int(st.n_households), "changed": int(np.asarray(st.changed).sum()),
            "prbs": int(len(st.result.blocks)), "certificate": float(st.certificate),
            "composition_mode": comp.get("mode", "measure"),
            "composition": float(
                (comp.get("large_groups") or {}).get("certificate",
                                                     comp.get("certificate",
                                                              comp.get("max_class_estimate",
                                                                       0.0)))),
            **({"large_groups": int(comp["large_groups"]["threshold"])}
               if comp.get("mode") == "large_groups" else {}),
            **({"members": "sampled", "threat_model": _sampled_text()}
               if (comp.get("large_groups") or {}).get("members") == "sampled" else {}),
            # protect: the household keys x size level and the sizes no release protects
            **({"size_level": float(comp["size_level"]["enforced"]),
                "exposed_sizes": list(comp["size_level"]["exposed_sizes"])}
               if comp.get("size_level") else {}),
            **({"left_out": left} if (left := ((getattr(result, "household_report", None)
                                                  or {}).get("risk") or {}).get("left_out"))
               else {})}


def _sampled_text() -> str:
    from sdc.method.group_composition import SAMPLED_MEMBERS

    return SAMPLED_MEMBERS


def _largest_merge(result: Any) -> dict[str, Any] | None:
    """The PRB joining the most partition sets (either stage of a household file): its
    stage, number of partition sets and partition key; None without merges."""
    st = getattr(result, "households", None)
    tables = [("person" if st is not None else "", result.blocks)]
    if st is not None:
        tables.append(("household", st.result.blocks))
    best = None
    for stage, b in tables:
        if not len(b) or "n_partition_sets" not in b.columns:
            continue
        i = int(np.argmax(b["n_partition_sets"].to_numpy()))
        n = int(b["n_partition_sets"].iloc[i])
        if n > 1 and (best is None or n > best["partition_sets"]):
            best = {"stage": stage, "partition_sets": n, "partition_key": str(b["partition_key"].iloc[i])}
    return best


def pair_warnings(result: Any, config: ReleaseConfig) -> list[str]:
    """The dependence check's warning when some pairs of columns were not checked (more
    integer or discrete non-key columns than it pairs: docs/METHOD.md, "Pairs of columns"),
    from the public schema, as the count pass chose them."""
    from sdc.method.dependence import checked_columns, pair_plan, schema_kinds
    from sdc.method.household_batches import household_pair_plans

    schema = getattr(result, "schema", None)
    if schema is None:
        return []
    names = [n for n in schema.names if n != "record_id"]
    if config.input.household_id is not None:  # each stage's pairs
        plans = household_pair_plans(names, schema_kinds(schema), config)
        return [f"{stage} stage: {w}" for stage, p in plans.items() if (w := p.warning())]
    plan = pair_plan(checked_columns(names, config), schema_kinds(schema), config)
    w = plan.warning()
    out = [w] if w else []
    from sdc.method.dependence.relations import SORTED_RECORDS

    if plan.sorted and int(getattr(result, "n_records", 0) or 0) > SORTED_RECORDS:
        out.append(f"dependence check: the relations between rows of {', '.join(plan.sorted)} "
                   f"(the file sorted by each: differences, ranks) were not checked: the file "
                   f"has more than {SORTED_RECORDS:,} records (docs/METHOD.md, 'Relations an "
                   "intruder computes')")
    return out


_BLOCK_COLUMNS = ["prb", "partition_key", "n_partition_sets", "k", "n_records", "profile",
                  "theta", "max_risk", "action", "expected_changed", "changed"]


def household_warnings(result: Any) -> list[str]:
    """A household release whose composition intruder exceeds xi (``risk.households: warn``)
    is published with this warning (docs/HOUSEHOLDS.md)."""
    st = getattr(result, "households", None)
    comp = getattr(st, "composition", None) if st is not None else None
    if not comp or not comp.get("exceeds_xi"):
        return []
    if comp.get("mode") == "large_groups":
        lg = comp["large_groups"]
        return [f"grouped file: the composition intruder of the groups of at most "
                f"{lg['threshold']} members (risk.large_groups) picks the right group with "
                f"probability up to {lg['certificate']:.4f} (exact), above xi = {lg['xi']}: "
                "small groups' composition not protected (risk.households: warn); see the "
                "report's household section for the fixes"]
    return [f"household file: the composition intruder (who knows a household's household-level "
            f"keys and its members' person-level keys) picks the right household with "
            f"probability {comp['max_class_estimate']:.4f} in the riskiest class (Monte Carlo), "
            f"above xi = {comp['xi']}: household composition not protected "
            "(risk.households: warn); see the report's household section for the fixes, or remove "
            "risk.households: warn to refuse such releases (the default)"]


def blocks_table(blocks: pd.DataFrame) -> list[dict[str, Any]]:
    """The PRB table as rows of plain values (for the Prefect table artifact and the CLI)."""
    cols = [c for c in _BLOCK_COLUMNS if c in blocks.columns]
    out = blocks[cols].copy()
    for c in ("theta", "max_risk"):
        if c in out:
            out[c] = out[c].round(6)
    if "expected_changed" in out:
        out["expected_changed"] = out["expected_changed"].round(2)
    return json.loads(out.to_json(orient="records"))


def summary_markdown(summary: dict[str, Any]) -> str:
    """The markdown artifact: one small table of release-level numbers."""
    ok = "yes" if summary["certified"] else "**NO**"
    merges = "; ".join(summary["merges"]) if summary["merges"] else "none"
    actions = ", ".join(f"{k}: {v}" for k, v in summary["actions"].items()) or "none"
    rows = [
        ("records (n)", f"{summary['n']:,}"),
        ("partition sets", f"{summary['n_partition_sets']:,}"),
        ("post-randomization blocks (PRBs)", f"{summary['n_prbs']:,}"),
        ("sensitive cells / non-empty cells",
         f"{summary['n_sensitive_cells']:,} / {summary['n_cells']:,}"),
        (f"theta ({summary['theta_mode']})", f"{summary['theta']:.4f} (kmin = {summary['kmin']})"),
        ("certificate max R_j(a, t)", f"{summary['certificate']:.6f}"),
        ("xi", f"{summary['xi']}"),
        ("certificate <= xi", ok),
        ("records changed", f"{summary['records_changed']:,} "
                            f"(expected {summary['expected_changed']:,.1f}"
                            + (f", SD {summary['expected_changed_sd']:,.1f})"
                               if summary.get("expected_changed_sd") is not None else ")")),
        ("block actions", actions),
        ("merges", merges),
        ("release folder", f"`{summary['release_dir']}`"),
    ]
    head = summary.get("headline")
    if head:
        rows[-1:-1] = [
            ("unique records (fk = 1) in the original file", f"{head['unique_records_before']:,}"),
            ("sdcMicro expected re-identifications, original file", f"{head['er_before']:,.1f}"),
            ("largest marginal TVD", f"{head['max_tvd']:.5f}"),
        ]
        shift = head.get("utility_max_regression_shift_se")
        if shift is not None:
            rows[-1:-1] = [("largest coefficient shift of a regression on the keys",
                            f"{shift:.1f} SE (report: What analysts compute)")]
    lines = [f"# Release `{summary['name']}`", "", "| | |", "|---|---|"]
    lines += [f"| {a} | {_md_cell(b)} |" for a, b in rows]
    if summary["warnings"]:
        lines += ["", "**Warnings**", ""] + [f"- {w}" for w in summary["warnings"]]
    return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    """Partition keys contain '|' ("sex=Male | age=0-17"): escape it inside table cells."""
    return text.replace("|", "\\|").replace("\n", " ")


def artifact_key(prefix: str, name: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return f"{prefix}-" + (re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "job")
