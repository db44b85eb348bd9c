"""Monte Carlo intruder: replay the NZY perturbation many times and attack every replica.

The intruder of METHOD.md section 6 knows a target B's key values c_j and that B is in the file;
among the S_j released records in c_j it picks one uniformly at random (gives up if S_j = 0).
B is matched correctly iff B kept its cell and the intruder picks B: probability 1/S_j given
the replica. Non-sensitive records never move, so only the records of the PRBs are simulated.

Replication ``i`` (0 <= i < n_sim) draws from its own stream ``sdc.engine.draws.stream(seed,
f"intruder:{i}")`` - never the release's ``prb:...`` streams, so the simulation says nothing
about which records the real release moved. Within a replication the PRBs are visited in PRB
order and each is post-randomized with the engine's own kernel
(:func:`sdc.engine.pram.post_randomize`) on its records in canonical order (by cell), so the simulated
mechanism is the released one.

Estimator (Rao-Blackwellized intruder): for every target B with t_j = t and S_j = a >= 1 in a
replica, the conditional probability of a correct match given the replica is Y = 1{B kept its
cell} / a (the intruder's uniform pick integrated out exactly). Then

    R_hat(t, a) = sum of Y over (replica, target) pairs with t_j = t, S_j = a
                  / number of such pairs.

Its expectation is the pair-weighted average of the exact R_j(a, t) over the PRBs:

    R_pool(t, a) = sum_b m_bt t P_b(kept, S = a) / a  /  sum_b m_bt t P_b(S = a),

where m_bt is the number of cells with frequency t in PRB b, P_b(kept, S = a) = p P(S' = a-1),
P_b(S = a) = p P(S' = a-1) + (1 - p) P(S' = a), p = 1 - theta_b / t and S' is the number of
*other* records landing in the cell (METHOD.md section 6). Both are reported, with the range
min_b / max_b of the exact R_b(a, t) (:func:`sdc.correct_match_risk`).

Standard error: replicas are independent, the pairs within one replica are not, so the SE is
the ratio-estimator (delta-method) SE over replicas,

    se^2 = sum_r (num_r - R_hat cnt_r)^2 / (n_sim (n_sim - 1) cnt_bar^2),

with num_r, cnt_r the replica's sum of Y and pair count. ``n_eff = (sum_r cnt_r)^2 /
sum_r cnt_r^2`` is a conservative effective number of independent observations (it counts each
replica as one, however many pairs it holds): Y lies in [0, 1/a], so Var(Y) <= R(1 - R) and
sqrt(R (1 - R) / n_eff) bounds the SE from above up to the ratio-estimator approximation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom

from sdc.engine.draws import stream
from sdc.engine.pram import post_randomize
from sdc.engine.risk import correct_match_risk

__all__ = ["A_MAX", "exact_s_distribution", "simulate_intruder"]

#: Largest S_j = a reported per class (larger a are pooled in the overall figures only).
A_MAX = 4


def _bin_pmf(n: int, q: float) -> np.ndarray:
    return binom.pmf(np.arange(n + 1), n, q) if n > 0 else np.ones(1)


def exact_s_distribution(profile: Mapping[int, int], t_j: int, theta: float,
                         length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(P(kept, S_j = a), P(S_j = a))`` for a = 0..length-1 in a PRB with ``profile``.

    S_j = 1{kept} + S', S' = Bin(t_j - 1, 1 - theta/t_j) + sum over the other cells l of
    Bin(t_l, theta / ((k - 1) t_l)) (cells with equal t merged into one binomial). Written
    independently of :mod:`sdc.engine.risk` (plain binomial pmfs and full convolutions), so it also
    cross-checks the engine.
    """
    k = int(sum(profile.values()))
    th = float(theta) if k > 1 else 0.0
    pmf = _bin_pmf(t_j - 1, 1.0 - th / t_j)
    if k > 1:
        for t, m in sorted(profile.items()):
            others = int(m) - (1 if int(t) == t_j else 0)
            if others > 0:
                pmf = np.convolve(pmf, _bin_pmf(others * int(t), th / ((k - 1) * int(t))))
    p = 1.0 - th / t_j
    s_other = np.zeros(length + 1)
    m = min(pmf.size, length + 1)
    s_other[:m] = pmf[:m]
    kept = np.zeros(length)
    kept[1:] = p * s_other[: length - 1]
    total = kept + (1.0 - p) * s_other[:length]
    return kept, total


