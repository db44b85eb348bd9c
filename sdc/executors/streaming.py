"""The streaming executor: a release of a file larger than memory, on one machine.

The runner :class:`LocalBatches` runs the passes of the release pipeline
(:mod:`sdc.pipeline.passes`, with the person or household file's stage) over the input's
record batches (:func:`sdc.io.batches.input_batches`), two batches at a time in threads
(pyarrow and numpy release the GIL), the parts in input order; memory is bounded by a few
batches plus the cell table, never by the file. The public files are byte-identical to the
other executors'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from sdc.config.model import EngineSpec, ReleaseConfig
from sdc.executors.file_facts import FileFacts
from sdc.io.batches import DEFAULT_BATCH_ROWS, input_batches, input_row_count, map_ahead
from sdc.pipeline.kernels import CellCount, ReleaseOutcome

__all__ = ["LocalBatches", "count_cells", "open_batches", "stream_release"]


class LocalBatches(FileFacts):
    """The runner of the record batches on one machine: :meth:`map` runs a pipeline's
    per-batch function on every batch of ``batch_rows`` records, ``workers`` batches at a
    time in threads (the next batch is read meanwhile), and gives the parts in input order.
    The passes make their lazy imports in the caller's thread before they map
    (:func:`sdc.pipeline.passes.count_pass`): two threads importing one package at once
    raised _DeadlockError in a fresh process."""

    checked = "in batches"
    where = ""
    scratch: str | None = None
    #: the batches run in this process: the count pass may keep per-record arrays for the
    #: later passes (:func:`sdc.pipeline.release.keeps_records`)
    in_process = True

    def __init__(self, config: ReleaseConfig, batch_rows: int = DEFAULT_BATCH_ROWS,
                 workers: int = 2) -> None:
        self.config, self.batch_rows, self.workers = config, batch_rows, workers
        # the household id is a column like any other to the reader
        self._plain = config.model_copy(update={"input": config.input.model_copy(
            update={"household_id": None})})

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None,
            columns: list[str] | None = None) -> Iterator[Any]:
        """``fn(frame, index, *shared, *per_piece(index))`` for every batch, in input order
        (``per_piece`` is called here, in the caller's thread, never concurrently)."""
        # read here, in the consumer's thread, while the workers run: no read-ahead
        # thread (one batch fewer in memory); at most ``workers`` batches in flight
        frames = input_batches(self._plain, batch_rows=self.batch_rows, columns=columns,
                               read_ahead=0)

        def items() -> Iterator[tuple]:
            for i, frame in enumerate(frames):
                yield frame, i, (per_piece(i) if per_piece is not None else ())

        def run(item: tuple) -> Any:
            frame, i, extra = item
            return fn(frame, i, *shared, *extra)

        try:
            yield from map_ahead(run, items(), self.workers, ahead=self.workers,
                                 name="sdc-batch")
        finally:
            frames.close()

    def frames(self, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
        """The batches, global row numbers as index (the next one read in a thread)."""
        return input_batches(self._plain, batch_rows=self.batch_rows, columns=columns)

    def row_count(self) -> int | None:
        return input_row_count(self.config)


@contextmanager
def open_batches(config: ReleaseConfig, spec: EngineSpec, *, frame: Any = None,
                 progress: Callable[[str], None] | None = None) -> Iterator[LocalBatches]:
    """The runner of ``config``'s record batches (``spec.batch_rows`` records each; ``frame``:
    never given, the batches are read by the runner)."""
    yield LocalBatches(config, spec.batch_rows)


def count_cells(config: ReleaseConfig, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                validate: bool = True, value_columns: list[str] | None = None,
                dependence: bool = True) -> CellCount:
    """The count pass of a person file in record batches
    (:func:`sdc.pipeline.release.count_cells`)."""
    from sdc.executors.registry import get_executor
    from sdc.pipeline.release import count_cells as count

    get_executor("streaming").check(config)  # what the batch reader cannot read
    return count(LocalBatches(config, batch_rows), config, validate=validate,
                 value_columns=value_columns, dependence=dependence)


def stream_release(config: ReleaseConfig, seed: int, out_dir: Path, *,
                   batch_rows: int = DEFAULT_BATCH_ROWS, tmp_dir: Path | None = None,
                   progress: Callable[[str], None] | None = None,
                   records_path: Path | None = None) -> ReleaseOutcome:
    """Release ``config``'s file in record batches: the public files into ``out_dir``, the
    internal ``records.parquet`` to ``records_path`` when given
    (:func:`sdc.pipeline.run.release`; the spills into ``tmp_dir``)."""
    from sdc.executors.registry import get_executor
    from sdc.pipeline.run import release

    get_executor("streaming").check(config)  # what the batch reader cannot read
    runner = LocalBatches(config, batch_rows)
    runner.scratch = None if tmp_dir is None else str(tmp_dir)
    return release(runner, config, seed, out_dir, progress=progress, records_path=records_path)
