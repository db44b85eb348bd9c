"""Transition designs registered by name behind one protocol (docs/METHOD.md 7.11-7.12).

A *transition design* decides, inside every PRB, who moves and where to: a move probability
m_j per cell and a destination design W (:class:`~sdc.method.transition.Transition`). NZY's
eq. 5.3 (m_j = theta_b / t_j, uniform W) is one; the near-cell W (``near``), the weighted
mode's m_j = c_g / W_j (``weighted``) and their combination are the others. Each is one
:class:`TransitionDesign`: it plans (forms the PRBs, builds (m, W) per PRB, certifies
exactly), gives its transitions and expected totals, and describes itself (name and words for
the audit record, the codebook and the report).

Planning picks the design once: :func:`design_of` is the one function that reads the
config's choice of design (``risk.weighted``, ``risk.destinations``), and
:func:`plan_release` is the one planning call; the plan carries its design
(``plan.design``), which every step after planning reads. A new design is one
:func:`register_design` call (``tests/contract/test_designs.py`` runs every registered
design through the same checks), like an executor (:mod:`sdc.executors.registry`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import CertificationError
from sdc.method.partition import Partitioned
from sdc.method.plan import ReleasePlan
from sdc.method.transition import Transition, expected_totals, uniform_transition
from sdc.method.transition_risk import certify

__all__ = ["TransitionDesign", "design_names", "design_of", "expected_cell_totals",
           "fallback_rungs", "get_design", "plan_release", "rungs_of", "with_rungs",
           "prb_transitions_of", "register_design", "release_design", "with_transitions"]


@runtime_checkable
class TransitionDesign(Protocol):
    """One transition design (module docstring).

    Attributes
    ----------
    name : str
        Its registered name (``uniform``, ``near``, ``weighted``, ``weighted x near``).
    title, description : str
        Its name and what it does in words, for the report (risk.json's ``release.design``)
        and the reviewer's page.
    needs_weights : bool
        :meth:`plan` takes W_j, the survey weights' sum of every cell.
    doubly_stochastic : bool
        Every PRB's W (every weight group's) has unit row and column sums: claimed, and held
        to it by the contract suite.
    nzy_moves : bool
        m_j = theta_b / t_j (the draws compute it); False: the plan's transitions carry m_j.
    unbiased : str
        What is exact in expectation: ``counts`` or ``weighted totals``.
    near : bool
        W is the near-cell design (audit.json records what defines it and every PRB's
        digest; ``sdc audit`` re-derives it).
    weighted : bool
        The weighted mode's groups and move probabilities (``plan.weighted``).
    codebook : tuple of str
        The codebook's bullets on this design (under "Disclosure control"; may be empty).
    """

    name: str
    title: str
    description: str
    needs_weights: bool
    doubly_stochastic: bool
    nzy_moves: bool
    unbiased: str
    near: bool
    weighted: bool
    codebook: tuple[str, ...]

    def plan(self, part: Partitioned, config: ReleaseConfig,
             weight_total: np.ndarray | None = None) -> ReleasePlan:
        """The PRBs of ``part``, this design's (m, W) per PRB and the exact certificate
        (``plan.design`` is this design). Raises SmallBlockError / CertificationError."""
        ...


_REGISTRY: dict[str, TransitionDesign] = {}


def register_design(design: TransitionDesign) -> TransitionDesign:
    """Register ``design`` under its name (a second registration of a name replaces it)."""
    _REGISTRY[design.name] = design
    return design


def get_design(name: str) -> TransitionDesign:
    """The design registered as ``name``; :class:`ConfigError` naming the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown transition design {name!r}; use one of "
                          f"{', '.join(_REGISTRY)}") from None


def design_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(_REGISTRY)


def design_of(config: ReleaseConfig, *, weighted: bool | None = None) -> TransitionDesign:
    """The design ``config`` asks for: the one place that reads ``risk.weighted`` and
    ``risk.destinations`` (everything after planning reads ``plan.design``). ``weighted``
    False: the same design without the weighted mode (a stage whose weights are not
    balanced: the person stage under ``risk.composition: protect``)."""
    near = config.risk.destinations == "near"
    if config.risk.weighted if weighted is None else weighted:
        return get_design("weighted x near" if near else "weighted")
    return get_design("near" if near else "uniform")


def fallback_rungs(config: ReleaseConfig) -> int:
    """How many lighter weight vectors ``config``'s near design may fall back to in a PRB
    the dependence check flags (``risk.near.fallback_weights``; 0: none). The one reader of
    that option outside the near certifier."""
    if config.risk.destinations != "near" or config.risk.near is None:
        return 0
    return max(len(config.risk.near_options.ladder) - 1, 0)


