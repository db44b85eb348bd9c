"""Turning an engine result into a release folder, and publishing it atomically.

Layout of a release (``output.dir``)::

    <release>/
      public/                      mode 0755, files 0644: what the public gets
        microdata.parquet          per output.formats
        microdata.csv
        codebook.md
      internal/                    mode 0700, files 0600: for the agency and the auditor only
        audit.json                 config copy + SHA-256, input SHA-256 and rows, xi, theta,
                                   kmin, PRB table, certificate, public/internal file hashes,
                                   seed file path + SHA-256 (never the seed)
        blocks.parquet             the PRB table
        partition_sets.parquet     partition sets, their counts and PRB
        risk.json, utility.json, report.html, ...   (reports passed in by the caller)

Nothing in ``public/`` depends on the input's row order or reveals the seed, theta per block,
PRB contents or a link to the original records: the original id column is removed, records are
put in a canonical order (sorted by all released values) and then shuffled with the release's
own random stream ``stream(seed, "public-row-order")``, and numbered 1..n afresh
(:data:`PUBLIC_ID`).

Crash behaviour of :func:`write_release` (also in ``docs/RELEASE_FOLDER.md``):

- Everything is written into a hidden sibling ``<parent>/.<name>.tmp-<pid>-<hex>`` (mode 0700
  while being written), every file and folder is fsynced, then the folder is renamed to
  ``<parent>/<name>`` in one ``rename`` (``renameat2(RENAME_NOREPLACE)`` on Linux, so a
  concurrent publisher cannot be overwritten). Killed at any point before that rename: no
  ``<name>`` folder appears (or the earlier release stays exactly as it was); killed after it:
  the release is complete. A power cut after the rename cannot lose the files' contents (they
  were fsynced before) and the parent folder is fsynced after.
- With ``force`` and an existing release, the new folder is swapped in with one atomic
  ``renameat2(RENAME_EXCHANGE)``: until that instant the old release is in place and complete;
  after it the new one is. The old one then sits in the temp folder and is deleted. Where the
  exchange is unavailable (non-Linux, some file systems), the old release is first renamed to
  ``.<name>.old-<pid>-<hex>`` and the new one renamed into place; a crash between these two
  renames leaves no ``<name>`` for a moment, and the next run renames the old release back
  before doing anything else.
- Leftover ``.<name>.tmp-*`` / ``.<name>.old-*`` folders of a process that no longer exists
  (a killed run) are removed at the start of the next run; those of a live process (a
  concurrent run) are left alone.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sdc.errors import raise_if_interrupted
from sdc.io.guard import DISK_FULL, disk_full_error

__all__ = ["PARENT_MODE", "ReleaseExistsError", "ReleaseFolderError", "check_output_path",
           "checkpoint", "extra_files", "first_ten", "make_parents", "pid_alive", "prepare_parent",
           "real_target",
           "refuse_extra_files", "staging_path", "write_release"]

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME_MAX = 255          # bytes of one file name (NAME_MAX on Linux and macOS)
#: mode of the parent folders a release creates (whatever the umask): owner and group only
PARENT_MODE = 0o750


class ReleaseExistsError(FileExistsError):
    """The release folder exists and ``force`` was not given."""


class ReleaseFolderError(ValueError):
    """The release folder cannot be written there (inside another release, not writable, or an
    existing folder that is not a release)."""


# -- test hook -------------------------------------------------------------------------------
def checkpoint(name: str) -> None:
    """Crash-test hook. With env ``SDC_CHECKPOINT_DIR`` set, touch ``<dir>/<name>`` (``/``
    replaced by ``_``); with ``SDC_PAUSE_AT == name``, then sleep 120 s (or
    ``SDC_PAUSE_SECONDS``) so a test can SIGKILL the process, or stop the Prefect server,
    exactly here. Does nothing otherwise."""
    d = os.environ.get("SDC_CHECKPOINT_DIR")
    if d:
        folder = Path(d)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name.replace("/", "_")).touch()
    if os.environ.get("SDC_PAUSE_AT") == name:
        time.sleep(float(os.environ.get("SDC_PAUSE_SECONDS", "120")))


# -- atomic publish ---------------------------------------------------------------------------
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False if the call is unavailable (then the caller falls
    back). Raises OSError for real failures (e.g. EEXIST with NOREPLACE)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_release(p: Path) -> bool:
    return (p / "internal" / "audit.json").is_file() or (
        (p / "public").is_dir() and (p / "internal").is_dir())


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]+$")


def _leftovers(parent: Path, name: str) -> list[tuple[Path, str, bool]]:
    """(path, kind, stale) of this release's temp/old folders in ``parent``."""
    out = []
    key = _stage_key(name)
    for p in parent.glob(f".{_glob_escape(key)}.*-*"):
        m = _LEFTOVER.match(p.name)
        if m is None or m["name"] != key:
            continue
        pid = int(m["pid"])
        out.append((p, m["kind"], not pid_alive(pid) or pid == 0))
    return sorted(out)


