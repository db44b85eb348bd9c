"""``sdc design`` of a weighted job (``risk.weighted``): the survey weights of every declared
cell, read once with the cell table's keys (the search ranks by weighted balance,
:mod:`sdc.method.design.balance`; the recommendation's weighted figures re-aggregate them
exactly, :func:`sdc.authoring.design_node.configured_figures`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable
from sdc.method.weighted import WeightSums

__all__ = ["DeclaredWeights", "declared_weights", "transition_design_name"]


@dataclass(frozen=True)
class DeclaredWeights:
    """The weights of every declared cell (the rows of ``sdc design``'s cell table)."""

    #: W_j, the sum of the cell's weights (:class:`WeightSums`' exact sums)
    total: np.ndarray
    #: Q_j, the sum of their squares
    squares: np.ndarray
    #: the exact sums keyed by declared cell index: a node's W_j, regrouped, has the bits
    #: the release's count pass gives it (:meth:`WeightSums.regroup`)
    sums: WeightSums

    @property
    def pair(self) -> tuple[np.ndarray, np.ndarray]:
        """(W_j, Q_j): what the search plans weighted nodes on."""
        return self.total, self.squares


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


def declared_weights(config: ReleaseConfig, fine: CellTable) -> DeclaredWeights:
    """W_j and Q_j for every cell of ``fine`` (:func:`sdc.authoring.design.count_declared`,
    the keys' declared values): the sums of the records' weights and of their squares, read
    in record batches for CSV/Parquet (whole for SPSS/Stata). W_j are the exact sums of
    :class:`sdc.method.weighted.WeightSums`."""
    from sdc.errors import InputError

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
    sums = WeightSums.of(rc, w)
    return DeclaredWeights(sums.result(np.arange(fine.n_cells)),
                           np.bincount(rc, weights=w * w, minlength=fine.n_cells), sums)


def _batched_weights(raw: ReleaseConfig, fine: CellTable, col: str) -> DeclaredWeights:
    from sdc.method.cell_passes import CellLocator
    from sdc.method.cells import cell_codes, radix_sizes

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
    cells = np.arange(fine.n_cells)
    return DeclaredWeights(sums.result(keys), q, sums.regroup(keys, cells))


def transition_design_name(config: ReleaseConfig) -> str:
    """``uniform``, ``near``, ``weighted`` or ``weighted x near``: the config's transition
    design (:func:`sdc.method.designs.design_of`)."""
    from sdc.method.designs import design_of

    return design_of(config).name
