"""Pass 1 of a household file (docs/HOUSEHOLDS.md "Engines"): the one count pass
(:func:`sdc.pipeline.passes.count_pass`) with the household stage
(:class:`sdc.pipeline.household_stage.HouseholdFileStage`), its parts merged in input order
(:func:`count_households`: the person cells, the household table as an aggregate, the person
ids), and both stages planned on those aggregates (:func:`count_and_plan`). The release
(:mod:`sdc.pipeline.households`) and ``sdc audit`` (the public file counted as the source is)
both count through here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.cell_passes import cell_table
from sdc.method.cells import CellTable
from sdc.method.dependence import raise_if_dependent, schema_kinds
from sdc.method.derived import DerivedCollector
from sdc.method.household_batches import (
    HouseholdAggregate,
    HouseholdCounter,
    household_values,
    inconsistent_rows,
    person_stage,
)
from sdc.method.household_rungs import checked_household_stage
from sdc.method.household_size import SizeKeyError
from sdc.method.households import (
    check_households,
    household_config,
    person_config,
    person_derived,
)
from sdc.method.perturb import PerturbValues
from sdc.pipeline.count_parts import CountMerge
from sdc.pipeline.household_exposed import refuse_exposed
from sdc.pipeline.household_stage import HouseholdCountPart, HouseholdFileStage
from sdc.pipeline.kernels import raise_duplicate_ids
from sdc.pipeline.passes import Runner, count_pass, duplicated_ids, refuse_empty

__all__ = ["HouseholdCount", "HouseholdCountPart", "HouseholdCounted", "HouseholdMeasures",
           "count_and_plan", "count_households", "refuse_inconsistent", "stage_error"]


def stage_error(e: Exception, stage: str, config: ReleaseConfig) -> SmallBlockError:
    """A stage's :class:`SmallBlockError` with what it means and the ways out."""
    hk = config.household_keys
    if isinstance(e, SizeKeyError):  # names its own fix (issue 44)
        return SmallBlockError(f"{stage} stage (keys {hk}): {e}")
    if stage == "household":
        return SmallBlockError(
            f"household stage (one unit per household, keys {hk}, t_j counted in households): "
            f"{e}. A household cell that is rare among households needs other rare household "
            "cells to be post-randomized with: recode the rare household values into a larger "
            "category, or add a household-level key (e.g. household size) so that more "
            "household cells are sensitive, or use a larger xi")
    return SmallBlockError(
        f"person stage (person PRBs inside the values of the household keys {hk}, so that "
        f"members stay consistent): {e}. Coarsen the person keys' partition (wider bands), "
        "add person partition variables to merge along, or use fewer household-level keys")


@dataclass
class HouseholdMeasures:
    """What pass 1 measured beside the cells: the records, the batches' first global rows,
    the ``perturb:`` and ``derived:`` values, value ranges, largest weight, key dtypes."""

    n: int
    offsets: list[int]
    perturb_values: dict[str, PerturbValues]
    derived: DerivedCollector | None
    ranges: dict[str, tuple[float, float]]
    weight_max: float
    dtypes: dict[str, Any]


@dataclass
class HouseholdCount(HouseholdMeasures):
    """Pass 1 merged (before any refusal of the households or planning): the measures, the
    person cells' codes and counts (sorted) and the household counter."""

    codes: np.ndarray
    counts: np.ndarray
    households: HouseholdCounter


def count_households(runner: Runner, config: ReleaseConfig, measure: list[str], *,
                     validate: bool = True) -> HouseholdCount:
    """The count pass (:func:`sdc.pipeline.passes.count_pass` with the household stage),
    merged in input order. Raises :class:`InputError` with every problem of the whole file
    (``validate``), for duplicated ids or an empty file; memory: the cell table and the
    household table."""
    households = HouseholdCounter(config)
    dtypes: dict[str, Any] = {}
    merged = CountMerge({v: PerturbValues(v, config) for v in config.perturb},
                        DerivedCollector(person_derived(config)) if person_derived(config)
                        else None)

    def merge(part: HouseholdCountPart) -> None:
        households.merge(part.households)
        if not dtypes:
            dtypes.update(part.dtypes)

    # every problem of the whole file, as streaming validation words it
    count_pass(runner, HouseholdFileStage(config), merged, merge, measure, validate=validate,
               checked="in batches")
    refuse_empty(merged, config)
    found = duplicated_ids(runner, config, merged.idents)
    if found is not None and found is not True:
        raise_duplicate_ids(*found, config)
    merged.idents.clear()
    codes, counts = merged.counter.result()
    return HouseholdCount(merged.n, merged.offsets, merged.perturb, merged.derived,
                          merged.ranges(), merged.weight_max, dtypes, codes, counts, households)


def refuse_inconsistent(runner: Runner, config: ReleaseConfig, agg: HouseholdAggregate) -> None:
    """Raise :func:`~sdc.method.households.check_households`' refusal when the count found a
    household whose household-level values differ: the violating households' rows gathered
    in a filtered read (those households whole, no other), so the message is the in-memory
    check's, word for word."""
    if agg.inconsistent:
        rows = [f[inconsistent_rows(f, agg, config)] for f in runner.frames()]
        check_households(pd.concat(rows), config)


@dataclass
class HouseholdCounted(HouseholdMeasures):
    """Pass 1 merged and both stages planned (households checked, the household-level
    columns released, the person-level ``perturb:`` values counted and checked)."""

    agg: Any
    codes: np.ndarray
    cells: CellTable
    hs: Any
    ps: Any
    household_columns: pd.DataFrame | None
    dp_done: list


def count_and_plan(config: ReleaseConfig, seed: int, runner: Runner, measure: list[str],
                   say: Callable[[str], None]) -> HouseholdCounted:
    """Pass 1 (:func:`count_households`), the refusals in the in-memory executor's order, and
    the two stages planned on the aggregates."""
    say("counting cells and households (pass 1 of 3)")
    c = count_households(runner, config, measure)
    agg = c.households.result()
    refuse_inconsistent(runner, config, agg)
    agg.left_out = getattr(runner, "left_out", None)  # risk.exposed_sizes: drop
    refuse_exposed(agg.size, config)  # risk.exposed_sizes: refuse (none left after drop)
    for pv in c.perturb_values.values():  # as the in-memory executor: after the households
        pv.check()
    cells = cell_table(c.codes, c.counts, person_config(config))
    try:  # per-PRB weights of the composition stage where the dependence check needs them
        hs, figures = checked_household_stage(agg, config, seed,
                                              schema_kinds(runner.public_schema()))
    except SmallBlockError as e:
        raise stage_error(e, "household", config) from None
    raise_if_dependent(figures, hs.plan, household_config(config))
    hs.plan = dataclasses.replace(hs.plan, dependence=figures)
    household_columns, dp_done = household_values(agg, hs, config, seed)
    try:
        ps = person_stage(cells, config, c.households.person_weights(c.codes))
    except SmallBlockError as e:
        raise stage_error(e, "person", config) from None
    if not hs.design.protect and agg.missing is not None:
        from sdc.method.household_missing import mixed_person_prbs

        mixed = mixed_person_prbs(ps.plan, agg.missing, config)  # (issue 44)
        if mixed:
            raise InputError(mixed)
    measures = {f.name: getattr(c, f.name) for f in dataclasses.fields(HouseholdMeasures)}
    return HouseholdCounted(**measures, agg=agg, codes=c.codes, cells=cells, hs=hs, ps=ps,
                            household_columns=household_columns, dp_done=dp_done)
