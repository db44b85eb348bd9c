"""The recommendation among the household design's candidates (``sdc design`` of a household
file, :mod:`sdc.authoring.household_design`; docs/HOUSEHOLDS.md "Design")."""

from __future__ import annotations

import copy
from typing import Any

from sdc.authoring.member_bands import SHIFT_OK

__all__ = ["NEAR_WEIGHTS", "TARGET", "preference", "recommend", "weighted_near_data"]

TARGET = 0.15
"""Recommended: among the certified candidates changing at most this share of the records,
the most classes of the banded person keys (age), then one whose class shift (the person
columns' means by class of a banded key, in SE: :func:`sdc.authoring.member_bands.
class_shift`) is within SHIFT_OK, then the fewest records changed; when none changes so few,
the one changing the fewest."""


def recommend(cands: list[Any]) -> int | None:
    """Index of the recommended candidate (:data:`TARGET`), None when none is certified."""
    cert = [i for i, c in enumerate(cands) if c.status == "certified"]
    if any(cands[i].large_groups is not None for i in cert):
        # a grouped file: the cheaper certified release, the threat model of large groups or
        # the release without the group id (docs/HOUSEHOLDS.md "Large groups")
        return min(cert, key=lambda i: cands[i].share_changed)
    groups = [i for i in cert if not cands[i].without_group_id]
    within = [i for i in groups if cands[i].share_changed <= TARGET]
    if within:
        return min(within, key=lambda i: preference(cands[i]))
    # no household design changes so few: the fewest records, the group id given up when
    # that costs less (large groups: enterprises)
    return min(cert, key=lambda i: cands[i].share_changed) if cert else None


def preference(c: Any) -> tuple[int, bool, float]:
    """Order of preference among candidates within :data:`TARGET`: the most classes of the
    banded person keys (age), then a class shift of the person columns within
    :data:`~sdc.authoring.member_bands.SHIFT_OK` standard errors (incomes by age class as in
    the source), then the fewest records changed."""
    return (-_numeric_classes(c), not c.class_shift <= SHIFT_OK, c.share_changed)


def _numeric_classes(c: Any) -> int:
    """Released classes of the banded person keys (age classes): what the recommendation
    keeps first."""
    return sum(int(r["released_values"]) for r in c.recoding.values()
               if "bands" in (r.get("recode") or {}))


NEAR_WEIGHTS = (([0.44, 0.44, 0.12], [[0.39, 0.39, 0.22], [0.34, 0.33, 0.33]]),
                ([0.39, 0.39, 0.22], [[0.34, 0.33, 0.33]]))
"""(``near.weights``, ``near.fallback_weights``) tried on the preferred near candidates (METHOD
7.12): three matchings, more weight on the two cheapest. Fewer, unequal destinations let a cell
see one arrival more often than none, so theta falls as well as the records a move changes
(laeken's eusilc: 11.3% of records with equal weights, 10.1% at [0.39, 0.39, 0.22], 9.8% at
[0.44, 0.44, 0.12]). A concentrated W also lets a released household column tell compositions
apart in a small PRB (a smaller theta): the dependence check flags such a PRB, which then takes
the next, flatter vector of the ladder, PRB by PRB (per-PRB weights,
:mod:`sdc.method.household_rungs`; eusilc: its PRB of 7-member households, eqSS 0.405 > xi at
0.44, passes at 0.39: 1,450.0 records expected, 9.78%). The second ladder starts flatter: a
largest weight too large for a PRB's certificate leaves it no theta (eusilc: 0.45 and more; its
sets then draw their household keys and the candidate changes far more records). Each
candidate's rungs come from the dependence check on the candidate's count
(:func:`~sdc.authoring.member_bands.dependence_rungs`), and a certified one is released once in
memory before it is recommended (:func:`~sdc.authoring.member_bands.verify_banded`)."""


def weighted_near_data(cands: list[Any], near: dict[str, Any]) -> list[tuple[dict, Any]]:
    """(config data, recoding) of the near candidates the recommendation looks at first (the
    preferred one within :data:`TARGET`, the preferred one overall) with the matchings
    weighted (:data:`NEAR_WEIGHTS`: each a ladder), for the search to plan."""
    planned = [c for c in cands if c.status == "planned"
               and (c.data.get("risk") or {}).get("destinations") == "near"]
    picks = [min((c for c in planned if c.share_changed <= TARGET), key=preference,
                 default=None), min(planned, key=preference, default=None)]
    out: list[tuple[dict, Any]] = []
    for i, c in enumerate(picks):
        if c is None or any(c is p for p in picks[:i]):
            continue
        for w, fallback in NEAR_WEIGHTS:
            data = copy.deepcopy(c.data)
            data["risk"]["near"] = {**near, "weights": list(w)}
            if not data["risk"].get("weighted"):  # (the weight groups' W: one vector)
                data["risk"]["near"]["fallback_weights"] = [list(f) for f in fallback]
            out.append((data, c.recoding))
    return out
