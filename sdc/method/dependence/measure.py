"""The filter intruder's figure of a column from its tables (docs/METHOD.md, "Dependence of
non-key columns"): when a value (or a run of ordered bins) informs on a key, and the
record-weighted success per PRB ``R_c(j) = (1 - theta/t_j) / (t_j - theta + I_c(j))``; a
column fails when in some PRB it exceeds xi and the success without the column by more than
``MARGIN``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdc.method.dependence.compatible import informing
from sdc.method.dependence.counting import DependenceCounter
from sdc.method.dependence.order import OrderPart, key_bands

__all__ = ["ALPHA", "CONFINE", "MARGIN", "ColumnDependence", "MeasureContext",
           "expected_distinct", "failing", "measure_dependence", "order_inform", "pair_figures"]

ALPHA = 1e-6
MARGIN = 0.05
CONFINE = 0.5  # a pair confinement counts when it halves what the one-key intervals leave


@dataclass(frozen=True)
class ColumnDependence:
    """The check's figures for one column (see the module docstring)."""

    column: str
    figure: float            # max over PRBs of the filter intruder's mean success
    baseline: float          # that PRB's success without the column
    prb: int                 # where the figure is attained (-1: no PRB)
    mean_figure: float       # over every sensitive record of the file
    mean_baseline: float
    revealed: dict[str, float]  # key -> share of sensitive records whose value informs on it
    flagged: bool
    #: "values": the column's values one by one; "order": runs of its values in order;
    #: "pair": a synthetic column of two columns (``of``), in order
    via: str = "values"
    #: the two columns of a pair (empty for a column of the input)
    of: tuple[str, ...] = ()
    #: "person": a household file's person column measured against the household keys, one
    #: member per household (:mod:`.members`); "" otherwise
    level: str = ""
    #: key -> share of the sensitive records, in PRBs where the key moves, whose value pins
    #: the key to one value: the column shows which records moved (a copy or a finer grain
    #: of a recoded key), even when the figure stays under xi
    visible: dict[str, float] = field(default_factory=dict)
    #: ``via: relation``: the relation the intruder computes (a :mod:`.pairs` synthetic
    #: column of this one: read as dates, sorted differences, ranks)
    relation: str = ""
    #: recoded keys this column holds at a finer grain than released (several of its values
    #: pin one released value: a copy of age next to age in bands): an intruder who knows the
    #: key as collected matches on the column and the recoding no longer protects (flagged)
    finer: tuple[str, ...] = ()
    #: every PRB where the column fails (the figure's ``prb`` is the worst of them): the PRBs
    #: whose weights a weighted-matching ladder relaxes (``risk.near.fallback_weights``)
    failing_prbs: tuple[int, ...] = ()

    @property
    def visibly_moved(self) -> bool:
        """Records that moved are visible through this column (see ``visible``)."""
        return bool(self.visible)

    def as_dict(self) -> dict[str, Any]:
        d = {"column": self.column, "figure": round(self.figure, 6),
             "baseline": round(self.baseline, 6), "prb": self.prb,
             "mean_figure": round(self.mean_figure, 6),
             "mean_baseline": round(self.mean_baseline, 6),
             "revealed": {k: round(v, 6) for k, v in self.revealed.items()},
             "flagged": self.flagged, "via": self.via}
        if self.of:
            d["of"] = list(self.of)
        if self.level:
            d["level"] = self.level
        if self.visible:
            d["visible"] = {k: round(v, 6) for k, v in self.visible.items()}
        if self.relation:
            d["relation"] = self.relation
        if self.finer:
            d["finer"] = list(self.finer)
        return d


