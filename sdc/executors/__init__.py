"""The executors of a release, registered by name behind one protocol (:mod:`.registry`):
``pandas`` (in memory), ``streaming`` (:mod:`.streaming`, record batches on one machine) and
``dask`` (:mod:`.dask`, pieces on a Dask cluster). They run the pipeline of :mod:`sdc.pipeline`."""

from sdc.executors.registry import Executor, executor_names, get_executor, register_executor

__all__ = ["Executor", "executor_names", "get_executor", "register_executor"]
