"""Pinning the files a release reads: the input (a file or a folder of parts) and the config.

The audit record's SHA-256 must belong to the bytes the release parsed and published.
:class:`Pin` records each file's ``stat`` identity and change state (device, inode, size,
mtime and ctime in ns) *before* it is hashed; :meth:`Pin.check` compares them after parsing
(pandas engine) and just before the release folder is renamed into place (every engine): any
change refuses the release (exit 2). Limit (a same-size rewrite within one clock tick):
docs/RELIABILITY.md, "Publishing, paths and the audit".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    _pending: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def take(cls, path: Path, what: str,
             digest: Callable[[Path], str] | None = None, *, background: bool = False) -> Pin:
        """States first, then the hash (``digest(path)``, if given). ``background``: the hash
        is computed on a thread (a batch executor reads the input meanwhile; ~0.27 s a 200 MB
        file, ~1.5 s at 2 GB, no longer before the first record is read) and :meth:`digest`
        waits for it; the states taken before it still guard what it hashed
        (:meth:`check`)."""
        pin = cls(Path(path), what, states_of(path))
        if digest is not None and background:
            pin._pending = _Background(digest, Path(path))
        elif digest is not None:
            pin.sha256 = digest(Path(path))
        return pin

    def digest(self) -> str | None:
        """The SHA-256 taken by :meth:`take` (waiting for a background hash; its error, e.g.
        :class:`~sdc.errors.InputError`, is raised here)."""
        if self._pending is not None:
            self.sha256 = self._pending.result()
            self._pending = None
        return self.sha256

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


class _Background:
    """``digest(path)`` on a daemon thread; :meth:`result` joins it and returns the digest or
    raises its error."""

    def __init__(self, digest: Callable[[Path], str], path: Path) -> None:
        self._out: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(digest, path),
                                        name="sdc-input-sha256", daemon=True)
        self._thread.start()

    def _run(self, digest: Callable[[Path], str], path: Path) -> None:
        try:
            self._out.append((digest(path), None))
        except BaseException as err:  # noqa: BLE001 - raised in the caller of result()
            self._out.append((None, err))

    def result(self) -> str:
        self._thread.join()
        value, err = self._out[0]
        if err is not None:
            raise err
        return value
