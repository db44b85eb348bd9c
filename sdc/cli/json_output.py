"""``--json`` on ``sdc plan``, ``validate``, ``audit``, ``release``, ``approve`` and ``reject``: one JSON document on
stdout with the same figures as the tables, and errors as JSON documents.

The schemas (JSON Schema draft 2020-12) live here, in :data:`SCHEMAS`; ``docs/cli_json/`` holds
copies written by ``python -m sdc.cli.json_output docs/cli_json`` (a test checks they are
current) and every test of a ``--json`` output validates it against its schema.

Every document has ``"command"`` (plan | validate | audit | release | approve | reject |
error) and
``"format": "sdc-cli/1"``. Errors: ``{"command": "error", "format", "for": <command>,
"exit_code": 1 | 2, "error": <exception class>, "message": <the same paragraph as without
--json>}`` on stdout, and the process exits with ``exit_code``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "SCHEMAS", "audit_document", "decision_document", "error_document",
           "plan_document",
           "print_document", "release_document", "validate", "validate_document",
           "write_schemas"]

FORMAT = "sdc-cli/1"

_S = {"type": "string"}
_NS = {"type": ["string", "null"]}
_I = {"type": "integer", "minimum": 0}
_NI = {"type": ["integer", "null"], "minimum": 0}
_N = {"type": "number"}
_B = {"type": "boolean"}


def _d(schema: dict[str, Any], desc: str) -> dict[str, Any]:
    return {**schema, "description": desc}


def _obj(props: dict[str, Any], desc: str = "", extra: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "required": sorted(props),
                           "additionalProperties": extra}
    if desc:
        out["description"] = desc
    return out


def _doc(command: str, props: dict[str, Any], desc: str) -> dict[str, Any]:
    schema = _obj({
        "command": _d({"const": command}, "The command that wrote this document."),
        "format": _d({"const": FORMAT}, "Version of these documents."),
        **props,
    }, desc)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://sdc.local/schemas/cli/{command}.schema.json",
            "title": f"sdc {command} --json", **schema}


_PRB = _obj({
    "prb": _d({"type": "integer"}, "PRB number."),
    "partition_key": _d(_S, "Partition set(s) of the PRB (merged ones joined by ' + ')."),
    "n_partition_sets": _d(_I, "Partition sets in the PRB (> 1: merged)."),
    "k": _d(_I, "Cells in the PRB."),
    "n_records": _d(_I, "Records in the PRB."),
    "profile": _d(_S, "Frequency profile 't:cells, ...'."),
    "theta": _d(_N, "The PRB's theta."),
    "max_risk": _d(_N, "Exact max over cells and a of R_j(a, t)."),
    "action": _d(_S, "theorem | calibrated | merged | merged+calibrated ..."),
    "expected_changed": _d(_N, "theta * k: expected records changed."),
    "changed": _d({"type": ["integer", "null"]}, "Records changed with the seed (null: no seed yet)."),
}, "One post-randomization block (internal figures: plan is an agency tool).")

_PSET = _obj({
    "partition_key": _d(_S, "Partition set label."),
    "n_records": _d(_I, "Records."),
    "n_cells": _d(_I, "Non-empty cells."),
    "n_sensitive_cells": _d(_I, "Cells with t < 1/xi."),
    "n_sensitive_records": _d(_I, "Records in sensitive cells."),
    "prb": _d({"type": "integer"}, "PRB number (-1: none)."),
}, "One partition set.")


def _decision_schema(command: str) -> dict[str, Any]:
    done = "published" if command == "approve" else "deleted (nothing published)"
    return _doc(command, {
        "decision": _d({"const": "approved" if command == "approve" else "rejected"},
                       "The decision given."),
        "by": _d(_S, "The reviewer (--as)."),
        "comment": _d(_S, "The comment recorded with the decision ('' when none)."),
        "via": _d({"enum": ["folder", "flow_run"]},
                  f"folder: the staged release was {done} by this command; flow_run: the "
                  "decision was sent to the flow run paused for review, which applies it "
                  "(see its logs in the Prefect UI)."),
        "flow_run_id": _d(_NS, "The paused flow run the decision was sent to (via flow_run)."),
        "release_dir": _d(_NS, "The release folder (via folder; null via flow_run)."),
        "staged_dir": _d(_NS, "The staged folder (via folder; null via flow_run)."),
        "at": _d(_NS, "When the decision was applied, ISO 8601 UTC (via folder)."),
        "manifest_sha256": _d(_NS, "SHA-256 of the staged manifest the decision is about "
                                   "(via folder)."),
    }, f"A review decision ({command}).")


SCHEMAS: dict[str, dict[str, Any]] = {
    "plan": _doc("plan", {
        "name": _d(_S, "Release job name."),
        "config": _d(_S, "Config file (absolute)."),
        "input": _d(_S, "Input file (absolute)."),
        "release_dir": _d(_S, "Release folder the config names."),
        "release_exists": _d(_B, "The release folder exists (`sdc release` needs --force)."),
        "n_records": _d(_I, "Records."),
        "n_cells": _d(_I, "Non-empty cells."),
        "n_sensitive_cells": _d(_I, "Sensitive cells (t < 1/xi)."),
        "n_sensitive_records": _d(_I, "Records in sensitive cells."),
        "n_partition_sets": _d(_I, "Partition sets."),
        "n_prbs": _d(_I, "Post-randomization blocks."),
        "xi": _d(_N, "Risk target."),
        "theta": _d(_N, "The theorem's theta (h(theta) = xi) or the largest calibrated one."),
        "theta_mode": _d({"enum": ["theorem", "calibrated"]}, "risk.theta."),
        "kmin": _d(_I, "ceil(1/(1 - theta))."),
        "small_blocks": _d({"enum": ["merge", "calibrate", "fail"]}, "risk.small_blocks."),
        "small_block_actions": _d({"type": "object", "additionalProperties": _I},
                                  "Action -> number of PRBs that did not simply use the "
                                  "theorem's theta."),
        "merges": _d({"type": "array", "items": _S}, "Merges, in order."),
        "expected_changed": _d(_N, "Expected records changed of the configured design: sum over "
                                   "PRBs of theta * k (NZY), of t_j m_j (weighted)."),
        "changed": _d(_NI, "Records the release would change with the existing seed (null: "
                           "no seed file yet)."),
        "certificate": _d(_N, "Exact max R_j(a, t) over the release."),
        "certified": _d(_B, "certificate <= xi."),
        "certificate_at": _d({"type": "object"}, "Where the certificate is attained."),
        "notes": _d({"type": "array", "items": _S}, "Notes (e.g. the seed file is missing)."),
        "warnings": _d({"type": "array", "items": _S}, "The warnings the terminal prints (e.g. "
                                                       "more than 20% of the records changed)."),
        "partition_sets": _d({"type": "array", "items": _PSET}, "Every partition set."),
        "blocks": _d({"type": "array", "items": _PRB}, "Every PRB."),
    }, "What a release would do; nothing is written."),
    "validate": _doc("validate", {
        "name": _d(_S, "Release job name."),
        "valid": _d({"const": True}, "Always true: an invalid config or input is an error "
                                     "document instead."),
        "config": _d(_S, "Config file (absolute)."),
        "input": _d(_S, "Input file (absolute)."),
        "input_sha256": _d({"type": "string", "pattern": "^[0-9a-f]{64}$"}, "SHA-256 of the input."),
        "n_records": _d(_I, "Records."),
        "n_columns": _d(_I, "Columns."),
        "key_variables": _d({"type": "array", "items": _S}, "Key variables."),
        "n_cells": _d(_I, "Non-empty cells."),
        "n_sensitive_cells": _d(_I, "Sensitive cells."),
        "n_partition_sets": _d(_I, "Partition sets."),
    }, "The config and its input are valid."),
    "audit": _doc("audit", {
        "release_dir": _d(_S, "The audited release folder."),
        "staged": _d(_B, "The folder is a release staged for review (`<release>.staged`): "
                         "NOT published; `sdc approve` publishes it."),
        "passed": _d(_B, "Every check passed (exit code 0; else 1)."),
        "n_checks": _d(_I, "Checks run."),
        "n_failed": _d(_I, "Checks failed."),
        "checks": _d({"type": "array", "items": _obj({
            "name": _d(_S, "Check."), "ok": _d(_B, "Passed."), "detail": _d(_S, "What was found."),
        })}, "Every check, in order."),
    }, "Re-verification of a release folder."),
    "release": _doc("release", {
        "name": _d(_S, "Release job name."),
        "release_dir": _d(_S, "The published release folder."),
        "n_records": _d(_I, "Records."),
        "n_partition_sets": _d(_I, "Partition sets."),
        "n_prbs": _d(_I, "PRBs."),
        "n_cells": _d(_I, "Non-empty cells."),
        "n_sensitive_cells": _d(_I, "Sensitive cells."),
        "xi": _d(_N, "Risk target."),
        "theta": _d(_N, "theta."),
        "theta_mode": _d({"enum": ["theorem", "calibrated"]}, "risk.theta."),
        "kmin": _d(_I, "kmin."),
        "certificate": _d(_N, "Exact max R_j(a, t)."),
        "certified": _d(_B, "certificate <= xi."),
        "records_changed": _d(_I, "Records whose key values changed."),
        "expected_changed": _d(_N, "Expected records changed of the configured design: sum over "
                                   "PRBs of theta * k (NZY), of t_j m_j (weighted); a "
                                   "household file: the persons both stages (or the "
                                   "composition stage) change."),
        "expected_changed_sd": _d({"type": ["number", "null"]}, "Its standard deviation over "
                                  "releases (household files; null for person files)."),
        "actions": _d({"type": "object", "additionalProperties": _I}, "PRB action -> count."),
        "merges": _d({"type": "array", "items": _S}, "Merges."),
        "seed_created": _d(_B, "This run created the seed file."),
        "seed_file": _d(_NS, "The seed file (never the seed)."),
        "warnings": _d({"type": "array", "items": _S}, "Warnings."),
        "seconds": _d({"type": ["number", "null"]}, "Wall time of the flow."),
        "public_files": _d({"type": "array", "items": _S}, "Files in public/."),
        "utility": _d({"type": ["object", "null"]}, "What analysts compute (internal/"
                      "utility.json analysis; docs/REPORTS.md): mean_keys_changed, "
                      "median_displacement per ordered key, max_regression_shift_se, "
                      "max_mean_shift_se, regressions (R^2 before/after, largest shift in SE per "
                      "numeric variable ~ keys) and analyses (utility.analyses)."),
        "review": _d({"type": ["object", "null"]}, "null: published. Staged for review "
                     "(--review, config review:): status 'pending', staged_dir (release_dir "
                     "is the staged folder), the release folder it publishes to, approvers. "
                     "With --wait-for-review: status 'approved' (name, comment, at, release_dir: "
                     "published; exit 0) or 'rejected' (nothing published; exit 2)."),
    }, "A published release."),
    "approve": _decision_schema("approve"),
    "reject": _decision_schema("reject"),
    "error": _doc("error", {
        "for": _d({"enum": ["plan", "validate", "audit", "release", "approve", "reject", "design"]},
                  "The command that failed."),
        "exit_code": _d({"enum": [1, 2]}, "2: something the user fixes (config, input, "
                                          "existing release); 1: other failures."),
        "error": _d(_S, "Exception class, e.g. ConfigError, InputError, SmallBlockError."),
        "message": _d(_S, "The readable paragraph (same as without --json)."),
    }, "A failed command."),
}


def _plain(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _rows(frame: Any, cols: list[str]) -> list[dict[str, Any]]:
    present = [c for c in cols if c in frame.columns]
    out = json.loads(frame[present].to_json(orient="records"))
    for r in out:
        for c in cols:
            r.setdefault(c, None)
    return out


def plan_warnings(p: Any, config_hint: str = "CONFIG") -> list[str]:
    """The warnings of a plan, as the terminal prints them and ``--json`` lists them: the
    expected share of changed records (``sdc.reports.recoding.change_warnings``)."""
    from sdc.reports.recoding import change_warnings

    return [f"{w} (expected figure)" for w in
            change_warnings(p.expected_changed / max(p.n_records, 1), config_hint=config_hint)]


def plan_document(p: Any, config_hint: str = "CONFIG") -> dict[str, Any]:
    """The ``sdc plan --json`` document of a ``sdc.release.job.PlanSummary``."""
    small = p.small_block_actions
    return _plain({
        "command": "plan", "format": FORMAT,
        "name": p.name, "config": str(p.config_path), "input": str(p.input_path),
        "release_dir": str(p.output_dir), "release_exists": bool(p.release_exists),
        "n_records": p.n_records, "n_cells": p.n_cells,
        "n_sensitive_cells": p.n_sensitive_cells, "n_sensitive_records": p.n_sensitive_records,
        "n_partition_sets": p.n_partition_sets, "n_prbs": p.n_prbs,
        "xi": p.xi, "theta": p.theta, "theta_mode": p.theta_mode, "kmin": p.kmin,
        "small_blocks": p.small_blocks,
        "small_block_actions": {str(a): int(n) for a, n in small["action"].value_counts().items()},
        "merges": list(p.merges), "expected_changed": p.expected_changed, "changed": p.changed,
        "certificate": p.certificate, "certified": bool(p.certificate <= p.xi + 1e-12),
        "certificate_at": dict(p.certificate_at), "notes": list(p.notes),
        "warnings": plan_warnings(p, config_hint),
        "partition_sets": _rows(p.partition_sets, ["partition_key", "n_records", "n_cells",
                                                   "n_sensitive_cells", "n_sensitive_records",
                                                   "prb"]),
        "blocks": _rows(p.blocks, ["prb", "partition_key", "n_partition_sets", "k",
                                   "n_records", "profile", "theta", "max_risk", "action",
                                   "expected_changed", "changed"]),
    })


def validate_document(v: Any) -> dict[str, Any]:
    """The ``sdc validate --json`` document of a ``sdc.release.job.ValidationSummary``."""
    return _plain({
        "command": "validate", "format": FORMAT, "name": v.name, "valid": True,
        "config": str(v.config_path), "input": str(v.input_path),
        "input_sha256": v.input_sha256, "n_records": v.n_records, "n_columns": v.n_columns,
        "key_variables": list(v.key_variables), "n_cells": v.n_cells,
        "n_sensitive_cells": v.n_sensitive_cells, "n_partition_sets": v.n_partition_sets,
    })


def audit_document(report: Any, release_dir: Path) -> dict[str, Any]:
    """The ``sdc audit --json`` document of an ``AuditReport``."""
    checks = [{"name": c.name, "ok": bool(c.ok), "detail": str(c.detail)} for c in report.checks]
    failed = sum(not c["ok"] for c in checks)
    from sdc.publish.review import is_staged

    return _plain({"command": "audit", "format": FORMAT, "release_dir": str(release_dir),
                   "staged": is_staged(release_dir), "passed": bool(report.ok) and failed == 0, "n_checks": len(checks),
                   "n_failed": failed, "checks": checks})


def release_warnings(summary: dict[str, Any], config_hint: str = "CONFIG") -> list[str]:
    """Every warning of a release, as the terminal prints them and ``--json`` lists them: the
    flow's, then the share of changed records (``sdc.reports.recoding.change_warnings``)."""
    from sdc.reports.recoding import change_warnings

    out = list(summary.get("warnings") or [])
    n = summary.get("n") or 0
    if summary.get("records_changed") is not None:
        out += [w for w in change_warnings(summary["records_changed"] / max(n, 1),
                                           config_hint=config_hint) if w not in out]
    return out


