"""Household files in record batches: the kernels a batch executor chains (count pass as a
mergeable :class:`HouseholdCounter`, :func:`household_stage` on the household aggregate,
:func:`person_stage` on the cell table, then per batch the persons' households, draw
identities, released key codes and the release's extended cell table), each equal to the pandas
engine's household release. docs/HOUSEHOLDS.md, "Engines".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.cell_passes import cell_table
from sdc.method.cells import CellTable, combine_codes, encode_key, radix_sizes
from sdc.method.dependence import (
    DependenceCounter,
    HouseholdMembers,
    PairPlan,
    checked_columns,
    key_sizes,
    measure_dependence,
    member_columns,
    pair_plan,
    small_limit,
)
from sdc.method.dependence.rebuild import HouseholdRelations
from sdc.method.designs import design_of, household_design_of, plan_release
from sdc.method.draws import (
    draw_tiebreak,
    record_identity,
    unique_identities,
    value_hash,
)
from sdc.method.household_dependence import (
    household_dependence,
    household_pairs,
    recalibrated_weight,
)
from sdc.method.household_persons import (
    PersonStagePlan,
    drawing_persons,
    person_draw_identities,
    person_draw_plan,
    person_stage,
    sub_cell,
)
from sdc.method.household_size import refuse_moved_size_keys, size_key_small_block, size_keys
from sdc.method.household_weights import (
    HouseholdWeights,
    household_weight_totals,
)
from sdc.method.households import (
    extended_partition_sets,
    household_config,
    person_config,
    row_index,
    weight_per_household,
)
from sdc.method.partition import partition_cells
from sdc.method.plan import ReleasePlan, draw_plan, partition_sets_with_prbs
from sdc.method.postrandomize import released_cells

__all__ = ["HouseholdAggregate", "HouseholdCounter", "HouseholdStageResult", "PersonStagePlan",
           "drawing_persons", "household_identity", "household_stage", "lookup_households",
           "person_draw_identities", "person_draw_plan",
           "extended_cells", "household_blocks", "household_dependence",
           "household_partition_sets", "inconsistent_rows", "person_dependence",
           "person_dependence_counter", "person_stage", "released_person_codes",
           "add_person_dependence", "household_pair_plans", "household_values"]

_MAX = np.iinfo(np.uint64).max


def household_identity(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray:
    """(n,) uint64: the draw identity of every person's household (the household stage's
    record identity of its id, :func:`sdc.method.draws.record_identity` under
    :func:`~sdc.method.households.household_config`)."""
    hcfg = household_config(config)
    return record_identity(frame[[config.input.household_id]], hcfg)


@dataclass
class HouseholdAggregate:
    """The merged count-pass partial: households sorted by identity.

    ``identity`` (H,) uint64; ``key_codes`` (H, p) int64 codes of the household-level keys
    (config order); ``size`` (H,) persons per household; ``inconsistent`` column -> the
    identities of the households in which the column takes more than one value;
    ``columns``: the ``input.household_columns`` the file has, one value per household (a
    member's, in the input's dtype: the household-level dependence check measures them)."""

    identity: np.ndarray
    key_codes: np.ndarray
    size: np.ndarray
    inconsistent: dict[str, np.ndarray]
    columns: pd.DataFrame | None = None
    #: ``risk.composition: protect``: (H, P) members per person class
    #: (:func:`sdc.method.household_composition.person_classes`), else None
    classes: np.ndarray | None = None
    #: the person columns of one member per household (:mod:`sdc.method.dependence.members`)
    members: pd.DataFrame | None = None
    #: ``risk.weighted``: (H,) x_h, the sum of the members' person weights (exact sums,
    #: :mod:`sdc.method.household_weights`); else None
    weight: np.ndarray | None = None
    #: ``risk.composition: protect``: the person classes' missingness groups
    #: (:class:`sdc.method.household_missing.MissingGroups`); else the persons per (class,
    #: missingness pattern) (:class:`~sdc.method.household_missing.ClassPatterns`)
    missing: Any = None
    #: ``risk.exposed_sizes: drop``: the households left out before counting
    #: (:class:`sdc.method.household_exposed.LeftOut`), else None
    left_out: Any = None
    #: the columns not released as they are and what may rebuild them, one row per household
    #: (:class:`sdc.method.dependence.rebuild.HouseholdRelations`), None without such columns
    relations: pd.DataFrame | None = None

    @property
    def n_households(self) -> int:
        return int(self.identity.size)


class HouseholdCounter:
    """Count-pass partial of a household file (see the module docstring): ``add(frame)`` per
    batch, ``merge(other)`` for partials counted elsewhere, :meth:`result` at the end."""

    def __init__(self, config: ReleaseConfig, merge_every: int = 8) -> None:
        if config.input.household_id is None:
            raise ValueError("not a household file: input.household_id is not set")
        self.config = config
        self.design = household_design_of(config)
        self.keys = list(config.household_keys)
        self.columns = self.keys + list(config.input.household_columns)
        self.columns += [w for w in [weight_per_household(config)] if w and w not in self.columns]
        self.merge_every = merge_every
        self._parts: list[tuple[np.ndarray, ...]] = []
        self.members = HouseholdMembers(merge_every=merge_every)
        self.relations = HouseholdRelations(merge_every=merge_every)
        self.weights = HouseholdWeights() if design_of(config).weighted else None
        from sdc.method.household_missing import ClassPatterns

        self.patterns = ClassPatterns()  # missingness patterns per person class
        self.n_classes = 0

    def add(self, frame: pd.DataFrame, cell_code: np.ndarray | None = None) -> None:
        """Add one batch of persons (any rows, any order; a household may span batches);
        ``cell_code``: their person cell codes (the weighted mode sums W_j per code)."""
        if len(frame) == 0:
            return
        hid = self.config.input.household_id
        if frame[hid].isna().any():
            raise InputError(f"column {hid!r} (input.household_id): some rows have no "
                             "household id; every person needs a household")
        ident = household_identity(frame, self.config)
        kvs = self.config.key_variables
        codes = (np.column_stack([encode_key(frame[k], k, kvs[k]) for k in self.keys])
                 .astype(np.int64) if self.keys else np.zeros((len(frame), 0), np.int64))
        hashes = (np.column_stack([value_hash(frame[c]) for c in self.columns])
                  if self.columns else np.zeros((len(frame), 0), np.uint64))
        cols = [c for c in self.config.input.household_columns if c in frame.columns]
        w = self.config.input.weight
        if self.config.input.weight_release == "recalibrated" and w not in cols:
            cols.append(w)  # its value per household: recalibrated in household_values
        if self.design.protect:
            from sdc.method.household_composition import person_classes

            pc, n_cls = person_classes(frame, self.config)
            classes = np.zeros((len(frame), n_cls), dtype=np.int64)
            classes[np.arange(len(frame)), pc] = 1
            self.n_classes = n_cls
            self.patterns.add(frame, pc, self.config)
        else:
            from sdc.method.household_missing import person_classes_of

            classes = np.zeros((len(frame), 0), dtype=np.int64)
            pk = self.config.person_keys
            if pk:
                self.patterns.add(frame, person_classes_of(np.column_stack(
                    [encode_key(frame[k], k, kvs[k]) for k in pk]), self.config), self.config)
        self.members.add(frame, ident, self.config)
        self.relations.add(frame, ident, self.config)
        self._parts.append(_reduce(ident, codes, hashes, hashes,
                                   np.ones(len(frame), dtype=np.int64), classes,
                                   frame[cols].reset_index(drop=True)))
        if self.weights is not None:
            self.weights.add(ident, cell_code,
                             frame[self.config.input.weight].to_numpy(np.float64))
        if len(self._parts) >= self.merge_every:
            self._merge()

    def person_weights(self, codes: np.ndarray) -> np.ndarray | None:
        """``risk.weighted``: W_j of the person cells ``codes`` (sorted), else None."""
        return None if self.weights is None else self.weights.cell_totals(codes)

    def merge(self, other: HouseholdCounter) -> None:
        """Add another counter's households (a Dask piece's partial)."""
        self._parts.extend(other._parts)
        self.members.merge(other.members)
        self.relations.merge(other.relations)
        if self.weights is not None and other.weights is not None:
            self.weights.merge(other.weights)
        if other.patterns is not None:
            self.patterns.merge(other.patterns)
            self.n_classes = max(self.n_classes, other.n_classes)
        self._merge()

    def _merge(self) -> None:
        if len(self._parts) > 1:
            parts = list(zip(*self._parts, strict=True))
            self._parts = [_reduce(*(np.concatenate(x) for x in parts[:-1]),
                                   pd.concat(parts[-1], ignore_index=True))]

    def result(self) -> HouseholdAggregate:
        self._merge()
        p = len(self.keys)
        if not self._parts:
            z = np.zeros(0, np.uint64)
            return HouseholdAggregate(z, np.zeros((0, p), np.int64), np.zeros(0, np.int64), {})
        ident, codes, lo, hi, size, classes, values = self._parts[0]
        bad = lo != hi
        inconsistent = {c: ident[bad[:, j]] for j, c in enumerate(self.columns) if bad[:, j].any()}
        missing = self.patterns  # the two-stage release's check reads the table
        if classes.shape[1]:
            from sdc.method.household_missing import missing_groups

            missing = missing_groups(*self.patterns.table(), classes.shape[1],
                                     list(self.patterns.columns or []))
        return HouseholdAggregate(ident, codes, size, inconsistent, values,
                                  classes if classes.shape[1] else None,
                                  self.members.values(ident),
                                  None if self.weights is None
                                  else self.weights.household_totals(ident), missing,
                                  relations=self.relations.table(ident))


def _reduce(ident: np.ndarray, codes: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            size: np.ndarray, classes: np.ndarray, values: pd.DataFrame) -> tuple[Any, ...]:
    """One row per distinct identity (sorted): the key codes and household-column values of
    its first row (equal in every row of a consistent household; an inconsistent one is
    refused), min / max hash, size."""
    u, first, inv = np.unique(ident, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    n = u.size
    lo_u = np.full((n, lo.shape[1]), _MAX, dtype=np.uint64)
    hi_u = np.zeros((n, hi.shape[1]), dtype=np.uint64)
    for j in range(lo.shape[1]):
        np.minimum.at(lo_u[:, j], inv, lo[:, j])
        np.maximum.at(hi_u[:, j], inv, hi[:, j])
    cls_u = np.zeros((n, classes.shape[1]), dtype=np.int64)
    np.add.at(cls_u, inv, classes)
    return (u, codes[first], lo_u, hi_u,
            np.bincount(inv, weights=size, minlength=n).astype(np.int64), cls_u,
            values.iloc[first].reset_index(drop=True))


@dataclass
class HouseholdStageResult:
    """The household stage on the aggregate: the plan (cells counted in households), every
    household's true and released cell (rows of ``agg``) and the released household-key
    codes."""

    plan: ReleasePlan
    cell: np.ndarray
    released_cell: np.ndarray
    released_codes: np.ndarray
    #: the distinct draw identities of the drawing households (a PRB cell), in row order
    identity: np.ndarray | None = None
    #: ``risk.composition: protect``: the composition stage
    #: (:class:`sdc.method.household_composition.CompositionStage`) and table; ``plan`` is
    #: then its plan, ``cell`` / ``released_cell`` index its cells (-1: singular households)
    composition: Any = None
    composition_table: Any = None
    #: its (composition plan, draw plan): the report's replays of the stage reuse them
    composition_planned: Any = None
    #: the household design (:class:`sdc.method.designs.HouseholdDesign`) chosen once from
    #: the config (:func:`~sdc.method.designs.household_design_of`): every step after
    #: planning reads it here
    design: Any = None

    @property
    def changed(self) -> np.ndarray:
        if self.composition is not None:
            return self.composition.changed
        return self.released_cell != self.cell

    @property
    def config(self) -> Any:
        """The household stage's config, None for :func:`household_config`'s own."""
        return None if self.composition is None else self.composition.config


def household_stage(agg: HouseholdAggregate, config: ReleaseConfig, seed: int,
                    rungs: dict[str, int] | None = None) -> HouseholdStageResult:
    """NZY on the household table held as an aggregate: cells of the household-level keys
    (t_j = households), :func:`~sdc.method.partition.partition_cells` and
    :func:`~sdc.method.designs.plan_release` under
    :func:`~sdc.method.households.household_config`, then every household's released cell
    drawn with its identity (made distinct among the drawing households as the pandas engine
    does). Raises :class:`~sdc.errors.SmallBlockError` as the pandas engine's household
    stage (without its message prefix). ``rungs``: the composition stage's per-PRB weights
    (:func:`sdc.method.household_rungs.checked_household_stage`)."""
    design = household_design_of(config)
    if design.protect:
        return dataclasses.replace(_composition_stage(agg, config, seed, rungs), design=design)
    hcfg = household_config(config)
    code = combine_codes(agg.key_codes.T, radix_sizes(hcfg), agg.n_households)
    u, cell, t = np.unique(code, return_inverse=True, return_counts=True)
    cell = cell.reshape(-1).astype(np.int64)
    cells = cell_table(u, t.astype(np.int64), hcfg)
    # weighted designs: balanced on x_h, persons-weighted household-key cells exact
    x_h = (None if agg.weight is None
           else household_weight_totals(agg.weight, cell, cells.n_cells))
    found = size_keys(agg.key_codes, agg.size, hcfg.key_names, hcfg)  # (issue 44)
    try:
        plan = plan_release(partition_cells(cells, hcfg), hcfg, x_h)
    except SmallBlockError as e:
        raise size_key_small_block(e, agg.key_codes, hcfg.key_names, found) from None
    refuse_moved_size_keys(plan, cells.frequency, hcfg.key_names, found)
    dplan = draw_plan(plan, hcfg)
    released = cell.copy()
    rows = np.flatnonzero(dplan.cell_prb[cell] >= 0)
    ident = np.zeros(0, dtype=np.uint64)
    if rows.size:
        ident = unique_identities(agg.identity[rows],
                                  draw_tiebreak(dplan.cell_id[cell[rows]], True))
        released[rows] = released_cells(dplan, cell[rows], ident, seed)
    return HouseholdStageResult(plan, cell, released, cells.key_codes[released], ident,
                                design=design)


def _composition_stage(agg: HouseholdAggregate, config: ReleaseConfig,
                       seed: int, rungs: dict[str, int] | None = None) -> HouseholdStageResult:
    """The household stage of ``risk.composition: protect`` on the aggregate
    (:func:`sdc.method.household_composition.composition_stage`)."""
    from sdc.method.household_composition import (
        composition_stage,
        plan_composition_stage,
        table_of_counts,
    )
    from sdc.method.household_missing import constrain

    table = constrain(table_of_counts(agg.classes), agg.missing, config, agg.key_codes)
    planned = plan_composition_stage(agg.key_codes, table, config, agg.weight, rungs)
    cs = composition_stage(agg.identity, agg.key_codes, table, config, seed, agg.weight,
                           planned=planned)
    cell = np.full(agg.n_households, -1, dtype=np.int64)
    released = cell.copy()
    if cs.plan is not None:
        pc = cs.plan.partitioned.cells
        sizes = [int(x) for x in radix_sizes(cs.config)]
        # (a mask, not np.setdiff1d: numpy 2.4's unique of the arange is ~1 us a household)
        keep = np.ones(agg.n_households, dtype=bool)
        keep[np.asarray(cs.singular, dtype=np.int64)] = False
        rows = np.flatnonzero(keep)
        cell[rows] = row_index(pc.key_codes, cs.key_codes[rows], sizes)
        released[rows] = row_index(pc.key_codes, cs.released_codes[rows], sizes)
    return HouseholdStageResult(cs.plan, cell, released, cs.released_codes[:, :-1],
                                cs.identity, cs, table, planned)


def lookup_households(identity: np.ndarray, person_identity: np.ndarray) -> np.ndarray:
    """Row in ``identity`` (sorted household identities) of every person's household:
    a binary search per person. Raises :class:`~sdc.errors.InputError` for a household that
    was not counted (the file changed between the passes)."""
    identity = np.asarray(identity, dtype=np.uint64)
    person_identity = np.asarray(person_identity, dtype=np.uint64)
    pos = np.searchsorted(identity, person_identity)
    pos = np.minimum(pos, max(identity.size - 1, 0))
    if identity.size == 0 or not np.array_equal(identity[pos], person_identity):
        raise InputError("the input changed between the counting pass and the release pass "
                         "(a person's household was not counted); rerun the release")
    return pos.astype(np.int64)


def released_person_codes(cell: np.ndarray, household_row: np.ndarray, identity: np.ndarray,
                          cells: CellTable, ps: PersonStagePlan, hs: HouseholdStageResult,
                          config: ReleaseConfig, seed: int, rows: np.ndarray | None = None,
                          realized: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(m, p) released key codes (config key order) of a batch of persons: ``cell`` their
    cells in the full cell table ``cells``, ``household_row`` their households' rows in the
    aggregate (:func:`lookup_households`), ``identity`` the distinct identities of the batch's
    drawing persons in row order (:func:`person_draw_identities`). A person draws in its
    person PRB (:func:`~sdc.method.postrandomize.released_cells`), then takes its household's released
    household-key codes. Under ``risk.composition: protect``, ``rows`` (the persons' global
    rows) and ``realized`` (sorted global rows of the persons of households whose composition
    changed, their released person class) give those persons their released person keys."""
    pcfg = person_config(config)
    dplan = draw_plan(ps.plan, pcfg)
    sub = sub_cell(ps, cell, cells.n_cells)
    out = cells.key_codes[np.asarray(cell, dtype=np.int64)].copy()
    drawing = np.flatnonzero((sub >= 0) & (dplan.cell_prb[np.maximum(sub, 0)] >= 0))
    if drawing.size:
        rel = released_cells(dplan, sub[drawing], identity, seed)
        out[drawing] = ps.plan.partitioned.cells.key_codes[rel]
    hk_idx = [config.key_names.index(k) for k in config.household_keys]
    out[:, hk_idx] = hs.released_codes[np.asarray(household_row, dtype=np.int64)]
    if realized is not None and realized[0].size and rows is not None:
        from sdc.method.household_composition import class_codes

        rows = np.asarray(rows, dtype=np.int64)
        pos = np.minimum(np.searchsorted(realized[0], rows), realized[0].size - 1)
        hit = np.flatnonzero(realized[0][pos] == rows)
        pk_idx = [config.key_names.index(k) for k in config.person_keys]
        out[np.ix_(hit, pk_idx)] = class_codes(realized[1][pos[hit]], config)
    return out


