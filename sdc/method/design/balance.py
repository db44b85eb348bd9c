"""The weighted balance of a design node (``risk.weighted``; docs/DESIGN.md, "Weighted jobs").

A weighted job's node is planned as ``sdc release`` plans it (:func:`plan_release`, then the
weighted design of :mod:`sdc.method.designs` on the node's cell totals W_j) and
judged by what a user of weighted totals sees, exactly from the transition probabilities:

- **bias**: sum_l |E[W*_l] - W_l| / sum_l W_l (:func:`sdc.method.transition.expected_totals`);
- **fallback**: the share of the total weight in cells whose weight group keeps NZY's design
  (no c_g certifies: their weighted totals are not balanced);
- **beyond**: the expected share of perturbed cells (Var W*_l > 0) whose mean over R = 30
  releases lies beyond 3 standard errors of W_l: with b_l the bias and s_l the standard
  deviation of one release, P(|Z + b_l sqrt(R) / s_l| > 3), Z standard normal (the issue's
  test; 0.27% when unbiased). Var W*_l = sum_j Q_j p_jl (1 - p_jl), Q_j the sum of the squared
  weights of cell j (records move independently; :func:`variance_totals`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.method.transition import CellDesign, expected_totals

__all__ = ["BEYOND_MAX", "BIAS_MAX", "RELEASES", "balance_figures", "beyond_share",
           "variance_totals", "weighted_node"]

#: a weighted job's recommendation keeps sum |E[W*] - W| <= this share of the total weight
BIAS_MAX = 0.005
#: ... and at most this expected share of perturbed cells beyond 3 SE over ``RELEASES``
BEYOND_MAX = 0.015
RELEASES = 30


def variance_totals(x2: np.ndarray, design: CellDesign) -> np.ndarray:
    """Var[X*_l] = sum_j X2_j p_jl (1 - p_jl) for every cell l, records moving independently,
    ``x2`` the per-cell sum of the squared per-record values (Q_j = sum w_i^2 for weighted
    totals, t_j for counts). p_ll = 1 - m_l; p_jl = m_j w_jl on a near row, else
    m_j / (k_g - 1) over the other cells of j's group (the layout of
    :func:`sdc.method.transition.expected_totals`). Exact.

    >>> d = CellDesign(np.array([.5, .5]), np.array([0, 0]), np.zeros(3, np.int64),
    ...                np.zeros(0, np.int64), np.zeros(0))
    >>> variance_totals(np.array([1.0, 9.0]), d).tolist()
    [2.5, 2.5]
    """
    x2 = np.asarray(x2, dtype=np.float64)
    g = np.asarray(design.group, dtype=np.int64)
    m = np.where(g >= 0, np.asarray(design.move, dtype=np.float64), 0.0)
    out = x2 * m * (1.0 - m)
    sens = np.flatnonzero(g >= 0)
    if sens.size == 0:
        return out
    row_len = np.diff(design.indptr)
    if design.dest.size:
        rows = np.repeat(np.arange(x2.size), row_len)
        p = m[rows] * design.weight
        out += np.bincount(design.dest, weights=x2[rows] * p * (1.0 - p), minlength=x2.size)
    uni = sens[row_len[sens] == 0]
    n_g = int(g[sens].max()) + 1
    k = np.bincount(g[sens], minlength=n_g)
    kk = k[g[uni]]
    q = np.where(kk > 1, m[uni] / np.maximum(kk - 1, 1), 0.0)
    term = x2[uni] * q * (1.0 - q)
    pool = np.bincount(g[uni], weights=term, minlength=n_g)
    own = np.zeros(x2.size)
    own[uni] = term
    out[sens] += pool[g[sens]] - own[sens]
    return out


def beyond_share(bias: np.ndarray, var: np.ndarray, releases: int = RELEASES) -> float:
    """Expected share of the cells with ``var`` > 0 whose mean over ``releases`` independent
    releases lies beyond 3 standard errors of the original: mean of P(|Z + d| > 3),
    d = |bias| sqrt(R) / sqrt(var) (module docstring)."""
    from scipy.stats import norm

    on = var > 0
    if not on.any():
        return 0.0
    d = np.abs(bias[on]) * np.sqrt(releases) / np.sqrt(var[on])
    return float(np.mean(norm.sf(3.0 - d) + norm.cdf(-3.0 - d)))


def balance_figures(plan: Any, weight_total: np.ndarray, weight_sq: np.ndarray
                    ) -> dict[str, Any]:
    """The weighted figures of a planned release (``plan.weighted`` set, or NZY's design when
    the weighted design is not used): bias, fallback and beyond (module docstring), the
    expected records changed and the certificate of the design used."""
    t = plan.partitioned.cells.frequency
    design = plan.cell_design()
    w = np.asarray(weight_total, dtype=np.float64)
    total = float(w.sum()) or 1.0
    bias = expected_totals(w, design) - w
    var = variance_totals(weight_sq, design)
    out = {"weighted_bias": float(np.abs(bias).sum()) / total,
           "weighted_beyond": beyond_share(bias, var),
           "certificate": float(plan.certificate),
           "changed": float(plan.expected_changed),
           "n_records": int(t.sum())}
    if plan.weighted is not None:
        g = plan.weighted.groups
        cell_g = plan.weighted.cell_group
        nzy = np.flatnonzero(g["design"].to_numpy() == "nzy")
        fall = np.isin(cell_g, g["group"].to_numpy()[nzy]) & (cell_g >= 0)
        out.update(weight_groups=int(len(g)), nzy_groups=int(nzy.size),
                   weighted_fallback=float(w[fall].sum()) / total)
    else:
        out.update(weight_groups=0, nzy_groups=0, weighted_fallback=1.0)
    return out


def weighted_node(part: Any, config: Any, weight_total: np.ndarray,
                  weight_sq: np.ndarray) -> dict[str, Any]:
    """Plan a node's partitioned cell table as ``sdc release`` would (the one planning call,
    :func:`sdc.method.designs.plan_release`: the config's transition design, weighted groups
    on ``weight_total`` for a weighted design) and its :func:`balance_figures`. Raises what
    planning raises (SmallBlockError, CertificationError)."""
    from sdc.method.designs import plan_release

    plan = plan_release(part, config, weight_total)
    return balance_figures(plan, weight_total, weight_sq)
