"""The household stages of the one pipeline (issue 23, docs/HOUSEHOLDS.md "Engines"), reached
through :mod:`sdc.pipeline.run` for a file with ``input.household_id``: the household table,
the household stage and the person stage, as per-batch functions (:func:`count_batch`,
:func:`identity_batch`, :func:`apply_batch`, :func:`refine_batch`) any runner maps, the parts
merged here in input order, so every executor gives the same files. Three reads of the input,
memory bounded by one batch, the cell table, the household table (O(households)) and, for the
household risk section, four numbers per person:

1. **count** (:mod:`sdc.pipeline.household_count`): the pandera checks per batch, the person
   cells, the household table (:class:`~sdc.method.household_batches.HouseholdCounter`), the
   person ids; an inconsistent
   household refused from a filtered read; both stages planned on aggregates, the household
   columns' dependence checked;
2. **identities**: the drawing persons' identities (made distinct over the file), the person
   columns' dependence, the changed households' persons kept: the extended cell table, the
   public order's salt and the household pseudonyms follow;
3. **apply**: every person's released values, spilled by household pseudonym; the records
   file; the report aggregates (refinement passes after). The figures of both stages:
   :mod:`sdc.pipeline.household_result`.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.io.spill import BucketSpill, bucket_bits
from sdc.method.cell_passes import CellLocator
from sdc.method.cells import CellTable, cell_codes
from sdc.method.dependence import raise_if_dependent, schema_kinds
from sdc.method.derived import DerivedCollector, apply_derived
from sdc.method.draws import all_identities, cell_identity, record_identity, unique_identities
from sdc.method.household_batches import (
    add_person_dependence,
    drawing_persons,
    extended_cells,
    household_identity,
    lookup_households,
    person_dependence,
    person_dependence_counter,
    person_draw_identities,
    person_draw_plan,
    released_person_codes,
)
from sdc.method.households import (
    household_perturb,
    person_config,
    person_derived_values,
    person_key_code,
    pseudonyms,
)
from sdc.method.households import row_index as _row_index
from sdc.method.perturb import PerturbValues, perturb_batch, perturb_designs
from sdc.pipeline.household_count import HouseholdCounted, count_batch, count_pass
from sdc.pipeline.household_public import (
    ChangedHouseholdPersons,
    household_bucket_keys,
    household_cell_prb,
    household_public_batch,
    household_public_schema,
    write_household_buckets,
)
from sdc.pipeline.household_result import (
    HouseholdPlan,
    household_release_result,
    realized_compositions,
)
from sdc.pipeline.kernels import (
    ReleasedRecords,
    ReleaseOutcome,
    write_public_files,
)
from sdc.pipeline.order import ORDER_COLUMNS, order_salt
from sdc.pipeline.records_file import RecordsSpill, write_records_from_buckets
from sdc.pipeline.release import Runner
from sdc.pipeline.report_parts import (
    add_apply_batch,
    add_refine_batch,
    new_accumulator,
)

__all__ = ["HouseholdPlan", "apply_batch", "count_batch",
           "identity_batch", "plan_households", "refine_batch", "stream_household_release"]


def _person_perturb_config(config: ReleaseConfig) -> ReleaseConfig | None:
    """The person stage's config with the person-level ``perturb:`` variables (their draws'
    identities, as the pandas engine's), None when there are none."""
    hh = household_perturb(config)
    person_vars = {v: sp for v, sp in config.perturb.items() if v not in hh}
    if not person_vars:
        return None
    return person_config(config).model_copy(update={"perturb": person_vars})


