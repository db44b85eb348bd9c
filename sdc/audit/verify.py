"""Re-verify a release folder from scratch: ``sdc audit RELEASE_DIR``.

:func:`verify_release` trusts nothing but ``internal/audit.json`` as a pointer to what should be
checked. It re-reads the source file the audit names, rebuilds the config from the stored copy,
recomputes the partition of the original and of the released public microdata (counted by the
release pipeline's count pass, whole for a pandas release, in batches for a streaming or Dask
one; a household file's both stages from the files read whole), recomputes theta and kmin from xi and the exact maximum
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

import json
import math
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sdc.config.load import load_yaml, parse_config
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.io.read import integer_keys, read_input, string_key_dtypes
from sdc.io.schemas import validate_output
from sdc.io.write import sha256_bytes, sha256_file
from sdc.method.blocks import Block
from sdc.method.dependence import frame_dependence, measure_dependence
from sdc.method.destinations import NearCertifier, design_risk
from sdc.method.partition import Partitioned, partition_frame
from sdc.method.plan import plan_release
from sdc.method.risk import max_risk
from sdc.method.theta import kmin as kmin_of
from sdc.method.theta import solve_theta
from sdc.release.record import AUDIT_FORMAT, build_audit, config_text_of

__all__ = ["AUDIT_FORMAT", "AuditError", "AuditReport", "Check", "build_audit", "config_text_of",
           "read_public", "verify_release"]

_TOL = 1e-12      # same slack the engine allows when it certifies (risk <= xi + 1e-12)
_REL = 1e-9       # recomputed vs recorded floats


class AuditError(ValueError):
    """The release folder cannot be audited at all (missing or unreadable audit.json)."""


@dataclass
class Check:
    """One audit check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    """All checks of one release folder; ``ok`` iff every check passed."""

    release_dir: Path
    checks: list[Check] = field(default_factory=list)
    #: the dependence check recomputed from the source (None: not recomputed)
    dependence: list | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)


def _load_audit(release_dir: Path) -> dict[str, Any]:
    if not release_dir.is_dir():
        raise AuditError(f"release folder {str(release_dir)!r} does not exist or is not a folder")
    path = release_dir / "internal" / "audit.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuditError(
            f"{str(path)!r} does not exist: {str(release_dir)!r} is not a release folder written "
            "by 'sdc release' (or its internal/ folder was removed)"
        ) from None
    except PermissionError:
        raise AuditError(f"{str(path)!r} cannot be read (permission denied); run the audit as "
                         "the release's owner") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AuditError(f"{str(path)!r} is not valid JSON ({e}); the audit record is damaged") from None
    if not isinstance(data, dict) or "config" not in data or "input" not in data:
        raise AuditError(f"{str(path)!r} is not an sdc audit record (no config/input sections)")
    return data


def read_public(release_dir: Path, config) -> pd.DataFrame:
    """The released public microdata: ``public/microdata.parquet``, else ``microdata.csv``
    (key columns with string categories read as strings)."""
    pub = Path(release_dir) / "public"
    if (pub / "microdata.parquet").is_file():
        return pd.read_parquet(pub / "microdata.parquet")
    path = pub / "microdata.csv"
    header = pd.read_csv(path, nrows=0).columns.tolist()
    released = config.without_recoding()  # the public file holds released values
    frame = pd.read_csv(path, dtype=string_key_dtypes(released, header), low_memory=False)
    return integer_keys(frame, released)


def _hash_checks(report: AuditReport, release_dir: Path, audit: dict[str, Any]) -> None:
    for folder, key in (("public", "public_files"), ("internal", "internal_files")):
        recorded: dict[str, str] = audit.get(key) or {}
        if folder == "public" and not recorded:
            report.add("public files: hashes", False, "audit.json lists no public files")
            continue
        bad, missing = [], []
        for name, digest in sorted(recorded.items()):
            p = release_dir / folder / name
            if not p.is_file():
                missing.append(name)
            elif sha256_file(p) != digest:
                bad.append(name)
        detail = []
        if missing:
            detail.append(f"missing: {missing}")
        if bad:
            detail.append(f"SHA-256 differs from audit.json (modified after release): {bad}")
        report.add(f"{folder} files: hashes", not detail,
                   "; ".join(detail) or f"{len(recorded)} files match audit.json")
    present = sorted(p.name for p in (release_dir / "public").iterdir()) if (
        release_dir / "public").is_dir() else []
    extra = [p for p in present if p not in (audit.get("public_files") or {})]
    report.add("public files: nothing unlisted", not extra,
               f"files not in audit.json: {extra}" if extra else "no unlisted file in public/")


def _cell_frame(part: Partitioned) -> pd.DataFrame:
    df = pd.DataFrame(part.cells.key_codes, columns=part.cells.names)
    df["t"] = part.cells.frequency
    return df


def _ps_counts(part: Partitioned) -> pd.Series:
    # records per partition set from the cells (t_j summed): also for a batch-counted table
    counts = np.bincount(part.cell_partition_set, weights=part.cells.frequency,
                         minlength=len(part.partition_keys)).astype(np.int64)
    return pd.Series(counts, index=pd.Index(part.partition_keys, name="partition_key"))


def _parse_profile(s: str) -> dict[int, int]:
    out = {}
    for item in str(s).split(","):
        if item.strip():
            t, m = item.split(":")
            out[int(t)] = int(m)
    return out


def _fmt_profile(p: dict[int, int]) -> str:
    return ", ".join(f"{t}:{m}" for t, m in sorted(p.items()))


