"""The executors of a release, registered by name behind one protocol.

An executor runs functions and nothing else: it opens a *runner* (:class:`sdc.pipeline.
release.Runner`: the input's batches, mapped by the pipeline's per-batch functions), and
:meth:`Executor.count` and :meth:`Executor.release` run the one pipeline
(:mod:`sdc.pipeline.run`: the person file, or the household table, household stage and
person stage of a household file) with it. ``pandas`` holds the file in memory (one batch;
the flow hands it the input it read while Prefect started); ``streaming`` (record batches on
one machine) and ``dask`` (partitions on a cluster) never hold the file. Every executor gives
byte-identical files (``tests/contract/test_executors.py``). What an executor reads, whether
the flow reads the input for it, which runner ``sdc audit`` re-derives its releases with and
whether the audit record names it are declared in its :class:`Executor` (registered in
:mod:`sdc.executors`): nothing outside the registry asks which executor it is
(docs/ARCHITECTURE.md, ``tests/architecture``). A new executor is one
:func:`register_executor` call.

What one executor does, all do (person and household files, ``perturb:`` and ``derived:``
columns, weights, series, ``sdc plan`` and ``sdc validate``), except what an executor's
``limits`` say here, with the reason: the one place that lists them. Every executor refuses
key spaces of 2**62 cells or more (:func:`sdc.method.cells.radix_sizes`: one 62-bit
mixed-radix code numbers a cell the same in every batch). The refusals themselves
(exit 2, naming the way out) are :func:`sdc.io.engine_formats.engine_problems`' and
:mod:`sdc.io.values`'.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sdc.config.model import ConfigError, EngineSpec, ReleaseConfig
from sdc.config.sections import executor_name
from sdc.errors import InputError
from sdc.io.engine_formats import ALL_INPUT_FORMATS, engine_problems

if TYPE_CHECKING:
    import pandas as pd

    from sdc.pipeline.kernels import ReleaseOutcome
    from sdc.pipeline.passes import Runner
    from sdc.pipeline.run import Counted

__all__ = ["Executor", "OpenRunner", "StepGuard", "executor_names", "get_executor",
           "recorded_executor", "register_executor"]

Progress = Callable[[str], None]
T = TypeVar("T")


class OpenRunner(Protocol):
    """``open(config, spec, frame=..., progress=...)``: a context manager giving the
    executor's runner of ``config``'s input (``frame``: the input already read, for an
    executor that reads it whole; the others never get one)."""

    def __call__(self, config: ReleaseConfig, spec: EngineSpec, *,
                 frame: pd.DataFrame | None = None,
                 progress: Progress | None = None) -> AbstractContextManager[Runner]: ...


class StepGuard(Protocol):
    """``guard(step, run, spec, progress)``: ``run()`` (``step``: "count" or "release"),
    with the executor's own failures turned into a clear error (a failed cluster)."""

    def __call__(self, step: str, run: Callable[[], Any], spec: EngineSpec,
                 progress: Progress | None = None) -> Any: ...


def _run(step: str, run: Callable[[], Any], spec: EngineSpec,
         progress: Progress | None = None) -> Any:
    return run()


