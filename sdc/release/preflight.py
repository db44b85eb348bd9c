"""The pre-flight of a release run: the job's own checks, run without writing anything.

One function, :func:`preflight`, used by every way a release runs: ``sdc release`` calls it
before Prefect is imported or its server started (a release that cannot succeed is refused in
well under a second, with every problem in one message), and the release flow's load task
calls it when the run was not started by ``sdc release`` (a scheduled deployment, a
``prefect deployment run``, the flow called from Python). The config is read once per run
(:func:`read_config`: parsed, its text and its pin together); the load task takes what the
pre-flight read.

Checked, without reading a record:

- the config parses (a config error is reported alone: nothing else can be checked without it);
- ``--executor`` (old name ``--engine``) names an executor, and the executor reads the input's
  format (and the file is what ``input.format`` says);
- the input exists;
- the release folder: not inside another release, not an existing folder that is not a
  release, not an existing release without ``--force``, not holding the job's own config, seed
  or hierarchy files (even with ``--force``);
- no release awaits review in ``<release>.staged`` (unless the run may replace it: ``--force``
  of ``sdc release``; a scheduled run never replaces a staged release, whose paused run waits
  for its reviewers);
- the seed: declared, and a seed file that exists is private, readable and holds an integer;
- the release series: no releases of the job under another seed (under the output pattern, or
  beside the output folder made by a config of the same name) without ``--new-series`` (with
  no seed file yet, the run would create a new seed, so every such release made under a seed
  is of another series) (:func:`seed_and_series`, which the load task calls again to load or
  create the seed);
- Prefect's home folder (``PREFECT_HOME``, default ``~/.prefect``), for ``sdc release`` only,
  when no ``PREFECT_API_URL`` is set and it starts a Prefect server whose SQLite database lives
  there: it can be created or written, and its disk has room (:func:`prefect_home_problem`; a
  full home used to end after the server's 60 s start-up wait with exit 1).

Importing this module imports neither Prefect nor pandas.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdc.config.model import ConfigError, ReleaseConfig, SeedFile
from sdc.errors import InputError
from sdc.executors.registry import executor_names, get_executor

__all__ = ["ENGINES", "PREFECT_HOME_MIN_FREE", "ConfigFile", "Preflight", "PreflightError",
           "check_release_target", "preflight", "prefect_home_problem", "read_config",
           "seed_and_series", "staged_problem"]

ENGINES = executor_names()


class PreflightError(InputError):
    """Several reasons to refuse a release (CLI exit 2); ``problems`` holds them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {i}. {p}" for i, p in enumerate(self.problems, 1))
        super().__init__(f"the release cannot run ({len(self.problems)} problems; nothing was "
                         f"started or written):\n{lines}")


def check_release_target(config: ReleaseConfig, force: bool,
                         discard_extra_files: bool = False) -> None:
    """Refuse early, before any work, what ``write_release`` would refuse at publish time: an
    existing release without ``force`` (``ReleaseExistsError``) and an existing non-empty folder
    that is not a release (``ReleaseFolderError``, even with ``force``: it is never replaced),
    and under ``force`` a release holding files it did not write, unless
    ``discard_extra_files`` (``ReleaseFolderError`` listing them). ``write_release`` checks
    again when it publishes; this only saves the computation.
    """
    from sdc.publish.folder import (
        ReleaseExistsError,
        ReleaseFolderError,
        check_output_path,
        refuse_extra_files,
    )

    out = check_output_path(config.output_dir, input_path=config.input_path)
    _refuse_job_files_inside(config, out)
    if not (out.exists() or out.is_symlink()):
        return
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        return  # an empty folder is not a release; write_release publishes in its place
    if out.is_symlink() or not (out / "internal" / "audit.json").is_file():
        raise ReleaseFolderError(
            f"{str(out)!r} exists and is not a release folder (no internal/audit.json); it is "
            "never replaced, not even with --force. Move it away or change output.dir"
        )
    if not force:
        raise ReleaseExistsError(
            f"release {str(out)!r} already exists and is never overwritten silently. Rerun with "
            "--force to replace it (the old release stays in place until the new one is "
            "complete), or change output.dir in the config"
        )
    if not discard_extra_files:
        refuse_extra_files(out)


def _refuse_job_files_inside(config: ReleaseConfig, out: Path) -> None:
    """The release folder must not hold the job's own files (its config, seed file, hierarchy
    files): ``--force --discard-extra-files`` would delete them with the old release (issue 34:
    a command never overwrites or deletes what it did not write, not even with --force)."""
    if config.source_path is None:
        return
    from sdc.io.guard import job_files

    real_out = Path(os.path.realpath(out))
    for label, path in job_files(config.source_path).items():
        real = Path(os.path.realpath(path))
        if real == real_out or real_out in real.parents:
            from sdc.publish.folder import ReleaseFolderError

            raise ReleaseFolderError(
                f"output folder {str(out)!r} holds {label} {str(path)!r}: replacing the release "
                "there would delete it, so it is refused even with --force. Move the file out "
                "of the release folder (keep configs and seed files beside the releases) or "
                "choose another output.dir")