def extended_cells(cells: CellTable, released_codes: list[np.ndarray]) -> tuple[CellTable,
                                                                              np.ndarray]:
    """The cell table of a household release (as the household pipeline (:mod:`sdc.pipeline.households`)
    builds it): the original cells plus the released key combinations that are empty in the
    original (a person of a changed household takes its household's released keys), frequency
    0 for those, lexicographic order. ``released_codes``: per batch, the (m, p) released codes
    of the persons whose household changed (few). Returns (table without records, the row of
    every original cell in it)."""
    extra = [np.asarray(c, dtype=np.int64).reshape(-1, cells.key_codes.shape[1])
             for c in released_codes]
    table = np.unique(np.vstack([cells.key_codes, *extra]), axis=0)
    if table.shape[0] == cells.n_cells:
        orig = np.arange(cells.n_cells, dtype=np.int64)
    else:
        sizes = [int(x) + 1 for x in table.max(axis=0)] if table.size else []
        orig = row_index(table, cells.key_codes, sizes)
    freq = np.zeros(table.shape[0], dtype=np.int64)
    freq[orig] = cells.frequency
    return CellTable(np.zeros(0, dtype=np.int64), table, freq, list(cells.names)), orig


def household_pair_plans(names: list[str], kinds: dict[str, str],
                         config: ReleaseConfig) -> dict[str, PairPlan]:
    """The pairs each stage of a household file checks, from the public schema's column
    ``names`` and ``kinds`` (the release's warning names the columns left unpaired):
    ``{"person": ..., "household": ...}``."""
    hcfg = household_config(config)
    present = set(names)
    table = [c for c in config.input.household_columns if c in present]
    hcols = [c for c in checked_columns(table + member_columns(names, config), hcfg)
             if c != recalibrated_weight(config)]
    return {"person": person_dependence_counter({c: kinds.get(c) for c in names},
                                                config).pairs,
            "household": household_pairs(hcols, kinds, config)}


