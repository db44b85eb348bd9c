"""The audit's checks of the release folder and its record: audit.json loaded, file hashes and
modes, the record's fields from the config copy, the seed file, and the release made again
from source, config copy and seed (:mod:`sdc.audit.rederive`)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml

from sdc.audit.rederive import Rederived, audit_differences, public_differences, rederive
from sdc.audit.report import AuditError, AuditReport
from sdc.config.load import load_yaml, parse_config
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import InputError
from sdc.io.write import sha256_bytes, sha256_file
from sdc.publish.review import is_staged, review_checks
from sdc.release.record import AUDIT_FORMAT
from sdc.series.seeds import SeedInfo, load_seed

__all__ = ["config_checks", "hash_checks", "load_audit", "mode_checks", "record_checks",
           "rederived_checks", "rederived_release", "seed_of"]


def load_audit(release_dir: Path) -> dict[str, Any]:
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


def hash_checks(report: AuditReport, release_dir: Path, audit: dict[str, Any]) -> None:
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


_MODES = {".": 0o755, "public": 0o755, "internal": 0o700}
_STAGED_TOP = 0o700   # a release staged for review (sdc.publish.review) until approved
_FILE_MODES = {"public": 0o644, "internal": 0o600}


def mode_checks(rep: AuditReport, release_dir: Path) -> None:
    """The folder and file modes ``write_release`` sets: release and ``public/`` 0755 with
    0644 files, ``internal/`` 0700 with 0600 files; only regular files, no symlinks, each with
    one link (a hard link elsewhere could change a published file)."""
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
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                bad.append(f"{sub}/{f.name} has {st.st_nlink} hard links (writing to another "
                           "name changes it; replace it by a copy: cp -p F F.new && mv F.new F)")
    rep.add("permissions", not bad,
            "release and public/ 0755 with 0644 files, internal/ 0700 with 0600 files" if not bad
            else "; ".join(bad[:4]) + (f" (and {len(bad) - 4} more)" if len(bad) > 4 else "")
            + ". Restore with: chmod 0700 internal && chmod 0600 internal/*")


def record_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any]) -> None:
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


def seed_of(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any]) -> SeedInfo | None:
    """The release's seed (for the re-derivation), after checking the recorded seed path and
    SHA-256 against the seed file the config copy names. None if it cannot be read."""
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


def rederived_release(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                      seed_info: SeedInfo | None) -> Rederived | str:
    """The release made again (:mod:`sdc.audit.rederive`) from the source (its hash checked
    in ``rep``), config copy and seed, or why it could not be (a detail for the
    ``re-derived release: public files`` check)."""
    names = {c.name: c.ok for c in rep.checks}
    if seed_info is None or not names.get("source: hash", False):
        why = "no seed" if seed_info is None else "the source changed"
        return (f"not re-derived ({why}): the public files cannot be compared with the release "
                "the source and seed give")
    try:
        return rederive(cfg, audit, seed_info)
    except (InputError, ConfigError, ValueError, OSError) as e:
        return (f"the release cannot be made again from its source, config copy and seed "
                f"({type(e).__name__}: {e})")


def rederived_checks(rep: AuditReport, release_dir: Path, audit: dict[str, Any],
                     again: Rederived | str, moved_source: bool = False) -> None:
    """Compare the release made again (:func:`rederived_release`; a string: why it was not)
    with the folder: every public file by its SHA-256 (record for record when it differs) and
    every field of the audit record
    (with ``moved_source``, the recorded input path is where the source lay at release time:
    its hash was checked)."""
    if isinstance(again, str):
        rep.add("re-derived release: public files", False, again)
        return
    pub = release_dir / "public"
    present = {p.name for p in pub.iterdir()} if pub.is_dir() else set()
    problems = []
    if missing := sorted(set(again.public) - present):
        problems.append(f"missing: {missing}")
    for name in sorted(again.public):  # by SHA-256 (read in blocks); a differing file is read
        if name in present and sha256_file(pub / name) != again.sha256(name):
            problems.append(public_differences(name, (pub / name).read_bytes(), again.data(name))
                            or f"{name}: differs from the re-derived release")
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


def config_checks(rep: AuditReport, release_dir: Path, audit: dict[str, Any]
                  ) -> ReleaseConfig | None:
    """The stored config copy: its SHA-256, that it still parses (None when it does not), and
    the review record against the config's ``review:``."""
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
        return None
    rep.add("config copy: parses", True, f"release job {cfg.name!r}")
    staged = release_dir if is_staged(release_dir) else None
    for name, ok, detail in review_checks(audit, cfg.review is not None and cfg.review.required,
                                          list(cfg.review.approvers) if cfg.review else None,
                                          staged=staged):
        rep.add(name, ok, detail)
    return cfg
