"""``sdc design`` with the config's own transition design: the survey weights of every declared
cell (a weighted job's search ranks by weighted balance, :mod:`sdc.method.design.balance`) and
the recommendation re-planned from the records as ``sdc release`` plans it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable

__all__ = ["configured_figures", "declared_weights", "transition_design_name"]


def _checked_weights(w: np.ndarray, column: str, first_row: int) -> np.ndarray:
    """``w`` as float64, refused (InputError, exit 2) when a weight is missing, not finite
    or not positive: the release refuses them too."""
    from sdc.errors import InputError

    w = np.asarray(w, dtype=np.float64)
    bad = ~(np.isfinite(w) & (w > 0))
    if bad.any():
        rows = np.flatnonzero(bad)[:5] + first_row + 1
        raise InputError(f"input.weight column {column!r}: {int(bad.sum()):,} record(s) with a "
                         f"weight that is missing, not finite or not positive (rows "
                         f"{', '.join(map(str, rows))}{', ...' if bad.sum() > 5 else ''}); "
                         "fix or drop those records, or set risk.weighted: false")
    return w


def declared_weights(config: ReleaseConfig, fine: CellTable) -> tuple[np.ndarray, np.ndarray]:
    """(W_j, Q_j) for every cell of ``fine`` (:func:`sdc.authoring.design.count_declared`,
    the keys' declared values): the sums of the records' weights and of their squares, read
    in record batches for CSV/Parquet (whole for SPSS/Stata). W_j are the exact sums of
    :class:`sdc.method.weighted.WeightSums`."""
    from sdc.errors import InputError
    from sdc.method.weighted import WeightSums

    raw = config.declared_view()
    col = str(raw.input.weight)
    try:
        return _batched_weights(raw, fine, col)
    except InputError as e:
        if "62-bit" not in str(e):
            raise
    from sdc.io.read import read_input
    from sdc.method.partition import partition_frame

    frame = read_input(raw)   # cells too many for one code: the whole file's cell table
    rc = partition_frame(frame, raw).cells.record_cell
    w = _checked_weights(frame[col].to_numpy(np.float64, na_value=np.nan), col, 0)
    return (WeightSums.of(rc, w).result(np.arange(fine.n_cells)),
            np.bincount(rc, weights=w * w, minlength=fine.n_cells))


def _batched_weights(raw: ReleaseConfig, fine: CellTable,
                     col: str) -> tuple[np.ndarray, np.ndarray]:
    from sdc.method.cell_passes import CellLocator
    from sdc.method.cells import cell_codes, radix_sizes
    from sdc.method.weighted import WeightSums

    sizes = radix_sizes(raw)
    mult = np.cumprod([1, *sizes[::-1]])[:-1][::-1].astype(np.int64)
    keys = fine.key_codes.astype(np.int64) @ mult if fine.n_cells else np.zeros(0, np.int64)
    sums = WeightSums()
    q = np.zeros(fine.n_cells)
    frames: Any
    if raw.input.resolved_format in ("csv", "parquet"):
        from sdc.io.batches import input_batches

        frames = input_batches(raw, columns=[*raw.key_names, col])
    else:
        from sdc.io.read import read_input

        frames = [read_input(raw)]
    locate = CellLocator(keys, raw)
    for frame in frames:
        codes = cell_codes(frame, raw)
        w = _checked_weights(frame[col].to_numpy(np.float64, na_value=np.nan), col,
                             int(frame.index[0]) if len(frame) else 0)
        sums.merge(WeightSums.of(codes, w))
        q += np.bincount(locate(codes), weights=w * w, minlength=fine.n_cells)
    return sums.result(keys), q


def transition_design_name(config: ReleaseConfig) -> str:
    """``uniform``, ``near``, ``weighted`` or ``weighted x near``: the config's transition
    design (:func:`sdc.method.designs.design_of`)."""
    from sdc.method.designs import design_of

    return design_of(config).name


def configured_figures(config: ReleaseConfig, i: int,
                       write: Callable[[Path], Path]) -> dict[str, Any] | None:
    """Node ``i`` planned and certified from the records as ``sdc release`` would with the
    config's own transition design (near W, weighted groups with the file's weights): its
    certificate, expected records changed (sum of t_j m_j of that design) and, for the
    weighted mode, its weight groups and weighted balance (exact bias share, weight in
    groups that keep NZY, expected share of cells beyond 3 SE over 30 releases:
    :func:`sdc.method.design.balance.balance_figures`). None when the config uses NZY's
    uniform design (the search's figures are then the release's). ``write(path)`` writes
    node ``i``'s config there (:func:`sdc.authoring.design.write_node_config`)."""
    import tempfile

    from sdc.config.load import load_config
    from sdc.errors import CertificationError, SmallBlockError
    from sdc.io.read import read_input
    from sdc.method.design.balance import balance_figures
    from sdc.method.designs import design_of, plan_release
    from sdc.method.partition import partition_frame
    from sdc.method.weighted import WeightSums

    cfg = config
    name = transition_design_name(cfg)
    if name == "uniform":
        return None
    with tempfile.TemporaryDirectory(prefix="sdc-design-") as tmp:
        node_cfg = load_config(write(Path(tmp) / "node.yaml"))
        frame = read_input(node_cfg)
    n = len(frame)
    balance = None
    try:
        part = partition_frame(frame, node_cfg)
        if design_of(node_cfg).needs_weights:
            w = frame[node_cfg.input.weight].to_numpy(np.float64)
            cells = np.arange(part.cells.n_cells)
            wt = WeightSums.of(part.cells.record_cell, w).result(cells)
            plan = plan_release(part, node_cfg, wt)
            balance = balance_figures(plan, wt, np.bincount(
                part.cells.record_cell, weights=w * w, minlength=cells.size))
        else:
            plan = plan_release(part, node_cfg)
    except (SmallBlockError, CertificationError) as e:
        return {"design": name, "node": i, "certified": False, "note": str(e)[:300]}
    out: dict[str, Any] = {
        "design": name, "node": i, "certified": plan.certificate <= cfg.risk.xi + 1e-12,
        "certificate": float(plan.certificate), "changed": plan.expected_changed,
        "share_changed": plan.expected_changed / n if n else 0.0, "note": None}
    if balance is not None:
        out.update({k: balance[k] for k in ("weight_groups", "nzy_groups", "weighted_bias",
                                            "weighted_fallback", "weighted_beyond")})
    return out
