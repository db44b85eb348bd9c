"""Cell table -> PRBs, theta, small-block policy and certificate (docs/METHOD.md sections 3-4, 6-7).

:func:`plan_release` works on aggregates only: the cells of a :class:`~sdc.method.partition.Partitioned`
(their key codes, frequencies t_j and partition sets), never on records. It forms the PRBs (the
sensitive cells of each partition set), solves h(theta) = xi, applies the small-block policy
(merge / calibrate / fail), computes every PRB's exact max risk and the release certificate:
max over PRBs and over non-sensitive cells (1/t_j). The plan is what every executor applies to
records (:mod:`sdc.pipeline`); it is identical whatever engine reads the records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import AsIs, Bands, Groups, Hierarchy, ReleaseConfig
from sdc.errors import SmallBlockError
from sdc.method.blocks import Block, BlockPlan, plan_blocks
from sdc.method.draws import DrawPlan, cell_identity
from sdc.method.partition import Partitioned
from sdc.method.transition import CellDesign, cell_design

__all__ = ["ReleasePlan", "certificate", "default_merge_order", "draw_plan",
           "expected_changed", "plan_prbs", "sensitive_profiles"]


@dataclass(frozen=True)
class ReleasePlan:
    """What a release does, decided on the cell table.

    Attributes
    ----------
    partitioned : Partitioned
        Cells, partition sets and sensitive cells.
    block_plan : BlockPlan
        The PRBs (members, profile, k, theta, exact risk, action) and the merges made.
    cell_prb : (n_cells,) int
        PRB of every cell, -1 for non-sensitive cells.
    prb_cells : (n_sensitive,) int
        The sensitive cells grouped by PRB (ascending cell index inside a PRB);
        PRB b owns ``prb_cells[prb_start[b]:prb_start[b] + k_b]``.
    prb_start : (n_prb,) int
    cell_local : (n_cells,) int
        Index of a sensitive cell inside its PRB (0..k-1), -1 otherwise.
    blocks : DataFrame
        One row per PRB (see :class:`sdc.method.outcome.ReleaseOutcome`), without ``changed``.
    partition_sets : DataFrame
        One row per partition set with its counts and PRB.
    certificate : float
        max over PRBs of their exact max risk and over non-sensitive cells of 1/t_j.
    certificate_at : dict
        Where the certificate is attained.
    dependence : list
        Figures of the dependence check of the released non-key columns (filled by the
        executors once measured: :mod:`sdc.method.dependence`).
    """

    partitioned: Partitioned
    block_plan: BlockPlan
    cell_prb: np.ndarray
    prb_cells: np.ndarray
    prb_start: np.ndarray
    cell_local: np.ndarray
    blocks: pd.DataFrame
    partition_sets: pd.DataFrame
    certificate: float
    certificate_at: dict[str, Any] = field(default_factory=dict)
    #: the dependence check's figures per released non-key column
    #: (:class:`sdc.method.dependence.ColumnDependence`), set once measured
    dependence: list = field(default_factory=list)
    #: the weighted mode's groups and design (:class:`sdc.method.weighted.WeightedDesign`);
    #: None: NZY's eq. 5.3
    weighted: Any = None
    #: every PRB's :class:`~sdc.method.transition.Transition` (its cells in ``prb_cells``
    #: order) under ``destinations: near`` or ``weighted``; None: NZY's uniform design (never
    #: materialised). ``near``: what defines the near W (audit.json)
    transitions: list | None = None
    near: dict | None = None
    #: the transition design that built this plan (:class:`sdc.method.designs.TransitionDesign`,
    #: picked once from the config by :func:`sdc.method.designs.design_of`): what every step
    #: after planning reads (draws, audit, codebook, reports), never ``config.risk``
    design: Any = None

    @property
    def merges(self) -> list[str]:
        return self.block_plan.merges

    def cell_design(self) -> CellDesign:
        """Every PRB's transition design laid out over the cell table
        (:func:`sdc.method.transition.cell_design`): the weighted or near design when there is
        one, else NZY's (m_j = theta_b / t_j, uniform over the PRB)."""
        if self.transitions is not None:
            return cell_design(self.transitions, self.prb_cells, self.prb_start,
                               self.partitioned.cells.n_cells)
        t = self.partitioned.cells.frequency
        theta = np.array([b.theta for b in self.block_plan.blocks], dtype=np.float64)
        sens = self.cell_prb >= 0
        move = np.zeros(t.size)
        move[sens] = theta[self.cell_prb[sens]] / t[sens]
        n = t.size
        return CellDesign(move, np.asarray(self.cell_prb, dtype=np.int64),
                          np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                          np.zeros(0))

    @property
    def expected_changed(self) -> float:
        """E[records changed] under the design the release uses (:func:`expected_changed`)."""
        return expected_changed(self.blocks, self.weighted)[0]