def inconsistent_rows(frame: pd.DataFrame, agg: HouseholdAggregate,
                      config: ReleaseConfig) -> np.ndarray:
    """(n,) bool: the persons of ``frame`` (a batch) whose household the count pass found
    inconsistent. A batch executor gathers these rows in a second, filtered read and calls
    :func:`~sdc.method.households.check_households` on them: every violating household is
    there whole and no other, so the refusal (counts, the first ids, the values found) is the
    pandas engine's, word for word."""
    if not agg.inconsistent:
        return np.zeros(len(frame), dtype=bool)
    bad = np.unique(np.concatenate(list(agg.inconsistent.values())))
    return np.isin(household_identity(frame, config), bad)


def person_dependence_counter(columns: list[str] | dict[str, str | None],
                              config: ReleaseConfig) -> DependenceCounter:
    """The person stage's dependence counter: the released person-level non-key columns of
    the input's ``columns`` (not the household id, the household columns or ``perturb:``
    columns), counted by :func:`add_person_dependence` in a pass after planning (only the
    persons of the kept classes count, as in the pandas engine). ``columns`` as a mapping
    name -> kind (:func:`~sdc.method.dependence.schema_kinds` of the public schema, None for
    a column that does not pair): their pairs are checked too."""
    pcfg = person_config(config)
    skip = {config.input.household_id, *config.input.household_columns, *(config.perturb or {})}
    cols = [c for c in checked_columns(list(columns), pcfg) if c not in skip]
    kinds = {c: k for c, k in columns.items() if k} if isinstance(columns, dict) else {}
    return DependenceCounter(cols, len(pcfg.key_names), small_limit(pcfg),
                             sizes=key_sizes(pcfg), pairs=pair_plan(cols, kinds, pcfg))


