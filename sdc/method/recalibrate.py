"""The recalibrated weight of a household file (``input.weight_release: recalibrated``,
docs/METHOD.md 7.13).

A calibrated survey weight is, by construction, close to a function of the calibration
classes (region x household size in an income survey: eusilc's rb050 is one value per
combination), so released unchanged it shows a moved household's original household keys.
Released recalibrated, it is a function of released values only: one weight per cell
(l, s) of the released household-key combination l and the household size s (its number of
members, which every household release shows and keeps: households are released whole),
raked (iterative proportional fitting) to two margins of the original file:

- the released household-key combinations: sum over households released in l of
  size_h w*(l, s_h) = T(l) = sum over households h originally in l of size_h w_h;
- the household sizes: sum over households of size s of size_h w*(l_h, s) = T_s = sum over
  households of size s of size_h w_h (households keep their size, so the weighted
  household size distribution is the original's too).

The raking starts from the post-stratified w*(l) = T(l) / N*(l), adjusts the size margin then
the key margin in every round (so the key totals hold to rounding) and stops when every margin
total is met to :data:`TOLERANCE` (relative). A combination that no household is released in
loses its total; the key margin is then the original one-key margins of every household key
instead (all but a margin value no household is released with, whose households' total is
lost: the size totals are then scaled to the total the key margins carry, keeping the
original size shares, so the margins stay consistent). Margins that
positive cell weights cannot meet within :data:`MAX_ROUNDS` rounds are refused
(:class:`RecalibrationError`, exit 2). Every member of a household carries its cell's w*.

Whole arrays; the loop is over raking rounds (at most :data:`MAX_ROUNDS`), never records.
"""

from __future__ import annotations

import numpy as np

from sdc.errors import InputError

__all__ = ["MAX_ROUNDS", "TOLERANCE", "RecalibrationError", "recalibrated_weights", "size_top"]

MAX_ROUNDS = 1000
"""Raking rounds at most."""

TOLERANCE = 1e-10
"""Largest relative error of a margin total the raking accepts."""


class RecalibrationError(InputError):
    """The recalibrated weight cannot meet its margins (exit 2)."""


def size_top(large_groups: int | None) -> int | None:
    """The size margin's top class under the household design's ``large_groups`` T
    (``risk.large_groups``: T + 1), else None."""
    return None if large_groups is None else int(large_groups) + 1