def verify_release(release_dir: Path, source: Path | None = None) -> AuditReport:
    """Re-verify a release folder (see the module docstring for the list of checks).

    ``source`` is the input file (or folder of parts) at a new place when it moved since the
    release; its SHA-256 must still equal the recorded one.

    Never raises for a failed check; raises :class:`AuditError` only if ``release_dir`` is not
    a readable release folder (no readable, well-formed ``internal/audit.json``).
    """
    release_dir = Path(release_dir).expanduser().absolute()
    audit = _load_audit(release_dir)
    rep = AuditReport(release_dir)
    _hash_checks(rep, release_dir, audit)
    _mode_checks(rep, release_dir)

    # -- config ------------------------------------------------------------------------------
    conf = audit["config"]
    text = conf.get("text") or ""
    rep.add("config copy: hash", sha256_bytes(text.encode("utf-8")) == conf.get("sha256"),
            "stored config text matches its SHA-256" if sha256_bytes(text.encode("utf-8"))
            == conf.get("sha256") else "the stored config text was edited after the release")
    try:
        cfg = parse_config(load_yaml(text), Path(conf.get("base_dir") or "."),
                           source="stored config copy")
    except (ConfigError, yaml.YAMLError, OSError) as e:
        rep.add("config copy: parses", False, f"cannot rebuild the config: {e}")
        return rep
    rep.add("config copy: parses", True, f"release job {cfg.name!r}")
    from sdc.publish.review import is_staged, review_checks

    staged = release_dir if is_staged(release_dir) else None
    for name, ok, detail in review_checks(audit, cfg.review is not None and cfg.review.required,
                                          list(cfg.review.approvers) if cfg.review else None,
                                          staged=staged):
        rep.add(name, ok, detail)
    _record_checks(rep, cfg, audit)
    seed_info = _seed_of(rep, cfg, audit)

    # -- source --------------------------------------------------------------------------------
    inp = audit["input"]
    src = Path(source).expanduser().absolute() if source is not None else Path(inp["path"])
    household_frames = None
    if cfg.input.household_id is not None:
        household_frames = _read_in_memory(rep, release_dir, cfg, src, inp)
        if household_frames is None:
            return rep
    else:
        from sdc.executors.registry import get_executor

        batched = get_executor(audit.get("engine") or "pandas").batched
        found = _counted_partitions(rep, release_dir, cfg, src, inp, batched)
        if found is None:
            return rep
        po, pr, weight_total = found

    _dependence_checks(rep, audit)

    # -- theta and kmin ----------------------------------------------------------------------------
    risk = audit.get("risk") or {}
    xi = float(cfg.risk.xi)
    _theta_check(rep, risk, xi)

    # the PRB of each partition set (internal/partition_sets.parquet; its hash is checked above)
    ps_path = release_dir / "internal" / "partition_sets.parquet"
    prb_of_label: dict[str, int] = {}
    if ps_path.is_file():
        ps = pd.read_parquet(ps_path, columns=["partition_key", "prb"])
        prb_of_label = dict(zip(ps["partition_key"].astype(str), ps["prb"].astype(int), strict=True))
    if household_frames is not None:
        cert, where = _household_checks(rep, cfg, audit, *household_frames, prb_of_label, xi)
    else:
        group, note = _merge_groups(prb_of_label)
        _count_checks(rep, po, pr, group, xi, cfg, note)
        if cfg.recoded_keys:
            _recoding_check(rep, release_dir, cfg, po)
        # -- PRBs and the certificate ------------------------------------------------------------
        near = None
        if cfg.risk.destinations == "near":
            near = (NearCertifier(po, cfg), (audit.get("near") or {}).get("prbs") or [])
        cert, where = _prb_checks(rep, po, audit.get("blocks") or [], prb_of_label, xi,
                                  near=near)
        if cfg.risk.weighted:
            cert, where = _weighted_checks(rep, po, weight_total, cfg, xi)
    recorded = float(risk.get("certificate", math.nan))
    rep.add("certificate <= xi", cert <= xi + _TOL,
            f"certificate {cert:.6f} ({where}) vs xi = {xi}")
    rep.add("certificate = recorded", math.isclose(cert, recorded, rel_tol=_REL),
            f"recomputed {cert:.10f}, audit.json records {recorded:.10f}")
    _rederived_checks(rep, release_dir, cfg, audit, seed_info, moved_source=source is not None)
    return rep


def _weighted_checks(rep: AuditReport, po: Partitioned, weight_total: Any,
                     cfg: ReleaseConfig, xi: float) -> tuple[float, str]:
    """The weighted mode (docs/METHOD.md 7.11): its design re-derived from the source's cell
    table and weight totals, every weight group's exact max risk recomputed; the certificate
    is the design's."""
    from sdc.method.plan import plan_release
    from sdc.method.weighted import weight_plan

    if weight_total is None:
        rep.add("weighted design", False, "the source's weight totals were not counted")
        return math.inf, "weighted design"
    plan = weight_plan(plan_release(po, cfg), weight_total, cfg)
    g = plan.weighted.groups
    n_w = int((g["design"] == "weighted").sum()) if len(g) else 0
    rep.add("weighted design <= xi", plan.certificate <= xi + _TOL,
            f"{len(g)} weight groups ({n_w} weight-balanced, {len(g) - n_w} NZY), max risk "
            f"{plan.certificate:.6f}")
    return plan.certificate, f"weighted design, {plan.certificate_at.get('source')}"


def _theta_check(rep: AuditReport, risk: dict[str, Any], xi: float) -> None:
    theta, km = solve_theta(xi), kmin_of(solve_theta(xi))
    ok = (math.isclose(float(risk.get("xi", math.nan)), xi, rel_tol=0, abs_tol=1e-15)
          and math.isclose(float(risk.get("theta", math.nan)), theta, rel_tol=_REL)
          and int(risk.get("kmin", -1)) == km)
    rep.add("theta and kmin", ok,
            f"xi = {xi}, theta = {theta:.6f}, kmin = {km} (audit.json: xi = {risk.get('xi')}, "
            f"theta = {risk.get('theta')}, kmin = {risk.get('kmin')})")


