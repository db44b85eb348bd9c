"""The intruder's binomial pmf is scipy.stats.binom.pmf, bit for bit (it calls the same ufunc
without importing scipy.stats at the release's start)."""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from sdc.reports.intruder_exact import bin_pmf


def test_bin_pmf_is_scipy_binom_pmf_bit_for_bit():
    rng = np.random.default_rng(5)
    cases = [(1, 0.5), (3, 0.0), (3, 1.0), (7, 0.999), (100, 0.01), (2000, 0.37)]
    cases += [(int(n), float(q)) for n, q in zip(rng.integers(1, 500, 50), rng.random(50), strict=True)]
    for n, q in cases:
        want = binom.pmf(np.arange(n + 1), n, q)
        assert bin_pmf(n, q).tobytes() == want.tobytes(), (n, q)
        assert bin_pmf(n, q, size=4).tobytes() == want[:4].tobytes(), (n, q)
    assert bin_pmf(0, 0.3).tolist() == [1.0]
