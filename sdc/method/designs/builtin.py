"""The four built-in transition designs (docs/METHOD.md 5, 7.11, 7.12): NZY's uniform design
(eq. 5.3), the near-cell W (``near``: :mod:`sdc.method.near`, :mod:`sdc.method.destinations`),
the weighted mode (``weighted``: :mod:`sdc.method.weighted`) and the weighted mode on the
near W (``weighted x near``), registered by :mod:`sdc.method.designs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.errors import CertificationError
from sdc.method.destinations import NearCertifier, near_record, prb_transitions
from sdc.method.partition import Partitioned
from sdc.method.plan import ReleasePlan, plan_prbs
from sdc.method.weighted import group_near_w, group_size, weighted_design

__all__ = ["BuiltinDesign", "NEAR", "UNIFORM", "WEIGHTED", "WEIGHTED_NEAR"]


@dataclass(frozen=True)
class BuiltinDesign:
    """A built-in design: NZY's PRBs and theta, the near W when ``near``, the weighted
    mode's m_j = c_g / W_j over weight groups when ``weighted``
    (:class:`~sdc.method.designs.TransitionDesign`)."""

    name: str
    title: str
    description: str
    near: bool = False
    weighted: bool = False
    codebook: tuple[str, ...] = ()
    #: (partition key, rung) of the partition sets whose PRB takes a lighter rung of
    #: ``near.weights``' ladder (``near.fallback_weights``): the dependence check flagged it
    #: (:func:`sdc.method.designs.with_rungs`; docs/METHOD.md 7.12 "Per-PRB weights")
    rungs: tuple[tuple[str, int], ...] = ()

    @property
    def needs_weights(self) -> bool:
        return self.weighted

    @property
    def doubly_stochastic(self) -> bool:
        return True   # uniform and near W, on the PRB or on every weight group

    @property
    def nzy_moves(self) -> bool:
        return not self.weighted

    @property
    def unbiased(self) -> str:
        return "weighted totals" if self.weighted else "counts"

    def plan(self, part: Partitioned, config: ReleaseConfig,
             weight_total: np.ndarray | None = None) -> ReleasePlan:
        certifier = NearCertifier(part, config, dict(self.rungs)) if self.near else None
        plan = plan_prbs(part, config, certifier)
        if certifier is not None:
            blocks = plan.block_plan.blocks
            plan = dataclasses.replace(plan, transitions=prb_transitions(certifier, blocks),
                                       near=near_record(config, certifier, blocks))
        if self.weighted:
            plan = _weigh(plan, np.asarray(weight_total, dtype=np.float64), config, self.near)
        return dataclasses.replace(plan, design=self)


def _weigh(plan: ReleasePlan, weight_total: np.ndarray, config: ReleaseConfig,
           near: bool) -> ReleasePlan:
    """``plan`` with the weighted design of its PRBs (``plan.weighted``; ``plan.transitions``
    its per-PRB :class:`~sdc.method.transition.Transition`) and the certificate recomputed for
    it: max over weight groups of their exact certificate and over non-sensitive cells of
    1/t_j. ``weight_total``: W_j of every cell (:class:`~sdc.method.weighted.WeightSums`)."""
    part = plan.partitioned
    t = part.cells.frequency
    blocks = plan.block_plan.blocks
    theta = np.array([b.theta for b in blocks], dtype=np.float64)
    fallback = None
    if near and plan.transitions is not None:
        fallback = [(tr, b.risk) for tr, b in zip(plan.transitions, blocks, strict=True)]
    design = weighted_design(plan.cell_prb, plan.prb_cells, plan.prb_start, t, weight_total,
                             theta, part.xi,
                             size=group_size(part.kmin),
                             near_w=group_near_w(part, config) if near else None,
                             prb_fallback=fallback)
    design = dataclasses.replace(design, weight_total=np.asarray(weight_total, np.float64))
    cert, at = 0.0, {}
    if design.n_groups:
        g = design.groups
        i = int(np.argmax(g["max_risk"].to_numpy()))
        b = int(g["prb"].iat[i])
        cert = float(g["max_risk"].iat[i])
        at = {"source": "prb", "prb": b, "group": i,
              "partition_key": plan.blocks["partition_key"].iat[b],
              "t": int(g["max_risk_t"].iat[i]), "a": int(g["max_risk_a"].iat[i]),
              "pick": str(g["max_risk_pick"].iat[i]), "t_z": int(g["max_risk_t_z"].iat[i])}
    sens = plan.cell_prb >= 0
    if (~sens).any():
        t_ns = int(t[~sens].min())
        if 1.0 / t_ns > cert:
            cert, at = 1.0 / t_ns, {"source": "non_sensitive", "t": t_ns, "a": t_ns,
                                    "pick": "own", "t_z": t_ns}
    if cert > part.xi:
        raise CertificationError(f"weighted design's max risk {cert} exceeds xi = {part.xi}")
    near_info = plan.near
    if near and near_info is not None:  # the W actually used: digests for ``sdc audit``
        near_info = {**near_info,
                     "weighted_w": "the kernel built on every weight group's cells (W "
                                   "block-diagonal over the groups), s lowered to s_g = min(s, "
                                   "(k_g - 1) // 2) but never below the spread floor; a group "
                                   "too small for the floor moves uniformly inside the group",
                     "weighted_w_sha256": [tr.digest() for tr in design.transitions]}
    return dataclasses.replace(plan, weighted=design, transitions=list(design.transitions),
                               certificate=cert, certificate_at=at, near=near_info)


#: the codebook's bullet of a near-cell W (under "Disclosure control")
_NEAR_CODEBOOK = (
    "- A changed record took the key values of a rare combination **near** its own "
    "(risk.destinations: near): few keys changed, ordered ones by small steps, drawn from "
    "a fixed design whose every combination receives on average as many records as it "
    "gives, so the expected counts stay as above (docs/METHOD.md 7.12).",)

UNIFORM = BuiltinDesign(
    "uniform", "uniform NZY",
    "a record of a rare key combination keeps its keys with probability 1 - θ/t, else moves "
    "to any other rare combination of its block, uniformly (Nayak, Zhang & You 2018); every "
    "count of the keys stays unbiased")
NEAR = BuiltinDesign(
    "near", "near-cell",
    "a record of a rare key combination moves with the NZY probability θ/t, to the "
    "combinations of its block nearest in the keys (a doubly stochastic destination design); "
    "counts stay unbiased and moved records jump less far", near=True, codebook=_NEAR_CODEBOOK)
WEIGHTED = BuiltinDesign(
    "weighted", "weighted",
    "each block's rare combinations are cut into groups of similar mean weight; a record "
    "moves with probability c/W (W its combination's weighted total) to another combination "
    "of its group, so every survey-weighted total of the keys stays unbiased (unweighted "
    "counts drift slightly)", weighted=True)
WEIGHTED_NEAR = BuiltinDesign(
    "weighted x near", "weighted near-cell",
    "as weighted, the destination inside the group nearest in the keys: weighted totals "
    "unbiased, moved records jump less far", near=True, weighted=True,
    codebook=_NEAR_CODEBOOK)