def release_document(summary: dict[str, Any]) -> dict[str, Any]:
    """The ``sdc release --json`` document of the release flow's summary (``config_path``:
    the config as given, for the warnings' hints)."""
    out_dir = Path(summary["release_dir"])
    public = sorted(p.name for p in (out_dir / "public").iterdir()) if (out_dir / "public").is_dir() else []
    keys = ["name", "release_dir", "n_partition_sets", "n_prbs", "n_cells",
            "n_sensitive_cells", "xi", "theta", "theta_mode", "kmin", "certificate",
            "certified", "records_changed", "expected_changed", "expected_changed_sd",
            "actions", "merges",
            "seed_created", "seed_file", "warnings", "seconds"]
    doc = {"command": "release", "format": FORMAT, "n_records": summary["n"],
           **{k: summary.get(k) for k in keys}, "public_files": public,
           "review": summary.get("review")}
    doc["warnings"] = release_warnings(summary, str(summary.get("config_path") or "CONFIG"))
    doc["merges"] = list(doc["merges"] or [])
    doc["utility"] = _utility_headline(out_dir)
    return _plain(doc)


def _utility_headline(release_dir: Path) -> dict[str, Any] | None:
    """The release's utility headline (:func:`sdc.reports.build.utility_headline`) from its
    ``internal/utility.json``; None when the folder holds none."""
    p = release_dir / "internal" / "utility.json"
    if not p.is_file():
        return None
    from sdc.reports.build import utility_headline

    return utility_headline(json.loads(p.read_text(encoding="utf-8")))


