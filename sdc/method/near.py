"""The near-cell destination design W of a PRB (``risk.destinations: near``).

Built deterministically from the PRB's cells (their key codes) and the config, never from
records or the seed (docs/METHOD.md section 7.12):

1. **Key distance** d(j, l) = sum over keys of a per-key step count: a nominal key 1 for any
   other value; an ordered key (``range``, or recoded into bands / top-bottom classes) the
   number of adjacent values between them, |code_j - code_l|; a key partitioned by an ARX
   hierarchy the number of hierarchy levels at which the two values differ (1 = siblings).
   A missing value is one step from every value.
2. **Tour**: a nearest-neighbour tour of the PRB's cells under d (start at the cell with the
   smallest key codes, always step to the nearest cell not yet visited; ties broken by the
   unkeyed hash fmix64(id_j xor id_l) of the two cells' identities). O(k^2 p); above 20,000
   cells the cells' lexicographic order.
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sdc.config.model import Bands, Hierarchy, NearSpec, ReleaseConfig, TopBottom
from sdc.method.draws import fmix64
from sdc.method.generalize import generalize_domain
from sdc.method.transition import Transition, nzy_move

__all__ = ["KeyMetric", "key_metrics", "near_half", "near_transition", "offset_weights"]

_ROW_BLOCK = 1 << 22       # distance entries per block
_TOUR_MAX = 20000          # cells: above, the band follows the lexicographic order


@dataclass(frozen=True)
class KeyMetric:
    """How one key's values are apart: ``kind`` ``ordered`` / ``nominal`` / ``tree`` /
    ``composition``; ``levels`` (tree only): (L, size) ancestor codes of every value code at
    levels 0..L-1; ``missing``: the code of the missing category, or -1; ``counts``
    (composition only): (C, P) members per person class of every composition; ``scale``: the
    key's steps are multiplied by it (the household keys of a composition stage: a household
    that changes them changes every member's record, so they cost more than any change of
    the composition of a household of the same size)."""

    name: str
    kind: str
    levels: np.ndarray | None = None
    missing: int = -1
    counts: np.ndarray | None = None
    scale: float = 1.0


def key_metrics(config: ReleaseConfig) -> list[KeyMetric]:
    """The metric of every key (``config.key_names`` order), as the module docstring says.
    The composition stage of a household file (its composition key carries the compositions'
    member counts) measures compositions by the members that change, size - sum_c
    min(n_c, n'_c), and its household keys' steps at (largest size + 1) each."""
    out = _key_metrics(config)
    comp = [m for m in out if m.kind == "composition"]
    if comp:
        scale = float(comp[0].counts.sum(axis=1).max()) + 1.0
        out = [m if m.kind == "composition" else
               KeyMetric(m.name, m.kind, m.levels, m.missing, m.counts, scale) for m in out]
    return out


def _key_metrics(config: ReleaseConfig) -> list[KeyMetric]:
    out = []
    for name in config.key_names:
        kv = config.key_variables[name]
        if kv.composition_counts is not None:
            out.append(KeyMetric(name, "composition",
                                 counts=np.asarray(kv.composition_counts, dtype=np.int64)))
            continue
        miss = kv.size - 1 if kv.missing == "category" else -1
        src = config.input_key_variables.get(name, kv)
        recode = getattr(src, "recode", None)
        rule = config.partition.get(name)
        if kv.range is not None or isinstance(recode, Bands | TopBottom):
            out.append(KeyMetric(name, "ordered", missing=miss))
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
            out.append(KeyMetric(name, "tree", np.vstack(levels), miss))
        else:
            out.append(KeyMetric(name, "nominal", missing=miss))
    return out


def _distances(codes: np.ndarray, rows: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """d(j, l) for j in ``rows`` and every l: (len(rows), k) float64 (integers)."""
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


def _tour(codes: np.ndarray, cell_id: np.ndarray, metrics: list[KeyMetric]) -> np.ndarray:
    """A nearest-neighbour tour of the cells: start at local cell 0 (the smallest key codes),
    always step to the nearest cell not yet visited (ties: the unkeyed hash of the pair).
    O(k^2 p); above ``_TOUR_MAX`` cells the cells' lexicographic order (their local order)."""
    k = codes.shape[0]
    if k > _TOUR_MAX:
        return np.arange(k, dtype=np.int64)
    ids = np.asarray(cell_id, dtype=np.uint64)
    order = np.empty(k, dtype=np.int64)
    seen = np.zeros(k, dtype=bool)
    cur = 0
    for p in range(k):
        order[p] = cur
        seen[cur] = True
        if p == k - 1:
            break
        key = _distances(codes, np.array([cur]), metrics)[0]
        key += fmix64(ids[cur] ^ ids).astype(np.float64) * 2.0 ** -65
        key[seen] = np.inf
        cur = int(np.argmin(key))
    return order


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
                    options: NearSpec) -> tuple[Transition, dict]:
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

    Returns
    -------
    The transition (``kind`` ``near``, or ``uniform`` when the PRB is too small for 2s
    destinations) and ``info``: ``{"w": "near" | "uniform"}``, with ``"why"`` for uniform.
    """
    t = np.asarray(frequency, dtype=np.int64)
    k = t.size
    move = nzy_move(t, theta)
    half = near_half(options)
    if k - 1 < 2 * half:
        return (Transition(t, move, theta=float(theta), kind="uniform"),
                {"w": "uniform", "why": f"k - 1 = {k - 1} other cells < {2 * half} "
                                        "destinations of the near design"})
    tour = _tour(np.asarray(codes, dtype=np.int64), cell_id, metrics)
    a = offset_weights(half, options.bandwidth, options.max_weight)
    pos = np.empty(k, dtype=np.int64)
    pos[tour] = np.arange(k)
    offs = np.r_[np.arange(1, half + 1), -np.arange(1, half + 1)]
    dest = tour[(pos[:, None] + offs[None, :]) % k]            # (k, 2 half), row j = cell j
    w = np.r_[a, a] / 2.0
    order = np.argsort(dest, axis=1, kind="stable")
    indices = np.take_along_axis(dest, order, axis=1).ravel()
    weights = np.broadcast_to(w, dest.shape)[np.arange(k)[:, None], order].ravel()
    indptr = np.arange(k + 1, dtype=np.int64) * (2 * half)
    return (Transition(t, move, indptr, indices, weights.copy(), theta=float(theta), kind="near"),
            {"w": "near"})