def _merge_groups(prb_of_label: dict[str, int]) -> tuple[Any, str]:
    """Partition sets merged into one PRB form one comparison group (records may move inside
    it): (label -> group, a note for the detail)."""
    members = pd.Series(list(prb_of_label.values())).value_counts()
    merged = set(members.index[members > 1].tolist())

    def group(label: str) -> str:
        b = prb_of_label.get(label, -1)
        return f"merged PRB {b}" if b in merged else label

    return group, (f" ({len(merged)} merged groups compared as one)" if merged else "")


def _household_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                      original: pd.DataFrame, public: pd.DataFrame,
                      prb_of_label: dict[str, int], xi: float) -> tuple[float, str]:
    """The checks of a household release (docs/HOUSEHOLDS.md): households consistent and
    intact in the public file; the household stage's invariants on the household tables
    (counted in households) and its PRBs; the person stage's PRBs (recounted from the source
    under the person stage's partition) and its counts per person partition group. Returns
    the certificate: the larger of the two stages'."""
    from sdc.method.households import (
        check_households,
        household_codes,
        household_config,
        household_table,
        person_config,
        small_classes,
    )

    try:
        check_households(public, cfg)
        rep.add("households: consistent", True, "every public household has one value of each "
                "household-level key and household column")
    except InputError as e:
        rep.add("households: consistent", False, str(e))
    code_o, first_o = household_codes(original, cfg)
    code_p, first_p = household_codes(public, cfg)
    size_o, size_p = np.sort(np.bincount(code_o)), np.sort(np.bincount(code_p))
    same = size_o.size == size_p.size and bool((size_o == size_p).all())
    rep.add("households: intact", same,
            f"{first_o.size} households, the same household sizes" if same else
            f"{first_o.size} households in the source, {first_p.size} in the public file, or "
            "their sizes differ")
    if cfg.risk.composition == "protect":
        return _composition_checks(rep, cfg, audit, original, public, code_o, first_o,
                                   code_p, first_p, xi)
    # household stage: the household tables, counted in households
    hh = audit.get("households") or {}
    hcfg = household_config(cfg)
    ho = partition_frame(household_table(original, cfg, code_o, first_o), hcfg)
    hp = partition_frame(household_table(public, cfg, code_p, first_p), hcfg)
    h_prb = {str(k): int(v) for k, v in (hh.get("partition_sets") or {}).items()}
    group, note = _merge_groups(h_prb)
    _count_checks(rep, ho, hp, group, xi, hcfg, note, what="household stage: ",
                  unit=" (in households)")
    h_cert, h_where = _prb_checks(rep, ho, hh.get("blocks") or [], h_prb, xi,
                                  what="household stage: ")
    hh_cols = [c for c in cfg.input.household_columns if c in original.columns]

    # person stage: PRBs inside the household keys' values; counts per person partition group
    pcfg = person_config(cfg)
    po = partition_frame(original, pcfg)
    n_small, rec_small = small_classes(po, cfg)
    rec_n = int(hh.get("small_classes", 0))
    rep.add("person stage: small household-key classes", n_small == rec_n,
            f"{n_small} household-key classes ({int(rec_small.sum())} persons) have fewer than "
            f"kmin sensitive person cells and are left to the household stage (audit.json: "
            f"{rec_n})")
    po_all = po
    if n_small and cfg.risk.small_blocks != "fail":
        po = partition_frame(original.iloc[np.flatnonzero(~rec_small)], pcfg)
    p_cert, p_where = _prb_checks(rep, po, audit.get("blocks") or [], prb_of_label, xi,
                                  what="person stage: ")
    # the dependence check of each stage, recomputed: household columns on the household
    # table against the household keys, person-level columns against the person PRBs
    try:
        htable = household_table(original, cfg, code_o, first_o)
        rep.dependence = frame_dependence(htable, plan_release(ho, hcfg), hcfg)
        _dependence_checks(rep, {"dependence": {"columns": hh.get("dependence")}},
                           what="household stage: ")
        persons = original if po is po_all else original.iloc[np.flatnonzero(~rec_small)]
        persons = persons.drop(columns=[c for c in (cfg.input.household_id, *hh_cols,
                                                    *(cfg.perturb or {}))
                                        if c in persons.columns])
        rep.dependence = frame_dependence(persons, plan_release(po, pcfg), pcfg)
        _dependence_checks(rep, audit, what="person stage: ")
    except (InputError, ConfigError, SmallBlockError) as e:
        rep.add("dependence check: recomputed", False, f"cannot recompute: {e}")
    po = po_all  # every person counts below (the left-out classes' persons do not move)
    pvars = [v for v in pcfg.partition_variables if v not in cfg.household_keys]
    if pvars:
        pcols = [pcfg.partition_variables.index(v) for v in pvars]
        # person partition groups: person parts of partition sets sharing a PRB, joined
        parts = [tuple(r) for r in po.ps_codes[:, pcols].tolist()]
        parent = {p: p for p in parts}

        def find(p: tuple) -> tuple:
            while parent[p] != p:
                parent[p] = parent[parent[p]]
                p = parent[p]
            return p

        by_prb: dict[int, tuple] = {}
        for s_idx, label in enumerate(po.partition_keys):
            b = prb_of_label.get(label, -1)
            if b < 0:
                continue
            if b in by_prb:
                parent[find(parts[s_idx])] = find(by_prb[b])
            else:
                by_prb[b] = parts[s_idx]
        comp = {p: find(p) for p in parts}
        rel = partition_frame(public, pcfg)
        rparts = [tuple(r) for r in rel.ps_codes[:, pcols].tolist()]
        known = [comp.get(p) for p in rparts]
        o_cnt: dict[tuple, int] = {}
        for s_idx, n in enumerate(np.bincount(po.record_partition_set)):
            o_cnt[comp[parts[s_idx]]] = o_cnt.get(comp[parts[s_idx]], 0) + int(n)
        r_cnt: dict[Any, int] = {}
        for s_idx, n in enumerate(np.bincount(rel.record_partition_set,
                                              minlength=len(rparts))):
            r_cnt[known[s_idx]] = r_cnt.get(known[s_idx], 0) + int(n)
        bad = [g for g in set(o_cnt) | set(r_cnt) if o_cnt.get(g, 0) != r_cnt.get(g, 0)]
        rep.add("person stage: counts per person partition group", not bad,
                f"{len(o_cnt)} groups of person partition sets, all person counts equal" if not bad
                else f"{len(bad)} group(s) of person partition sets changed their person count")
    if p_cert >= h_cert:
        return p_cert, f"person stage: {p_where}"
    return h_cert, f"household stage: {h_where}"


