"""The recoding step of every reader: input key values -> released (recoded) key values.

Every reader of the *input* (the whole file: :func:`sdc.io.read.read_input`; record batches:
:func:`sdc.io.batches.input_batches`; the Dask engine's pieces) passes its frame through
:func:`recode_frame`, so everything after reading works on the released values of a recoded key
(``key_variables.X.recode``, see :mod:`sdc.config.recode`). A value outside the declared domain
is refused here with the same message as the cell encoder's. Non-key columns are untouched, and a
config without recoding returns the frame as it is.

:func:`sdc.reports.recoding.fine_counts` counts the declared (not recoded) values of the recoded
keys in one pass over their columns (the reports' recoding loss; ``sdc audit`` re-derives it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.method.cells import encode_key

__all__ = ["recode_frame"]


def _typed(col: pd.Series, dtype: Any, domain: list[Any]) -> pd.Series:
    """A numeric key stays numeric (released values are numbers: class edges or midpoints): a
    key released at a fractional midpoint is float64; otherwise the column takes the input
    column's own dtype (float with NaN for missing, int64, a nullable
    integer), so every batch of every engine gets the same dtype; text stays text."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in domain):
        return col
    if any(isinstance(v, float) for v in domain):  # class midpoints (12.5): float64, NaN missing
        return col.astype(np.float64)
    kind = getattr(dtype, "kind", "O")
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and kind in "iuf":
        return col.astype(dtype)
    if kind == "f":
        return col.astype(np.float64)
    if kind in "iu" and col.notna().all():
        return col.astype(np.int64)
    return col


def recode_frame(frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """``frame`` with every recoded key column replaced by its released values (numbers for a
    numeric key, :func:`_typed`; text otherwise; missing stays missing). Raises :class:`~sdc.errors.InputError` for a value outside the declared
    domain (the column, the values, the rows and the fix)."""
    keys = [k for k in config.recoded_keys if k in frame.columns]
    if not keys:
        return frame
    sources = config.input_key_variables
    out = {}
    for k in keys:
        src = sources[k]
        code_map, _ = config.recode_map(k)
        released = config.key_variables[k]
        dom = np.asarray([*released.domain, *([None] if released.missing == "category" else [])],
                         dtype=object)
        codes = code_map[encode_key(frame[k], k, src)]
        out[k] = _typed(pd.Series(dom[codes], index=frame.index, name=k, dtype=object, copy=False),
                        frame[k].dtype, released.domain)
    frame = frame.copy(deep=False)
    for k, col in out.items():
        frame[k] = col
    return frame
