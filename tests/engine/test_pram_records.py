"""post_randomize_records (all PRBs at once, used by the report's intruder) is exactly the
per-PRB kernel post_randomize on the same stream."""

import numpy as np

from sdc.engine.pram import post_randomize, post_randomize_records


def test_all_prbs_in_one_call_equal_one_call_per_prb():
    rng = np.random.default_rng(5)
    blocks = [(1, 0.5), (5, 0.79905), (2, 1.0), (7, 0.0), (40, 0.3)]  # (k, theta)
    local, t, k, theta = [], [], [], []
    for kb, th in blocks:
        tl = rng.integers(1, 4, kb)
        cells = np.repeat(np.arange(kb), tl)
        local.append(cells)
        t.append(tl[cells])
        k.append(np.full(cells.size, kb))
        theta.append(np.full(cells.size, th))
    one = np.random.default_rng(11)
    per_prb = np.concatenate([post_randomize(c, tt, kb, th, one)
                              for c, tt, (kb, th) in zip(local, t, blocks, strict=True)])
    u = np.random.default_rng(11).random((sum(c.size for c in local), 2))
    together = post_randomize_records(np.concatenate(local), np.concatenate(t),
                                      np.concatenate(k), np.concatenate(theta), u)
    np.testing.assert_array_equal(together, per_prb)
    assert (together != np.concatenate(local)).any()  # something moved: the test can fail