def expected_changed(blocks: pd.DataFrame, weighted: Any = None) -> tuple[float, str]:
    """E[records changed] = sum_j t_j m_j of the design a release uses, and how it is
    computed: NZY's (uniform or near W) is theta_b k_b per PRB (``blocks``); the weighted
    mode's is summed over its weight groups (``weighted``: a WeightedDesign)."""
    if weighted is not None:
        return (float(weighted.groups["expected_changed"].sum()),
                "sum of t_j m_j, m_j = c_g / W_j of the weighted design")
    return (float(blocks["expected_changed"].sum()) if len(blocks) else 0.0,
            "sum of theta * k")


def default_merge_order(config: ReleaseConfig) -> list[str]:
    """Banded variables first, then hierarchies, groups and as-is variables (config order)."""
    if config.risk.merge_along is not None:
        return list(config.risk.merge_along)
    rank = {Bands: 0, Hierarchy: 1, Groups: 2, AsIs: 3, str: 3}
    items = list(config.partition.items())
    return [v for v, r in sorted(items, key=lambda vr: rank.get(type(vr[1]), 3))]


def sensitive_profiles(part: Partitioned) -> np.ndarray:
    """(partition sets, t_max + 1) int64: the frequency profile of every partition set, the
    number of its sensitive cells with t_j = t (t_j < 1/xi, so t <= t_max = ceil(1/xi) - 1)."""
    t, sens, cell_ps = part.cells.frequency, part.sensitive, part.cell_partition_set
    t_max = max(1, math.ceil(1.0 / part.xi) - 1)
    n_ps = len(part.partition_keys)
    flat = np.bincount(cell_ps[sens] * (t_max + 1) + t[sens], minlength=n_ps * (t_max + 1))
    return flat.reshape(n_ps, t_max + 1).astype(np.int64)


def certificate(prb_risk: Any, frequency: np.ndarray, sensitive: np.ndarray
                ) -> tuple[float, int | None, int | None]:
    """The certificate of a plan (docs/METHOD.md): max(max_b R_b, max over non-sensitive cells
    of 1/t_j), R_b = max_{j in b, a} R_j(a, t) the exact max risk of PRB b (``prb_risk``, one
    per PRB). Returns ``(certificate, b, t)``: ``b`` the first PRB attaining it, or ``t`` the
    smallest non-sensitive t_j when that cell attains it (1/t above every PRB's risk); the
    other None (both None: no cell)."""
    r = np.asarray(prb_risk, dtype=np.float64)
    cert, at = (float(r.max()), int(np.argmax(r))) if r.size else (0.0, None)
    ns = ~np.asarray(sensitive, dtype=bool)
    if ns.any():
        t_ns = int(np.asarray(frequency)[ns].min())
        if 1.0 / t_ns > cert:
            return 1.0 / t_ns, None, t_ns
    return cert, at, None