def identity_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig,
                   locate: CellLocator, household_ids: np.ndarray, cells: CellTable,
                   ps: Any, changed_households: np.ndarray, columns: list[str]) -> tuple:
    """Pass 2 on one batch: its drawing persons' identities and ties, its changed
    households' persons (listed from 0), its part of the person dependence check and, with
    person-level ``perturb:`` variables, every person's identity and tie (else None)."""
    c = locate(cell_codes(frame, person_config(config)))
    hrow = lookup_households(household_ids, household_identity(frame, config))
    i, t = person_draw_identities(frame, c, ps, cells, config)
    changed = ChangedHouseholdPersons()
    changed.add(c, hrow, drawing_persons(c, ps, cells, config), changed_households, 0)
    pdep = person_dependence_counter(columns, config)
    add_person_dependence(pdep, frame, c, cells, ps)
    pp = _person_perturb_config(config)
    every = (None if pp is None else
             all_identities(frame, c, person_draw_plan(ps, cells, config), pp))
    comp = None
    if config.risk.composition == "protect":  # the persons of the changed households
        keep = np.asarray(changed_households)[hrow]
        comp = (frame.index.to_numpy()[keep].astype(np.int64), c[keep], hrow[keep],
                np.asarray(record_identity(frame[keep], person_config(config)), np.uint64))
    return i, t, changed, pdep, every, comp


def apply_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, seed: int,
                locate: CellLocator, household_ids: np.ndarray, n_households: int,
                cells: CellTable, ps: Any, hs: Any, table: CellTable, orig: np.ndarray,
                pseudo: np.ndarray, schema: pa.Schema, salt: Any, bits: int, scratch: str,
                records: bool, acc: Any, columns: Any, realized: Any, keep: bool,
                identity: np.ndarray, every_identity: np.ndarray | None) -> tuple:
    """Pass 3 on one batch: its persons' released values, spilled by household pseudonym
    into ``scratch/public`` (and the records file's into ``scratch/records``) as piece
    ``index``; returns its cells, household rows, released rows, weights, report part and
    the persons changed per person-level ``perturb:`` variable. ``columns``: the released
    non-key columns (:class:`_ReleasedColumns`), ``every_identity``: every person's distinct
    identity when person-level variables are perturbed; ``keep``: also the batch's public
    table in input order (else None)."""
    sizes = [int(x) + 1 for x in table.key_codes.max(axis=0)]
    c = locate(cell_codes(frame, person_config(config)))
    hrow = lookup_households(household_ids, household_identity(frame, config))
    out = released_person_codes(c, hrow, identity, cells, ps, hs, config, seed,
                                frame.index.to_numpy(), realized)
    rel = _row_index(table.key_codes, out, sizes)
    released, changed = frame, None
    if columns is not None:
        released, changed = columns.apply(frame, hrow, cells.key_codes[c], out, every_identity,
                                          config, seed)
    t = household_public_batch(released, orig[c], rel, table, pseudo[hrow], config, seed,
                               schema, salt)
    BucketSpill(Path(scratch) / "public", bits, piece=index).add(
        t, household_bucket_keys(pseudo[hrow], n_households))
    kept = t.drop_columns(list(ORDER_COLUMNS)) if keep else None
    if records:
        RecordsSpill(Path(scratch) / "records", bits, piece=index).add(
            record_identity(frame, config), orig[c], rel)
    part = acc.spawn()
    add_apply_batch(part, frame, orig[c], rel, config)
    weight = config.input.weight
    w = frame[weight].to_numpy(dtype=float) if weight else None
    return c, hrow, rel, w, part, changed, kept


