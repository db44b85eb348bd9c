"""An independent re-derivation of a release's certificate from its ``internal/audit.json``
alone, written from the formulas of docs/METHOD.md (6, 7.1, 7.11, 7.12): it imports numpy and
the standard library only, never ``sdc`` (tests/audit/test_rederive_alone.py checks that).

- NZY's uniform design (``prb_structure``): R_{j->z}(a, t) of 7.1 from a PRB's profile, one
  target and one picked cell per distinct frequency (cells with equal t are exchangeable);
- any other design (``designs``): per group m_j (``weighted``: min(c / W_j, 1); ``nzy``: theta
  / t_j; ``prb``: theta_b / t_j) and W (uniform over the group's other cells, or the band kernel
  along the recorded tour: W = sum_{i<=s} a_i (P^i + P^-i) / 2, a_i proportional to
  exp(-(i - 1) / h) flattened towards 1/s until a_1 / 2 <= max_weight), then R_{j->z}(a) of 7.12
  by convolution of the Bernoullis of every record that can land in z, and for a near group the
  neighbourhood intruder E[1 / (1 + S'_N)];
- the certificate: the largest PRB (or group) risk and 1 / (the smallest non-sensitive t).
"""

from __future__ import annotations

import math

import numpy as np


# -- NZY's uniform design, from a profile (docs/METHOD.md 7.1) ---------------------------------
def _binom(n: int, p: float) -> np.ndarray:
    return np.array([math.comb(n, a) * p ** a * (1 - p) ** (n - a) for a in range(n + 1)])


def _best(q: float, dist: np.ndarray) -> float:
    """max over a >= 1 of (1/a) q P(S'=a-1) / (q P(S'=a-1) + (1-q) P(S'=a))."""
    d = np.append(dist, 0.0)
    a = np.arange(1, d.size)
    num = q * d[:-1]
    den = num + (1 - q) * d[1:]
    ok = den > 0
    return float((num[ok] / den[ok] / a[ok]).max()) if ok.any() else 0.0


def profile_risk(t: list[int], theta: float) -> float:
    """Max over j, z, a of R_{j->z}(a, t) under m_j = theta / t_j and the uniform W over the k
    cells with frequencies ``t`` (one j and one z per distinct frequency)."""
    cells = sorted(int(x) for x in t)
    k = len(cells)
    if k < 2:
        return 1.0 / cells[0] if cells else 0.0
    first = {tt: cells.index(tt) for tt in set(cells)}
    best = 0.0
    for t_j, j in first.items():
        zs = {j} | {first[tt] if tt != t_j else j + 1 for tt in first
                    if tt != t_j or cells.count(tt) > 1}
        for z in zs:
            dist = np.array([1.0])
            for ell, t_l in enumerate(cells):
                if ell == j:
                    n, p = t_l - 1, (1 - theta / t_l) if z == j else theta / ((k - 1) * t_l)
                elif ell == z:
                    n, p = t_l, 1 - theta / t_l
                else:
                    n, p = t_l, theta / ((k - 1) * t_l)
                dist = np.convolve(dist, _binom(n, p))
            q = (1 - theta / t_j) if z == j else theta / ((k - 1) * t_j)
            best = max(best, _best(q, dist))
    return best


# -- any design: m and W of a group (docs/METHOD.md 7.11, 7.12) --------------------------------
def offset_weights(s: int, bandwidth: float, cap: float) -> np.ndarray:
    a = np.exp(-np.arange(s) / bandwidth)
    a /= a.sum()
    if a[0] / 2 > cap:
        lam = (a[0] / 2 - cap) / (a[0] / 2 - 0.5 / s)
        a = (1 - lam) * a + lam / s
    return a


def band_w(tour: list[int], s: int, bandwidth: float, cap: float, k: int) -> np.ndarray:
    """The band kernel along ``tour`` (group-local cells 0..k-1 in tour order)."""
    a = offset_weights(s, bandwidth, cap)
    order = np.asarray(tour)
    w = np.zeros((k, k))
    for i in range(1, s + 1):
        for sign in (1, -1):
            np.add.at(w, (order, np.roll(order, -sign * i)), a[i - 1] / 2)
    return w