def _composition_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                        original: pd.DataFrame, public: pd.DataFrame, code_o: np.ndarray,
                        first_o: np.ndarray, code_p: np.ndarray, first_p: np.ndarray,
                        xi: float) -> tuple[float, str]:
    """The household checks of a ``risk.composition: protect`` release
    (docs/HOUSEHOLDS.md, "Protecting household composition"), recomputed from the source and
    the public file without the seed: the compositions (members per person class) of both;
    every public composition one of the source's; the composition stage's plan
    (:func:`~sdc.method.household_composition.composition_plan`) and its invariants on the
    household tables keyed on HK x composition (singular households aside: their sizes are
    kept, so the same households are set aside on both sides); its PRBs recounted, their
    exact max risk recomputed; the certificate = the plan's, or 1 / #HK combinations when
    there are singular households. Returns the certificate."""
    from sdc.method.household_composition import (
        COMPOSITION,
        composition_plan,
        composition_table,
        person_classes,
    )
    from sdc.method.households import household_table, row_index

    hh = audit.get("households") or {}
    pc_o, n_cls = person_classes(original, cfg)
    pc_p, _ = person_classes(public, cfg)
    tab = composition_table(code_o, pc_o, first_o.size, n_cls)
    counts_p = np.bincount(code_p * n_cls + pc_p,
                           minlength=first_p.size * n_cls).reshape(first_p.size, n_cls)
    comp_p = row_index(tab.counts, counts_p, [int(x) + 1 for x in
                                              np.vstack([tab.counts, counts_p]).max(axis=0)])
    rep.add("composition stage: released compositions exist in the source",
            bool((comp_p >= 0).all()),
            f"{tab.n_compositions} compositions over {n_cls} person classes; "
            f"{int((comp_p < 0).sum())} public household(s) with a composition the source "
            "does not have")
    if (comp_p < 0).any():
        return 1.0, "composition stage: a released composition is not in the source"
    hk_o = household_table(original, cfg, code_o, first_o)
    from sdc.method.cells import encode_key

    hk_codes = np.column_stack([encode_key(hk_o[k], k, cfg.key_variables[k])
                                for k in cfg.household_keys])
    try:
        cp = composition_plan(hk_codes, tab, cfg)
    except SmallBlockError as e:
        rep.add("composition stage: plan", False, str(e))
        return 1.0, "composition stage: no plan"
    ccfg = cp.config
    sizes_o = tab.size[tab.household]
    sizes_p = tab.size[comp_p]
    keep_o = ~np.isin(sizes_o, cp.singular_sizes)
    keep_p = ~np.isin(sizes_p, cp.singular_sizes)
    rep.add("composition stage: singular households", int((~keep_o).sum()) == int(
        (~keep_p).sum()), f"{int((~keep_o).sum())} household(s) of size(s) "
        f"{cp.singular_sizes} released by the uniform household-key draw (risk 1/"
        f"{cp.hk_table.shape[0]})")
    ht_o = hk_o.assign(**{COMPOSITION: tab.household}).iloc[np.flatnonzero(keep_o)]
    ht_p = household_table(public, cfg, code_p, first_p).assign(
        **{COMPOSITION: comp_p}).iloc[np.flatnonzero(keep_p)]
    ho = partition_frame(ht_o.reset_index(drop=True), ccfg)
    hp = partition_frame(ht_p.reset_index(drop=True), ccfg)
    h_prb = {str(k): int(v) for k, v in (hh.get("partition_sets") or {}).items()}
    group, note = _merge_groups(h_prb)
    _count_checks(rep, ho, hp, group, xi, ccfg, note, what="composition stage: ",
                  unit=" (in households)")
    h_cert, h_where = _prb_checks(rep, ho, hh.get("blocks") or [], h_prb, xi,
                                  what="composition stage: ")
    rep.add("person stage: none", not (audit.get("blocks") or []),
            "risk.composition: protect: no person PRB; person keys move with their "
            "household's composition only")
    if cp.singular.size and 1.0 / cp.hk_table.shape[0] > h_cert:
        return (1.0 / cp.hk_table.shape[0],
                f"composition stage: singular households (1/{cp.hk_table.shape[0]})")
    return h_cert, f"composition stage: {h_where}"


