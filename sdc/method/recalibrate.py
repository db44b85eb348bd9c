"""The recalibrated weight of a household file (``input.weight_release: recalibrated``,
docs/METHOD.md 7.13).

A calibrated survey weight is, by construction, close to a function of the calibration
classes (region x household size in an income survey: eusilc's rb050 is one value per
combination), so released unchanged it shows a moved household's original household keys.
Released recalibrated, it is a function of the *released* household keys instead:

    w*(l) = T(l) / N*(l),   T(l) = sum over households h originally in l of size_h w_h,
                            N*(l) = sum over households released in l of size_h,

for every released household-key combination l. The person-weighted total of every released
household-key combination then equals the original one, T(l) (post-stratification to the
original totals on the released keys). A combination that no household is released in loses
its total; the cell weights are then raked (iterative proportional fitting) to the original
one-key margins of every household key, so those margins still hold (all but a margin value
no household is released with, whose total is lost: it is left out of the raking). When the
margins cannot be met by positive cell weights (the raking does not converge in
:data:`MAX_ROUNDS` rounds) the post-stratified weights are kept: every released combination's
total exact, the lost ones' missing. Every member of a
household carries its household's w*.

Whole arrays; the loop is over raking rounds (at most :data:`MAX_ROUNDS`), never records.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_ROUNDS", "recalibrated_weights"]

MAX_ROUNDS = 100
"""Raking rounds at most (when a combination's total was lost)."""


def recalibrated_weights(before: np.ndarray, after: np.ndarray, size: np.ndarray,
                         weight: np.ndarray) -> np.ndarray:
    """w* of every household (H,): ``before`` / ``after`` (H, p) its original and released
    household-key codes, ``size`` (H,) its members, ``weight`` (H,) its weight (constant
    within the household). See the module docstring."""
    before = np.asarray(before, np.int64).reshape(len(size), -1)
    after = np.asarray(after, np.int64).reshape(len(size), -1)
    size = np.asarray(size, np.float64)
    weight = np.asarray(weight, np.float64)
    both = np.vstack([before, after])
    combos, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    c_before, c_after = inv[:len(size)], inv[len(size):]
    n = combos.shape[0]
    total = np.bincount(c_before, weights=size * weight, minlength=n)
    persons = np.bincount(c_after, weights=size, minlength=n)
    w = np.divide(total, persons, out=np.zeros(n), where=persons > 0)
    lost = (persons == 0) & (total > 0)
    if lost.any():
        w = _rake(w, persons, combos, c_before, size * weight)
    return w[c_after]


def _rake(w: np.ndarray, persons: np.ndarray, combos: np.ndarray, c_before: np.ndarray,
          x: np.ndarray) -> np.ndarray:
    """Cell weights ``w`` raked to the original one-key margins (weighted totals of every
    value of every household key), the released persons per cell held. A lost combination
    with a key value no household is released with (a household size nobody has after the
    release) cannot be carried by any cell: its total is left out of every margin. Not
    converged: ``w`` unchanged."""
    released = persons > 0
    gone = np.zeros(combos.shape[0], dtype=bool)
    for j in range(combos.shape[1]):
        v = combos[:, j]
        has = np.bincount(v[released], minlength=int(v.max()) + 1) > 0
        gone |= ~has[v]
    x = np.where(gone[c_before], 0.0, x)
    start = w
    for _ in range(MAX_ROUNDS):
        worst = 0.0
        for j in range(combos.shape[1]):
            v = combos[:, j]
            target = np.bincount(v[c_before], weights=x, minlength=int(v.max()) + 1)
            got = np.bincount(v, weights=w * persons, minlength=int(v.max()) + 1)
            f = np.divide(target, got, out=np.ones_like(target), where=got > 0)
            w = w * f[v]
            worst = max(worst, float(np.abs(f[got > 0] - 1.0).max(initial=0.0)))
        if worst < 1e-12:
            return w
    return start  # margins no positive cell weights meet: the post-stratified weights
