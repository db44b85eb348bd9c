"""Record-keyed draws: the keyed function, identities, and the NZY law by Monte Carlo.

Monte Carlo design: one PRB (six cells, four singletons and two doubletons, as in
tests of the position-based PRAM) replicated C times inside every seed: the C copies are
independent because their records have distinct identities (the draws are a keyed
pseudo-random function of the identity), and the seeds 0..N_SEEDS-1 are independent keys.
Identities are consecutive integers on purpose (the hardest case for a weak hash).
Tolerances are 4 standard errors of the exact variance of each statistic (two-sided 4-sigma
false-alarm probability ~6e-5 per comparison); each test says how its variance is derived.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest

from sdc import correct_match_risk, solve_theta
from sdc.method.draws import (
    DrawPlan,
    fmix64,
    keyed_hash,
    keyed_uniform,
    rendezvous,
    siphash24,
    trie_order,
    trie_rendezvous,
    unique_identities,
    value_hash,
)
from sdc.method.draws.hashing import _STR_KEY, _TAG_STR  # the value hash's constants
from sdc.method.postrandomize import released_cells

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


def test_blocked_fmix_and_value_hash_equal_the_formula_on_large_arrays():
    """fmix_inplace runs on cache-sized blocks above 2**15 values: same numbers as the
    whole-array formula (``_fmix_int``) at every position, block edges included; the float
    path of value_hash agrees with the integer path and keeps non-integral values apart."""
    from sdc.method.draws.hashing import _FMIX_BLOCK, fmix_inplace

    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**63, 3 * _FMIX_BLOCK + 7).astype(np.uint64) * np.uint64(2) + \
        np.uint64(1)
    got = x.copy()
    fmix_inplace(got)
    idx = [0, 1, _FMIX_BLOCK - 1, _FMIX_BLOCK, 2 * _FMIX_BLOCK + 3, x.size - 1]
    assert [int(got[i]) for i in idx] == [_fmix_int(int(x[i])) for i in idx]
    want = x ^ (x >> np.uint64(30))  # the whole-array formula, every position
    want *= np.uint64(0xBF58476D1CE4E5B9)
    want ^= want >> np.uint64(27)
    want *= np.uint64(0x94D049BB133111EB)
    want ^= want >> np.uint64(31)
    assert np.array_equal(got, want)
    ints = rng.integers(-10**12, 10**12, 2 * _FMIX_BLOCK + 5)
    assert np.array_equal(value_hash(pd.Series(ints)), value_hash(pd.Series(ints * 1.0)))
    frac = ints * 1.0
    frac[7] += 0.5
    frac[9] = np.inf
    h = value_hash(pd.Series(frac))
    assert h[7] != value_hash(pd.Series([ints[7]]))[0] and h[9] != h[7]
    assert np.array_equal(np.delete(h, [7, 9]), np.delete(value_hash(pd.Series(ints)), [7, 9]))


def test_a_float_column_without_integral_values_hashes_as_in_a_mixed_one():
    """A column of no integral value (a weight) skips the integer path's hash (issue 48): each
    value hashes as it does beside integral ones and missing values, fmix64 of its bits."""
    from sdc.method.draws.hashing import _TAG_FLOAT

    rng = np.random.default_rng(8)
    frac = np.floor(rng.uniform(-1e6, 1e6, 70_000)) + 0.5
    alone = value_hash(pd.Series(frac))
    mixed = value_hash(pd.Series(np.r_[frac, 3.0, np.nan]))
    assert np.array_equal(alone, mixed[:-2])
    assert int(alone[5]) == _fmix_int(int(frac[5:6].view(np.uint64)[0] ^ _TAG_FLOAT))
    assert np.array_equal(value_hash(pd.Series([np.nan, np.inf])),
                          value_hash(pd.Series([np.nan, np.inf, 1.0]))[:2])


def test_an_empty_float_column_hashes_to_no_value():
    """An empty float column (a batch or table with no row) hashes to an empty array: with
    no value, ``all()`` holds and ``any()`` does not, which left the hash unset (an
    UnboundLocalError in every release whose dependence check met an empty float column)."""
    for values in (pd.Series([], dtype=np.float64), np.array([], dtype=np.float64)):
        h = value_hash(values)
        assert h.dtype == np.uint64 and h.size == 0
    assert np.array_equal(value_hash(pd.Series([2.5, 3.0])),
                          value_hash(pd.Series([np.nan, 2.5, 3.0]))[1:])


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


# -- the NZY destination: hierarchical (trie) rendezvous -------------------------------------------
@functools.lru_cache(maxsize=8)
def _trie_leaves(seed: int, purpose: str, cand_ids: tuple[int, ...]) -> list[tuple[int, int]]:
    """The candidates' (cell hash, id) in hash order: the trie's leaves (one record's
    reference below works from them; the same for every record of a test, so made once)."""
    hashes = keyed_hash(seed, purpose + ":cell", np.array(cand_ids, dtype=np.uint64))
    return sorted((int(h), c) for h, c in zip(hashes, cand_ids, strict=True))


def _trie_reference(seed: int, purpose: str, ident: int, own_id: int | None,
                    cand_ids: list[int]) -> int:
    """Plain-Python hierarchical rendezvous for ONE record (the docstring's algorithm, written
    independently of the vectorized code): returns the chosen candidate id."""
    cands = [(h, c) for h, c in _trie_leaves(seed, purpose, tuple(cand_ids)) if c != own_id]
    depth, prefix = 0, 0
    while len(cands) > 1:
        node = int(keyed_hash(seed, f"{purpose}:trie:{depth}", np.array([ident], np.uint64),
                              np.array([prefix], np.uint64))[0])
        best = None
        children: dict[int, list[tuple[int, int]]] = {}   # the node's children by digit
        for x in cands:
            children.setdefault((x[0] >> (60 - 4 * depth)) & 15, []).append(x)
        for c in range(16):
            sub = children.get(c)
            if not sub:
                continue
            v = _fmix_int((node + (c + 1) * 0x9E3779B97F4A7C15) & M64)   # SplitMix64 output c+1
            u = ((v >> 11) + 0.5) * 2.0 ** -53
            e = -math.log(u) / len(sub)                                   # exponential race
            if best is None or e < best[0]:
                best = (e, c, sub)
        cands, prefix, depth = best[2], prefix * 16 + best[1], depth + 1
    return cands[0][1]


def _trie_pick(seed: int, ident: np.ndarray, own: np.ndarray, cand: np.ndarray,
               group: np.ndarray | None = None, n_groups: int = 1) -> np.ndarray:
    """Vectorized choice as candidate indices (own: candidate index or -1)."""
    group_c = np.zeros(cand.size, dtype=np.int64) if group is None else group
    order, sh, bounds = trie_order(seed, "dest", cand, group_c, n_groups)
    pos = np.empty(cand.size, dtype=np.int64)
    pos[order] = np.arange(cand.size)
    own_pos = np.where(own >= 0, pos[np.maximum(own, 0)], -1)
    rec_group = group_c[np.maximum(own, 0)] if group is not None else np.zeros(ident.size, np.int64)
    pick = trie_rendezvous(seed, "dest", ident, own_pos, rec_group, sh, bounds)
    return np.where(pick >= 0, order[np.maximum(pick, 0)], -1)


@pytest.mark.parametrize("k", [2, 3, 5, 17, 300, 5000])
def test_trie_rendezvous_equals_the_plain_python_reference(k):
    cand = fmix64(np.arange(1000, 1000 + k, dtype=np.uint64))
    m = 150
    ident = fmix64(np.arange(m, dtype=np.uint64) + np.uint64(77))
    own = np.where(np.arange(m) % 7 == 6, -1, np.arange(m) % k)     # some records without own
    got = _trie_pick(5, ident, own, cand)
    ids = [int(x) for x in cand]
    want = [ids.index(_trie_reference(5, "dest", int(ident[i]),
                                      None if own[i] < 0 else ids[own[i]], ids))
            for i in range(m)]
    assert got.tolist() == want
    assert not np.any(got == own)


def test_trie_rendezvous_groups_are_separate_tries_and_records_are_independent():
    rng = np.random.default_rng(4)
    sizes = [1, 2, 40, 700]
    group = np.repeat(np.arange(4), sizes)
    cand = fmix64(rng.integers(0, 2**63, group.size, dtype=np.uint64))
    own = rng.integers(0, group.size, 3000)
    ident = rng.integers(0, 2**63, own.size, dtype=np.uint64)
    got = _trie_pick(8, ident, own, cand, group, 4)
    # a one-cell group has no destination; otherwise the choice stays in the record's group
    assert np.all(got[group[own] == 0] == -1)
    ok = group[own] > 0
    assert np.array_equal(group[got[ok]], group[own[ok]]) and not np.any(got[ok] == own[ok])
    # each group is its own trie: the same as choosing within the group alone
    for g in (1, 2, 3):
        sel = np.flatnonzero(group[own] == g)
        members = np.flatnonzero(group == g)
        local = np.searchsorted(members, own[sel])
        alone = members[_trie_pick(8, ident[sel], local, cand[members])]
        assert np.array_equal(alone, got[sel])
    # a record's choice depends on nothing but itself: any subset, any order, same answers
    perm = rng.permutation(own.size)[:500]
    assert np.array_equal(_trie_pick(8, ident[perm], own[perm], cand, group, 4), got[perm])


def test_trie_rendezvous_is_uniform_when_all_hashes_collide():
    # the depth-16 fallback (candidates sharing all 64 bits): floor(U N)-th of them, own skipped
    k, m = 5, 40_000
    sh = np.zeros(k, dtype=np.uint64)
    ident = np.arange(m, dtype=np.uint64)
    own = np.arange(m) % k
    pick = trie_rendezvous(1, "dest", ident, own, np.zeros(m, np.int64), sh,
                           np.array([0, k]))
    assert not np.any(pick == own)
    q = 1 / (k - 1)
    for o in range(k):
        f = np.bincount(pick[own == o], minlength=k) / (own == o).sum()
        se = np.sqrt(q * (1 - q) / (own == o).sum())     # multinomial share
        assert np.all(np.abs(np.delete(f, o) - q) <= 4 * se), (o, f)


@pytest.mark.parametrize(("k", "m"), [(2, 20_000), (5, 50_000), (17, 100_000),
                                      (300, 150_000), (5000, 250_000)])
def test_trie_destinations_are_exactly_uniform_over_the_other_cells(k, m):
    """m records (one fixed seed, distinct identities: independent draws), own cell i mod k.

    Whatever its own cell, a record's offset (dest - own) mod k is uniform over 1 .. k - 1
    (uniform over the other cells, own excluded), so the K = k - 1 offset counts are
    multinomial(m, 1/K). Statistics with their exact variance, each within 4 standard errors:
    - Pearson's X^2 of the offset counts: E = K - 1,
      Var = 2 (K - 1) + (sum_i 1/p_i - K^2 - 2K + 2) / m (exact for a multinomial; Bishop,
      Fienberg & Holland 1975, eq. 14.4-7), skipped for K = 1;
    - offsets in 10 bins (k > 11) or one by one: each share binomial, SE sqrt(p (1 - p) / m);
    - the share landing in the root's crowded subtrees (top digit whose subtree holds more than
      k/16 cells, where a wrong race rate would show first): per record exactly
      h / (k - 1), h = such cells other than its own; a sum of independent Bernoullis.
    """
    cand = fmix64(np.arange(50, 50 + k, dtype=np.uint64) * np.uint64(3))
    ident = np.arange(m, dtype=np.uint64) * np.uint64(0x9E3779B1)
    own = np.arange(m) % k
    got = _trie_pick(2026, ident, own, cand)
    assert not np.any(got == own) and np.all(got >= 0)
    K = k - 1
    off = (got - own) % k                                     # 1 .. k - 1, uniform
    if K > 1:
        cnt = np.bincount(off, minlength=k)[1:]
        x2 = ((cnt - m / K) ** 2 / (m / K)).sum()
        sum_inv_p = K * K                                     # K offsets of share 1/K
        var = 2 * (K - 1) + (sum_inv_p - K * K - 2 * K + 2) / m
        assert abs(x2 - (K - 1)) <= 4 * np.sqrt(var), (x2, K)
    nb = min(K, 10)
    bins = (off - 1) * nb // K
    share = np.bincount(bins, minlength=nb) / m
    exact = np.bincount(np.arange(K) * nb // K, minlength=nb) / K
    se = np.sqrt(exact * (1 - exact) / m)
    assert np.all(np.abs(share - exact) <= 4 * se), (share, exact)
    top = (keyed_hash(2026, "dest:cell", cand) >> np.uint64(60)).astype(np.int64)
    crowded = np.bincount(top, minlength=16)[top] > k / 16
    p_rec = (crowded.sum() - crowded[own]) / K                # per record, own excluded
    se = np.sqrt((p_rec * (1 - p_rec)).sum()) / m
    assert abs(crowded[got].mean() - p_rec.mean()) <= 4 * se


def _expected_change_on_join(sorted_hash_before: np.ndarray, x: int) -> float:
    """Exact P(a record without own cell changes its choice) when a candidate with hash x joins.

    Coupled races (same uniforms before and after). At a node v on x's path with N_v >= 1
    candidates before, x's child c holding n_c of them: after the join the rates are n_c + 1 and
    N_v + 1, so P(winner changes | at v) = P(c wins after) - P(c wins before)
    = (n_c + 1)/(N_v + 1) - n_c/N_v = (N_v - n_c) / (N_v (N_v + 1)) (a node with N_v = 1 was
    terminal before: then the new race gives x's side probability 1/2, the same formula). The
    record is at v with probability N_v / N_0 (telescoping), so
    P(change) = sum_v (N_v - n_c) / (N_0 (N_v + 1)) <= depth / N_0: about 1/N_0 per level,
    instead of 1/(N_0 + 1) for the flat rendezvous.
    """
    hs = [int(h) for h in sorted_hash_before]
    n0, total, node = len(hs), 0.0, hs
    for d in range(16):
        if not node:
            break
        shift = 60 - 4 * d
        c = (x >> shift) & 15
        child = [h for h in node if (h >> shift) & 15 == c]
        total += (len(node) - len(child)) / (n0 * (len(node) + 1))
        node = child
    return total


def _common_prefix(a: np.ndarray, x: int) -> np.ndarray:
    """Number of leading 4-bit digits that each hash in ``a`` shares with ``x``."""
    diff = np.asarray(a, dtype=np.uint64) ^ np.uint64(x)
    bits = np.where(diff == 0, 64, 63 - np.floor(np.log2(np.maximum(diff, 1).astype(float))))
    return (bits // 4).astype(int)


@pytest.mark.parametrize("k", [9, 300, 5000])
def test_trie_rendezvous_is_stable_when_a_candidate_joins_or_leaves(k):
    m = 60_000
    ident = np.arange(m, dtype=np.uint64) * np.uint64(7919)
    cand = fmix64(np.arange(k, dtype=np.uint64))
    own = np.full(m, -1)
    before = _trie_pick(11, ident, own, cand)
    new = fmix64(np.array([10**6], np.uint64))
    after = _trie_pick(11, ident, own, np.r_[cand, new])
    changed = after != before
    h_all = keyed_hash(11, "dest:cell", np.r_[cand, new])
    hx = int(h_all[-1])
    # a changed record moves into the joining candidate's subtree at the node where its path
    # changed: its new choice shares more leading digits with x than its old one
    assert np.all(_common_prefix(h_all[after[changed]], hx)
                  > _common_prefix(h_all[before[changed]], hx))
    p = _expected_change_on_join(np.sort(h_all[:-1]), hx)
    depth = int(np.ceil(np.log(k) / np.log(16))) + 1
    assert p <= (depth + 1) / k
    # binomial(m, p) changes: 4 standard errors
    assert abs(changed.mean() - p) <= 4 * np.sqrt(p * (1 - p) / m), (changed.mean(), p)
    # candidate 3 leaves: the records that chose it are redirected; other records change only
    # by leaving 3's subtree, with the same bound (the join of 3 to the smaller set, reversed)
    keep = np.delete(np.arange(k), 3)
    again = keep[_trie_pick(11, ident, own, cand[keep])]
    moved = again != before
    assert np.all(moved[before == 3])
    h3 = int(h_all[3])
    assert np.all(_common_prefix(h_all[again[moved]], h3)
                  < _common_prefix(h_all[before[moved]], h3))
    p3 = _expected_change_on_join(np.sort(h_all[keep]), h3)
    assert abs(moved.mean() - p3) <= 4 * np.sqrt(p3 * (1 - p3) / m), (moved.mean(), p3)