def decision_document(command: str, d: Any, *, name: str, comment: str | None,
                      flow_run_id: str | None) -> dict[str, Any]:
    """The ``sdc approve --json`` / ``sdc reject --json`` document: ``d`` is the
    :class:`sdc.publish.review.Decision` of a staged folder, or None when the decision went to
    the paused flow run ``flow_run_id``."""
    doc: dict[str, Any] = {
        "command": command, "format": FORMAT,
        "decision": "approved" if command == "approve" else "rejected",
        "by": name, "comment": comment or "",
        "via": "flow_run" if d is None else "folder", "flow_run_id": flow_run_id,
        "release_dir": None, "staged_dir": None, "at": None, "manifest_sha256": None,
    }
    if d is not None:
        doc.update(release_dir=str(d.release_dir), staged_dir=str(d.staged_dir), at=d.at,
                   manifest_sha256=d.manifest_sha256 or None)
    return _plain(doc)


def error_document(command: str, exit_code: int, exc: BaseException, message: str) -> dict[str, Any]:
    """The JSON document of a failed command."""
    return {"command": "error", "format": FORMAT, "for": command, "exit_code": int(exit_code),
            "error": type(exc).__name__, "message": message}


def validate(document: dict[str, Any]) -> None:
    """Validate a document against its schema (``jsonschema``); raises on mismatch."""
    import jsonschema

    jsonschema.validate(document, SCHEMAS[document["command"]],
                        cls=jsonschema.Draft202012Validator)


def print_document(document: dict[str, Any]) -> None:
    """Write the document to stdout as one JSON text (UTF-8, newline-terminated). A document
    with ``warnings`` also lists the command's Python warnings (numpy's RuntimeWarnings:
    :func:`sdc.cli.caught.caught_warnings`), which ``--json`` keeps off stderr."""
    if isinstance(document.get("warnings"), list):
        from sdc.cli.caught import caught_warnings

        document = {**document, "warnings": list(dict.fromkeys(
            [*document["warnings"], *caught_warnings()]))}
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def write_schemas(folder: str | Path) -> list[Path]:
    """Write ``<command>.schema.json`` for every document into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, schema in SCHEMAS.items():
        p = folder / f"{name}.schema.json"
        p.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        out.append(p)
    return out


if __name__ == "__main__":  # pragma: no cover
    for p in write_schemas(sys.argv[1] if len(sys.argv) > 1 else "docs/cli_json"):
        print(p)
