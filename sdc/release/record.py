"""The audit record ``internal/audit.json``: what a release writes about itself
(:func:`build_audit`). Verified by :mod:`sdc.release.audit`."""

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
from sdc.engine.apply import ReleaseResult
from sdc.io.write import sha256_bytes
from sdc.release.seeds import SeedInfo

__all__ = ["AUDIT_FORMAT", "build_audit", "config_text_of", "household_audit", "package_version"]

AUDIT_FORMAT = "sdc-audit/1"

def _plain(obj: Any) -> Any:
    """Recursively convert numpy/pandas/Path values into JSON-serializable Python ones."""
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


def build_audit(config: ReleaseConfig, result: ReleaseResult, *, input_path: Path,
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
    return out


def household_audit(result: ReleaseResult) -> dict[str, Any]:
    """``audit.json``'s ``households``: the household stage (its PRBs, the PRB of every
    household partition set, its certificate, counted in households) and the person stage's
    certificate; ``blocks`` and ``certificate`` of the record are the person stage's PRBs and
    the larger of the two certificates."""
    st = result.households
    hr = st.result
    return _plain({
        "household_id": result.config.input.household_id if result.config else None,
        "household_keys": list(st.config.key_names),
        "n_households": st.n_households,
        "households_changed": int(st.changed.sum()),
        "certificate": float(hr.certificate),
        "certificate_at": hr.certificate_at,
        "person_certificate": float(st.person_certificate),
        "person_certificate_at": st.person_certificate_at,
        "small_classes": int(st.small_classes),
        "small_class_persons": int(st.small_class_persons),
        "merges": list(hr.merges),
        "blocks": _records(hr.blocks),
        "partition_sets": {str(k): int(v) for k, v in zip(
            hr.partition_sets["partition_key"], hr.partition_sets["prb"], strict=True)},
        **({"composition": st.composition} if getattr(st, "composition", None) else {}),
    })


