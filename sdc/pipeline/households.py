"""The release of a household file (issue 23, docs/HOUSEHOLDS.md "Engines"), reached through
:mod:`sdc.pipeline.run` for a file with ``input.household_id``: the one set of passes
(:mod:`sdc.pipeline.passes`) with the household stage
(:class:`sdc.pipeline.household_stage.HouseholdFileStage`: the household table, the household
stage and the person stage inside it), the parts merged in input order, so every executor
gives the same files. Three reads of the input, memory bounded by one batch, the cell table,
the household table (O(households)) and, for the household risk section, four numbers per
person:

1. **count** (:mod:`sdc.pipeline.household_count`): the pandera checks per batch, the person
   cells, the household table (:class:`~sdc.method.household_batches.HouseholdCounter`), the
   person ids; an inconsistent
   household refused from a filtered read; both stages planned on aggregates, the household
   columns' dependence checked;
2. **identities**: the drawing persons' identities (made distinct over the file), the person
   columns' dependence, the changed households' persons kept: the extended cell table, the
   public order's salt and the household pseudonyms follow;
3. **apply**: every person's released values, spilled by household pseudonym; the records
   file; the report aggregates (refinement passes alongside the writing). The figures of both
   stages: :mod:`sdc.pipeline.household_result`.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.spill import bucket_bits, remove_spills
from sdc.method.cell_passes import CellLocator
from sdc.method.cells import CellTable
from sdc.method.dependence import raise_if_dependent, schema_kinds
from sdc.method.derived import DerivedCollector
from sdc.method.draws import cell_identity
from sdc.method.household_batches import (
    extended_cells,
    person_dependence,
    person_dependence_counter,
)
from sdc.method.households import (
    person_config,
    person_derived_values,
    person_key_code,
    pseudonyms,
)
from sdc.method.perturb import PerturbValues, perturb_designs
from sdc.pipeline.household_count import HouseholdCounted, count_and_plan
from sdc.pipeline.household_exposed import without_exposed
from sdc.pipeline.household_public import (
    ChangedHouseholdPersons,
    household_cell_prb,
    household_public_schema,
    write_household_buckets,
)
from sdc.pipeline.household_result import (
    HouseholdPlan,
    household_release_result,
    realized_compositions,
)
from sdc.pipeline.household_stage import HouseholdFileStage, ReleasedColumns, person_perturb_config
from sdc.pipeline.kernels import (
    ReleasedRecords,
    ReleaseOutcome,
)
from sdc.pipeline.order import order_salt
from sdc.pipeline.passes import (
    ApplyTarget,
    Refinement,
    Runner,
    apply_pass,
    identity_pass,
    write_spilled,
)
from sdc.pipeline.report_parts import new_accumulator

__all__ = ["HouseholdPlan", "plan_households", "stream_household_release"]


@dataclass
class _Identified:
    """Pass 2 merged: the drawing persons' distinct identities (``starts``: each batch's
    first), every person's when person-level variables are perturbed, the changed
    households' persons and the released columns' parts."""

    stage: HouseholdFileStage  #: the stage as the identity pass saw it
    ident: np.ndarray
    starts: np.ndarray
    every_ident: np.ndarray | None
    changed: ChangedHouseholdPersons
    released_columns: ReleasedColumns | None
    realized: dict[str, np.ndarray] | None = None


def _identities(config: ReleaseConfig, runner: Runner, k: HouseholdCounted,
                say: Callable[[str], None]) -> _Identified:
    """Pass 2 (:func:`sdc.pipeline.passes.identity_pass` with the household stage), then the
    person stage's dependence check and the person-level ``derived:`` mapping (refused here,
    as the pandas engine refuses them)."""
    say("person identities (pass 2 of 3)")
    pcfg = person_config(config)
    locate = CellLocator(k.codes, pcfg)
    kinds = schema_kinds(runner.public_schema())  # input name -> the pairs' kind
    columns = {c: kinds.get(c) for c in runner.input_columns()}
    pdep = person_dependence_counter(columns, config)
    changed = ChangedHouseholdPersons()
    comp_parts = []

    def keep(extra: tuple, listed: int) -> None:
        part, dep, comp = extra
        if comp is not None:
            comp_parts.append(comp)
        changed.merge(part, listed)
        pdep.merge(dep)

    stage = HouseholdFileStage(config, locate, k.agg.identity, k.cells, k.ps, k.hs, columns)
    ids = identity_pass(runner, stage, keep)
    pfig = person_dependence(pdep, k.ps, config)
    raise_if_dependent(pfig, k.ps.plan, pcfg)
    k.ps.plan = dataclasses.replace(k.ps.plan, dependence=pfig)
    released_columns = _released_columns(config, k.household_columns, k.derived, k.cells,
                                         k.perturb_values, k.n)
    realized = realized_compositions(config, k, comp_parts) if comp_parts else None
    return _Identified(stage, ids.ident, ids.starts, ids.every, changed, released_columns,
                       realized)


def plan_households(config: ReleaseConfig, *, runner: Runner,
                    progress: Callable[[str], None] | None = None) -> HouseholdPlan:
    """The plan of a household file in batches (``sdc plan``, ``sdc validate`` on a batch
    engine): the release's first two passes, with every refusal of the release (input,
    households, small blocks, the dependence check, ``perturb:`` and ``derived:`` columns) and
    no file written. The plan does not depend on the seed (0 draws the households here)."""
    say = progress or (lambda s: None)
    runner = without_exposed(runner, config)  # risk.exposed_sizes: drop
    k = count_and_plan(config, 0, runner, [], say)
    _identities(config, runner, k, say)
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

    ``runner`` (an executor's) maps the passes' per-batch functions
    (:mod:`sdc.pipeline.passes`) with the household stage and gives their parts in input
    order; the parts are merged here, so every runner gives the same files."""
    say = progress or (lambda s: None)
    runner = without_exposed(runner, config)  # risk.exposed_sizes: drop
    weight = config.input.weight
    numeric = runner.numeric_columns()
    stats = runner.value_ranges(numeric)
    k = count_and_plan(config, seed, runner, [c for c in numeric if c not in stats], say)
    n, agg, cells, hs, ps = k.n, k.agg, k.cells, k.hs, k.ps
    p2 = _identities(config, runner, k, say)
    ident, starts, every_ident = p2.ident, p2.starts, p2.every_ident
    table, orig = extended_cells(cells, [p2.realized["codes"]] if p2.realized is not None
                                 else p2.changed.released_codes(ident, cells, ps, hs, config,
                                                                seed))
    salt = order_salt(table)
    stage = dataclasses.replace(
        p2.stage, seed=seed, n_households=agg.n_households, table=table, orig=orig,
        pseudo=pseudonyms(agg.identity, seed, salt),
        schema=household_public_schema(runner.public_schema(), config), salt=salt,
        columns=p2.released_columns,
        realized=(None if p2.realized is None
                  else (p2.realized["rows"], p2.realized["classes"])))
    cell_prb = household_cell_prb(ps, cells, table, orig, config)

    say("releasing persons (pass 3 of 3)")
    bits = bucket_bits(n)
    tmp = Path(tempfile.mkdtemp(prefix="sdc-buckets-", dir=tmp_dir))
    acc = new_accumulator(table, config, k.weight_max if weight else None,
                          {**stats, **{c: (a, b, runner.is_integer(c))
                                       for c, (a, b) in k.ranges.items()}}, numeric)
    n_designs = len(p2.released_columns.designs) if p2.released_columns is not None else 0
    applied = _Applied(weight=[] if weight else None,
                       person_changed=np.zeros(n_designs, dtype=np.int64))
    refinement = None
    try:
        target = ApplyTarget(str(tmp), bits, records_path is not None, False, keep, acc.spawn(),
                             n_cells=table.n_cells)
        offsets, kept, _ = apply_pass(runner, stage, target, lambda i: (
            ident[starts[i]:starts[i + 1]],
            None if every_ident is None else every_ident[k.offsets[i]:k.offsets[i + 1]]),
            acc, applied.add)
        # the report refinement passes run while the files below are written
        refinement = Refinement(runner, acc, stage, offsets)
        hid = config.input.household_id
        files, public_table, records_file = write_spilled(
            target, config, stage.schema, out_dir, records_path,
            cell_identity(table.key_codes, config), cell_prb, say,
            lambda buckets, writer: write_household_buckets(buckets, writer, hid),
            "in household order")
    except BaseException:
        if refinement is not None:
            refinement.cancel()
        raise
    finally:
        remove_spills(tmp)  # the consumed buckets deleted while the files were written
    refinement.result()
    cell_all, row_all, rel_all, w_all = applied.persons()
    dp_done = _dp_perturbations(config, k.dp_done, p2.released_columns, applied.person_changed)
    result = household_release_result(config, seed, agg, hs, ps, cells, table, orig, cell_prb,
                                      ident, cell_all, row_all, rel_all, w_all, k.dtypes, n,
                                      stage.schema, files, acc, records_file)
    result.dp_perturbations = dp_done
    result.public_table = public_table
    result.counted = HouseholdPlan(config, n, cells, hs, ps, agg)
    if keep:
        result.released = ReleasedRecords.of(kept)
    return result