def measure_dependence(counter: DependenceCounter, plan: Any, config: Any,
                       cell_index: Callable[[np.ndarray], np.ndarray]) -> list[ColumnDependence]:
    """The figures of every checked column, from the counter and the release plan: the
    worse of the check by value and the check in order (:func:`order_inform`).

    ``cell_index`` maps the counter's cell ids to the plan's cell indices (identity for the
    pandas engine, a search in the sorted cell codes for the batch engines).
    """
    ctx = MeasureContext(plan, config)
    out = []
    for col in counter.columns:
        (vb, vn, vlo, vhi), (pc, pb, pn) = counter.tables(col)
        inform = ctx.value_inform(vn, vlo, vhi)
        combo = ctx.pair_combos(counter, col, vb, vn, vlo, vhi)
        pin = ctx.value_pins(vn, vlo, vhi, inform)
        by_value = ctx.figure(col, vb, vlo, vhi, inform, combo, pc, pb, pn, cell_index,
                              "values", pin)
        finer = ctx.finer_grain(vlo, pin)
        if finer:
            by_value = dataclasses.replace(by_value, finer=finer, flagged=True)
        part = counter.order_table(col)
        best = by_value
        visible = dict(by_value.visible)
        if part is not None and part.bins.size:
            olo, ohi, oinf = order_inform(part, ctx)
            if oinf.any():
                by_order = ctx.figure(col, part.bins, olo, ohi, oinf, {}, part.pcell,
                                      part.pbin, part.pcount, cell_index, "order")
                _widest(visible, by_order.visible)
                if (by_order.flagged, by_order.figure) > (by_value.flagged, by_value.figure):
                    best = by_order
        for s in counter.pairs.relations:
            if not (s.unary and s.a == col):
                continue
            f = _ordered_figure(counter, ctx, cell_index, s)
            if f is None:
                continue
            _widest(visible, f.visible)
            if f.flagged and not best.flagged and f.figure > best.figure:
                best = dataclasses.replace(f, column=col, relation=s.name)
        out.append(dataclasses.replace(best, visible=visible))
    return out + pair_figures(counter, ctx, cell_index, {f.column for f in out if f.flagged})


def _widest(into: dict[str, float], other: dict[str, float]) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0.0), v)


def _ordered_figure(counter: DependenceCounter, ctx: MeasureContext,
                    cell_index: Callable[[np.ndarray], np.ndarray],
                    s: Any) -> ColumnDependence | None:
    """The filter intruder's figure of a synthetic column ``s`` checked in order (None: it
    has no table, or no run of its bins informs)."""
    part = counter.order_table(s.key)
    if part is None or not part.bins.size:
        return None
    olo, ohi, oinf = order_inform(part, ctx)
    if not oinf.any():
        return None
    return ctx.figure(s.name, part.bins, olo, ohi, oinf, {}, part.pcell, part.pbin,
                      part.pcount, cell_index, "pair" if not s.unary else "relation")


def pair_figures(counter: DependenceCounter, ctx: MeasureContext,
                 cell_index: Callable[[np.ndarray], np.ndarray],
                 flagged: set[str]) -> list[ColumnDependence]:
    """The failing synthetic columns of pairs (:mod:`.pairs`), measured in order: a pair
    is reported only when it fails and neither of its columns fails alone (those are named
    already), the worst synthetic column of each pair. Passing pairs are not listed
    (audit.json lists the input's columns)."""
    worst: dict[tuple[str, str], ColumnDependence] = {}
    for s in counter.pairs.columns:
        if s.unary or s.a in flagged or s.b in flagged:
            continue
        f = _ordered_figure(counter, ctx, cell_index, s)
        if f is None:
            continue
        q = (s.a, s.b)
        if f.flagged and (q not in worst or f.figure > worst[q].figure):
            worst[q] = dataclasses.replace(f, of=q)
    return list(worst.values())




