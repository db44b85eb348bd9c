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

``sdc approve RELEASE_DIR --as NAME [--comment TEXT]`` (issue 34: a gate bound to the config
and to every byte):

- takes an exclusive lock on the staged folder (``flock`` of the folder itself): of two
  approvals (or an approval and a rejection) at once exactly one decides; the other then finds
  the release decided and is told "already approved by NAME" (exit 2);
- checks the staged folder is a real folder (not a symlink) owned by the user running the
  command (the releasing user: the folder is 0700);
- reads the approvers from the job's config FILE (``audit.json``'s ``config.source_path``),
  never from ``review.json``: the file's text must still have the SHA-256 recorded in
  ``audit.json`` at staging (else refused: the approvers might have changed), and NAME must be
  among its ``review.approvers`` (an empty list or no ``review:``: any named person);
- checks every entry under the staged folder against what was staged: exactly ``public/``,
  ``internal/``, the files ``audit.json`` lists (same SHA-256), ``audit.json`` (its SHA-256
  recorded in ``review.json``) and ``review.json``; a file or folder added, removed, changed
  or a symlink anywhere is refused, naming the path;
- re-copies a staged file with another hard link or owner into a fresh file (its bytes hashed
  on the way) and sets the documented modes (:mod:`sdc.publish.seal`);
- records the approval in ``internal/audit.json`` (``review``: who, when, comment,
  ``approved_manifest_sha256``), and publishes the folder with one atomic rename (an exchange
  with the existing release under ``--force``).

``sdc reject ... --as NAME`` (same lock, approver and folder checks) deletes the staged folder.
``sdc audit`` checks that the published files are the approved ones (the manifest of
``audit.json`` equals the approved one, and every file matches ``audit.json``), that the
approver is among the approvers of the config copy, and fails a release whose config requires
a review but that has no approval; ``sdc audit RELEASE.staged`` audits a staged release (it
says so) with the same checks of the staged files as ``sdc approve``.

What the gate does not stop: the releasing user can write every file of the staged folder
(and the config); someone who edits ``audit.json``, its hash in ``review.json`` and the config
consistently forges a review. Separate users (a release account, reviewers with their own
accounts) or signatures are the answer to that threat, not this gate.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sdc.errors import InputError, raise_if_interrupted

__all__ = ["REVIEW_FILE", "ReviewError", "approve", "check_reviewer", "config_approvers",
           "is_staged", "manifest_sha256", "reject", "review_checks", "stage_release", "staged_path",
           "staged_problems", "target_of"]

REVIEW_FILE = "review.json"
STAGED_SUFFIX = ".staged"


class ReviewError(InputError):
    """An approval or rejection cannot be done (not staged, not an approver, files changed):
    CLI exit 2."""


def staged_path(out_dir: Path) -> Path:
    """``<release>.staged`` beside ``<release>``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + STAGED_SUFFIX)


def is_staged(path: Path) -> bool:
    """``path`` is a release staged for review: ``<release>.staged`` with
    ``internal/review.json``."""
    path = Path(path)
    return path.name.endswith(STAGED_SUFFIX) and (path / "internal" / REVIEW_FILE).is_file()


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


_TMP = ".tmp-"


def _write_temp(path: Path, data: bytes) -> Path:
    """``data`` in ``.<name>.tmp-<pid>`` beside ``path`` (0600, fsynced); the temp file is
    removed when the write fails (a full disk: :class:`~sdc.io.guard.DiskFullError`)."""
    from sdc.io.guard import DISK_FULL, disk_full_error

    tmp = path.with_name(f".{path.name}{_TMP}{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            raise disk_full_error(e, path, done="nothing was published or recorded (the temp "
                                  "file was removed; the staged release is unchanged)",
                                  fix="write elsewhere") from None
        raise
    return tmp


def _write_private(path: Path, data: bytes) -> None:
    os.replace(_write_temp(path, data), path)


def _remove_stale_temps(staged: Path) -> None:
    """Remove the temp files an approval killed or failed before this code cleaned up left in
    ``internal/`` and ``public/`` (``.<name>.tmp-<pid>``, ``.<name>.seal-<pid>`` of a process
    that no longer runs): they are the gate's own, never part of the release."""
    from sdc.publish.folder import pid_alive
    from sdc.publish.seal import SEAL_TMP

    for folder in ("internal", "public"):
        try:
            names = os.listdir(staged / folder)
        except OSError:
            continue
        for name in names:
            for mark in (_TMP, SEAL_TMP):
                head, sep, pid = name.rpartition(mark)
                if sep and head.startswith(".") and pid.isdigit() and not pid_alive(int(pid)):
                    p = staged / folder / name
                    if p.is_file() and not p.is_symlink():
                        p.unlink()


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
    conf = audit.get("config") or {}
    # "approvers" is shown to people only: `sdc approve` reads them from the config file
    record = {"status": "pending", "release_dir": str(Path(out_dir).absolute()),
              "replace_existing": bool(force), "approvers": list(approvers),
              "staged_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "manifest_sha256": manifest_sha256(audit),
              "audit_sha256": hashlib.sha256(internal["audit.json"]).hexdigest(),
              "config_path": conf.get("source_path"), "config_sha256": conf.get("sha256"),
              "staged_by_uid": os.geteuid(), "flow_run_id": run_id}
    _write_private(staged / "internal" / REVIEW_FILE, _json_bytes(record))
    return staged


