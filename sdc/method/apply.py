"""Records -> released records: the second (and last) step of a release that touches records.

The per-record step is a pure function of a batch given the plan, so every engine gets the same
bytes: ``released_cells(plan: DrawPlan, record_cell, identity, seed)`` (move iff
u1 < m_j (theta/t_j under NZY), destination by the weighted race over the cell's near row of W,
else by trie rendezvous over the other cells of its group (the PRB under NZY); identities
from :mod:`sdc.method.draws`). :func:`apply_plan` gives every moved record the key values of its
destination cell and applies ``perturb:``; :func:`release_frame` is the whole release of one
DataFrame (partition, plan, apply). docs/METHOD.md sections 2-6 and 7.3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.cell_passes import decode_released
from sdc.method.cells import CellTable
from sdc.method.dependence import frame_dependence, raise_if_dependent
from sdc.method.derived import DerivedCollector, apply_derived, cell_describer, derived_values
from sdc.method.draws import (
    all_identities,
    cell_identity,
    drawing_identities,
    unique_identities,
)
from sdc.method.households import (
    check_households,
    extended_partition_sets,
    household_codes,
    household_config,
    household_derived,
    household_perturb,
    household_table,
    person_config,
    person_derived,
    person_derived_values,
    person_key_code,
    row_index,
    small_classes,
)
from sdc.method.partition import check_columns, partition_cells, partition_frame
from sdc.method.perturb import apply_perturbations, perturb_value_counts
from sdc.method.plan import ReleasePlan, draw_plan, partition_sets_with_prbs, plan_release
from sdc.method.postrandomize import released_cells
from sdc.method.weighted import WeightSums, weight_plan

# draw_plan (sdc.method.plan's) and released_cells (sdc.method.postrandomize's) re-exported
__all__ = ["HouseholdStage", "ReleaseResult", "apply_plan", "draw_plan", "release_frame",
           "release_households", "released_cells"]


@dataclass
class ReleaseResult:
    """What the engine returns. Only ``frame`` is meant for the public; the rest is internal.

    Attributes
    ----------
    frame : DataFrame
        Released records in the input's row order and index, input columns minus the dropped
        identifiers (the original id column is kept here; the writer replaces it).
    blocks : DataFrame
        One row per PRB: ``prb``, ``partition_key``, ``n_partition_sets``, ``k``,
        ``n_records``, ``profile`` (e.g. ``"1:200, 2:80"``), ``cells_t1``, ``cells_t2``, ...,
        ``theta``, ``kmin``, ``max_risk`` (mechanism-aware: max over the target's cell, the
        picked cell and a), ``max_risk_t``, ``max_risk_a``, ``max_risk_pick`` (``own`` or
        ``other``), ``max_risk_t_z`` (frequency of the picked cell), ``own_max_risk`` (NZY's
        own-cell intruder), ``other_max_risk``, ``action``, ``expected_changed`` (theta * k)
        and ``changed``.
    dp_perturbations : list of :class:`sdc.method.perturb.DPPerturbation`
        The eps-DP PRAM applied to the config's ``perturb:`` variables (non-key), if any.
    certificate : float
        max over PRBs of their exact max risk and over non-sensitive cells of 1/t_j.
    certificate_at : dict
        Where the certificate is attained: ``{"source": "prb", "prb", "partition_key", "t",
        "a", "pick", "t_z"}`` or ``{"source": "non_sensitive", "t", "a", "pick", "t_z"}``.
    """

    frame: pd.DataFrame
    blocks: pd.DataFrame
    certificate: float
    certificate_at: dict[str, Any]
    xi: float
    theta: float
    kmin: int
    partition_sets: pd.DataFrame
    cells: CellTable
    cell_partition_set: np.ndarray
    cell_prb: np.ndarray
    released_cell: np.ndarray
    merges: list[str] = field(default_factory=list)
    dp_perturbations: list = field(default_factory=list)
    cell_id: np.ndarray | None = None
    prb_identity: np.ndarray | None = None
    config: ReleaseConfig | None = None
    households: HouseholdStage | None = None
    #: figures of the dependence check (:class:`sdc.method.dependence.ColumnDependence`)
    dependence: list = field(default_factory=list)
    #: the weighted mode's design (:class:`sdc.method.weighted.WeightedDesign`), else None
    weighted: Any = None
    #: ``risk.destinations: near``: what defines every PRB's W (audit.json), else None
    near: dict | None = None
    #: the near or weighted transition design over the cell table
    #: (:class:`sdc.method.transition.CellDesign`); None: NZY's uniform design
    design: Any = None

    def records_table(self) -> pd.DataFrame:
        """Record-level internal table for the series risk (``internal/records.parquet``).

        Columns ``identity`` (the record's draw identity: :func:`record_identity` of the
        released frame, whose identity columns are unchanged, made distinct with PRB records
        first, so PRB records carry exactly the identity their draws used), ``cell`` and
        ``released`` (:func:`cell_identity` of its true and released key values); input row
        order. Internal only: never published.
        """
        rec = self.cells.record_cell
        ident = unique_identities(*all_identities(self.frame, rec, self, self.config))
        return pd.DataFrame({"identity": ident, "cell": self.cell_id[rec],
                             "released": self.cell_id[self.released_cell]}, copy=False)

    @property
    def changed(self) -> np.ndarray:
        """Per record: did its key values change?"""
        return self.released_cell != self.cells.record_cell

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.cells.record_cell]

    @property
    def record_prb(self) -> np.ndarray:
        return self.cell_prb[self.cells.record_cell]

    @property
    def sensitive_cell(self) -> np.ndarray:
        return self.cell_prb >= 0

    @property
    def n_changed(self) -> int:
        return int(self.changed.sum())

def apply_plan(frame: pd.DataFrame, plan: ReleasePlan, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Post-randomize the sensitive records of ``frame`` as ``plan`` says; see :func:`release_frame`."""
    part = plan.partitioned
    cells = part.cells
    blocks = plan.block_plan.blocks
    cell_prb = plan.cell_prb

    # derived: columns must be functions of the cell (refused before any draw)
    derived = derived_values(frame, cells.record_cell, cells.n_cells, config,
                             cell_describer(cells.key_codes, config))

    # record-keyed draws: identities of the PRB records (made distinct among them), then the
    # pure per-record step
    rec_cell = cells.record_cell
    dplan = draw_plan(plan, config)
    rows = np.flatnonzero(cell_prb[rec_cell] >= 0)
    prb_identity = unique_identities(*drawing_identities(frame, rec_cell, dplan, config))
    released_cell = rec_cell.copy()
    released_cell[rows] = released_cells(dplan, rec_cell[rows], prb_identity, seed)
    moved_rec = released_cell != rec_cell
    changed_per_block = np.bincount(cell_prb[rec_cell[moved_rec]],
                                    minlength=len(blocks)).astype(np.int64)

    # the released frame: every moved record takes all key values of its destination cell
    out = decode_released(frame, rec_cell, released_cell, cells, config)

    # derived: columns take the value of their released cell (the input's mapping)
    out = apply_derived(out, rec_cell, released_cell, derived)

    # eps-DP PRAM of the perturb: variables (non-key), after NZY
    dp_identity = None
    if config.perturb:
        dp_identity = unique_identities(*all_identities(frame, rec_cell, dplan, config))
    out, dp_done = apply_perturbations(frame, out, config, seed, identity=dp_identity)

    blocks_df = plan.blocks.copy()
    blocks_df["changed"] = changed_per_block
    return ReleaseResult(out, blocks_df, plan.certificate, plan.certificate_at, part.xi, part.theta,
                         part.kmin, plan.partition_sets, cells, part.cell_partition_set, cell_prb,
                         released_cell, plan.merges, dp_done, dplan.cell_id, prb_identity,
                         config, dependence=list(plan.dependence), weighted=plan.weighted,
                         near=plan.near,
                         design=plan.cell_design() if plan.transitions is not None else None)