def order_inform(part: OrderPart, ctx: MeasureContext) -> tuple[np.ndarray, ...]:
    """(lo, hi, inform) per bin of the ordered table: a bin informs on key k when it lies in
    a run of consecutive bins (the column's values in order) whose records all have one value
    x of k, and the run holds so many records N that N records independent of k would all
    have x with a chance below ALPHA / n over every start in the file:
    N log P_k(x) < log(ALPHA / n). Its interval is then [x, x], else the key's whole range.
    P_k is k's distribution among the records the column has a value for (``part.hist``): a
    pension present from 65 on sorts records of 65+ only, whose ages are not a run by chance.

    A relation with noise (a running total of age plus a little noise: its sorted differences
    are age give or take a year) has no such runs; :func:`_band_runs` finds the runs whose
    records all have k in one band of s codes (s = 2, 4, 8 up to a quarter of k's codes,
    :func:`~.order.key_bands`; bands at two offsets) beyond
    chance, N log P_k(band) < log(ALPHA / (n B)) over the B bands tried, and gives their bins
    the run's own interval of k when narrower."""
    n_total = ctx.n_total
    p = part.lo.shape[1]
    lo = np.zeros_like(part.lo)
    hi = np.empty_like(part.hi)
    inform = np.zeros(part.lo.shape, dtype=bool)
    limit = math.log(ALPHA) - math.log(max(n_total, 1.0))
    for k in range(p):
        hi[:, k] = ctx.sizes[k] - 1
        cum, total = _key_cum(part, ctx, k)
        x = part.lo[:, k]
        pure = x == part.hi[:, k]
        brk = np.r_[True, ~pure[1:] | ~pure[:-1] | (x[1:] != x[:-1])]
        run = np.cumsum(brk) - 1
        size = np.bincount(run, weights=part.n)[run]
        px = (cum[np.minimum(x + 1, ctx.sizes[k])] - cum[np.minimum(x, ctx.sizes[k])]) / total
        with np.errstate(divide="ignore"):
            inf = pure & (size >= 2) & (size * np.log(np.maximum(px, 1e-300)) < limit)
        inform[:, k] = inf
        lo[inf, k] = x[inf]
        hi[inf, k] = x[inf]
        _band_runs(part, ctx, k, cum, total, lo, hi, inform)
    return lo, hi, inform


def _key_cum(part: OrderPart, ctx: MeasureContext, k: int) -> tuple[np.ndarray, float]:
    """(cumulative counts over k's codes, total) of the table's records (``part.hist``), or
    of the file's when the table has none."""
    if part.hist is None or k >= len(part.hist) or part.hist[k].size > ctx.sizes[k]:
        return ctx.cums[k], ctx.n_total
    h = np.zeros(ctx.sizes[k], np.float64)
    h[:part.hist[k].size] = part.hist[k]
    total = float(h.sum())
    if total <= 0:
        return ctx.cums[k], ctx.n_total
    return np.r_[0.0, np.cumsum(h)], total