@dataclass
class _ReleasedColumns:
    """The released ``derived:`` and ``perturb:`` columns of a household file, for every
    batch: the household-level ones per household (:func:`household_values`: every member
    takes its household's), the person-level DP-PRAM designs and derived mapping (per
    :func:`person_key_code`, ``codes`` sorted)."""

    households: pd.DataFrame | None
    designs: list
    codes: np.ndarray | None
    derived: dict[str, pd.Series]

    def apply(self, frame: pd.DataFrame, household_row: np.ndarray, key_codes: np.ndarray,
              released_codes: np.ndarray, identity: np.ndarray | None, config: ReleaseConfig,
              seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        """``frame`` with the released columns (key values untouched) and the persons changed
        per person-level perturbed variable."""
        out = frame.copy(deep=False)
        if self.households is not None:
            for v in self.households.columns:
                col = self.households[v]
                out[v] = pd.Series(col.to_numpy()[household_row], index=out.index,
                                   name=v).astype(col.dtype)
        changed = np.zeros(len(self.designs), dtype=np.int64)
        if self.designs:
            out, changed = perturb_batch(frame, out, self.designs, identity, seed)
        if self.derived:
            out = apply_derived(
                out, np.searchsorted(self.codes, person_key_code(key_codes, config)),
                np.searchsorted(self.codes, person_key_code(released_codes, config)),
                self.derived)
        return out, changed


def refine_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, locate: CellLocator,
                 orig: np.ndarray, template: Any, moved_rows: np.ndarray,
                 moved_cells: np.ndarray) -> Any:
    """One batch of a report refinement pass (:mod:`sdc.pipeline.report_parts`): a partial
    accumulator, given the kept moved records of the batch's rows."""
    part = template.spawn()
    part.moved_rows, part.moved_cells = [moved_rows], [moved_cells]
    add_refine_batch(part, frame, locate, config,
                     orig[locate(cell_codes(frame, person_config(config)))])
    part.moved_rows, part.moved_cells = [], []
    return part


@dataclass
class _Identified:
    """Pass 2 merged: the drawing persons' distinct identities (``starts``: each batch's
    first), every person's when person-level variables are perturbed, the changed
    households' persons and the released columns' parts."""

    locate: CellLocator
    ident: np.ndarray
    starts: np.ndarray
    every_ident: np.ndarray | None
    changed: ChangedHouseholdPersons
    released_columns: _ReleasedColumns | None
    realized: dict[str, np.ndarray] | None = None


def _identity_pass(config: ReleaseConfig, runner: Runner, k: HouseholdCounted,
                   say: Callable[[str], None]) -> _Identified:
    """Pass 2 (:func:`identity_batch`), then the person stage's dependence check and the
    person-level ``derived:`` mapping (refused here, as the pandas engine refuses them)."""
    say("person identities (pass 2 of 3)")
    pcfg = person_config(config)
    locate = CellLocator(k.codes, pcfg)
    kinds = schema_kinds(runner.public_schema())  # input name -> the pairs' kind
    columns = {c: kinds.get(c) for c in runner.input_columns()}
    pdep = person_dependence_counter(columns, config)
    ids, ties, listed = [], [], 0
    every_ids, every_ties = [], []
    changed = ChangedHouseholdPersons()
    comp_parts = []
    for i, t, part, dep, every, comp in runner.map(identity_batch, (config, locate,
                                                                    k.agg.identity, k.cells,
                                                                    k.ps, k.hs.changed,
                                                                    columns)):
        if comp is not None:
            comp_parts.append(comp)
        changed.merge(part, listed)
        pdep.merge(dep)
        listed += i.size
        ids.append(i)
        ties.append(t)
        if every is not None:
            every_ids.append(every[0])
            every_ties.append(every[1])
    pfig = person_dependence(pdep, k.ps, config)
    raise_if_dependent(pfig, k.ps.plan, pcfg)
    k.ps.plan = dataclasses.replace(k.ps.plan, dependence=pfig)
    released_columns = _released_columns(config, k.household_columns, k.derived, k.cells,
                                         k.perturb_values, k.n)
    ident = unique_identities(np.concatenate(ids), np.concatenate(ties))
    starts = np.concatenate([[0], np.cumsum([x.size for x in ids])]).astype(int)
    del ids, ties
    every_ident = (unique_identities(np.concatenate(every_ids), np.concatenate(every_ties))
                   if every_ids else None)
    realized = realized_compositions(config, k, comp_parts) if comp_parts else None
    return _Identified(locate, ident, starts, every_ident, changed, released_columns, realized)


def plan_households(config: ReleaseConfig, *, runner: Runner,
                    progress: Callable[[str], None] | None = None) -> HouseholdPlan:
    """The plan of a household file in batches (``sdc plan``, ``sdc validate`` on a batch
    engine): the release's first two passes, with every refusal of the release (input,
    households, small blocks, the dependence check, ``perturb:`` and ``derived:`` columns) and
    no file written. The plan does not depend on the seed (0 draws the households here)."""
    say = progress or (lambda s: None)
    k = count_pass(config, 0, runner, [], say)
    _identity_pass(config, runner, k, say)
    return HouseholdPlan(config, k.n, k.cells, k.hs, k.ps, k.agg)