def _glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


def _recover_and_clean(out_dir: Path) -> list[Path]:
    """Undo a half-done fallback swap and remove stale leftovers of killed runs."""
    removed = []
    parent, name = out_dir.parent, out_dir.name
    items = _leftovers(parent, name)
    if not out_dir.exists():
        olds = [p for p, kind, stale in items if kind == "old" and stale]
        if olds:  # killed between the two renames of the fallback swap: put the old one back
            os.rename(olds[-1], out_dir)
            fsync_dir(parent)
            items = _leftovers(parent, name)
    for p, _kind, stale in items:
        if stale:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _write_file(path: Path, data: bytes | Path, mode: int, label: str) -> None:
    if isinstance(data, Path):  # a file written by a batch engine: moved in (or copied), fsynced
        try:
            os.rename(data, path)
        except OSError:
            shutil.copyfile(data, path)
        os.chmod(path, mode)
        checkpoint(f"writing:{label}")
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        half = len(data) // 2
        f.write(data[:half])
        f.flush()
        checkpoint(f"writing:{label}")
        f.write(data[half:])
        f.flush()
        os.fsync(f.fileno())


def _check_target(out_dir: Path) -> None:
    for a in out_dir.parents:
        if is_release(a):
            inside = out_dir.relative_to(a).parts[0]
            where = f"the {inside}/ folder of" if inside in ("public", "internal") else "inside"
            raise ReleaseFolderError(
                f"output folder {str(out_dir)!r} lies in {where} release {str(a)!r}; a release "
                "must not be written inside another one (its public files would change). "
                "Choose another output.dir, e.g. a sibling of that release"
            )


def real_target(out_dir: Path) -> Path:
    """``out_dir`` with every symbolic link of its parent folders resolved (``realpath``), the
    last component kept as is (a symlink there is refused as "not a release folder")."""
    out = Path(out_dir).expanduser().absolute()
    return Path(os.path.realpath(out.parent)) / out.name


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def unsafe_parent(path: Path) -> Path | None:
    """The first existing folder above ``path`` (resolved) that anyone may write to without
    the sticky bit (anyone could rename or replace what lies in it), else None."""
    for a in [path, *path.parents]:
        try:
            st = os.stat(a)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            return a
    return None


def check_output_path(out_dir: Path, *, input_path: Path | None = None) -> Path:
    """Refuse an output folder that is unsafe once every symlink is resolved; return the
    resolved folder (what is written).

    Refused (:class:`ReleaseFolderError`): a folder inside another release (its ``public/`` or
    ``internal/`` or beside them), a folder holding the input (``--force`` would replace it) or
    inside an input that is a folder (of Parquet parts: the release would become input), and a
    folder below a world-writable parent without the sticky bit (anyone could swap the release
    or a parent for a symlink). The checks run on the realpath: a ``releases`` symlink into
    another release's ``public/`` is caught.
    """
    out = real_target(out_dir)
    name = out.name
    if not name or name in (".", ".."):
        raise ReleaseFolderError(f"output folder {str(out_dir)!r} has no usable name")
    if len(os.fsencode(name)) > _NAME_MAX:
        raise ReleaseFolderError(
            f"output folder name {name[:40]!r}... has {len(os.fsencode(name))} bytes; a file "
            f"name may have at most {_NAME_MAX} bytes. Choose a shorter output.dir")
    _check_target(out)
    if input_path is not None:
        src = Path(os.path.realpath(Path(input_path).expanduser().absolute()))
        if _within(src, out):
            raise ReleaseFolderError(
                f"output folder {str(out)!r} holds the input {str(src)!r}: writing (or with "
                "--force replacing) the release there would destroy the input. Choose another "
                "output.dir")
        if src.is_dir() and _within(out, src):
            raise ReleaseFolderError(
                f"output folder {str(out)!r} lies inside the input folder {str(src)!r}: the "
                "release's files would be read as input by the next run. Choose an output.dir "
                "outside it")
    bad = unsafe_parent(out.parent)
    if bad is not None:
        raise ReleaseFolderError(
            f"output folder {str(out)!r} lies below {str(bad)!r}, which everybody may write to "
            "and which has no sticky bit: anyone could rename the release or swap it for a "
            f"symlink. Use a folder only the release staff can write (chmod o-w {bad}), or set "
            f"the sticky bit (chmod +t {bad})")
    return out


