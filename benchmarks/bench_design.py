"""Design-search benchmark: ``sdc design`` over >= 1000 lattice nodes on a 1M-record file.

One synthetic Parquet file of N records (default 1M) with 5 skewed key variables: sex (2),
age (range 0..90), region (30 categories), education (16) and marital status (10), plus
``income``. The config partitions on sex and age bands; the search offers per key the declared
values, bands and top/bottom coding at round numbers (age, education: ordered) and rare
categories merged at five shares (region, marital: ``merge: rare``): the lattice is the product
of these candidates; then finer partitions are tried on the best nodes (phase 2, the last third
of the budget).

Timed, in this process: counting the file once (record batches: memory bounded by the batch and
the cell table), then the search with ``min_entropy=0`` (every node planned; no pruning), so the
node rate is the planning cost itself. The machine is shared: the load average is printed.

    python benchmarks/bench_design.py              # N = 1M
    python benchmarks/bench_design.py --n 200000 --budget 120
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml


def make_file(path: Path, n: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)

    def skewed(levels: int, a: float) -> np.ndarray:
        w = rng.pareto(a, levels) + 0.01
        return rng.choice(levels, size=n, p=w / w.sum())

    frame = pd.DataFrame({
        "sex": rng.integers(1, 3, n),
        "age": np.clip(rng.gamma(4.0, 10.0, n), 0, 90).astype(np.int64),
        "region": skewed(30, 1.0) + 1,
        "education": skewed(16, 1.5) + 1,
        "marital": skewed(10, 0.8) + 1,
        "income": rng.lognormal(9, 1, n).round(2),
    })
    frame.to_parquet(path, row_group_size=1 << 18)


def make_config(folder: Path, data: Path) -> Path:
    cfg = {
        "name": "bench-design",
        "input": {"path": str(data), "format": "parquet"},
        "key_variables": {
            "sex": {"categories": [1, 2]},
            "age": {"range": [0, 90]},
            # region and marital status: nominal codes whose rare ones may be merged;
            # education: ordered levels (bands, top/bottom codes)
            "region": {"categories": list(range(1, 31)), "ordered": False, "merge": "rare"},
            "education": {"categories": list(range(1, 17)), "ordered": True},
            "marital": {"categories": list(range(1, 11)), "ordered": False, "merge": "rare"},
        },
        "partition": {"sex": "as_is", "age": {"bands": [0, 30, 60]}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 1,
        "output": {"dir": str(folder / "releases" / "bench-design")},
    }
    path = folder / "bench-design.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    from sdc.authoring.design import count_declared
    from sdc.config.load import load_config
    from sdc.method.design import candidates, search

    folder = args.workdir or Path(tempfile.mkdtemp(prefix="bench-design-"))
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"design-{args.n}.parquet"
    if not data.is_file():
        make_file(data, args.n)
    path = make_config(folder, data)
    config = load_config(path)
    base = yaml.safe_load(path.read_text())
    t0 = time.perf_counter()
    fine = count_declared(config)
    t_count = time.perf_counter() - t0
    marg = {k: np.bincount(fine.key_codes[:, i], weights=fine.frequency,
                           minlength=config.key_variables[k].size).astype(np.int64)
            for i, k in enumerate(config.key_names)}
    cands = candidates(config, marg)
    t1 = time.perf_counter()
    r = search(fine, config, base, cands, budget=args.budget, min_entropy=0.0)
    t_search = time.perf_counter() - t1
    planned = sum(n.status in ("certified", "refused") for n in r.nodes)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"records {args.n:,}; cells {fine.n_cells:,}; lattice {len(r.nodes)} nodes "
          f"({', '.join(f'{k} {len(v)}' for k, v in cands.items())})")
    print(f"count once: {t_count:.1f} s; search: {planned} nodes planned in {t_search:.1f} s "
          f"({1000 * t_search / max(planned, 1):.1f} ms/node), complete={r.complete}; "
          f"total {t_count + t_search:.1f} s; peak RSS {rss:.0f} MB; "
          f"load {os.getloadavg()[0]:.1f}")
    cur = r.nodes[r.current]
    print(f"current: {cur.changed_share:.2%} changed; frontier {len(r.frontier)} points; "
          f"rule: {r.verdict}")
    if r.recommended is not None:
        rec = r.nodes[r.recommended]
        print(f"recommended ({rec.variant} partition): {rec.changed_share:.2%} changed, "
              f"{rec.entropy_kept:.1%} entropy kept, lowest key {rec.min_key_kept:.1%}, "
              f"{rec.keys_changed:.2f} keys changed per moved record")


if __name__ == "__main__":
    main()
