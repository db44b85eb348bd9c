"""Exposed household sizes (docs/HOUSEHOLDS.md "Exposed sizes", docs/METHOD.md 7.16).

Every household release keeps the household pseudonym, so it shows each household's number of
members. A size held by fewer than 1/xi households of the file is **exposed**: the household
keys x size intruder who knows a target's size picks among those n households, risk >= 1/n >
xi, whatever the design. Under ``risk.composition: protect`` (where that intruder is in the
threat model) such a release is refused (``risk.exposed_sizes: refuse``, the default), or
the exposed households are **left out** of the public file (``risk.exposed_sizes: drop``):
all their members, before anything is counted, so every certificate, the weight's
recalibration targets and the audit see the released households only.

Left out, they do not make another size exposed: a size's household count is a count of
whole households of that size, and leaving out households of other sizes does not change it,
so one step is the fixed point (:func:`exposed_of`). Their weight goes to the others by the
recalibration (:func:`sdc.method.recalibrate.recalibrated_weights`: their household keys'
totals stay in the key margin; their size's total goes to the nearest released size).

Grouped files under ``input.members: sampled`` have no exposed size: the member count is the
sample size, known only to the group and the agency (docs/METHOD.md 7.15), outside the
threat model as the composition is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_DRAFTED_SHARE", "LeftOut", "applies", "exposed_households", "size_cap",
           "frame_without_exposed", "left_margins", "exposed_of", "exposed_refusal", "nearest_released_size"]


MAX_DRAFTED_SHARE = 0.05
"""``sdc init`` and ``sdc design`` draft ``risk.exposed_sizes: drop`` when the exposed
households hold at most this share of the persons (household surveys: eusilc 0.12%,
sdcMicro's testdata 0.26%); above it (a grouped file's unique group sizes: ses without the
declaration of sampled members, 68 of 500 enterprises) leaving them out is not a remedy to
write unasked, and the candidates are judged with those sizes, refused at the household keys
x size level."""


def applies(config: Any) -> bool:
    """Whether ``config``'s release is held to the exposed-size rule: a household file under
    ``risk.composition: protect`` or ``risk.large_groups`` whose members are not declared a
    sample of each group (under ``large_groups: T`` for the sizes up to T only:
    :func:`size_cap`)."""
    from sdc.method.designs.households import household_design_of

    return (getattr(config.input, "household_id", None) is not None
            and household_design_of(config).holds_exposed_sizes)


def size_cap(config: Any) -> int | None:
    """The largest size the rule holds (None: every size): under ``risk.large_groups: T``
    (not ``protect``) T, the groups of at most T members, whose intruder knows every member
    (the composition intruder, and so their number); the larger groups are outside that
    threat model by the data producer's declaration (docs/HOUSEHOLDS.md "Exposed sizes")."""
    from sdc.method.designs.households import household_design_of

    return household_design_of(config).size_cap


def exposed_of(size: np.ndarray, xi: float, cap: int | None = None) -> dict[int, int]:
    """{size: households} of the sizes (at most ``cap``, None: any) held by fewer than 1/xi
    of the households whose member counts are ``size`` (H,). Leaving those households out
    changes no other size's count: the rule's fixed point is reached in one step."""
    n = np.bincount(np.asarray(size, np.int64))
    return {int(s): int(c) for s, c in enumerate(n)
            if c > 0 and c * xi < 1.0 - 1e-12 and (cap is None or s <= cap)}


def exposed_households(frame: Any, config: Any) -> dict[str, Any] | None:
    """What ``risk.exposed_sizes: drop`` leaves out of a household file in memory
    (``frame``): ``{"sizes": {size: households}, "households", "persons", "share"}`` (share:
    of the persons), None when there is none or under ``input.members: sampled``."""
    hid = config.input.household_id
    if hid is None or getattr(config.input, "members", "all") == "sampled":
        return None
    counts = frame[hid].value_counts(sort=False)
    exposed = exposed_of(counts.to_numpy(np.int64), float(config.risk.xi), size_cap(config))
    if not exposed:
        return None
    persons = int(sum(s * n for s, n in exposed.items()))
    return {"sizes": exposed, "households": int(sum(exposed.values())), "persons": persons,
            "share": persons / max(len(frame), 1)}


def frame_without_exposed(frame: Any, config: Any, base: dict[str, Any]
                          ) -> tuple[Any, dict[str, Any]]:
    """A household file in memory (``frame``) without the households of its exposed sizes,
    and the config data ``base`` with ``risk.exposed_sizes: drop`` (both as given when there
    is none, when they hold more than :data:`MAX_DRAFTED_SHARE` of the persons, and under
    ``input.members: sampled``): what ``sdc design`` and ``sdc init`` plan their
    ``risk.composition: protect`` candidates on and write."""
    ex = exposed_households(frame, config)
    if ex is None or ex["share"] > MAX_DRAFTED_SHARE:
        return frame, base  # (more to leave out: not drafted; the release refuses, naming it)
    hid = config.input.household_id
    counts = frame[hid].value_counts(sort=False)
    left = counts.index[np.isin(counts.to_numpy(), list(ex["sizes"]))]
    risk = {**(base.get("risk") or {}), "exposed_sizes": "drop"}
    return frame[~frame[hid].isin(left)], {**copy.deepcopy(base), "risk": risk}


