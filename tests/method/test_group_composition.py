"""The exact composition intruder of small groups under the two-stage release
(``risk.large_groups``, sdc.method.group_composition; docs/METHOD.md 7.15) against the
release's own draws replayed (the same keyed NZY draws as a release, the composition keys and
hits of sdc.reports.households: code the exact formula does not use)."""

from __future__ import annotations

import numpy as np
import pytest

import sdc
from sdc.method.draws.rendezvous import DrawPlan
from sdc.method.group_composition import group_risks, small_group_composition
from sdc.reports.households import StageDraws, _CompositionKeys, _hits, _mix_codes
from sdc.samples import generate_household_sample


def _plan(cell_prb, freq, theta) -> DrawPlan:
    cell_prb = np.asarray(cell_prb, np.int64)
    return DrawPlan(cell_prb, np.asarray(freq, np.int64),
                    np.arange(1, cell_prb.size + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15),
                    np.asarray(theta, float))


def _stages():
    """Groups of sizes 1, 1, 1, 2, 2, 2, 3 (group 6 is "large" at threshold 2) in three
    household-key cells (one PRB, theta 0.6, t = 2 or 3); persons in cells (HK, class), one
    person PRB per HK value (theta 0.5) except HK 2's (not sensitive)."""
    size = np.array([1, 1, 1, 2, 2, 2, 3])
    code = np.repeat(np.arange(size.size), size)
    h_cell = np.array([0, 1, 2, 0, 1, 2, 0])
    hh = StageDraws(_plan([0, 0, 0], [3, 2, 2], [0.6]), np.array([[0], [1], [2]]), h_cell,
                    np.arange(1, 8, dtype=np.uint64) * np.uint64(7919))
    cls = np.array([0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0])
    hk = h_cell[code]
    p_cell = hk * 2 + cls
    key_codes = np.array([[h, c] for h in range(3) for c in range(2)])
    freq = np.bincount(p_cell, minlength=6)
    pp = StageDraws(_plan([0, 0, 1, 1, -1, -1], freq, [0.5, 0.5]), key_codes, p_cell,
                    np.arange(1, code.size + 1, dtype=np.uint64) * np.uint64(104729))
    return hh, pp, code, size.size


def test_exact_risk_equals_the_replayed_draws():
    hh, pp, code, n_h = _stages()
    groups, r = group_risks(hh, pp, code, n_h, [1], 2)
    assert groups.tolist() == [0, 1, 2, 3, 4, 5]  # the 3-member group is above the threshold
    n = 3000
    hits = np.zeros((n, n_h))
    keys_of = _CompositionKeys(hh.key_codes, pp.key_codes[:, [1]], code, n_h)
    true_key = keys_of(np.asarray(hh.cell), np.asarray(pp.cell))
    for s in range(n):
        key = keys_of(hh.replay(s), pp.replay(s))
        hits[s] = _hits(true_key, key)
    # the replays' 3-member group competes with no small group: its key never matches theirs
    mean, se = hits.mean(axis=0)[groups], hits.std(axis=0, ddof=1)[groups] / np.sqrt(n)
    # 4 SE of the mean of 3,000 replays (per group): fails for a wrong formula
    assert np.all(np.abs(mean - r) <= 4 * se + 1e-12), (mean, r, se)
    assert r.max() < 1.0 and r.min() > 0.0
    out = small_group_composition(hh, pp, code, n_h, [1], 2, 0.5)
    assert out["certificate"] == pytest.approx(r.max())
    assert out["small_groups"] == 6 and out["large_groups"] == 1 and out["large_persons"] == 3


def test_release_states_the_threshold_and_certifies_small_groups():
    """A two-stage release with risk.large_groups carries the exact small-group figure in
    risk.json's households.composition (mode large_groups), and it decides the verdict."""
    f = generate_household_sample(3000, seed=5, n_regions=12)
    from engine_configs import household_config

    base = household_config(weight="hh_weight", drop=["income"])
    cfg = sdc.parse_config({**base, "risk": {**base["risk"], "large_groups": 2}})
    r = sdc.release_frame(f, cfg, 3)
    comp = r.households.composition
    assert comp["mode"] == "large_groups"
    lg = comp["large_groups"]
    sizes = f.groupby("hh_id").size()
    assert lg["small_groups"] == int((sizes <= 2).sum())
    assert lg["large_persons"] == int(sizes[sizes > 2].sum())
    assert comp["exceeds_xi"] == (lg["certificate"] > 0.5 + 1e-9)
    assert 0.0 < lg["certificate"] <= 1.0