def stream_household_release(config: ReleaseConfig, seed: int, out_dir: Path, *,
                             tmp_dir: Path | str | None = None,
                             progress: Callable[[str], None] | None = None,
                             records_path: Path | None = None,
                             runner: Runner, keep: bool = False) -> ReleaseOutcome:
    """Release the household file of ``config`` in batches; the public files into
    ``out_dir``, the internal records file to ``records_path`` when given. Raises as the
    pandas engine (:class:`InputError`, :class:`SmallBlockError`, the dependence check,
    :class:`~sdc.method.derived.DerivedError`); ``perturb:`` and ``derived:`` columns are
    released per household or per person as the pandas engine releases them.

    ``runner`` (an executor's) runs each pass's per-batch functions (:func:`count_batch`,
    :func:`identity_batch`, :func:`apply_batch`, :func:`refine_batch`) and gives their parts
    in input order; the parts are merged here, so every runner gives the same files."""
    say = progress or (lambda s: None)
    weight = config.input.weight
    numeric = runner.numeric_columns()
    stats = runner.value_ranges(numeric)
    k = count_pass(config, seed, runner, [c for c in numeric if c not in stats], say)
    n, offsets, agg, cells, hs, ps = k.n, k.offsets, k.agg, k.cells, k.hs, k.ps
    p2 = _identity_pass(config, runner, k, say)
    ident, starts, every_ident = p2.ident, p2.starts, p2.every_ident
    table, orig = extended_cells(cells, [p2.realized["codes"]] if p2.realized is not None
                                 else p2.changed.released_codes(ident, cells, ps, hs, config,
                                                                seed))
    realized = (None if p2.realized is None
                else (p2.realized["rows"], p2.realized["classes"]))
    salt = order_salt(table)
    pseudo = pseudonyms(agg.identity, seed, salt)
    schema = household_public_schema(runner.public_schema(), config)
    cell_prb = household_cell_prb(ps, cells, table, orig, config)

    say("releasing persons (pass 3 of 3)")
    bits = bucket_bits(n)
    tmp = Path(tempfile.mkdtemp(prefix="sdc-buckets-", dir=tmp_dir))
    acc = new_accumulator(table, config, k.weight_max if weight else None,
                          {**stats, **{c: (a, b, runner.is_integer(c))
                                       for c, (a, b) in k.ranges.items()}}, numeric)
    try:
        shared = (config, seed, p2.locate, agg.identity, agg.n_households, cells, ps, hs, table,
                  orig, pseudo, schema, salt, bits, str(tmp), records_path is not None,
                  acc.spawn(), p2.released_columns, realized, keep)
        applied = _apply_pass(runner, shared, lambda i: (
            ident[starts[i]:starts[i + 1]],
            None if every_ident is None else every_ident[offsets[i]:offsets[i + 1]]),
            acc, p2.released_columns, bool(weight))
        _refine(runner, acc, config, p2.locate, orig, offsets)
        records_file = None
        if records_path is not None:
            say("writing the internal records file")
            records_file = write_records_from_buckets(
                RecordsSpill(tmp / "records", bits, piece=0).buckets(), records_path,
                cell_identity(table.key_codes, config), cell_prb)
        say("writing the public file in household order")
        hid = config.input.household_id
        files, public_table = write_public_files(
            config, schema, BucketSpill(tmp / "public", bits, piece=0).buckets(), out_dir,
            lambda buckets, writer: write_household_buckets(buckets, writer, hid))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cell_all, row_all, rel_all, w_all = applied.persons()
    dp_done = _dp_perturbations(config, k.dp_done, p2.released_columns, applied.person_changed)
    result = household_release_result(config, seed, agg, hs, ps, cells, table, orig, cell_prb,
                                      ident, cell_all, row_all, rel_all, w_all, k.dtypes, n,
                                      schema, files, acc, records_file)
    result.dp_perturbations = dp_done
    result.public_table = public_table
    result.counted = HouseholdPlan(config, n, cells, hs, ps, agg)
    if keep:
        result.released = ReleasedRecords(orig[cell_all], rel_all,
                                          pa.concat_tables(applied.kept_tables))
    return result