def with_rungs(design: TransitionDesign, rungs: dict[str, int]) -> TransitionDesign:
    """``design`` whose PRBs holding the partition sets ``rungs`` names (partition key ->
    rung of the weight ladder) take that rung's weights (docs/METHOD.md 7.12 "Per-PRB
    weights"); ``design`` itself when ``rungs`` is empty. Only a near design has rungs."""
    if not rungs:
        return design
    if not getattr(design, "near", False) or not hasattr(design, "rungs"):
        raise ValueError(f"the {design.name} design has no per-PRB weights")
    return dataclasses.replace(design, rungs=tuple(sorted((str(k), int(v))  # type: ignore
                                                          for k, v in rungs.items())))


def rungs_of(design: TransitionDesign | None) -> dict[str, int]:
    """The partition sets whose PRBs take a lighter rung of the weight ladder (see
    :func:`with_rungs`), empty for every other design."""
    return dict(getattr(design, "rungs", ()) or ())


def plan_release(part: Partitioned, config: ReleaseConfig,
                 weight_total: np.ndarray | None = None, *,
                 design: TransitionDesign | None = None) -> ReleasePlan:
    """The one planning call: the PRBs of ``part`` under the config's design
    (:func:`design_of`, or ``design``), (m, W) per PRB and the exact certificate; the plan
    carries its design (``plan.design``). ``weight_total``: W_j of every cell, for a design
    that ``needs_weights``.

    Raises
    ------
    SmallBlockError, CertificationError
        As the design's planning does.
    """
    design = design_of(config) if design is None else design
    if design.needs_weights and weight_total is None:
        raise ValueError(f"the {design.name} design needs the cells' weight sums W_j "
                         "(the count pass did not sum the weights)")
    plan = design.plan(part, config, weight_total)
    return plan if plan.design is design else dataclasses.replace(plan, design=design)


def release_design(config: ReleaseConfig, result: Any = None) -> TransitionDesign:
    """The design of a release's outcome (``result.plan.design``); a household file's, whose
    person stage under ``composition: protect`` keeps its weights unbalanced, and a result
    without a plan: the one its config picks (:func:`design_of`)."""
    design = getattr(getattr(result, "plan", None), "design", None)
    if design is None or config.input.household_id is not None:
        design = design_of(config)
    return design


def prb_transitions_of(plan: ReleasePlan) -> list[Transition]:
    """(m, W) of every PRB of ``plan`` (cells in ``prb_cells`` order): the plan's own
    transitions, or NZY's uniform design at each PRB's theta (materialised on request only)."""
    if plan.transitions is not None:
        return list(plan.transitions)
    t = plan.partitioned.cells.frequency
    return [uniform_transition(t[plan.prb_cells[int(s):int(s) + b.k]], b.theta)
            for b, s in zip(plan.block_plan.blocks, plan.prb_start, strict=True)]


def with_transitions(plan: ReleasePlan, transitions: list[Transition],
                     design: TransitionDesign) -> ReleasePlan:
    """``plan`` (its PRBs) with ``transitions`` as every PRB's design, certified exactly
    (:func:`sdc.method.transition_risk.certify`): each PRB's ``max_risk`` and the certificate
    (max over PRBs and over non-sensitive cells of 1/t_j) recomputed. The building block of a
    design that brings its own (m, W). Raises :class:`CertificationError` above xi."""
    from sdc.method.plan import certificate

    risks = [certify(tr) for tr in transitions]
    blocks = plan.blocks.copy()
    if len(blocks):
        blocks["max_risk"] = [float(r.max_risk) for r in risks]
        blocks["expected_changed"] = [float((tr.frequency * tr.move).sum())
                                      for tr in transitions]
        blocks["theta"] = [float(tr.theta if tr.theta is not None else th)
                           for tr, th in zip(transitions, blocks["theta"], strict=True)]
    part = plan.partitioned
    cert, i, t_ns = certificate([r.max_risk for r in risks], part.cells.frequency,
                                part.sensitive if plan.cell_prb is None else plan.cell_prb >= 0)
    at: dict[str, Any] = {}
    if i is not None:
        r = risks[i]
        at = {"source": "prb", "prb": i, "partition_key": blocks["partition_key"].iat[i],
              "t": int(r.t), "a": int(r.a), "pick": str(r.z), "t_z": int(r.t_z)}
    elif t_ns is not None:
        at = {"source": "non_sensitive", "t": t_ns, "a": t_ns, "pick": "own", "t_z": t_ns}
    if cert > part.xi:
        raise CertificationError(f"the {design.name} design's max risk {cert} exceeds "
                                 f"xi = {part.xi}")
    return dataclasses.replace(plan, transitions=list(transitions), blocks=blocks,
                               certificate=cert, certificate_at=at, design=design)


def expected_cell_totals(plan: ReleasePlan, x: np.ndarray) -> np.ndarray:
    """E[X*_l] of every cell under the plan's design, for any per-cell total X carried by the
    records (t_j: counts; W_j: weighted totals). Exact, from the transition probabilities."""
    return expected_totals(x, plan.cell_design())
