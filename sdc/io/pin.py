"""Pinning the files a release reads: the input (a file or a folder of parts) and the config.

The audit record holds the input's SHA-256; that hash must belong to the bytes the release
parsed, and the file must still be the same when the release is published. A release used to
read the input and hash it in a second open, so a file swapped during the run was released
under another file's hash.

:class:`Pin` records each file's identity and change state (device, inode, size, modification
and change time in ns: ``stat``) *before* it is hashed. :meth:`Pin.check` compares them again:

- after parsing (pandas engine): unchanged state from before the hash to after the parse
  means the bytes hashed are the bytes parsed. A replaced file has another inode; a file
  written in place has a new ``mtime``/``ctime``; a file renamed away and back has a new
  ``ctime`` (which no user can set back);
- just before the release folder is renamed into place (every engine, the batch engines read
  the input in many passes): any change refuses the release (exit 2), nothing is published.

Limit (docs/RELIABILITY.md): time stamps have the kernel's clock tick (a few ms), so a same-size
rewrite in the same tick as the previous write, right when the run starts, is not seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sdc.errors import InputError

__all__ = ["FileState", "Pin", "states_of"]


@dataclass(frozen=True)
class FileState:
    """What ``stat`` says about one file (identity and last change)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileState:
        st = os.stat(path)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def states_of(path: Path) -> dict[str, FileState]:
    """``{"": state}`` of a file; of a folder (Parquet parts) the state of every file in it
    (the parts :func:`sdc.io.batches.input_sha256` hashes), by relative path. ``{}`` if the
    path does not exist."""
    path = Path(path)
    try:
        if not path.is_dir():
            return {"": FileState.of(path)}
        return {p.relative_to(path).as_posix(): FileState.of(p)
                for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")}
    except FileNotFoundError:
        return {}


def _what_changed(before: dict[str, FileState], after: dict[str, FileState]) -> str:
    if not after:
        return "it was removed or moved away"
    gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    if gone or new:
        return f"parts removed {gone[:3]}, parts added {new[:3]}"
    for k in before:
        a, b = before[k], after[k]
        where = f"part {k!r}: " if k else ""
        if (a.dev, a.ino) != (b.dev, b.ino):
            return f"{where}it was replaced by another file (new inode)"
        if a.size != b.size:
            return f"{where}its size changed from {a.size:,} to {b.size:,} bytes"
        if a != b:
            return f"{where}it was written to, touched or renamed (its change time moved)"
    return "unchanged"


@dataclass
class Pin:
    """A file (or folder of parts) pinned at the start of a run: its states before hashing and
    its SHA-256 (set by :meth:`take`)."""

    path: Path
    what: str                       # "input file", "config file"
    states: dict[str, FileState]
    sha256: str | None = None

    @classmethod
    def take(cls, path: Path, what: str,
             digest: Callable[[Path], str] | None = None) -> Pin:
        """States first, then the hash (``digest(path)``, if given)."""
        pin = cls(Path(path), what, states_of(path))
        if digest is not None:
            pin.sha256 = digest(Path(path))
        return pin

    def check(self, when: str) -> None:
        """Raise :class:`~sdc.errors.InputError` (exit 2) if the file changed since it was
        pinned; ``when`` says when the check runs ("while it was read", "before publishing")."""
        now = states_of(self.path)
        if now == self.states:
            return
        raise InputError(
            f"the {self.what} {str(self.path)!r} changed {when}: {_what_changed(self.states, now)}"
            f". The release would not match the SHA-256 recorded for it; nothing was published. "
            f"Wait until whatever writes the {self.what} has finished (or work on a copy that "
            "nobody writes to), then rerun")
