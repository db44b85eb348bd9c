"""The executors of a release, registered by name behind one protocol (:mod:`.registry`):
``pandas`` (:mod:`.memory`, the file in memory), ``streaming`` (:mod:`.streaming`, record
batches on one machine) and ``dask`` (:mod:`.dask`, pieces on a Dask cluster). Each brings a
runner of the one pipeline (:mod:`sdc.pipeline.run`); what each reads, and how the flow and
the audit treat it, is declared in its registration below (their modules are imported when a
runner is opened)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sdc.config.model import EngineSpec, ReleaseConfig
from sdc.executors.registry import (
    Executor,
    executor_names,
    get_executor,
    recorded_executor,
    register_executor,
)
from sdc.io.engine_formats import BATCH_INPUT_FORMATS

if TYPE_CHECKING:
    import pandas as pd

    from sdc.pipeline.passes import Runner

__all__ = ["Executor", "executor_names", "get_executor", "recorded_executor", "register_executor"]

Progress = Callable[[str], None]


def _open_memory(config: ReleaseConfig, spec: EngineSpec, *, frame: pd.DataFrame | None = None,
                 progress: Progress | None = None) -> AbstractContextManager[Runner]:
    from sdc.executors.memory import open_memory

    return open_memory(config, spec, frame=frame, progress=progress)


def _open_batches(config: ReleaseConfig, spec: EngineSpec, *, frame: pd.DataFrame | None = None,
                  progress: Progress | None = None) -> AbstractContextManager[Runner]:
    from sdc.executors.streaming import open_batches

    return open_batches(config, spec)


def _open_cluster(config: ReleaseConfig, spec: EngineSpec, *, frame: pd.DataFrame | None = None,
                  progress: Progress | None = None) -> AbstractContextManager[Runner]:
    from sdc.executors.dask import open_cluster

    return open_cluster(config, spec, progress=progress)


def _on_cluster(step: str, run: Callable[[], Any], spec: EngineSpec,
                progress: Progress | None = None) -> Any:
    from sdc.executors.dask import on_cluster

    return on_cluster(step, run, spec, progress)


# Every executor reads every input format (SPSS/Stata in chunks: sdc.io.stat_input) and
# writes every output format: the SPSS/Stata files from the public records held in memory
# once, after the Parquet/CSV files are written (sdc.pipeline.kernels.write_public_files)
register_executor(Executor("pandas", "the whole file in memory (default)", _open_memory,
                           reads_whole_input=True, in_audit_record=False))
register_executor(Executor(
    "streaming", "record batches on one machine, out of core", _open_batches,
    input_formats=BATCH_INPUT_FORMATS,
    limits=("CSV columns are typed from the file's first block (16 MB): a later value that "
            "would not be written back as it was read is refused (the in-memory executor "
            "types each column from the whole file)",)))
register_executor(Executor(
    "dask", "partitions on a Dask cluster (Parquet input; CSV/SPSS/Stata are copied to Parquet)",
    _open_cluster, audited_by="streaming", guard=_on_cluster, input_formats=BATCH_INPUT_FORMATS,
    limits=("CSV, SPSS and Stata input is read by the streaming engine's reader (its limit "
            "above) into a Parquet copy in engine.scratch, one row group per batch_rows "
            "records: the tasks read row groups, such a file has no pieces a worker can read "
            "alone",)))