def _count_checks(rep: AuditReport, po: Partitioned, pr: Partitioned, group: Any, xi: float,
                  cfg: ReleaseConfig, note: str = "", what: str = "", unit: str = "") -> None:
    """Counts per partition set (``group`` maps a label to its comparison group), non-sensitive
    cells unchanged, no released cell empty in the original. ``what`` prefixes the check names,
    ``unit`` names what is counted in the details, ``note`` the merged groups."""
    co, cr = _ps_counts(po), _ps_counts(pr)
    co = co.groupby(co.index.map(group)).sum()
    cr = cr.groupby(cr.index.map(group)).sum()
    both = pd.concat([co.rename("original"), cr.rename("released")], axis=1).fillna(0)
    diff = both[both["original"] != both["released"]]
    rep.add(what + "partition sets: counts equal", diff.empty,
            f"{len(co)} partition sets, all counts equal{unit}{note}" if diff.empty else
            f"{len(diff)} partition set(s) differ{note}, e.g. " + "; ".join(
                f"{k}: {int(r.original)} -> {int(r.released)}" for k, r in diff.head(3).iterrows()))

    names = po.cells.names
    cells = _cell_frame(po).merge(_cell_frame(pr), on=names, how="outer",
                                  suffixes=("_orig", "_rel"), indicator=True)
    sens_t = 1.0 / xi
    t_o = cells["t_orig"].fillna(0).to_numpy()
    t_r = cells["t_rel"].fillna(0).to_numpy()
    nonsens = (t_o > 0) & (t_o >= sens_t)
    changed = nonsens & (t_o != t_r)
    rep.add(what + "non-sensitive cells unchanged", not changed.any(),
            f"{int(nonsens.sum())} non-sensitive cells, all counts unchanged" if not changed.any()
            else f"{int(changed.sum())} non-sensitive cell(s) changed count, e.g. "
            + _cell_examples(cells[changed], cfg))
    new = (t_o == 0) & (t_r > 0)
    rep.add(what + "no new cells", not new.any(),
            "every released cell exists in the original" if not new.any() else
            f"{int(new.sum())} released cell(s) ({int(t_r[new].sum())} records) were empty in "
            "the original, e.g. " + _cell_examples(cells[new], cfg))


def _prb_checks(rep: AuditReport, po: Partitioned, blocks: list[dict[str, Any]],
                prb_of_label: dict[str, int], xi: float, what: str = "",
                near: tuple[Any, list] | None = None) -> tuple[float, str]:
    """Sensitive cells in PRBs, PRB profiles recounted, exact max risks recomputed, and the
    certificate of ``po`` (max over PRBs and non-sensitive cells): returns (certificate, where).
    ``what`` prefixes the check names (``"household "`` for the household stage). ``near``:
    ``(NearCertifier on po, audit.json's near.prbs)``: every PRB's W is re-derived from its
    cells (its SHA-256 compared with the recorded one) and certified under it."""
    sens = po.sensitive
    cell_label = np.asarray(po.partition_keys, dtype=object)[po.cell_partition_set]
    cell_prb = np.array([prb_of_label.get(lab, -1) for lab in po.partition_keys],
                        dtype=np.int64)[po.cell_partition_set]
    orphan = sens & (cell_prb < 0)
    rep.add(what + "sensitive cells all in a PRB", not orphan.any(),
            f"{int(sens.sum())} sensitive cells in {len(blocks)} PRBs" if not orphan.any() else
            f"{int(orphan.sum())} sensitive cell(s) in partition sets without a PRB, e.g. "
            f"{sorted(set(cell_label[orphan]))[:3]}")
    recount = pd.DataFrame({"prb": cell_prb[sens], "t": po.cells.frequency[sens]})
    recount = recount.groupby(["prb", "t"]).size()
    risks, bad_profile, bad_risk, over, bad_w = [], [], [], [], []
    for b in blocks:
        i = int(b["prb"])
        prof = (recount.loc[i].to_dict() if i in recount.index.get_level_values(0) else {})
        prof = {int(t): int(m) for t, m in prof.items()}
        stored = _parse_profile(b.get("profile", ""))
        if prof != stored:
            bad_profile.append(f"PRB {i} ({b.get('partition_key')}): recorded "
                               f"{_fmt_profile(stored)}, recounted {_fmt_profile(prof)}")
        if not prof:
            continue
        if near is None:
            r = max_risk(prof, float(b["theta"]))  # mechanism-aware: own and other picked cells
        else:
            r = _near_risk(near, po, prb_of_label, i, prof, float(b["theta"]), bad_w)
        risks.append((r.max_risk, i, r.t, r.a, r.z, r.t_z))
        if not math.isclose(r.max_risk, float(b.get("max_risk", math.nan)), rel_tol=_REL):
            bad_risk.append(f"PRB {i}: recorded {b.get('max_risk')}, recomputed {r.max_risk:.10f}")
        if r.max_risk > xi + _TOL:
            over.append(f"PRB {i} ({b.get('partition_key')}): {r.max_risk:.6f} at t={r.t}, "
                        f"a={r.a}, {r.z} cell (t_z={r.t_z}) with theta={float(b['theta']):.6f}")
    extra_prbs = sorted(set(recount.index.get_level_values(0)) - {int(b["prb"]) for b in blocks})
    if extra_prbs:
        bad_profile.append(f"PRBs {extra_prbs[:5]} hold sensitive cells but are not in audit.json")
    rep.add(what + "PRB profiles match the source", not bad_profile,
            f"{len(blocks)} PRB profiles recounted" if not bad_profile else "; ".join(bad_profile[:3])
            + (f" (and {len(bad_profile) - 3} more)" if len(bad_profile) > 3 else ""))
    if near is not None:
        rep.add(what + "near-cell W re-derived = recorded", not bad_w,
                f"{len(blocks)} PRBs' W re-derived from their cells, SHA-256 as recorded"
                if not bad_w else "; ".join(bad_w[:3]))
    rep.add(what + "PRB max risk recomputed = recorded", not bad_risk,
            "every PRB's exact max risk matches" if not bad_risk else "; ".join(bad_risk[:3]))
    rep.add(what + "PRB max risk <= xi", not over,
            f"every PRB's exact max risk <= xi = {xi}" if not over else
            f"{len(over)} PRB(s) above xi = {xi}: " + "; ".join(over[:3]))

    cert, where = 0.0, "no cell"
    if risks:
        m = max(risks)
        cert, where = m[0], f"PRB {m[1]} at t={m[2]}, a={m[3]}, {m[4]} cell (t_z={m[5]})"
    t_ns = po.cells.frequency[~sens]
    if t_ns.size and 1.0 / int(t_ns.min()) > cert:
        cert, where = 1.0 / int(t_ns.min()), f"a non-sensitive cell with t={int(t_ns.min())}"
    return cert, where