def test_sampled_members_is_a_declaration_stated_in_the_release():
    """``input.members: sampled`` (docs/HOUSEHOLDS.md "Sampled members"): the composition
    intruder out of the model for every group (carried as risk.large_groups: 0), stated in
    risk.json's households.composition and the codebook; never inferred (risk.large_groups: 0
    alone is refused), refused without a group id or with a positive threshold."""
    f = generate_household_sample(3000, seed=5, n_regions=12)
    from engine_configs import household_config

    from sdc.config.model import ConfigError
    from sdc.method.group_composition import SAMPLED_MEMBERS

    base = household_config(weight="hh_weight", drop=["income"])
    cfg = sdc.parse_config({**base, "input": {**base["input"], "members": "sampled"}})
    assert cfg.risk.large_groups == 0
    r = sdc.release_frame(f, cfg, 3)
    comp = r.households.composition
    lg = comp["large_groups"]
    assert comp["mode"] == "large_groups" and not comp["exceeds_xi"]
    assert lg["members"] == "sampled" and lg["declared_by"] == "input.members"
    assert lg["small_groups"] == 0 and lg["large_persons"] == len(f)
    assert SAMPLED_MEMBERS in r.household_report["risk"]["message"]
    with pytest.raises((ConfigError, ValueError), match="input.members: sampled"):
        sdc.parse_config({**base, "risk": {**base["risk"], "large_groups": 0}})
    with pytest.raises((ConfigError, ValueError), match="risk.large_groups: 9"):
        sdc.parse_config({**base, "input": {**base["input"], "members": "sampled"},
                          "risk": {**base["risk"], "large_groups": 9}})
    person = {k: v for k, v in base["input"].items() if k not in ("household_id",
                                                                   "household_columns")}
    with pytest.raises((ConfigError, ValueError), match="needs input.household_id"):
        sdc.parse_config({**base, "input": {**person, "members": "sampled"},
                          "key_variables": {k: {kk: vv for kk, vv in v.items() if kk != "level"}
                                            for k, v in base["key_variables"].items()}})


def test_composition_keys_are_the_per_unit_formula() -> None:
    """_CompositionKeys (the mixes per cell, the grouping by household once) gives the keys of
    the formula applied unit by unit: each household's key-code mix XOR the wrapping sum of its
    members' person-key mixes, through fmix64; in any person order."""
    from sdc.method.draws.hashing import fmix64

    rng = np.random.default_rng(3)
    n_h, n_p = 500, 1800
    hh_table = rng.integers(0, 7, (40, 2))
    p_table = rng.integers(0, 9, (120, 3))
    code = np.r_[np.arange(n_h), rng.integers(0, n_h, n_p - n_h)]
    rng.shuffle(code)
    h_cell, p_cell = rng.integers(0, 40, n_h), rng.integers(0, 120, n_p)
    got = _CompositionKeys(hh_table, p_table[:, [0, 2]], code, n_h)(h_cell, p_cell)
    pm = _mix_codes(p_table[p_cell][:, [0, 2]], 0x5BD1E995)
    sums = np.zeros(n_h, np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(sums, code, pm)
        want = fmix64(sums ^ _mix_codes(hh_table[h_cell], 0x27D4EB2F))
    assert np.array_equal(got, want)



def test_hits_with_the_sorted_true_keys_are_the_same() -> None:
    """_hits with the true keys' sort made once (the replays' fast path) gives the same hits
    as the plain binary search, with shared and unique compositions and moved households."""
    rng = np.random.default_rng(8)
    true_key = rng.integers(0, 50, 2000).astype(np.uint64) * np.uint64(2**40 + 7)
    released = true_key.copy()
    moved = rng.integers(0, 2000, 300)
    released[moved] = rng.integers(0, 60, 300).astype(np.uint64) * np.uint64(2**40 + 7)
    order = np.argsort(true_key, kind="stable")
    plain = _hits(true_key, released)
    assert np.array_equal(_hits(true_key, released, (order, true_key[order])), plain)
    assert 0 < plain.sum() < (released == true_key).sum()
