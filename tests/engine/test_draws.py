"""Record-keyed draws (issue 10): the keyed function, identities, and the NZY law by Monte Carlo.

Monte Carlo design: one PRB (six cells, four singletons and two doubletons, as in
tests of the position-based PRAM) replicated C times inside every seed: the C copies are
independent because their records have distinct identities (the draws are a keyed
pseudo-random function of the identity), and the seeds 0..N_SEEDS-1 are independent keys.
Identities are consecutive integers on purpose (the hardest case for a weak hash).
Tolerances are 4 standard errors of the exact variance of each statistic (two-sided 4-sigma
false-alarm probability ~6e-5 per comparison); each test says how its variance is derived.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc import correct_match_risk, solve_theta
from sdc.engine.apply import released_cells
from sdc.engine.draws import (
    _STR_KEY,
    _TAG_STR,
    DrawPlan,
    fmix64,
    keyed_uniform,
    rendezvous,
    siphash24,
    unique_identities,
    value_hash,
)

pytestmark = pytest.mark.statistical

THETA = solve_theta(0.395)
T_CELLS = np.array([1, 1, 2, 1, 2, 1])
K = T_CELLS.size
OWNERS = np.repeat(np.arange(K), T_CELLS)          # cell of each of the 8 records
N_REC = OWNERS.size
N_SEEDS = 2_000
COPIES = 30                                        # independent replications per seed
PLAN = DrawPlan(cell_prb=np.zeros(K, dtype=np.int64), cell_frequency=T_CELLS.astype(np.int64),
                cell_id=fmix64(np.arange(100, 100 + K, dtype=np.uint64)),
                prb_theta=np.array([THETA]))

M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & M64


def siphash_reference(key: bytes, msg: bytes) -> int:
    """Plain-Python SipHash-2-4 (Aumasson & Bernstein 2012, reference algorithm)."""
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd() -> None:
        v[0] = (v[0] + v[1]) & M64
        v[1] = _rotl(v[1], 13) ^ v[0]
        v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64
        v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64
        v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64
        v[1] = _rotl(v[1], 17) ^ v[2]
        v[2] = _rotl(v[2], 32)

    n = len(msg)
    end = n - n % 8
    for i in range(0, end, 8):
        m = int.from_bytes(msg[i:i + 8], "little")
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(msg[end:].ljust(8, b"\0"), "little")
    v[3] ^= b
    rnd()
    rnd()
    v[0] ^= b
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _fmix_int(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


# -- the keyed function is standard SipHash-2-4 ---------------------------------------------------
def test_siphash_matches_the_papers_test_vectors():
    key = bytes(range(16))
    assert siphash_reference(key, bytes(range(15))) == 0xA129CA6149BE45E5  # paper, appendix A
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    a = np.array([int.from_bytes(bytes(range(8)), "little")], dtype=np.uint64)
    b = np.array([int.from_bytes(bytes(range(8, 16)), "little")], dtype=np.uint64)
    assert int(siphash24(k0, k1, a, b)[0]) == 0x3F2ACC7F57C29BDB == siphash_reference(
        key, bytes(range(16)))
    rng = np.random.default_rng(5)
    aa = rng.integers(0, 2**63, 50, dtype=np.uint64) * np.uint64(2)
    bb = rng.integers(0, 2**63, 50, dtype=np.uint64)
    got = siphash24(k0, k1, aa, bb)
    want = [siphash_reference(key, int(x).to_bytes(8, "little") + int(y).to_bytes(8, "little"))
            for x, y in zip(aa, bb, strict=True)]
    assert [int(g) for g in got] == want


def test_string_hash_is_siphash_of_utf8_bytes_whatever_pandas_does():
    words = np.array(["", "a", "Zürich", "lfs-2026-01", "x" * 40], dtype=object)
    got = value_hash(pd.Series(words))
    want = [_fmix_int(siphash_reference(_STR_KEY.encode(), w.encode("utf-8"))) ^ int(_TAG_STR)
            for w in words]
    assert [int(g) for g in got] == want


def test_value_hash_is_dtype_independent_for_equal_values():
    ints = value_hash(pd.Series([1, 2, 3], dtype="int64"))
    assert np.array_equal(ints, value_hash(pd.Series([1.0, 2.0, 3.0])))
    assert np.array_equal(ints, value_hash(pd.Series([1, 2, 3], dtype="Int32")))
    na = value_hash(pd.Series([1.0, np.nan]))
    assert na[0] == ints[0] and na[1] == value_hash(pd.Series([None], dtype=object))[0]
    s = pd.Series(["a", "b", None, "a"])
    assert np.array_equal(value_hash(s), value_hash(s.astype("category")))
    assert value_hash(pd.Series([0.5]))[0] != value_hash(pd.Series([0.25]))[0]


def test_unique_identities_separates_duplicates_independently_of_order():
    ident = np.array([5, 5, 7, 5, 9], dtype=np.uint64)
    tb = np.array([3, 1, 0, 2, 0], dtype=np.uint64)
    out = unique_identities(ident, tb)
    assert len(set(out.tolist())) == 5
    assert out[1] == 5 and out[2] == 7 and out[4] == 9   # first of each group keeps it
    perm = np.array([4, 2, 0, 3, 1])
    assert np.array_equal(unique_identities(ident[perm], tb[perm]), out[perm])


# -- Monte Carlo: the law of eq. 5.3 over N_SEEDS seeds -------------------------------------------
@pytest.fixture(scope="module")
def simulated() -> np.ndarray:
    """(N_SEEDS * COPIES, N_REC) released cells: one row per independent PRB replication."""
    cells = np.tile(OWNERS, COPIES)
    ident = np.arange(cells.size, dtype=np.uint64)   # consecutive on purpose
    out = np.stack([released_cells(PLAN, cells, ident, seed) for seed in range(N_SEEDS)])
    return out.reshape(N_SEEDS * COPIES, N_REC)



def test_cell_counts_are_unbiased(simulated):
    reps = simulated.shape[0]
    counts = np.stack([(simulated == j).sum(axis=1) for j in range(K)], axis=1)
    # S_i = sum over records r of independent Bernoulli(p[i, owner(r)]) (eq. 5.3):
    # Var(S_i) = sum_r p(1 - p), and the mean over reps replications has SE sqrt(Var / reps)
    p = np.where(np.arange(K)[:, None] == OWNERS[None, :], 1 - THETA / T_CELLS[OWNERS],
                 THETA / ((K - 1) * T_CELLS[OWNERS]))
    se = np.sqrt((p * (1 - p)).sum(axis=1) / reps)
    assert np.all(np.abs(counts.mean(axis=0) - T_CELLS) <= 4 * se), (counts.mean(axis=0), se)


def test_move_probability_is_theta_over_t(simulated):
    reps = simulated.shape[0]
    moved = simulated != OWNERS[None, :]
    p = THETA / T_CELLS[OWNERS]
    se = np.sqrt(p * (1 - p) / reps)      # binomial proportion over independent replications
    assert np.all(np.abs(moved.mean(axis=0) - p) <= 4 * se), (moved.mean(axis=0), p)


def test_destinations_are_uniform_over_the_other_cells(simulated):
    for j in range(K):
        sub = simulated[:, OWNERS == j]
        dest = sub[sub != j]
        freq = np.bincount(dest, minlength=K) / dest.size
        assert freq[j] == 0
        q = 1 / (K - 1)
        se = np.sqrt(q * (1 - q) / dest.size)   # multinomial cell share
        assert np.all(np.abs(np.delete(freq, j) - q) <= 4 * se), (j, freq)


def test_moves_of_two_records_are_independent(simulated):
    # two singletons of the PRB: P(both move) = theta^2 if independent; SE of a proportion
    a, b = simulated[:, 0] != 0, simulated[:, 1] != 1
    p = THETA * THETA
    se = np.sqrt(p * (1 - p) / a.size)
    assert abs((a & b).mean() - p) <= 4 * se


@pytest.mark.parametrize("target", [0, 2])          # a singleton record and a doubleton record
def test_intruder_rate_equals_exact_risk(simulated, target):
    """Given S_j = a the score X = kept/a has mean R_j(a, t) and E[X^2] = R/a, so
    Var(X) = R/a - R^2 and the mean over the N_a replications with S_j = a has SE sqrt(Var/N_a)."""
    cell = OWNERS[target]
    s = (simulated == cell).sum(axis=1)
    kept = simulated[:, target] == cell
    exact = correct_match_risk({1: 4, 2: 2}, int(T_CELLS[cell]), THETA, a_max=4)
    checked = 0
    for a in range(1, 5):
        sel = s == a
        if sel.sum() < 2_000:
            continue
        r = exact[a - 1]
        se = np.sqrt(max(r / a - r * r, 1e-12) / sel.sum())
        assert abs((kept[sel] / a).mean() - r) <= 4 * se, (a, (kept[sel] / a).mean(), r)
        checked += 1
    assert checked >= 2


# -- stability ------------------------------------------------------------------------------------
def test_monotone_coupling_keeps_decisions_when_t_grows():
    ident = np.arange(50_000, dtype=np.uint64)
    u = keyed_uniform(3, "move", ident)
    moved_t1, moved_t2 = u < THETA, u < THETA / 2
    assert np.all(moved_t1[moved_t2])                # t 1 -> 2: movers are a subset


def test_rendezvous_is_stable_when_a_candidate_joins_or_leaves():
    m, k = 60_000, 9
    ident = np.arange(m, dtype=np.uint64) * np.uint64(7919)
    cand = fmix64(np.arange(k, dtype=np.uint64))
    own = np.full(m, -1)
    before = rendezvous(11, "dest", ident, own, cand)
    # a new candidate joins: a record changes only to it, with probability 1/(k + 1)
    after = rendezvous(11, "dest", ident, own, np.r_[cand, fmix64(np.array([99], np.uint64))])
    changed = after != before
    assert np.all(after[changed] == k)
    p = 1 / (k + 1)
    assert abs(changed.mean() - p) <= 4 * np.sqrt(p * (1 - p) / m)   # binomial proportion
    # candidate 3 leaves: only the records that chose it move, to the others uniformly
    keep = np.delete(np.arange(k), 3)
    again = keep[rendezvous(11, "dest", ident, own, cand[keep])]
    assert np.array_equal(again[before != 3], before[before != 3])
    redirected = np.bincount(again[before == 3], minlength=k)[keep] / (before == 3).sum()
    q = 1 / (k - 1)
    assert np.all(np.abs(redirected - q) <= 4 * np.sqrt(q * (1 - q) / (before == 3).sum()))
