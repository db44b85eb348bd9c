"""The dependence check on a whole file in memory (the pandas engine, ``sdc audit``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.dependence.columns import checked_columns, key_sizes, small_limit
from sdc.method.dependence.counting import DependenceCounter
from sdc.method.dependence.measure import ColumnDependence, measure_dependence
from sdc.method.dependence.pairs import frame_kinds, pair_plan

__all__ = ["frame_dependence"]


def frame_dependence(frame: pd.DataFrame, plan: Any, config: Any,
                     kinds: Mapping[str, str] | None = None) -> list[ColumnDependence]:
    """The check on a whole file in memory (the pandas engine): the counter over one batch;
    ``kinds``: the columns that may pair (:func:`~.pairs.schema_kinds` of the input's
    schema; default: :func:`~.pairs.frame_kinds` of ``frame``)."""
    cells = plan.partitioned.cells
    cols = checked_columns(list(frame.columns), config)
    pairs = pair_plan(cols, frame_kinds(frame) if kinds is None else kinds, config)
    counter = DependenceCounter(cols, len(config.key_names), small_limit(config),
                                sizes=key_sizes(config), pairs=pairs)
    if cols and cells.record_cell.size:
        rc = cells.record_cell
        # contiguous per key, int64 (ufunc.at's fast path needs the tables' own type)
        counter.add(frame, rc, np.ascontiguousarray(cells.key_codes.T, dtype=np.int64)[:, rc].T)
    return measure_dependence(counter, plan, config, lambda x: x)


