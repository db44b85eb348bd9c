"""The destination design of every PRB of a release under ``destinations: near``.

:class:`NearCertifier` gives :func:`sdc.method.blocks.plan_blocks` the exact certificate of a
block's near design (W built once per block from its cells, :mod:`sdc.method.near`; the
mechanism-aware and neighbourhood risks, :mod:`sdc.method.transition_risk`) and the calibrated
theta against it; :func:`prb_transitions` gives the plan every PRB's :class:`Transition`.
The same code runs in ``sdc release``, ``sdc plan`` and ``sdc audit`` (which re-derives W).
docs/METHOD.md section 7.12.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.blocks import Block
from sdc.method.content_memo import ContentMemo, design_key
from sdc.method.draws import cell_identity
from sdc.method.near import fragile_classes, key_metrics, near_transition
from sdc.method.partition import Partitioned
from sdc.method.risk import BlockRisk, calibrate_with
from sdc.method.transition import Transition
from sdc.method.transition_risk import design_risk, surely_above

__all__ = ["NearCertifier", "design_risk", "near_record", "prb_transitions"]


def _cells_by_partition_set(part: Partitioned) -> list[np.ndarray]:
    sens = np.flatnonzero(part.sensitive)
    ps = part.cell_partition_set[sens]
    order = np.argsort(ps, kind="stable")
    bounds = np.searchsorted(ps[order], np.arange(len(part.partition_keys) + 1))
    return [sens[order[bounds[s]:bounds[s + 1]]] for s in range(len(part.partition_keys))]


#: near certificates by the design's content, calibrated thetas by (W at theta 1, xi, upper)
#: (sdc.method.content_memo: a design search asks the same designs again and again)
_RISKS = ContentMemo()
_THETAS = ContentMemo()


def _memo_design_risk(tr: Transition) -> BlockRisk:
    """:func:`design_risk` of ``tr``, computed once per distinct design in the process."""
    return _RISKS.get(design_key(tr), lambda: design_risk(tr))


class NearCertifier:
    """Certificate of a block under the near design (the block's cells, not its profile).

    ``rungs``: partition key -> rung of ``near.weights``' ladder (:attr:`NearSpec.ladder`:
    0 ``weights``, i ``fallback_weights[i - 1]``) for the partition sets whose PRB the
    dependence check flagged (docs/METHOD.md 7.12 "Per-PRB weights"); a block takes the
    highest rung of its partition sets, every other block rung 0."""

    by_profile = False

    def __init__(self, part: Partitioned, config: ReleaseConfig,
                 rungs: Mapping[str, int] | None = None) -> None:
        self.part = part
        self.options = config.risk.near_options
        self.ladder = self.options.ladder
        self.rungs = {str(k): int(v) for k, v in (rungs or {}).items()}
        self.metrics = key_metrics(config)
        self.cell_id = cell_identity(part.cells.key_codes, config)
        self._by_ps = _cells_by_partition_set(part)
        self.fragile = (fragile_classes(part.cells.key_codes, part.cells.frequency,
                                        part.sensitive, self.metrics, part.xi)
                        if self.options.kernel == "matching" else None)
        self._designs: dict[tuple[int, ...], tuple[Transition, dict]] = {}
        self._risks: dict[tuple[tuple[int, ...], float], BlockRisk] = {}

    def key(self, b: Block) -> Any:
        return tuple(b.members)

    def rung(self, b: Block) -> int:
        """The rung of the weight ladder block ``b`` takes (0 without a flagged set)."""
        if not self.rungs:
            return 0
        keys = self.part.partition_keys
        return min(max((self.rungs.get(str(keys[m]), 0) for m in b.members), default=0),
                   max(len(self.ladder) - 1, 0))

    def cells(self, b: Block) -> np.ndarray:
        """The block's sensitive cells, ascending (the PRB's local order)."""
        return np.sort(np.concatenate([self._by_ps[m] for m in b.members]))

    def design(self, b: Block) -> tuple[Transition, dict]:
        """The block's W (at theta 1; :meth:`Transition.with_theta` sets the moves)."""
        key = tuple(b.members)
        if key not in self._designs:
            idx = self.cells(b)
            c = self.part.cells
            r = self.rung(b)
            options = (self.options if r == 0 else
                       self.options.model_copy(update={"weights": self.ladder[r]}))
            self._designs[key] = near_transition(c.key_codes[idx], self.cell_id[idx],
                                                 c.frequency[idx], 1.0, self.metrics,
                                                 options,
                                                 None if self.fragile is None
                                                 else self.fragile[idx])
        return self._designs[key]

    def transition(self, b: Block, theta: float) -> Transition:
        return self.design(b)[0].with_theta(theta)

    def risk(self, b: Block, theta: float) -> BlockRisk:
        key = (tuple(b.members), float(theta))
        if key not in self._risks:
            self._risks[key] = _memo_design_risk(self.transition(b, theta))
        return self._risks[key]

    def calibrate(self, b: Block, xi: float, upper: float = 1.0) -> float | None:
        """The smallest certified theta (:func:`calibrate_with`); the exact certificate is
        skipped where :func:`surely_above` already says no (same answer). Once per distinct
        design, xi and upper in the process (a function of W at theta 1 and those alone)."""
        if b.k < 2 or upper <= 0.0:
            return None

        def certified(th: float) -> bool:
            if surely_above(self.transition(b, th), xi):
                return False
            return self.risk(b, th).max_risk <= xi

        key = (design_key(self.design(b)[0]), float(xi), float(upper))
        return _THETAS.get(key, lambda: calibrate_with(certified, upper))


