"""The reports of the batch engines: the per-batch calls into
:class:`sdc.reports.accumulate.ReleaseAccumulator` and its refinement passes.

The streaming and Dask engines call :func:`new_accumulator` after planning,
:func:`add_apply_batch` on every batch of their apply pass, and :func:`refine_streaming` (or
the Dask engine its tasks) afterwards; :func:`batch_reports` then builds ``risk.json``,
``utility.json`` and ``report.html`` with the same builders as the in-memory engine
(:func:`sdc.reports.build.reports_from_aggregates`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.batches import (
    DEFAULT_BATCH_ROWS,
    input_arrow_schema,
    input_batches,
    input_value_ranges,
    read_ahead_frames,
)
from sdc.method.cell_passes import CellLocator
from sdc.method.cells import CellTable, cell_codes
from sdc.reports.accumulate import ReleaseAccumulator
from sdc.reports.utility import finite_values, numeric_columns

__all__ = ["BackgroundRefinement", "add_apply_batch", "add_refine_batch", "batch_reports",
           "new_accumulator", "refine_columns", "refine_streaming"]


def report_numeric_columns(config: ReleaseConfig) -> list[str]:
    """The numeric non-key variables of the input (the in-memory engine's choice, from the
    pandas types of the batch reader's Arrow schema)."""
    schema = input_arrow_schema(config)
    empty = schema.empty_table().to_pandas()
    return numeric_columns(empty, config)


def new_accumulator(cells: CellTable, config: ReleaseConfig, weight_max: float | None,
                    ranges: dict[str, tuple[float, float, bool]] | None = None,
                    numeric: list[str] | None = None) -> ReleaseAccumulator:
    """An empty accumulator for a release planned on ``cells``; ``ranges``: the numeric
    variables' bounds (default: the Parquet statistics, :func:`input_value_ranges`);
    ``numeric``: the numeric variables (default: :func:`report_numeric_columns`)."""
    sizes = [config.key_variables[v].size for v in config.key_names]
    wmax = weight_max if config.input.weight else None
    if config.input.weight and wmax is None:
        wmax = 0.0
    if numeric is None:
        numeric = report_numeric_columns(config)
    # a Parquet input's statistics: the apply pass then sums the values and starts the
    # quartile select at the bits in which they differ (checked against the data)
    if ranges is None:
        ranges = input_value_ranges(config, numeric)
    return ReleaseAccumulator(cells.key_codes, cells.frequency, sizes, wmax, numeric, ranges)


def _values(frame: pd.DataFrame, columns: list[str]) -> dict[str, np.ndarray]:
    return {c: finite_values(frame[c]) for c in columns}


def add_apply_batch(acc: ReleaseAccumulator, frame: pd.DataFrame, record_cell: np.ndarray,
                    released_cell: np.ndarray, config: ReleaseConfig) -> None:
    """Feed one batch of the apply pass (``frame`` indexed by global rows)."""
    weight = config.input.weight
    w = frame[weight].to_numpy(dtype=float) if weight else None
    acc.add_apply_batch(frame.index.to_numpy(), record_cell, released_cell, w,
                        _values(frame, acc.numeric))


def refine_columns(acc: ReleaseAccumulator, config: ReleaseConfig) -> list[str]:
    """The columns a refinement pass reads: the keys and the numeric variables it refines."""
    return list(dict.fromkeys([*config.key_names, *acc.refining]))


def add_refine_batch(acc: ReleaseAccumulator, frame: pd.DataFrame, locate: CellLocator,
                     config: ReleaseConfig, record_cell: np.ndarray | None = None) -> None:
    """Feed one batch of a refinement pass (``record_cell``: its cells, if already located)."""
    rc = locate(cell_codes(frame, config)) if record_cell is None else record_cell
    acc.add_refine_batch(frame.index.to_numpy(), rc, _values(frame, acc.refining))


def refine_streaming(acc: ReleaseAccumulator, locate: CellLocator, config: ReleaseConfig, *,
                     batch_rows: int = DEFAULT_BATCH_ROWS,
                     stop: threading.Event | None = None) -> int:
    """The refinement passes over the input (keys and numeric columns only); returns how
    many were made (0 when the apply pass resolved everything). ``stop``: set by another
    thread, ends the passes at the next batch (the accumulator is then incomplete)."""
    passes = 0
    more = acc.start_refinement()
    while more:
        frames = input_batches(config, batch_rows=batch_rows, read_ahead=0,
                               columns=refine_columns(acc, config))
        # reading and locating the cells of the next batch run in a background thread
        located = read_ahead_frames(((f, locate(cell_codes(f, config))) for f in frames), 1)
        for frame, rc in located:
            if stop is not None and stop.is_set():
                return passes
            add_refine_batch(acc, frame, locate, config, rc)
        passes += 1
        more = acc.end_refine_pass()
    return passes


class BackgroundRefinement:
    """:func:`refine_streaming` in a thread, so that the refinement passes read the input
    while the streaming engine writes the records and public files (those steps leave a core
    partly idle while Parquet encodes; at 100M records the passes then cost little wall
    time). The accumulator belongs to the thread until :meth:`result` returns.

    Use: start it after the apply pass; :meth:`result` joins it and re-raises its error;
    :meth:`cancel` stops it at the next batch when the release failed elsewhere.
    """

    def __init__(self, acc: ReleaseAccumulator, locate: CellLocator, config: ReleaseConfig,
                 *, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.passes = 0

        def run() -> None:
            try:
                self.passes = refine_streaming(acc, locate, config, batch_rows=batch_rows,
                                               stop=self._stop)
            except BaseException as exc:  # re-raised by result() in the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=run, name="sdc-report-refinement", daemon=True)
        self._thread.start()

    def result(self) -> int:
        """Wait for the passes; their number (raises what the passes raised)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.passes

    def cancel(self) -> None:
        """Stop at the next batch and wait (errors of the passes are dropped)."""
        self._stop.set()
        self._thread.join()


def batch_reports(result: Any, config: ReleaseConfig, *, seed: int, n_sim: int = 200,
                  series: dict[str, Any] | None = None) -> Any:
    """:class:`sdc.reports.build.Reports` of a batch release (``result.accumulator`` filled);
    ``series``: the comparison with the previous release of the series, if any."""
    from sdc.reports.build import reports_from_aggregates

    acc = result.accumulator
    return reports_from_aggregates(None, result, config, acc.aggregates(), seed=seed,
                                   n_sim=n_sim, summaries=acc.group_summaries(), series=series)
