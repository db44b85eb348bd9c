"""Records -> released records: the second (and last) step of a release that touches records.

The per-record step is a PURE function of a batch, given the global plan (any engine can call it
on any batch and get byte-identical results)::

    released_cells(plan: DrawPlan, record_cell: np.ndarray, identity: np.ndarray,
                   seed: int) -> np.ndarray        # (m,) released cell of each record

with ``identity`` from :func:`sdc.engine.draws.record_identity` made distinct by
:func:`sdc.engine.draws.unique_identities` (see METHOD.md section 7.3 and
:mod:`sdc.engine.draws` for the keyed draws: move iff u1 < theta / t_j, destination by
hierarchical (trie) rendezvous over the other k - 1 cells of the PRB, O(log k) per record).

:func:`apply_plan` post-randomizes every sensitive record inside its PRB with the NZY
probabilities of the :class:`~sdc.engine.plan.ReleasePlan` (record-keyed draws: a record's
outcome depends on the seed, its own identity and cell and the plan, never on its position or
on other records), gives every moved record all key values of its destination cell, and applies
the eps-DP PRAM of ``perturb:`` variables (same keyed draws).
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
from sdc.engine.draws import (
    DrawPlan,
    cell_identity,
    draw_tiebreak,
    keyed_uniform,
    record_identity,
    trie_rendezvous,
    unique_identities,
)
from sdc.engine.partition import check_columns, partition_frame
from sdc.engine.perturb import apply_perturbations
from sdc.engine.plan import ReleasePlan, plan_release

__all__ = ["ReleaseResult", "apply_plan", "draw_plan", "release_frame", "released_cells"]


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
    cell_id: np.ndarray | None = None
    prb_identity: np.ndarray | None = None
    config: ReleaseConfig | None = None

    def records_table(self) -> pd.DataFrame:
        """Record-level internal table for the series risk (``internal/records.parquet``).

        Columns ``identity`` (the record's draw identity: :func:`record_identity` of the
        released frame, whose identity columns are unchanged, made distinct with PRB records
        first, so PRB records carry exactly the identity their draws used), ``cell`` and
        ``released`` (:func:`cell_identity` of its true and released key values); input row
        order. Internal only: never published.
        """
        rec = self.cells.record_cell
        in_prb = self.cell_prb[rec] >= 0
        ident = unique_identities(record_identity(self.frame, self.config),
                                  lambda: draw_tiebreak(self.cell_id[rec], in_prb))
        return pd.DataFrame({"identity": ident, "cell": self.cell_id[rec],
                             "released": self.cell_id[self.released_cell]}, copy=False)

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


def draw_plan(plan: ReleasePlan, config: ReleaseConfig) -> DrawPlan:
    """The arrays of ``plan`` that the per-record step needs (see :class:`DrawPlan`)."""
    part = plan.partitioned
    return DrawPlan(cell_prb=plan.cell_prb, cell_frequency=part.cells.frequency,
                    cell_id=cell_identity(part.cells.key_codes, config),
                    prb_theta=np.array([b.theta for b in plan.block_plan.blocks],
                                       dtype=np.float64))


def released_cells(plan: DrawPlan, record_cell: np.ndarray, identity: np.ndarray,
                   seed: int) -> np.ndarray:
    """Released cell of every record of a batch: NZY PRAM with record-keyed draws.

    Parameters
    ----------
    plan : DrawPlan
        The global plan (all cells of the file).
    record_cell : (m,) int
        Each record's true cell (index into the plan's cell arrays).
    identity : (m,) uint64
        Each record's identity, after :func:`unique_identities` over all drawing records.
    seed : int
        Release seed.

    Returns
    -------
    (m,) int64 released cell. A pure per-record function: record i's value depends only on
    (seed, plan, record_cell[i], identity[i]). P(move) = theta_b / t_j; a moving record goes to
    one of the other k - 1 cells of its PRB uniformly (hierarchical rendezvous,
    :func:`sdc.engine.draws.trie_rendezvous`: an exponential race with rates n_c / N at each
    node of the PRB's 16-ary hash trie, whose product telescopes to 1 / (k - 1)): eq. 5.3.
    """
    record_cell = np.asarray(record_cell, dtype=np.int64)
    identity = np.asarray(identity, dtype=np.uint64)
    out = record_cell.copy()
    prb = plan.cell_prb[record_cell]
    rows = np.flatnonzero(prb >= 0)
    if rows.size == 0:
        return out
    c = record_cell[rows]
    theta = plan.prb_theta[prb[rows]]
    u1 = keyed_uniform(seed, "move", identity[rows])
    move = u1 < theta / plan.cell_frequency[c]
    movers = rows[move]
    if movers.size == 0:
        return out
    cells, sorted_hash, bounds, position = plan.dest_trie(seed)
    pick = trie_rendezvous(seed, "dest", identity[movers], position[record_cell[movers]],
                           prb[movers], sorted_hash, bounds)
    ok = pick >= 0                    # a PRB of one cell has nowhere to move: the record stays
    out[movers[ok]] = cells[pick[ok]]
    return out


def apply_plan(frame: pd.DataFrame, plan: ReleasePlan, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Post-randomize the sensitive records of ``frame`` as ``plan`` says; see :func:`release_frame`."""
    part = plan.partitioned
    keys = config.key_names
    kvs = config.key_variables
    cells = part.cells
    blocks = plan.block_plan.blocks
    cell_prb = plan.cell_prb

    # record-keyed draws: identities of the PRB records (made distinct among them), then the
    # pure per-record step
    rec_cell = cells.record_cell
    dplan = draw_plan(plan, config)
    rows = np.flatnonzero(cell_prb[rec_cell] >= 0)
    prb_identity = unique_identities(record_identity(frame.iloc[rows], config),
                                     draw_tiebreak(dplan.cell_id[rec_cell[rows]], True))
    released_cell = rec_cell.copy()
    released_cell[rows] = released_cells(dplan, rec_cell[rows], prb_identity, seed)
    moved_rec = released_cell != rec_cell
    changed_per_block = np.bincount(cell_prb[rec_cell[moved_rec]],
                                    minlength=len(blocks)).astype(np.int64)

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
    dp_identity = None
    if config.perturb:
        in_prb = cell_prb[rec_cell] >= 0
        dp_identity = unique_identities(record_identity(frame, config),
                                        draw_tiebreak(dplan.cell_id[rec_cell], in_prb))
    out, dp_done = apply_perturbations(frame, out, config, seed, identity=dp_identity)

    blocks_df = plan.blocks.copy()
    blocks_df["changed"] = changed_per_block
    return ReleaseResult(out, blocks_df, plan.certificate, plan.certificate_at, part.xi, part.theta,
                         part.kmin, plan.partition_sets, cells, part.cell_partition_set, cell_prb,
                         released_cell, plan.merges, dp_done, dplan.cell_id, prb_identity,
                         config)


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
        The release seed. The outcome of a record depends only on the seed, the plan, its own
        cell and its own identity (id, else its non-key values): not on its position, on row
        order or on which other records exist, except through its own t_j, theta and PRB.

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
