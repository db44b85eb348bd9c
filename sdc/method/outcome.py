"""What every executor's release gives the steps after it: one result type.

:class:`ReleaseOutcome` holds the plan's figures and the released counts of a release (the
cell table, PRBs, certificate, merges, dependence figures, DP-PRAM of ``perturb:``
variables, records changed), the files it wrote and the report aggregates; the codebook, the
internal tables, the audit record, the uncertainty section and the reports read it, whatever
executor made it. The library's ``sdc.release_frame`` (the pipeline on one in-memory batch)
also keeps the released records (:class:`ReleasedRecords`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable
from sdc.method.draws import (
    all_identities,
    cell_identity,
    drawing_identities,
    unique_identities,
)
from sdc.method.plan import ReleasePlan

__all__ = ["ReleaseOutcome", "ReleasedRecords"]


@dataclass
class ReleasedRecords:
    """The released records of a release asked to keep them (the library's ``release_frame``):
    every record's cell and released cell (rows of the outcome's cell table) and its public
    columns (no ``record_id``), in input order."""

    record_cell: np.ndarray
    released_cell: np.ndarray
    table: pa.Table

    @classmethod
    def of(cls, parts: list[tuple[np.ndarray, np.ndarray, pa.Table]]) -> ReleasedRecords:
        """The batches' ``(record cell, released cell, table)`` parts, in input order, as one."""
        return cls(np.concatenate([p[0] for p in parts]).astype(np.int64),
                   np.concatenate([p[1] for p in parts]).astype(np.int64),
                   pa.concat_tables([p[2] for p in parts]))


@dataclass
class ReleaseOutcome:
    """The outcome of a release by any executor (the one result type): aggregates only (the
    public files and the records file are written), what the codebook, the internal tables,
    the audit record and the reports read; a household release also fills ``households`` and
    ``household_report`` (:mod:`sdc.pipeline.households`); the library's ``release_frame``
    also keeps the released records (``released``, ``frame``).
    """

    blocks: pd.DataFrame  #: the PRB table with ``changed`` (records changed per PRB)
    cells: CellTable
    cell_prb: np.ndarray
    cell_partition_set: np.ndarray
    partition_sets: pd.DataFrame
    certificate: float
    certificate_at: dict[str, Any]
    xi: float
    theta: float
    kmin: int
    merges: list[str]
    dependence: list
    n_records: int
    n_changed: int
    schema: pa.Schema  #: the public file's schema
    files: dict[str, Path] = field(default_factory=dict)  #: public file name -> written path
    #: the report aggregates (:class:`sdc.reports.accumulate.ReleaseAccumulator`), filled
    accumulator: Any = None
    #: ``internal/records.parquet`` as written (:mod:`sdc.pipeline.records_file`), if asked for
    records_file: Path | None = None
    #: the DP-PRAM of the ``perturb:`` variables (:class:`sdc.method.perturb.DPPerturbation`)
    dp_perturbations: list = field(default_factory=list)
    plan: ReleasePlan | None = None  #: PRBs, theta, certificate (shared planning code)
    released_frequency: np.ndarray | None = None  #: released count S_j of every cell
    #: the public records in public order (``record_id`` first), kept only when
    #: ``output.formats`` asks for SPSS/Stata files (written from one frame by the assembler)
    public_table: pa.Table | None = None
    households: Any = None  #: a household release's stages (the reports' households sections)
    household_report: dict[str, Any] | None = None
    config: ReleaseConfig | None = None
    #: the released records in input order, when the release was asked to keep them
    released: ReleasedRecords | None = None
    #: the released records as a DataFrame (the input's index and columns minus
    #: ``input.drop``; ``release_frame`` only)
    frame: pd.DataFrame | None = None
    #: the count pass as the release merged and planned it (a person file's
    #: :class:`~sdc.pipeline.kernels.CellCount`, a household file's
    #: :class:`~sdc.pipeline.household_result.HouseholdPlan`): what ``sdc audit`` recounts,
    #: taken from the re-derived release instead of counting and planning the source twice
    counted: Any = None

    @property
    def released_cell(self) -> np.ndarray:
        """Per record (input order): its released cell (kept records only)."""
        return self._kept().released_cell

    @property
    def record_cell(self) -> np.ndarray:
        """Per record (input order): its cell (kept records only)."""
        return self._kept().record_cell

    @property
    def changed(self) -> np.ndarray:
        """Per record (input order): did its key values change? (kept records only)"""
        return self.released_cell != self.record_cell

    @property
    def record_prb(self) -> np.ndarray:
        return self.cell_prb[self.record_cell]

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.record_cell]

    @property
    def cell_id(self) -> np.ndarray:
        """:func:`~sdc.method.draws.cell_identity` of every cell (the records file's ids)."""
        return cell_identity(self.cells.key_codes, self.config)

    @property
    def prb_identity(self) -> np.ndarray:
        """The distinct draw identities of the PRB records, in input order (kept records)."""
        return unique_identities(*drawing_identities(self.frame, self.record_cell, self,
                                                     self.config))

    def records_table(self) -> pd.DataFrame:
        """The records file's content in input order (kept records): ``identity`` (the
        record's draw identity, made distinct with PRB records first), ``cell`` and
        ``released`` (:func:`~sdc.method.draws.cell_identity` of its true and released
        cells). Internal only: never published."""
        rec = self.record_cell
        cid = self.cell_id
        ident = unique_identities(*all_identities(self.frame, rec, self, self.config))
        return pd.DataFrame({"identity": ident, "cell": cid[rec],
                             "released": cid[self.released_cell]}, copy=False)

    def _kept(self) -> ReleasedRecords:
        if self.released is None:
            raise ValueError("the release kept no records (only release_frame keeps them)")
        return self.released

    @property
    def sensitive_cell(self) -> np.ndarray:
        return self.cell_prb >= 0

    @property
    def weighted(self) -> Any:
        """The weighted design (:class:`sdc.method.weighted.WeightedDesign`) of a weighted plan,
        else None."""
        return self.plan.weighted if self.plan is not None else None

    @property
    def near(self) -> dict | None:
        """``destinations: near``: what defines every PRB's W (audit.json)."""
        return self.plan.near if self.plan is not None else None

    @classmethod
    def of_plan(cls, plan: ReleasePlan, n_records: int, released_frequency: np.ndarray,
                changed_per_prb: np.ndarray, schema: pa.Schema, **more: Any) -> ReleaseOutcome:
        """The outcome of a release planned as ``plan`` (a person file)."""
        part = plan.partitioned
        blocks = plan.blocks.copy()
        blocks["changed"] = np.asarray(changed_per_prb).astype(np.int64)
        return cls(blocks=blocks, cells=part.cells, cell_prb=plan.cell_prb,
                   cell_partition_set=part.cell_partition_set,
                   partition_sets=plan.partition_sets, certificate=plan.certificate,
                   certificate_at=plan.certificate_at, xi=part.xi, theta=part.theta,
                   kmin=part.kmin, merges=list(plan.merges), dependence=list(plan.dependence),
                   n_records=n_records, n_changed=int(np.sum(changed_per_prb)), schema=schema,
                   plan=plan, released_frequency=released_frequency, **more)
