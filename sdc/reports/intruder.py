"""Monte Carlo intruder: replay the NZY perturbation many times and attack every replica.

Replica i draws from its own stream ``stream(seed, "intruder:<i>")`` (never the release's) and
post-randomizes every PRB with the engine's own kernel (:mod:`sdc.method.pram`). The intruder
of docs/METHOD.md section 6 picks one of the S_j = a released records of the target's cell (and,
knowing the mechanism, of another cell z of its PRB); the pick is integrated out
(Rao-Blackwellized: Y = 1{B kept its cell} / a), pooled per class (t, t_z, a) and compared with
the exact pooled value; the SE is the ratio-estimator SE over replicas. Sums are exact integer
counts per cell, so no figure depends on summation order. docs/REPORTS.md, "intruder".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.draws import stream
from sdc.method.pram import post_randomize_prepared, prepare_records
from sdc.method.risk import correct_match_risk, pick_distribution

__all__ = ["A_MAX", "exact_s_distribution", "intruder", "simulate_intruder", "start_intruder"]

#: Largest S_j = a reported per class (larger a are pooled in the overall figures only).
A_MAX = 4


def _scipy_binom_pmf() -> Callable[[np.ndarray, float, float], np.ndarray]:
    """``scipy.stats.binom.pmf`` on its support (k = 0..n, 0 <= q <= 1): the same ufunc it
    calls, without importing scipy.stats (0.9 CPU s, a fifth of a warm ``sdc release``)."""
    try:
        from scipy.special._ufuncs import _binom_pmf as pmf
    except ImportError:  # pragma: no cover - another scipy: the public route
        from scipy.stats import binom

        def pmf(k: np.ndarray, n: float, q: float) -> np.ndarray:
            return binom.pmf(k, n, q)
    return pmf


_binom_pmf = _scipy_binom_pmf()


def _bin_pmf(n: int, q: float, size: int | None = None) -> np.ndarray:
    """Binomial(n, q) pmf at 0 .. min(n, size - 1) (the whole pmf when ``size`` is None)."""
    if n <= 0:
        return np.ones(1)
    top = n if size is None else min(n, size - 1)
    return _binom_pmf(np.arange(top + 1, dtype=np.float64), float(n), float(q))


def exact_s_distribution(profile: Mapping[int, int], t_j: int, theta: float,
                         length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(P(kept, S_j = a), P(S_j = a))`` for a = 0..length-1 in a PRB with ``profile``.

    S_j = 1{kept} + S', S' = Bin(t_j - 1, 1 - theta/t_j) + sum over the other cells l of
    Bin(t_l, theta / ((k - 1) t_l)) (cells with equal t merged into one binomial). Written
    independently of :mod:`sdc.method.risk` (plain binomial pmfs and convolutions), so it also
    cross-checks the engine.

    Only the head of S' that is not 0 in double precision is convolved. S' is a sum of
    independent Bernoullis with mean mu = (t_j - 1)(1 - theta/t_j) + theta (the k - 1 other
    cells bring theta/(k - 1) each) and variance <= mu, so by Bernstein's inequality
    P(S' >= mu + x) <= exp(-x^2 / (2 (mu + x/3))). With x = max(60 sqrt(mu), 2300) the exponent
    is below -1350 (x >= mu: >= 3x/8 >= 862 ... and 1350 for mu > 3600), i.e. the tail is below
    the smallest positive double (4.9e-324): P(S' = a) is exactly 0.0 in floating point for
    a >= mu + x, and every pmf is cut there. Without the cut a PRB of k cells cost O(k^2)
    (full convolutions of length ~ records of the PRB); with it O(k) for the pmfs and
    O(cut^2) per convolution, cut ~ t_j + 2300.
    """
    k = int(sum(profile.values()))
    th = float(theta) if k > 1 else 0.0
    mu = (t_j - 1) * (1.0 - th / t_j) + th
    cut = min(length + 1, int(np.ceil(mu + max(60.0 * np.sqrt(mu), 2300.0))) + 1)
    pmf = _bin_pmf(t_j - 1, 1.0 - th / t_j, cut)
    if k > 1:
        for t, m in sorted(profile.items()):
            others = int(m) - (1 if int(t) == t_j else 0)
            if others > 0:
                pmf = np.convolve(pmf, _bin_pmf(others * int(t), th / ((k - 1) * int(t)),
                                                cut))[:cut]
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