def _near_risk(near: tuple[Any, list], po: Partitioned, prb_of_label: dict[str, int], i: int,
               prof: dict[int, int], theta: float, bad_w: list[str]) -> Any:
    """PRB i's certificate under its near design, re-derived from the source's cells."""
    certifier, recorded = near
    members = sorted(s for s, lab in enumerate(po.partition_keys) if prb_of_label.get(lab) == i)
    t_max = max(prof) if prof else 1
    b = Block(members, np.array([prof.get(t, 0) for t in range(t_max + 1)], dtype=np.int64))
    rec = next((x for x in recorded if int(x.get("prb", -1)) == i), None)
    got = certifier.design(b)[0].digest()
    if rec is None or rec.get("w_sha256") != got:
        bad_w.append(f"PRB {i}: W re-derived {got[:12]}..., audit.json records "
                     f"{(rec or {}).get('w_sha256', 'nothing')}")
    return design_risk(certifier.transition(b, theta))


def _dependence_checks(rep: AuditReport, audit: dict[str, Any], what: str = "") -> None:
    """The dependence check recomputed from the source: its figures equal the recorded ones
    and no released non-key column fails (METHOD.md, "Dependence of non-key columns").
    ``what`` prefixes the check names (the stages of a household release)."""
    if rep.dependence is None:
        return
    recorded = (audit.get("dependence") or {}).get("columns")
    got = [f.as_dict() for f in rep.dependence]
    if recorded is None:
        rep.add(f"{what}dependence check: recorded", False, "audit.json has no dependence figures (a "
                "release made before the check existed); recomputed: " + ", ".join(
                    f"{f.column} {f.figure:.3f}{' FAILS' if f.flagged else ''}"
                    for f in rep.dependence))
    else:
        same = json.dumps(got, sort_keys=True) == json.dumps(recorded, sort_keys=True)
        rep.add(f"{what}dependence check: recomputed = recorded", same,
                f"{len(got)} released non-key column(s) re-measured" if same else
                f"recomputed {got[:3]}, audit.json records {recorded[:3]}")
    bad = [f for f in rep.dependence if f.flagged]
    rep.add(f"{what}dependence check: no non-key column gives keys away", not bad,
            "every released non-key column passes" if not bad else "; ".join(
                f"{f.column!r}: {f.figure:.3f} > xi (revealing {sorted(f.revealed)})"
                for f in bad[:3]))


# -- issue 20, item 7: modes, the record's own fields, the seed, the release made again -------
_MODES = {".": 0o755, "public": 0o755, "internal": 0o700}
_STAGED_TOP = 0o700   # a release staged for review (sdc.publish.review) until approved
_FILE_MODES = {"public": 0o644, "internal": 0o600}


def _mode_checks(rep: AuditReport, release_dir: Path) -> None:
    """The folder and file modes ``write_release`` sets: release and ``public/`` 0755 with
    0644 files, ``internal/`` 0700 with 0600 files; only regular files, no symlinks."""
    bad = []
    for sub, want in _MODES.items():
        p = release_dir / sub if sub != "." else release_dir
        if not p.is_dir() or p.is_symlink():
            bad.append(f"{sub}/ is not a folder")
            continue
        got = stat.S_IMODE(p.lstat().st_mode)
        if got != want and not (sub == "." and got == _STAGED_TOP
                                and p.name.endswith(".staged")):
            bad.append(f"{'the release folder' if sub == '.' else sub + '/'} is {got:04o} "
                       f"(expected {want:04o})")
        if sub == ".":
            continue
        for f in sorted(p.iterdir()):
            st = f.lstat()
            if not stat.S_ISREG(st.st_mode):
                bad.append(f"{sub}/{f.name} is not a regular file")
            elif stat.S_IMODE(st.st_mode) != _FILE_MODES[sub]:
                bad.append(f"{sub}/{f.name} is {stat.S_IMODE(st.st_mode):04o} "
                           f"(expected {_FILE_MODES[sub]:04o})")
    rep.add("permissions", not bad,
            "release and public/ 0755 with 0644 files, internal/ 0700 with 0600 files" if not bad
            else "; ".join(bad[:4]) + (f" (and {len(bad) - 4} more)" if len(bad) > 4 else "")
            + ". Restore with: chmod 0700 internal && chmod 0600 internal/*")


def _record_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any]) -> None:
    """Fields of the record that follow from the config copy alone."""
    risk, inp = audit.get("risk") or {}, audit.get("input") or {}
    want = {"format": AUDIT_FORMAT, "name": cfg.name, "input.format": cfg.input.resolved_format,
            "risk.theta_mode": cfg.risk.theta, "risk.small_blocks": cfg.risk.small_blocks,
            "seed.source": "config" if isinstance(cfg.seed, int) else "file",
            "counts.records": inp.get("n_rows")}
    got = {"format": audit.get("format"), "name": audit.get("name"),
           "input.format": inp.get("format"), "risk.theta_mode": risk.get("theta_mode"),
           "risk.small_blocks": risk.get("small_blocks"),
           "seed.source": (audit.get("seed") or {}).get("source"),
           "counts.records": (audit.get("counts") or {}).get("records")}
    bad = [f"{k}: recorded {got[k]!r}, the config copy says {v!r}" for k, v in want.items()
           if got[k] != v]
    rep.add("audit record: fields from the config", not bad,
            "format, name, input format, theta mode, small-block policy, seed source and record "
            "count agree with the config copy" if not bad else "; ".join(bad))