def release_frame(frame: pd.DataFrame, config: ReleaseConfig, seed: int, *,
                  check_dependence: bool = True,
                  not_checked: tuple[str, ...] = (),
                  pair_kinds: dict[str, str] | None = None) -> ReleaseResult:
    """Post-randomize the risky records of ``frame`` with NZY PRAM and certify the result.

    partition (records -> cell table) -> plan (cell table -> PRBs, theta, certificate) -> apply.

    Parameters
    ----------
    frame : DataFrame
        The microdata (any column order and row order).
    config : ReleaseConfig
        Its ``key_variables``, ``partition``, ``risk`` and ``input`` (id and dropped columns)
        sections are used. Hierarchy files must already be loaded (``sdc.load_config`` does it).
    check_dependence : bool
        Run the dependence check of the released non-key columns.
    not_checked : tuple of str
        Columns the dependence check leaves out (the person stage of a household file: the
        household id, released as pseudonyms, and the household columns, checked against the
        household keys on the household table).
    pair_kinds : dict, optional
        The columns that pair in the dependence check (``sdc.method.dependence.schema_kinds``
        of the input's schema; default: from ``frame``'s dtypes; ``{}``: no pairs, as for the
        stages of a household file).
    seed : int
        The release seed. The outcome of a record depends only on the seed, the plan, its own
        cell and its own identity (id, else its non-key values): not on its position, on row
        order or on which other records exist, except through its own t_j, theta and PRB.

    Returns
    -------
    ReleaseResult

    Raises
    ------
    InputError
        A key column is missing or holds a value outside its declared domain.
    SmallBlockError
        A PRB is too small under ``small_blocks: fail``, or cannot be certified after merging.
    DependenceError
        A released non-key column gives the original key values away
        (:mod:`sdc.method.dependence`).
    """
    if config.input.household_id is not None:
        return release_households(frame, config, seed)
    check_columns(frame, config)
    part = partition_frame(frame, config)
    plan = plan_release(part, config)
    if config.risk.weighted:
        weights = frame[config.input.weight].to_numpy(np.float64)
        totals = WeightSums.of(part.cells.record_cell, weights).result(
            np.arange(part.cells.n_cells))
        plan = weight_plan(plan, totals, config)
    if check_dependence:
        checked = frame.drop(columns=[c for c in not_checked if c in frame.columns])
        figures = frame_dependence(checked, plan, config, pair_kinds)
        raise_if_dependent(figures, plan, config)
        plan = dataclasses.replace(plan, dependence=figures)
    return apply_plan(frame, plan, config, seed)