def _ratio(col_n: np.ndarray, col_c: np.ndarray, n_sim: int) -> dict[str, Any]:
    """Pooled ratio estimate sum(num) / sum(cnt) over replicas, its delta-method SE and n_eff."""
    n_obs = float(col_c.sum())
    if n_obs <= 0:
        return {"estimate": None, "se": None, "n_obs": 0, "n_eff": None}
    est = float(col_n.sum() / n_obs)
    resid = col_n - est * col_c
    se = float(np.sqrt((resid**2).sum() / (n_sim * (n_sim - 1))) / col_c.mean())
    return {"estimate": est, "se": se, "n_obs": int(round(n_obs)),
            "n_eff": float(n_obs**2 / (col_c**2).sum())}


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
        ``ReleaseOutcome.blocks`` (uses ``prb``, ``k``, ``theta``, ``profile``).
    seed : int
        The release seed; replication i uses ``stream(seed, f"intruder:{i}")``.
    n_sim : int
        Number of replications (>= 2 for a standard error).

    Returns
    -------
    dict with ``classes`` (one entry per own-cell (t, a) and per other-cell (t, t_z, a),
    a = 1..a_max, with ``pick``, ``t``, ``t_z``, ``a``, ``estimate``, ``se``,
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
            "estimator": "rao-blackwellized: 1{B in z} / S_z per (target, picked cell) and "
                         "replica; z = the target's own cell or another cell of its PRB",
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
    ks = blocks["k"].to_numpy(dtype=np.int64)
    thetas = blocks["theta"].to_numpy(dtype=float)
    t_max = int(slot_t.max())
    n_cls = (t_max + 1) * (a_max + 1)
    # other-cell picks: (target frequency t_j, picked cell z) pairs, per sensitive cell z
    n_sc = sens.size
    t_sc = t_cell[sens]
    m_prb = np.zeros((n_blocks, t_max + 1))
    np.add.at(m_prb, (sprb[slot_sc], slot_t), 1.0)       # records of frequency t per PRB
    pairs_zt = m_prb[sprb].copy()                          # targets of frequency t_j outside z
    pairs_zt[np.arange(n_sc), t_sc] -= t_sc
    n_cls_o = (t_max + 1) * (t_max + 1) * (a_max + 1)
    num_o = np.zeros((n_sim, n_cls_o))
    cnt_o = np.zeros((n_sim, n_cls_o))

    num = np.zeros((n_sim, n_cls))
    cnt = np.zeros((n_sim, n_cls))
    total_y = np.zeros(n_sim)
    # per slot, the parameters of its PRB: one post-randomization of all PRBs per replica.
    # Every PRB draws its records' uniform pairs in PRB order from the replica's stream, so
    # one draw of all pairs is the same sequence as one post_randomize call per PRB.
    slot_prb = sprb[slot_sc]
    slot_k = ks[slot_prb]
    slot_theta = thetas[slot_prb]
    slot_base = starts[slot_prb]
    n_slots = slot_sc.size
    # class bins of a cell z by (t_z, S_z): S_z = 0 and S_z > a_max go to dump bins
    w_a = a_max + 2
    own_cls = t_sc * w_a                                  # + min(S_z, a_max + 1)
    div = np.maximum(np.arange(a_max + 1), 1).astype(float)
    pairs_t = np.ascontiguousarray(np.maximum(pairs_zt, 0.0).T)  # (t_max + 1, n_sc)
    pairs_used = [t for t in range(t_max + 1) if pairs_t[t].any()]
    slot_t_o = slot_t * ((t_max + 1) * w_a)
    n_bins = (t_max + 1) * w_a
    kernel = prepare_records(slot_t, slot_k, slot_theta)   # the same records every replica
    for i in range(n_sim):
        u = stream(seed, f"intruder:{i}").random((n_slots, 2))
        dest = post_randomize_prepared(slot_local, kernel, u)
        move = dest != slot_local
        dest += slot_base
        del u
        s_count = np.bincount(dest, minlength=n_sc)
        # own cell: Y = 1{kept} / S_j summed over the targets of cell j is K_j / S_j with
        # K_j the records of j that kept their cell (integers: exact, no order dependence)
        moved_sc = slot_sc[move]
        kept_cnt = (t_sc - np.bincount(moved_sc, minlength=n_sc)).astype(float)
        by_s = np.bincount(s_count, weights=kept_cnt)     # sum of K_j per S_j value
        total_y[i] = float((by_s[1:] / np.arange(1, by_s.size)).sum())
        s_cl = np.minimum(s_count, a_max + 1)
        zc = own_cls + s_cl                               # class bin of every cell z
        num[i] = (np.bincount(zc, weights=kept_cnt, minlength=n_bins)
                  .reshape(t_max + 1, w_a)[:, :a_max + 1] / div).ravel()
        cnt[i] = (np.bincount(zc, weights=t_sc, minlength=n_bins)
                  .reshape(t_max + 1, w_a)[:, :a_max + 1]).ravel()
        # other-cell picks: (records of frequency t_j moved into z) / S_z per class
        # (t_j, t_z, S_z); a record moved into z implies a target of frequency t_j outside z,
        # so every arrival falls in a valid pair class
        dz = dest[move]
        idx_m = slot_t_o[move] + zc[dz]
        num_o[i] = (np.bincount(idx_m, minlength=(t_max + 1) * n_bins)
                    .reshape(-1, w_a)[:, :a_max + 1] / div).ravel()
        # pairs (target of frequency t_j outside z, z) per class of z
        for t in pairs_used:
            cnt_o[i, t * (t_max + 1) * (a_max + 1):(t + 1) * (t_max + 1) * (a_max + 1)] = \
                np.bincount(zc, weights=pairs_t[t], minlength=n_bins) \
                .reshape(t_max + 1, w_a)[:, :a_max + 1].ravel()

    cnt[:, ::a_max + 1] = 0.0    # a = 0 (the S_z = 0 bins): no class
    cnt_o[:, ::a_max + 1] = 0.0

    # exact values per PRB
    exact_num = np.zeros(n_cls)
    exact_den = np.zeros(n_cls)
    r_min = np.full(n_cls, np.inf)
    r_max = np.full(n_cls, -np.inf)
    expected_correct = 0.0
    exact_num_o = np.zeros(n_cls_o)
    exact_den_o = np.zeros(n_cls_o)
    r_min_o = np.full(n_cls_o, np.inf)
    r_max_o = np.full(n_cls_o, -np.inf)
    pairs_total: dict[tuple[int, int], float] = {}
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
            for t_z, m_z in prof.items():
                others = m_z - (1 if t_z == t else 0)
                if others < 1 or int(ks[b]) < 2:
                    continue
                # only a = 1..a_max is used: the truncated convolution keeps its head exactly
                hit, tot = pick_distribution(prof, t, thetas[b], a_max + 1, t_z=t_z)
                pairs = m * t * others
                pairs_total[t, t_z] = pairs_total.get((t, t_z), 0.0) + pairs
                for a in range(1, a_max + 1):
                    c = (t * (t_max + 1) + t_z) * (a_max + 1) + a
                    exact_num_o[c] += pairs * hit[a] / a
                    exact_den_o[c] += pairs * tot[a]
                    if tot[a] > 0:
                        r_min_o[c] = min(r_min_o[c], float(hit[a] / a / tot[a]))
                        r_max_o[c] = max(r_max_o[c], float(hit[a] / a / tot[a]))

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
                "pick": "own", "t": int(t), "t_z": int(t), "a": int(a), "estimate": est, "se": se,
                "n_obs": int(n_obs), "n_eff": n_eff,
                "exact_pooled": float(exact_num[c] / exact_den[c]) if exact_den[c] > 0 else None,
                "exact_min": float(r_min[c]) if np.isfinite(r_min[c]) else None,
                "exact_max": float(r_max[c]) if np.isfinite(r_max[c]) else None,
                "p_s_equals_a": float(exact_den[c] / n_targets),
            })
    for (t, t_z), n_pairs in sorted(pairs_total.items()):
        for a in range(1, a_max + 1):
            c = (t * (t_max + 1) + t_z) * (a_max + 1) + a
            classes.append({
                "pick": "other", "t": int(t), "t_z": int(t_z), "a": int(a),
                **_ratio(num_o[:, c], cnt_o[:, c], n_sim),
                "exact_pooled": (float(exact_num_o[c] / exact_den_o[c]) if exact_den_o[c] > 0
                                 else None),
                "exact_min": float(r_min_o[c]) if np.isfinite(r_min_o[c]) else None,
                "exact_max": float(r_max_o[c]) if np.isfinite(r_max_o[c]) else None,
                "p_s_equals_a": float(exact_den_o[c] / n_pairs),
            })
    est_total = float(total_y.mean())
    se_total = float(total_y.std(ddof=1) / np.sqrt(n_sim))
    ests = [c["estimate"] for c in classes if c["estimate"] is not None]
    return {**base, "classes": classes, "n_targets": n_targets,
            "max_estimate": max(ests) if ests else None,
            "overall": {"expected_correct_exact": expected_correct,
                        "expected_correct_estimate": est_total, "se": se_total}}


