"""The near-cell destination design W of a PRB (``destinations: near``).

Built deterministically from the PRB's cells (their key codes) and the config, never from
records or the seed (docs/METHOD.md section 7.12):

1. **Key distance** d(j, l) = sum over keys of a per-key step count: a nominal key 1 for any
   other value; an ordered key (``range``, or recoded into bands / top-bottom classes) the
   number of adjacent values between them, |code_j - code_l|; a key partitioned by an ARX
   hierarchy the number of hierarchy levels at which the two values differ (1 = siblings).
   A missing value is one step from every value.
2. **Tour**: the PRB's cells in the order of the **reflected (boustrophedon) path of the key
   domain**: ordered keys outermost, then hierarchy levels (top first), then nominal keys with
   the most values innermost; an inner digit runs ascending when the outer digits sum to an
   even number, descending otherwise (a mixed-radix Gray path: neighbouring points of the
   domain differ by one step of one key). A cell's place depends on its own key values only,
   never on which other cells are occupied: a cell joining or leaving the PRB (churn in a
   series) changes only the W rows of the cells within s tour steps of it (docs/SERIES.md).
   (A nearest-neighbour tour under d was used before issue 46: one joining cell could reroute
   the whole rest of the tour, and the destinations of ~10% of the records changed from month
   to month under 1% churn, against 1.3% now.) O(k log k).
3. **Band kernel**: with P the cyclic permutation that steps once along the tour and s =
   ceil(``neighbours`` / 2),

       W = sum_{i=1..s} a_i (P^i + P^-i) / 2,    a_i proportional to exp(-(i - 1) / h),

   h = ``bandwidth`` (in tour steps). Every P^i is a permutation without fixed point
   (2s <= k - 1), so W is **exactly** doubly stochastic with a zero diagonal, symmetric,
   and E[released t_l] = t_l holds to the last bit of the weights: no balancing iterations.
   (A Sinkhorn balance of exp(-d/h) on a nearest-neighbour support was tried first: on the
   demo's largest PRB, 1,441 cells, its row error was still 1e-5 after 3,000 iterations; a
   sparse support need not hold a doubly stochastic pattern, so it may not converge at all.)
4. **Spread floor**: every row has 2s >= ``min_destinations`` destinations and no entry
   above ``max_weight``: a_1/2 <= max_weight, the a_i flattened towards 1/s just enough. A PRB
   with k - 1 < 2s other cells gets the uniform W (the flattest).
5. **Matching kernel** (``near: {kernel: matching}``): W = (1/2s) sum_{i=1..2s} Q_i, Q_i the
   permutation matrix of the least-cost perfect matching of the PRB's cells with themselves
   that uses no diagonal pair and no pair of Q_1..Q_{i-1} (:func:`matching_destinations`;
   the cost of j -> l the records the move changes, :func:`record_cost`, then, below one
   record, how far the members move along ordered person keys, :func:`class_shift`). Each Q_i exists
   (after i - 1 rounds the allowed pairs form a (k - i)-regular bipartite graph, which holds a
   perfect matching by Hall's theorem), so W is exactly doubly stochastic with a zero
   diagonal and 2s destinations of weight 1/(2s) per row (the spread floor holds). Not
   symmetric in general, and not local under churn: a cell joining or leaving a PRB can change
   every row. O(2s k^3) per PRB (scipy's shortest augmenting path; integer costs, the PRB's
   local cell order, so the same W on every executor and in ``sdc audit``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from sdc.config.model import Bands, Hierarchy, NearSpec, ReleaseConfig, TopBottom
from sdc.method.generalize import generalize_domain
from sdc.method.transition import Transition, nzy_move

__all__ = ["KeyMetric", "class_shift", "fragile_classes", "key_distance", "key_metrics",
           "matching_destinations", "near_half",
           "near_transition", "offset_weights", "record_cost", "tour_of"]


@dataclass(frozen=True)
class KeyMetric:
    """How one key's values are apart: ``kind`` ``ordered`` / ``nominal`` / ``tree`` /
    ``composition``; ``levels`` (tree only): (L, size) ancestor codes of every value code at
    levels 0..L-1; ``missing``: the code of the missing category, or -1; ``counts``
    (composition only): (C, P) members per person class of every composition; ``scale``: the
    key's steps are multiplied by it (the household keys of a composition stage: a household
    that changes them changes every member's record, so they cost more than any change of
    the composition of a household of the same size). ``size``: the number of values of the key's domain (orders the
    nominal keys of the tour)."""

    name: str
    kind: str
    levels: np.ndarray | None = None
    missing: int = -1
    counts: np.ndarray | None = None
    scale: float = 1.0
    size: int = 0
    #: composition only: (P, q) codes of the person classes in the ordered person keys
    #: (:func:`class_shift`), None without one
    classes: np.ndarray | None = None


def key_metrics(config: ReleaseConfig) -> list[KeyMetric]:
    """The metric of every key (``config.key_names`` order), as the module docstring says.
    The composition stage of a household file (its composition key carries the compositions'
    member counts) measures compositions by the members that change, size - sum_c
    min(n_c, n'_c), and its household keys' steps at (largest size + 1) each."""
    out = _key_metrics(config)
    comp = [m for m in out if m.kind == "composition"]
    if comp:
        scale = float(comp[0].counts.sum(axis=1).max()) + 1.0
        out = [m if m.kind == "composition" else dataclasses.replace(m, scale=scale)
               for m in out]
    return out


def _key_metrics(config: ReleaseConfig) -> list[KeyMetric]:
    out = []
    for name in config.key_names:
        kv = config.key_variables[name]
        if kv.composition_counts is not None:
            cls = kv.composition_classes
            out.append(KeyMetric(name, "composition",
                                 counts=np.asarray(kv.composition_counts, dtype=np.int64),
                                 classes=None if cls is None else np.asarray(cls, np.int64)))
            continue
        miss = kv.size - 1 if kv.missing == "category" else -1
        src = config.input_key_variables.get(name, kv)
        recode = getattr(src, "recode", None)
        rule = config.partition.get(name)
        if kv.range is not None or isinstance(recode, Bands | TopBottom):
            out.append(KeyMetric(name, "ordered", missing=miss, size=kv.size))
        elif isinstance(rule, Hierarchy) and rule.table is not None:
            levels = [np.arange(kv.size, dtype=np.int64)]
            depth = max(len(r) for r in rule.table) - 1
            for lev in range(1, depth + 1):
                try:
                    g = generalize_domain(name, kv, Hierarchy(hierarchy=rule.hierarchy, level=lev,
                                                              delimiter=rule.delimiter)
                                          .with_table(rule.table))
                except Exception:  # noqa: BLE001 - a level the file does not have for all values
                    break
                levels.append(np.asarray(g.code_map, dtype=np.int64))
            out.append(KeyMetric(name, "tree", np.vstack(levels), miss, size=kv.size))
        else:
            out.append(KeyMetric(name, "nominal", missing=miss, size=kv.size))
    return out


def key_distance(codes: np.ndarray, rows: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """The key distance d(j, l) for j in ``rows`` and every l: (len(rows), k) float64
    (integers); what the tour keeps small (measured in the tests, not used by the draws)."""
    d = np.zeros((rows.size, codes.shape[0]))
    for v, met in enumerate(metrics):
        a, b = codes[rows, v][:, None], codes[:, v][None, :]
        if met.kind == "composition":
            n = met.counts
            step = np.abs(n[a] - n[b]).sum(axis=-1).astype(np.float64) / 2.0
        elif met.kind == "ordered":
            step = np.abs(a - b).astype(np.float64)
        elif met.kind == "tree":
            lev = met.levels
            step = np.zeros_like(d)
            for L in range(lev.shape[0]):
                step += lev[L][a] != lev[L][b]
        else:
            step = (a != b).astype(np.float64)
        if met.missing >= 0:
            one = (a == met.missing) != (b == met.missing)
            step = np.where(one, 1.0, np.where((a == met.missing) & (b == met.missing), 0.0, step))
        d += step * met.scale
    return d


def record_cost(codes: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """(k, k) cost of moving a unit of cell j to cell l, for the matching kernel: on a
    composition stage (one household size per PRB) the persons whose released keys change,
    the household's size when a household key differs (every member takes the released
    household keys), else the members realization gives another class (size - sum_c
    min(n_c, n'_c)); on any other PRB the key distance :func:`key_distance`."""
    codes = np.asarray(codes, dtype=np.int64)
    rows = np.arange(codes.shape[0])
    comp = [v for v, m in enumerate(metrics) if m.kind == "composition"]
    if not comp:
        return key_distance(codes, rows, metrics)
    v = comp[0]
    n = np.asarray(metrics[v].counts, dtype=np.int64)[codes[:, v]]
    moved = np.abs(n[:, None, :] - n[None, :, :]).sum(axis=-1) // 2
    hk = [u for u in range(codes.shape[1]) if u != v]
    other = (codes[:, None, hk] != codes[None, :, hk]).any(axis=-1)
    return np.where(other, n.sum(axis=1)[:, None], moved).astype(np.float64)


def class_shift(codes: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray | None:
    """(k, k) on a composition stage with ordered person keys (age bands): how far the
    members of a household of cell j released in cell l of the same household keys move along
    those keys, the earth mover's distance between the two compositions' marginals of each
    ordered key (sum over its values of |cumulative members of j - of l|; the realization
    gives movers the missing classes in class order, which for the first ordered key is the
    monotone, least-distance assignment). 0 between cells of other household keys (every
    member changes anyway); None on any other stage. The matching kernel adds it below one
    record of cost (:func:`near_transition`), so among destinations that change as few
    records, the one that moves them to adjacent classes wins (less bias in what is
    tabulated by class: incomes by age)."""
    comp = [v for v, m in enumerate(metrics) if m.kind == "composition"]
    if not comp or metrics[comp[0]].classes is None or metrics[comp[0]].classes.size == 0:
        return None
    v = comp[0]
    codes = np.asarray(codes, dtype=np.int64)
    n = np.asarray(metrics[v].counts, dtype=np.int64)[codes[:, v]]     # (k, P)
    cls = np.asarray(metrics[v].classes, dtype=np.int64)                # (P, q)
    out = np.zeros((n.shape[0], n.shape[0]), dtype=np.int64)
    for q in range(cls.shape[1]):
        onehot = np.zeros((cls.shape[0], int(cls[:, q].max()) + 1), np.int64)
        onehot[np.arange(cls.shape[0]), cls[:, q]] = 1
        cum = np.cumsum(n @ onehot, axis=1)                              # (k, values)
        out += np.abs(cum[:, None, :] - cum[None, :, :]).sum(axis=-1)
    hk = [u for u in range(codes.shape[1]) if u != v]
    other = (codes[:, None, hk] != codes[None, :, hk]).any(axis=-1)
    return np.where(other, 0, out)


def fragile_classes(codes: np.ndarray, frequency: np.ndarray, sensitive: np.ndarray,
                    metrics: list[KeyMetric], xi: float) -> np.ndarray | None:
    """(cells, P + 1) bool: on a composition stage, class c < P of cell j is **fragile** when
    fewer than 1/xi - 1 persons of class c live in non-sensitive households (which never
    move) with j's household keys: a member of class c whose household keeps c (the worst
    rank: kept whenever its class survives) can then be one of at most 2 released persons of
    its person cell, and only a destination that takes the class away (or the household keys)
    lets it leave. Column P, the **household size**, is fragile when fewer than 1/xi - 1
    households of j's size live in non-sensitive cells (which never move) with j's household
    keys: the household keys x size intruder (every release shows a household's size) sees a
    count of 1 + those households when every other household of the combination left, and a
    household that keeps its household keys in every destination is then surely the one
    (risk 1.0); only a destination with other household keys lets it leave (issue 44). None
    on any other stage."""
    comp = [v for v, m in enumerate(metrics) if m.kind == "composition"]
    if not comp:
        return None
    v = comp[0]
    codes = np.asarray(codes, dtype=np.int64)
    n = np.asarray(metrics[v].counts, dtype=np.int64)[codes[:, v]]
    size = n.sum(axis=1)
    hk = np.delete(codes, v, axis=1)
    _, hk_row = np.unique(hk, axis=0, return_inverse=True)
    hk_row = hk_row.reshape(-1)
    n_hk = int(hk_row.max()) + 1 if hk_row.size else 0
    fixed = np.zeros((n_hk, n.shape[1]))
    still = ~np.asarray(sensitive, dtype=bool)
    t = np.asarray(frequency, dtype=np.float64)
    np.add.at(fixed, hk_row[still], n[still] * t[still, None])
    by_size = np.zeros((n_hk, int(size.max(initial=0)) + 1))
    np.add.at(by_size, (hk_row[still], size[still]), t[still])
    return np.column_stack([(n > 0) & ((fixed[hk_row] + 1.0) * xi < 1.0),
                            (by_size[hk_row, size] + 1.0) * xi < 1.0])


def _keeps(codes: np.ndarray, metrics: list[KeyMetric], fragile: np.ndarray) -> np.ndarray:
    """(k, k, P + 1) bool: destination l keeps fragile class c < P of cell j (same household
    keys and n_{l,c} >= 1), or j's fragile household size (column P: same household keys and
    size)."""
    v = [u for u, m in enumerate(metrics) if m.kind == "composition"][0]
    codes = np.asarray(codes, dtype=np.int64)
    n = np.asarray(metrics[v].counts, dtype=np.int64)[codes[:, v]]
    size = n.sum(axis=1)
    hk = np.delete(codes, v, axis=1)
    same = (hk[:, None, :] == hk[None, :, :]).all(axis=-1)
    has = np.concatenate([np.broadcast_to(n[None, :, :] > 0, same.shape + (n.shape[1],)),
                          (size[:, None] == size[None, :])[:, :, None]], axis=-1)
    return np.asarray(fragile, bool)[:, None, :] & same[:, :, None] & has


def _size_fragile_where_kept(codes: np.ndarray, metrics: list[KeyMetric], fragile: np.ndarray,
                             n: int) -> np.ndarray:
    """``fragile`` with the household-size column (the last) cleared where the PRB holds
    fewer than ``n`` other cells of the cell's household keys and size: then at least one of
    its n matched destinations has other household keys whatever the matchings choose, and the
    penalty would only make the first matchings costlier."""
    v = [u for u, m in enumerate(metrics) if m.kind == "composition"][0]
    codes = np.asarray(codes, dtype=np.int64)
    size = np.asarray(metrics[v].counts, dtype=np.int64)[codes[:, v]].sum(axis=1)
    hk = np.delete(codes, v, axis=1)
    same = (hk[:, None, :] == hk[None, :, :]).all(axis=-1) & (size[:, None] == size[None, :])
    out = np.array(fragile, dtype=bool)
    out[:, -1] &= same.sum(axis=1) - 1 >= n
    return out


def matching_destinations(cost: np.ndarray, n: int,
                          keeps: np.ndarray | None = None) -> np.ndarray:
    """(k, n) destinations of every cell under the matching kernel (module docstring, 5):
    column i is the least-cost perfect matching (scipy's ``linear_sum_assignment``) that uses
    no diagonal pair and no pair of the columns before it. Needs n <= k - 1. ``keeps`` (k,
    k, P): destination l keeps fragile class c of cell j (:func:`fragile_classes`): the
    matchings add (largest cost + 1) for every fragile class of j that l keeps and no earlier
    destination of j took away, so every cell with a fragile class gets a destination that
    lets its members leave wherever the PRB holds one (then the plain cost)."""
    from scipy.optimize import linear_sum_assignment

    c = np.array(cost, dtype=np.float64)
    open_ = None if keeps is None else keeps.any(axis=1)  # (k, P) fragile classes still kept
    unit = float(np.nanmax(np.where(np.isfinite(c), c, 0.0))) + 1.0
    k = c.shape[0]
    if n == 0:
        return np.zeros((k, 0), dtype=np.int64)
    if not 0 < n <= k - 1:
        raise ValueError(f"a matching kernel of {n} destinations needs at least {n + 1} cells")
    np.fill_diagonal(c, np.inf)
    out = np.empty((k, n), dtype=np.int64)
    for i in range(n):
        m = c
        if open_ is not None and open_.any():
            m = c + unit * (keeps & open_[:, None, :]).sum(axis=-1)
        r, col = linear_sum_assignment(m)
        out[r, i] = col
        c[r, col] = np.inf
        if open_ is not None:
            open_ &= keeps[r, col]
    return out


def _digits(codes: np.ndarray, metrics: list[KeyMetric]) -> list[np.ndarray]:
    """The tour's digits of every cell, outermost first: ordered keys (config order), then
    hierarchy keys (one digit per level, the top level first), then nominal keys by their
    number of values ascending (the key with the most values innermost), then a composition
    key (household size, then the members of every person class); the scaled household keys
    of a composition stage before all. Only the keys' domains decide the order, never which
    cells are occupied."""
    def rank(v: int) -> tuple[int, int, int]:
        m = metrics[v]
        outer = 0 if m.scale > 1.0 else 1      # the household keys of a composition stage
        return (outer, {"ordered": 0, "tree": 1, "composition": 3}.get(m.kind, 2),
                m.size if m.kind == "nominal" else 0, v)

    out = []
    for v in sorted(range(len(metrics)), key=rank):
        met = metrics[v]
        if met.kind == "composition" and met.counts is not None:
            n = np.asarray(met.counts, dtype=np.int64)[codes[:, v]]
            out.append(n.sum(axis=1))                   # the household's size, then its
            out.extend(n[:, c] for c in range(n.shape[1]))  # members per person class
        elif met.kind == "tree" and met.levels is not None:
            out.extend(met.levels[L][codes[:, v]] for L in range(met.levels.shape[0] - 1, -1, -1))
        else:
            out.append(codes[:, v])
    return out


def _tour(codes: np.ndarray, cell_id: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """The tour of the PRB's cells: their order along the **reflected (boustrophedon) path of
    the key domain** (a mixed-radix Gray path: consecutive points of the domain differ by one
    step in one key), restricted to the PRB's cells. Digit i runs ascending when the digits
    outside it sum to an even number, descending otherwise (every step of the path changes one
    digit by one, so this parity alternates along it). The position of a cell is a function of
    its own key codes only: a cell that joins or leaves the PRB inserts itself between, or
    removes itself from, its two neighbours and leaves the relative order of every other cell
    unchanged, so only the rows of W within s tour steps of it change (series stability,
    docs/SERIES.md). O(k log k p). ``cell_id`` is not needed (cells are distinct)."""
    codes = np.asarray(codes, dtype=np.int64)
    k = codes.shape[0]
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    parity = np.zeros(k, dtype=np.int64)
    cols = []
    for d in _digits(codes, metrics):
        d = np.asarray(d, dtype=np.int64)
        cols.append(np.where(parity == 1, -d, d))
        parity ^= d & 1
    return np.lexsort(cols[::-1]).astype(np.int64)


def tour_of(codes: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """The tour of cells with key codes ``codes`` (rows): their row indices in tour order
    (audit.json's ``designs`` records it for every near group)."""
    return _tour(np.asarray(codes, dtype=np.int64), np.zeros(len(codes), np.uint64), metrics)


def offset_weights(s: int, bandwidth: float, cap: float) -> np.ndarray:
    """Weights a_1..a_s of the tour offsets (module docstring): a_i proportional to
    exp(-(i - 1) / h), flattened towards 1/s just enough that a_1 / 2 <= cap."""
    a = np.exp(-np.arange(s) / bandwidth)
    a /= a.sum()
    if a[0] / 2 > cap:
        lam = (a[0] / 2 - cap) / (a[0] / 2 - 0.5 / s)
        a = (1 - lam) * a + lam / s
    return a


def near_half(options: NearSpec) -> int:
    """s of the near design: every row has 2s destinations, 2s >= ``neighbours`` and the
    spread floor (>= ``min_destinations``, none above ``max_weight``)."""
    floor = max(options.min_destinations, math.ceil(1.0 / options.max_weight - 1e-12))
    return max(math.ceil(options.neighbours / 2), math.ceil(floor / 2))


def near_transition(codes: np.ndarray, cell_id: np.ndarray, frequency: np.ndarray,
                    theta: float, metrics: list[KeyMetric],
                    options: NearSpec, fragile: np.ndarray | None = None
                    ) -> tuple[Transition, dict]:
    """The near design of one PRB: ``(Transition, info)``.

    Parameters
    ----------
    codes : (k, p) int
        Key codes of the PRB's cells (their local order; ``config.key_names`` columns).
    cell_id : (k,) uint64
        :func:`sdc.method.draws.cell_identity` of the cells (tie-breaks only).
    frequency : (k,) int
        t_j.
    theta : float
        m_j = theta / t_j.
    metrics : from :func:`key_metrics`.
    options : the ``risk.near`` options.
    fragile : (k, P) bool, optional
        The matching kernel's fragile classes of the cells (:func:`fragile_classes`).

    Returns
    -------
    The transition (``kind`` ``near``, or ``uniform`` when the PRB is too small for 2s
    destinations) and ``info``: ``{"w": "near" | "uniform"}``, with ``"why"`` for uniform.
    """
    t = np.asarray(frequency, dtype=np.int64)
    k = t.size
    move = nzy_move(t, theta)
    if options.weights is not None:
        return _weighted_matching(codes, t, move, theta, metrics, options.weights, fragile)
    half = near_half(options)
    if k - 1 < 2 * half:
        return (Transition(t, move, theta=float(theta), kind="uniform"),
                {"w": "uniform", "why": f"k - 1 = {k - 1} other cells < {2 * half} "
                                        "destinations of the near design"})
    tour = _tour(np.asarray(codes, dtype=np.int64), cell_id, metrics)
    pos = np.empty(k, dtype=np.int64)
    pos[tour] = np.arange(k)
    if options.kernel == "matching":
        matched = 2 * half if options.matched is None else min(options.matched, 2 * half)
        steps = np.arange(1, 2 * half - matched + 1)   # the tour's own: +1, -1, +2, ...
        offs = np.where(steps % 2 == 1, (steps + 1) // 2, -(steps // 2))
        band = tour[(pos[:, None] + offs[None, :]) % k]
        cost = record_cost(codes, metrics)
        shift = class_shift(codes, metrics)
        if shift is not None:  # below one record: fewest records changed first
            cost = cost * float(shift.max() + 1) + shift
        cost[np.arange(k)[:, None], band] = np.inf     # pairs the tour already gives
        keeps = None if fragile is None else _keeps(codes, metrics,
                                                    _size_fragile_where_kept(
                                                        codes, metrics, fragile, matched))
        dest = np.sort(np.column_stack([band, matching_destinations(cost, matched, keeps)]),
                       axis=1)
        return (Transition(t, move, np.arange(k + 1, dtype=np.int64) * (2 * half), dest.ravel(),
                           np.full(dest.size, 1.0 / (2 * half)), theta=float(theta),
                           kind="near"), {"w": "near", "kernel": "matching"})
    a = offset_weights(half, options.bandwidth, options.max_weight)
    offs = np.r_[np.arange(1, half + 1), -np.arange(1, half + 1)]
    dest = tour[(pos[:, None] + offs[None, :]) % k]            # (k, 2 half), row j = cell j
    w = np.r_[a, a] / 2.0
    order = np.argsort(dest, axis=1, kind="stable")
    indices = np.take_along_axis(dest, order, axis=1).ravel()
    weights = np.broadcast_to(w, dest.shape)[np.arange(k)[:, None], order].ravel()
    indptr = np.arange(k + 1, dtype=np.int64) * (2 * half)
    return (Transition(t, move, indptr, indices, weights.copy(), theta=float(theta), kind="near"),
            {"w": "near"})


def _weighted_matching(codes: np.ndarray, t: np.ndarray, move: np.ndarray, theta: float,
                       metrics: list[KeyMetric], weights: list[float],
                       fragile: np.ndarray | None) -> tuple[Transition, dict]:
    """The matching kernel with ``near.weights``: W = sum_i w_i Q_i, Q_i the i-th matching of
    :func:`matching_destinations` (the fragile penalties as for equal weights). Every Q_i is
    a permutation without fixed points and no pair is used twice, so W is exactly doubly
    stochastic with a zero diagonal, row j holding w_i at Q_i(j). A PRB with fewer than
    len(weights) + 1 cells gets the uniform W."""
    k = t.size
    n = len(weights)
    if k - 1 < n:
        return (Transition(t, move, theta=float(theta), kind="uniform"),
                {"w": "uniform", "why": f"k - 1 = {k - 1} other cells < {n} destinations of "
                                        "the weighted matching kernel"})
    codes = np.asarray(codes, dtype=np.int64)
    cost = record_cost(codes, metrics)
    shift = class_shift(codes, metrics)
    if shift is not None:  # below one record: fewest records changed first
        cost = cost * float(shift.max() + 1) + shift
    keeps = None if fragile is None else _keeps(codes, metrics,
                                                _size_fragile_where_kept(codes, metrics,
                                                                         fragile, n))
    dest = matching_destinations(cost, n, keeps)                 # column i = Q_i
    order = np.argsort(dest, axis=1, kind="stable")
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), dest.shape)
    return (Transition(t, move, np.arange(k + 1, dtype=np.int64) * n,
                       np.take_along_axis(dest, order, axis=1).ravel(),
                       np.take_along_axis(w, order, axis=1).ravel().copy(),
                       theta=float(theta), kind="near"),
            {"w": "near", "kernel": "matching", "weights": [float(x) for x in weights]})
