"""The transition design of a PRB (m_j, W) and its exact certificate (docs/METHOD.md 7.12).

Exact tests: the general certificate with the uniform W equals ``sdc.method.risk.max_risk``;
with a non-uniform W it equals a brute-force enumeration of every record's outcome; the near
W is doubly stochastic with a zero diagonal and meets the spread floor. Statistical tests: the
weighted race draws destination l with probability w_jl (chi-square over fixed identities)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sdc.config.model import NearSpec
from sdc.method.draws import weighted_race
from sdc.method.near import KeyMetric, near_transition
from sdc.method.risk import max_risk
from sdc.method.theta import solve_theta
from sdc.method.transition import Transition, uniform_transition
from sdc.method.transition_risk import (
    certify,
    design_risk,
    group_risk,
    neighbourhood_risk,
    own_pick_at_one,
    poisson_bound,
    transition_max_risk,
)

THETA = solve_theta(0.395)


def _explicit(tr: Transition) -> Transition:
    return Transition(tr.frequency, tr.move, *tr.csr(), theta=tr.theta)


@pytest.mark.parametrize("profile", [{1: 5}, {1: 2, 2: 1}, {1: 7, 2: 3}, {1: 2}, {2: 1},
                                     {1: 1, 2: 4}, {1: 12}])
@pytest.mark.parametrize("theta", [THETA, 0.3, 0.6, 1.0])
def test_uniform_w_reproduces_the_profile_certificate(profile, theta):
    t = np.array([tt for tt, m in sorted(profile.items()) for _ in range(m)])
    got = transition_max_risk(_explicit(uniform_transition(t, theta)))
    want = max_risk(profile, theta)
    assert got.max_risk == pytest.approx(want.max_risk, abs=1e-12)
    assert got.own_max == pytest.approx(want.own_max, abs=1e-12)
    assert got.other_max == pytest.approx(want.other_max, abs=1e-12)
    assert (got.t, got.a, got.z, got.t_z) == (want.t, want.a, want.z, want.t_z)


def _brute(tr: Transition) -> tuple[float, float, float, float]:
    """(max, own max, other max) of R_{j->z}(a) and max_j E[1/S_N(j)] by enumerating every
    record's released cell."""
    P = tr.matrix()
    k = tr.k
    cell = np.repeat(np.arange(k), tr.frequency)
    n = cell.size
    W = tr.dense()
    hit = {}   # (target record, z, a) -> P(target in z, S_z = a); tot (z, a) per target cell
    tot = {}
    nb = np.zeros(n)
    nbh = [set([j]) | set(np.flatnonzero(W[j] > 0).tolist()) for j in range(k)]
    for out in itertools.product(range(k), repeat=n):
        pr = math.prod(P[cell[i], out[i]] for i in range(n))
        if pr == 0:
            continue
        counts = np.bincount(out, minlength=k)
        for b in range(n):
            j = cell[b]
            for z in range(k):
                a = int(counts[z])
                tot[(b, z, a)] = tot.get((b, z, a), 0.0) + pr
                if out[b] == z:
                    hit[(b, z, a)] = hit.get((b, z, a), 0.0) + pr
            s_n = sum(counts[z] for z in nbh[j])
            if out[b] in nbh[j]:
                nb[b] += pr / s_n
    own = other = 0.0
    for (b, z, a), p in tot.items():
        if a == 0 or p <= 1e-300:
            continue
        r = hit.get((b, z, a), 0.0) / p / a
        if z == cell[b]:
            own = max(own, r)
        else:
            other = max(other, r)
    return max(own, other), own, other, float(nb.max())


def _permutation_mix(k: int, rng) -> np.ndarray:
    """A doubly stochastic W with zero diagonal: a random mix of derangements."""
    W = np.zeros((k, k))
    shifts = rng.choice(np.arange(1, k), size=min(3, k - 1), replace=False)
    lam = rng.dirichlet(np.ones(shifts.size))
    perm = rng.permutation(k)
    for s, a in zip(shifts, lam, strict=True):
        W[perm, perm[(np.arange(k) + s) % k]] += a
    return W