def prepare_parent(out_dir: Path | str, input_path: Path | str | None = None) -> Path:
    """The checked release path (:func:`check_output_path`) with its parent folder created
    and writable; :class:`ReleaseFolderError` naming the folder and the fix otherwise (every
    executor's stage folder and :func:`write_release` go through here)."""
    out_dir = check_output_path(out_dir, input_path=input_path)
    name, parent = out_dir.name, out_dir.parent
    try:
        make_parents(parent)
    except (PermissionError, FileExistsError, NotADirectoryError, OSError) as e:
        raise ReleaseFolderError(
            f"cannot create the folder {str(parent)!r} for release {name!r} ({e.strerror or e}); "
            "create it or choose another output.dir"
        ) from None
    if not parent.is_dir():
        raise ReleaseFolderError(f"{str(parent)!r} is not a folder; choose another output.dir")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ReleaseFolderError(
            f"folder {str(parent)!r} is not writable by this user, so release {name!r} cannot be "
            "written there; make it writable (chmod/chown) or choose another output.dir"
        )
    return out_dir


def make_parents(folder: Path, mode: int = PARENT_MODE) -> None:
    """Create ``folder`` and its missing parents with ``mode`` whatever the umask (``mkdir``
    applies the umask: under umask 000 a plain ``mkdir -p`` made ``releases/`` 0777)."""
    missing = []
    p = Path(folder)
    while not p.exists() and not p.is_symlink():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(p))
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue
        os.chmod(d, mode)


def _stage_key(name: str) -> str:
    """The release name as used in its staging folders' names: the name itself, or for a long
    name (a staging name must fit in 255 bytes with its suffix) a prefix and a hash of it."""
    if len(os.fsencode(name)) <= _NAME_MAX - 40:
        return name
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return f"{name[:60]}~{digest}"


def staging_path(out_dir: Path, kind: str = "tmp") -> Path:
    """A fresh hidden sibling ``.<name>.<kind>-<pid>-<hex>`` of ``out_dir`` (name shortened by
    :func:`_stage_key` when long); stale ones of killed runs are removed by the next run."""
    out = Path(out_dir)
    return out.parent / f".{_stage_key(out.name)}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


_DISK_FULL = DISK_FULL   # ENOSPC, EDQUOT and EFBIG (a file-size limit: ulimit -f)


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged user may still write in ``folder``'s file system."""
    st = os.statvfs(folder)
    return int(st.f_bavail * st.f_frsize)


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n / 2**10:,.1f} KB"


def _bytes_needed(public: dict, internal: dict, parent: Path) -> int:
    """Bytes the new release takes in ``parent``: the data given, files already written on
    the same file system (moved in by rename) count nothing, others their size; plus one
    4 KiB block per file and folder for rounding."""
    dev = os.stat(parent).st_dev
    total = 4096 * (3 + len(public) + len(internal))
    for data in [*public.values(), *internal.values()]:
        if isinstance(data, Path):
            st = os.stat(data)
            total += 0 if st.st_dev == dev else st.st_size
        else:
            total += len(data)
    return total


