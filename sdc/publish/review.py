"""The review gate: a release is staged, reviewed, then approved (published) or rejected.

With ``review: {required: true, approvers: [...]}`` in the config (or ``sdc release
--review``), the release flow builds the complete release folder but publishes it as
``<release>.staged/`` instead of ``<release>/``: the same atomic write, with the top folder
mode 0700, so nobody but the release user reads it (not even its ``public/`` files) before the
review board has signed off. ``internal/review.json`` records what is under review:

- ``manifest_sha256``: the SHA-256 of the sorted ``folder/name<TAB>sha256`` lines of every
  public and internal file that ``internal/audit.json`` lists (microdata, codebook, the risk
  and utility reports, report.html, ...): one hash that pins everything the reviewers saw;
- the release folder it is for, whether it may replace an existing release (``--force``), the
  approvers, when it was staged.

``sdc approve RELEASE_DIR --as NAME [--comment TEXT]`` checks NAME against the approvers, checks
every staged file against ``audit.json`` and the manifest against the one staged (nothing was
changed during the review), records the approval in ``internal/audit.json`` (``review``: who,
when, comment, ``approved_manifest_sha256``), and publishes the folder with one atomic rename
(an exchange with the existing release under ``--force``). ``sdc reject ... --as NAME``
deletes the staged folder. ``sdc audit`` checks that the published files are the approved ones
(the manifest of ``audit.json`` equals the approved one, and every file matches
``audit.json``), and fails a release whose config requires a review but that has no approval.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sdc.errors import InputError

__all__ = ["REVIEW_FILE", "ReviewError", "approve", "manifest_sha256", "reject", "stage_release",
           "staged_path", "target_of"]

REVIEW_FILE = "review.json"
STAGED_SUFFIX = ".staged"


class ReviewError(InputError):
    """An approval or rejection cannot be done (not staged, not an approver, files changed):
    CLI exit 2."""


def staged_path(out_dir: Path) -> Path:
    """``<release>.staged`` beside ``<release>``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + STAGED_SUFFIX)


def target_of(path: Path) -> tuple[Path, Path]:
    """(release folder, staged folder) for a path naming either of them."""
    path = Path(path).expanduser().absolute()
    if path.name.endswith(STAGED_SUFFIX):
        return path.with_name(path.name[: -len(STAGED_SUFFIX)]), path
    return path, staged_path(path)


