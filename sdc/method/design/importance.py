"""Analytic importance of the key variables in ``sdc design`` (docs/DESIGN.md, "Analytic
importance"): each key's weight in the move distortion, the partitions that hold the
important keys and let the least important ones move, and the rule's preference, among
designs changing about as many records, for the smallest weighted move distortion.

A key's ``importance`` (``high`` = 4, ``normal`` = 1, ``low`` = 0.25, or a positive weight) is
read by the design only: the release, its certificate and its files ignore it. Weights are
divided by their mean, so a config declaring none (or all equal) gets weights of exactly 1:
its move distortion, partitions and recommendation are those of the unweighted design.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdc.config.model import ReleaseConfig

if TYPE_CHECKING:
    from sdc.method.design.candidates import Candidate

__all__ = ["CLOSE_ABS", "CLOSE_REL", "ENTROPY_SLACK", "IMPORTANT_VARIANTS", "MIN_GAIN", "declared",
           "important_partition", "prefer", "weights"]

#: the partition variants tried when importance is declared: ``important`` holds (as_is on
#: the released values) every key more important than the least, the least important keys
#: move freely; ``all but the least important`` holds every key but one of the least
#: important (the one with the most released values: it gives PRAM the most room)
IMPORTANT_VARIANTS = ("important", "all but the least important")
#: "close": a node's changed share within max(CLOSE_ABS, CLOSE_REL x the pick's) of the pick's
CLOSE_ABS, CLOSE_REL = 0.01, 0.10
#: ... and keeping at least the pick's share of the key table's entropy minus this
ENTROPY_SLACK = 0.01
#: a close node replaces the pick only when its weighted move distortion is at least this
#: much (relative) smaller: more records changed for a negligible gain is no trade
MIN_GAIN = 0.10


def weights(config: ReleaseConfig) -> dict[str, float]:
    """Each key's importance weight over the mean weight (all exactly 1.0 when none differs)."""
    raw = {k: config.input_key_variables[k].importance_weight for k in config.key_names}
    if len(set(raw.values())) <= 1:
        return dict.fromkeys(raw, 1.0)
    mean = sum(raw.values()) / len(raw)
    return {k: w / mean for k, w in raw.items()}


def declared(config: ReleaseConfig) -> bool:
    """Whether the keys' importances differ (else the design ignores them)."""
    return len(set(weights(config).values())) > 1


def important_partition(config: ReleaseConfig, cands: dict[str, list[Candidate]],
                        levels: tuple[int, ...], variant: str
                        ) -> tuple[dict[str, Any] | None, list[str] | None]:
    """The partition (YAML data) and ``risk.merge_along`` of an :data:`IMPORTANT_VARIANTS`
    variant of a node: the held keys ``as_is`` (partition sets of released values, so a moved
    record keeps them exactly unless its PRB is merged), small PRBs merged along the least
    important held key first. (None, None) when importance is not declared."""
    w = weights(config)
    if len(set(w.values())) <= 1:
        return None, None
    n_rel = {k: cands[k][lev].n_released for k, lev in zip(config.key_names, levels,
                                                            strict=True)}
    low = min(w.values())
    if variant == IMPORTANT_VARIANTS[0]:
        held = [k for k in config.key_names if w[k] > low]
    else:
        least = [k for k in config.key_names if w[k] == low]
        free = max(reversed(least), key=lambda k: n_rel[k])
        held = [k for k in config.key_names if k != free]
    if not held:
        return None, None
    merge = sorted(held, key=lambda k: (w[k], -n_rel[k], config.key_names.index(k)))
    return dict.fromkeys(held, "as_is"), merge


def prefer(nodes: list[Any], pool: list[int], best: int | None, *, target: float,
           warn: float) -> int | None:
    """The rule's preference under declared importance: among the nodes of ``pool`` whose
    changed share is close to the pick's (within max(CLOSE_ABS, CLOSE_REL x its share), on
    the same side of ``target`` and ``warn``) and that keep at least the pick's share of the
    key table's entropy less ENTROPY_SLACK, the smallest weighted move distortion (ties: the
    pick, then the fewest changed), when it is at least MIN_GAIN (relative) below the pick's.
    ``nodes``: :class:`sdc.method.design.rule.Node` (not imported: rule imports this
    module), whose ``displacement_sd`` is already weighted."""
    if best is None:
        return None
    b = nodes[best]
    share = b.changed_share
    tol = max(CLOSE_ABS, CLOSE_REL * share)

    def side(s: float) -> tuple[bool, bool]:
        return s <= target + 1e-12, s <= warn + 1e-12

    def dist(i: int) -> float:
        d = nodes[i].displacement_sd
        return d if d == d else 0.0

    close = [i for i in pool if abs(nodes[i].changed_share - share) <= tol + 1e-12
             and side(nodes[i].changed_share) == side(share)
             and nodes[i].entropy_kept >= b.entropy_kept - ENTROPY_SLACK - 1e-12]
    alt = min(close, key=lambda i: (round(dist(i), 9), i != best, nodes[i].changed, i),
              default=best)
    return alt if dist(alt) < (1.0 - MIN_GAIN) * dist(best) - 1e-12 else best
