"""The person stage of a household file on the cell table (docs/HOUSEHOLDS.md, "Engines"):
its plan (:func:`person_stage`, the weighted design inside its PRBs under ``risk.weighted``),
its draw plan over the full cell table and the drawing persons' identities. Split from
:mod:`sdc.method.household_batches`, which re-exports these names."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import SmallBlockError
from sdc.method.cells import CellTable
from sdc.method.designs import design_of, household_design_of, plan_release
from sdc.method.draws import DrawPlan, cell_identity, draw_tiebreak, record_identity
from sdc.method.household_weights import person_draw_extras
from sdc.method.households import household_classes, person_config
from sdc.method.partition import Partitioned, partition_cells
from sdc.method.plan import ReleasePlan, draw_plan

__all__ = ["PersonStagePlan", "drawing_persons", "person_draw_identities", "person_draw_plan",
           "person_stage", "sub_cell"]


@dataclass
class PersonStagePlan:
    """The person stage planned on a cell table: ``plan`` over the cells of ``kept`` (indices
    into the full cell table: every cell outside the small household-key classes),
    ``cell_small`` per cell of the full table, the number of small classes and their persons."""

    plan: ReleasePlan
    kept: np.ndarray
    cell_small: np.ndarray
    small_classes: int
    small_class_persons: int
    #: ``risk.weighted``: W_j of every cell of the full cell table (persons' weights)
    weight_total: np.ndarray | None = None


def person_stage(cells: CellTable, config: ReleaseConfig,
                 weight_total: np.ndarray | None = None) -> PersonStagePlan:
    """The person stage's plan from the cell table over all keys (t_j in persons): partition
    sets of the household keys' own values x the person partition
    (:func:`~sdc.method.households.person_config`); a household-key class with fewer than
    kmin sensitive person cells is left out (unless ``risk.small_blocks: fail``) and its cells
    keep their persons unchanged, exactly as the household pipeline (:mod:`sdc.pipeline.households`).
    Raises :class:`~sdc.errors.SmallBlockError` as the pandas engine's person stage (without
    its message prefix). ``weight_total`` (``risk.weighted``): W_j of the cells; the kept
    PRBs then get the weighted design (weight groups, m_j = c_g / W_j) and its certificate."""
    pcfg = person_config(config)
    part = partition_cells(cells, pcfg)

    def planned(part: Partitioned, kept: np.ndarray) -> ReleasePlan:
        w = None if weight_total is None else np.asarray(weight_total, np.float64)[kept]
        return plan_release(part, pcfg, w)

    if household_design_of(config).protect:
        # person keys move only with their household's composition (the household stage)
        none = np.zeros(cells.n_cells, dtype=bool)
        plan = plan_release(dataclasses.replace(part, sensitive=none), pcfg,
                            design=design_of(pcfg, weighted=False))
        return PersonStagePlan(plan, np.arange(cells.n_cells, dtype=np.int64), none, 0, 0)
    cell_class, n_cls = household_classes(cells.key_codes, list(pcfg.key_names), config)
    k_class = np.bincount(cell_class[part.sensitive], minlength=n_cls)
    small = (k_class > 0) & (k_class < part.kmin)
    cell_small = small[cell_class]
    n_small = int(small.sum())
    if n_small == 0 or config.risk.small_blocks == "fail":
        kept = np.arange(cells.n_cells, dtype=np.int64)
        return PersonStagePlan(planned(part, kept), kept, cell_small, 0, 0,
                               weight_total)
    kept = np.flatnonzero(~cell_small)
    if kept.size == 0:
        raise SmallBlockError("every household-key class has fewer than kmin sensitive person "
                              "cells: no person PRB can be certified")
    sub = CellTable(np.zeros(0, dtype=np.int64), cells.key_codes[kept], cells.frequency[kept],
                    list(cells.names))
    plan = planned(partition_cells(sub, pcfg), kept)
    return PersonStagePlan(plan, kept, cell_small, n_small,
                           int(cells.frequency[cell_small].sum()), weight_total)


def sub_cell(ps: PersonStagePlan, cell: np.ndarray, n_cells: int) -> np.ndarray:
    """Index in the person stage's (kept) cell table of every person's cell, -1 for the left
    out classes."""
    remap = np.full(n_cells, -1, dtype=np.int64)
    remap[ps.kept] = np.arange(ps.kept.size, dtype=np.int64)
    return remap[np.asarray(cell, dtype=np.int64)]


def person_draw_plan(ps: PersonStagePlan, cells: CellTable, config: ReleaseConfig) -> DrawPlan:
    """The person stage's draw plan on the full cell table ``cells`` (the left-out small
    classes' cells in no PRB), as the pandas engine's person result holds it: its draws of a
    person equal those of the plan on the kept cells, mapped to the full table."""
    pcfg = person_config(config)
    sub = draw_plan(ps.plan, pcfg)
    cell_prb = np.full(cells.n_cells, -1, dtype=np.int64)
    cell_prb[ps.kept] = sub.cell_prb
    return DrawPlan(cell_prb=cell_prb, cell_frequency=np.asarray(cells.frequency, np.int64),
                    cell_id=cell_identity(cells.key_codes, pcfg), prb_theta=sub.prb_theta,
                    **person_draw_extras(sub, ps.kept, cells.n_cells))


def drawing_persons(cell: np.ndarray, ps: PersonStagePlan, cells: CellTable,
                    config: ReleaseConfig) -> np.ndarray:
    """(n,) bool: the persons (``cell``: their cells in the full table ``cells``) that draw in
    the person stage: a kept cell of a person PRB (:func:`person_draw_identities` lists their
    identities in row order)."""
    dplan = draw_plan(ps.plan, person_config(config))
    sub = sub_cell(ps, cell, cells.n_cells)
    return (sub >= 0) & (dplan.cell_prb[np.maximum(sub, 0)] >= 0)


def person_draw_identities(frame: pd.DataFrame, cell: np.ndarray, ps: PersonStagePlan,
                           cells: CellTable, config: ReleaseConfig
                           ) -> tuple[np.ndarray, np.ndarray]:
    """(identity, tiebreak) of the persons of a batch that draw in the person stage (a kept
    cell of a PRB), in row order; ``cell`` indexes the full cell table ``cells``. The executor
    concatenates them over the file and makes them distinct with
    :func:`~sdc.method.draws.unique_identities`, as the pandas engine's person stage does."""
    pcfg = person_config(config)
    dplan = draw_plan(ps.plan, pcfg)
    sub = sub_cell(ps, cell, cells.n_cells)
    drawing = drawing_persons(cell, ps, cells, config)
    ident = record_identity(frame[drawing], pcfg)
    return (np.asarray(ident, np.uint64),
            draw_tiebreak(dplan.cell_id[sub[drawing]], True))