@dataclass
class ConfigFile:
    """A job's config read once: the parsed config, the text it was parsed from (hashed into
    the audit record) and the file's pin (:class:`sdc.io.pin.Pin`, checked again before the
    release is published)."""

    path: Path
    config: ReleaseConfig
    text: str
    pin: Any


def read_config(config_path: str | Path) -> ConfigFile:
    """Parse the config file and keep its text; the file's identity and change time are taken
    before it is read and checked after (a config that changed meanwhile: ``InputError``).
    Raises ``ConfigError`` for a config that does not load."""
    from sdc.config.load import load_config
    from sdc.io.pin import Pin

    path = Path(config_path).expanduser()
    pin = Pin.take(path, "config file")
    config = load_config(path)
    text = path.read_text(encoding="utf-8")
    pin.check("while it was read")
    return ConfigFile(path.resolve(), config, text, pin)


@dataclass
class Preflight:
    """What the pre-flight found: the config as read, the engine the run will use, and the
    options it was checked with (a run with other options checks again)."""

    config: ReleaseConfig
    engine: str
    file: ConfigFile | None = None
    options: tuple[bool, bool, bool, bool] = (False, False, False, False)

    def covers(self, path: str | Path, *, force: bool, new_series: bool,
               discard_extra_files: bool, scheduled: bool) -> bool:
        """These checks are those of a run of ``path`` with these options."""
        return (self.file is not None
                and self.file.path == Path(path).expanduser().resolve()
                and self.options == (force, new_series, discard_extra_files, scheduled))


def _series_folders(config: ReleaseConfig) -> bool:
    """Any folder where a release of the job's series may be: one matching the output pattern,
    or one beside the output folder (the series follows the job: docs/SERIES.md)."""
    if _pattern_has_folders(config.resolve(config.output.dir)):
        return True
    parent = Path(config.output_dir).parent
    return parent.is_dir() and any(q.is_dir() for q in parent.iterdir())


def _pattern_has_folders(pattern: Path) -> bool:
    """Any folder matches the output pattern (its placeholders as ``*``)? Without one there is
    no release series to check (and the series module, which imports pandas, is not needed)."""
    import re

    g = Path(re.sub(r"\{([^{}]*)\}", "*", str(pattern)))
    if "*" not in str(g):
        return g.is_dir()
    anchor = Path(g.anchor) if g.is_absolute() else Path(".")
    rel = g.relative_to(g.anchor) if g.is_absolute() else g
    return any(q.is_dir() for q in anchor.glob(str(rel)))


def seed_and_series(config: ReleaseConfig, new_series: bool, *,
                    create: bool = False) -> tuple[Any, Any]:
    """The seed of a run and its place in the release series: ``(seed info, series info)``.

    ``create=False`` (the pre-flight) writes nothing: a seed file that exists is read (private,
    an integer) and the run placed in its series; a missing seed file stands for the new seed
    the run would create, so the job's releases made under a seed are of another series
    (``SeriesError`` without ``new_series``); ``(None, None)`` or ``(seed, None)`` when neither
    the output pattern nor the output folder's parent has a folder yet (no series to check;
    pandas is not imported).
    ``create=True`` (the flow's load task) loads or creates the seed and places the run in its
    series (``seed_info.series`` is what the audit record keeps). Raises what the seed and the
    series refuse (``ConfigError``, ``InputError``, ``SeriesError``)."""
    from sdc.series.seeds import load_seed

    seed = config.seed
    path = config.resolve(seed.file) if isinstance(seed, SeedFile) else None
    has_releases = config.output is not None and _series_folders(config)
    if not create and path is not None and not (path.exists() or path.is_symlink()):
        if not has_releases:
            return None, None
        from sdc.series.membership import find_series

        # no seed file: the run creates a new seed, whose series id no release has yet
        return None, find_series(config.resolve(config.output.dir), config.output_dir,
                                 series_id="(a new seed)", seed_file_sha256=None,
                                 config_name=config.name, new_series=new_series)
    info = load_seed(config, create=create)
    if not create and not has_releases:
        return info, None
    from sdc.series.membership import series_for

    return info, series_for(config, info, new_series=new_series)


#: Free space the temporary Prefect server needs in ``PREFECT_HOME`` (its SQLite database and
#: write-ahead log grow by a few MB per run; a margin for the logs).
PREFECT_HOME_MIN_FREE = 32 * 1024 * 1024


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.0f} KB"


