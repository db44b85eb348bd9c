"""Household designs registered by name (docs/HOUSEHOLDS.md, docs/ARCHITECTURE.md): the threat
model of a household (grouped) file chosen once from the config and carried by the household
stage's plan, as :mod:`sdc.method.designs.registry` does for the transition designs.

A *household design* says which intruders a household release is held to and how: the
composition stage (``households x composition``: the household stage keyed on the household
keys x composition, so the composition intruder is certified exactly) or the two-stage release
(``households``: household keys once per household, person keys inside them; the composition
intruder measured, or certified for the groups of at most ``large_groups`` members), the
exposed-size rule (``refuse`` / ``drop``) and the member bands. :func:`household_design_of` is
the one function that reads those options of the config (``risk.composition``,
``risk.large_groups``, ``risk.exposed_sizes``, ``risk.member_bands``); the household stage's
result carries the design (``hs.design``, :class:`sdc.method.household_batches.
HouseholdStageResult`) and the release's households stage (``result.households.design``);
every step after planning (pipeline, reports, audit, release) reads it there
(``tests/architecture/test_design_choice.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPOSITION", "HOUSEHOLDS", "HouseholdDesign", "get_household_design",
           "household_design_names", "household_design_of", "register_household_design",
           "release_household_design"]

_PREFIX = ("household keys post-randomized once per household (every member carries its "
           "household's values), person keys inside them; ")


@dataclass(frozen=True)
class HouseholdDesign:
    """One household design (module docstring) with the config's options resolved.

    Attributes
    ----------
    name : str
        Its registered name (``households``, ``households x composition``).
    composition : str
        ``protect`` (the composition stage) or ``measure`` (the two-stage release).
    large_groups : int or None
        The two-stage release's threshold T: groups of more than T members are outside the
        composition intruder's threat model (0 under ``input.members: sampled``).
    exposed_sizes : str
        ``refuse`` or ``drop`` (docs/HOUSEHOLDS.md "Exposed sizes").
    member_bands : tuple of (key, cut points)
        The bands a moved member keeps (``protect`` only), in the config's order.
    members_sampled : bool
        ``input.members: sampled``: the composition intruder outside the threat model of
        every group, declared by the config.
    """

    name: str
    composition: str
    large_groups: int | None = None
    exposed_sizes: str = "refuse"
    member_bands: tuple[tuple[str, tuple[float, ...]], ...] = ()
    members_sampled: bool = False

    @property
    def protect(self) -> bool:
        """The composition stage (``risk.composition: protect``)."""
        return self.composition == "protect"

    @property
    def holds_exposed_sizes(self) -> bool:
        """The release is held to the exposed-size rule (:mod:`sdc.method.household_exposed`):
        ``protect`` or ``large_groups``, members not declared a sample of each group."""
        return (self.protect or self.large_groups is not None) and not self.members_sampled

    @property
    def size_cap(self) -> int | None:
        """The largest size the exposed-size rule holds (None: every size): ``large_groups``
        T of the two-stage release, None under ``protect``."""
        return None if self.protect else self.large_groups

    @property
    def bands(self) -> dict[str, list[float]]:
        """``member_bands`` as the config writes it ({key: cut points}; empty: none)."""
        return {k: list(cuts) for k, cuts in self.member_bands}

    @property
    def title(self) -> str:
        """Its name for the report (the overview's design name starts with it)."""
        return f"household {self.composition}"

    @property
    def description(self) -> str:
        """What it does in words, for the report (the overview's design description starts
        with it; the transition design's words follow)."""
        if self.protect:
            how = ("the household stage keyed on the household's composition, so the "
                   "composition intruder is certified exactly; ")
        elif self.members_sampled:
            how = ("members are a sample of each group (input.members: sampled): the "
                   "composition intruder outside the threat model, declared by the config; ")
        elif self.large_groups is not None:
            how = (f"large groups (more than {self.large_groups} members) outside "
                   "the composition intruder's threat model, the composition intruder of "
                   "the smaller ones certified exactly; ")
        else:
            how = "the composition intruder measured, not certified; "
        return _PREFIX + how

    @property
    def codebook(self) -> tuple[str, ...]:
        """Its bullets for the codebook and the audit record (what the bound covers)."""
        lines = ["household-level keys post-randomized once per household; person-level keys "
                 "per person among persons with the same household-level values"]
        if self.protect:
            lines.append("composition intruder (every member's keys known): certified exactly "
                         "by the composition stage")
        elif self.members_sampled:
            lines.append("composition intruder: outside the threat model (input.members: "
                         "sampled)")
        elif self.large_groups is not None:
            lines.append(f"composition intruder: certified exactly for groups of at most "
                         f"{self.large_groups} members")
        else:
            lines.append("composition intruder: measured, not certified")
        if self.holds_exposed_sizes:
            lines.append(f"exposed household sizes: {self.exposed_sizes}")
        lines += [f"{k} kept within its bands {list(c)}" for k, c in self.member_bands]
        return tuple(lines)


#: the two-stage release (composition measured, or certified up to ``large_groups``)
HOUSEHOLDS = HouseholdDesign("households", "measure")
#: the composition stage (``risk.composition: protect``)
COMPOSITION = HouseholdDesign("households x composition", "protect")

_REGISTRY: dict[str, HouseholdDesign] = {}


def register_household_design(design: HouseholdDesign) -> HouseholdDesign:
    """Register ``design`` under its name (a second registration of a name replaces it)."""
    _REGISTRY[design.name] = design
    return design


def get_household_design(name: str) -> HouseholdDesign:
    """The household design registered as ``name``; :class:`ConfigError` naming the known."""
    from sdc.config.model import ConfigError

    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown household design {name!r}; use one of "
                          f"{', '.join(_REGISTRY)}") from None


def household_design_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(_REGISTRY)


def household_design_of(config: Any) -> HouseholdDesign:
    """The household design ``config`` asks for, its options resolved: the one place that
    reads ``risk.composition``, ``risk.large_groups``, ``risk.exposed_sizes`` and
    ``risk.member_bands`` (everything after planning reads the carried design: ``hs.design``,
    ``result.households.design``). A config without a ``risk`` section: the two-stage
    design with no option set."""
    risk = getattr(config, "risk", None)
    composition = getattr(risk, "composition", "measure")
    base = get_household_design(COMPOSITION.name if composition == "protect"
                                else HOUSEHOLDS.name)
    t = getattr(risk, "large_groups", None)
    bands = getattr(risk, "member_bands", None) or {}
    return dataclasses.replace(
        base, large_groups=None if t is None else int(t),
        exposed_sizes=str(getattr(risk, "exposed_sizes", "refuse")),
        member_bands=tuple((str(k), tuple(float(c) for c in cuts)) for k, cuts in bands.items()),
        members_sampled=getattr(getattr(config, "input", None), "members", "all") == "sampled")


def release_household_design(config: Any, result: Any = None) -> HouseholdDesign:
    """The household design of a release's outcome (``result.households.design``); a result
    without one: the one its config picks (:func:`household_design_of`)."""
    design = getattr(getattr(result, "households", None), "design", None)
    return household_design_of(config) if design is None else design


for _design in (HOUSEHOLDS, COMPOSITION):
    register_household_design(_design)