def _pmf(probs: list[tuple[float, int]]) -> np.ndarray:
    """PMF of a sum of Bernoullis: ``probs`` holds (p, how many records)."""
    dist = np.array([1.0])
    for p, n in probs:
        if n > 0 and p > 0:
            dist = np.convolve(dist, _binom(n, p))
    return dist


def design_risk(t: np.ndarray, m: np.ndarray, w: np.ndarray, near: bool) -> float:
    """Max over j, z with w_jz > 0 (and z = j), a >= 1 of R_{j->z}(a); with ``near`` also the
    neighbourhood intruder, max over j of E[1 / (1 + S'_N)]."""
    k = t.size
    best = 0.0
    for z in range(k):
        reach = [ell for ell in range(k) if ell == z or w[ell, z] > 0]
        p = {ell: (1 - m[z]) if ell == z else m[ell] * w[ell, z] for ell in reach}
        for j in reach:
            q = p[j]
            if q <= 0:
                continue
            dist = _pmf([(p[ell], int(t[ell]) - (ell == j)) for ell in reach])
            best = max(best, _best(q, dist))
    if near:
        for j in range(k):
            hood = np.flatnonzero(w[j] > 0).tolist() + [j]
            inside = np.zeros(k, bool)
            inside[hood] = True
            pi = (1 - m) * inside + m * (w[:, inside].sum(axis=1) - np.where(inside, np.diag(
                w), 0.0))
            dist = _pmf([(float(pi[ell]), int(t[ell]) - (ell == j)) for ell in range(k)])
            best = max(best, float((dist / (1 + np.arange(dist.size))).sum()))
    return best


def group_risk(g: dict, t_prb: list[int], theta_b: float, near_opts: dict | None) -> float:
    """The exact risk of one recorded group (audit.json ``designs``)."""
    cells = np.asarray(g["cells"])
    t = np.asarray(t_prb, dtype=np.int64)[cells]
    if g["design"] == "weighted":
        m = np.minimum(g["c"] / np.asarray(g["weight_total"], dtype=np.float64), 1.0)
    else:
        th = theta_b if g["design"] == "prb" else g["theta"]
        m = th / t
    k = t.size
    if g["w"] == "matching":   # near: {kernel: matching}: every row's 2s destinations
        local = {c: i for i, c in enumerate(g["cells"])}
        w = np.zeros((k, k))
        rows_w = g.get("weights") or [[1.0 / len(d)] * len(d) for d in g["destinations"]]
        for j, dests, ws in zip(g["cells"], g["destinations"], rows_w, strict=True):
            for d, x in zip(dests, ws, strict=True):   # near.weights: recorded per row
                w[local[j], local[d]] += x
        return design_risk(t, m, w, True)
    if g["w"] == "near":
        local = {c: i for i, c in enumerate(g["cells"])}
        w = band_w([local[c] for c in g["tour"]], g["s"], near_opts["bandwidth"],
                   near_opts["max_weight"], k)
        return design_risk(t, m, w, True)
    if g["design"] != "weighted" and k > 12:     # NZY inside the group: exchangeable cells
        return profile_risk(t.tolist(), th)
    w = (np.ones((k, k)) - np.eye(k)) / (k - 1)
    return design_risk(t, m, w, False)


def certificate(audit: dict) -> tuple[float, list[tuple[int, float, float]]]:
    """(the certificate, [(prb, recomputed, recorded)]) from ``audit`` alone."""
    st = audit["prb_structure"]
    rows = []
    designs = audit.get("designs")
    if designs is None:
        for prb in st["prbs"]:
            t = [int(tt) for tt, c in prb["profile"].items() for _ in range(c)]
            rows.append((prb["prb"], profile_risk(t, prb["theta"]), prb["max_risk"]))
    else:
        for prb in designs["prbs"]:
            r = max(group_risk(g, prb["t"], prb["theta"], designs["near"])
                    for g in prb["groups"])
            rows.append((prb["prb"], r, prb["max_risk"]))
    ns = st["non_sensitive"]
    cert = max([r for _, r, _ in rows] + ([1.0 / ns["min_t"]] if ns["min_t"] else []),
              default=0.0)
    return cert, rows
