"""post_randomize_records (all PRBs at once, used by the report's intruder) is exactly the
per-PRB kernel post_randomize on the same stream."""

import numpy as np

from sdc.method.pram import post_randomize, post_randomize_records


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


def test_prepared_kernel_equals_the_rule_written_out():
    """post_randomize_prepared (constants prepared once, the intruder's replicas) against the
    docstring's rule record by record in plain Python, including k = 1, theta = 0 and u values
    on the move threshold and at the cap of the destination draw."""
    from sdc.method.pram import post_randomize_prepared, prepare_records

    rng = np.random.default_rng(8)
    m = 3000
    k = rng.choice([1, 2, 3, 5, 17], m)
    t = rng.integers(1, 3, m)
    theta = rng.choice([0.0, 0.3, 0.79905, 1.0], m)
    local = (rng.random(m) * k).astype(np.int64)
    u = rng.random((m, 2))
    u[:50, 0] = theta[:50] / t[:50]                    # exactly on the threshold: stays
    u[50:100, 1] = np.nextafter(1.0, 0.0)             # largest u: the cap k - 2
    prepared = prepare_records(t, k, theta)
    got = post_randomize_prepared(local, prepared, u)
    for i in range(m):
        moves = k[i] >= 2 and theta[i] > 0 and u[i, 0] < theta[i] / t[i]
        r = min(int(u[i, 1] * (k[i] - 1)), max(k[i] - 2, 0))
        want = r + (r >= local[i]) if moves else local[i]
        assert got[i] == want, i
    np.testing.assert_array_equal(got, post_randomize_records(local, t, k, theta, u))
    assert (got != local).any() and (got == local).any()