@dataclass
class HouseholdStage:
    """The household stage of a household release (internal; docs/HOUSEHOLDS.md).

    ``result`` is the NZY release of the household table (one unit per household, keys = the
    household-level keys, t_j counted in households, identities from the household ids) under
    ``config`` (:func:`sdc.method.households.household_config`); ``person_certificate`` /
    ``person_certificate_at`` the person stage's certificate (person PRBs inside the
    household keys' values); ``code`` every person's household (0..H-1, order of first
    appearance) and ``first`` every household's first member's row. ``small_classes`` and
    ``small_class_persons``: the household-key classes (and their persons) with fewer than
    kmin sensitive person cells, whose person keys no PRB can certify inside the class: they
    are released unchanged, protected by the household stage only (and measured by the
    composition intruder, ``composition``)."""

    config: ReleaseConfig
    result: ReleaseResult
    person_certificate: float
    person_certificate_at: dict[str, Any]
    code: np.ndarray
    first: np.ndarray
    small_classes: int = 0
    small_class_persons: int = 0
    person: ReleaseResult | None = None
    composition: dict[str, Any] | None = None

    @property
    def certificate(self) -> float:
        """The household-level certificate (max over household PRBs and non-sensitive
        household cells)."""
        return float(self.result.certificate)

    @property
    def n_households(self) -> int:
        return int(self.first.size)

    @property
    def changed(self) -> np.ndarray:
        """Per household: did its household-level keys change?"""
        return self.result.changed