def add_person_dependence(counter: DependenceCounter, frame: pd.DataFrame, cell: np.ndarray,
                          cells: CellTable, ps: PersonStagePlan) -> None:
    """Add a batch of persons (``cell``: their cells in the full table) to the person stage's
    dependence counter: the persons of the kept classes, by their cell in the person plan."""
    sub = sub_cell(ps, cell, cells.n_cells)
    keep = sub >= 0
    if counter.columns and keep.any():
        counter.add(frame[keep], sub[keep], cells.key_codes[np.asarray(cell)[keep]])


def person_dependence(counter: DependenceCounter, ps: PersonStagePlan,
                      config: ReleaseConfig) -> list:
    """The person stage's dependence figures from the counted batches (the pandas engine's;
    the caller raises with :func:`~sdc.method.dependence.raise_if_dependent`)."""
    return measure_dependence(counter, ps.plan, person_config(config), lambda x: x)


def household_partition_sets(cells: CellTable, ps: PersonStagePlan, extended: CellTable,
                             orig: np.ndarray, config: ReleaseConfig
                             ) -> tuple[np.ndarray, pd.DataFrame]:
    """The partition sets of a household release (``internal/partition_sets.parquet`` and the
    partition set of every cell of the release's ``extended`` cell table; ``orig``: the row of
    every counted cell in it), as the pandas engine's result holds them: the person stage's
    partition sets over the full cell table ``cells`` (the left-out small classes' in no PRB),
    plus empty ones for released combinations whose partition set was empty."""
    pcfg = person_config(config)
    if ps.kept.size == cells.n_cells:
        frame, cell_ps = ps.plan.partition_sets, ps.plan.partitioned.cell_partition_set
    else:  # the partition of the full table, each set with its PRB in the kept classes' plan
        part = partition_cells(cells, pcfg)
        frame = partition_sets_with_prbs(part, ps.plan.partition_sets, pcfg)
        cell_ps = part.cell_partition_set
    return extended_partition_sets(frame, cell_ps, pcfg, extended.key_codes,
                                   np.asarray(orig, dtype=np.int64))


