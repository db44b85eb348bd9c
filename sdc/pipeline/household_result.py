"""A household release's figures from its two stages (docs/HOUSEHOLDS.md), each rule once:
the certificate of a household file (:func:`household_certificate`), its merges, the plan
``sdc plan`` shows (:class:`HouseholdPlan`), the outcome of the release
(:func:`household_release_result`) and, under ``risk.composition: protect``, the realized
person classes of the changed households (:func:`realized_compositions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable
from sdc.method.household_batches import (
    household_blocks,
    household_partition_sets,
    person_draw_plan,
    released_person_codes,
)
from sdc.method.households import household_config, larger_certificate
from sdc.method.plan import draw_plan
from sdc.pipeline.kernels import ReleaseOutcome

__all__ = ["HouseholdPlan", "expected_changes", "household_certificate", "household_merges",
           "household_release_result", "realized_compositions"]


def household_certificate(ps: Any, hs: Any) -> tuple[float, dict[str, Any]]:
    """A household file's certificate and where it is attained: the larger of the person
    stage's (``ps.plan``: max over person PRBs inside the household keys' values) and the
    household stage's (``hs.plan``: max over household PRBs and non-sensitive household
    cells), max_j,a R_j(a, t) over both; under ``risk.composition: protect`` the composition
    stage's (``hs.composition``), which certifies both at once."""
    if hs.composition is not None:
        cs = hs.composition
        return float(cs.certificate), dict(cs.certificate_at)
    p, h = ps.plan, hs.plan
    cert, at = larger_certificate((float(p.certificate), p.certificate_at),
                                  (float(h.certificate), h.certificate_at))
    return cert, dict(at)


def household_merges(ps: Any, hs: Any) -> list[str]:
    """The small-block merges of both stages, the household stage's named so."""
    return list(ps.plan.merges) + [f"household stage: {m}" for m in hs.plan.merges]


def realized_compositions(config: ReleaseConfig, k: Any, parts: list) -> dict[str, np.ndarray]:
    """``risk.composition: protect``: the released person class of every person of a changed
    household (:func:`~sdc.method.household_composition.realize_compositions` on them, ties
    of identity broken by the global row) and their released key codes (``k``: the count
    pass merged, with both stages planned)."""
    from sdc.method.household_composition import realize_compositions

    rows, cell, hrow, ident = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.argsort(rows, kind="stable")
    rows, cell, hrow, ident = rows[order], cell[order], hrow[order], ident[order]
    pk = [config.key_names.index(v) for v in config.person_keys]
    sizes = [int(config.key_variables[v].size) for v in config.person_keys]
    from sdc.method.cells import combine_codes

    cls = combine_codes(k.cells.key_codes[cell][:, pk].T, sizes, cell.size)
    tab = k.hs.composition_table
    before = tab.counts[tab.household]
    after = tab.counts[k.hs.composition.released_composition]
    # identities tie only for identical persons: rank them by global row (any order of
    # identical records gives the same public rows)
    tie = np.empty(rows.size, dtype=np.int64)
    tie[np.lexsort((rows, ident, hrow))] = np.arange(rows.size)
    new = realize_compositions(hrow, cls, tie.astype(np.uint64), before, after, tab.group,
                               tab.band, tab.banded_households())
    codes = released_person_codes(cell, hrow, np.zeros(0, np.uint64), k.cells, k.ps, k.hs,
                                  config, 0, rows, (rows, new))
    return {"rows": rows, "classes": new, "codes": codes}


@dataclass
class HouseholdPlan:
    """What ``sdc plan`` of a household file shows on a batch engine (:func:`plan_households`):
    the counted person cells, both stages' plans (``hs``, ``ps``, dependence checked) and the
    aggregate of the households."""

    config: ReleaseConfig
    n_records: int
    cells: CellTable
    hs: Any
    ps: Any
    agg: Any

    @property
    def cell_prb(self) -> np.ndarray:
        return person_draw_plan(self.ps, self.cells, self.config).cell_prb

    @property
    def partition_sets(self) -> pd.DataFrame:
        ident = np.arange(self.cells.n_cells, dtype=np.int64)
        return household_partition_sets(self.cells, self.ps, self.cells, ident, self.config)[1]

    @property
    def household_blocks(self) -> pd.DataFrame:
        return household_blocks(self.hs, self.config)

    @property
    def certificate(self) -> tuple[float, dict[str, Any]]:
        """The larger of the two stages' certificates and where it is attained
        (``risk.composition: protect``: the composition stage's)."""
        return household_certificate(self.ps, self.hs)

    @property
    def merges(self) -> list[str]:
        return household_merges(self.ps, self.hs)


