"""The audit record ``internal/audit.json``: what a release writes about itself
(:func:`build_audit`). Verified by :mod:`sdc.audit.verify`."""

from __future__ import annotations

import datetime as dt
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sdc.config.model import ReleaseConfig
from sdc.io.write import sha256_bytes
from sdc.method.outcome import ReleaseOutcome
from sdc.series.seeds import SeedInfo

__all__ = ["AUDIT_FORMAT", "PRB_STRUCTURE_FORMAT", "build_audit", "config_text_of",
           "household_audit", "household_audit_of", "package_version", "prb_structure"]

AUDIT_FORMAT = "sdc-audit/1"

def _plain(obj: Any) -> Any:
    """Recursively convert numpy/pandas/Path values into JSON-serializable Python ones."""
    t = type(obj)  # the common exact types first (the audit record holds ~70,000 values)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is dict:
        return {str(k): _plain(v) for k, v in obj.items()}
    if t is list:
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return _plain(frame.to_dict(orient="records"))


def config_text_of(config: ReleaseConfig) -> str:
    """The config file's text if it was loaded from a file, else a YAML dump of the model
    (hierarchy tables excluded; paths as written)."""
    if config.source_path is not None and Path(config.source_path).is_file():
        return Path(config.source_path).read_text(encoding="utf-8")

    def conv(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [conv(v) for v in o]
        return str(o) if isinstance(o, Path) else o

    from sdc.config.recode import user_data

    data = conv(user_data(config))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def package_version() -> str:
    """The installed sdc version."""
    try:
        from importlib.metadata import version

        return version("sdc")
    except Exception:  # not installed as a distribution
        import sdc

        return sdc.__version__


def build_audit(config: ReleaseConfig, result: ReleaseOutcome, *, input_path: Path,
                input_sha256: str, n_rows: int, seed_info: SeedInfo,
                public_hashes: dict[str, str], config_text: str,
                package_version: str, internal_hashes: dict[str, str] | None = None
                ) -> dict[str, Any]:
    """The content of ``internal/audit.json``.

    Keys: ``format``, ``name``, ``created_at`` (UTC; internal only), ``package_version``,
    ``python``, ``config`` (``text`` = exact copy, ``sha256`` of its UTF-8 bytes, ``base_dir``
    its relative paths resolve against, ``source_path``), ``input`` (absolute ``path``,
    ``format``, ``sha256``, ``n_rows``), ``seed`` (``source``: ``file`` or ``config``, the file's
    ``path`` and ``sha256`` - never the seed), ``risk`` (``xi``, ``theta``, ``kmin``,
    ``theta_mode``, ``small_blocks``, ``certificate``, ``certificate_at``, ``merges``),
    ``counts`` (records, cells, sensitive cells, partition sets, PRBs, records changed),
    ``blocks`` (the PRB table, one dict per PRB with its action), ``dependence`` (the
    dependence check's figures per released non-key column and the ``derived:`` columns),
    ``public_files`` and ``internal_files`` (name -> SHA-256).
    """
    sens = result.cell_prb >= 0
    out = _plain({
        "format": AUDIT_FORMAT,
        "name": config.name,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "package_version": package_version,
        "python": sys.version.split()[0],
        "config": {
            "text": config_text,
            "sha256": sha256_bytes(config_text.encode("utf-8")),
            "base_dir": str(config.base_dir),
            "source_path": str(config.source_path) if config.source_path else None,
        },
        "input": {
            "path": str(Path(input_path).resolve()),
            "format": config.input.resolved_format,
            "sha256": input_sha256,
            "n_rows": int(n_rows),
        },
        "seed": {
            "source": "config" if seed_info.path is None else "file",
            "path": str(seed_info.path) if seed_info.path is not None else None,
            "sha256": seed_info.sha256,
            "created_by_this_run": bool(seed_info.created),
        },
        "risk": {
            "xi": float(result.xi),
            "theta": float(result.theta),
            "kmin": int(result.kmin),
            "theta_mode": config.risk.theta,
            "small_blocks": config.risk.small_blocks,
            "certificate": float(result.certificate),
            "certificate_at": result.certificate_at,
            "merges": list(result.merges),
        },
        "counts": {
            "records": int(n_rows),
            "cells": int(result.cells.n_cells),
            "sensitive_cells": int(sens.sum()),
            "sensitive_records": int(result.cells.frequency[sens].sum()),
            "partition_sets": int(len(result.partition_sets)),
            "prbs": int(len(result.blocks)),
            "records_changed": int(result.n_changed),
        },
        "blocks": _records(result.blocks),
        "prb_structure": prb_structure(config, result),
        "dependence": {
            "method": "docs/METHOD.md, Dependence of non-key columns",
            "columns": [f.as_dict() for f in getattr(result, "dependence", [])],
            "derived": list(config.derived),
        },
        "public_files": dict(public_hashes),
        "internal_files": dict(internal_hashes or {}),
    })
    if getattr(result, "households", None) is not None:
        out["households"] = household_audit(result)
    near = getattr(result, "near", None)
    if near is not None:  # destinations: near: what defines W (never W itself)
        out["risk"]["destinations"] = "near"
        out["near"] = _plain(near)
    from sdc.release.design_record import design_record

    designs = design_record(getattr(result, "plan", None), config)
    if designs is not None:  # every PRB's m_j and W as data (docs/METHOD.md 7.10)
        out["designs"] = _plain(designs)
    return out


PRB_STRUCTURE_FORMAT = "sdc-prbs/1"


def _profile(t: np.ndarray) -> dict[str, int]:
    """``{t: number of cells with frequency t}`` (JSON keys are text), ascending t."""
    if t.size == 0:
        return {}
    counts = np.bincount(t)
    return {str(int(v)): int(counts[v]) for v in np.flatnonzero(counts)}


def prb_structure(config: ReleaseConfig, result: ReleaseOutcome) -> dict[str, Any]:
    """``audit.json``'s ``prb_structure``: every PRB as data, enough to rebuild the PRBs and
    re-derive the certificate without the input (docs/METHOD.md section 4 and 7.1;
    docs/RELEASE_FOLDER.md).

    - ``partition_variables``, ``merge_along`` (the merge order), ``xi``, ``theta`` (the
      theorem's), ``kmin``, ``t_max`` (cells with 1 <= t_j <= t_max are sensitive);
    - ``partition_sets``: one entry per partition set of the original partition: ``id``,
      ``label``, the value of every partition variable (``values``), its records, and
      ``profile`` ``{t: number of sensitive cells with frequency t}``, and the ``prb`` it went
      into (-1: no sensitive cell);
    - ``prbs``: ``prb``, ``partition_sets`` (member ids: a merged PRB has several), ``merged``,
      ``profile`` (the sum of its members' profiles), ``k``, ``theta`` (the one its records are
      perturbed with), ``max_risk`` (exact, mechanism-aware) and ``action``;
    - ``merges``: every merged PRB as ``{prb, partition_sets, labels, k_each}`` (the prose log
      of the merge steps is ``risk.merges``);
    - ``non_sensitive``: number of cells with t_j > t_max and the smallest such t (the
      certificate is the larger of max over PRBs and 1 / that t).

    Aggregates of the cell table only (no record, no cell of the key table): the audit record
    is internal (owner-only) all the same.
    """
    from sdc.method.plan import default_merge_order

    freq = np.asarray(result.cells.frequency, dtype=np.int64)
    cell_ps = np.asarray(result.cell_partition_set, dtype=np.int64)
    sens = np.asarray(result.cell_prb) >= 0
    ps = result.partition_sets
    pvars = list(config.partition_variables)
    n_ps = len(ps)
    # per partition set: the profile of its sensitive cells (one sort of the sensitive cells)
    order = np.lexsort((freq[sens], cell_ps[sens]))
    s_ps, s_t = cell_ps[sens][order], freq[sens][order]
    bounds = np.searchsorted(s_ps, np.arange(n_ps + 1))
    sets = []
    for i, row in enumerate(ps.to_dict(orient="records")):
        sets.append({
            "id": i, "label": str(row["partition_key"]),
            "values": {v: _plain(row[v]) for v in pvars if v in ps.columns},
            "n_records": int(row["n_records"]),
            "profile": _profile(s_t[bounds[i]:bounds[i + 1]]),
            "prb": int(row["prb"]),
        })
    prb_of_set = ps["prb"].to_numpy(dtype=np.int64)
    blocks = result.blocks.to_dict(orient="records")
    # members of every PRB (ascending ids) and the profile of its sensitive cells
    by_prb = np.argsort(prb_of_set, kind="stable")
    starts = np.searchsorted(prb_of_set[by_prb], np.arange(len(blocks) + 1))
    cell_prb = np.asarray(result.cell_prb, dtype=np.int64)
    t_size = int(freq[sens].max()) + 1 if sens.any() else 1
    prb_profiles = np.zeros((len(blocks), t_size), dtype=np.int64)
    np.add.at(prb_profiles, (cell_prb[sens], freq[sens]), 1)
    prbs, merges = [], []
    for j, b in enumerate(blocks):
        members = [int(m) for m in by_prb[starts[j]:starts[j + 1]]]
        prbs.append({
            "prb": j, "partition_sets": members, "merged": len(members) > 1,
            "profile": {str(t): int(c) for t, c in enumerate(prb_profiles[j]) if c},
            "k": int(b["k"]), "theta": float(b["theta"]), "max_risk": float(b["max_risk"]),
            "action": str(b["action"]),
        })
        if len(members) > 1:
            merges.append({"prb": j, "partition_sets": members,
                           "labels": [sets[m]["label"] for m in members],
                           "k_each": [sum(sets[m]["profile"].values()) for m in members]})
    ns = freq[~sens]
    return _plain({
        "format": PRB_STRUCTURE_FORMAT,
        "partition_variables": pvars,
        "merge_along": default_merge_order(config) if pvars else [],
        "xi": float(result.xi), "theta": float(result.theta), "kmin": int(result.kmin),
        "t_max": max(1, math.ceil(1.0 / float(result.xi)) - 1),
        "partition_sets": sets,
        "prbs": prbs,
        "merges": merges,
        "non_sensitive": {"cells": int(ns.size), "min_t": int(ns.min()) if ns.size else None},
    })


def household_audit(result: ReleaseOutcome) -> dict[str, Any]:
    """``audit.json``'s ``households``: the household stage (its PRBs, the PRB of every
    household partition set, its certificate, counted in households) and the person stage's
    certificate; ``blocks`` and ``certificate`` of the record are the person stage's PRBs and
    the larger of the two certificates."""
    st = result.households
    hr = st.result
    left = (((getattr(result, "household_report", None) or {}).get("risk") or {})
            .get("left_out"))
    return {**household_audit_of(
        result.config.input.household_id if result.config else None,
        list(st.config.key_names), n_households=st.n_households,
        households_changed=int(st.changed.sum()), certificate=float(hr.certificate),
        certificate_at=hr.certificate_at, person_certificate=float(st.person_certificate),
        person_certificate_at=st.person_certificate_at, small_classes=int(st.small_classes),
        small_class_persons=int(st.small_class_persons), merges=list(hr.merges),
        dependence=list(getattr(hr, "dependence", [])), blocks=hr.blocks,
        partition_sets=hr.partition_sets, composition=getattr(st, "composition", None),
        near=getattr(hr, "near", None), designs=_stage_designs(hr, st.config)),
        **({"left_out": left} if left else {})}  # risk.exposed_sizes: drop


def _stage_designs(stage_result: Any, config: ReleaseConfig) -> dict[str, Any] | None:
    """The household stage's ``designs`` (:func:`sdc.release.design_record.design_record`)
    when it has per-PRB designs (weighted; near under ``composition: protect``)."""
    from sdc.release.design_record import design_record

    plan = getattr(stage_result, "plan", None)
    return design_record(plan, getattr(stage_result, "design_config", None) or config)


def household_audit_of(household_id: str | None, household_keys: list[str], *,
                       n_households: int, households_changed: int, certificate: float,
                       certificate_at: Any, person_certificate: float,
                       person_certificate_at: Any, small_classes: int,
                       small_class_persons: int, merges: list[str], dependence: list,
                       blocks: pd.DataFrame, partition_sets: pd.DataFrame,
                       composition: dict[str, Any] | None,
                       near: dict[str, Any] | None = None,
                       designs: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`household_audit` from its parts (any engine): the household stage's figures,
    its PRB table (with ``changed``: households per PRB whose keys changed) and partition
    sets, the dependence figures of the household columns, the person stage's certificate,
    the small classes and the composition intruder's figures (None: not measured); ``near``
    the composition stage's near-design record under ``destinations: near``; ``designs``
    the household stage's designs as data (weighted, or near under protect)."""
    return _plain({
        "household_id": household_id,
        "household_keys": list(household_keys),
        "n_households": int(n_households),
        "households_changed": int(households_changed),
        "certificate": float(certificate),
        "certificate_at": certificate_at,
        "person_certificate": float(person_certificate),
        "person_certificate_at": person_certificate_at,
        "small_classes": int(small_classes),
        "small_class_persons": int(small_class_persons),
        "merges": list(merges),
        # the dependence check of the household columns against the household keys (the
        # person-level columns are in the record's ``dependence``)
        "dependence": [f.as_dict() for f in dependence],
        "blocks": _records(blocks),
        "partition_sets": {str(k): int(v) for k, v in zip(
            partition_sets["partition_key"], partition_sets["prb"], strict=True)},
        **({"composition": composition} if composition else {}),
        # destinations: near (the composition stage): what defines its W, never W
        **({"near": near} if near else {}),
        # the household stage's m_j and W as data (docs/METHOD.md 7.10)
        **({"designs": designs} if designs else {}),
    })


