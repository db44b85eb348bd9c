"""What `sdc init` says about the check of its draft: the figures of the partition the draft
has (:func:`plan_figures`, also after the design step replaced it), the PRB sizes a partition
suggestion is judged by (:func:`prb_sizes`), and, when no partition can certify the file, which
rare key combinations are the cause and what to do before a config exists
(:func:`rare_cells_hint`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import sdc
from sdc.config import parse_config

__all__ = ["SUGGESTION_STEP", "plan_figures", "prb_sizes", "rare_cells_hint"]


#: the words of a partition suggestion's step in the draft's comments ("3 of 9 PRBs had k <
#: kmin = 5: age no longer partitions the file")
SUGGESTION_STEP = "PRBs had k < kmin"


def plan_figures(plan: Any, kmin: int) -> dict[str, Any]:
    """The draft comment's figures of a plan: partition sets (as `sdc plan` counts them), PRBs,
    PRBs with k < kmin (after merging: 0 when certified), the certificate, the merges and the
    expected records changed."""
    k = np.asarray(plan.blocks["k"]) if len(plan.blocks) else np.zeros(0)
    return {"partition_sets": int(len(plan.partitioned.partition_keys)), "prbs": int(k.size),
            "small_prbs": int((k < kmin).sum()), "kmin": int(kmin),
            "certificate": float(plan.certificate), "merges": len(plan.merges),
            "expected_changed": float(plan.blocks["expected_changed"].sum())
            if len(plan.blocks) else 0.0}


def prb_sizes(frame: pd.DataFrame, data: dict[str, Any], base_dir: Path) -> np.ndarray:
    """k of every partition set's PRB (0 when it has no sensitive cell)."""
    cfg = parse_config(data, base_dir, source="the draft", load_hierarchies=False)
    part = sdc.partition_frame(frame, cfg)
    return np.bincount(part.cell_partition_set[part.sensitive],
                       minlength=len(part.partition_keys))


def rare_cells_hint(frame: pd.DataFrame, keys: list[str], xi: float) -> str:
    """When the whole file holds fewer rare key combinations (held by at most t_max records)
    than the kmin a block needs to hide one among them, no partition can help: say which they
    are and what to do before a config exists (else empty: the plan's refusal says it)."""
    from sdc.method.theta import kmin, solve_theta

    counts = frame.groupby(keys, dropna=False, observed=True, sort=True).size()
    t_max = math.ceil(1 / xi) - 1
    rare = counts[counts <= t_max]
    need = kmin(solve_theta(xi))
    if not 0 < len(rare) < need:
        return ""
    shown = "; ".join(
        ", ".join(f"{k}={v}" for k, v in zip(keys, idx if isinstance(idx, tuple) else (idx,),
                                             strict=True)) + f" ({n} record{'s' * (n > 1)})"
        for idx, n in rare.head(5).items())
    return (f"the draft cannot be certified: the file holds only {len(rare)} rare combination(s) "
            f"of the keys {', '.join(keys)} (held by at most {t_max} records: the ones an "
            f"intruder could single out), and PRAM needs at least kmin = {need} of them to hide "
            f"one record among them at xi = {xi:g}: {shown}. Check those values (an error in "
            "the data?), or leave the key that makes them rare out of --keys and run `sdc "
            "init` again; then add it back in the config with `recode: {groups: ...}` merging "
            "its rare values into common ones (docs/CONFIG.md) and run `sdc plan`")
