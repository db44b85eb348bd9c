"""Household-file benchmark: a census-like household file through the engine.

One file of about N persons from :func:`sdc.samples.generate_household_sample` (households of
1-8 persons, household keys region/urbrur/dwelling, person keys sex/age/relation). Timed in
one process, each step on the same frame:

  (a) the person release of today: the same keys, all ``level: person``, no household id;
  (b) the household release: ``input.household_id`` and the household-level keys (both
      stages, the extended cell table, consistent members);
  (c) the public records of (b) (pseudonyms, households contiguous);
  (d) the household section of the reports (sdcMicro's hierarchical risk before and after,
      the composition intruder's 20 replications, as every release runs it).

The machine is shared: the 1-minute load average and the process's CPU seconds so far are
printed next to every number (the CPU differences are the figures to compare under load).

    python benchmarks/bench_households.py                # N = 1M
    python benchmarks/bench_households.py --n 200000
"""

from __future__ import annotations

import argparse
import os
import time

import sdc
from sdc.samples import generate_household_sample


def _config(households: bool, n_regions: int) -> sdc.ReleaseConfig:
    level = "household" if households else "person"
    # income is 0 for every child (it gives age and relation away: the dependence check
    # refuses it); a person file has no household id or household weight to give region away
    inp = {"path": "x.parquet", "id_column": "person_id", "drop": ["income"]}
    if households:
        inp.update({"household_id": "hh_id", "household_columns": ["water", "hh_weight"]})
    else:
        inp["drop"] += ["hh_id", "hh_weight"]
    return sdc.parse_config({
        "name": "bench-households", "input": inp,
        "key_variables": {
            "region": {"range": [1, n_regions], "level": level},
            "urbrur": {"categories": [1, 2], "level": level},
            "dwelling": {"range": [1, 6], "level": level},
            "sex": {"categories": [1, 2]}, "age": {"range": [0, 95]},
            "relation": {"range": [1, 5]}},
        "partition": {"age": {"bands": [0, 15, 30, 45, 60, 75]},
                      "sex": "as_is", "relation": "as_is"},
        "risk": {"households": "warn", "xi": 0.5}, "seed": 1})


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}, {time.process_time():.1f} CPU s so far"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--regions", type=int, default=400)
    args = ap.parse_args()
    t = time.perf_counter()
    f = generate_household_sample(args.n, n_regions=args.regions)
    print(f"generate: {len(f):,} persons in {f['hh_id'].nunique():,} households, "
          f"{time.perf_counter() - t:.1f} s ({_load()})")
    person_cfg, hh_cfg = _config(False, args.regions), _config(True, args.regions)

    t = time.perf_counter()
    r0 = sdc.release_frame(f, person_cfg, 1)
    a = time.perf_counter() - t
    print(f"(a) person release (today): {a:.2f} s, {r0.n_changed:,} records changed, "
          f"{len(r0.blocks):,} PRBs ({_load()})")

    t = time.perf_counter()
    r = sdc.release_frame(f, hh_cfg, 1)
    b = time.perf_counter() - t
    st = r.households
    print(f"(b) household release: {b:.2f} s ({b / a:.1f}x (a)), {int(st.changed.sum()):,} of "
          f"{st.n_households:,} households changed ({len(st.result.blocks)} household PRBs), "
          f"{r.n_changed:,} persons changed, {len(r.blocks):,} person PRBs, "
          f"{st.small_classes} small classes ({st.small_class_persons} persons); certificate "
          f"{r.certificate:.4f} ({_load()})")

    # (b) is the whole pipeline: public records written and the household risk measured
    # (the composition intruder's 20 replications) inside it
    sec = r.household_report["risk"]
    comp = sec["composition"]
    print(f"(c) public records: {r.public_table.num_rows:,} rows, written by (b)")
    print(f"(d) household risk, measured by (b): hierarchical ER "
          f"{sec['hierarchical']['before']['hier_risk_ER']:.1f} -> "
          f"{sec['hierarchical']['after']['hier_risk_ER']:.1f}; composition intruder "
          f"{comp['max_class_estimate']:.4f} (mean {comp['mean']:.4f} +- {comp['mean_se']:.4f}, "
          f"before {comp['before']['mean']:.4f}) vs xi {comp['xi']} ({_load()})")


if __name__ == "__main__":
    main()
