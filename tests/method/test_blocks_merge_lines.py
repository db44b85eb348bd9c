"""The array-based small-block merge (:func:`sdc.method.blocks.plan_blocks`)
against a transcription of the rule as a line-by-line loop (the implementation before it was
vectorized): on random partitions with several merge levels, repeated partition-set codes
(ties in the line order) and both merging policies, the blocks, their thetas and risks, the
partition sets' blocks and the merge log are identical."""

from __future__ import annotations

import numpy as np
import pytest

import sdc
from sdc.errors import SmallBlockError
from sdc.method.blocks import Block, plan_blocks
from sdc.method.risk import calibrate_theta, max_risk


def _reference_merge(blocks, ps_codes, merge_along, deficient, describe):
    """The merge rule of sdc.method.blocks' docstring, block by block (the original loop)."""
    n_vars = ps_codes.shape[1]
    log = []
    for level in range(1, len(merge_along) + 1):
        if not any(deficient(b) for b in blocks):
            break
        merged_vars = merge_along[:level]
        fixed = [v for v in range(n_vars) if v not in merged_vars]
        order_vars = list(reversed(merged_vars))

        def line_key(b, fixed=fixed):
            return tuple(int(ps_codes[b.members[0], v]) for v in fixed)

        def order_key(b, order_vars=order_vars):
            return min(tuple(int(ps_codes[m, v]) for v in order_vars) for m in b.members)

        lines: dict = {}
        for b in blocks:
            lines.setdefault(line_key(b), []).append(b)
        out = []
        for lk in sorted(lines):
            seg = sorted(lines[lk], key=order_key)
            while len(seg) > 1:
                bad = [i for i, b in enumerate(seg) if deficient(b)]
                if not bad:
                    break
                i = min(bad, key=lambda j: (seg[j].k, j))
                if i == 0:
                    j = 1
                elif i == len(seg) - 1:
                    j = i - 1
                else:
                    j = i + 1 if seg[i + 1].k <= seg[i - 1].k else i - 1
                a, b = sorted((i, j))
                new = Block(sorted(seg[a].members + seg[b].members),
                            seg[a].profile + seg[b].profile, merged=True)
                log.append(f"{describe(seg[i])} (k={seg[i].k}) joined {describe(seg[j])} "
                           f"(k={seg[j].k}) along level {level}")
                seg[a:b + 1] = [new]
            out.extend(seg)
        blocks = out
    return blocks, log


def _reference_plan(ps_codes, profiles, *, xi, theta, kmin, policy, merge_along, describe):
    blocks = [Block([s], profiles[s].copy()) for s in range(profiles.shape[0])
              if profiles[s].sum() > 0]

    def covered(b):
        return b.k >= kmin and max_risk(b.profile_dict(), theta).max_risk <= xi

    deficient = ((lambda b: not covered(b)) if policy == "merge"
                 else (lambda b: calibrate_theta(b.profile_dict(), xi) is None))
    blocks, log = _reference_merge(blocks, ps_codes, merge_along, deficient, describe)
    if any(deficient(b) for b in blocks):
        return None
    blocks.sort(key=lambda b: b.members[0])
    return blocks, log


def _case(rng, n_vars: int, levels: int, dup: bool):
    sizes = rng.integers(2, 6, n_vars)
    grid = np.stack(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"), -1)
    codes = grid.reshape(-1, n_vars)
    keep = rng.random(codes.shape[0]) < 0.8
    codes = codes[keep]
    if dup:  # repeated codes (as split_missing makes): ties in the order inside a line
        extra = codes[rng.integers(0, codes.shape[0], max(1, codes.shape[0] // 8))]
        codes = np.vstack([codes, extra])
    n_ps = codes.shape[0]
    t_max = 2
    profiles = np.zeros((n_ps, t_max + 1), dtype=np.int64)
    profiles[:, 1] = rng.poisson(rng.uniform(0.3, 3.0), n_ps)
    profiles[:, 2] = rng.poisson(0.5, n_ps)
    along = [int(v) for v in rng.permutation(n_vars)[:levels]]
    return codes, profiles, along


@pytest.mark.parametrize("policy", ["merge", "calibrate"])
@pytest.mark.parametrize("seed", range(12))
def test_vectorized_merge_equals_the_line_by_line_rule(policy, seed):
    rng = np.random.default_rng(seed)
    xi = [0.5, 0.395, 0.34][seed % 3]
    theta = sdc.solve_theta(xi)
    kmin = sdc.kmin(theta)
    codes, profiles, along = _case(rng, 1 + seed % 4, 1 + seed % 3, dup=seed % 2 == 1)
    along = along[:codes.shape[1]]

    def describe(b):
        return "PS " + "+".join(str(m) for m in b.members)

    ref = _reference_plan(codes, profiles, xi=xi, theta=theta, kmin=kmin, policy=policy,
                          merge_along=along, describe=describe)
    kw = dict(xi=xi, theta=theta, kmin=kmin, theta_mode="theorem", policy=policy,
              merge_along=along, describe=describe)
    if ref is None:
        with pytest.raises(SmallBlockError):
            plan_blocks(codes, profiles, **kw)
        return
    got = plan_blocks(codes, profiles, **kw)
    ref_blocks, ref_log = ref
    assert got.merges == ref_log
    assert [b.members for b in got.blocks] == [b.members for b in ref_blocks]
    assert [b.profile.tolist() for b in got.blocks] == [b.profile.tolist() for b in ref_blocks]
    assert [b.merged for b in got.blocks] == [b.merged for b in ref_blocks]
    expect = np.full(codes.shape[0], -1)
    for i, b in enumerate(ref_blocks):
        expect[b.members] = i
    np.testing.assert_array_equal(got.block_of_partition_set, expect)
    for b in got.blocks:  # thetas and risks: the uncached computation of the same profile
        assert b.risk == max_risk(b.profile_dict(), b.theta)
        assert b.risk.max_risk <= xi + 1e-12