def household_release_result(config, seed, agg, hs, ps, cells, table, orig, cell_prb, ident,
                             cell, row, rel, weights, dtypes, n, schema, files, acc,
                             records_file) -> ReleaseOutcome:
    """The combined figures (each rule once) and the
    households sections' parts."""
    from types import SimpleNamespace

    from sdc.reports.households import household_section_of

    hcfg = household_config(config)
    pk = [config.key_names.index(k) for k in config.person_keys]
    moved = (table.key_codes[rel][:, pk] != cells.key_codes[cell][:, pk]).any(axis=1)
    full_prb = person_draw_plan(ps, cells, config).cell_prb
    blocks = ps.plan.blocks.copy()
    moved_prb = full_prb[cell[moved]]  # protect: persons move with their household only
    blocks["changed"] = np.bincount(moved_prb[moved_prb >= 0],
                                    minlength=len(blocks)).astype(np.int64)
    cell_ps, ps_frame = household_partition_sets(cells, ps, table, orig, config)
    cert, cert_at = household_certificate(ps, hs)
    part = ps.plan.partitioned
    hblocks = household_blocks(hs, config)
    h_cert, h_cert_at = float(hs.plan.certificate), hs.plan.certificate_at
    p_cert, p_cert_at = float(ps.plan.certificate), ps.plan.certificate_at
    comp = _composition_risk(config, seed, agg, hs, ps, cells, cell, ident, row, cert, cert_at)
    if hs.composition is not None:  # risk.composition: protect: no person PRB; the person
        # level is certified exactly from the composition stage (issue 44)
        h_cert, h_cert_at = cert, cert_at
        p_cert = float(comp["person"]["certificate"])
        p_cert_at = comp["person"]["certificate_at"]
    stage_result = SimpleNamespace(
        certificate=h_cert, certificate_at=h_cert_at,
        merges=list(hs.plan.merges), dependence=list(hs.plan.dependence), blocks=hblocks,
        partition_sets=hs.plan.partition_sets, cells=hs.plan.partitioned.cells,
        cell_prb=hs.plan.cell_prb, near=getattr(hs.plan, "near", None),
        # the stage whose m_j and W audit.json records (the composition stage under protect)
        plan=hs.plan if hs.composition is None else hs.composition.plan,
        design_config=hcfg if hs.composition is None else hs.composition.config)
    e_changed, var_changed = expected_changes(config, hs, ps, cells, cell, row)
    stage = SimpleNamespace(
        config=hcfg, result=stage_result, n_households=agg.n_households, changed=hs.changed,
        expected_changed=e_changed, expected_changed_var=var_changed, design=hs.design,
        certificate=h_cert, person_certificate=p_cert,
        person_certificate_at=p_cert_at, small_classes=ps.small_classes,
        small_class_persons=ps.small_class_persons, composition=comp)
    section = household_section_of(
        config, orig[cell], rel, row, agg.n_households, weights, comp,
        households_changed=int(hs.changed.sum()),
        household_certificate=h_cert,
        household_certificate_at=h_cert_at, household_prbs=len(hblocks),
        person_certificate=p_cert, small_classes=ps.small_classes,
        small_class_persons=ps.small_class_persons)
    if agg.left_out is not None:  # risk.exposed_sizes: drop (docs/HOUSEHOLDS.md)
        left = agg.left_out
        section["left_out"] = left.record(agg.n_households + left.households,
                                          n + left.persons)
        section["message"] += "; " + left.text(n + left.persons)
    utility = _household_utility(config, agg, hs, ps, cells, cell, row, weights, dtypes,
                                 table, rel)
    return ReleaseOutcome(
        blocks=blocks, cells=table, cell_prb=cell_prb, cell_partition_set=cell_ps,
        partition_sets=ps_frame, certificate=float(cert), certificate_at=cert_at, xi=part.xi,
        theta=part.theta, kmin=part.kmin,
        merges=household_merges(ps, hs),
        dependence=list(ps.plan.dependence), n_records=n,
        n_changed=int((rel != orig[cell]).sum()), schema=schema, households=stage,
        household_report={"risk": section, "utility": utility}, files=files,
        accumulator=acc, records_file=records_file, plan=ps.plan, config=config)


def expected_changes(config: ReleaseConfig, hs: Any, ps: Any, cells: CellTable,
                     cell: np.ndarray, row: np.ndarray) -> tuple[float, float]:
    """(E, Var) of the persons a household release changes, seed-free
    (:mod:`sdc.method.expected_changes`): under ``risk.composition: protect`` the composition
    stage's exact figure, else both stages' independent moves (``cell``: each person's cell
    in ``cells``, ``row``: its household row)."""
    from sdc.method.expected_changes import cell_move_probability, two_stage_changes
    from sdc.method.household_composition import expected_persons_changed

    if hs.composition is not None:
        return expected_persons_changed(hs.composition, hs.composition_table)
    m_h = cell_move_probability(draw_plan(hs.plan, household_config(config)))[hs.cell]
    m_p = cell_move_probability(person_draw_plan(ps, cells, config))[cell]
    return two_stage_changes(m_h, m_p, row)


