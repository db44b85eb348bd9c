"""The expected shift of an outcome's group means by every key's category under a node's plan
(``sdc design``; docs/DESIGN.md, "What each key pays").

Under the design's move model (the one :func:`sdc.method.design.rule.displacement` and
:func:`~sdc.method.design.rule.changes_of_key` use) each sensitive cell c of PRB b loses
theta_b of its t_c records in expectation, records drawn at random, each moved to one of the
k_b - 1 other cells of b uniformly; a moved record keeps its outcome y. The expected outcome
sum of cell c therefore moves by

    dS_c = theta_b / (k_b - 1) * (M_b - k_b m_c),   m_c = S_c / t_c,  M_b = sum_{l in b} m_l

(and the count of non-missing y alike, with n_c / t_c): aggregates per cell, no record is
read. A key's category g pools its cells: the shift of its mean is
(S_g + dS_g) / (n_g + dn_g) - S_g / n_g, in standard errors of the mean before,
s_g / sqrt(n_g). The key's figure is the largest shift over its categories of at least
``MIN_GROUP`` records (signed).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_GROUP", "key_mean_shifts"]

#: smallest category whose mean shift counts (as the report's group means)
MIN_GROUP = 10


def key_mean_shifts(key_codes: np.ndarray, t: np.ndarray, moments: tuple[np.ndarray, ...],
                    cells: np.ndarray, block: np.ndarray, theta: np.ndarray,
                    k: np.ndarray) -> list[float | None]:
    """For every key (column of ``key_codes``, the node's cells x keys released codes), the
    largest expected shift of the outcome's mean over the key's categories, in SE (None:
    no category of ``MIN_GROUP`` non-missing values with spread). ``t``: records per cell;
    ``moments``: (n, S, Q) per cell, the non-missing outcome values, their sum and sum of
    squares; ``cells``: the sensitive cells in PRBs, ``block``: their PRB; ``theta``, ``k``
    per PRB."""
    n, s, q = (np.asarray(m, dtype=float) for m in moments)
    tc = np.maximum(t[cells].astype(float), 1.0)
    kb = k.astype(float)
    w = np.where(kb > 1, theta / np.maximum(kb - 1, 1), 0.0)
    nb = theta.size
    d: list[np.ndarray] = []
    for per in (s, n):
        m = per[cells] / tc
        tot = np.bincount(block, weights=m, minlength=nb)
        d.append(w[block] * (tot[block] - kb[block] * m))
    out: list[float | None] = []
    for j in range(key_codes.shape[1]):
        code = key_codes[:, j]
        size = int(code.max()) + 1 if code.size else 0
        ng, sg, qg = (np.bincount(code, weights=x, minlength=size) for x in (n, s, q))
        dsg = np.bincount(code[cells], weights=d[0], minlength=size)
        dng = np.bincount(code[cells], weights=d[1], minlength=size)
        ok = ng >= MIN_GROUP
        with np.errstate(divide="ignore", invalid="ignore"):
            var = (qg - sg * sg / ng) / (ng - 1)
            se = np.sqrt(var / ng)
            shift = ((sg + dsg) / (ng + dng) - sg / ng) / se
        ok &= np.isfinite(shift) & (var > 1e-12 * np.maximum(qg / np.maximum(ng, 1), 1e-300))
        if not ok.any():
            out.append(None)
            continue
        vals = shift[ok]
        out.append(float(vals[np.argmax(np.abs(vals))]))
    return out
