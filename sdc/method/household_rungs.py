"""Per-PRB weights of the composition stage (``risk.near.fallback_weights``; docs/METHOD.md
7.12 "Per-PRB weights", docs/HOUSEHOLDS.md "Near compositions").

With weighted matchings (``near.weights``, W = sum_i w_i Q_i) a heavier weight on the cheapest
matching lowers theta and the records a move changes, but a smaller theta also lets a released
household column tell the compositions of a small PRB apart (the dependence check of 7.5
measures its filter intruder with the PRB's theta). The ladder ``[weights, *fallback_weights]``
resolves this PRB by PRB: every PRB starts at rung 0 (``weights``); the household stage is
planned and the dependence check run on its PRBs; every partition set of a PRB the check flags
moves one rung down the ladder (lighter weights: a larger theta); planned and checked again,
until no flagged PRB has a rung left. What comes out is a function of the source's aggregate
and the config alone (no seed): ``sdc release``, ``sdc plan`` and ``sdc audit`` run this same
function on the count pass's aggregate, so the audit re-derives every PRB's rung and W.

Each PRB's W is still a convex combination of fixed-point-free permutations without a shared
pair (exactly doubly stochastic: counts unbiased), and the certificate is the exact one of
7.12 computed PRB by PRB for the W that PRB uses: the max over PRBs does not care that the
PRBs use different weights. The rungs are internal like theta: ``audit.json`` (owner only)
records them, the public files never do.
"""

from __future__ import annotations

from typing import Any

from sdc.config.model import ReleaseConfig
from sdc.method.designs import fallback_rungs, rungs_of
from sdc.method.household_batches import HouseholdAggregate, household_stage
from sdc.method.household_dependence import household_dependence

__all__ = ["checked_household_stage", "flagged_sets"]


def flagged_sets(figures: list, plan: Any) -> set[str]:
    """The partition keys of every PRB of ``plan`` where a flagged figure of the dependence
    check fails (``ColumnDependence.failing_prbs``)."""
    if plan is None:
        return set()
    keys = plan.partitioned.partition_keys
    blocks = plan.block_plan.blocks
    return {str(keys[m]) for f in figures if f.flagged
            for b in (f.failing_prbs or ((f.prb,) if f.prb >= 0 else ()))
            for m in blocks[b].members}


def checked_household_stage(agg: HouseholdAggregate, config: ReleaseConfig, seed: int,
                            kinds: dict[str, str] | None = None) -> tuple[Any, list]:
    """(the household stage, its dependence figures) of the aggregate: :func:`~sdc.method.
    household_batches.household_stage` and :func:`~sdc.method.household_dependence.
    household_dependence`, with the per-PRB weights of the module docstring when the
    composition stage's design has a weight ladder. The figures are those of the last plan
    (the caller refuses a flagged one: :func:`~sdc.method.dependence.raise_if_dependent`);
    ``hs.plan.design`` carries the rungs (:func:`~sdc.method.designs.rungs_of`)."""
    hs = household_stage(agg, config, seed)
    figures = household_dependence(agg, hs, config, kinds)
    if hs.composition is None or hs.plan is None:
        return hs, figures
    top = fallback_rungs(hs.config)
    rungs = rungs_of(hs.plan.design)
    while top:
        new = {k: rungs.get(k, 0) + 1 for k in flagged_sets(figures, hs.plan)
               if rungs.get(k, 0) < top}
        if not new:
            break
        rungs.update(new)
        hs = household_stage(agg, config, seed, rungs)
        figures = household_dependence(agg, hs, config, kinds)
    return hs, figures
