"""Transition designs as registered strategies (:mod:`sdc.method.designs.registry`): the
built-in ones (:mod:`sdc.method.designs.builtin`) are registered here; the household designs
(the threat model of a household file: :mod:`sdc.method.designs.households`) beside them. Not to be confused with
:mod:`sdc.method.design`, the recoding-lattice search of ``sdc design``."""

from sdc.method.designs.builtin import NEAR, UNIFORM, WEIGHTED, WEIGHTED_NEAR, BuiltinDesign
from sdc.method.designs.households import (
    HouseholdDesign,
    get_household_design,
    household_design_names,
    household_design_of,
    register_household_design,
    release_household_design,
)
from sdc.method.designs.registry import (
    TransitionDesign,
    design_names,
    design_of,
    expected_cell_totals,
    fallback_rungs,
    get_design,
    plan_release,
    prb_transitions_of,
    register_design,
    release_design,
    rungs_of,
    with_rungs,
    with_transitions,
)

for _design in (UNIFORM, NEAR, WEIGHTED, WEIGHTED_NEAR):
    register_design(_design)

__all__ = ["BuiltinDesign", "HouseholdDesign", "TransitionDesign", "design_names", "design_of",
           "expected_cell_totals", "fallback_rungs", "get_design", "get_household_design",
           "household_design_names", "household_design_of", "plan_release",
           "prb_transitions_of", "register_design", "register_household_design",
           "release_design", "release_household_design", "rungs_of", "with_rungs",
           "with_transitions"]
