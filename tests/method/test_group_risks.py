"""group_risks (many uniform-W groups at once) against group_risk, one group at a time: the
same BlockRisk, bit for bit (every float compared by its repr), so the weighted design's
certificates do not depend on which routine computed them. group_risk itself is checked
against brute-force enumeration in test_weighted.py."""

from __future__ import annotations

import numpy as np
import pytest

from sdc.method.group_risks import group_risks
from sdc.method.transition_risk import group_risk


def _groups(seed: int, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Groups like the weighted design's (5-9 cells of 1-2 records, m_j = c / W_j) and
    others: 1-12 cells, t up to 29 (first width a <= 16 not enough), m 0 / 1 / outside
    [0, 1] (clipped), very small m (risk below 1/17: the second width)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            k = int(rng.integers(5, 10))
            t = rng.integers(1, 3, k)
            w = t * rng.uniform(50, 150, k)
            m = np.minimum(rng.uniform(0.5, 1.5) * w.mean() / t.mean() / w, 1.0)
        elif kind == 1:
            k = int(rng.integers(1, 13))
            t = rng.integers(1, int(rng.choice([3, 6, 30])), k)
            m = rng.uniform(-0.1, 1.1, k)
        elif kind == 2:
            k = int(rng.integers(3, 9))
            t = rng.integers(1, 4, k)
            m = rng.choice([0.0, 1.0], k)
        elif kind == 3:
            k = int(rng.integers(3, 7))
            t = rng.integers(10, 25, k)
            m = rng.uniform(0.0, 0.05, k)
        else:
            k = int(rng.integers(2, 4))
            t = rng.integers(1, 6, k)
            m = rng.uniform(0, 1, k)
        out.append((t.astype(np.int64), np.asarray(m, dtype=np.float64)))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_group_risks_is_group_risk_bit_for_bit(seed):
    groups = _groups(seed, 1500)
    t = np.concatenate([g[0] for g in groups])
    m = np.concatenate([g[1] for g in groups])
    start = np.r_[0, np.cumsum([g[0].size for g in groups])[:-1]]
    got = group_risks(t, m, start)
    assert len(got) == len(groups)
    for (tg, mg), r in zip(groups, got, strict=True):
        assert repr(r) == repr(group_risk(tg, mg)), (tg.tolist(), mg.tolist())


def test_one_group_and_a_group_among_others_agree():
    """A group's figures do not depend on the groups computed beside it (widths, record
    counts and cell counts differ)."""
    groups = _groups(7, 60)
    t = np.concatenate([g[0] for g in groups])
    m = np.concatenate([g[1] for g in groups])
    start = np.r_[0, np.cumsum([g[0].size for g in groups])[:-1]]
    together = group_risks(t, m, start)
    for i, (tg, mg) in enumerate(groups):
        assert repr(group_risks(tg, mg, np.array([0]))[0]) == repr(together[i])
