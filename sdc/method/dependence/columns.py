"""Which columns the dependence check measures, and the key facts it needs from the config."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["checked_columns", "key_sizes", "small_limit"]


def checked_columns(columns: list[str], config: Any) -> list[str]:
    """The released non-key columns the check measures: every input column except the keys,
    ``input.drop``, ``input.id_column``, ``perturb:`` columns (released randomized) and
    ``derived:`` columns (recomputed from the released keys) and a recalibrated weight
    (``input.weight_release: recalibrated``: a function of the released household keys), in
    input order."""
    skip = {*config.key_names, *config.input.drop, *(config.perturb or {}),
            *getattr(config, "derived", [])}
    if config.input.id_column:
        skip.add(config.input.id_column)
    if getattr(config.input, "weight_release", "as_is") == "recalibrated":
        skip.add(config.input.weight)  # released as a function of the released keys
    return [c for c in columns if c not in skip]



def key_sizes(config: Any) -> list[int]:
    """Domain size (codes) of every key variable, in key order."""
    return [int(config.key_variables[v].size) for v in config.key_names]


def small_limit(config: Any) -> int:
    """Cells with at least this many records are never sensitive (t * xi >= 1)."""
    return max(1, math.ceil(1.0 / config.risk.xi))

