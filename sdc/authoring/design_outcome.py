"""The outcome whose group means ``sdc design`` follows key by key (docs/DESIGN.md, "What each
key pays"): the column left of '~' in the config's first ``utility.analyses`` formula, summed
per declared cell (non-missing values, sum, sum of squares) in one pass over the file (record
batches for CSV/Parquet). Without an analysis there is no outcome: the design says so and
shows no shift rather than invent one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable

__all__ = ["NO_OUTCOME", "outcome_of", "outcome_sums"]

NO_OUTCOME = ("no outcome: the shifts of the keys' relations in SE need utility.analyses "
              "(e.g. 'wage ~ education + region'); only the shares of records changed are "
              "shown")


def outcome_of(config: ReleaseConfig) -> str | None:
    """The outcome column of the first ``utility.analyses`` formula whose left side names
    one column that is not a key (``log(wage) ~ ...``: ``wage``); None when there is none."""
    from formulaic import Formula

    keys = set(config.key_names)
    for a in config.utility.analyses:
        try:
            lhs = sorted(str(v) for v in Formula(a.formula).lhs.required_variables)
        except Exception:  # noqa: BLE001 - validated at load; any other shape has no outcome
            continue
        if len(lhs) == 1 and lhs[0] not in keys:
            return lhs[0]
    return None


def outcome_sums(config: ReleaseConfig, fine: CellTable,
                 column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n_j, S_j, Q_j) of ``column`` for every cell of ``fine`` (the keys' declared values,
    :func:`sdc.authoring.design.count_declared`): its non-missing numeric values, their sum
    and the sum of their squares (a value that is not a number counts as missing)."""
    from sdc.errors import InputError

    try:
        return _batched(config.declared_view(), fine, column)
    except InputError as e:
        if "62-bit" not in str(e):
            raise
    from sdc.io.read import read_input
    from sdc.method.partition import partition_frame

    raw = config.declared_view()
    frame = read_input(raw)   # cells too many for one code: the whole file's cell table
    return _sums(partition_frame(frame, raw).cells.record_cell, frame[column], fine.n_cells)


def _sums(cell: np.ndarray, col: Any, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import pandas as pd

    y = pd.to_numeric(col, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    ok = np.isfinite(y)
    n, s, q = (np.bincount(cell, weights=v, minlength=size)
               for v in (ok.astype(float), np.where(ok, y, 0.0), np.where(ok, y * y, 0.0)))
    return n, s, q


def _batched(raw: ReleaseConfig, fine: CellTable,
             column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from sdc.method.cell_passes import CellLocator
    from sdc.method.cells import cell_codes, radix_sizes

    sizes = radix_sizes(raw)
    mult = np.cumprod([1, *sizes[::-1]])[:-1][::-1].astype(np.int64)
    keys = fine.key_codes.astype(np.int64) @ mult if fine.n_cells else np.zeros(0, np.int64)
    frames: Any
    if raw.input.resolved_format in ("csv", "parquet"):
        from sdc.io.batches import input_batches

        frames = input_batches(raw, columns=[*raw.key_names, column])
    else:
        from sdc.io.read import read_input

        frames = [read_input(raw)]
    locate = CellLocator(keys, raw)
    out = [np.zeros(fine.n_cells) for _ in range(3)]
    for frame in frames:
        part = _sums(locate(cell_codes(frame, raw)), frame[column], fine.n_cells)
        for acc, v in zip(out, part, strict=True):
            acc += v
    return out[0], out[1], out[2]
