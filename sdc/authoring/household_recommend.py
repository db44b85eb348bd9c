"""The recommendation among the household design's candidates (``sdc design`` of a household
file, :mod:`sdc.authoring.household_design`; docs/HOUSEHOLDS.md "Design")."""

from __future__ import annotations

from typing import Any

from sdc.authoring.member_bands import SHIFT_OK

__all__ = ["TARGET", "preference", "recommend"]

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
