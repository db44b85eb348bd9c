"""The reports of the batch engines: the per-batch calls into
:class:`sdc.reports.accumulate.ReleaseAccumulator` and its refinement passes.

The streaming and Dask engines call :func:`new_accumulator` after planning,
:func:`add_apply_batch` on every batch of their apply pass, and :func:`add_refine_batch` on
every batch of the refinement passes their runner maps afterwards; :func:`batch_reports` then builds ``risk.json``,
``utility.json`` and ``report.html`` with the same builders as the in-memory engine
(:func:`sdc.reports.build.reports_from_aggregates`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.batches import (
    input_arrow_schema,
    input_value_ranges,
)
from sdc.method.cell_passes import CellLocator
from sdc.method.cells import CellTable, cell_codes
from sdc.reports.accumulate import ReleaseAccumulator
from sdc.reports.formulas import formula_accumulators
from sdc.reports.utility import finite_values, numeric_columns

__all__ = ["add_apply_batch", "add_refine_batch", "batch_reports",
           "new_accumulator", "refine_columns"]


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
    acc = ReleaseAccumulator(cells.key_codes, cells.frequency, sizes, wmax, numeric, ranges)
    acc.analyses = formula_accumulators(config)
    return acc


def _values(frame: pd.DataFrame, columns: list[str]) -> dict[str, np.ndarray]:
    return {c: finite_values(frame[c]) for c in columns}


def add_apply_batch(acc: ReleaseAccumulator, frame: pd.DataFrame, record_cell: np.ndarray,
                    released_cell: np.ndarray, config: ReleaseConfig) -> None:
    """Feed one batch of the apply pass (``frame`` indexed by global rows)."""
    weight = config.input.weight
    w = frame[weight].to_numpy(dtype=float) if weight else None
    acc.add_apply_batch(frame.index.to_numpy(), record_cell, released_cell, w,
                        _values(frame, acc.numeric))
    acc.add_analysis_batch(frame, record_cell, released_cell, config)


def refine_columns(acc: ReleaseAccumulator, config: ReleaseConfig) -> list[str]:
    """The columns a refinement pass reads: the keys and the numeric variables it refines."""
    return list(dict.fromkeys([*config.key_names, *acc.refining]))


def add_refine_batch(acc: ReleaseAccumulator, frame: pd.DataFrame, locate: CellLocator,
                     config: ReleaseConfig, record_cell: np.ndarray | None = None) -> None:
    """Feed one batch of a refinement pass (``record_cell``: its cells, if already located)."""
    rc = locate(cell_codes(frame, config)) if record_cell is None else record_cell
    acc.add_refine_batch(frame.index.to_numpy(), rc, _values(frame, acc.refining))


def batch_reports(result: Any, config: ReleaseConfig, *, seed: int, n_sim: int = 200,
                  series: dict[str, Any] | None = None) -> Any:
    """:class:`sdc.reports.build.Reports` of a batch release (``result.accumulator`` filled);
    ``series``: the comparison with the previous release of the series, if any."""
    from sdc.reports.build import reports_from_aggregates

    acc = result.accumulator
    return reports_from_aggregates(None, result, config, acc.aggregates(), seed=seed,
                                   n_sim=n_sim, summaries=acc.group_summaries(), series=series,
                                   moments=acc.cell_moments(), analyses=acc.analyses)
