"""Engine benchmark: release_frame vs one pandas groupby over the same frame.

Synthetic microdata of N records with 5 key variables of 2/92/9/5/44 skewed levels (sex, age,
race, marital, puma, as in the NZY example) plus three non-key columns. For each N, two child
processes each build the same frame (same seed) and time one operation:

  (a) baseline: ``frame.groupby(keys).size()``
  (b) ``sdc.release_frame(frame, config, seed)`` end to end (encode, cells, partition sets,
      PRBs, theta, PRAM, certificate, released frame)

Each child reports wall seconds of the operation, its CPU seconds (all threads, and the main
thread's: the figures to compare on a shared machine), its peak RSS (ru_maxrss) and the RSS it
had before the operation, so the memory the operation itself needs is peak - before.

    python benchmarks/bench_engine.py               # N = 1M and 5M
    python benchmarks/bench_engine.py --n 200000    # any sizes
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time

import numpy as np
import pandas as pd

KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 44}


def make_frame(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {}
    for name, levels in KEYS.items():
        w = rng.pareto(1.2, levels) + 0.05  # skewed level shares
        cols[name] = rng.choice(levels, size=n, p=w / w.sum()).astype(np.int64)
    cols["income"] = rng.lognormal(10, 1, n).round()
    cols["hours"] = rng.integers(0, 80, n)
    cols["weight"] = rng.uniform(50, 300, n)
    return pd.DataFrame(cols)


def make_config():
    import sdc

    return sdc.parse_config({
        "name": "bench",
        "input": {"path": "synthetic.csv"},
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 25, 35, 45, 55, 65]},
                      "race": {"groups": {"white": [0], "black": [1],
                                          "other": list(range(2, 9))}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 1,
    })


def _rss_now() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _child(which: str, n: int, q: mp.Queue) -> None:
    frame = make_frame(n)
    extra = {}
    if which == "release":
        import sdc

        cfg = make_config()
        sdc.release_frame(frame.head(1000), cfg, seed=1)  # warm imports and caches
    before = _rss_now()
    t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
    if which == "groupby":
        out = frame.groupby(list(KEYS)).size()
        extra["cells"] = int(out.size)
    else:
        res = sdc.release_frame(frame, cfg, seed=7)
        extra.update(cells=int(res.cells.n_cells), prbs=int(len(res.blocks)),
                     changed=int(res.n_changed), certificate=round(res.certificate, 4))
    secs = time.perf_counter() - t0
    cpu, main = time.process_time() - c0, time.thread_time() - m0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    q.put({"op": which, "n": n, "seconds": secs, "cpu": cpu, "main": main, "peak_rss_mb": peak,
           "before_mb": before, **extra})


def measure(which: str, n: int) -> dict:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(which, n, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000, 5_000_000])
    args = ap.parse_args()
    print(f"{'N':>10} {'operation':<22} {'seconds':>8} {'CPU s':>7} {'main s':>7} "
          f"{'peak RSS MB':>12} {'op RSS MB':>10}  notes")
    for n in args.n:
        a = measure("groupby", n)
        b = measure("release", n)
        for r, label in ((a, "groupby(keys).size()"), (b, "release_frame")):
            notes = ", ".join(f"{k}={r[k]}" for k in ("cells", "prbs", "changed", "certificate") if k in r)
            print(f"{n:>10,} {label:<22} {r['seconds']:>8.3f} {r['cpu']:>7.2f} {r['main']:>7.2f} "
                  f"{r['peak_rss_mb']:>12.0f} "
                  f"{r['peak_rss_mb'] - r['before_mb']:>10.0f}  {notes}")
        print(f"{n:>10,} {'ratio release/groupby':<22} {b['seconds'] / a['seconds']:>8.2f} "
              f"{b['cpu'] / a['cpu']:>7.2f} {b['main'] / a['main']:>7.2f}")


if __name__ == "__main__":
    main()