def prb_transitions(certifier: NearCertifier, blocks: list[Block]) -> list[Transition]:
    """Every PRB's transition at the theta it uses."""
    return [certifier.transition(b, b.theta) for b in blocks]


def near_record(config: ReleaseConfig, certifier: NearCertifier,
                blocks: list[Block]) -> dict[str, Any]:
    """What defines W, for ``audit.json`` (W itself is re-derived by ``sdc audit``, never
    written): the kernel, its parameters, the key metrics, and per PRB which W it got and the
    SHA-256 of W."""
    o = config.risk.near_options
    kernel = ("matching kernel W = (1/2s) sum_{i=1..2s} Q_i, Q_i the least-cost perfect "
              "matching of the PRB's cells with themselves using no diagonal pair and no pair "
              "of Q_1..Q_{i-1} (scipy linear_sum_assignment in the PRB's local cell order), "
              "the cost the records a move changes (composition stage: the household's size "
              "when a household key changes, else the members whose class changes; else the "
              "key distance); s as for the band kernel; a PRB with fewer than 2s + 1 cells "
              "gets the uniform W") if o.kernel == "matching" else None
    return {
        "kernel": kernel or "band kernel W = sum_{i=1..s} a_i (P^i + P^-i) / 2, P one step along the "
                  "tour of the PRB's cells in the order of the reflected (boustrophedon) path "
                  "of the key domain (ordered keys outermost, then hierarchy levels top first, "
                  "then nominal keys by their number of values, the most innermost; an inner "
                  "key runs descending where the outer codes sum to an odd number), s = "
                  "max(ceil(neighbours / 2), the spread floor from min_destinations and "
                  "max_weight), a_i proportional to exp(-(i - 1) / h) (h = bandwidth in tour "
                  "steps) flattened so that no entry exceeds max_weight: exactly doubly "
                  "stochastic with a zero diagonal, no balancing iterations; a PRB with fewer "
                  "than 2s + 1 cells gets the uniform W",
        "distance": {m.name: m.kind for m in certifier.metrics},
        "bandwidth": o.bandwidth, "neighbours": o.neighbours,
        "min_destinations": o.min_destinations, "max_weight": o.max_weight,
        **({"weights": [float(x) for x in o.weights],
            "weights_rule": "W = sum_i weights[i] Q_i (Q_1 the least-cost matching), "
                            "len(weights) destinations in place of 2s equal ones"}
           if o.weights is not None else {}),
        **({"fallback_weights": [[float(x) for x in f] for f in o.fallback_weights],
            "fallback_rule": "a PRB takes weights unless the dependence check (METHOD 7.5) "
                             "flags one of its partition sets; then the next vector of "
                             "fallback_weights, and so on (prbs[i].weights: the vector a PRB "
                             "took when not weights)"}
           if o.fallback_weights else {}),
        "prbs": [{"prb": i, "w": certifier.design(b)[1]["w"],
                  **({"weights": [float(x) for x in certifier.ladder[certifier.rung(b)]]}
                     if certifier.rung(b) > 0 else {}),
                  **({"why": certifier.design(b)[1]["why"]} if "why" in certifier.design(b)[1]
                     else {}),
                  "w_sha256": certifier.design(b)[0].digest()}
                 for i, b in enumerate(blocks)],
    }
