"""What ``sdc approve`` publishes: the approved bytes, in files only the release holds, with the
modes docs/RELEASE_FOLDER.md promises.

The review gate checks every staged file's name, type and SHA-256 (:mod:`.review`). That is not
enough for what is published: a staged ``public/microdata.csv`` that is a hard link of a file
outside the release would be published as the same inode (writing to the other name later
changes the published microdata), a file made 0666 would be published world-writable, an
``internal/`` loosened to 0755 (files 0644) readable by every local user. :func:`seal_staged`
runs after the checks and before the approval is recorded:

- every file ``audit.json`` lists that has another hard link (``st_nlink > 1``) or another
  owner than the user approving is **re-copied** into a fresh file beside it (``O_EXCL``,
  fsynced), hashing the bytes as they are copied: the copy replaces the staged name only when
  its SHA-256 is the one ``audit.json`` records, else the approval is refused (the file
  changed while being approved), so not one byte is published that was not approved;
- every file gets its documented mode (public 0644, internal 0600) and the folders theirs
  (``public/`` 0755, ``internal/`` 0700; the release folder 0755 when it is published);
- a ``public/`` or ``internal/`` folder owned by another user is refused (it cannot be made the
  release's own): reject the release and release again.

A full disk or a file-size limit while re-copying removes the copy and is a
:class:`~sdc.io.guard.DiskFullError` naming the file (exit 2); the staged folder is unchanged
and can be approved once there is room.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from sdc.errors import InputError
from sdc.io.guard import DISK_FULL, disk_full_error

__all__ = ["FILE_MODES", "FOLDER_MODES", "SEAL_TMP", "SealError", "seal_staged"]

#: the modes of a published release (docs/RELEASE_FOLDER.md)
FILE_MODES = {"public": 0o644, "internal": 0o600}
FOLDER_MODES = {"public": 0o755, "internal": 0o700}
#: the prefix of the re-copies' temp files (``.<name>.seal-<pid>``)
SEAL_TMP = ".seal-"
_CHUNK = 1 << 20


class SealError(InputError):
    """A staged file cannot be made the release's own (a folder of another user, a file that
    changed while being copied): `sdc approve` refuses it as a ``ReviewError`` (exit 2)."""


def _refuse(message: str) -> SealError:
    return SealError(message)


def _recopy(path: Path, digest: str, mode: int, rel: str) -> None:
    """Copy ``path`` into a fresh file (hashing on the way), check the hash, replace ``path``."""
    tmp = path.with_name(f".{path.name}{SEAL_TMP}{os.getpid()}")
    src = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except BaseException:
        os.close(src)
        raise
    h = hashlib.sha256()
    try:
        try:
            while chunk := os.read(src, _CHUNK):
                h.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
            os.fchmod(dst, mode)
            os.fsync(dst)
        finally:
            os.close(dst)
            os.close(src)
        if h.hexdigest() != digest:
            raise _refuse(f"{rel} changed while it was being approved (its SHA-256 is no longer "
                          "the one audit.json records); nothing was published. Reject the "
                          "release and release again")
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            raise disk_full_error(e, path, done="nothing was published (the partial copy was "
                                  "removed; the staged release is unchanged)",
                                  fix="approve where there is room") from None
        raise


def seal_staged(staged: Path, audit: dict[str, Any]) -> list[str]:
    """Make the staged files the release's own, with the documented modes (see the module
    docstring). Returns what it changed, e.g. ``public/microdata.csv: re-copied (2 hard
    links)``, ``public/codebook.md: mode 0666 -> 0644``."""
    me = os.geteuid()
    done: list[str] = []
    for folder, key in (("public", "public_files"), ("internal", "internal_files")):
        d = staged / folder
        st = os.lstat(d)
        if st.st_uid != me:
            raise _refuse(f"{folder}/ of the staged release {str(staged)!r} belongs to user id "
                          f"{st.st_uid}, not to the user approving (id {me}); it is never "
                          "published. Reject the release and release again")
        if stat.S_IMODE(st.st_mode) != FOLDER_MODES[folder]:
            os.chmod(d, FOLDER_MODES[folder])
            done.append(f"{folder}/: mode {stat.S_IMODE(st.st_mode):04o} -> "
                        f"{FOLDER_MODES[folder]:04o}")
        for name, digest in (audit.get(key) or {}).items():
            rel, path, mode = f"{folder}/{name}", d / name, FILE_MODES[folder]
            st = os.lstat(path)
            if st.st_nlink > 1 or st.st_uid != me:
                _recopy(path, str(digest), mode, rel)
                why = (f"{st.st_nlink} hard links" if st.st_nlink > 1
                       else f"owned by user id {st.st_uid}")
                done.append(f"{rel}: re-copied ({why})")
            elif stat.S_IMODE(st.st_mode) != mode:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
                done.append(f"{rel}: mode {stat.S_IMODE(st.st_mode):04o} -> {mode:04o}")
    if done:
        for folder in FOLDER_MODES:
            fd = os.open(staged / folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return done