@dataclass(frozen=True)
class Executor:
    """One executor.

    Attributes
    ----------
    name : str
        The ``engine:`` name in the config and ``--engine``.
    summary : str
        One line for ``--help`` and the docs.
    open : OpenRunner
        The executor's runner of an input (the only thing an executor brings).
    reads_whole_input : bool
        The runner holds the whole file: the release flow reads (and hashes) the input while
        Prefect starts and hands the frame over; ``sdc plan`` reports the changed records.
    audited_by : str or None
        The executor whose runner ``sdc audit`` re-counts and re-derives this executor's
        releases with (None: itself; a cluster's release is audited in record batches).
    in_audit_record : bool
        The audit record names the executor (``engine``); an in-memory release's record
        does not (it is as it always was).
    guard : StepGuard
        Runs a step, turning the executor's own failures into a clear error.
    limits : tuple of str
        What this executor refuses that another does, and why (see the module docstring).
    input_formats : tuple of str
        The ``input.format`` values it reads (:mod:`sdc.io.engine_formats`).
    """

    name: str
    summary: str
    open: OpenRunner
    reads_whole_input: bool = False
    audited_by: str | None = None
    in_audit_record: bool = True
    guard: StepGuard = _run
    limits: tuple[str, ...] = ()
    input_formats: tuple[str, ...] = ALL_INPUT_FORMATS

    def problems(self, config: ReleaseConfig) -> list[str]:
        """Why this executor cannot run ``config`` (its input format), naming the executors
        that can; empty if it can."""
        fmt = config.input.resolved_format
        others = tuple(e.name for e in _REGISTRY.values()
                       if e.name != self.name and fmt in e.input_formats)
        return engine_problems(config, self.name, self.input_formats, others)

    def check(self, config: ReleaseConfig) -> None:
        """Refuse (:class:`InputError`) an input this executor cannot read: a file that is
        not what ``input.format`` says, a format it has no reader for (naming those that do)."""
        if self.input_formats == ALL_INPUT_FORMATS:
            return
        from sdc.io.sniff import check_file_kind

        if config.input_path.is_file():
            check_file_kind(config.input_path, config.input.resolved_format)
        problems = self.problems(config)
        if len(problems) == 1:
            raise InputError(problems[0])
        if problems:
            raise InputError(f"{len(problems)} problems:\n" + "\n".join(
                f"  {i}. {p}" for i, p in enumerate(problems, 1)))

    @property
    def auditor(self) -> Executor:
        """The executor ``sdc audit`` re-counts and re-derives this one's releases with."""
        return self if self.audited_by is None else get_executor(self.audited_by)

    def run(self, config: ReleaseConfig, spec: EngineSpec | None,
            fn: Callable[[Runner], T], *, step: str = "count",
            progress: Progress | None = None, frame: pd.DataFrame | None = None) -> T:
        """``fn(runner)`` with this executor's runner of ``config``'s input (after
        :meth:`check`; ``step``, "count" or "release", for the executor's ``guard``)."""
        self.check(config)
        spec = spec if spec is not None else config.engine

        def run() -> T:
            with self.open(config, spec, frame=frame, progress=progress) as runner:
                return fn(runner)

        try:
            return self.guard(step, run, spec, progress)
        except OSError as e:   # its working files (spills, batches) on a full disk or over a limit
            from sdc.io.guard import DISK_FULL, disk_full_error

            if e.errno not in DISK_FULL:
                raise
            import tempfile

            raise disk_full_error(
                e, folder=getattr(spec, "scratch", None) or tempfile.gettempdir(),
                done=f"the {self.name} executor's {step} pass stopped and nothing was "
                "published", fix="set executor.scratch (or TMPDIR) to a folder with room"
            ) from None

    def count(self, config: ReleaseConfig, spec: EngineSpec | None = None, *,
              frame: pd.DataFrame | None = None) -> Counted:
        """The count pass (validated per batch, :func:`sdc.pipeline.run.count`): the cell
        table; for a household file both stages planned (``HouseholdPlan``). ``frame``: the
        input already read (only for an executor that ``reads_whole_input``)."""
        from sdc.pipeline.run import count

        return self.run(config, spec, lambda runner: count(runner, config), frame=frame)

    def release(self, config: ReleaseConfig, seed: int, stage: Path,
                spec: EngineSpec | None = None, *, progress: Progress | None = None,
                records_path: Path | None = None,
                frame: pd.DataFrame | None = None, keep: bool = False) -> ReleaseOutcome:
        """Count, plan, apply (:func:`sdc.pipeline.run.release`): the public files into
        ``stage``, the records file to ``records_path``; ``frame``: the input already read
        (only for an executor that ``reads_whole_input``); ``keep``: the outcome also holds
        the released records in input order."""
        from sdc.pipeline.run import release

        return self.run(config, spec, lambda runner: release(
            runner, config, seed, stage, progress=progress, records_path=records_path,
            keep=keep),
            step="release", progress=progress, frame=frame)


_REGISTRY: dict[str, Executor] = {}


def register_executor(executor: Executor) -> Executor:
    """Register ``executor`` under its name (a second registration of a name replaces it)."""
    _REGISTRY[executor.name] = executor
    return executor


def get_executor(name: str) -> Executor:
    """The executor registered as ``name``; :class:`ConfigError` naming the known ones."""
    try:
        return _REGISTRY[executor_name(name)]  # memory: the registered "pandas"
    except KeyError:
        names = ", ".join("memory" if n == "pandas" else n for n in _REGISTRY)
        raise ConfigError(f"unknown executor {name!r}; use one of {names}") from None


def recorded_executor(engine: str | None) -> Executor:
    """The executor that made a release whose audit record says ``engine`` (None: a record
    that names none, the executor whose records do not name it, ``in_audit_record``)."""
    if engine is not None:
        return get_executor(engine)
    return next(e for e in _REGISTRY.values() if not e.in_audit_record)


def executor_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(_REGISTRY)