def _parse_profile(profile: Any) -> dict[int, int]:
    if isinstance(profile, Mapping):
        return {int(t): int(m) for t, m in profile.items() if int(m) > 0}
    out: dict[int, int] = {}
    for part in str(profile).split(","):
        if part.strip():
            t, m = part.split(":")
            out[int(t)] = int(m)
    return out


def simulate_intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                      *, seed: int, n_sim: int = 200, xi: float | None = None,
                      a_max: int = A_MAX) -> dict[str, Any]:
    """Play the METHOD.md section 6 intruder on ``n_sim`` fresh replays of the NZY perturbation.

    Parameters
    ----------
    cell_frequency : (C,) int
        t_j of every non-empty cell of the original file.
    cell_prb : (C,) int
        PRB of every cell, -1 for non-sensitive cells.
    blocks : DataFrame
        ``ReleaseResult.blocks`` (uses ``prb``, ``k``, ``theta``, ``profile``).
    seed : int
        The release seed; replication i uses ``stream(seed, f"intruder:{i}")``.
    n_sim : int
        Number of replications (>= 2 for a standard error).

    Returns
    -------
    dict with ``classes`` (one entry per (t, a), a = 1..a_max, with ``estimate``, ``se``,
    ``n_obs``, ``n_eff``, ``exact_pooled``, ``exact_min``, ``exact_max``, ``p_s_equals_a``) and
    ``overall`` (expected number of correct matches if the intruder attacks every sensitive
    record: exact and estimated, with SE).
    """
    if n_sim < 2:
        raise ValueError(f"n_sim must be at least 2 for a standard error, got {n_sim}")
    t_cell = np.asarray(cell_frequency, dtype=np.int64)
    prb = np.asarray(cell_prb, dtype=np.int64)
    n_blocks = len(blocks)
    base = {"n_sim": int(n_sim), "a_max": int(a_max), "stream": "intruder:{i}",
            "estimator": "rao-blackwellized: 1{kept} / S_j per target and replica",
            "xi": xi}
    sens = np.flatnonzero(prb >= 0)
    if n_blocks == 0 or sens.size == 0:
        return {**base, "classes": [], "n_targets": 0,
                "overall": {"expected_correct_exact": 0.0, "expected_correct_estimate": 0.0,
                            "se": 0.0}}
    # sensitive cells ordered by (PRB, cell): local index inside the PRB
    sens = sens[np.argsort(prb[sens], kind="stable")]
    sprb = prb[sens]
    starts = np.searchsorted(sprb, np.arange(n_blocks + 1))
    local = np.arange(sens.size) - starts[sprb]
    # one slot per target record, grouped by cell (records of a cell are exchangeable)
    slot_sc = np.repeat(np.arange(sens.size), t_cell[sens])        # sensitive-cell index
    slot_t = t_cell[sens][slot_sc]
    slot_local = local[slot_sc]
    slot_bounds = np.searchsorted(sprb[slot_sc], np.arange(n_blocks + 1))
    ks = blocks["k"].to_numpy(dtype=np.int64)
    thetas = blocks["theta"].to_numpy(dtype=float)
    t_max = int(slot_t.max())
    n_cls = (t_max + 1) * (a_max + 1)
    cls_base = slot_t * (a_max + 1)

    num = np.zeros((n_sim, n_cls))
    cnt = np.zeros((n_sim, n_cls))
    total_y = np.zeros(n_sim)
    dest = np.empty(slot_sc.size, dtype=np.int64)
    for i in range(n_sim):
        rng = stream(seed, f"intruder:{i}")
        for b in range(n_blocks):
            lo, hi = slot_bounds[b], slot_bounds[b + 1]
            if hi == lo:
                continue
            d = post_randomize(slot_local[lo:hi], slot_t[lo:hi], int(ks[b]), float(thetas[b]), rng)
            dest[lo:hi] = starts[b] + d
        s_count = np.bincount(dest, minlength=sens.size)
        s = s_count[slot_sc]
        kept = dest == slot_sc
        y = np.where(kept, 1.0 / np.maximum(s, 1), 0.0)
        total_y[i] = np.sort(y).sum()
        ok = (s >= 1) & (s <= a_max)
        idx = cls_base[ok] + s[ok]
        num[i] = np.bincount(idx, weights=y[ok], minlength=n_cls)
        cnt[i] = np.bincount(idx, minlength=n_cls)

    # exact values per PRB
    exact_num = np.zeros(n_cls)
    exact_den = np.zeros(n_cls)
    r_min = np.full(n_cls, np.inf)
    r_max = np.full(n_cls, -np.inf)
    expected_correct = 0.0
    for b in range(n_blocks):
        prof = _parse_profile(blocks["profile"].iat[b])
        n_rec = sum(t * m for t, m in prof.items())
        for t, m in prof.items():
            # S_j <= n_rec, but the classes run to a_max: never index past the pmf
            kept_pmf, s_pmf = exact_s_distribution(prof, t, thetas[b], max(n_rec, a_max) + 1)
            a_all = np.arange(kept_pmf.size)
            expected_correct += m * t * float((kept_pmf[1:] / a_all[1:]).sum())
            r = correct_match_risk(prof, t, thetas[b], a_max)
            for a in range(1, a_max + 1):
                c = t * (a_max + 1) + a
                exact_num[c] += m * t * kept_pmf[a] / a
                exact_den[c] += m * t * s_pmf[a]
                if np.isfinite(r[a - 1]):
                    r_min[c] = min(r_min[c], float(r[a - 1]))
                    r_max[c] = max(r_max[c], float(r[a - 1]))

    n_targets = int(slot_sc.size)
    classes = []
    for t in sorted(set(slot_t.tolist())):
        for a in range(1, a_max + 1):
            c = t * (a_max + 1) + a
            col_n, col_c = num[:, c], cnt[:, c]
            n_obs = float(col_c.sum())
            est = float(col_n.sum() / n_obs) if n_obs > 0 else None
            se = n_eff = None
            if n_obs > 0:
                resid = col_n - est * col_c
                se = float(np.sqrt((resid**2).sum() / (n_sim * (n_sim - 1))) / col_c.mean())
                n_eff = float(n_obs**2 / (col_c**2).sum())
            classes.append({
                "t": int(t), "a": int(a), "estimate": est, "se": se,
                "n_obs": int(n_obs), "n_eff": n_eff,
                "exact_pooled": float(exact_num[c] / exact_den[c]) if exact_den[c] > 0 else None,
                "exact_min": float(r_min[c]) if np.isfinite(r_min[c]) else None,
                "exact_max": float(r_max[c]) if np.isfinite(r_max[c]) else None,
                "p_s_equals_a": float(exact_den[c] / n_targets),
            })
    est_total = float(total_y.mean())
    se_total = float(total_y.std(ddof=1) / np.sqrt(n_sim))
    ests = [c["estimate"] for c in classes if c["estimate"] is not None]
    return {**base, "classes": classes, "n_targets": n_targets,
            "max_estimate": max(ests) if ests else None,
            "overall": {"expected_correct_exact": expected_correct,
                        "expected_correct_estimate": est_total, "se": se_total}}