@dataclass
class _Applied:
    """Pass 3 merged: every person's cell, household row, released cell and weight (per
    batch) and the person-level ``perturb:`` changes."""

    cell: list[np.ndarray] = dataclasses.field(default_factory=list)
    row: list[np.ndarray] = dataclasses.field(default_factory=list)
    rel: list[np.ndarray] = dataclasses.field(default_factory=list)
    weight: list[np.ndarray] | None = None
    person_changed: np.ndarray | None = None

    def add(self, extra: tuple) -> None:
        """Merge a batch's part (what :meth:`HouseholdFileStage.release` returned beside)."""
        c, hrow, rel, w, ch = extra
        if ch is not None:
            self.person_changed += ch
        self.cell.append(c)
        self.row.append(hrow)
        self.rel.append(rel)
        if self.weight is not None:
            self.weight.append(w)

    def persons(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The persons' cells, household rows, released cells and weights (None: no weight)
        in input order."""
        return (np.concatenate(self.cell), np.concatenate(self.row), np.concatenate(self.rel),
                None if self.weight is None else np.concatenate(self.weight))


def _dp_perturbations(config: ReleaseConfig, dp_done: list,
                      released_columns: ReleasedColumns | None,
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
                      n_persons: int) -> ReleasedColumns | None:
    """What every batch needs to release the ``derived:`` and ``perturb:`` columns (None:
    there are none): the person-level derived mapping is refused here, after the person
    stage's dependence check, as the pandas engine refuses it."""
    pp = person_perturb_config(config)
    if households is None and pp is None and derived is None:
        return None
    designs = [] if pp is None else perturb_designs(
        pp, {v: perturb_values[v].value_counts() for v in pp.perturb}, n_persons)
    codes, values = None, {}
    if derived is not None:
        codes = np.unique(person_key_code(cells.key_codes, config))
        values = person_derived_values(derived, codes, config)
    return ReleasedColumns(households, designs, codes, values)
