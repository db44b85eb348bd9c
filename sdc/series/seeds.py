"""The release seed: where it comes from and how it is kept secret.

A production config names a seed file (``seed: {file: secrets/census-demo.seed}``) holding one
decimal integer. On the first run the file is created with 128 random bits from
:mod:`secrets` (folder 0700, file 0600; written to a temporary file, fsynced and hard-linked
into place, so a kill cannot leave an empty seed file and two concurrent first runs agree on
one seed); later runs read it back, which is what makes a rerun byte-identical. A seed file
that the group or others may read or write is refused: anyone who can read it can undo the
shuffle and, with the input, retrace PRAM's choices. The audit records the file's path and the
SHA-256 of its bytes, never the seed.

The seed file is the release series (:mod:`sdc.series.membership`): reruns with the same seed
file release unchanged records identically. A NEW seed starts an independent randomization,
which leaks for every record released before (linking the releases by the non-key values
reveals the modal released cell); ``sdc release`` refuses it for an output pattern that has
releases under another seed unless ``--new-series`` is given. Back the seed file up.

An integer seed in the config (``seed: 12345``) is accepted for tests and demos. A seed file
must hold at least 2^32 (:data:`MIN_FILE_SEED`): a hand-written 0 or 42 is refused, as is
``seed: true`` in the config (YAML's booleans are integers to Python).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from sdc.config.model import ConfigError, ReleaseConfig, SeedFile
from sdc.errors import InputError
from sdc.publish.folder import pid_alive

__all__ = ["SeedInfo", "load_seed"]

_DECIMAL = re.compile(rb"^\s*([0-9]{1,200})\s*$")
#: The smallest seed a seed file may hold: below 2^32 every candidate can be tried. sdc writes
#: 128 random bits (>= 2^32 except with probability 2^-96).
MIN_FILE_SEED = 2**32


@dataclass
class SeedInfo:
    """The release seed and where it came from.

    ``value`` is secret: never log it or write it outside the seed file. ``path`` and
    ``sha256`` (of the file's bytes) are what the audit records; both are ``None`` for an
    integer seed given in the config. ``created`` is True when this run created the file.
    """

    value: int
    path: Path | None
    sha256: str | None
    created: bool
    series: dict | None = None     # set by sdc.series.membership.series_for (audit.json "series")

    def __repr__(self) -> str:  # keep the value out of logs and tracebacks
        return (f"SeedInfo(value=<hidden>, path={self.path!r}, sha256={self.sha256!r}, "
                f"created={self.created})")


def _mkdirs_private(folder: Path) -> None:
    """Create ``folder`` and any missing parents with mode 0700."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)


def _create(path: Path) -> bool:
    """Create the seed file atomically and exclusively; False if another process created it first.

    The seed is written to a private temporary file in the same folder (mode 0600), fsynced, and
    then hard-linked to ``path`` (``link`` fails if ``path`` exists, so two concurrent first runs
    agree on one seed), the temporary name is removed and the folder fsynced. A kill at any
    moment leaves either no seed file or a complete one: never an empty or partial seed file
    (at worst an unused ``.<name>.tmp-<pid>-*`` file, removed by the next run).
    """
    _mkdirs_private(path.parent)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        try:
            pid = int(stale.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            stale.unlink(missing_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, f"{secrets.randbits(128)}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return True


def _read(path: Path) -> tuple[int, str]:
    if not path.is_file():
        raise InputError(f"seed file {str(path)!r} is not a regular file; point seed.file at a "
                         "file holding one decimal integer (or remove it to create a new seed)")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InputError(
            f"seed file {str(path)!r} has mode {mode:04o}: the group or others may read or "
            f"write it, and whoever reads the seed can undo the release's randomization. "
            f"Restrict it with: chmod 600 {path}"
        )
    try:
        data = path.read_bytes()
    except PermissionError:
        raise InputError(
            f"seed file {str(path)!r} cannot be read (permission denied); run the release as the "
            f"file's owner, or fix its ownership (chown) and mode (chmod 600 {path})"
        ) from None
    m = _DECIMAL.match(data)
    if m is None:
        what = "is empty" if not data.strip() else "does not hold one decimal integer"
        raise InputError(
            f"seed file {str(path)!r} {what} ({len(data)} bytes). It must contain one "
            "non-negative decimal integer. Restore it from backup to rerun an earlier release, "
            "or delete it to create a new seed (the release will then differ from earlier ones)"
        )
    value = int(m.group(1))
    if value < MIN_FILE_SEED:
        raise InputError(
            f"seed file {str(path)!r} holds {value}, a number small enough to be found by trying "
            f"every number below 2^32 (whoever finds the seed can undo the release's "
            f"randomization with the input). A good seed is 128 random bits, as sdc writes on "
            f"the first run: move this file away and rerun to create one (or write one with: "
            f"python -c 'import secrets; print(secrets.randbits(128))' > {path}; chmod 600 "
            f"{path}); the release will then differ from earlier ones")
    return value, hashlib.sha256(data).hexdigest()


def _checked_seed_path(path: Path) -> Path:
    """The seed file's path with the symlinks of its folders resolved (the file itself may not
    exist yet), refused inside a release folder (published or copied with it) or below a
    folder everybody may write to without the sticky bit (anyone could swap the seed)."""
    from sdc.publish.folder import is_release, unsafe_parent

    real = Path(os.path.realpath(path))
    for a in real.parents:
        if is_release(a):
            raise InputError(
                f"seed file {str(path)!r} lies inside the release folder {str(a)!r} (resolved: "
                f"{str(real)!r}); a release folder is handed on and replaced by --force, the seed "
                "must stay outside every release. Move it and point seed.file at it")
    bad = unsafe_parent(real.parent)
    if bad is not None:
        raise InputError(
            f"seed file {str(path)!r} lies below {str(bad)!r}, which everybody may write to and "
            "which has no sticky bit: anyone could replace the seed. Keep it in a folder only "
            f"the release staff can write (chmod o-w {bad})")
    return real


def load_seed(config: ReleaseConfig, *, create: bool = True) -> SeedInfo:
    """The release seed of ``config``.

    - ``seed: <int>``: that integer (``path`` and ``sha256`` are None);
    - ``seed: {file: F}``: the decimal integer in F (relative to the config folder). If F does
      not exist and ``create`` is true, its missing parent folders are created with mode 0700
      and F with mode 0600 holding ``secrets.randbits(128)``; with ``create=False`` (``sdc
      plan``, ``sdc validate``) a missing file is an error.

    Raises
    ------
    ConfigError
        No ``seed`` in the config, or a negative integer seed.
    InputError
        The seed file is readable or writable by group/others (fix: ``chmod 600 F``),
        unreadable, not a file, empty, or not a decimal integer.
    """
    seed = config.seed
    if seed is None:
        raise ConfigError(
            "seed: the config has no seed. Add 'seed: {file: secrets/<name>.seed}' (created with "
            "mode 0600 on the first run and reused by reruns); an integer is allowed for tests"
        )
    if isinstance(seed, int):
        if seed < 0:
            raise ConfigError(f"seed: must be a non-negative integer, got {seed}")
        return SeedInfo(value=int(seed), path=None, sha256=None, created=False)
    assert isinstance(seed, SeedFile)
    path = _checked_seed_path(config.resolve(seed.file))
    created = False
    if not path.exists() and not path.is_symlink():
        if not create:
            raise InputError(
                f"seed file {str(path)!r} does not exist. 'sdc release' creates it on the first "
                "run; to rerun an earlier release, restore the seed file from backup"
            )
        try:
            created = _create(path)
        except PermissionError:
            raise InputError(
                f"cannot create seed file {str(path)!r} (permission denied); make its folder "
                "writable for the release user or point seed.file elsewhere"
            ) from None
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise InputError(
                f"cannot create seed file {str(path)!r}: the disk holding {str(path.parent)!r} "
                f"is full ({e.strerror}). A seed file needs a few bytes and one free inode; "
                "free space there or point seed.file elsewhere"
            ) from None
    value, digest = _read(path)
    return SeedInfo(value=value, path=path, sha256=digest, created=created)
