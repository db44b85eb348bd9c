"""Re-verify a release folder from scratch: ``sdc audit RELEASE_DIR``.

:func:`verify_release` trusts nothing but ``internal/audit.json`` as a pointer to what should be
checked. It re-reads the source file the audit names, rebuilds the config from the stored copy,
recomputes the partition of the original and of the released public microdata (counted by the
release pipeline's count pass, whole for a pandas release, in batches for a streaming or Dask
one; a household file's source and public file in batches on every executor, both stages
planned by the count pass), recomputes theta and kmin from xi and the exact maximum
identification risk of every PRB from its frequency profile (recounted from the source) and its
recorded theta with :func:`sdc.max_risk` (mechanism-aware: the max over the target's cell, the
cell of the PRB the intruder picks from - its own or another - and a), and checks the release-level invariants of METHOD.md:

- public (and internal) files match their recorded SHA-256; no unlisted public file;
- the source file exists, matches its SHA-256 and row count; the public file has as many
  records; the public frame passes the output schema;
- the stored config copy matches its SHA-256 and still parses; theta = h^-1(xi), kmin as recorded;
- every partition set has the same number of records before and after (partition sets merged
  into one PRB by ``small_blocks: merge`` are compared as one group: records may move inside it);
- every non-sensitive cell (t_j >= 1/xi) has the same count before and after;
- no released cell was empty in the original;
- every PRB's profile equals the recount, and its exact max risk (recomputed) is <= xi and
  equals the recorded one;
- the certificate max(max_PRB risk, max over non-sensitive cells of 1/t_j) is <= xi and equals
  the recorded one;
- the modes (release and ``public/`` 0755 with 0644 files, ``internal/`` 0700 with 0600 files);
  the record's fields that follow from the config copy; the seed file's path and SHA-256;
- the release made again from config copy, source and seed (:mod:`sdc.audit.rederive`):
  every public file byte for byte (record by record in the detail), every field of the audit
  record except :data:`sdc.audit.rederive.NOT_CHECKABLE` (docs/RELEASE_FOLDER.md).

A failed check is a :class:`Check` with ``ok=False`` and a detail naming what differs; only an
unreadable release folder raises (:class:`AuditError`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from sdc.audit.block_checks import (
    count_checks,
    dependence_checks,
    merge_groups,
    prb_checks,
    theta_check,
    weighted_checks,
)
from sdc.audit.folder_checks import (
    config_checks,
    hash_checks,
    load_audit,
    mode_checks,
    record_checks,
    rederived_checks,
    rederived_release,
    seed_of,
)
from sdc.audit.household_checks import household_checks
from sdc.audit.rederive import Rederived
from sdc.audit.report import REL, TOL, AuditError, AuditReport, Check
from sdc.audit.source_checks import (
    counted_households,
    counted_partitions,
    recoding_check,
    source_found,
)
from sdc.config.model import ReleaseConfig
from sdc.executors.registry import recorded_executor
from sdc.io.batches import input_sha256
from sdc.method.designs import design_of
from sdc.method.destinations import NearCertifier
from sdc.release.record import AUDIT_FORMAT, build_audit, config_text_of

__all__ = ["AUDIT_FORMAT", "AuditError", "AuditReport", "Check", "build_audit", "config_text_of",
           "verify_release"]


def verify_release(release_dir: Path, source: Path | None = None) -> AuditReport:
    """Re-verify a release folder (see the module docstring for the list of checks).

    ``source`` is the input file (or folder of parts) at a new place when it moved since the
    release; its SHA-256 must still equal the recorded one.

    Never raises for a failed check; raises :class:`AuditError` only if ``release_dir`` is not
    a readable release folder (no readable, well-formed ``internal/audit.json``).
    """
    release_dir = Path(release_dir).expanduser().absolute()
    audit = load_audit(release_dir)
    rep = AuditReport(release_dir)
    hash_checks(rep, release_dir, audit)
    mode_checks(rep, release_dir)

    cfg = config_checks(rep, release_dir, audit)
    if cfg is None:
        return rep
    record_checks(rep, cfg, audit)
    seed_info = seed_of(rep, cfg, audit)

    # -- source (and the release made again: its count and plan are the source's) -------------
    inp = audit["input"]
    src = Path(source).expanduser().absolute() if source is not None else Path(inp["path"])
    if not source_found(rep, src, src.exists(), "source", input_sha256, inp):
        return rep
    cfg.input.path = src
    again = rederived_release(rep, cfg, audit, seed_info)
    try:
        return _checks(rep, release_dir, cfg, audit, again, inp, source is not None)
    finally:
        if not isinstance(again, str):
            again.close()


def _checks(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig, audit: dict[str, Any],
            again: Rederived | str, inp: dict[str, Any], moved: bool) -> AuditReport:
    """The checks after the re-derivation (``again``: the release made again, or why not)."""
    counted = None if isinstance(again, str) else again.counted
    auditor = recorded_executor(audit.get("engine")).auditor
    households = None
    if cfg.input.household_id is not None:
        households = counted_households(rep, release_dir, cfg, inp, auditor, counted)
        if households is None:
            return rep
    else:
        found = counted_partitions(rep, release_dir, cfg, inp, auditor, counted,
                                   None if isinstance(again, str) else again.plan)
        if found is None:
            return rep
        po, pr, weight_total, plan = found

    dependence_checks(rep, audit)

    # -- theta and kmin ----------------------------------------------------------------------------
    risk = audit.get("risk") or {}
    xi = float(cfg.risk.xi)
    theta_check(rep, risk, xi)

    # the PRB of each partition set (internal/partition_sets.parquet; its hash is checked above)
    ps_path = release_dir / "internal" / "partition_sets.parquet"
    prb_of_label: dict[str, int] = {}
    if ps_path.is_file():
        ps = pd.read_parquet(ps_path, columns=["partition_key", "prb"])
        prb_of_label = dict(zip(ps["partition_key"].astype(str), ps["prb"].astype(int), strict=True))
    if households is not None:
        cert, where = household_checks(rep, cfg, audit, *households, prb_of_label, xi)
    else:
        group, note = merge_groups(prb_of_label)
        count_checks(rep, po, pr, group, xi, cfg, note)
        if cfg.recoded_keys:
            recoding_check(rep, release_dir, cfg, po)
        # -- PRBs and the certificate ------------------------------------------------------------
        # the plan's design (the release made again), else the one its config copy picks
        design = plan.design if plan is not None else design_of(cfg)
        near = None
        if design.near:
            near = (NearCertifier(po, cfg), (audit.get("near") or {}).get("prbs") or [])
        cert, where = prb_checks(rep, po, audit.get("blocks") or [], prb_of_label, xi,
                                 near=near)
        if design.weighted:
            cert, where = weighted_checks(rep, po, weight_total, cfg, xi,
                                          (audit.get("near") or {}).get("weighted_w_sha256"),
                                          plan=plan)
    recorded = float(risk.get("certificate", math.nan))
    rep.add("certificate <= xi", cert <= xi + TOL,
            f"certificate {cert:.6f} ({where}) vs xi = {xi}")
    rep.add("certificate = recorded", math.isclose(cert, recorded, rel_tol=REL),
            f"recomputed {cert:.10f}, audit.json records {recorded:.10f}")
    rederived_checks(rep, release_dir, audit, again, moved_source=moved)
    return rep
