"""What every executor's release gives the steps after it: one interface, two holders.

The in-memory executor returns :class:`sdc.method.apply.ReleaseResult` (it also holds the
released records), the batch executors :class:`sdc.pipeline.kernels.BatchRelease` (aggregates
only: the records went to the public files batch by batch). The codebook, the internal tables,
the audit record, the uncertainty section and the report tables need only what both hold:
:class:`ReleaseOutcome`. A function typed with it works on every executor's release.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from sdc.method.cells import CellTable

__all__ = ["ReleaseOutcome"]


@runtime_checkable
class ReleaseOutcome(Protocol):
    """The plan's figures and the released counts of a release (never its records).

    ``cells``: the cell table; ``cell_prb`` / ``cell_partition_set``: every cell's PRB (-1: not
    sensitive) and partition set; ``partition_sets`` / ``blocks``: the internal tables (the
    PRB table with ``changed``); ``certificate`` and where it is attained; ``merges`` of small
    blocks; ``dependence`` figures of the non-key columns; ``dp_perturbations`` of ``perturb:``
    variables; ``n_changed`` records whose key values changed.
    """

    @property
    def cells(self) -> CellTable: ...

    @property
    def cell_prb(self) -> np.ndarray: ...

    @property
    def cell_partition_set(self) -> np.ndarray: ...

    @property
    def sensitive_cell(self) -> np.ndarray: ...

    @property
    def partition_sets(self) -> pd.DataFrame: ...

    @property
    def blocks(self) -> pd.DataFrame: ...

    @property
    def xi(self) -> float: ...

    @property
    def theta(self) -> float: ...

    @property
    def kmin(self) -> int: ...

    @property
    def certificate(self) -> float: ...

    @property
    def certificate_at(self) -> dict[str, Any]: ...

    @property
    def merges(self) -> list[str]: ...

    @property
    def dependence(self) -> list: ...

    @property
    def dp_perturbations(self) -> list: ...

    @property
    def n_changed(self) -> int: ...