@dataclass
class _Applied:
    """Pass 3 merged: every person's cell, household row, released cell and weight (per
    batch), the person-level ``perturb:`` changes and the kept public tables (``keep``)."""

    cell: list[np.ndarray] = dataclasses.field(default_factory=list)
    row: list[np.ndarray] = dataclasses.field(default_factory=list)
    rel: list[np.ndarray] = dataclasses.field(default_factory=list)
    weight: list[np.ndarray] | None = None
    person_changed: np.ndarray | None = None
    kept_tables: list[pa.Table] = dataclasses.field(default_factory=list)

    def persons(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The persons' cells, household rows, released cells and weights (None: no weight)
        in input order."""
        return (np.concatenate(self.cell), np.concatenate(self.row), np.concatenate(self.rel),
                None if self.weight is None else np.concatenate(self.weight))


def _apply_pass(runner: Runner, shared: tuple, identities: Callable[[int], tuple], acc: Any,
                released_columns: _ReleasedColumns | None, weighted: bool) -> _Applied:
    """Pass 3: :func:`apply_batch` over every batch, merged in input order (the report parts
    into ``acc``)."""
    n_designs = len(released_columns.designs) if released_columns is not None else 0
    out = _Applied(weight=[] if weighted else None,
                   person_changed=np.zeros(n_designs, dtype=np.int64))
    for c, hrow, rel, w, part, ch, kept in runner.map(apply_batch, shared, identities):
        acc.merge(part)
        if kept is not None:
            out.kept_tables.append(kept)
        if ch is not None:
            out.person_changed += ch
        out.cell.append(c)
        out.row.append(hrow)
        out.rel.append(rel)
        if out.weight is not None:
            out.weight.append(w)
    return out


def _refine(runner: Runner, acc: Any, config: ReleaseConfig, locate: CellLocator,
            orig: np.ndarray, offsets: list[int]) -> None:
    """The report refinement passes (:func:`refine_batch`) until the accumulator needs none."""
    more = acc.start_refinement()
    while more:
        template = acc.spawn()
        for part in runner.map(refine_batch, (config, locate, orig, template),
                               lambda i: acc.moved_slice(offsets[i], offsets[i + 1])):
            acc.merge(part)
        more = acc.end_refine_pass()


def _dp_perturbations(config: ReleaseConfig, dp_done: list,
                      released_columns: _ReleasedColumns | None,
                      person_changed: np.ndarray) -> list:
    """The DP-PRAM perturbations of the household stage and of the person-level ``perturb:``
    variables, in ``perturb:`` order, as the pandas engine lists them."""
    done = list(dp_done)
    if released_columns is not None:
        done += [d.perturbation(int(c)) for d, c in zip(released_columns.designs,
                                                       person_changed, strict=True)]
        order = list(config.perturb)
        done.sort(key=lambda d: order.index(d.variable))
    return done


def _released_columns(config: ReleaseConfig, households: pd.DataFrame | None,
                      derived: DerivedCollector | None, cells: CellTable,
                      perturb_values: dict[str, PerturbValues],
                      n_persons: int) -> _ReleasedColumns | None:
    """What every batch needs to release the ``derived:`` and ``perturb:`` columns (None:
    there are none): the person-level derived mapping is refused here, after the person
    stage's dependence check, as the pandas engine refuses it."""
    pp = _person_perturb_config(config)
    if households is None and pp is None and derived is None:
        return None
    designs = [] if pp is None else perturb_designs(
        pp, {v: perturb_values[v].value_counts() for v in pp.perturb}, n_persons)
    codes, values = None, {}
    if derived is not None:
        codes = np.unique(person_key_code(cells.key_codes, config))
        values = person_derived_values(derived, codes, config)
    return _ReleasedColumns(households, designs, codes, values)