def release_households(frame: pd.DataFrame, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Release a household file: household-level keys once per household, person keys per
    person inside the household keys' values (docs/HOUSEHOLDS.md).

    1. household stage: :func:`release_frame` of the household table (first member of every
       household) under :func:`~sdc.method.households.household_config`;
    2. person stage: :func:`release_frame` of the persons under
       :func:`~sdc.method.households.person_config` (PRBs never mix household-key values);
    3. every member takes its household's released household keys.

    The result's cell table holds the original cells and the released combinations that were
    empty in the original (frequency 0, no PRB), so ``released_cell`` indexes it as usual;
    ``blocks`` are the person stage's PRBs, the household stage is ``result.households``.
    The certificate is the larger of the two stages' certificates.
    """
    if config.risk.composition == "protect":
        raise InputError(
            "risk.composition: protect is released by the executors (`sdc release`, "
            "sdc.executors.registry.get_executor(...).release), not by release_frame: the "
            "composition stage runs on the household aggregate (docs/HOUSEHOLDS.md)")
    check_columns(frame, config)
    check_households(frame, config)
    for v in config.perturb:  # every problem of a perturb: column, with the persons' rows
        perturb_value_counts(frame, v, config)
    code, first = household_codes(frame, config)
    hcfg, pcfg = household_config(config), person_config(config)
    hk = config.household_keys
    # the dependence check, at each stage's level: the household columns against the
    # household keys on the household table (one unit per household), the person-level
    # non-key columns against the person stage's PRBs
    try:
        hres = release_frame(household_table(frame, config, code, first), hcfg, seed,
                             pair_kinds={})
    except SmallBlockError as e:
        raise SmallBlockError(
            f"household stage (one unit per household, keys {hk}, t_j counted in households): "
            f"{e}. A household cell that is rare among households needs other rare household "
            "cells to be post-randomized with: recode the rare household values into a larger "
            "category, or add a household-level key (e.g. household size) so that more "
            "household cells are sensitive, or use a larger xi") from None
    # derived: columns are recomputed per level below, not by the person stage's cells
    pres, small = _person_stage(frame, config, pcfg.model_copy(update={"derived": []}), seed)

    keys = config.key_names
    kvs = config.key_variables
    sizes = [kvs[k].size for k in keys]
    hk_idx = [keys.index(k) for k in hk]
    pc = pres.cells
    hh_changed = hres.changed
    out = pres.frame
    if hh_changed.any():
        released_codes = pc.key_codes[pres.released_cell]
        released_codes[:, hk_idx] = hres.cells.key_codes[hres.released_cell][code]
        table = np.unique(np.vstack([pc.key_codes, released_codes[hh_changed[code]]]), axis=0)
        orig_map = row_index(table, pc.key_codes, sizes)
        released = row_index(table, released_codes, sizes)
        for k in config.household_keys:  # every member takes its household's values
            col = hres.frame[k].to_numpy()[code]
            out[k] = pd.Series(col, index=out.index, name=k).astype(frame[k].dtype)
        for v in household_derived(config):  # recomputed by the household stage
            col = hres.frame[v].to_numpy()[code]
            out[v] = pd.Series(col, index=out.index, name=v).astype(hres.frame[v].dtype)
    else:
        table = pc.key_codes
        orig_map = np.arange(pc.n_cells, dtype=np.int64)
        released = pres.released_cell
    n_u = table.shape[0]
    record_cell = orig_map[pc.record_cell]
    cells = CellTable(record_cell, table, np.bincount(record_cell, minlength=n_u).astype(np.int64),
                      list(keys))
    cell_prb = np.full(n_u, -1, dtype=np.int64)
    cell_prb[orig_map] = pres.cell_prb
    cell_ps, ps_frame = extended_partition_sets(pres.partition_sets, pres.cell_partition_set,
                                                pcfg, table, orig_map)

    out, dp_done = _household_perturbations(frame, out, config, pcfg, pres, hres, code, seed)
    if person_derived(config):  # from every person's released person keys
        pk_cell = person_key_code(pc.key_codes, config)
        codes = np.unique(pk_cell)
        collector = DerivedCollector(person_derived(config))
        collector.add(frame, pk_cell[pc.record_cell])
        values = person_derived_values(collector, codes, config)
        out = apply_derived(out, np.searchsorted(codes, pk_cell[pc.record_cell]),
                            np.searchsorted(codes, pk_cell[pres.released_cell]), values)

    cert, cert_at = pres.certificate, pres.certificate_at
    if hres.certificate > cert:
        cert, cert_at = hres.certificate, hres.certificate_at
    merges = list(pres.merges) + [f"household stage: {m}" for m in hres.merges]
    stage = HouseholdStage(hcfg, hres, pres.certificate, pres.certificate_at, code, first,
                           *small, person=pres)
    return ReleaseResult(out, pres.blocks, cert, cert_at, pres.xi, pres.theta, pres.kmin,
                         ps_frame, cells, cell_ps, cell_prb, released, merges,
                         dp_done, cell_identity(table, config), pres.prb_identity,
                         config, stage, dependence=list(pres.dependence))


def _household_perturbations(frame: pd.DataFrame, out: pd.DataFrame, config: ReleaseConfig,
                             pcfg: ReleaseConfig, pres: ReleaseResult, hres: ReleaseResult,
                             code: np.ndarray, seed: int) -> tuple[pd.DataFrame, list]:
    """DP-PRAM of the ``perturb:`` variables of a household file (docs/HOUSEHOLDS.md): those
    of ``input.household_columns`` were perturbed once per household by the household stage
    (on the household table, with the households' identities): every member takes its
    household's value; the others are perturbed per person, over every person (the small
    classes included), with the persons' identities made distinct as the pandas engine does
    (PRB records first). Returns the frame and the perturbations in ``perturb:`` order."""
    if not config.perturb:
        return out, []
    hh_vars = household_perturb(config)
    for v in hh_vars:
        col = hres.frame[v].to_numpy()[code]
        out[v] = pd.Series(col, index=out.index, name=v).astype(hres.frame[v].dtype)
    done = {d.variable: d for d in hres.dp_perturbations}
    person_vars = {v: sp for v, sp in config.perturb.items() if v not in hh_vars}
    if person_vars:
        pp = pcfg.model_copy(update={"perturb": person_vars})
        rec = pres.cells.record_cell
        ident = unique_identities(*all_identities(frame, rec, pres, pp))
        out, dp = apply_perturbations(frame, out, pp, seed, identity=ident)
        done.update({d.variable: d for d in dp})
    return out, [done[v] for v in config.perturb if v in done]


def _person_stage(frame: pd.DataFrame, config: ReleaseConfig, pcfg: ReleaseConfig,
                  seed: int) -> tuple[ReleaseResult, tuple[int, int]]:
    """The person stage: NZY of the persons under ``pcfg`` (PRBs inside household-key
    classes). When a class has fewer than kmin sensitive person cells no PRB inside it can be
    certified (a one-person household alone in its household cell, say): unless
    ``small_blocks: fail``, such classes are left out of the person stage (their persons keep
    their person keys; the household stage still randomizes their household keys) and counted.
    Returns the result over every person and (small classes, their persons)."""
    hk = config.household_keys

    def fix(e: Exception) -> SmallBlockError:
        return SmallBlockError(
            f"person stage (person PRBs inside the values of the household keys {hk}, so that "
            f"members stay consistent): {e}. Coarsen the person keys' partition (wider bands), "
            "add person partition variables to merge along, or use fewer household-level keys")

    part = partition_frame(frame, pcfg)
    keys = pcfg.key_names
    n_small, rec_small = small_classes(part, config)
    not_checked = (config.input.household_id, *config.input.household_columns,
                   *(config.perturb or {}), *config.derived)
    if n_small == 0 or config.risk.small_blocks == "fail":
        try:
            return release_frame(frame, pcfg, seed, not_checked=not_checked,
                                 pair_kinds={}), (0, 0)
        except SmallBlockError as e:
            raise fix(e) from None
    keep = np.flatnonzero(~rec_small)
    # the kept classes' cell table is the full one restricted (small classes are unions of
    # cells): partition_frame of the kept persons without counting them again
    full = part.cells
    kept_cells = np.flatnonzero(np.bincount(full.record_cell[keep], minlength=full.n_cells))
    remap = np.full(full.n_cells, -1, dtype=np.int64)
    remap[kept_cells] = np.arange(kept_cells.size, dtype=np.int64)
    sub_cells = CellTable(remap[full.record_cell[keep]], full.key_codes[kept_cells],
                          full.frequency[kept_cells], list(full.names))
    persons = frame.iloc[keep]
    try:
        sub_plan = plan_release(partition_cells(sub_cells, pcfg), pcfg)
        checked = persons.drop(columns=[c for c in not_checked if c in persons.columns])
        figures = frame_dependence(checked, sub_plan, pcfg, {})
        raise_if_dependent(figures, sub_plan, pcfg)
        sub = apply_plan(persons, dataclasses.replace(sub_plan, dependence=figures), pcfg, seed)
    except SmallBlockError as e:
        raise fix(e) from None
    # the result over every person: the left-out classes have no PRB and do not move
    sizes = [pcfg.key_variables[k].size for k in keys]
    cells = part.cells
    sub_map = row_index(cells.key_codes, sub.cells.key_codes, sizes)
    released = cells.record_cell.copy()
    released[keep] = sub_map[sub.released_cell]
    cell_prb = np.full(cells.n_cells, -1, dtype=np.int64)
    cell_prb[sub_map] = sub.cell_prb
    ps_frame = partition_sets_with_prbs(part, sub.partition_sets, pcfg)
    out = frame.drop(columns=list(pcfg.input.drop))
    for k in pcfg.person_keys:
        col = out[k].to_numpy(copy=True)
        new = sub.frame[k].to_numpy()
        if col.dtype != new.dtype:
            col = col.astype(object)
        col[keep] = new
        out[k] = pd.Series(col, index=out.index, name=k).astype(frame[k].dtype)
    pres = ReleaseResult(out, sub.blocks, sub.certificate, sub.certificate_at, sub.xi,
                         sub.theta, sub.kmin, ps_frame, cells, part.cell_partition_set,
                         cell_prb, released, sub.merges, [],
                         cell_identity(cells.key_codes, pcfg), sub.prb_identity, pcfg,
                         dependence=list(sub.dependence))
    return pres, (n_small, int(rec_small.sum()))
