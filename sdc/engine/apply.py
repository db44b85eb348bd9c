"""Records -> released records: the second (and last) step of a release that touches records.

:func:`apply_plan` post-randomizes every sensitive record inside its PRB with the NZY
probabilities of the :class:`~sdc.engine.plan.ReleasePlan` (one random stream per PRB derived
from the seed and the PRB's partition key), gives every moved record all key values of its
destination cell, and applies the eps-DP PRAM of ``perturb:`` variables.
:func:`release_frame` is the whole engine on one DataFrame (METHOD.md sections 2-6):
partition (:mod:`sdc.engine.partition`), plan (:mod:`sdc.engine.plan`), apply.

Everything works on whole columns; the only Python loops run over variables and PRBs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.engine.cells import CellTable
from sdc.engine.draws import stream
from sdc.engine.partition import check_columns, partition_frame
from sdc.engine.perturb import apply_perturbations
from sdc.engine.plan import ReleasePlan, plan_release
from sdc.engine.pram import post_randomize

__all__ = ["ReleaseResult", "apply_plan", "release_frame"]


@dataclass
class ReleaseResult:
    """What the engine returns. Only ``frame`` is meant for the public; the rest is internal.

    Attributes
    ----------
    frame : DataFrame
        Released records in the input's row order and index, input columns minus the dropped
        identifiers (the original id column is kept here; the writer replaces it).
    blocks : DataFrame
        One row per PRB: ``prb``, ``partition_key``, ``n_partition_sets``, ``k``,
        ``n_records``, ``profile`` (e.g. ``"1:200, 2:80"``), ``cells_t1``, ``cells_t2``, ...,
        ``theta``, ``kmin``, ``max_risk`` (mechanism-aware: max over the target's cell, the
        picked cell and a), ``max_risk_t``, ``max_risk_a``, ``max_risk_pick`` (``own`` or
        ``other``), ``max_risk_t_z`` (frequency of the picked cell), ``own_max_risk`` (NZY's
        own-cell intruder), ``other_max_risk``, ``action``, ``expected_changed`` (theta * k)
        and ``changed``.
    dp_perturbations : list of :class:`sdc.engine.perturb.DPPerturbation`
        The eps-DP PRAM applied to the config's ``perturb:`` variables (non-key), if any.
    certificate : float
        max over PRBs of their exact max risk and over non-sensitive cells of 1/t_j.
    certificate_at : dict
        Where the certificate is attained: ``{"source": "prb", "prb", "partition_key", "t",
        "a", "pick", "t_z"}`` or ``{"source": "non_sensitive", "t", "a", "pick", "t_z"}``.
    """

    frame: pd.DataFrame
    blocks: pd.DataFrame
    certificate: float
    certificate_at: dict[str, Any]
    xi: float
    theta: float
    kmin: int
    partition_sets: pd.DataFrame
    cells: CellTable
    cell_partition_set: np.ndarray
    cell_prb: np.ndarray
    released_cell: np.ndarray
    merges: list[str] = field(default_factory=list)
    dp_perturbations: list = field(default_factory=list)

    @property
    def changed(self) -> np.ndarray:
        """Per record: did its key values change?"""
        return self.released_cell != self.cells.record_cell

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.cells.record_cell]

    @property
    def record_prb(self) -> np.ndarray:
        return self.cell_prb[self.cells.record_cell]

    @property
    def sensitive_cell(self) -> np.ndarray:
        return self.cell_prb >= 0

    @property
    def n_changed(self) -> int:
        return int(self.changed.sum())

def _decode_values(kv, codes: np.ndarray) -> np.ndarray:
    dom = kv.domain + ([None] if kv.missing == "category" else [])
    return np.asarray(dom, dtype=object)[codes]


def _tiebreak(frame: pd.DataFrame, rows: np.ndarray, id_column: str | None) -> np.ndarray:
    """A canonical order among records of the same cell that does not depend on row order."""
    sub = frame.iloc[rows]
    if id_column is not None:
        return pd.factorize(sub[id_column], sort=True)[0]
    return pd.util.hash_pandas_object(sub, index=False).to_numpy()


def apply_plan(frame: pd.DataFrame, plan: ReleasePlan, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Post-randomize the sensitive records of ``frame`` as ``plan`` says; see :func:`release_frame`."""
    part = plan.partitioned
    keys = config.key_names
    kvs = config.key_variables
    cells, t = part.cells, part.cells.frequency
    blocks = plan.block_plan.blocks
    cell_prb, sens_cells, starts, cell_local = plan.cell_prb, plan.prb_cells, plan.prb_start, plan.cell_local

    # records of the PRBs in canonical order: (PRB, cell, tiebreak)
    rec_cell = cells.record_cell
    rec_prb = cell_prb[rec_cell]
    rows = np.flatnonzero(rec_prb >= 0)
    tb = _tiebreak(frame, rows, config.input.id_column)
    rows = rows[np.lexsort((tb, rec_cell[rows], rec_prb[rows]))]
    row_prb = rec_prb[rows]
    bounds = np.searchsorted(row_prb, np.arange(len(blocks) + 1))

    released_cell = rec_cell.copy()
    changed_per_block = np.zeros(len(blocks), dtype=np.int64)
    for b, blk in enumerate(blocks):
        seg = rows[bounds[b]:bounds[b + 1]]
        c = rec_cell[seg]
        rng = stream(seed, "prb:" + plan.prb_label(b))
        dest_local = post_randomize(cell_local[c], t[c], blk.k, blk.theta, rng)
        block_cells = sens_cells[starts[b]:starts[b] + blk.k]
        released_cell[seg] = block_cells[dest_local]
        changed_per_block[b] = int((block_cells[dest_local] != c).sum())

    # the released frame: every moved record takes all key values of its destination cell
    out = frame.drop(columns=list(config.input.drop))
    moved = np.flatnonzero(released_cell != rec_cell)
    if moved.size:
        for j, v in enumerate(keys):
            new_codes = cells.key_codes[released_cell[moved], j]
            diff = new_codes != cells.key_codes[rec_cell[moved], j]
            if not diff.any():
                continue
            pos = moved[diff]
            col = out[v].to_numpy(copy=True)
            if col.dtype != object and kvs[v].missing == "category":
                col = col.astype(object)
            col[pos] = _decode_values(kvs[v], new_codes[diff])
            out[v] = pd.Series(col, index=out.index, name=v).astype(frame[v].dtype)

    # eps-DP PRAM of the perturb: variables (non-key), after NZY
    out, dp_done = apply_perturbations(frame, out, config, seed)

    blocks_df = plan.blocks.copy()
    blocks_df["changed"] = changed_per_block
    return ReleaseResult(out, blocks_df, plan.certificate, plan.certificate_at, part.xi, part.theta,
                         part.kmin, plan.partition_sets, cells, part.cell_partition_set, cell_prb,
                         released_cell, plan.merges, dp_done)


def release_frame(frame: pd.DataFrame, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Post-randomize the risky records of ``frame`` with NZY PRAM and certify the result.

    partition (records -> cell table) -> plan (cell table -> PRBs, theta, certificate) -> apply.

    Parameters
    ----------
    frame : DataFrame
        The microdata (any column order and row order).
    config : ReleaseConfig
        Its ``key_variables``, ``partition``, ``risk`` and ``input`` (id and dropped columns)
        sections are used. Hierarchy files must already be loaded (``sdc.load_config`` does it).
    seed : int
        The release seed. The outcome of a record depends only on the seed, its PRB and its
        place in the PRB's canonical order (cell, then id or row content).

    Returns
    -------
    ReleaseResult

    Raises
    ------
    InputError
        A key column is missing or holds a value outside its declared domain.
    SmallBlockError
        A PRB is too small under ``small_blocks: fail``, or cannot be certified after merging.
    """
    check_columns(frame, config)
    part = partition_frame(frame, config)
    plan = plan_release(part, config)
    return apply_plan(frame, plan, config, seed)