def _decided(out: Path, staged: Path, manifest: str | None = None) -> ReviewError:
    """The refusal for a staged release that is no longer there: approved (by whom, when) or
    rejected."""
    try:
        audit = json.loads((out / "internal" / "audit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        audit = {}
    rev = audit.get("review") if isinstance(audit, dict) else None
    if isinstance(rev, dict) and rev.get("approved_by") and (
            manifest is None or rev.get("approved_manifest_sha256") == manifest):
        return ReviewError(f"release {str(out)!r} was already approved by "
                           f"{rev.get('approved_by')} at {rev.get('approved_at')} and is "
                           f"published; there is no staged release {str(staged)!r} to decide")
    if (out / "internal" / "audit.json").is_file() and manifest is None:
        return ReviewError(f"release {str(out)!r} is already published; there is no staged "
                           f"release {str(staged)!r} awaiting review")
    return ReviewError(f"no release awaits review at {str(staged)!r} (already rejected, or "
                       f"never staged: no internal/{REVIEW_FILE}); run `sdc release --review` "
                       "(or set review: in the config) to stage one")


def _check_folder(staged: Path) -> None:
    """The staged folder is a real folder (not a symlink) owned by the user deciding."""
    try:
        st = os.lstat(staged)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ReviewError(f"the staged release {str(staged)!r} is a symlink (to "
                          f"{os.readlink(staged)!r}), not the folder `sdc release` staged; it is "
                          "never published. Remove the link and release again")
    if not stat.S_ISDIR(st.st_mode):
        raise ReviewError(f"{str(staged)!r} is not a folder; it is never published. Move it "
                          "away and release again")
    if st.st_uid != os.geteuid():
        raise ReviewError(f"the staged release {str(staged)!r} belongs to user id {st.st_uid}, "
                          f"not to the user deciding (id {os.geteuid()}): a release is approved "
                          "by the account that staged it (its folder is owner-only)")


def _load_pending(path: Path) -> tuple[Path, Path, dict[str, Any]]:
    out, staged = target_of(path)
    _check_folder(staged)
    review = staged / "internal" / REVIEW_FILE
    if not review.is_file() or review.is_symlink():
        raise _decided(out, staged)
    try:
        record = json.loads(review.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # rejected or published meanwhile
        raise _decided(out, staged) from None
    except (OSError, ValueError) as e:
        raise ReviewError(f"{str(review)!r} is not readable JSON ({e}); reject the release and "
                          "release again") from None
    if not isinstance(record, dict):
        raise ReviewError(f"{str(review)!r} is not a review record; reject and release again")
    return out, staged, record


@contextmanager
def _decision_lock(staged: Path, out: Path, manifest: str | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the staged folder while deciding. A second decision
    waits; when it gets the lock and the folder is no longer at ``staged`` (published or
    deleted by the first), it is refused with who decided."""
    try:
        fd = os.open(staged, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise _decided(out, staged, manifest) from None
    except OSError as e:
        raise ReviewError(f"cannot open the staged release {str(staged)!r}: {e.strerror}; "
                          "it must be a real folder") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.lstat(staged)
        except FileNotFoundError:
            now = None
        mine = os.fstat(fd)
        if now is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            raise _decided(out, staged, manifest)
        yield
    finally:
        os.close(fd)  # releases the lock


def config_approvers(audit: dict[str, Any], *, strict: bool = True) -> list[str]:
    """The approvers of the job's config file (``audit.json``'s ``config.source_path``), read
    now; refused when the file's text no longer has the SHA-256 recorded at staging (unless
    not ``strict``: a rejection, which publishes nothing, reads the file as it is). A release
    without a config file (the Python API) reads them from ``audit.json``'s config copy."""
    from sdc.config.load import load_yaml

    conf = audit.get("config") if isinstance(audit.get("config"), dict) else {}
    path = conf.get("source_path")
    if path:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ReviewError(f"the job's config {str(p)!r} cannot be read ({e}); the approvers "
                              "are read from it: restore it, or reject the release and release "
                              "again") from None
        if strict and hashlib.sha256(text.encode("utf-8")).hexdigest() != conf.get("sha256"):
            raise ReviewError(f"the job's config {str(p)!r} changed since the release was "
                              "staged (its SHA-256 differs from the one recorded in "
                              "audit.json); the approvers are read from it, so the approval is "
                              "refused. Restore it, or reject the release and release again")
    else:
        text = str(conf.get("text") or "")
    try:
        data = load_yaml(text)
    except Exception as e:
        raise ReviewError(f"the job's config cannot be read as YAML ({e})") from None
    review = data.get("review") if isinstance(data, dict) else None
    approvers = review.get("approvers") if isinstance(review, dict) else None
    return [str(a) for a in approvers] if isinstance(approvers, list) else []


def _check_approver(approvers: list[str], name: str) -> None:
    if not name.strip():
        raise ReviewError("--as needs the reviewer's name")
    if approvers and name not in approvers:
        raise ReviewError(f"{name!r} is not among the approvers of this release "
                          f"({', '.join(approvers)}); the config's review.approvers lists them")


def staged_entries(staged: Path) -> dict[str, str]:
    """Every entry under ``staged`` (not following symlinks): relative path -> ``dir``,
    ``file``, ``symlink`` or ``other``."""
    out: dict[str, str] = {}

    def walk(d: Path, rel: str) -> None:
        with os.scandir(d) as it:
            for e in it:
                r = f"{rel}{e.name}"
                if e.is_symlink():
                    out[r] = "symlink"
                elif e.is_dir(follow_symlinks=False):
                    out[r] = "dir"
                    walk(Path(e.path), r + "/")
                else:
                    out[r] = "file" if e.is_file(follow_symlinks=False) else "other"

    walk(staged, "")
    return out


def expected_entries(audit: dict[str, Any]) -> dict[str, str]:
    """What a staged release holds: ``public/``, ``internal/``, the files ``audit.json``
    lists, ``internal/audit.json`` and ``internal/review.json``."""
    out = {"public": "dir", "internal": "dir", "internal/audit.json": "file",
           f"internal/{REVIEW_FILE}": "file"}
    for folder, key in (("public", "public_files"), ("internal", "internal_files")):
        for name in (audit.get(key) or {}):
            out[f"{folder}/{name}"] = "file"
    return out


def staged_problems(staged: Path, audit: dict[str, Any], record: dict[str, Any], *,
                    hashes: bool = True) -> list[str]:
    """What differs between the staged folder and what was staged: ``added: PATH``,
    ``removed: PATH``, ``changed: PATH``, ``symlinked: PATH``, ``not a file: PATH`` (empty:
    nothing). ``hashes``: also re-hash every file (else the listing and audit.json only)."""
    from sdc.io.write import sha256_file

    found, want = staged_entries(staged), expected_entries(audit)
    out = [f"symlinked: {p}" for p, k in sorted(found.items()) if k == "symlink"]
    out += [f"added: {p}" for p in sorted(set(found) - set(want)) if found[p] != "symlink"]
    out += [f"removed: {p}" for p in sorted(set(want) - set(found))]
    out += [f"not a {want[p] if want[p] == 'file' else 'folder'}: {p}"
            for p in sorted(set(want) & set(found)) if found[p] not in (want[p], "symlink")]
    audit_file = staged / "internal" / "audit.json"
    if found.get("internal/audit.json") == "file" and record.get("audit_sha256") and \
            sha256_file(audit_file) != record["audit_sha256"]:
        out.append("changed: internal/audit.json")
    if manifest_sha256(audit) != record.get("manifest_sha256") and \
            "changed: internal/audit.json" not in out:
        out.append("changed: internal/audit.json (its file list)")
    if hashes:
        for folder, key in (("public", "public_files"), ("internal", "internal_files")):
            for fname, digest in (audit.get(key) or {}).items():
                rel = f"{folder}/{fname}"
                if found.get(rel) == "file" and sha256_file(staged / rel) != digest:
                    out.append(f"changed: {rel}")
    return out


def _check_files(staged: Path, audit: dict[str, Any], record: dict[str, Any], *,
                 hashes: bool = True) -> None:
    problems = staged_problems(staged, audit, record, hashes=hashes)
    if problems:
        raise ReviewError(
            f"the staged release {str(staged)!r} changed after it was staged for review "
            f"({'; '.join(problems[:10])}{' ...' if len(problems) > 10 else ''}); what would "
            "be published is not what the reviewers saw. Reject it and release again")


def _read_audit(staged: Path) -> dict[str, Any]:
    p = staged / "internal" / "audit.json"
    if p.is_symlink() or not p.is_file():
        raise ReviewError(f"the staged release {str(staged)!r} has no internal/audit.json (or it "
                          "is not a file); reject it and release again")
    try:
        audit = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ReviewError(f"{str(p)!r} is not readable JSON ({e}); reject it and release "
                          "again") from None
    if not isinstance(audit, dict):
        raise ReviewError(f"{str(p)!r} is not an audit record; reject it and release again")
    return audit


@dataclass
class Decision:
    """The outcome of :func:`approve` / :func:`reject`."""

    release_dir: Path
    staged_dir: Path
    name: str
    at: str
    manifest_sha256: str
    #: what the approval changed to publish the approved bytes with the documented modes
    #: (:func:`sdc.publish.seal.seal_staged`): re-copied files, modes set
    sealed: list[str] = field(default_factory=list)


def approve(path: Path, name: str, comment: str | None = None, *,
            discard_extra_files: bool = False) -> Decision:
    """Publish a staged release (see the module docstring). Raises :class:`ReviewError`.

    Replacing an existing release that holds files the release did not write (staff put an
    ``APPROVAL.txt`` or a signature there, possibly during the review) is refused, listing
    them, unless ``discard_extra_files`` (the same rule as ``sdc release --force``)."""
    out, staged, record = _load_pending(path)
    with _decision_lock(staged, out, record.get("manifest_sha256")):
        out, staged, record = _load_pending(path)   # as it is now, under the lock
        return _approve_locked(out, staged, record, name, comment,
                               discard_extra_files=discard_extra_files)


def _approve_locked(out: Path, staged: Path, record: dict[str, Any], name: str,
                    comment: str | None, *, discard_extra_files: bool) -> Decision:
    from sdc.publish.folder import (
        ReleaseExistsError,
        extra_files,
        first_ten,
        fsync_dir,
        publish_new,
        swap_in,
    )
    from sdc.publish.seal import SealError, seal_staged

    audit_path = staged / "internal" / "audit.json"
    _remove_stale_temps(staged)
    audit = _read_audit(staged)
    _check_approver(config_approvers(audit), name)
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
    try:                                  # fresh files, documented modes: see sdc.publish.seal
        sealed = seal_staged(staged, audit)
    except SealError as e:
        raise ReviewError(str(e)) from None
    at = datetime.now(UTC).isoformat(timespec="seconds")
    audit["review"] = {"approved_by": name, "approved_at": at, "comment": comment or "",
                       "approved_manifest_sha256": record["manifest_sha256"],
                       "staged_at": record.get("staged_at"),
                       "flow_run_id": record.get("flow_run_id")}
    record.update(status="approved", approved_by=name, approved_at=at, comment=comment or "")
    raise_if_interrupted()  # Ctrl-C swallowed by a library while sealing: no approval
    # both written before either replaces its file (a full disk fails here, changing nothing);
    # review.json first: a stop between the renames leaves audit.json as staged, not "changed"
    review_tmp = _write_temp(staged / "internal" / REVIEW_FILE, _json_bytes(record))
    try:
        audit_tmp = _write_temp(audit_path, _json_bytes(audit))
    except BaseException:
        review_tmp.unlink(missing_ok=True)
        raise
    os.replace(review_tmp, staged / "internal" / REVIEW_FILE)
    os.replace(audit_tmp, audit_path)
    _check_files(staged, audit, {**record, "audit_sha256": None}, hashes=False)  # last look
    os.chmod(staged, 0o755)
    fsync_dir(staged)
    if exists:
        swap_in(staged, out)  # staged now holds the old release
        shutil.rmtree(staged, ignore_errors=True)
    else:
        publish_new(staged, out)
    fsync_dir(out.parent)
    return Decision(out, staged, name, at, record["manifest_sha256"], sealed)


def reject(path: Path, name: str, comment: str | None = None) -> Decision:
    """Discard a staged release (its folder is deleted). Raises :class:`ReviewError`."""
    out, staged, record = _load_pending(path)
    with _decision_lock(staged, out, record.get("manifest_sha256")):
        out, staged, record = _load_pending(path)
        try:  # rejecting publishes nothing: a tampered release can always be rejected
            approvers = config_approvers(_read_audit(staged), strict=False)
        except ReviewError:
            approvers = []
        _check_approver(approvers, name)
        shutil.rmtree(staged)
    return Decision(out, staged, name, datetime.now(UTC).isoformat(timespec="seconds"),
                    record.get("manifest_sha256", ""))


def review_checks(audit: dict[str, Any], required: bool, approvers: list[str] | None = None,
                  staged: Path | None = None) -> list[tuple[str, bool, str]]:
    """``sdc audit``'s review checks: (name, ok, detail). ``approvers``: the config copy's
    ``review.approvers``; ``staged``: the folder when it is a release staged for review (the
    checks of `sdc approve`: every entry as staged, nothing added or symlinked)."""
    rev = audit.get("review")
    if staged is not None and rev is None:
        try:
            record = json.loads((staged / "internal" / REVIEW_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        problems = staged_problems(staged, audit, record if isinstance(record, dict) else {},
                                   hashes=False)
        return [("review: staged, awaiting approval", not problems,
                 "staged for review, NOT published: `sdc approve` publishes it; every file and "
                 "folder is the one staged" if not problems else
                 f"the staged folder changed after staging: {'; '.join(problems[:10])}")]
    if rev is None:
        if required:
            return [("review: approved", False, "the config requires a review, but audit.json "
                     "records no approval (published without `sdc approve`?)")]
        return []
    ok = manifest_sha256(audit) == rev.get("approved_manifest_sha256")
    out = [("review: published files are the approved ones", ok,
            f"approved by {rev.get('approved_by')} at {rev.get('approved_at')}; manifest "
            f"{str(rev.get('approved_manifest_sha256', ''))[:16]}..." if ok else
            "the file hashes in audit.json differ from those approved")]
    if approvers:
        who = rev.get("approved_by")
        out.append(("review: approver is among the config's approvers", who in approvers,
                    f"{who} is in review.approvers ({', '.join(approvers)})" if who in approvers
                    else f"approved_by {who!r} is not among the config's review.approvers "
                         f"({', '.join(approvers)})"))
    return out


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


def check_reviewer(path: Path, name: str, decision: str = "approve") -> Path:
    """Refuse (:class:`ReviewError`) a decision before it is sent to a paused flow run: a
    release awaits review at ``path`` and ``name`` is among its config file's approvers (as
    :func:`approve` / :func:`reject` check them). Returns the staged folder."""
    _, staged, _ = _load_pending(path)
    try:
        approvers = config_approvers(_read_audit(staged), strict=decision == "approve")
    except ReviewError:
        if decision == "approve":
            raise
        approvers = []
    _check_approver(approvers, name)
    return staged