def left_margins(agg: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The left-out households' margins of a household table ``agg`` (``agg.left_out``),
    for :func:`sdc.method.recalibrate.recalibrated_weights`; None when nothing was left out."""
    left = getattr(agg, "left_out", None)
    return None if left is None else left.margins()


def nearest_released_size(left: np.ndarray, released: np.ndarray) -> np.ndarray:
    """The released size class each left-out household's size total goes to in the weight's
    size margin: the largest released size below it, else the smallest above (``released``:
    the sorted released size classes)."""
    left = np.asarray(left, np.int64)
    released = np.asarray(released, np.int64)
    below = np.searchsorted(released, left, side="left") - 1
    return np.where(below >= 0, released[np.maximum(below, 0)], released[0])


@dataclass
class LeftOut:
    """The households ``risk.exposed_sizes: drop`` leaves out: ``identity`` (L,) their draw
    identities (sorted), ``rows`` the global row numbers of their members (sorted),
    ``key_codes`` (L, p) their household keys' codes, ``size`` (L,) their members,
    ``weight`` (L,) their household weight (None: no weight), ``sizes`` {size: households},
    ``persons`` and the weighted persons left out and in the whole file."""

    identity: np.ndarray
    rows: np.ndarray
    key_codes: np.ndarray
    size: np.ndarray
    weight: np.ndarray | None
    sizes: dict[int, int]
    persons: int
    weighted: float | None = None
    weighted_total: float | None = None

    @property
    def households(self) -> int:
        return int(self.identity.size)

    def margins(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(household keys' codes, sizes, weights) for the weight's recalibration (None:
        no weight read)."""
        return None if self.weight is None else (self.key_codes, self.size, self.weight)

    def record(self, n_households: int, n_persons: int) -> dict[str, Any]:
        """risk.json's ``households.left_out`` (``n_households``, ``n_persons``: the whole
        file's)."""
        share = (None if not self.weighted_total else
                 round(float(self.weighted) / float(self.weighted_total), 6))
        return {"rule": "risk.exposed_sizes: drop: the households of every size held by "
                        "fewer than 1/xi households of the file are left out of the public "
                        "file (all their members); the weight is recalibrated to the whole "
                        "file's totals (docs/HOUSEHOLDS.md, \"Exposed sizes\")",
                "sizes": [{"size": s, "households": n} for s, n in sorted(self.sizes.items())],
                "households": self.households, "persons": int(self.persons),
                "of_households": int(n_households), "of_persons": int(n_persons),
                "weighted_share": share}

    def text(self, n_persons: int) -> str:
        """'2 households of size 9 (18 persons, 0.12% of 14,827; weighted 0.10%) left out'."""
        sizes = ", ".join(f"{n} of size {s}" for s, n in sorted(self.sizes.items()))
        w = (f"; weighted {100 * self.weighted / self.weighted_total:.2f}%"
             if self.weighted_total else "")
        return (f"{self.households:,} household{'s' if self.households != 1 else ''} "
                f"({sizes}; {self.persons:,} persons, "
                f"{100 * self.persons / max(n_persons, 1):.2f}% of {n_persons:,}{w}) left out "
                "of the public file: exposed sizes (fewer than 1/xi households), "
                "risk.exposed_sizes: drop")


def exposed_refusal(exposed: dict[int, int], xi: float, hid: str) -> str:
    """The refusal of a release with exposed sizes under ``risk.exposed_sizes: refuse``."""
    sizes = ", ".join(f"{s} ({n} household{'s' if n != 1 else ''})"
                      for s, n in sorted(exposed.items()))
    households = sum(exposed.values())
    return (f"column {hid!r} (input.household_id): household size {sizes} held by fewer than "
            f"1/xi = {1 / xi:.2f} households of the file ({households} household"
            f"{'s' if households != 1 else ''} in all): every release with household "
            "pseudonyms shows a household's number of members, so an intruder who knows the "
            "size picks among them (risk >= 1/households > xi) whatever the design. Fix: "
            "risk.exposed_sizes: drop (those households are left out of the public file, the "
            "weight recalibrated to the whole file's totals; docs/HOUSEHOLDS.md, \"Exposed "
            "sizes\"), a larger xi, or release without input.household_id (a person file); "
            "coarser keys do not help (the member count still shows)")