def _small_near(rng) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, indptr, indices, weights) of a random PRB of 3-4 cells and <= 7 records small enough
    for brute force, W a mix of derangements."""
    k = int(rng.integers(3, 5))
    t = rng.integers(1, 3, size=k)
    while t.sum() > 7:
        t = rng.integers(1, 3, size=k)
    W = _permutation_mix(k, rng)
    rows, cols = np.nonzero(W)
    return t, np.r_[0, np.cumsum(np.bincount(rows, minlength=k))], cols, W[rows, cols]


@pytest.mark.parametrize("case", range(6))
def test_general_certificate_equals_brute_force(case):
    rng = np.random.default_rng(100 + case)
    t, indptr, cols, w = _small_near(rng)
    theta = float(rng.uniform(0.3, 1.0))
    tr = Transition(t, theta / t, indptr, cols, w, theta=theta, kind="near")
    want, own, other, nb = _brute(tr)
    got = transition_max_risk(tr)
    assert got.max_risk == pytest.approx(want, abs=1e-12)
    assert got.own_max == pytest.approx(own, abs=1e-12)
    assert got.other_max == pytest.approx(other, abs=1e-12)
    n = neighbourhood_risk(tr)
    assert n.max_risk == pytest.approx(nb, abs=1e-12)
    assert n.max_risk <= n.bound + 1e-12


def _own_at_one_brute(tr: Transition) -> float:
    """max_j R_{j->j}(1) by enumerating every record's released cell."""
    P = tr.matrix()
    cell = np.repeat(np.arange(tr.k), tr.frequency)
    hit: dict[int, float] = {}
    tot: dict[int, float] = {}
    for out in itertools.product(range(tr.k), repeat=cell.size):
        pr = math.prod(P[cell[i], out[i]] for i in range(cell.size))
        counts = np.bincount(out, minlength=tr.k)
        for b in range(cell.size):
            if counts[cell[b]] == 1:
                tot[b] = tot.get(b, 0.0) + pr
                hit[b] = hit.get(b, 0.0) + (pr if out[b] == cell[b] else 0.0)
    return max((hit[b] / tot[b] for b in tot if tot[b] > 1e-300), default=0.0)


@pytest.mark.parametrize("case", range(6))
def test_own_pick_at_one_is_exact_and_a_lower_bound(case):
    """The bound the near calibration uses to skip thetas (sdc.method.destinations): exactly
    R_{j->j}(1) maximised over j (brute force), never above the certificate's own-cell max."""
    rng = np.random.default_rng(300 + case)
    t, indptr, cols, w = _small_near(rng)
    for theta in (0.05, 0.3, float(rng.uniform(0.3, 0.95))):
        tr = Transition(t, theta / t, indptr, cols, w, theta=theta, kind="near")
        got = own_pick_at_one(tr)
        assert got == pytest.approx(_own_at_one_brute(tr), abs=1e-12)
        assert got <= transition_max_risk(tr).own_max + 1e-12


@pytest.mark.parametrize("case", range(4))
def test_own_pick_at_one_of_the_uniform_w_with_unequal_moves(case):
    """The O(k) uniform branch (the weighted design's groups: m_j = c / W_j): exact against
    brute force and against the materialised W, below group_risk's own-cell max; a design of
    two weight groups gives the larger of its groups'."""
    rng = np.random.default_rng(400 + case)
    k = int(rng.integers(2, 5))
    t = rng.integers(1, 3, size=k)
    while t.sum() > 7:
        t = rng.integers(1, 3, size=k)
    m = rng.uniform(0.05, 0.9, size=k)
    tr = Transition(t, m, kind="uniform")
    got = own_pick_at_one(tr)
    assert got == pytest.approx(_own_at_one_brute(tr), abs=1e-12)
    assert got == pytest.approx(own_pick_at_one(_explicit(tr)), abs=1e-12)
    assert got <= group_risk(t, m).own_max + 1e-12
    both = Transition(np.r_[t, t[::-1]], np.r_[m, m[::-1] * 0.5], kind="uniform",
                      group=np.r_[np.zeros(k, np.int64), np.ones(k, np.int64)])
    assert own_pick_at_one(both) == pytest.approx(max(
        own_pick_at_one(Transition(t, m, kind="uniform")),
        own_pick_at_one(Transition(t[::-1].copy(), m[::-1] * 0.5, kind="uniform"))), abs=1e-15)
    assert own_pick_at_one(both) <= certify(both).max_risk + 1e-12


