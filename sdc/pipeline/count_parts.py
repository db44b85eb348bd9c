"""What the count pass of a person file (:mod:`sdc.pipeline.release`) and of a household file
(:mod:`sdc.pipeline.household_count`) share: a batch's part (:class:`CountPart`: its rows,
identities, problems or cell counts, value ranges, largest weight, ``perturb:`` and
``derived:`` values), the parts merged in input order (:class:`CountMerge`) and the refusal
that lists every problem of the whole file (:func:`raise_problems`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.spill import IdentitySpill
from sdc.method.cell_passes import CellCounter
from sdc.method.derived import DerivedCollector
from sdc.method.draws import record_identity
from sdc.method.perturb import PerturbValues
from sdc.pipeline.kernels import Problems, batch_problems
from sdc.reports.utility import finite_values

__all__ = ["CountMerge", "CountPart", "PlacedParts", "raise_problems"]


@dataclass
class CountPart:
    """One batch's part of a count pass: its ``n`` rows from global row ``offset``, its
    identities (``ident``, with an id column), and either its pandera ``problems`` or its
    cells' ``codes`` and ``counts``, the ``ranges`` of the measured columns, the largest
    weight and the ``perturb:`` and ``derived:`` values."""

    n: int
    offset: int
    ident: np.ndarray | None
    problems: pd.DataFrame | None = None
    codes: np.ndarray | None = None
    counts: np.ndarray | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    weight_max: float = 0.0
    perturb: dict[str, PerturbValues] = field(default_factory=dict)
    derived: DerivedCollector | None = None
    #: its identities' sorted run of the id check's sort (:func:`sdc.pipeline.order.packed_run`)
    run: np.ndarray | None = None

    @classmethod
    def start(cls, frame: pd.DataFrame, config: ReleaseConfig, validate: bool) -> CountPart:
        """The part of ``frame`` with its rows and identities, and its problems when
        ``validate`` finds some (then nothing else is counted)."""
        id_col = config.input.id_column
        ident = (np.asarray(record_identity(frame, config), dtype=np.uint64)
                 if id_col is not None and id_col in frame.columns else None)
        part = cls(len(frame), int(frame.index[0]) if len(frame) else 0, ident)
        problems = batch_problems(frame, config) if validate else None
        if problems is not None and len(problems):
            part.problems = problems
        return part

    def measure(self, frame: pd.DataFrame, measure: list[str], weight: str | None) -> None:
        """Record the smallest and largest finite value of every ``measure`` column and the
        largest ``|weight|``."""
        for col in measure:
            x = finite_values(frame[col])
            if len(x) and not np.isnan(x).all():
                self.ranges[col] = (float(np.nanmin(x)), float(np.nanmax(x)))
        if weight is not None and len(frame):
            self.weight_max = float(np.abs(frame[weight].to_numpy(float)).max())


class PlacedParts:
    """A per-record array of every part, each placed at its rows in one array of ``n`` as the
    parts arrive (the parallel phase of a pass), instead of concatenated after it (a fresh
    array of 8 bytes a record, page-faulted on the pass's serial tail); the one part of a
    whole file is kept as is. :meth:`result` is None when ``n`` was None, a part had no array,
    or the parts do not fill the ``n`` rows."""

    def __init__(self, n: int | None) -> None:
        self.n, self.array, self.filled = n, None, 0

    def add(self, at: int, values: np.ndarray | None) -> None:
        """Place a part's ``values`` at rows ``at``..."""
        if self.n is None:
            return
        if values is None or at + values.size > self.n:
            self.n = self.array = None
        elif at == 0 and values.size == self.n:  # the whole file's part: no copy
            self.array, self.filled = values, values.size
        else:
            if self.array is None:
                self.array = np.empty(self.n, values.dtype)
            self.array[at:at + values.size] = values
            self.filled += values.size

    def result(self) -> np.ndarray | None:
        """The array of every row (None: see the class)."""
        return self.array if self.n is not None and self.filled == self.n else None


class CountMerge:
    """The parts of a count pass merged in input order: the rows, the identities (into one
    preallocated array when the row count ``n_known`` is known, 8 bytes a record, or to
    files, ``spill``), every
    batch's problems and, while no batch has problems, the cell counts, ``perturb:`` and
    ``derived:`` values, value ranges and largest weight."""

    def __init__(self, perturb: dict[str, PerturbValues], derived: DerivedCollector | None,
                 n_known: int | None = None, spill: IdentitySpill | None = None,
                 runs: bool = False) -> None:
        self.n = 0
        self.offsets = [0]  #: the batches' first global rows (the same batches in every pass)
        self.counted = False  #: some batch was counted (not only checked)
        self.counter = CellCounter()
        self.problems = Problems()
        self.perturb, self.derived = perturb, derived
        known = n_known is not None and spill is None
        self.idents: list[np.ndarray] | IdentitySpill = (
            spill if spill is not None else [np.empty(n_known, np.uint64)] if known else [])
        self._filled = 0 if known else None
        #: the parts' sorted identity runs (:attr:`CountPart.run`) at their rows, when
        #: ``runs`` and the row count is known (None: some part had none), set by :meth:`end`
        self.runs: np.ndarray | None = None
        self._runs = PlacedParts(n_known if runs and known else None)
        self._lo: dict[str, float] = {}
        self._hi: dict[str, float] = {}
        self.weight_max = 0.0

    def add(self, part: CountPart) -> bool:
        """Merge ``part``; True when its counts were merged (False: it has problems, or an
        earlier batch had: only its rows, identities and problems are merged)."""
        self.n += part.n
        self.offsets.append(self.n)
        if part.ident is not None:
            if self._filled is not None:
                self.idents[0][self._filled:self._filled + part.ident.size] = part.ident
                self._filled += part.ident.size
            else:
                self.idents.append(part.ident)
        self._runs.add(part.offset, part.run)
        if part.problems is not None:
            self.problems.add(part.problems, part.offset)
            return False
        if self.problems.rows:
            return False
        self.counted = True
        self.counter.add_counts(part.codes, part.counts)
        for v, pv in part.perturb.items():
            self.perturb[v].merge(pv)
        if self.derived is not None:
            self.derived.merge(part.derived)
        for c, (a, b) in part.ranges.items():
            self._lo[c], self._hi[c] = min(self._lo.get(c, a), a), max(self._hi.get(c, b), b)
        self.weight_max = max(self.weight_max, part.weight_max)
        return True

    def end(self) -> None:
        """After the last part: the preallocated identities cut to those filled."""
        if self._filled is not None:
            self.idents[0] = self.idents[0][:self._filled]
        self.runs = self._runs.result()

    def ranges(self) -> dict[str, tuple[float, float]]:
        """``{column: (smallest, largest)}`` over the merged parts."""
        return {c: (self._lo[c], self._hi[c]) for c in self._lo}


def raise_problems(problems: Problems, config: ReleaseConfig, checked: str) -> NoReturn:
    """Raise :class:`InputError` listing every problem of the whole file (1-based data rows);
    ``checked``: how the input was checked ("in batches"; empty: as one frame)."""
    from sdc.io.schemas import render_problems

    table = problems.table()
    k = len(table)
    raise InputError(
        f"the input of {config.name!r} does not match the config ({k} problem"
        f"{'s' if k != 1 else ''}; rows are 1-based data rows, the header not counted"
        f"{'; checked ' + checked if checked else ''}):\n"
        f"{render_problems(table)}")
