"""Risk benchmark: the mechanism-aware certificate and calibrated theta per PRB profile.

For PRB profiles {1: m1, 2: m2} of growing size (k up to a few thousand cells), times with
caches cleared:

  (a) ``max_risk(profile, theta)`` at the theorem's theta: max over target cells j, picked cells
      z (own or other) and a >= 1 of R_{j->z}(a, t)
  (b) ``correct_match_risk`` for every t of the profile, a = 1..16 (NZY's own cell only), the
      work the certificate did before it was mechanism-aware
  (c) ``calibrate_theta(profile, xi, upper=theta)`` (theta: calibrated, large blocks)
  (d) ``calibrate_theta(profile, xi)`` with upper = 1 (small_blocks: calibrate; the scan of
      (0, 1] before the bisection)

    python benchmarks/bench_risk.py
    python benchmarks/bench_risk.py --xi 0.35
"""

from __future__ import annotations

import argparse
import time

from sdc.method import risk
from sdc.method.theta import solve_theta


def _clear() -> None:
    risk._max_cached.cache_clear()
    risk._calibrate_cached.cache_clear()


def _time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        _clear()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xi", type=float, default=0.395)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    xi, theta = args.xi, solve_theta(args.xi)
    profiles = [{1: 2, 2: 1}, {1: 4}, {1: 5}, {1: 30, 2: 10}, {1: 200, 2: 80},
                {1: 1000, 2: 400}, {1: 3000, 2: 1500}]
    print(f"xi = {xi}, theta = {theta:.5f}; best of {args.repeat}, caches cleared")
    print(f"{'profile':>22} {'max_risk':>10} {'own only':>10} {'cal<=theta':>11} "
          f"{'cal<=1':>10}  max (pick)")
    for prof in profiles:
        r = risk.max_risk(prof, theta)
        a = _time(lambda p=prof: risk.max_risk(p, theta), args.repeat)
        b = _time(lambda p=prof: [risk.correct_match_risk(p, t, theta, 16) for t in p],
                  args.repeat)
        c = _time(lambda p=prof: risk.calibrate_theta(p, xi, upper=theta), args.repeat)
        d = _time(lambda p=prof: risk.calibrate_theta(p, xi), args.repeat)
        print(f"{str(prof):>22} {a * 1e3:>8.2f}ms {b * 1e3:>8.2f}ms {c * 1e3:>9.2f}ms "
              f"{d * 1e3:>8.2f}ms  {r.max_risk:.4f} ({r.z}, t={r.t}, t_z={r.t_z}, a={r.a})")


if __name__ == "__main__":
    main()