@pytest.mark.parametrize("k_age,k_nom", [(12, 1), (9, 4)])
def test_own_pick_at_one_below_the_certificate_of_near_designs(k_age, k_nom):
    """On near W of real shape (the band kernel over a grid of cells), at every theta of a
    scan: the bound never exceeds the exact certificate; at theta = 1 (a move is certain) there
    is no bound."""
    cells = _grid_cells(k_age, k_nom)
    k = cells.shape[0]
    t = np.where(np.arange(k) % 3 == 0, 2, 1)
    ids = np.arange(1, k + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    base, _ = near_transition(cells, ids, t, 1.0, [KeyMetric("age", "ordered"),
                                                   KeyMetric("x", "nominal")], NearSpec())
    assert base.kind == "near"
    for theta in np.linspace(0.02, 0.98, 25):
        tr = base.with_theta(float(theta))
        assert own_pick_at_one(tr) <= design_risk(tr).max_risk + 1e-12
    assert own_pick_at_one(base.with_theta(1.0)) == 0.0


def test_poisson_bound_dominates_bernoulli_sums():
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = rng.uniform(0, 1, size=int(rng.integers(1, 12)))
        pmf = np.array([1.0])
        for q in p:
            pmf = np.convolve(pmf, [1 - q, q])
        exact = float((pmf / (1 + np.arange(pmf.size))).sum())
        assert exact <= float(poisson_bound(p.sum())) + 1e-12


def _grid_cells(n_age: int, n_nom: int) -> np.ndarray:
    return np.array([(a, b) for a in range(n_age) for b in range(n_nom)], dtype=np.int64)


@pytest.mark.parametrize("k_age,k_nom", [(10, 3), (40, 5), (3, 2)])
def test_near_w_is_doubly_stochastic_with_the_spread_floor(k_age, k_nom):
    codes = _grid_cells(k_age, k_nom)
    k = codes.shape[0]
    ids = np.arange(1, k + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    t = np.where(np.arange(k) % 3 == 0, 2, 1)
    opts = NearSpec()
    mets = [KeyMetric("age", "ordered"), KeyMetric("x", "nominal")]
    tr, info = near_transition(codes, ids, t, THETA, mets, opts)
    W = tr.dense()
    assert np.allclose(W.sum(axis=1), 1, atol=1e-12)
    assert np.allclose(W.sum(axis=0), 1, atol=1e-12)
    assert np.all(np.diag(W) == 0)
    assert np.allclose(tr.expected_released(), t, atol=1e-9)
    if tr.kind == "near":
        assert W.max() <= opts.max_weight + 1e-15
        assert ((W > 0).sum(axis=1) >= opts.min_destinations).all()
        # near: the average move changes fewer keys than the uniform one
        diff = (codes[:, None, :] != codes[None, :, :]).sum(-1)
        assert (W * diff).sum() / k < diff.sum() / (k * (k - 1))
    else:
        assert k - 1 < 2 * math.ceil(opts.neighbours / 2)
        assert info["w"] == "uniform"


def test_weighted_race_draws_the_row_law():
    # one row with weights (0.5, 0.3, 0.2) over cells 4, 7, 9; 60,000 identities: chi-square
    # with 2 degrees of freedom below its 0.999 quantile (13.8)
    indptr = np.array([0, 3])
    cand = np.array([4, 7, 9])
    w = np.array([0.5, 0.3, 0.2])
    cid = np.arange(10, dtype=np.uint64) * np.uint64(977) + np.uint64(5)
    n = 60000
    ident = np.arange(n, dtype=np.uint64) * np.uint64(0x2545F4914F6CDD1D)
    got = weighted_race(7, "dest:near", ident, indptr, np.zeros(n, np.int64), cand, w, cid)
    counts = np.array([(got == c).sum() for c in cand])
    chi2 = float((((counts - n * w) ** 2) / (n * w)).sum())
    assert counts.sum() == n and chi2 < 13.8
    # a record's pick depends on its own row only: another row changing leaves it alone
    indptr2 = np.array([0, 3, 5])
    cand2 = np.r_[cand, [1, 2]]
    w2 = np.r_[w, [0.5, 0.5]]
    again = weighted_race(7, "dest:near", ident, indptr2, np.zeros(n, np.int64), cand2, w2, cid)
    assert np.array_equal(got, again)


def _stitched(tr: Transition) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR of a grouped W by its definition: every group's :meth:`restrict` W (its own
    CSR) put back at the group's cells, rows in order, columns ascending."""
    r, c, v = [], [], []
    for members in tr.groups():
        ip, ix, w = tr.restrict(members).csr()
        r.append(members[np.repeat(np.arange(members.size), np.diff(ip))])
        c.append(members[ix])
        v.append(w)
    r, c, v = np.concatenate(r), np.concatenate(c), np.concatenate(v)
    order = np.lexsort((c, r))
    return (np.r_[0, np.cumsum(np.bincount(r, minlength=tr.k))], c[order], v[order])


@pytest.mark.parametrize("seed", range(6))
def test_grouped_csr_is_the_groups_restricted_ws(seed):
    """A block-diagonal W over weight groups (uniform groups, near groups with their own
    rows, one-cell groups), made for all groups at once, equals the groups' own Ws stitched;
    a group mixing near and uniform rows and a row leading out of its group are refused."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, 12)
    k = int(sizes.sum())
    group = rng.permutation(np.repeat(np.arange(sizes.size), sizes))
    near = rng.random(sizes.size) < 0.5
    rows = []
    for j in range(k):
        others = np.flatnonzero((group == group[j]) & (np.arange(k) != j))
        n = int(rng.integers(1, 4)) if near[group[j]] and others.size else 0
        rows.append(rng.choice(others, n) if n else np.zeros(0, np.int64))
    ip = np.r_[0, np.cumsum([x.size for x in rows])].astype(np.int64)
    ix = np.concatenate(rows).astype(np.int64)
    t, m = rng.integers(1, 4, k), rng.uniform(0, 1, k)
    for tr in (Transition(t, m, ip, ix, rng.random(ix.size), kind="near", group=group),
               Transition(t, m, kind="uniform", group=group)):
        for got, want in zip(tr.csr(), _stitched(tr), strict=True):
            assert got.dtype == want.dtype and np.array_equal(got, want)
    mixed = np.flatnonzero(near[group] & (sizes[group] >= 2))
    if mixed.size:   # a near row emptied: its group mixes near and uniform rows
        j = int(mixed[0])
        ip2 = ip.copy()
        ip2[j + 1:] -= ip[j + 1] - ip[j]
        ix2 = np.delete(ix, np.arange(ip[j], ip[j + 1]))
        with pytest.raises(ValueError, match="mixes near and uniform"):
            Transition(t, m, ip2, ix2, np.ones(ix2.size), kind="near", group=group).csr()
        out = ix.copy()
        out[ip[j]] = int(np.flatnonzero(group != group[j])[0])
        with pytest.raises(ValueError, match="leads out"):
            Transition(t, m, ip, out, np.ones(ix.size), kind="near", group=group).csr()