def _composition_risk(config: ReleaseConfig, seed: int, agg: Any, hs: Any, ps: Any,
                      cells: CellTable, cell: np.ndarray, ident: np.ndarray, row: np.ndarray,
                      cert: float, cert_at: dict[str, Any]) -> Any:
    """The composition intruder's risk: under ``risk.composition: protect`` the protected
    stage's (its certificate ``cert``), else from both stages' draws."""
    from sdc.reports.households import (
        StageDraws,
        composition_risk_of,
        protected_composition_risk,
    )

    if hs.composition is not None:  # risk.composition: protect
        return protected_composition_risk(agg.identity, agg.key_codes, hs.composition_table,
                                          config, seed, certificate=(cert, cert_at),
                                          weight=agg.weight, planned=hs.composition_planned,
                                          design=hs.design)
    h_draws = StageDraws(draw_plan(hs.plan, household_config(config)),
                         hs.plan.partitioned.cells.key_codes, hs.cell, hs.identity)
    p_draws = StageDraws(person_draw_plan(ps, cells, config), cells.key_codes, cell, ident)
    comp = composition_risk_of(h_draws, p_draws, row, agg.n_households, config, seed)
    if hs.design.large_groups is not None:  # the threat model of large groups (METHOD 7.15)
        from sdc.reports.households import with_large_groups

        comp = with_large_groups(comp, h_draws, p_draws, row, agg.n_households, config,
                                 hs.design)
    return comp


def _household_utility(config: ReleaseConfig, agg: Any, hs: Any, ps: Any, cells: CellTable,
                       cell: np.ndarray, row: np.ndarray, weights: np.ndarray | None,
                       dtypes: dict[str, Any], table: CellTable | None = None,
                       rel: np.ndarray | None = None) -> dict[str, Any]:
    """The households utility section: the household keys' values before and after, by
    household size; with weights the exact expected totals of both stages' designs."""
    from sdc.reports.households import household_utility_of

    kvs = config.key_variables
    keys = config.household_keys

    def values(codes: np.ndarray, k: str, j: int) -> pd.Series:
        return pd.Series(np.asarray(kvs[k].domain, dtype=object)[codes[:, j]]).astype(dtypes[k])

    utility = household_utility_of({k: values(agg.key_codes, k, j) for j, k in enumerate(keys)},
                                   {k: values(hs.released_codes, k, j)
                                    for j, k in enumerate(keys)}, agg.size, hs.changed)
    if config.utility.household_income is not None:  # issue 44: the survey's analyses
        persons = None
        if table is not None and rel is not None:  # by person key: the persons' cells
            persons = _persons(config, agg, cells, cell, row, table, rel, weights)
        utility["survey"] = _survey(config, agg, hs,
                                    {k: values(agg.key_codes, k, j) for j, k in enumerate(keys)},
                                    {k: values(hs.released_codes, k, j)
                                     for j, k in enumerate(keys)}, persons)
    if weights is not None:  # exact expected totals of both stages' designs
        from sdc.method.household_weights import household_expected_totals

        utility["expected_totals"] = household_expected_totals(config, agg, hs, ps, cells, cell,
                                                               row, weights)
    return utility


def _persons(config: ReleaseConfig, agg: Any, cells: CellTable, cell: np.ndarray,
             row: np.ndarray, table: CellTable, rel: np.ndarray,
             weights: np.ndarray | None) -> Any:
    """The survey's persons (:class:`sdc.reports.survey.Persons`): household rows, person-key
    values before (``cell`` in ``cells``) and after (``rel`` in ``table``), and their own
    weights when the weight is not one per household (else the household's, by row)."""
    from sdc.reports.survey import Persons

    kvs = config.key_variables
    before, after = {}, {}
    for k in config.person_keys:
        j = config.key_names.index(k)
        dom = np.asarray(kvs[k].domain, dtype=object)
        before[k] = dom[cells.key_codes[cell, j]]
        after[k] = dom[table.key_codes[rel, j]]
    w = config.input.weight
    own = None
    if weights is not None and not (w is not None and agg.columns is not None
                                    and w in agg.columns):
        own = np.asarray(weights, float)
    return Persons(np.asarray(row, np.int64), before, after, own, own)


def _survey(config: ReleaseConfig, agg: Any, hs: Any, before: dict[str, pd.Series],
            after: dict[str, pd.Series], persons: Any = None) -> dict[str, Any]:
    """utility.json ``households.survey`` (:mod:`sdc.reports.survey`) on the household table:
    the household weight before and after (recalibrated: its released value), else the
    members' mean weight (``risk.weighted``), else 1."""
    from sdc.reports.survey import household_survey_figures

    w = config.input.weight
    size = np.asarray(agg.size, float)
    if w is not None and agg.columns is not None and w in agg.columns:
        wb = pd.to_numeric(agg.columns[w], errors="coerce").to_numpy(float)
        wa = wb
        if config.input.weight_release == "recalibrated":
            from sdc.method.household_exposed import left_margins
            from sdc.method.recalibrate import recalibrated_weights, size_top

            wa = recalibrated_weights(agg.key_codes, hs.released_codes, agg.size, wb, w,
                                      size_top(hs.design.large_groups), left_margins(agg))
    elif agg.weight is not None:
        wb = wa = np.asarray(agg.weight, float) / size
    else:
        wb = wa = np.ones(size.size)
    inc = config.utility.household_income
    return household_survey_figures(agg.columns[inc].to_numpy(), size, wb, wa, before, after,
                                    inc, persons)

