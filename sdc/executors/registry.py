"""The executors of a release, registered by name behind one protocol.

An executor runs the two steps of a release that touch records (counting the cells, applying
each record's released cell); everything between them (partition sets, PRBs, theta, the
certificate) is the shared plan on the cell table. Every executor implements
:meth:`Executor.count` and :meth:`Executor.release` (the pipeline of :mod:`sdc.pipeline`,
run by the executor's runner) and the release flow runs them all the same way. ``pandas``
holds the file in memory (one batch; the flow hands it the input it read while Prefect
started); ``streaming`` (record batches on one machine) and ``dask`` (partitions on a
cluster) are *batched*: they never hold the file. Every executor gives byte-identical files
(``tests/contract/test_executors.py``). A new executor is one :func:`register_executor` call;
nothing outside this module asks which executor it is (docs/ARCHITECTURE.md).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdc.config.model import ConfigError, ReleaseConfig
from sdc.config.sections import executor_name
from sdc.io.engine_formats import ALL_INPUT_FORMATS, BATCH_INPUT_FORMATS, engine_problems

__all__ = ["Executor", "executor_names", "get_executor", "register_executor"]


@dataclass(frozen=True)
class Executor:
    """One executor.

    Attributes
    ----------
    name : str
        The ``engine:`` name in the config and ``--engine``.
    batched : bool
        True when the executor reads records in batches (count and release below); False for
        the in-memory executor, which the flow runs on the whole file as one batch.
    summary : str
        One line for ``--help`` and the docs.
    count : callable, optional
        ``count(config, spec) -> CellCount``: the counting pass (validated per batch); for a
        household file ``HouseholdPlan`` (:func:`sdc.pipeline.households.plan_households`:
        both stages planned from the count and identity passes).
    release : callable, optional
        ``release(config, seed, stage, spec, progress, records_path, frame) -> BatchRelease``:
        count, plan, apply, write the public files into ``stage`` and the records file;
        ``frame``: the input already read whole (the flow's prefetch, for an executor that is
        not batched; a batched one never gets one).
    limits : tuple of str
        What this executor refuses that another does, and why (see the module docstring).
    input_formats : tuple of str
        The ``input.format`` values it reads (:mod:`sdc.io.engine_formats`).
    """

    name: str
    batched: bool
    summary: str
    count: Callable[[ReleaseConfig, Any], Any] | None = None
    release: Callable[..., Any] | None = None
    limits: tuple[str, ...] = ()
    input_formats: tuple[str, ...] = ALL_INPUT_FORMATS

    def problems(self, config: ReleaseConfig) -> list[str]:
        """Why this executor cannot run ``config`` (its input format), naming the executors
        that can; empty if it can."""
        fmt = config.input.resolved_format
        others = tuple(e.name for e in _REGISTRY.values()
                       if e.name != self.name and fmt in e.input_formats)
        return engine_problems(config, self.name, self.input_formats, others)


_REGISTRY: dict[str, Executor] = {}


def register_executor(executor: Executor) -> Executor:
    """Register ``executor`` under its name (a second registration of a name replaces it)."""
    if executor.batched and (executor.count is None or executor.release is None):
        raise ValueError(f"batched executor {executor.name!r} needs count and release")
    _REGISTRY[executor.name] = executor
    return executor


def get_executor(name: str) -> Executor:
    """The executor registered as ``name``; :class:`ConfigError` naming the known ones."""
    try:
        return _REGISTRY[executor_name(name)]  # memory: the registered "pandas"
    except KeyError:
        names = ", ".join("memory" if n == "pandas" else n for n in _REGISTRY)
        raise ConfigError(f"unknown executor {name!r}; use one of {names}") from None


def executor_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(_REGISTRY)


# -- the three executors -----------------------------------------------------------------------
def _memory_count(config: ReleaseConfig, spec: Any) -> Any:
    from sdc.executors.memory import memory_count

    return memory_count(config, spec)


def _memory_release(config: ReleaseConfig, seed: int, stage: Path, spec: Any,
                    progress: Callable[..., Any] | None = None,
                    records_path: Path | None = None, frame: Any = None) -> Any:
    from sdc.executors.memory import memory_release

    return memory_release(config, seed, stage, spec, progress=progress,
                          records_path=records_path, frame=frame)


def _streaming_count(config: ReleaseConfig, spec: Any) -> Any:
    if config.input.household_id is not None:  # two stages (docs/HOUSEHOLDS.md, "Engines")
        from sdc.executors.streaming import LocalBatches
        from sdc.pipeline.households import plan_households

        return plan_households(config, runner=LocalBatches(config, spec.batch_rows))
    from sdc.executors.streaming import count_cells

    return count_cells(config, batch_rows=spec.batch_rows)


def _streaming_release(config: ReleaseConfig, seed: int, stage: Path, spec: Any,
                       progress: Callable[..., Any] | None = None,
                       records_path: Path | None = None, frame: Any = None) -> Any:
    if config.input.household_id is not None:  # two stages (docs/HOUSEHOLDS.md, "Engines")
        from sdc.executors.streaming import LocalBatches
        from sdc.pipeline.households import stream_household_release

        return stream_household_release(config, seed, stage, progress=progress,
                                        records_path=records_path,
                                        runner=LocalBatches(config, spec.batch_rows))
    from sdc.executors.streaming import stream_release

    return stream_release(config, seed, stage, batch_rows=spec.batch_rows, progress=progress,
                          records_path=records_path)


def _dask_spec(config: ReleaseConfig, spec: Any) -> Any:
    from sdc.executors.dask import DaskSpec

    scratch = str(config.resolve(spec.scratch)) if spec.scratch is not None else None
    return DaskSpec(scheduler=spec.scheduler, workers=spec.workers, scratch=scratch,
                    batch_rows=spec.batch_rows)


def _dask_count(config: ReleaseConfig, spec: Any) -> Any:
    from sdc.executors.dask import (
        DaskClusterError,
        cluster_errors,
        dask_client,
        dask_count_cells,
        parquet_input,
    )

    dspec = _dask_spec(config, spec)
    try:
        with parquet_input(config, dspec) as source, dask_client(dspec) as client:
            if config.input.household_id is not None:  # the household passes as tasks
                from sdc.executors.dask import DaskPieces
                from sdc.pipeline.households import plan_households

                return plan_households(config, runner=DaskPieces(client, config, source))
            return dask_count_cells(client, config, source)
    except cluster_errors() as e:
        raise DaskClusterError(
            f"the Dask cluster failed while counting the cells: {type(e).__name__}: "
            f"{e or 'no detail'}. A worker probably died (out of memory, killed); rerun, with "
            "more memory per worker, or --engine streaming") from None


def _dask_release(config: ReleaseConfig, seed: int, stage: Path, spec: Any,
                  progress: Callable[..., Any] | None = None,
                  records_path: Path | None = None, frame: Any = None) -> Any:
    from sdc.executors.dask import dask_release

    return dask_release(config, seed, stage, _dask_spec(config, spec), progress=progress,
                        records_path=records_path)


# what the batched executors cannot do, because they never hold the file. Every executor
# writes every output format: the SPSS/Stata files from the public records held in memory
# once, after the Parquet/CSV files are written (sdc.pipeline.kernels.write_public_files)
_BATCH_LIMITS = (
    "SPSS (.sav) and Stata (.dta) input: pyreadstat reads such a file whole, there is no batch "
    "reader here; convert it to Parquet once",
)
# "pandas": not batched (it holds the file: the flow's prefetch hands it the frame); count and
# release run the pipeline of the others on the whole file as one batch (sdc.executors.memory)
register_executor(Executor("pandas", False, "the whole file in memory (default)",
                           count=_memory_count, release=_memory_release))
register_executor(Executor(
    "streaming", True, "record batches on one machine, out of core",
    count=_streaming_count, release=_streaming_release, input_formats=BATCH_INPUT_FORMATS,
    limits=(*_BATCH_LIMITS,
            "CSV columns are typed from the file's first block (16 MB): a later value that "
            "would not be written back as it was read is refused (the in-memory executor "
            "types each column from the whole file)")))
register_executor(Executor(
    "dask", True, "partitions on a Dask cluster (Parquet input; a CSV is copied to Parquet)",
    count=_dask_count, release=_dask_release, input_formats=BATCH_INPUT_FORMATS,
    limits=(*_BATCH_LIMITS,
            "CSV input is read by the streaming engine's reader (its limit above) into a "
            "Parquet copy in engine.scratch, one row group per batch_rows records: the tasks "
            "read row groups, a CSV file has no pieces a worker can read alone")))