def plan_prbs(part: Partitioned, config: ReleaseConfig, certifier: Any = None) -> ReleasePlan:
    """Form the PRBs of ``part``, choose theta per PRB under the small-block policy, certify.

    The PRB step of every transition design (:mod:`sdc.method.designs`, whose
    :func:`~sdc.method.designs.plan_release` is the one planning call): ``certifier`` None
    certifies NZY's uniform design by its profile; a design's certifier (the near design's
    :class:`~sdc.method.destinations.NearCertifier`) certifies each block's own W, and the
    PRB table then has the ``neighbourhood_risk`` column.

    Raises
    ------
    SmallBlockError
        A PRB is too small under ``small_blocks: fail``, or cannot be certified after merging.
    """
    xi, theta, km = part.xi, part.theta, part.kmin
    cells, t, cell_ps, ps_codes = part.cells, part.cells.frequency, part.cell_partition_set, part.ps_codes
    pvars, gens, ps_labels, sensitive = (config.partition_variables, part.generalizations,
                                         part.partition_keys, part.sensitive)
    t_max = max(1, math.ceil(1.0 / xi) - 1)
    profiles = sensitive_profiles(part)

    def describe(b: Block) -> str:
        names = [ps_labels[m] for m in b.members]
        return "partition set " + names[0] if len(names) == 1 else "merged block [" + " + ".join(names) + "]"

    order = [pvars.index(v) for v in default_merge_order(config)]
    near = certifier
    try:
        bplan: BlockPlan = plan_blocks(ps_codes, profiles, xi=xi, theta=theta, kmin=km,
                                       theta_mode=config.risk.theta,
                                       policy=config.risk.small_blocks, merge_along=order,
                                       describe=describe, certifier=near)
    except SmallBlockError as e:
        if "missing: " not in str(e):
            raise
        raise SmallBlockError(
            f"{e}. Records with a missing key value form blocks of their own (missing never "
            "receives or loses records, so a blank stays a real blank); to let missing values "
            "move like any category set missing_moves: true for the key(s) in key_variables "
            "(the codebook then says a blank may stand for a real value)") from None

    cell_prb = np.where(sensitive, bplan.block_of_partition_set[cell_ps], -1)
    # local index of each sensitive cell inside its PRB (cells sorted by global index)
    sens_cells = np.flatnonzero(cell_prb >= 0)
    sens_cells = sens_cells[np.argsort(cell_prb[sens_cells], kind="stable")]
    prb_of_sens = cell_prb[sens_cells]
    starts = np.searchsorted(prb_of_sens, np.arange(len(bplan.blocks)))
    cell_local = np.full(cells.n_cells, -1, dtype=np.int64)
    cell_local[sens_cells] = np.arange(sens_cells.size) - starts[prb_of_sens]

    blocks_df = _blocks_frame(bplan, ps_labels, km, t_max, near=near is not None)
    cert, i, t_ns = certificate(blocks_df["max_risk"].to_numpy() if len(bplan.blocks) else [],
                                t, sensitive)
    cert_at: dict[str, Any] = {}
    if i is not None:
        cert_at = {"source": "prb", "prb": i, "partition_key": blocks_df["partition_key"].iat[i],
                   "t": int(blocks_df["max_risk_t"].iat[i]), "a": int(blocks_df["max_risk_a"].iat[i]),
                   "pick": str(blocks_df["max_risk_pick"].iat[i]),
                   "t_z": int(blocks_df["max_risk_t_z"].iat[i])}
    elif t_ns is not None:
        cert_at = {"source": "non_sensitive", "t": t_ns, "a": t_ns, "pick": "own", "t_z": t_ns}

    ps_frame = partition_sets_frame(ps_labels, pvars, gens, ps_codes, cell_ps, t, sensitive,
                                     bplan.block_of_partition_set)
    return ReleasePlan(part, bplan, cell_prb, sens_cells, starts, cell_local, blocks_df, ps_frame,
                       cert, cert_at)


def draw_plan(plan: ReleasePlan, config: ReleaseConfig) -> DrawPlan:
    """The plain arrays of ``plan`` every batch needs to draw (:class:`DrawPlan`; picklable,
    sent to Dask workers): NZY's theta per PRB, and when the plan has per-PRB transitions
    (near, weighted) their move probabilities, groups and near rows laid out over the cells
    (:meth:`ReleasePlan.cell_design`)."""
    cells = plan.partitioned.cells
    extra: dict[str, np.ndarray] = {}
    if plan.transitions is not None:
        d = plan.cell_design()
        extra = {"dest_indptr": d.indptr, "dest_cell": d.dest, "dest_weight": d.weight}
        if not getattr(plan.design, "nzy_moves", True):  # else m = theta_b / t_j, drawn
            extra.update(cell_move=d.move, cell_group=d.group)
    return DrawPlan(cell_prb=np.asarray(plan.cell_prb, dtype=np.int64),
                    cell_frequency=np.asarray(cells.frequency, dtype=np.int64),
                    cell_id=cell_identity(cells.key_codes, config),
                    prb_theta=np.array([b.theta for b in plan.block_plan.blocks],
                                       dtype=np.float64),
                    **extra)


