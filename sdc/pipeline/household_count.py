"""Pass 1 of a household file (docs/HOUSEHOLDS.md "Engines"): the count pass as a per-batch
function any runner maps (:func:`count_batch`), its parts merged in input order
(:func:`count_households`: the person cells, the household table as an aggregate, the person
ids), and both stages planned on those aggregates (:func:`count_pass`). The release
(:mod:`sdc.pipeline.households`) and ``sdc audit`` (the public file counted as the source is)
both count through here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.cell_passes import cell_table
from sdc.method.cells import CellTable, cell_codes, radix_sizes, split_codes
from sdc.method.dependence import raise_if_dependent, schema_kinds
from sdc.method.derived import DerivedCollector
from sdc.method.household_batches import (
    HouseholdAggregate,
    HouseholdCounter,
    household_dependence,
    household_stage,
    household_values,
    inconsistent_rows,
    person_stage,
)
from sdc.method.household_size import SizeKeyError
from sdc.method.households import (
    check_households,
    household_config,
    person_config,
    person_derived,
    person_key_code,
)
from sdc.method.perturb import PerturbValues
from sdc.pipeline.count_parts import CountMerge, CountPart, raise_problems
from sdc.pipeline.kernels import (
    duplicate_identities,
    duplicate_ids_table,
    id_rows_with_identity,
    raise_duplicate_ids,
    repeated_ids,
)
from sdc.pipeline.release import Runner

__all__ = ["HouseholdCount", "HouseholdCountPart", "HouseholdCounted", "HouseholdMeasures",
           "count_batch", "count_households", "count_pass", "refuse_inconsistent", "stage_error"]


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
class HouseholdCountPart(CountPart):
    """One batch's part of the household count pass: the shared part
    (:class:`sdc.pipeline.count_parts.CountPart`), the household table's part and the
    household keys' dtypes."""

    households: HouseholdCounter | None = None
    dtypes: dict[str, Any] = field(default_factory=dict)


def count_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig,
                measure: list[str], validate: bool = True) -> HouseholdCountPart:
    """Pass 1 on one batch: its pandera problems (``validate``), or its person cells,
    household table part, value ranges of ``measure`` and largest weight; with an id column
    its identities."""
    part = HouseholdCountPart.start(frame, config, validate)
    if part.problems is not None:
        return part
    codes = cell_codes(frame, person_config(config))
    part.codes, part.counts = np.unique(codes, return_counts=True)
    for v in config.perturb:  # every person's value (global rows for the messages)
        part.perturb[v] = PerturbValues(v, config)
        part.perturb[v].add(frame, frame.index.to_numpy())
    if person_derived(config):
        key_codes = split_codes(codes, radix_sizes(person_config(config)))
        part.derived = DerivedCollector(person_derived(config))
        part.derived.add(frame, person_key_code(key_codes, config))
    part.households = HouseholdCounter(config)
    part.households.add(frame, codes)
    part.measure(frame, measure, config.input.weight)
    part.dtypes = {k: frame[k].dtype for k in config.household_keys}
    return part


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
    """:func:`count_batch` over every batch, merged in input order. Raises
    :class:`InputError` with every problem of the whole file (``validate``), for duplicated
    ids or an empty file; memory: the cell table and the household table."""
    id_col = config.input.id_column
    households = HouseholdCounter(config)
    dtypes: dict[str, Any] = {}
    merged = CountMerge({v: PerturbValues(v, config) for v in config.perturb},
                        DerivedCollector(person_derived(config)) if person_derived(config)
                        else None)
    offsets = [0]  # the batches' first global rows (the same batches in every pass)
    for part in runner.map(count_batch, (config, measure, validate)):
        if merged.add(part):
            households.merge(part.households)
            if not dtypes:
                dtypes.update(part.dtypes)
        offsets.append(merged.n)

    def duplicates() -> tuple[np.ndarray, pd.Series] | None:
        if id_col is None or not merged.idents:
            return None
        dups = duplicate_identities(merged.idents)
        if dups is None:
            return None
        hits = (id_rows_with_identity(frame, dups, config)
                for frame in runner.frames(columns=[id_col]))
        return repeated_ids(hits)

    if merged.problems.rows:  # every problem of the whole file, as streaming validation words it
        found = duplicates()
        if found is not None:
            merged.problems.add(duplicate_ids_table(*found, config), 0)
        raise_problems(merged.problems, config, "in batches")
    if merged.n == 0:
        raise InputError(f"input file {str(config.input_path)!r} has no records; nothing to "
                         "release")
    found = duplicates()
    if found is not None:
        raise_duplicate_ids(*found, config)
    merged.idents.clear()
    codes, counts = merged.counter.result()
    return HouseholdCount(merged.n, offsets, merged.perturb, merged.derived, merged.ranges(),
                          merged.weight_max, dtypes, codes, counts, households)


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


def count_pass(config: ReleaseConfig, seed: int, runner: Runner, measure: list[str],
               say: Callable[[str], None]) -> HouseholdCounted:
    """Pass 1 (:func:`count_households`), the refusals in the in-memory executor's order, and
    the two stages planned on the aggregates."""
    say("counting cells and households (pass 1 of 3)")
    c = count_households(runner, config, measure)
    agg = c.households.result()
    refuse_inconsistent(runner, config, agg)
    for pv in c.perturb_values.values():  # as the in-memory executor: after the households
        pv.check()
    cells = cell_table(c.codes, c.counts, person_config(config))
    try:
        hs = household_stage(agg, config, seed)
    except SmallBlockError as e:
        raise stage_error(e, "household", config) from None
    figures = household_dependence(agg, hs, config, schema_kinds(runner.public_schema()))
    raise_if_dependent(figures, hs.plan, household_config(config))
    hs.plan = dataclasses.replace(hs.plan, dependence=figures)
    household_columns, dp_done = household_values(agg, hs, config, seed)
    try:
        ps = person_stage(cells, config, c.households.person_weights(c.codes))
    except SmallBlockError as e:
        raise stage_error(e, "person", config) from None
    measures = {f.name: getattr(c, f.name) for f in dataclasses.fields(HouseholdMeasures)}
    return HouseholdCounted(**measures, agg=agg, codes=c.codes, cells=cells, hs=hs, ps=ps,
                            household_columns=household_columns, dp_done=dp_done)
