"""Whole-job benchmark: ``sdc release`` end to end against one read-count-write pass.

For each N, one synthetic Parquet file of N records with the engine benchmark's 5 skewed key
variables (sex, age, race, marital, puma: 2/92/9/5/44 levels) plus ``id``, ``income`` and
``weight`` is written to a work folder. Then, each in its own child process:

  (a) the floor: ``pandas.read_parquet`` + ``groupby(keys).size()`` + ``to_parquet`` of the
      frame read (the least any job that reads, counts and writes the file must do);
  (b) ``sdc release CONFIG --force --timings`` through the real console script (Prefect's
      embedded API, Parquet out), parsed for its own split: Prefect start-up, the job inside
      the flow, and the per-task seconds.

Wall seconds come from the parent's clock around the child, peak RSS from ``os.wait4`` (the
child's ``ru_maxrss``; the Prefect API subprocess is a grandchild and not included: it is
reported on its own line by the CLI's timings, which measure it with the same call).

A last case times the reports alone (``sdc.build_reports`` after ``release_frame``, in one
process) with 10 key variables of 500 levels each on 1M records: the cost of risk.json and
utility.json must grow with cells and declared categories, not with their product.

The machine is shared: the 1-minute load average (``uptime``) is printed next to every number.

    python benchmarks/bench_release.py                 # N = 1M and 5M, plus the 10x500 case
    python benchmarks/bench_release.py --n 200000 --no-wide
    python benchmarks/bench_release.py --workdir /tmp/bench   # keep the files
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 44}
ROOT = Path(__file__).resolve().parents[1]


def make_frame(n: int, seed: int = 1) -> pd.DataFrame:
    """N records: 5 skewed keys, a shuffled unique id, a lognormal income and a weight."""
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {"id": rng.permutation(n).astype(np.int64) + 1}
    for name, levels in KEYS.items():
        w = rng.pareto(1.2, levels) + 0.05  # skewed level shares
        cols[name] = rng.choice(levels, size=n, p=w / w.sum()).astype(np.int64)
    cols["income"] = rng.lognormal(10, 1, n).round()
    cols["weight"] = rng.uniform(50, 300, n)
    return pd.DataFrame(cols)


def write_config(folder: Path, data: Path, out: Path) -> Path:
    keys = "\n".join(f"  {k}: {{range: [0, {v - 1}]}}" for k, v in KEYS.items())
    text = textwrap.dedent(f"""\
        name: bench
        input: {{path: {data}, format: parquet, id_column: id, weight: weight}}
        key_variables:
        {{keys}}
        partition:
          sex: as_is
          age: {{bands: [0, 18, 25, 35, 45, 55, 65]}}
          race: {{groups: {{white: [0], black: [1], other: [2, 3, 4, 5, 6, 7, 8]}}}}
        risk: {{xi: 0.395, theta: theorem, small_blocks: merge}}
        seed: 20261122
        output: {{dir: {out}, formats: [parquet]}}
        """).replace("{keys}", keys)
    path = folder / "bench.yaml"
    path.write_text(text)
    return path


def load() -> float:
    return os.getloadavg()[0]


def run_child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB reported by the wrapper, stdout) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{args[:4]} failed ({p.returncode}):\n{out}\n{err}")
    rss = next((float(x.split("=", 1)[1]) for x in err.splitlines()
                if x.startswith("__peak_rss_mb=")), float("nan"))
    return wall, rss, out


# the measured command runs in a wrapper that execs nothing: it waits for the real command and
# prints the real command's own ru_maxrss (os.wait4), so the wrapper's memory is not counted
_WRAP = textwrap.dedent("""\
    import os, subprocess, sys
    p = subprocess.Popen(sys.argv[1:])
    _, status, ru = os.wait4(p.pid, 0)
    print(f"__peak_rss_mb={ru.ru_maxrss / 1024:.0f}", file=sys.stderr)
    sys.exit(os.waitstatus_to_exitcode(status))
    """)

_FLOOR = textwrap.dedent("""\
    import sys, time
    import pandas as pd
    src, dst, keys = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    t0 = time.perf_counter()
    frame = pd.read_parquet(src)
    t1 = time.perf_counter()
    counts = frame.groupby(keys).size()
    t2 = time.perf_counter()
    frame.to_parquet(dst, index=False)
    t3 = time.perf_counter()
    print(f"read={t1 - t0:.3f} groupby={t2 - t1:.3f} write={t3 - t2:.3f} cells={counts.size}")
    """)


def measured(cmd: list[str]) -> tuple[float, float, str]:
    return run_child([sys.executable, "-c", _WRAP, *cmd])


def floor(data: Path, folder: Path) -> dict:
    wall, rss, out = measured([sys.executable, "-c", _FLOOR, str(data), str(folder / "floor.parquet"),
                               ",".join(KEYS)])
    return {"seconds": wall, "peak_rss_mb": rss, "detail": out.strip(), "load": load()}


def sdc_release(config: Path) -> dict:
    sdc = str(Path(sys.executable).with_name("sdc"))
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    helptext = subprocess.run([sdc, "release", "--help"], capture_output=True, text=True,
                              env=env).stdout
    extra = ["--timings"] if "--timings" in helptext else []  # older versions: wall only
    wall, rss, out = run_child([sys.executable, "-c", _WRAP, sdc, "release", str(config),
                                "--force", *extra], env=env)
    timings = {}
    for line in out.splitlines():
        if line.startswith("timings "):
            timings = json.loads(line.removeprefix("timings "))
    return {"seconds": wall, "peak_rss_mb": rss, "timings": timings, "load": load()}


def wide_reports(n: int = 1_000_000, n_keys: int = 10, levels: int = 500) -> dict:
    """Seconds of release_frame and of build_reports with n_keys keys of ``levels`` levels."""
    code = textwrap.dedent(f"""\
        import resource, time
        import numpy as np, pandas as pd
        import sdc
        from sdc.reports.build import build_reports
        rng = np.random.default_rng(3)
        n, p, L = {n}, {n_keys}, {levels}
        cols = {{}}
        for j in range(p):
            w = rng.pareto(1.0, L) + 0.01
            cols[f"k{{j}}"] = rng.choice(L, size=n, p=w / w.sum()).astype(np.int64)
        cols["income"] = rng.lognormal(10, 1, n).round()
        cols["weight"] = rng.uniform(50, 300, n)
        frame = pd.DataFrame(cols)
        cfg = sdc.parse_config({{
            "name": "wide", "input": {{"path": "x.parquet", "weight": "weight"}},
            "key_variables": {{f"k{{j}}": {{"range": [0, L - 1]}} for j in range(p)}},
            "partition": {{"k0": {{"bands": list(range(0, L, 50))}}}},
            "risk": {{"xi": 0.395, "small_blocks": "merge"}}, "seed": 1}})
        t0 = time.perf_counter()
        res = sdc.release_frame(frame, cfg, seed=1)
        t1 = time.perf_counter()
        rep = build_reports(frame, res, cfg, seed=1)
        t2 = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"cells={{res.cells.n_cells}} release={{t1 - t0:.2f}} reports={{t2 - t1:.2f}} "
              f"peak={{peak:.0f}}")
        """)
    wall, rss, out = measured([sys.executable, "-c", code])
    fields = dict(x.split("=") for x in out.split())
    return {"n": n, "keys": n_keys, "levels": levels, "wall": wall, "peak_rss_mb": rss,
            "load": load(), **fields}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000, 5_000_000])
    ap.add_argument("--workdir", type=Path, default=None, help="keep the files here")
    ap.add_argument("--no-wide", action="store_true", help="skip the 10 x 500 report case")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sdc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; load average at start {load():.2f} (2 shared cores)")
    try:
        for n in args.n:
            folder = work / f"n{n}"
            folder.mkdir(exist_ok=True)
            data = folder / "input.parquet"
            if not data.exists():
                make_frame(n).to_parquet(data, index=False)
            cfg = write_config(folder, data, folder / "release")
            f = floor(data, folder)
            r = sdc_release(cfg)
            t = r["timings"]
            print(f"\nN = {n:,}")
            print(f"  floor (read + groupby.size + write)   {f['seconds']:7.2f} s  "
                  f"{f['peak_rss_mb']:6.0f} MB  load {f['load']:.2f}   [{f['detail']}]")
            print(f"  sdc release (CLI, end to end)         {r['seconds']:7.2f} s  "
                  f"{r['peak_rss_mb']:6.0f} MB  load {r['load']:.2f}   "
                  f"ratio {r['seconds'] / f['seconds']:.1f}x floor")
            if t:
                job = t.get("job_seconds", 0) or 0
                print(f"    start-up (all but the job)          {r['seconds'] - job:7.2f} s"
                      f"  of which pre-flight {t.get('preflight_seconds', 0):.2f} s, Prefect "
                      f"start-up + shutdown {t.get('prefect_seconds', 0):.2f} s (API server peak "
                      f"{t.get('api_server_peak_rss_mb', float('nan')):.0f} MB)")
                print(f"    job inside the flow                 {job:7.2f} s"
                      f"  ratio {job / f['seconds']:.1f}x floor")
                for name, sec in t.get("tasks", {}).items():
                    print(f"      {name:<34}{sec:7.2f} s")
        if not args.no_wide:
            w = wide_reports()
            print(f"\nreports with {w['keys']} keys x {w['levels']} levels, N = {w['n']:,}: "
                  f"cells {w['cells']}, release_frame {w['release']} s, build_reports "
                  f"{w['reports']} s, peak {w['peak_rss_mb']:.0f} MB, load {w['load']:.2f}")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
