"""The release's report aggregates, filled batch by batch by the streaming and Dask engines.

Everything ``risk.json`` and ``utility.json`` need from records (:class:`ReleaseAggregates`
and the numeric summaries per category) is a sum over records, so the batch engines fill a
:class:`ReleaseAccumulator` during the passes they already make and add partial accumulators
of Dask tasks with :meth:`ReleaseAccumulator.merge`:

* count pass: ``t_before`` is the cell table's frequency; the largest |weight| fixes the
  exact-sum parameters (:meth:`sdc.reports.exact.ExactSums.params`, which need the number of
  records and the largest magnitude before the first sum);
* apply pass (:meth:`ReleaseAccumulator.add_apply_batch`): ``t_after``, the exact weight sums
  per original and released cell, the moved records as counts per (from, to) cell pair (all
  the reports use of them: how many changed, per key variable and per partition set), and
  per numeric variable the largest |x| and the first radix round of the quartile select
  (:mod:`sdc.reports.quantiles`) for the groups before (original key value) and after
  (released key value) - the after groups as the before groups plus the differences of the
  moved records (``QuantileSelect(mirror=...)``), so every value is counted once per key
  variable, not twice; the released cell of every moved record is kept (global row,
  cell: 16 bytes per moved record) so that later passes need not draw again;
* refinement passes (:meth:`ReleaseAccumulator.add_refine_batch`), only when a numeric
  variable needs one: they read the key and numeric columns of the input again (the released
  cell is the original cell except for the kept moved records - cheaper than re-running the
  draws or reading back the wider, reordered public file), sum the values exactly per cell
  when the apply pass could not (the parameters need the largest |x|) and refine the
  quartile selects until every order statistic is exact.

Known ranges (``ranges``: a Parquet input's statistics, :func:`sdc.io.batches.
input_value_ranges`) make the refinement cheap or unnecessary: the largest |x| is known
before the apply pass, so it sums the values exactly itself, and the select's first digit
starts at the bits in which the values differ (:class:`sdc.reports.quantiles.ImageMap`): an
integer variable of a small range (hours 0..79) is resolved in the apply pass, a float one
needs one refinement pass over few values. The apply pass checks every value against the
range and the range against the values (the smallest and largest must be in the data, so the
exact-sum parameters are those of the data): a column whose statistics are wrong is started
over with the plain float image in the refinement passes, so the figures never depend on
the statistics.

The result is the same for any batching (every sum is exact, every order statistic exact):
the in-memory engine runs the same accumulator on the whole frame as one batch
(:func:`frame_accumulator`).
Numeric "after" values are the input's: the columns a release changes (``perturb:``,
``derived:``) are not summarized on any engine (:func:`sdc.reports.utility.numeric_columns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.reports.aggregate import GroupSummary, ReleaseAggregates
from sdc.reports.exact import ExactSums
from sdc.reports.quantiles import HIST_BINS, ImageMap, QuantileSelect

if TYPE_CHECKING:
    from sdc.reports.analysis import CellMoments

__all__ = ["ReleaseAccumulator", "finite_values", "frame_accumulator", "numeric_columns"]


def finite_values(s: pd.Series) -> np.ndarray:
    """A numeric column's values for the numeric summaries: float64, missing and +-inf as NaN
    (an infinite value is released as collected but left out of means and quartiles, like a
    missing one; every engine reads the summaries' values through this)."""
    x = s.to_numpy(dtype=float, na_value=np.nan)
    inf = np.isinf(x)
    if inf.any():
        x = np.where(inf, np.nan, x)
    return x


def numeric_columns(frame: pd.DataFrame, config: ReleaseConfig) -> list[str]:
    """Numeric columns that are not keys, ids (the household id too), dropped identifiers or
    the weight, nor columns the release recomputes (``derived:``: a function of the keys, whose change is the keys'
    change in the key tables) or randomizes (``perturb:``: reported in its own section).
    Every engine summarizes the same columns: the batch engines' accumulators assume a
    column's values are the input's, before and after."""
    skip = set(config.key_names) | set(config.input.drop)
    skip |= set(getattr(config, "derived", None) or []) | set(config.perturb or {})
    skip |= {c for c in (config.input.id_column, config.input.weight,
                         config.input.household_id) if c}   # ids are no quantity
    return [c for c in frame.columns
            if c not in skip and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]



class ReleaseAccumulator:
    """Report aggregates of one release, added up over batches (see the module docstring).

    Parameters
    ----------
    key_codes : (C, K) int
        The key codes of every cell (the cell table).
    t_before : (C,) int64
        Records per original cell (the cell table's frequency).
    sizes : list of int
        Number of categories of every key variable.
    weight_max : float or None
        Largest |weight| over the file (None: no weight column).
    numeric : list of str
        The numeric non-key variables (:func:`sdc.reports.utility.numeric_columns`).
    ranges : dict, optional
        ``{variable: (low, high, integer-typed)}``: bounds of some numeric variables known
        before the apply pass (checked against the data, see the module docstring).
    """

    def __init__(self, key_codes: np.ndarray, t_before: np.ndarray, sizes: list[int],
                 weight_max: float | None, numeric: list[str],
                 ranges: dict[str, tuple[float, float, bool]] | None = None) -> None:
        self.key_codes = np.asarray(key_codes)
        self.t_before = np.asarray(t_before, dtype=np.int64)
        self.n_records = int(self.t_before.sum())
        self.n_cells = int(self.t_before.size)
        self.sizes = [int(s) for s in sizes]
        self.numeric = list(numeric)
        self.t_after = np.zeros(self.n_cells, dtype=np.int64)
        self.params = (None if weight_max is None
                       else ExactSums.params(self.n_records, float(weight_max)))
        self.w = np.zeros((4, self.n_cells)) if self.params else None  # hi/lo before, after
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []
        self.moved_rows: list[np.ndarray] = []
        self.moved_cells: list[np.ndarray] = []
        total = sum(self.sizes)
        # flat group of every cell under (side, key j): before groups first, then after
        off = np.concatenate(([0], np.cumsum(self.sizes)[:-1])).astype(np.int64)
        self.n_groups = 2 * total
        #: every cell's code of key j (its group within key j's range), in the smallest
        #: integer type (the records' codes are gathered from it once per batch)
        self.key_local = [np.ascontiguousarray(self.key_codes[:, j],
                                               dtype=np.uint16 if s <= 1 << 16 else np.int64)
                          for j, s in enumerate(self.sizes)]
        self.total = total
        self.group_ranges = [(int(o), int(o) + s) for o, s in zip(off, self.sizes, strict=True)]
        self.hist_bins = max(HIST_BINS // max(len(self.numeric), 1), 1 << 10)
        ranges = ranges or {}
        self.maps = {c: (ImageMap.of_range(*ranges[c]) if c in ranges else ImageMap())
                     for c in self.numeric}
        self.select = {c: self._new_select(c) for c in self.numeric}
        self.max_abs = {c: 0.0 for c in self.numeric}
        #: per column: exact-sum parameters of x and of x^2, and per cell (rows) the limbs
        #: of sum x before/after (0:4), of sum x^2 before/after (4:8) and the counts of
        #: non-missing values before/after (8:10): the sufficient statistics of the mean
        #: shifts and of the regressions on the keys (:mod:`sdc.reports.analysis`)
        self.x_params: dict[str, tuple[int, int]] = {}
        self.x2_params: dict[str, tuple[int, int]] = {}
        self.x_sums: dict[str, np.ndarray] = {}
        #: the analyses of ``utility.analyses`` (:class:`sdc.reports.formulas.FormulaSums`),
        #: set by the caller (:func:`frame_accumulator`, :func:`sdc.pipeline.report_parts.
        #: new_accumulator`) and fed by :meth:`add_analysis_batch`
        self.analyses: list[Any] = []
        #: per column: every value seen is 0 or 1 (a 0/1 outcome: shifts in points)
        self.binary = {c: True for c in self.numeric}
        # a known range gives the exact-sum parameters now: the apply pass sums the values
        for c, m in self.maps.items():
            if not m.identity:
                self._start_sums(c, max(abs(m.low), abs(m.high)))
        #: columns whose sums the first refinement pass makes (set by start_refinement)
        self.sums_pending: set[str] = set()
        #: smallest and largest image seen per column with a known range, and the columns
        #: with a value outside it (their select and sums start over in the refinement)
        self.seen: dict[str, tuple[int, int]] = {}
        self.outside: set[str] = set()
        self.refine_pass = 0

    def _start_sums(self, c: str, max_abs: float) -> None:
        """Exact-sum parameters of column c (its largest |x| known) and empty sums."""
        self.x_params[c] = ExactSums.params(self.n_records, max_abs)
        # x^2 <= max_abs^2 (capped where it would overflow: those sums become NaN, null)
        self.x2_params[c] = ExactSums.params(self.n_records, min(max_abs * max_abs, 1e300))
        self.x_sums[c] = np.zeros((10, self.n_cells))

    def _new_select(self, c: str) -> QuantileSelect:
        return QuantileSelect(self.n_groups, hist_bins=self._bins(c), mirror=self.total,
                              image_map=self.maps[c])

    def _bins(self, c: str) -> int:
        """Counters of column c's first round: ``hist_bins``, fewer for a small file. A
        select counts ``v = 2 K n`` values (K keys, before and after); with at least
        ``2^ceil(log2 v)`` counters the second round collects (v <= ``COLLECT_VALUES``), and
        with ``G 2^(64 - known)`` the first round resolves an image of ``64 - known <= 16``
        unknown bits at once, as with all counters: the same rounds, the same exact
        quartiles, without touching 64 MB per release of a few thousand records."""
        values = 2 * len(self.sizes) * self.n_records
        need = max(1 << 10, 1 << max(values - 1, 0).bit_length())
        unknown = 64 - self.maps[c].known_bits
        if unknown <= 16:
            need = max(need, self.n_groups << unknown)
        return min(self.hist_bins, need)

    # -- Dask: partial accumulators ------------------------------------------------------------
    def spawn(self) -> ReleaseAccumulator:
        """An empty accumulator of the same release and stage (filled by one task)."""
        new = object.__new__(ReleaseAccumulator)
        new.__dict__.update(self.__dict__)
        new.t_after = np.zeros_like(self.t_after)
        new.w = None if self.w is None else np.zeros_like(self.w)
        new.pairs, new.moved_rows, new.moved_cells = [], [], []
        new.select = {c: s.spawn() for c, s in self.select.items()}
        new.max_abs = {c: 0.0 for c in self.numeric}
        new.x_sums = {c: np.zeros_like(v) for c, v in self.x_sums.items()}
        new.seen, new.outside = {}, set()
        new.binary = {c: True for c in self.numeric}
        new.analyses = [a.spawn() for a in self.analyses]
        return new

    def merge(self, other: ReleaseAccumulator) -> None:
        """Add a partial accumulator made by :meth:`spawn` (any order)."""
        self.t_after += other.t_after
        if self.w is not None:
            self.w += other.w
        self.pairs += other.pairs
        self.moved_rows += other.moved_rows
        self.moved_cells += other.moved_cells
        for c in self.numeric:
            self.select[c].merge(other.select[c])
            self.max_abs[c] = max(self.max_abs[c], other.max_abs[c])
            if c in self.x_sums:
                self.x_sums[c] += other.x_sums[c]
            self.binary[c] = self.binary[c] and other.binary[c]
            if c in other.seen:
                self._see(c, *other.seen[c])
        self.outside |= other.outside
        for a, b in zip(self.analyses, other.analyses, strict=True):
            a.merge(b)
        self._compact_pairs()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    # -- apply pass ----------------------------------------------------------------------------
    def add_apply_batch(self, rows: np.ndarray | None, record_cell: np.ndarray,
                        released_cell: np.ndarray, weights: np.ndarray | None,
                        values: dict[str, np.ndarray]) -> None:
        """One batch of the apply pass: ``rows`` its global row numbers (None: 0..n-1, the
        whole file), ``weights`` its weight column (or None), ``values[c]`` every numeric
        variable as float64 (NaN missing).
        """
        rc = np.asarray(record_cell, dtype=np.int64)
        rel = np.asarray(released_cell, dtype=np.int64)
        after = np.bincount(rel, minlength=self.n_cells)
        self.t_after += after
        moved = np.flatnonzero(rel != rc)
        # the cells' counts and the moved records of the whole batch, once for every column
        # without missing values (not once per column)
        whole: list = [None, after, moved]
        if moved.size:
            pair, cnt = np.unique(rc[moved] * self.n_cells + rel[moved], return_counts=True)
            self.pairs.append((pair, cnt.astype(np.int64)))
            self.moved_rows.append(moved if rows is None
                                   else np.asarray(rows, dtype=np.int64)[moved])
            self.moved_cells.append(rel[moved])
            if len(self.pairs) > 64:
                self._compact_pairs()
        if self.w is not None and weights is not None:
            self._sums_by_cell(self.w, np.asarray(weights, dtype=np.float64), self.params,
                               rc, rel, moved)
        local_all = None
        for c in self.numeric:
            m = self.maps[c]
            keep, u, inside = m.images(values[c])
            x = np.asarray(values[c], dtype=np.float64)[keep]
            if x.size:
                self.max_abs[c] = max(self.max_abs[c], float(np.abs(x).max()))
                if self.binary[c]:
                    self.binary[c] = bool(np.all((x == 0.0) | (x == 1.0)))
            if c in self.outside:
                continue
            if not inside:  # the statistics do not bound the data: start over later
                self.outside.add(c)
                continue
            every = u.size == rc.size  # no missing value: no copies of the cell columns
            rck, relk = (rc, rel) if every else (rc[keep], rel[keep])
            if not m.identity and u.size:
                self._see(c, int(u.min()), int(u.max()))
                if every and whole[0] is None:
                    whole[0] = np.bincount(rc, minlength=self.n_cells)
                self._sum_values(c, x, rck, relk, whole if every else None)
            local = None
            if self.select[c].round == 1 and not self.select[c].done:
                # the records' key codes, gathered once per batch for all the columns
                if local_all is None:
                    local_all = [k[rc] for k in self.key_local]
                local = local_all if every else [k[keep] for k in local_all]
            self._select_add(c, rck, relk, u, local, moved if every else None)

    def add_analysis_batch(self, frame: pd.DataFrame, record_cell: np.ndarray,
                           released_cell: np.ndarray, config: ReleaseConfig) -> None:
        """One batch of the apply pass for the ``utility.analyses`` formulas: ``frame`` its
        input rows, in the order of ``record_cell`` / ``released_cell``."""
        if not self.analyses:
            return
        cells = (np.asarray(record_cell, dtype=np.int64),
                 np.asarray(released_cell, dtype=np.int64))
        for a in self.analyses:
            a.add(frame, config, self.key_codes, cells)

    def _see(self, c: str, lo: int, hi: int) -> None:
        old = self.seen.get(c)
        self.seen[c] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))

    def _sum_values(self, c: str, x: np.ndarray, rc: np.ndarray, rel: np.ndarray,
                    counted: list | None = None) -> None:
        """Exact sums of the values and of their squares per original and released cell,
        and the number of values per cell; ``counted``: (values per original cell, per
        released cell, moved records) of ``rc`` / ``rel`` when already known."""
        s = self.x_sums[c]
        before, after, moved = counted if counted is not None else (None, None, None)
        if moved is None:
            moved = np.flatnonzero(rel != rc)
        self._sums_by_cell(s[0:4], x, self.x_params[c], rc, rel, moved)
        with np.errstate(over="ignore", invalid="ignore"):
            self._sums_by_cell(s[4:8], x * x, self.x2_params[c], rc, rel, moved)
        s[8] += np.bincount(rc, minlength=self.n_cells) if before is None else before
        s[9] += np.bincount(rel, minlength=self.n_cells) if after is None else after

    def _sums_by_cell(self, s: np.ndarray, w: np.ndarray, params: tuple[int, int],
                      rc: np.ndarray, rel: np.ndarray, moved: np.ndarray) -> None:
        """``s[0:2]`` += the exact limbs of ``w`` summed per original cell, ``s[2:4]`` per
        released cell. The released sums are the original ones with the moved records' limbs
        taken out of their cell and put into their released cell (``np.subtract.at`` /
        ``np.add.at`` on the few moved records instead of a second pass over the batch): every
        partial result is a sum of actual terms, an integer below 2^53, so it is exact and
        equals the direct sum bit for bit."""
        hi, lo = ExactSums.limbs(w, params)
        for k, limb in ((0, hi), (1, lo)):
            b = np.bincount(rc, weights=limb, minlength=self.n_cells)
            s[k] += b
            if moved.size:
                np.subtract.at(b, rc[moved], limb[moved])
                np.add.at(b, rel[moved], limb[moved])
            s[k + 2] += b

    def _select_add(self, c: str, rc: np.ndarray, rel: np.ndarray, u: np.ndarray,
                    local: list[np.ndarray] | None = None,
                    moved: np.ndarray | None = None) -> None:
        """Feed the values ``u`` (images) of records in cells ``rc`` (released: ``rel``) to
        column c's select; ``local``: the first round's per-key codes of ``rc`` if known,
        ``moved``: the positions where ``rel`` differs from ``rc`` if known."""
        sel = self.select[c]
        if sel.done:
            return
        if sel.round == 1:
            # the after groups are the before groups but for the few moved records: count
            # every value once per key variable (before), and for the after groups only the
            # moved records' differences (the select adds the before counts at the round's end)
            digit = sel.first_digits(u)
            if moved is None:
                moved = np.flatnonzero(rel != rc)
            for j, (a, b) in enumerate(self.group_ranges):
                sel.add_first(self.key_local[j][rc] if local is None else local[j], digit,
                              (a, b))
                if moved.size:
                    g_from = self._groups(j, rc[moved])
                    g_to = self._groups(j, rel[moved])
                    ch = g_from != g_to
                    sel.add_signed(g_to[ch] + self.total, u[moved[ch]], 1)
                    sel.add_signed(g_from[ch] + self.total, u[moved[ch]], -1)
            return
        rank = None
        pre = sel.prefilter(u)  # later rounds: only values in some slot's prefix, once
        if pre is not None:
            idx, rank = pre
            rc, rel, u = rc[idx], rel[idx], u[idx]
        for j, (a, b) in enumerate(self.group_ranges):
            sel.add(self._groups(j, rc), u, (a, b), rank)
            sel.add(self._groups(j, rel) + self.total, u, (a + self.total, b + self.total),
                    rank)

    def _groups(self, j: int, cells: np.ndarray) -> np.ndarray:
        """The before group under key j of records in ``cells`` (key j's code + its offset)."""
        g = self.key_local[j][cells].astype(np.int64)
        g += self.group_ranges[j][0]
        return g

    def _compact_pairs(self) -> None:
        if len(self.pairs) > 1:
            p = np.concatenate([a for a, _ in self.pairs])
            c = np.concatenate([b for _, b in self.pairs])
            u, inv = np.unique(p, return_inverse=True)
            self.pairs = [(u, np.bincount(inv, weights=c).astype(np.int64))]

    # -- refinement passes ---------------------------------------------------------------------
    def start_refinement(self) -> bool:
        """End the apply pass; True when refinement passes over the input are needed."""
        if not self.numeric:
            return False
        self.refine_pass = 0
        self.sums_pending = set()
        for c in self.numeric:
            m = self.maps[c]
            # the range must bound the data and be its smallest and largest value: the
            # exact-sum parameters are then the data's, as in the in-memory engine
            if not m.identity and (c in self.outside or self.seen.get(c) != (0, m.span)):
                self.maps[c] = ImageMap()
                self.select[c] = self._new_select(c)  # round 1 in the first refinement pass
                self.x_params.pop(c, None)
                self.x2_params.pop(c, None)
                self.x_sums.pop(c, None)
            else:
                self.select[c].end_round()  # the apply pass counted its first round
            if c not in self.x_params:
                self._start_sums(c, self.max_abs[c])
                self.sums_pending.add(c)
        rows, cells = _joined(self.moved_rows), _joined(self.moved_cells)
        self.moved_rows, self.moved_cells = [], []  # (16 bytes a moved record: freed now)
        if rows.size > 1 and not bool((rows[1:] >= rows[:-1]).all()):
            # (batches in input order, a runner in batches: already sorted, no copy)
            order = np.argsort(rows, kind="stable")
            rows, cells = rows[order], cells[order]
        self.moved_rows, self.moved_cells = [rows], [cells]
        return bool(self.refining)

    @property
    def refining(self) -> list[str]:
        """The numeric variables the current refinement pass reads (sums or a select open)."""
        return [c for c in self.numeric
                if (self.refine_pass == 0 and c in self.sums_pending)
                or not self.select[c].done]

    def released_of(self, rows: np.ndarray, record_cell: np.ndarray) -> np.ndarray:
        """The released cell of records ``rows`` (global rows) whose original cells are
        ``record_cell``: the kept moved records' cells, the original cell otherwise."""
        rel = np.asarray(record_cell, dtype=np.int64).copy()
        mr, mc = self.moved_rows[0], self.moved_cells[0]
        rows = np.asarray(rows, dtype=np.int64)
        if mr.size and rows.size:
            lo, hi = np.searchsorted(mr, [rows.min(), rows.max() + 1])
            if hi > lo:
                pos = np.searchsorted(rows, mr[lo:hi]) if np.all(rows[1:] >= rows[:-1]) \
                    else _positions(rows, mr[lo:hi])
                rel[pos] = mc[lo:hi]
        return rel

    def moved_slice(self, row_lo: int, row_hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The kept moved records of global rows [row_lo, row_hi) (for a Dask task)."""
        mr, mc = self.moved_rows[0], self.moved_cells[0]
        lo, hi = np.searchsorted(mr, [row_lo, row_hi])
        return mr[lo:hi], mc[lo:hi]

    def add_refine_batch(self, rows: np.ndarray | None, record_cell: np.ndarray,
                         values: dict[str, np.ndarray],
                         released_cell: np.ndarray | None = None) -> None:
        """One batch of a refinement pass (same records as the apply pass, any batching;
        ``rows`` may be None when ``released_cell`` is given)."""
        rc = np.asarray(record_cell, dtype=np.int64)
        rel = (self.released_of(rows, rc) if released_cell is None
               else np.asarray(released_cell, dtype=np.int64))
        for c in self.refining:
            keep, u, _ = self.maps[c].images(values[c])  # identity or checked: inside
            rck, relk = rc[keep], rel[keep]
            if self.refine_pass == 0 and c in self.sums_pending:
                self._sum_values(c, np.asarray(values[c], dtype=np.float64)[keep], rck, relk)
            self._select_add(c, rck, relk, u)

    def end_refine_pass(self) -> bool:
        """End a refinement pass; True when another one is needed."""
        self.refine_pass += 1
        more = False
        for sel in self.select.values():
            if not sel.done:
                more = sel.end_round() or more
        return more

    # -- results -------------------------------------------------------------------------------
    def aggregates(self) -> ReleaseAggregates:
        """The :class:`ReleaseAggregates` (moved records as counts per (from, to) pair)."""
        self._compact_pairs()
        pair, cnt = self.pairs[0] if self.pairs else (np.zeros(0, np.int64),
                                                     np.zeros(0, np.int64))
        wb = wa = None
        if self.w is not None:
            b, s = self.params
            wb = ExactSums(self.w[0], self.w[1], b, s)
            wa = ExactSums(self.w[2], self.w[3], b, s)
        return ReleaseAggregates(self.t_before, self.t_after.copy(), wb, wa,
                                 pair // self.n_cells, pair % self.n_cells, self.params,
                                 moved_count=cnt)

    def cell_moments(self) -> dict[str, CellMoments]:
        """Per numeric variable its :class:`sdc.reports.analysis.CellMoments`: count, sum
        and sum of squares per original and released cell (exact sums, so the same on every
        engine and for any batching)."""
        from sdc.reports.analysis import CellMoments

        out = {}
        for c in self.numeric:
            s = self.x_sums[c]
            b, sc = self.x_params[c]
            b2, sc2 = self.x2_params[c]
            out[c] = CellMoments(
                n_before=s[8].astype(np.int64), n_after=s[9].astype(np.int64),
                sum_before=ExactSums(s[0], s[1], b, sc), sum_after=ExactSums(s[2], s[3], b, sc),
                sq_before=ExactSums(s[4], s[5], b2, sc2), sq_after=ExactSums(s[6], s[7], b2, sc2),
                binary=bool(self.binary[c]) and bool(s[8].sum() > 0))
        return out

    def group_summaries(self) -> dict[str, tuple[list[GroupSummary], list[GroupSummary]]]:
        """Per numeric variable: (before, after) :class:`GroupSummary` per key variable (count,
        exact mean, pandas' linearly interpolated quartiles)."""
        out = {}
        for c in self.numeric:
            n, (q1, q2, q3) = self.select[c].quartiles()
            b, s = self.x_params[c]
            sums = self.x_sums[c]
            sides = []
            for side, (k, base) in enumerate(((0, 0), (2, self.total))):
                cell_sums = ExactSums(sums[k], sums[k + 1], b, s)
                per_key = []
                start = base
                for j, size in enumerate(self.sizes):
                    g = slice(start, start + size)
                    start += size
                    nj = n[g]
                    tot = cell_sums.regroup(self.key_codes[:, j], size).values()
                    with np.errstate(invalid="ignore", divide="ignore"):
                        mean = np.where(nj > 0, tot / np.maximum(nj, 1), np.nan)
                    per_key.append(GroupSummary(nj.copy(), mean, q1[g].copy(), q2[g].copy(),
                                                q3[g].copy()))
                del side
                sides.append(per_key)
            out[c] = (sides[0], sides[1])
        return out


def _positions(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions of ``wanted`` global rows in an unsorted ``rows``."""
    order = np.argsort(rows, kind="stable")
    return order[np.searchsorted(rows[order], wanted)]


def frame_accumulator(original: pd.DataFrame, result: Any, config: ReleaseConfig, *,
                      numeric: bool = True) -> ReleaseAccumulator:
    """The accumulator run on one batch: the whole input frame ``original`` and the release
    ``result`` made from it (its ``cells.record_cell`` and ``released_cell``), with the
    refinement passes made on the same arrays. The in-memory engine's report aggregates,
    computed by the same code as the batch engines'. The numeric variables' ranges are the
    data's own (so an integer variable is resolved in one pass, a float one starts its select
    at the bits in which its values differ); ``numeric=False`` leaves them out (the risk
    figures need none)."""
    cells = result.cells
    rc = np.asarray(cells.record_cell, dtype=np.int64)
    rel = np.asarray(result.released_cell, dtype=np.int64)
    n_cells = int(cells.key_codes.shape[0])
    sizes = [config.key_variables[v].size for v in config.key_names]
    cols = numeric_columns(original, config) if numeric else []
    values = {c: finite_values(original[c]) for c in cols}
    ranges = {}
    for c, x in values.items():
        if not np.isnan(x).all():
            ranges[c] = (float(np.nanmin(x)), float(np.nanmax(x)),
                         bool(pd.api.types.is_integer_dtype(original[c])))
    weight = config.input.weight
    w = original[weight].to_numpy(dtype=float) if weight else None
    acc = ReleaseAccumulator(cells.key_codes, np.bincount(rc, minlength=n_cells), sizes,
                             None if w is None else float(np.abs(w).max(initial=0.0)),
                             cols, ranges)
    acc.add_apply_batch(None, rc, rel, w, values)
    if numeric:
        from sdc.reports.formulas import formula_accumulators

        acc.analyses = formula_accumulators(config)
        acc.add_analysis_batch(original, rc, rel, config)
    more = acc.start_refinement()
    while more:
        acc.add_refine_batch(None, rc, values, released_cell=rel)
        more = acc.end_refine_pass()
    return acc


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one int64 array (one part: itself, no copy)."""
    if len(parts) == 1:
        return np.asarray(parts[0], dtype=np.int64)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)