def _band_runs(part: OrderPart, ctx: MeasureContext, k: int, cum: np.ndarray, total: float,
               lo: np.ndarray, hi: np.ndarray, inform: np.ndarray) -> None:
    """Narrow (lo, hi, inform) of key k, in place, by the runs of bins whose records have k
    in one band of s codes beyond chance (:func:`order_inform`). Every (band, offset) tried is
    one row of a (tries x bins) computation; a bin takes the narrowest run interval of the
    rows where it informs when narrower than its own (the first such row on ties: what trying
    them one after the other keeps)."""
    size_k = ctx.sizes[k]
    tries = [(s, o) for s in key_bands(size_k) for o in (0, s // 2)]
    if not tries or not part.n.size:
        return
    limit = math.log(ALPHA) - math.log(max(ctx.n_total, 1.0)) - math.log(len(tries))
    # only the bins that keep an interval of k can be in a run: the rest break runs (their
    # position in ``at`` is not next to the previous one's)
    at = np.flatnonzero(part.hi[:, k] - part.lo[:, k] < size_k)  # not [0, MIXED]
    if not at.size:
        return
    blo_k, bhi_k, n = part.lo[at, k], part.hi[at, k], part.n[at]
    t, m = len(tries), at.size
    sw = np.array([s for s, _ in tries], dtype=blo_k.dtype)[:, None]
    off = np.array([o for _, o in tries], dtype=blo_k.dtype)[:, None]
    band = (blo_k + off) // sw                      # (tries, bins)
    inband = band == (bhi_k + off) // sw
    brk = np.ones((t, m), dtype=bool)               # every row starts a run
    brk[:, 1:] = ((np.diff(at) != 1) | ~inband[:, 1:] | ~inband[:, :-1]
                  | (band[:, 1:] != band[:, :-1]))
    brk = brk.ravel()
    starts = np.flatnonzero(brk)
    run = np.cumsum(brk) - 1
    size = np.add.reduceat(np.tile(n, t), starts)[run].reshape(t, m)
    first = np.clip(band * sw - off, 0, size_k)
    last = np.clip(band * sw - off + sw, 0, size_k)
    pband = (cum[last] - cum[first]) / total
    with np.errstate(divide="ignore"):
        inf = inband & (size >= 2) & (size * np.log(np.maximum(pband, 1e-300)) < limit)
    if not inf.any():
        return
    rlo = np.minimum.reduceat(np.tile(blo_k, t), starts)[run].reshape(t, m)
    rhi = np.maximum.reduceat(np.tile(bhi_k, t), starts)[run].reshape(t, m)
    width = np.where(inf, rhi - rlo, np.iinfo(np.int64).max)
    best = np.argmin(width, axis=0)                 # the first row of the narrowest
    col = np.arange(m)
    better = width[best, col] < hi[at, k] - lo[at, k]
    lo[at[better], k] = rlo[best, col][better]
    hi[at[better], k] = rhi[best, col][better]
    inform[at[better], k] = True


class MeasureContext:
    """The plan's figures every column's measure needs (key marginals, PRBs, thetas)."""

    def __init__(self, plan: Any, config: Any) -> None:
        self.plan = plan
        self.part = plan.partitioned
        self.cells = self.part.cells
        self.t = self.cells.frequency.astype(np.float64)
        self.n_total = float(self.t.sum())
        self.keys = config.key_names
        self.kc = self.cells.key_codes
        self.sizes = [int(config.key_variables[v].size) for v in self.keys]
        # cumulative marginal of every key over its codes
        self.cums = [np.r_[0.0, np.cumsum(np.bincount(self.kc[:, k], weights=self.t,
                                                      minlength=self.sizes[k]))]
                     for k in range(len(self.keys))]
        self.thetas = np.array([b.theta for b in plan.block_plan.blocks], dtype=np.float64)
        self.n_prb = self.thetas.size
        self.k_prb = (np.diff(np.r_[plan.prb_start, plan.prb_cells.size]) if self.n_prb
                      else np.zeros(0, int))
        self.cell_prb = plan.cell_prb
        self._pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, Any]] = {}
        recoded = set(getattr(config, "recoded_keys", ()) or ())
        self.recoded = [k for k, v in enumerate(self.keys) if v in recoded]
        # per PRB and key: whether the key's value differs among the PRB's cells (it moves)
        self.key_moves = np.zeros((self.n_prb, len(self.keys)), dtype=bool)
        if self.n_prb and plan.prb_cells.size:
            codes = self.kc[plan.prb_cells]
            starts = np.asarray(plan.prb_start, dtype=np.int64)
            self.key_moves = (np.minimum.reduceat(codes, starts, axis=0)
                              != np.maximum.reduceat(codes, starts, axis=0))

    def value_pins(self, vn: np.ndarray, vlo: np.ndarray, vhi: np.ndarray,
                   inform: np.ndarray) -> np.ndarray:
        """(values, keys): the value pins key k to one value x (lo == hi = x), beyond chance
        over every value of the column: n(v) log P_k(x) < log(ALPHA / V), V the values seen
        at least twice (a Bonferroni bound: columns independent of the keys pin nothing with
        probability >= 1 - ALPHA per key; a noisy copy's chance coincidences do not count)."""
        pin = inform & (vlo == vhi)
        if not pin.any():
            return pin
        limit = math.log(ALPHA) - math.log(max(int((vn >= 2).sum()), 1))
        for k in range(len(self.keys)):
            x = np.clip(vlo[:, k], 0, self.sizes[k] - 1)
            px = (self.cums[k][x + 1] - self.cums[k][x]) / self.n_total
            with np.errstate(divide="ignore"):
                pin[:, k] &= vn * np.log(np.maximum(px, 1e-300)) < limit
        return pin

    def finer_grain(self, vlo: np.ndarray, pin: np.ndarray) -> tuple[str, ...]:
        """The recoded keys the column holds at a finer grain: some released value of the key
        is pinned (:meth:`value_pins`) by two or more of the column's values (a copy of the
        key as collected, a finer band, a date next to an age band)."""
        out = []
        for k in self.recoded:
            pins = pin[:, k]
            if pins.sum() >= 2 and np.unique(vlo[pins, k]).size < int(pins.sum()):
                out.append(self.keys[k])
        return tuple(out)

    def value_inform(self, vn: np.ndarray, vlo: np.ndarray, vhi: np.ndarray) -> np.ndarray:
        """A value confines key k to [lo, hi] when n(v) >= 2 and P_k([lo, hi])^n(v) < ALPHA."""
        prob = np.ones(vlo.shape, dtype=np.float64)
        for k in range(len(self.keys)):
            prob[:, k] = (self.cums[k][vhi[:, k] + 1] - self.cums[k][vlo[:, k]]) / self.n_total
        with np.errstate(divide="ignore"):
            return (vn[:, None] >= 2) & (vn[:, None] * np.log(prob) < math.log(ALPHA))

    def _pair(self, k1: int, k2: int) -> tuple[np.ndarray, np.ndarray, Any]:
        """The pair (k1, k2)'s distinct combinations, their distribution p_x over the cells
        and p_x histogrammed for :func:`expected_distinct`: the same for every column (made
        once per pair)."""
        got = self._pairs.get((k1, k2))
        if got is None:
            jc = self.kc[:, k1].astype(np.int64) * self.sizes[k2] + self.kc[:, k2]
            span = self.sizes[k1] * self.sizes[k2]
            if span <= 8 * jc.size + (1 << 16):  # a dense count over the pair's codes
                uc = np.flatnonzero(np.bincount(jc, minlength=span))
                pjoint = np.bincount(jc, weights=self.t, minlength=span)[uc] / self.n_total
            else:  # the same sums (each bin adds its cells in cell order)
                uc, inv = np.unique(jc, return_inverse=True)
                pjoint = np.bincount(inv, weights=self.t, minlength=uc.size) / self.n_total
            got = self._pairs[(k1, k2)] = (uc, pjoint, _binned(pjoint))
        return got

    def pair_combos(self, counter: DependenceCounter, col: str, vb: np.ndarray, vn: np.ndarray,
                    vlo: np.ndarray, vhi: np.ndarray) -> dict:
        """Pairs of keys: the value confines (x1, x2) to the combinations it was observed
        with (see docs/METHOD.md)."""
        sizes, n_total = self.sizes, self.n_total
        prob = np.ones(vlo.shape, dtype=np.float64)
        for k in range(len(self.keys)):
            prob[:, k] = (self.cums[k][vhi[:, k] + 1] - self.cums[k][vlo[:, k]]) / n_total
        combo: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, int]] = {}
        for (k1, k2), (u, _n) in counter.combos(col).items():
            span = sizes[k1] * sizes[k2]
            vic, rest = np.searchsorted(vb, u // span), u % span
            uc, pjoint, binned = self._pair(k1, k2)
            ps = np.bincount(vic, weights=pjoint[np.searchsorted(uc, rest)], minlength=vb.size)
            # a value informs on the pair when its records sit on far fewer combinations than
            # records independent of the pair would: D(v) distinct combinations against
            # E[D] = sum_x 1 - (1 - p_x)^n(v) (p_x the pair's distribution, histogrammed)
            dv = np.bincount(vic, minlength=vb.size).astype(np.float64)
            ed = _distinct_of(binned, vn)
            # ... and confines it beyond what its one-key intervals already do
            inf_q = ((ps <= CONFINE * prob[:, k1] * prob[:, k2]) & (dv <= ed / 2.0)
                     & (ed - dv >= 3.0 * np.sqrt(np.maximum(ed, 1.0))))
            if inf_q.any():
                combo[(k1, k2)] = (inf_q, vic * span + rest, span)
        return combo

    def figure(self, col: str, vb: np.ndarray, vlo: np.ndarray, vhi: np.ndarray,
               inform: np.ndarray, combo: dict, pc: np.ndarray, pb: np.ndarray,
               pn: np.ndarray, cell_index: Callable[[np.ndarray], np.ndarray],
               via: str, pin: np.ndarray | None = None) -> ColumnDependence:
        """The filter intruder's figure of a column whose values (or bins) ``vb`` confine the
        keys as ``inform`` / ``[vlo, vhi]`` say, from the (cell, value) pairs of the small
        cells."""
        idx = cell_index(pc) if pc.size else np.zeros(0, np.int64)
        sens = self.cell_prb[idx] >= 0 if idx.size else np.zeros(0, bool)
        idx, pb, pn = idx[sens], pb[sens], pn[sens].astype(np.float64)
        vi = np.searchsorted(vb, pb)
        inf_pair = inform[vi].copy()
        for (k1, k2), (inf_q, _, _) in combo.items():
            inf_pair[:, k1] |= inf_q[vi]
            inf_pair[:, k2] |= inf_q[vi]
        n_sens = float(pn.sum())
        revealed = {v: float((pn * inf_pair[:, k]).sum() / n_sens) if n_sens else 0.0
                    for k, v in enumerate(self.keys)}
        revealed = {k: s for k, s in revealed.items() if s > 0}
        visible = {}
        if revealed and n_sens:
            # the value pins the key to one value (lo == hi): a copy or a finer grain
            if pin is None:  # bins of runs: pinned beyond chance by order_inform's bound
                pin = inform & (vlo == vhi)
            moves = self.key_moves[self.cell_prb[idx]] & pin[vi]
            visible = {v: float((pn * moves[:, k]).sum() / n_sens)
                       for k, v in enumerate(self.keys)}
            visible = {k: s for k, s in visible.items() if s > 0}
        # records without a value in the table (missing, or a relation undefined for them:
        # a / 0, text that is no date) tell nothing: compatible with every cell of their PRB
        # (counted exactly: 0 for a column every record has)
        sc = self.plan.prb_cells
        absent = np.clip(self.t[sc] - np.bincount(idx, weights=pn, minlength=self.cells.n_cells)[sc],
                         0.0, None) / self.t[sc]
        a = self._compatible(idx, vi, pn / self.t[idx], inf_pair.any(axis=1), inform, vlo,
                             vhi, combo, absent)
        figure, baseline, at, mean_f, mean_b, flagged, bad = self._filter_risk(a)
        return ColumnDependence(col, figure, baseline, at, mean_f, mean_b, revealed, flagged,
                                via, visible=visible, failing_prbs=bad)

    def _compatible(self, idx: np.ndarray, vi: np.ndarray, w: np.ndarray,
                    any_inf: np.ndarray, inform: np.ndarray, vlo: np.ndarray, vhi: np.ndarray,
                    combo: dict, absent: np.ndarray | None = None) -> np.ndarray:
        """A(j) = sum over the PRB's pairs (j', v) of n(j', v) / t_j' [v compatible with j],
        for every cell j (0 outside the PRBs); ``w`` = n(j', v) / t_j' of the pairs (cells
        ``idx``, values ``vi``); a pair whose value informs on no key (``any_inf`` False) is
        compatible with every cell of its PRB."""
        plan, cell_prb, n_prb = self.plan, self.cell_prb, self.n_prb
        prb_of = cell_prb[idx]
        a = np.zeros(self.cells.n_cells)
        u = np.bincount(prb_of[~any_inf], weights=w[~any_inf], minlength=n_prb)
        sens_cells = plan.prb_cells
        if absent is not None and absent.any():
            u = u + np.bincount(cell_prb[sens_cells], weights=absent, minlength=n_prb)
        a[sens_cells] = u[cell_prb[sens_cells]]
        inf_rows = np.flatnonzero(any_inf)
        if inf_rows.size:
            a += self._informing(prb_of[inf_rows], vi[inf_rows], w[inf_rows], inform, vlo,
                                 vhi, combo)
        return a

    def _informing(self, prb: np.ndarray, vi: np.ndarray, w: np.ndarray, inform: np.ndarray,
                   vlo: np.ndarray, vhi: np.ndarray, combo: dict) -> np.ndarray:
        """Per cell j of the PRBs (0 elsewhere): the sum over the informing pairs of j's PRB
        (PRBs ``prb``, values ``vi``, weights ``w``) of w [v compatible with j]
        (:func:`~.compatible.informing`)."""
        return informing(prb, vi, w, inform, vlo, vhi, combo, kc=self.kc, sizes=self.sizes,
                         prb_cells=self.plan.prb_cells, prb_start=self.plan.prb_start,
                         k_prb=self.k_prb, n_cells=self.cells.n_cells)

    def _filter_risk(self, a: np.ndarray) -> tuple[float, float, int, float, float, bool,
                                                  tuple[int, ...]]:
        """The filter intruder's risk per PRB from A(j): a cell j of a PRB with k >= 2 cells
        keeps its record with 1 - theta / t_j and the intruder's denominator is
        t_j - theta + theta / (k - 1) max(A(j) - 1, 0); the PRB's figure is the t-weighted
        mean of stay / denominator, its baseline the same with A(j) = k (no information).
        Returns (figure, baseline, PRB, mean figure, mean baseline, flagged, failing PRBs):
        the worst PRB above xi and the baseline + MARGIN when there is one (flagged), else the
        worst PRB."""
        figure = baseline = mean_f = mean_b = 0.0
        at, flagged = -1, False
        if not self.n_prb:
            return figure, baseline, at, mean_f, mean_b, flagged, ()
        n_prb, cell_prb, t = self.n_prb, self.cell_prb, self.t
        sc = self.plan.prb_cells
        kk = self.k_prb[cell_prb[sc]].astype(np.float64)
        th = self.thetas[cell_prb[sc]]
        tj = t[sc]
        movable = kk >= 2
        inc = np.where(movable, th / np.maximum(kk - 1, 1) * np.maximum(a[sc] - 1.0, 0.0), 0)
        inc0 = np.where(movable, th, 0.0)
        stay = np.where(movable, 1.0 - th / tj, 1.0)
        rc = stay / (tj - np.where(movable, th, 0.0) + inc)
        r0 = stay / (tj - np.where(movable, th, 0.0) + inc0)
        wsum = np.bincount(cell_prb[sc], weights=tj, minlength=n_prb)
        fb = np.bincount(cell_prb[sc], weights=tj * rc, minlength=n_prb) / wsum
        bb = np.bincount(cell_prb[sc], weights=tj * r0, minlength=n_prb) / wsum
        at = int(np.argmax(fb))
        figure, baseline = float(fb[at]), float(bb[at])
        mean_f = float((tj * rc).sum() / tj.sum())
        mean_b = float((tj * r0).sum() / tj.sum())
        xi = self.part.xi
        bad = failing(fb, bb, wsum, xi)
        flagged = bool(bad.any())
        if flagged:
            at = int(np.flatnonzero(bad)[np.argmax(fb[bad])])
            figure, baseline = float(fb[at]), float(bb[at])
        return (figure, baseline, at, mean_f, mean_b, flagged,
                tuple(int(b) for b in np.flatnonzero(bad)))


def failing(figure: np.ndarray, baseline: np.ndarray, n: np.ndarray, xi: float) -> np.ndarray:
    """Per PRB, whether the column fails: its figure exceeds xi and its gain over the baseline
    exceeds MARGIN or, in a PRB of n sensitive records, three standard errors of a success rate
    measured on them, sqrt(f (1 - f) / n) (the finite-sample rule: a gain larger than a release
    of this size shows by chance counts even when the baseline is near xi, as under calibrated
    theta; a smaller one in a small PRB needs MARGIN)."""
    se = np.sqrt(np.clip(figure * (1.0 - figure), 0.0, None) / np.maximum(n, 1.0))
    return (figure > xi + 1e-12) & (figure > baseline + np.minimum(MARGIN, 3.0 * se))


def expected_distinct(p: np.ndarray, n: np.ndarray, bins: int = 256) -> np.ndarray:
    """E[number of distinct categories among n(v) draws] for every n(v), the categories'
    probabilities ``p`` grouped into ``bins`` log-spaced bins (about 1% accuracy)."""
    return _distinct_of(_binned(p, bins), n)


def _binned(p: np.ndarray, bins: int = 256) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`expected_distinct`'s histogram of ``p``: per used bin, its categories and
    log(1 - mean p) (None: no category of positive probability)."""
    p = p[p > 0]
    if not p.size:
        return None
    lp = np.log(p)
    lo, hi = float(lp.min()), float(lp.max())
    edges = np.linspace(lo, hi + 1e-12, bins + 1)
    which = np.clip(np.searchsorted(edges, lp, side="right") - 1, 0, bins - 1)
    cnt = np.bincount(which, minlength=bins).astype(np.float64)
    mean_p = np.bincount(which, weights=p, minlength=bins) / np.maximum(cnt, 1.0)
    used = cnt > 0
    return cnt[used], np.log1p(-np.minimum(mean_p[used], 1 - 1e-15))


def _distinct_of(binned: tuple[np.ndarray, np.ndarray] | None, n: np.ndarray) -> np.ndarray:
    """E[distinct categories among n(v) draws] from :func:`_binned`'s histogram:
    sum over bins of cnt * (1 - (1 - mean p)^n(v))."""
    if binned is None or not n.size:
        return np.zeros(n.size)
    cnt, log_miss = binned
    un, inv = np.unique(n, return_inverse=True)
    miss = np.exp(un[:, None].astype(np.float64) * log_miss[None, :])
    return ((1.0 - miss) @ cnt)[inv]


