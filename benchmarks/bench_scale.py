"""Scale benchmark: the streaming and Dask engines at 10M, 30M and 100M records.

For each N a Parquet file is generated batch by batch (never held whole: 1M records at a time,
5 skewed key variables of 2/92/9/5/44 levels as in the NZY example, plus an id, income, hours
and weight), then three child processes each run one job on it and report wall seconds and
peak RSS (``ru_maxrss`` of the process and, for Dask, the sum of the workers' peaks):

  floor     : one pyarrow pass that reads the file in batches, counts the cells (the same
              mixed-radix cell codes and merge as the engines) and writes every batch to a
              Parquet file: the least any release must do;
  streaming : :func:`sdc.executors.streaming.stream_release` (count, identities, apply, bucketed
              order, public Parquet, and the internal records.parquet a release writes);
  dask      : :func:`sdc.executors.dask.dask_release` on a LocalCluster of 2 workers.

The engines accumulate the report aggregates during their passes and make the report
refinement passes when a quartile is not yet exact (keys and numeric columns read again;
``report_passes_seconds``: the wait for those passes after the writing, since the first pass
runs alongside it, in a thread for streaming, on the cluster for dask); ``report_build_seconds`` is
building risk.json, utility.json and report.html from them afterwards. Both are included in
``seconds`` and ``peak_rss_mb``. ``seconds`` starts before the child imports sdc (~0.5-0.7 s:
pandas, pandera, the engines, the reports; ``imports_seconds``); ``seconds_warm`` is the job
after them, as a warm ``sdc release`` worker runs it (it holds the imports), and
``x_floor_warm`` its ratio (the floor's child has imported pyarrow before its clock starts).

The machine is shared: ``uptime`` (load average) is printed next to every figure.

    python benchmarks/bench_scale.py --n 10000000 30000000 --engines streaming dask
    python benchmarks/bench_scale.py --n 100000000 --engines streaming --dir /work/tmp
    python benchmarks/bench_scale.py --n 10000000 --engines streaming --repeat 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 44}
GEN_BATCH = 1_000_000


def generate(path: Path, n: int, seed: int = 1) -> None:
    """Write N synthetic records to ``path`` in batches of 1M (row groups of 1M)."""
    rng = np.random.default_rng(seed)
    shares = {}
    for name, levels in KEYS.items():
        w = rng.pareto(1.2, levels) + 0.05
        shares[name] = w / w.sum()
    schema = pa.schema([("person_id", pa.int64())] + [(k, pa.int64()) for k in KEYS]
                       + [("income", pa.float64()), ("hours", pa.int64()), ("weight", pa.float64())])
    with pq.ParquetWriter(path, schema, compression="snappy") as w:
        for start in range(0, n, GEN_BATCH):
            m = min(GEN_BATCH, n - start)
            r = np.random.default_rng([seed, start])
            cols = {"person_id": np.arange(start, start + m, dtype=np.int64) * 7919 + 13}
            for name, levels in KEYS.items():
                cols[name] = r.choice(levels, size=m, p=shares[name]).astype(np.int64)
            cols["income"] = r.lognormal(10, 1, m).round()
            cols["hours"] = r.integers(0, 80, m)
            cols["weight"] = r.uniform(50, 300, m)
            w.write_table(pa.table(cols, schema=schema))


def make_config(path: Path, out: Path, formats=("parquet",)):
    from sdc.config.load import parse_config

    return parse_config({
        "name": "bench-scale",
        "input": {"path": str(path), "id_column": "person_id", "weight": "weight"},
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 25, 35, 45, 55, 65]},
                      "race": {"groups": {"white": [0], "black": [1], "other": list(range(2, 9))}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 7,
        "output": {"dir": str(out), "formats": list(formats)},
    })


def _floor(path: Path, out: Path) -> dict:
    from sdc.method.cell_passes import CellCounter

    sizes = list(KEYS.values())
    counter = CellCounter()
    # read as the engines do (sdc.io.batches): row group by row group, no pre_buffer (pyarrow's
    # default iter_batches keeps what it has read and was 2-3x slower)
    pf = pq.ParquetFile(path, pre_buffer=False)
    with pq.ParquetWriter(out / "floor.parquet", pf.schema_arrow, compression="snappy") as w:
        for g in range(pf.metadata.num_row_groups):
            batch = pf.read_row_group(g)  # a Table (one row group)
            code = np.zeros(batch.num_rows, dtype=np.int64)
            for k, s in zip(KEYS, sizes, strict=True):
                code *= s
                code += batch.column(k).to_numpy()
            counter.add(code)
            w.write_table(batch)
    codes, _ = counter.result()
    return {"cells": int(codes.size)}


def _child(which: str, path: str, out: str, q: mp.Queue) -> None:
    path, out = Path(path), Path(out)
    extra: dict = {}
    t0 = time.perf_counter()
    if which == "floor":
        extra = _floor(path, out)
    else:
        # what a release imports (a warm `sdc release` worker holds them: docs/OPERATIONS.md),
        # timed apart: ``seconds`` includes them, ``seconds_warm`` does not
        import sdc.io.schemas  # noqa: F401  (pandera, the passes' lazy import)
        import sdc.reports.build  # noqa: F401
        import sdc.reports.html  # noqa: F401
        from sdc.executors.dask import dask_release  # noqa: F401
        from sdc.executors.streaming import stream_release  # noqa: F401

        extra["imports_seconds"] = round(time.perf_counter() - t0, 2)
        cfg = make_config(path, out / "release")
        marks: list[tuple[str, float]] = []

        def mark(step: str) -> None:
            marks.append((step, time.perf_counter()))

        if which == "streaming":
            from sdc.executors.streaming import stream_release

            res = stream_release(cfg, 7, out / "public", tmp_dir=out, progress=mark,
                                 records_path=out / "records.parquet")
        else:
            from sdc.executors.dask import DaskSpec, dask_client, dask_release

            res = dask_release(cfg, 7, out / "public", DaskSpec(workers=2, scratch=str(out)),
                               records_path=out / "records.parquet",
                               progress=mark)
            del dask_client
        t_engine = time.perf_counter()
        # the report passes (numeric summaries) and building risk/utility/report.html
        # from the first refinement pass to the next step (dask: the public file is written
        # after the cluster closed) or the end
        times = [t for _, t in marks] + [t_engine]
        for i, (step, t) in enumerate(marks):
            if step.startswith("numeric summaries"):
                extra["report_passes_seconds"] = round(times[i + 1] - t, 1)
        # seconds of every step, from its progress mark to the next one (or the engine's end)
        extra["steps_seconds"] = {step.split(" (")[0]: round(times[i + 1] - t, 1)
                                  for i, (step, t) in enumerate(marks)}
        if getattr(res, "accumulator", None) is not None:
            from sdc.pipeline.report_parts import batch_reports

            batch_reports(res, cfg, seed=7)
            extra["report_build_seconds"] = round(time.perf_counter() - t_engine, 1)
        extra |= {"cells": int(res.plan.partitioned.cells.n_cells),
                 "prbs": int(len(res.plan.blocks)), "changed": res.n_changed,
                 "certificate": round(res.plan.certificate, 4)}
        # the digest the audit record takes (sdc.io.write.written_sha256: computed while the
        # file was written); the bytes are read and hashed again after the clock stops
        from sdc.io.write import written_sha256

        pub = out / "public" / "microdata.parquet"
        extra["public_sha256_16"] = written_sha256(pub)[:16]
    secs = time.perf_counter() - t0
    if "public_sha256_16" in extra and _sha(pub)[:16] != extra["public_sha256_16"]:
        raise RuntimeError("the digest taken while writing differs from the file's bytes")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if "imports_seconds" in extra:
        extra["seconds_warm"] = round(secs - extra["imports_seconds"], 1)
    q.put({"job": which, "seconds": round(secs, 1), "peak_rss_mb": round(peak),
           "children_peak_rss_mb": round(kids), **extra})


def _sha(p: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(which: str, path: Path, work: Path) -> dict:
    out = work / which
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(which, str(path), str(out), q))
    p.start()
    p.join()
    res = q.get() if p.exitcode == 0 else {"job": which, "error": f"exit {p.exitcode}"}
    res["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    shutil.rmtree(out, ignore_errors=True)
    return res


def _emit(row: dict, json_path: str | None) -> None:
    print(json.dumps(row), flush=True)
    if json_path:
        with open(json_path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _summary(rows: list[dict], n: int) -> list[dict]:
    """Per job over the rounds: the fastest run, its ratio to the fastest floor, and the
    median of each round's own ratio (the host's speed drifts between rounds: on the shared
    2-core machine the same 10M job took 9.9 s and 11.4 s twenty minutes apart)."""
    ok = [r for r in rows if "seconds" in r]
    floors = [r["seconds"] for r in ok if r["job"] == "floor"]
    out = []
    for job in dict.fromkeys(r["job"] for r in ok):
        mine = [r for r in ok if r["job"] == job]
        best = min(r["seconds"] for r in mine)
        out.append({"job": job, "summary": True, "n": n, "rounds": len(mine),
                    "seconds_min": best, "seconds_all": [r["seconds"] for r in mine],
                    "peak_rss_mb_max": max(r["peak_rss_mb"] for r in mine),
                    "x_floor_min": round(best / min(floors), 2) if floors else None,
                    "x_floor_median": float(np.median([r["x_floor"] for r in mine
                                                       if "x_floor" in r]))})
        warm = [r["seconds_warm"] for r in mine if "seconds_warm" in r]
        if warm and floors:
            out[-1] |= {"seconds_warm_min": min(warm),
                        "x_floor_warm_min": round(min(warm) / min(floors), 2),
                        "x_floor_warm_median": float(np.median([r["x_floor_warm"] for r in mine
                                                                if "x_floor_warm" in r]))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10_000_000, 30_000_000])
    ap.add_argument("--engines", nargs="+", default=["streaming", "dask"],
                    choices=["streaming", "dask"])
    ap.add_argument("--dir", default=None, help="work folder (needs ~6 GB per 100M records)")
    ap.add_argument("--json", default=None, help="append results as JSON lines to this file")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the floor and the engines, alternated (a summary line per "
                         "job: the fastest round, its ratio to the fastest floor and the "
                         "median of the rounds' own ratios)")
    args = ap.parse_args()
    if args.dir:  # a folder that does not exist yet is created (mkdtemp would raise)
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sdc-bench-scale-", dir=args.dir))
    try:
        for n in args.n:
            path = work / f"input-{n}.parquet"
            t0 = time.perf_counter()
            generate(path, n)
            print(f"N={n:,}: generated {path.stat().st_size / 2**30:.2f} GiB in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            done: list[dict] = []
            for rnd in range(1, args.repeat + 1):
                rows = [run("floor", path, work)]
                rows += [run(e, path, work) for e in args.engines]
                floor = rows[0].get("seconds")
                for r in rows:
                    r["n"] = n
                    if args.repeat > 1:
                        r["round"] = rnd
                    if floor and "seconds" in r:
                        r["x_floor"] = round(r["seconds"] / floor, 2)
                    if floor and "seconds_warm" in r:
                        r["x_floor_warm"] = round(r["seconds_warm"] / floor, 2)
                    _emit(r, args.json)
                done += rows
            if args.repeat > 1:
                for r in _summary(done, n):
                    _emit(r, args.json)
            os.remove(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