def extra_files(out_dir: Path) -> list[str]:
    """Files and folders in the release ``out_dir`` that the release did not write (not
    listed in its ``internal/audit.json``), e.g. an ``APPROVAL.txt`` or a signature
    ``public/microdata.csv.asc`` staff put there; relative paths, sorted."""
    import json

    out_dir = Path(out_dir)
    try:
        audit = json.loads((out_dir / "internal" / "audit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        audit = {}
    audit = audit if isinstance(audit, dict) else {}
    # audit.json and a review's record (sdc.publish.review's REVIEW_FILE) are not in the lists
    known = {"public", "internal", "internal/audit.json", "internal/review.json"}
    for sub, key in (("public", "public_files"), ("internal", "internal_files")):
        known |= {f"{sub}/{n}" for n in (audit.get(key) or {})}
    found = []
    for root, dirs, files in os.walk(out_dir):
        for n in sorted(dirs) + sorted(files):
            rel = (Path(root) / n).relative_to(out_dir).as_posix()
            if rel not in known:
                found.append(rel + ("/" if n in dirs else ""))
        dirs[:] = [d for d in dirs if (Path(root) / d).relative_to(out_dir).as_posix() in known]
    return sorted(found)


def first_ten(names: list[str]) -> str:
    """``a, b, ...`` of the first ten names, with ``(and N more)`` for the rest."""
    return ", ".join(names[:10]) + (f" (and {len(names) - 10} more)" if len(names) > 10 else "")


def refuse_extra_files(out_dir: Path) -> None:
    """:class:`ReleaseFolderError` listing :func:`extra_files` of the release ``out_dir``, if
    any: ``--force`` replaces the whole folder and would delete them."""
    extra = extra_files(out_dir)
    if extra:
        raise ReleaseFolderError(
            f"release {str(out_dir)!r} holds {len(extra)} file(s) the release did not write: "
            f"{first_ten(extra)}. --force replaces the whole folder and would delete them. Move them out "
            "of the release first (e.g. keep approvals and signatures beside it), or add "
            "--discard-extra-files to delete them with the old release")


def _check_file_names(public: dict, internal: dict) -> None:
    """ValueError for a release file name that is not a plain file name."""
    for group in (public, internal):
        for fname in group:
            if not _NAME_OK.match(fname):
                raise ValueError(f"release file name {fname!r} is not a plain file name")


def _may_replace(out_dir: Path, force: bool, discard_extra_files: bool) -> bool:
    """Whether a release exists at ``out_dir`` and will be replaced (step 3 of
    :func:`write_release`); an empty folder is removed (publish in its place). Raises for
    anything that is not a release, an existing release without ``force``, and a release
    holding files it did not write unless ``discard_extra_files``."""
    if not (out_dir.exists() or out_dir.is_symlink()):
        return False
    if out_dir.is_dir() and not out_dir.is_symlink() and not any(out_dir.iterdir()):
        out_dir.rmdir()  # an empty folder is not a release: publish in its place
        return False
    if (not out_dir.is_dir() or out_dir.is_symlink()
            or not (out_dir / "internal" / "audit.json").is_file()):
        raise ReleaseFolderError(
            f"{str(out_dir)!r} exists and is not a release folder (no internal/audit.json); "
            "it is never replaced, not even with --force. Move it away or choose another "
            "output.dir"
        )
    if not force:
        raise ReleaseExistsError(
            f"release {str(out_dir)!r} already exists and is never overwritten silently. "
            "Rerun with --force to replace it (the old release stays in place until the "
            "new one is complete), or choose another output.dir"
        )
    if not discard_extra_files:
        refuse_extra_files(out_dir)
    return True


def _check_space(public: dict, internal: dict, out_dir: Path, exists: bool) -> int:
    """The bytes the release needs in ``out_dir``'s parent (:func:`_bytes_needed`);
    :class:`ReleaseFolderError` when fewer are free."""
    parent = out_dir.parent
    need = _bytes_needed(public, internal, parent)
    free = free_bytes(parent)
    if need > free:
        raise ReleaseFolderError(
            f"not enough space for release {out_dir.name!r} in {str(parent)!r}: it needs "
            f"{_size(need)} ({need:,} bytes{'; the old release stays until the new one is in place, so both must fit' if exists else ''}), "
            f"{_size(free)} are free. Free space there or choose another output.dir")
    return need


def _disk_full(e: OSError, out_dir: Path, current: str, need: int) -> ReleaseFolderError:
    """The error for a disk that filled up (or a file-size limit reached) while ``current``
    was written."""
    parent = out_dir.parent
    if e.errno == errno.EFBIG:
        return ReleaseFolderError(str(disk_full_error(
            e, current, done=f"nothing of release {out_dir.name!r} was published (the partial "
            "files were removed)", fix="choose a smaller release (e.g. fewer output.formats)")))
    return ReleaseFolderError(
        f"the disk holding {str(parent)!r} is full: writing {current!r} failed "
        f"({e.strerror}). Release {out_dir.name!r} needs {_size(need)} ({need:,} bytes), "
        f"{_size(free_bytes(parent))} are free now; nothing was published (the "
        "partial files were removed). Free space there or choose another output.dir")


def write_release(out_dir: Path, public: dict[str, bytes | Path], internal: dict[str, bytes], *,
                  force: bool = False, input_path: Path | None = None,
                  top_mode: int = 0o755,
                  before_publish: Callable[[], None] | None = None,
                  discard_extra_files: bool = False) -> Path:
    """Publish a release folder atomically; return its absolute path.

    ``public`` files go to ``<out_dir>/public/`` (folder 0755, files 0644), ``internal`` files
    to ``<out_dir>/internal/`` (folder 0700, files 0600). A public value may be the ``Path`` of
    a file a batch engine already wrote (moved in by rename, or copied; then fsynced). Steps:

    1. resolve the symlinks of ``out_dir``'s parents and refuse (:func:`check_output_path`) a
       folder inside another release (e.g. in its ``public/``), holding ``input_path`` or inside
       it (a folder input), below a world-writable parent without the sticky bit; create the
       missing parents with mode 0750 whatever the umask; refuse a parent that cannot be
       created or written, or an existing ``out_dir`` that is not a release (a
       non-empty folder without ``internal/audit.json``; never deleted, even with ``force``);
    2. put back an old release left by a half-done fallback swap, and delete stale
       ``.<name>.tmp-*`` / ``.<name>.old-*`` folders of killed runs;
    3. an existing release without ``force`` -> :class:`ReleaseExistsError`; with ``force``, a
       release holding files it did not write (:func:`extra_files`: an approval, a
       signature) -> :class:`ReleaseFolderError` listing them, unless
       ``discard_extra_files``;
    4. write every file into ``<parent>/.<name>.tmp-<pid>-<hex>`` (0700 while writing), each
       file fsynced (the test hook ``checkpoint("writing:<file>")`` runs after half of each
       file's bytes), the folders fsynced, then the folder made 0755;
    5. ``before_publish()`` if given (the flow checks that input and config did not change
       since they were hashed: an exception there publishes nothing),
       KeyboardInterrupt if Ctrl-C reached the process (a library may have swallowed the
       one the handler raised), ``checkpoint("before_rename")``, then one atomic rename into
       place (exchange with the old release under ``force``), fsync of the parent, removal
       of the old release.

    Any exception during 4-5 removes the temp folder and re-raises; a SIGKILL leaves it for the
    next run to remove. See the module docstring for what a crash at each point leaves.
    """
    _check_file_names(public, internal)
    out_dir = prepare_parent(out_dir, input_path)
    parent = out_dir.parent
    _recover_and_clean(out_dir)
    exists = _may_replace(out_dir, force, discard_extra_files)
    need = _check_space(public, internal, out_dir, exists)
    tmp = staging_path(out_dir)
    current = str(tmp)
    try:
        os.mkdir(tmp, 0o700)
        pub_dir, int_dir = tmp / "public", tmp / "internal"
        os.mkdir(pub_dir, 0o755)
        os.chmod(pub_dir, 0o755)
        os.mkdir(int_dir, 0o700)
        os.chmod(int_dir, 0o700)
        for fname, data in public.items():
            current = str(pub_dir / fname)
            _write_file(pub_dir / fname, data, 0o644, fname)
        for fname, data in internal.items():
            current = str(int_dir / fname)
            _write_file(int_dir / fname, data, 0o600, fname)
        current = str(tmp)
        fsync_dir(pub_dir)
        fsync_dir(int_dir)
        os.chmod(tmp, top_mode)  # 0700: a release staged for review (sdc.publish.review)
        fsync_dir(tmp)
        if before_publish is not None:  # e.g. the input and config did not change meanwhile
            before_publish()
        raise_if_interrupted()  # a Ctrl-C that a library swallowed publishes nothing
        checkpoint("before_rename")
        if exists:
            swap_in(tmp, out_dir)
        else:
            publish_new(tmp, out_dir)
        fsync_dir(parent)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and e.errno in _DISK_FULL:
            raise _disk_full(e, out_dir, current, need) from None
        raise
    # after an exchange, tmp holds the old release
    shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def publish_new(tmp: Path, out_dir: Path) -> None:
    try:
        done = _renameat2(tmp, out_dir, _RENAME_NOREPLACE)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise ReleaseExistsError(
                f"release {str(out_dir)!r} appeared while this one was being written (another "
                "run?); nothing was replaced. Rerun with --force to replace it"
            ) from None
        raise
    if not done:
        if out_dir.exists():
            raise ReleaseExistsError(
                f"release {str(out_dir)!r} appeared while this one was being written; rerun "
                "with --force to replace it")
        os.rename(tmp, out_dir)


def swap_in(tmp: Path, out_dir: Path) -> None:
    if _renameat2(tmp, out_dir, _RENAME_EXCHANGE):
        return
    old = staging_path(out_dir, "old")
    os.rename(out_dir, old)
    checkpoint("between_renames")
    try:
        os.rename(tmp, out_dir)
    except BaseException:
        os.rename(old, out_dir)  # put the old release back
        raise
    os.rename(old, tmp)  # so the caller's cleanup removes the old release