def household_blocks(hs: HouseholdStageResult, config: ReleaseConfig) -> pd.DataFrame:
    """The household stage's PRB table with ``changed`` (households whose household keys
    changed, per PRB), as the pandas engine's household result holds it."""
    dplan = draw_plan(hs.plan, hs.config or household_config(config))
    blocks = hs.plan.blocks.copy()
    moved = hs.cell[hs.changed & (hs.cell >= 0)]
    blocks["changed"] = np.bincount(dplan.cell_prb[moved],
                                    minlength=len(blocks)).astype(np.int64)
    return blocks


def household_values(agg: HouseholdAggregate, hs: HouseholdStageResult, config: ReleaseConfig,
                     seed: int) -> tuple[pd.DataFrame | None, list]:
    """The released household-level ``derived:`` and ``perturb:`` columns of every household
    (rows of ``agg``), as the pandas engine's household stage releases them on the household
    table: a derived column takes the value of its household's released household cell
    (:func:`sdc.method.derived.derived_values`, refused when not a function of the household
    keys); a perturbed one the DP-PRAM of :mod:`sdc.method.perturb` with the household's
    identity and the households' value counts. Returns (the columns, or None when there are
    none; their :class:`~sdc.method.perturb.DPPerturbation` in ``perturb:`` order)."""
    from sdc.method.derived import apply_derived, cell_describer, derived_values
    from sdc.method.perturb import perturb_batch, perturb_designs

    hcfg = household_config(config)
    cols = [*hcfg.derived, *hcfg.perturb]
    recal = _recalibrated(agg, hs, config)
    if not cols:
        return recal, []
    if hs.composition is not None:
        raise InputError(
            f"risk.composition: protect does not release household-level derived: or perturb: "
            f"columns ({cols}) yet: drop them, or list them as ordinary household columns")
    values = agg.columns[cols]
    cells = hs.plan.partitioned.cells
    derived = derived_values(values, hs.cell, cells.n_cells, hcfg,
                             cell_describer(cells.key_codes, hcfg))
    out = apply_derived(values.copy(), hs.cell, hs.released_cell, derived)
    if recal is not None:
        out[config.input.weight] = recal[config.input.weight].to_numpy()
    if not hcfg.perturb:
        return out, []
    counts = {v: values[v].value_counts(sort=False) for v in hcfg.perturb}
    designs = perturb_designs(hcfg, counts, agg.n_households)
    out, changed = perturb_batch(values, out, designs, np.asarray(agg.identity, np.uint64), seed)
    return out, [d.perturbation(int(c)) for d, c in zip(designs, changed, strict=True)]


def _recalibrated(agg: HouseholdAggregate, hs: HouseholdStageResult,
                  config: ReleaseConfig) -> pd.DataFrame | None:
    """``input.weight_release: recalibrated``: every household's released weight
    (:func:`sdc.method.recalibrate.recalibrated_weights` on its original and released
    household keys), as a one-column frame; else None."""
    if config.input.weight_release != "recalibrated":
        return None
    from sdc.method.household_exposed import left_margins
    from sdc.method.recalibrate import recalibrated_weights, size_top

    w = config.input.weight
    raw = pd.to_numeric(agg.columns[w], errors="raise").to_numpy(np.float64)
    new = recalibrated_weights(agg.key_codes, hs.released_codes, agg.size, raw, w,
                               size_top(hs.design.large_groups), left_margins(agg))
    return pd.DataFrame({w: new})

