"""Never overwrite what the command did not write.

Every command that writes a file the user names (``sdc design -o``, ``sdc init -o``,
``sdc rr simulate --out``, ``sdc sample --out``, ``sdc report``) calls :func:`refuse_overwrite`
first:

- a path that is one of the job's own files (its config, its input file or folder of parts, its
  seed file, a hierarchy file it reads) is refused ALWAYS, even with ``--force``: the same
  resolved path, the same inode (a hard link) or a path inside a protected folder;
- any other existing path (a file, a symlink, even a dangling one) is refused unless
  ``--force``; a folder is never replaced by a file.

The refusal is an :class:`OverwriteError` (an ``InputError``: the CLI exits 2) naming the path
and the fix. :func:`write_atomic` then writes by temp file + rename in the same folder, so a
crash leaves the old file or the new one, never half of one.

A full disk (``ENOSPC``, a quota: ``EDQUOT``) or a file-size limit (``EFBIG``: ``ulimit -f``,
``RLIMIT_FSIZE``) is not a bug but something the user fixes: every writer turns it into a
:class:`DiskFullError` (exit 2, :func:`disk_full_error`) naming the file, what is free and the
fix, after removing its own temp file, so nothing half-written stays behind.
"""

from __future__ import annotations

import errno
import os
import resource
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sdc.errors import InputError

__all__ = ["DISK_FULL", "DiskFullError", "OverwriteError", "disk_full_error", "job_files",
           "refuse_overwrite", "same_file", "write_atomic"]

#: the errors of a write that lacks room: a full disk, a full quota, a file-size limit
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class OverwriteError(InputError):
    """A command would overwrite a file it did not write: CLI exit 2."""


class DiskFullError(InputError):
    """A write failed for lack of room (full disk, quota, file-size limit): CLI exit 2."""


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n / 2**10:,.1f} KB"


def disk_full_error(e: OSError, path: str | Path | None = None, *,
                    done: str = "nothing was written (the partial file was removed)",
                    fix: str = "choose another path",
                    folder: str | Path | None = None) -> DiskFullError:
    """The message of a write of ``path`` that failed with ``e`` (an errno of
    :data:`DISK_FULL`): which file, why, what is free or the limit, what was left, the fix.
    Without a path (``e`` names none either: a library's write), ``folder`` says where."""
    known = path if path is not None else e.filename
    where = Path(known) if known else None
    what = f"writing {str(where)!r}" if where is not None else "a write"
    if e.errno == errno.EFBIG:
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        limit = ("" if soft == resource.RLIM_INFINITY
                 else f" of {_size(soft)} ({soft:,} bytes)")
        return DiskFullError(
            f"{what} failed: the file would exceed the file-size limit{limit} of this "
            f"process (ulimit -f, RLIMIT_FSIZE; {e.strerror}); {done}. Raise the limit "
            f"(ulimit -f unlimited) or {fix}")
    base = where.parent if where is not None else Path(folder) if folder else None
    try:
        st = os.statvfs(base) if base is not None else None
        free = f"; {_size(st.f_bavail * st.f_frsize)} are free there now" if st else ""
    except OSError:
        free = ""
    disk = f"the disk holding {str(base)!r}" if base is not None else "a disk"
    return DiskFullError(
        f"{disk} is full: {what} failed ({e.strerror or os.strerror(e.errno or 0)}){free}; "
        f"{done}. Free space there or {fix}")


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name the same file: equal resolved paths or the same inode
    (device and inode number: a hard link, a bind mount)."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    try:
        if a.resolve() == b.resolve():
            return True
    except (OSError, RuntimeError):  # a symlink loop
        pass
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _inside(path: Path, folder: Path) -> bool:
    try:
        if not folder.is_dir():
            return False
        path.resolve().relative_to(folder.resolve())
        return True
    except (OSError, RuntimeError, ValueError):
        return False


def refuse_overwrite(path: str | Path, *, force: bool, option: str,
                     protected: Mapping[str, str | Path] | None = None) -> Path:
    """Check that writing ``path`` (given as ``option``, e.g. ``"-o"``) overwrites nothing it
    must not; return the path (``~`` expanded). ``protected``: label -> path of the job's own
    files, refused even with ``force``. Raises :class:`OverwriteError`."""
    p = Path(path).expanduser()
    for label, q in (protected or {}).items():
        q = Path(q).expanduser()
        if same_file(p, q) or _inside(p, q):
            raise OverwriteError(
                f"{option} {str(p)!r} is {label} {str(q)!r}: a command never overwrites the "
                "job's own files, not even with --force. Choose another file name")
    if p.is_dir() and not p.is_symlink():
        raise OverwriteError(f"{option} {str(p)!r} is a folder and is never replaced by a file; "
                             "give a file name inside it or another path")
    if (p.exists() or p.is_symlink()) and not force:
        raise OverwriteError(
            f"{option} {str(p)!r} already exists and is never overwritten silently; rerun with "
            "--force to replace it, or choose another file name")
    return p


def write_atomic(path: str | Path, data: bytes | str, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` by temp file + rename in the same folder (created if needed);
    a symlink at ``path`` is replaced, its target untouched. Returns the path. A full disk or
    a file-size limit: :class:`DiskFullError`, the temp file removed, ``path`` untouched."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            raise disk_full_error(e, p, done="nothing was written (the partial file was "
                                  "removed; an earlier file there is unchanged)") from None
        raise
    return p


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def job_files(config: str | Path) -> dict[str, Path]:
    """The files a release job reads, label -> path: the config itself, ``input.path``, the
    seed file and every hierarchy file. Read leniently from the YAML (an invalid config still
    protects itself and whatever paths it names); relative paths are relative to its folder."""
    cfg = Path(config).expanduser()
    out: dict[str, Path] = {"the job's config": cfg}
    try:
        from sdc.config.load import load_yaml

        data = load_yaml(cfg.read_text(encoding="utf-8"))
    except Exception:  # unreadable or invalid: the command's own load reports it
        return out
    base = cfg.parent

    def add(label: str, value: Any) -> None:
        if isinstance(value, str | os.PathLike) and str(value):
            q = Path(value).expanduser()
            out[label] = q if q.is_absolute() else base / q

    add("the job's input", _get(data, "input", "path"))
    add("the job's seed file", _get(data, "seed", "file"))
    partition = _get(data, "partition")
    keys = _get(data, "key_variables")
    rules: list[Any] = [*(partition.values() if isinstance(partition, dict) else []),
                        *(_get(kv, "recode") for kv in (keys.values() if isinstance(keys, dict)
                                                        else []))]
    for i, rule in enumerate(rules):
        add(f"a hierarchy file of the job ({i + 1})", _get(rule, "hierarchy"))
    return out