def recalibrated_weights(before: np.ndarray, after: np.ndarray, size: np.ndarray,
                         weight: np.ndarray, name: str = "the weight",
                         top: int | None = None,
                         left: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                         ) -> np.ndarray:
    """w* of every household (H,): ``before`` / ``after`` (H, p) its original and released
    household-key codes, ``size`` (H,) its members (the same before and after), ``weight``
    (H,) its weight (constant within the household); ``name`` the weight column (messages);
    ``top``: the size margin's classes top-coded there (every group of ``top`` or more
    members in one class: ``risk.large_groups``, where a margin per size of enterprises of up
    to 210 sampled employees has one group per size and cannot be met); ``left``: the
    household keys' codes (L, p), sizes and weights of the households left out of the public
    file (``risk.exposed_sizes: drop``): their totals stay in the margins (their size's in
    the nearest released size's, :func:`~sdc.method.household_exposed.
    nearest_released_size`), so the released weight carries the whole file's totals. See the
    module docstring."""
    from sdc.method.household_exposed import nearest_released_size

    size = np.asarray(size, np.float64)
    h = len(size)
    before = np.asarray(before, np.int64).reshape(h, -1)
    after = np.asarray(after, np.int64).reshape(h, -1)
    weight = np.asarray(weight, np.float64)
    classes = size.astype(np.int64) if top is None else np.minimum(size.astype(np.int64), top)
    if left is not None and len(left[1]):  # the totals of the left-out households too
        l_codes, l_size, l_weight = (np.asarray(a) for a in left)
        l_size = np.asarray(l_size, np.float64)
        before = np.vstack([before, np.asarray(l_codes, np.int64).reshape(len(l_size), -1)])
        weight = np.concatenate([weight, np.asarray(l_weight, np.float64)])
        classes = np.concatenate([classes, nearest_released_size(
            l_size.astype(np.int64) if top is None else np.minimum(l_size.astype(np.int64), top),
            np.unique(classes))])
        size = np.concatenate([size, l_size])
    x = size * weight
    both = np.vstack([before, after])
    combos, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    c_before, c_after = inv[:len(size)], inv[len(size):]
    sizes, s_code = np.unique(classes, return_inverse=True)
    s_code = s_code.reshape(-1)
    n, k = combos.shape[0], sizes.size
    # the cells (combination, size) as flat codes; w starts post-stratified per combination
    cell_after = c_after * k + s_code[:h]
    persons = np.bincount(cell_after, weights=size[:h], minlength=n * k)
    total = np.bincount(c_before, weights=x, minlength=n)
    p_combo = np.bincount(c_after, weights=size[:h], minlength=n)
    w_combo = np.divide(total, p_combo, out=np.zeros(n), where=p_combo > 0)
    w = np.where(persons > 0, np.repeat(w_combo, k), 0.0)  # an empty cell carries nothing
    cell_combo = np.repeat(np.arange(n), k)
    cell_size = np.tile(np.arange(k), n)
    size_total = np.bincount(s_code, weights=x, minlength=k)
    if ((p_combo == 0) & (total > 0)).any():  # a lost combination: the one-key margins
        kept = np.where(_gone(combos, p_combo > 0)[c_before], 0.0, x)
        margins = [(combos[cell_combo, j], np.bincount(combos[c_before, j], weights=kept,
                                                       minlength=int(combos[:, j].max()) + 1))
                   for j in range(combos.shape[1])]
        size_total = size_total * (kept.sum() / x.sum() if x.sum() > 0 else 0.0)  # the total the key margins carry
    else:
        margins = [(cell_combo, total)]
    # the key margin last: its totals hold to rounding, the sizes' to TOLERANCE
    w = _rake(w, persons, [(cell_size, size_total), *margins], name)
    return w[cell_after]


def _gone(combos: np.ndarray, released: np.ndarray) -> np.ndarray:
    """Combinations holding a key value no household is released with (its total cannot be
    carried by any cell)."""
    gone = np.zeros(combos.shape[0], dtype=bool)
    for j in range(combos.shape[1]):
        v = combos[:, j]
        has = np.bincount(v[released], minlength=int(v.max()) + 1) > 0
        gone |= ~has[v]
    return gone


def _rake(w: np.ndarray, persons: np.ndarray, margins: list[tuple[np.ndarray, np.ndarray]],
          name: str) -> np.ndarray:
    """Cell weights ``w`` raked to the ``margins`` (cell -> margin class, the class's
    target total), the released persons per cell held, until every class total is met to
    :data:`TOLERANCE` (relative); not met in :data:`MAX_ROUNDS` rounds: refused."""
    err = np.inf
    for _ in range(MAX_ROUNDS):
        for cls, target in margins:
            got = np.bincount(cls, weights=w * persons, minlength=target.size)
            f = np.divide(target, got, out=np.ones_like(target), where=got > 0)
            w = w * f[cls]
        err = max(_relative_error(w, persons, cls, target) for cls, target in margins)
        if err <= TOLERANCE:
            return w
    raise RecalibrationError(
        f"input.weight_release: recalibrated: raking {name} to the released household-key "
        f"totals and the household-size totals did not converge in {MAX_ROUNDS} rounds "
        f"(largest relative error {err:.3g} > {TOLERANCE:g}): no positive weight per released "
        "household-key combination x household size meets both (a size whose households are "
        "released in few combinations); fix: coarser household keys, or "
        "input.weight_release: as_is, or input.drop the weight")


def _relative_error(w: np.ndarray, persons: np.ndarray, cls: np.ndarray,
                    target: np.ndarray) -> float:
    got = np.bincount(cls, weights=w * persons, minlength=target.size)
    scale = np.where(target > 0, target, 1.0)
    return float((np.abs(got - target) / scale).max(initial=0.0))