def _seed_of(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any]) -> Any:
    """The release's seed (for the re-derivation), after checking the recorded seed path and
    SHA-256 against the seed file the config copy names. None if it cannot be read."""
    from sdc.series.seeds import SeedInfo, load_seed

    rec = audit.get("seed") or {}
    created = bool(rec.get("created_by_this_run"))
    if isinstance(cfg.seed, int):
        return SeedInfo(int(cfg.seed), None, None, created)
    try:
        info = load_seed(cfg, create=False)
    except (InputError, ConfigError) as e:
        rep.add("seed file: readable", False,
                f"{e}. Without the seed the release cannot be re-derived: run the audit as the "
                "release's owner where the seed file is")
        return None
    bad = []
    if rec.get("path") != str(info.path):
        bad.append(f"seed.path recorded {rec.get('path')!r}, the config copy names "
                   f"{str(info.path)!r}")
    if rec.get("sha256") != info.sha256:
        bad.append(f"seed.sha256 recorded {str(rec.get('sha256'))[:16]}..., the seed file has "
                   f"{str(info.sha256)[:16]}...")
    rep.add("seed file: path and hash", not bad,
            f"{info.path} matches the recorded path and SHA-256" if not bad else "; ".join(bad))
    info.created = created
    return info


def _rederived_checks(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig,
                      audit: dict[str, Any], seed_info: Any, moved_source: bool = False) -> None:
    """Make the release again (:mod:`sdc.audit.rederive`) and compare every public file
    record for record and every field of the audit record (with ``moved_source``, the
    recorded input path is where the source lay at release time: its hash was checked)."""
    from sdc.audit.rederive import audit_differences, public_differences, rederive

    names = {c.name: c.ok for c in rep.checks}
    if seed_info is None or not names.get("source: hash", False):
        why = "no seed" if seed_info is None else "the source changed"
        rep.add("re-derived release: public files", False,
                f"not re-derived ({why}): the public files cannot be compared with the release "
                "the source and seed give")
        return
    try:
        again = rederive(cfg, audit, seed_info)
    except (InputError, ConfigError, ValueError, OSError) as e:
        rep.add("re-derived release: public files", False,
                f"the release cannot be made again from its source, config copy and seed "
                f"({type(e).__name__}: {e})")
        return
    pub = release_dir / "public"
    present = {p.name for p in pub.iterdir()} if pub.is_dir() else set()
    problems = []
    if missing := sorted(set(again.public) - present):
        problems.append(f"missing: {missing}")
    for name, data in sorted(again.public.items()):
        if name in present:
            d = public_differences(name, (pub / name).read_bytes(), data)
            if d is not None:
                problems.append(d)
    rep.add("re-derived release: public files", not problems,
            f"{len(again.public)} public files equal the re-derived release byte for byte "
            f"({', '.join(sorted(again.public))})" if not problems else "; ".join(problems[:4]))
    if moved_source and isinstance(again.audit.get("input"), dict):
        again.audit["input"]["path"] = (audit.get("input") or {}).get("path")
    diffs = audit_differences(audit, again.audit)
    rep.add("re-derived release: audit record", not diffs,
            "every field of audit.json equals the re-derived record (except the fields "
            "recorded, not checkable: created_at, package_version, python, "
            "seed.created_by_this_run, config.source_path)" if not diffs else
            f"{len(diffs)} field(s) differ: " + "; ".join(diffs[:5])
            + (" ..." if len(diffs) > 5 else ""))


def _source_found(rep: AuditReport, src: Path, exists: bool, what: str,
                  digest_of: Callable[[Path], str], inp: dict[str, Any]) -> bool:
    """Report the source's existence and its hash against ``audit.json``'s; False when it
    is not there (nothing more can be checked)."""
    if not exists:
        rep.add("source: exists", False, f"{what} {str(src)!r} not found; if it moved, point "
                "the audit at it: sdc audit RELEASE_DIR --source NEW_PATH")
        return False
    digest = digest_of(src)
    rep.add("source: hash", digest == inp.get("sha256"),
            f"{src} matches its recorded SHA-256" if digest == inp.get("sha256") else
            f"{src} has SHA-256 {digest[:16]}..., audit.json records "
            f"{str(inp.get('sha256'))[:16]}...: the source changed since the release")
    return True