# -- started early ------------------------------------------------------------------------------
# The intruder needs the cell table and the PRBs only, known once the release is planned: the
# pipeline starts it then in a background thread (start_intruder), so that it runs while the
# records are released and written; risk.json's builder takes the result (intruder). Keyed by
# a digest of every input, so a result is only ever used for exactly the inputs it was
# computed from (anything else is computed afresh).
class _Pending:
    """The result (or error) of one simulate_intruder run in a daemon thread."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        import threading

        self._out: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(kwargs,),
                                        name="sdc-intruder", daemon=True)
        self._thread.start()

    def _run(self, kwargs: dict[str, Any]) -> None:
        try:
            self._out = simulate_intruder(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            self._error = exc

    def result(self) -> dict[str, Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


_pending: dict[str, _Pending] = {}


def _intruder_key(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                  seed: int, n_sim: int, xi: float | None, a_max: int) -> str:
    import hashlib

    h = hashlib.sha256(repr((int(seed), int(n_sim), xi, int(a_max), len(blocks))).encode())
    for a in (np.asarray(cell_frequency, np.int64), np.asarray(cell_prb, np.int64),
              blocks["k"].to_numpy(np.int64), blocks["theta"].to_numpy(np.float64)):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update("\x00".join(str(p) for p in blocks["profile"]).encode())
    return h.hexdigest()


def start_intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                   *, seed: int, n_sim: int = 200, xi: float | None = None,
                   a_max: int = A_MAX) -> None:
    """Start :func:`simulate_intruder` of these inputs in a background thread (the one
    started before is dropped); :func:`intruder` with the same inputs takes its result."""
    kwargs = {"cell_frequency": np.array(cell_frequency, np.int64),
              "cell_prb": np.array(cell_prb, np.int64),
              "blocks": blocks[["k", "theta", "profile"]].copy(), "seed": seed, "n_sim": n_sim,
              "xi": xi, "a_max": a_max}
    key = _intruder_key(kwargs["cell_frequency"], kwargs["cell_prb"], kwargs["blocks"], seed,
                        n_sim, xi, a_max)
    _pending.clear()
    _pending[key] = _Pending(kwargs)


def intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame, *,
             seed: int, n_sim: int = 200, xi: float | None = None,
             a_max: int = A_MAX) -> dict[str, Any]:
    """:func:`simulate_intruder`: the result :func:`start_intruder` computed for exactly these
    inputs if there is one (waiting for it), else computed now."""
    pending = _pending.pop(_intruder_key(cell_frequency, cell_prb, blocks, seed, n_sim, xi,
                                         a_max), None) if _pending else None
    if pending is not None:
        return pending.result()
    return simulate_intruder(cell_frequency, cell_prb, blocks, seed=seed, n_sim=n_sim, xi=xi,
                             a_max=a_max)