def manifest_sha256(audit: dict[str, Any]) -> str:
    """SHA-256 of the sorted ``folder/name<TAB>sha256`` lines of every file audit.json lists."""
    lines = sorted(f"{folder}/{name}\t{digest}"
                   for folder, key in (("public", "public_files"), ("internal", "internal_files"))
                   for name, digest in (audit.get(key) or {}).items())
    return hashlib.sha256("".join(line + "\n" for line in lines).encode("utf-8")).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def stage_release(out_dir: Path, public: dict[str, Any], internal: dict[str, bytes], *,
                  force: bool, approvers: list[str], input_path: Path | None = None,
                  run_id: str | None = None) -> Path:
    """Write the release into ``<out_dir>.staged`` (top folder 0700; a pending staged release of
    the same folder is replaced) and record what is under review. Returns the staged folder."""
    from sdc.publish.folder import write_release

    staged = write_release(staged_path(Path(out_dir)), public, internal, force=True,
                           input_path=input_path, top_mode=0o700)
    audit = json.loads(internal["audit.json"])
    record = {"status": "pending", "release_dir": str(Path(out_dir).absolute()),
              "replace_existing": bool(force), "approvers": list(approvers),
              "staged_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "manifest_sha256": manifest_sha256(audit), "flow_run_id": run_id}
    _write_private(staged / "internal" / REVIEW_FILE, _json_bytes(record))
    return staged


def _load_pending(path: Path) -> tuple[Path, Path, dict[str, Any]]:
    out, staged = target_of(path)
    review = staged / "internal" / REVIEW_FILE
    if not review.is_file():
        if (out / "internal" / "audit.json").is_file() and not staged.exists():
            raise ReviewError(f"release {str(out)!r} is already published; there is no staged "
                              f"release {str(staged)!r} awaiting review")
        raise ReviewError(f"no release awaits review at {str(staged)!r} (no internal/"
                          f"{REVIEW_FILE}); run `sdc release --review` (or set review: in the "
                          "config) to stage one")
    record = json.loads(review.read_text(encoding="utf-8"))
    return out, staged, record


def _check_approver(record: dict[str, Any], name: str) -> None:
    if not name.strip():
        raise ReviewError("--as needs the reviewer's name")
    approvers = record.get("approvers") or []
    if approvers and name not in approvers:
        raise ReviewError(f"{name!r} is not among the approvers of this release "
                          f"({', '.join(approvers)}); the config's review.approvers lists them")


def _check_files(staged: Path, audit: dict[str, Any], record: dict[str, Any]) -> None:
    from sdc.io.write import sha256_file

    changed = []
    for folder, key in (("public", "public_files"), ("internal", "internal_files")):
        for fname, digest in (audit.get(key) or {}).items():
            p = staged / folder / fname
            if not p.is_file() or sha256_file(p) != digest:
                changed.append(f"{folder}/{fname}")
    if changed or manifest_sha256(audit) != record.get("manifest_sha256"):
        raise ReviewError(
            f"the staged release {str(staged)!r} changed after it was staged for review "
            f"({', '.join(changed) or 'internal/audit.json'}); what would be published is not "
            "what the reviewers saw. Reject it and release again")


@dataclass
class Decision:
    """The outcome of :func:`approve` / :func:`reject`."""

    release_dir: Path
    staged_dir: Path
    name: str
    at: str
    manifest_sha256: str


def approve(path: Path, name: str, comment: str | None = None, *,
            discard_extra_files: bool = False) -> Decision:
    """Publish a staged release (see the module docstring). Raises :class:`ReviewError`.

    Replacing an existing release that holds files the release did not write (staff put an
    ``APPROVAL.txt`` or a signature there, possibly during the review) is refused, listing
    them, unless ``discard_extra_files`` (the same rule as ``sdc release --force``)."""
    from sdc.publish.folder import (
        ReleaseExistsError,
        extra_files,
        first_ten,
        fsync_dir,
        publish_new,
        swap_in,
    )

    out, staged, record = _load_pending(path)
    _check_approver(record, name)
    audit_path = staged / "internal" / "audit.json"
    audit = json.loads(audit_path.read_text(encoding="utf-8"))
    _check_files(staged, audit, record)
    exists = out.exists() or out.is_symlink()
    if exists and (out.is_symlink() or not (out / "internal" / "audit.json").is_file()):
        raise ReviewError(f"{str(out)!r} exists and is not a release folder; it is never "
                          "replaced. Move it away and approve again")
    if exists and not record.get("replace_existing"):
        raise ReleaseExistsError(
            f"release {str(out)!r} exists and the staged release was not made with --force; "
            "move the existing release away, or reject this one and release again with --force")
    extra = extra_files(out) if exists and not discard_extra_files else []
    if extra:
        raise ReviewError(
            f"release {str(out)!r} holds {len(extra)} file(s) the release did not write: "
            f"{first_ten(extra)}. Approving replaces the whole folder and would delete them. Move them "
            "out of the release first (e.g. keep approvals and signatures beside it) and "
            "approve again, or approve with --discard-extra-files to delete them with the old "
            "release")
    at = datetime.now(UTC).isoformat(timespec="seconds")
    audit["review"] = {"approved_by": name, "approved_at": at, "comment": comment or "",
                       "approved_manifest_sha256": record["manifest_sha256"],
                       "staged_at": record.get("staged_at"),
                       "flow_run_id": record.get("flow_run_id")}
    _write_private(audit_path, _json_bytes(audit))
    record.update(status="approved", approved_by=name, approved_at=at, comment=comment or "")
    _write_private(staged / "internal" / REVIEW_FILE, _json_bytes(record))
    os.chmod(staged, 0o755)
    fsync_dir(staged)
    if exists:
        swap_in(staged, out)  # staged now holds the old release
        shutil.rmtree(staged, ignore_errors=True)
    else:
        publish_new(staged, out)
    fsync_dir(out.parent)
    return Decision(out, staged, name, at, record["manifest_sha256"])


def reject(path: Path, name: str, comment: str | None = None) -> Decision:
    """Discard a staged release (its folder is deleted). Raises :class:`ReviewError`."""
    out, staged, record = _load_pending(path)
    _check_approver(record, name)
    shutil.rmtree(staged)
    return Decision(out, staged, name, datetime.now(UTC).isoformat(timespec="seconds"),
                    record.get("manifest_sha256", ""))


def review_checks(audit: dict[str, Any], required: bool) -> list[tuple[str, bool, str]]:
    """``sdc audit``'s review checks: (name, ok, detail)."""
    rev = audit.get("review")
    if rev is None:
        if required:
            return [("review: approved", False, "the config requires a review, but audit.json "
                     "records no approval (published without `sdc approve`?)")]
        return []
    ok = manifest_sha256(audit) == rev.get("approved_manifest_sha256")
    return [("review: published files are the approved ones", ok,
             f"approved by {rev.get('approved_by')} at {rev.get('approved_at')}; manifest "
             f"{rev.get('approved_manifest_sha256', '')[:16]}..." if ok else
             "the file hashes in audit.json differ from those approved")]


def await_decision(out_dir: Path, *, since: str | None = None, poll_seconds: float = 1.0,
                   timeout_seconds: float | None = None) -> dict[str, Any]:
    """Wait until the release staged for ``out_dir`` is decided by ``sdc approve`` or
    ``sdc reject`` (another process, any machine sharing the folder): returns
    ``{"status": "approved", "name", "comment", "at", "release_dir"}`` once the staged folder
    has been published with the manifest it holds now, or ``{"status": "rejected", ...}``
    (name unknown: a rejection deletes the staged folder) once it is gone otherwise.

    ``since`` (ISO 8601 UTC, seconds): when the caller staged it; a decision taken before this
    function looked (the staged folder already gone) counts as approved when the published
    ``audit.json`` records an approval at or after ``since``. Reads only the staged folder's
    existence, then the published ``audit.json``; holds no lock and no Prefect resource.
    Raises :class:`ReviewError` when nothing is staged (and no ``since``), or after
    ``timeout_seconds`` (the release stays staged).
    """
    import time

    out, staged = Path(out_dir), staged_path(Path(out_dir))
    try:
        record = json.loads((staged / "internal" / REVIEW_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if since is None or staged.exists():
            raise ReviewError(f"no release awaits review at {str(staged)!r}") from None
        record = {}                                   # decided before we looked
    manifest = record.get("manifest_sha256")
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    while staged.exists():
        if deadline is not None and time.monotonic() > deadline:
            raise ReviewError(f"no decision within {timeout_seconds:g} s; the release stays "
                              f"staged at {str(staged)!r} for `sdc approve` / `sdc reject`")
        time.sleep(poll_seconds)
    try:
        audit = json.loads((out / "internal" / "audit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        audit = {}
    rev = audit.get("review") or {}
    approved = (rev.get("approved_manifest_sha256") == manifest if manifest
                else since is not None and str(rev.get("approved_at") or "") >= since)
    if approved:
        return {"status": "approved", "name": rev.get("approved_by"),
                "comment": rev.get("comment") or "", "at": rev.get("approved_at"),
                "release_dir": str(out)}
    return {"status": "rejected", "name": None, "comment": "", "at": None, "release_dir": None}