def _read_in_memory(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig, src: Path,
                    inp: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Source and public file read whole (pandas engine releases), with the source's hash and
    row count and the public file's record count and output schema checked."""
    if not _source_found(rep, src, src.is_file(), "source file", sha256_file, inp):
        return None
    cfg.input.path = src
    try:
        original = read_input(cfg)
    except InputError as e:
        rep.add("source: readable", False, str(e))
        return None
    n_rows = int(inp.get("n_rows", -1))
    rep.add("source: row count", len(original) == n_rows,
            f"{len(original)} rows (audit.json: {n_rows})")

    # -- public microdata ------------------------------------------------------------------------
    try:
        public = read_public(release_dir, cfg)
    except (OSError, ValueError) as e:
        rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
        return None
    rep.add("public microdata: record count", len(public) == len(original),
            f"{len(public)} released records, {len(original)} in the source")
    try:
        validate_output(public, cfg)
        rep.add("public microdata: output schema", True,
                "key domains, unique record_id, no identifier column")
    except ValueError as e:
        rep.add("public microdata: output schema", False, str(e))
    return original, public


def _counted_partitions(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig, src: Path,
                        inp: dict[str, Any], batched: bool
                        ) -> tuple[Partitioned, Partitioned, Any] | None:
    """Source and public file counted by the release pipeline's count pass
    (:func:`sdc.pipeline.release.count_cells`), with the runner of the kind of executor that
    made the release: in record batches for a streaming or Dask release (memory bounded by a
    batch and the cell table; the output schema checked per batch), whole for a pandas release
    (the in-memory runner: any input format, the output schema checked on the whole file)."""
    from sdc.executors.memory import InMemory
    from sdc.executors.streaming import LocalBatches
    from sdc.io.batches import input_sha256
    from sdc.method.partition import partition_cells
    from sdc.pipeline.release import count_cells

    def runner(config: ReleaseConfig) -> Any:
        return LocalBatches(config) if batched else InMemory(config)

    if not _source_found(rep, src, src.exists(), "source", input_sha256, inp):
        return None
    cfg.input.path = src
    try:
        orig = count_cells(runner(cfg), cfg, validate=False)
    except InputError as e:
        rep.add("source: readable", False, str(e))
        return None
    n_rows = int(inp.get("n_rows", -1))
    rep.add("source: row count", orig.n_records == n_rows,
            f"{orig.n_records} rows (audit.json: {n_rows})")
    pub = Path(release_dir) / "public"
    name = "microdata.parquet" if (pub / "microdata.parquet").is_file() else "microdata.csv"
    pcfg = cfg.without_recoding()  # the public file holds released values
    pcfg.input.path = pub / name
    pcfg.input.format = "parquet" if name.endswith(".parquet") else "csv"
    pcfg.input.delimiter = ","
    pcfg.input.encoding = "utf-8"
    pcfg.input.id_column = None
    pcfg.input.drop = []
    pcfg.input.weight = None
    pcfg.perturb = {}
    if pcfg.output is not None:
        pcfg.output.formats = ["parquet"]
    pcfg._base_dir = cfg._base_dir
    try:
        public = runner(pcfg)
        rel = count_cells(public, pcfg, validate=False, dependence=False)
        if cfg.derived:
            cells_o = np.asarray(orig.cell_codes)
            _derived_check(rep, cfg, orig.derived, cells_o, rel.derived,
                           np.asarray(rel.cell_codes))
        problems = []
        for batch in public.frames():
            try:
                validate_output(batch.reset_index(drop=True), cfg)
            except ValueError as e:
                problems.append(f"records {batch.index[0] + 1}-{batch.index[-1] + 1}: {e}"
                                if batched else str(e))
    except (OSError, ValueError) as e:
        rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
        return None
    rep.add("public microdata: record count", rel.n_records == orig.n_records,
            f"{rel.n_records} released records, {orig.n_records} in the source")
    rep.add("public microdata: output schema", not problems,
            ("key domains, unique record_id within each batch, no identifier column (checked "
             "in batches)" if batched else "key domains, unique record_id, no identifier "
             "column") if not problems else "; ".join(problems[:3]))
    po = partition_cells(orig.cells, cfg)
    try:
        plan = plan_release(po, cfg)
        codes = orig.cell_codes
        rep.dependence = measure_dependence(orig.dependence, plan, cfg,
                                            lambda x: np.searchsorted(codes, x))
    except (InputError, ConfigError, SmallBlockError) as e:
        rep.add("dependence check: recomputed", False, f"cannot recompute: {e}")
    return po, partition_cells(rel.cells, cfg), orig.weight_total


def _derived_check(rep: AuditReport, cfg: ReleaseConfig, src, src_cells: np.ndarray, pub,
                   pub_cells: np.ndarray) -> None:
    """Every ``derived:`` column of the public file is a function of the released cell and
    equals the source's mapping there (compared by value hash)."""
    from sdc.method.derived import DerivedError
    from sdc.method.draws import value_hash

    bad = []
    o_src, o_pub = np.argsort(src_cells), np.argsort(pub_cells)
    for c in cfg.derived:
        try:
            sv = src.values(c, src_cells[o_src], lambda j: f"cell {j}")
            pv = pub.values(c, pub_cells[o_pub], lambda j: f"cell {j}")
        except DerivedError as e:
            bad.append(str(e))
            continue
        at = np.searchsorted(src_cells[o_src], pub_cells[o_pub])
        at = np.minimum(at, max(src_cells.size - 1, 0))
        known = src_cells[o_src][at] == pub_cells[o_pub]
        diff = ~known | (value_hash(sv.take(at)) != value_hash(pv))
        if diff.any():
            bad.append(f"{c!r}: {int(diff.sum())} released cell(s) hold a value other than the "
                       "source's mapping of their key values")
    rep.add("derived columns follow the released keys", not bad,
            f"{cfg.derived}: every released record carries the source's mapping of its "
            "released key values" if not bad else "; ".join(bad[:3]))


def _recoding_check(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig,
                    po: Partitioned) -> None:
    """The recoding loss re-derived from the source (its declared values counted again) and
    compared with ``utility.json``'s ``recoding`` section."""
    import json

    from sdc.reports.recoding import fine_counts, recoding_section

    try:
        again = recoding_section(cfg, fine_counts(cfg), po.cells.key_codes, po.cells.frequency)
        stored = json.loads((release_dir / "internal" / "utility.json").read_text())["recoding"]
    except (OSError, ValueError, KeyError) as e:
        rep.add("recoding loss = recorded", False, f"cannot re-derive it: {e}")
        return
    bad = [r["name"] for r, s in zip(again["keys"], stored.get("keys", []), strict=False)
           if r["records_coarsened"] != s.get("records_coarsened")
           or not math.isclose(r["entropy_after"], s.get("entropy_after", -1), rel_tol=1e-9,
                               abs_tol=1e-12)
           or not math.isclose(r["entropy_before"], s.get("entropy_before", -1), rel_tol=1e-9,
                               abs_tol=1e-12)]
    ok = (not bad and len(again["keys"]) == len(stored.get("keys", []))
          and again["records_coarsened"] == stored.get("records_coarsened"))
    rep.add("recoding loss = recorded", ok,
            f"{len(again['keys'])} recoded key(s), {again['records_coarsened']} records with a "
            "coarsened value, entropies recomputed from the source" if ok else
            f"recomputed recoding loss differs from utility.json for {bad or 'the overall count'}")


def _cell_examples(rows: pd.DataFrame, cfg, k: int = 3) -> str:
    def value(n: str, code: int) -> str:
        dom = cfg.key_variables[n].domain
        return repr(dom[code]) if code < len(dom) else "<missing>"

    names = cfg.key_names
    return "; ".join(
        "(" + ", ".join(f"{n}={value(n, int(r[n]))}" for n in names) + f"): "
        f"{int(np.nan_to_num(r['t_orig']))} -> {int(np.nan_to_num(r['t_rel']))}"
        for _, r in rows.head(k).iterrows()
    )