def _blocks_frame(plan: BlockPlan, ps_labels: list[str], km: int, t_max: int, *,
                  near: bool = False) -> pd.DataFrame:
    """One row per PRB, built column by column (a household file's person stage has ~10^5
    PRBs); the profile text and the risk figures are computed once per distinct profile."""
    blocks = plan.blocks
    nb = len(blocks)
    cols = ["prb", "partition_key", "n_partition_sets", "k", "n_records", "profile",
            *[f"cells_t{tt}" for tt in range(1, t_max + 1)], "theta", "kmin", "max_risk",
            "max_risk_t", "max_risk_a", "max_risk_pick", "max_risk_t_z", "own_max_risk",
            "other_max_risk", "action", "expected_changed"]
    if near:
        cols.insert(cols.index("action"), "neighbourhood_risk")
    if nb == 0:
        return pd.DataFrame([], columns=cols)
    width = max(t_max + 1, max(b.profile.size for b in blocks))
    prof = np.zeros((nb, width), dtype=np.int64)
    for i, b in enumerate(blocks):
        prof[i, :b.profile.size] = b.profile
    texts: dict[bytes, str] = {}

    def text(p: np.ndarray) -> str:
        key = p.tobytes()
        if key not in texts:
            texts[key] = ", ".join(f"{t}:{int(m)}" for t, m in enumerate(p) if m > 0)
        return texts[key]

    k = prof.sum(axis=1)
    theta = np.array([float(b.theta) for b in blocks])
    data: dict[str, Any] = {
        "prb": np.arange(nb),
        "partition_key": [ps_labels[b.members[0]] if len(b.members) == 1
                          else " + ".join(ps_labels[m] for m in b.members) for b in blocks],
        "n_partition_sets": [len(b.members) for b in blocks],
        "k": k,
        "n_records": prof @ np.arange(width, dtype=np.int64),
        "profile": [text(p) for p in prof],
    }
    for tt in range(1, t_max + 1):
        data[f"cells_t{tt}"] = prof[:, tt]
    risks = [b.risk for b in blocks]
    data.update({
        "theta": theta,
        "kmin": np.full(nb, km, dtype=np.int64),
        "max_risk": [float(r.max_risk) for r in risks],
        "max_risk_t": [int(r.t) for r in risks],
        "max_risk_a": [int(r.a) for r in risks],
        "max_risk_pick": [str(r.z) for r in risks],
        "max_risk_t_z": [int(r.t_z) for r in risks],
        "own_max_risk": [float(r.own_max) for r in risks],
        "other_max_risk": [float(r.other_max) for r in risks],
        **({"neighbourhood_risk": [float(r.neighbourhood) for r in risks]} if near else {}),
        "action": [b.action for b in blocks],
        "expected_changed": theta * k,
    })
    return pd.DataFrame(data, columns=cols)

def partition_sets_frame(ps_labels, pvars, gens, ps_codes, cell_ps, t, sensitive,
                          block_of_ps) -> pd.DataFrame:
    n_ps = len(ps_labels)
    data: dict[str, Any] = {"partition_set": np.arange(n_ps), "partition_key": ps_labels}
    for i, (v, g) in enumerate(zip(pvars, gens, strict=True)):
        lab = np.empty(len(g.labels), dtype=object)
        for j, x in enumerate(g.labels):  # element by element: a label is never split
            lab[j] = x
        data[v] = lab[ps_codes[:, i]].tolist()
    data["n_records"] = np.bincount(cell_ps, weights=t, minlength=n_ps).astype(np.int64)
    data["n_cells"] = np.bincount(cell_ps, minlength=n_ps)
    data["n_sensitive_cells"] = np.bincount(cell_ps[sensitive], minlength=n_ps)
    data["n_sensitive_records"] = np.bincount(cell_ps[sensitive], weights=t[sensitive],
                                              minlength=n_ps).astype(np.int64)
    data["prb"] = block_of_ps
    return pd.DataFrame(data)


def partition_sets_with_prbs(part: Partitioned, planned: pd.DataFrame,
                             config: ReleaseConfig) -> pd.DataFrame:
    """The partition-set table of ``part`` with every set's PRB taken from ``planned``, the
    partition-set table of a plan on some of ``part``'s cells (matched by label; -1 where that
    plan has no such set or the set no PRB): the person stage of a household release planned
    without its left-out small classes."""
    prb_of_label = dict(zip(planned["partition_key"], planned["prb"], strict=True))
    block_of_ps = np.array([prb_of_label.get(k, -1) for k in part.partition_keys],
                           dtype=np.int64)
    return partition_sets_frame(part.partition_keys, config.partition_variables,
                                part.generalizations, part.ps_codes, part.cell_partition_set,
                                part.cells.frequency, part.sensitive, block_of_ps)
