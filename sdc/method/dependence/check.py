"""The dependence check on a whole file in memory (the pandas engine, ``sdc audit``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.method.dependence.columns import checked_columns, key_sizes, small_limit
from sdc.method.dependence.counting import DependenceCounter
from sdc.method.dependence.measure import ColumnDependence, measure_dependence

__all__ = ["frame_dependence"]


def frame_dependence(frame: pd.DataFrame, plan: Any, config: Any) -> list[ColumnDependence]:
    """The check on a whole file in memory (the pandas engine): the counter over one batch."""
    cells = plan.partitioned.cells
    cols = checked_columns(list(frame.columns), config)
    counter = DependenceCounter(cols, len(config.key_names), small_limit(config),
                                sizes=key_sizes(config))
    if cols and cells.record_cell.size:
        rc = cells.record_cell
        # contiguous per key, int64 (ufunc.at's fast path needs the tables' own type)
        counter.add(frame, rc, np.ascontiguousarray(cells.key_codes.T, dtype=np.int64)[:, rc].T)
    return measure_dependence(counter, plan, config, lambda x: x)