def prefect_home_problem() -> str | None:
    """Why the temporary Prefect server cannot keep its database in ``PREFECT_HOME``, or None.

    Only when ``sdc release`` would start that server (no ``PREFECT_API_URL``, the ephemeral
    server not disabled, no database URL of the user's). The home (or, if it does not exist
    yet, the folder it would be created in) must be a writable folder on a disk with at least
    :data:`PREFECT_HOME_MIN_FREE` bytes and a few inodes free; an existing home is probed by
    writing a small temporary file into it (as root, modes allow everything: a read-only
    mount or a full disk is found only by writing)."""
    env = os.environ
    if env.get("PREFECT_API_URL") or env.get("PREFECT_SERVER_EPHEMERAL_ENABLED", "").lower() in (
            "0", "false"):
        return None
    if env.get("PREFECT_API_DATABASE_CONNECTION_URL") or env.get(
            "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        return None
    home = Path(env.get("PREFECT_HOME") or "~/.prefect").expanduser().absolute()
    fix = ("Free space there or point PREFECT_HOME at a writable folder on another disk "
           "(e.g. export PREFECT_HOME=/var/tmp/$USER-prefect), or use a running Prefect server "
           "(`sdc server start`, or set PREFECT_API_URL)")
    what = (f"Prefect's home folder {str(home)!r} (PREFECT_HOME), where `sdc release` keeps "
            "the database of its temporary Prefect server,")
    probe = home
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return (f"{what} cannot be created: {str(probe)!r} is not a folder. {fix}")
    try:
        st = os.statvfs(probe)
    except OSError as e:
        return f"{what} cannot be checked ({e.strerror or e}). {fix}"
    free = st.f_bavail * st.f_frsize
    if free < PREFECT_HOME_MIN_FREE:
        return (f"{what} is on a full disk: {_size(free)} free, the server needs at least "
                f"{_size(PREFECT_HOME_MIN_FREE)}. {fix}")
    if st.f_files > 0 and st.f_favail < 16:
        return (f"{what} is on a disk without free inodes ({st.f_favail} left): no file can be "
                f"created there. {fix}")
    if probe != home:
        if not os.access(probe, os.W_OK | os.X_OK):
            return f"{what} cannot be created: {str(probe)!r} is not writable. {fix}"
        return None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sdc-probe-", dir=home)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:
        return f"{what} cannot be written ({e.strerror or e}). {fix}"
    return None


def preflight(config_path: str | Path | ConfigFile, *, force: bool = False,
              new_series: bool = False, engine: str | None = None,
              discard_extra_files: bool = False, scheduled: bool = False,
              prefect_home: bool = True) -> Preflight:
    """Check everything a release run can refuse without reading a record (module docstring).

    ``config_path``: the config file, or the :class:`ConfigFile` already read. A release
    awaiting review is replaced only with ``force`` and never by a ``scheduled`` run (one that
    pauses for its own review: its predecessor's paused run waits on the staged release).
    ``prefect_home``: also check Prefect's home folder (``sdc release``,
    which may start a server there; the flow runs on a server already).

    Returns the config as read, the engine and the options checked. Raises the config's
    ``ConfigError`` alone when the config does not load; otherwise the one problem's own
    exception (``ReleaseExistsError``, ``InputError``, ``SeriesError``, ...) when there is
    one, and :class:`PreflightError` listing them all when there are several.
    """
    from sdc.config.sections import executor_name

    file = config_path if isinstance(config_path, ConfigFile) else read_config(config_path)
    config = file.config
    errors: list[Exception] = []
    kind = executor_name(engine) if engine is not None else config.executor.kind
    if kind not in ENGINES:
        errors.append(ConfigError(f"unknown engine {kind!r}; use one of {', '.join(ENGINES)}"))
    else:
        problems = get_executor(kind).problems(config)
        errors += [InputError(p) for p in problems]
        if not problems:
            try:
                get_executor(kind).check(config)  # the file is what input.format says
            except (OSError, ValueError) as e:
                errors.append(e)
    inp = config.input_path
    if not (inp.exists()):
        errors.append(InputError(f"input {str(inp)!r} does not exist. Fix input.path in the "
                                 "config"))
    try:
        check_release_target(config, force, discard_extra_files)
    except (OSError, ValueError) as e:
        errors.append(e)
    pending = staged_problem(config, force, scheduled)
    if pending is not None:
        errors.append(pending)
    try:
        seed_and_series(config, new_series)
    except (OSError, ValueError) as e:
        errors.append(e)
    home = prefect_home_problem() if prefect_home else None
    if home is not None:
        errors.append(InputError(home))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise PreflightError([str(e) for e in errors])
    return Preflight(config, kind, file,
                     (force, new_series, discard_extra_files, scheduled))


def staged_problem(config: ReleaseConfig, force: bool,
                   scheduled: bool = False) -> InputError | None:
    """The refusal of a run while a release awaits review in ``<release>.staged`` (None: none
    awaits, or the run may replace it: ``force`` and not ``scheduled``). Checked by the
    pre-flight and again right before a release is staged (a run that started before another
    staged its release)."""
    from sdc.publish.review import staged_path

    staged = staged_path(config.output_dir.absolute())
    try:
        pending = staged.exists() or staged.is_symlink()
    except OSError:  # e.g. a 250-character release name: its .staged name is too long
        pending = False
    if not pending or (force and not scheduled):
        return None
    how = ("a scheduled run never replaces a release awaiting review, not even with --force"
           if scheduled else "or rerun with --force to replace the staged release")
    return InputError(
        f"a release awaits review in {str(staged)!r}: approve it (`sdc approve {staged} "
        f"--as NAME`) or reject it (`sdc reject {staged} --as NAME`) first, {how}; nothing "
        "was written")
