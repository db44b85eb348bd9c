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

The demo (``configs/census_demo.yaml``, 59,033 records) is run three ways, each ``--repeat``
times (median reported, every run listed): **cold** (``--no-reuse``: Prefect's temporary API
started by the command), **first** (no server yet: the run starts the local server later runs
reuse, and then the release worker), **warm, API only** (the reused server, the run in the
command's own process: ``SDC_WORKER=0``) and **warm, release worker** (the thin client hands
the run to the pre-imported worker). Each line gives the CPU seconds of the command (the thin
client's, with a worker), of the run (the worker's child) and of the local server during it. The job-only figure is the flow's own seconds
(``job_seconds`` of ``--timings``). All of it twice: on the machine as it is ("idle") and with
one core kept busy by a spinning process ("loaded"). Each line shows the 1-minute load average
and the CLI's CPU seconds (user + system, a figure the machine's load changes much less than the
wall). The N-record cases run cold and warm too. Every run uses its own ``PREFECT_HOME`` under
the work folder; the server is stopped at the end. Cold means no server and no worker, not a
new home: a new ``PREFECT_HOME``'s database is created and migrated before the cold run (the
demo: one discarded run; N records: a temporary API started once), a one-time cost of ~6 CPU s
per home and Prefect version that is printed apart.

A last case times the reports alone (``batch_reports`` after ``release_frame``, in one
process) with 10 key variables of 500 levels each on 1M records: the cost of risk.json and
utility.json must grow with cells and declared categories, not with their product.

The machine is shared: the 1-minute load average (``uptime``) is printed next to every number.

    python benchmarks/bench_release.py                 # demo, N = 1M and 5M, the 10x500 case
    python benchmarks/bench_release.py --n --no-wide   # the demo only (idle and loaded)
    python benchmarks/bench_release.py --n 200000 --no-wide --no-loaded
    python benchmarks/bench_release.py --workdir /tmp/bench   # keep the files
    python benchmarks/bench_release.py --n 5000000 --no-demo --no-wide --stages --repeat 3
                                       # the job's steps without Prefect: wall and CPU s each
"""

from __future__ import annotations

import argparse
import contextlib
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


#: ``--design``: the risk section's extra entries of each transition design
DESIGNS = {"uniform": "", "near": ", destinations: near", "weighted": ", weighted: true",
           "near-weighted": ", destinations: near, weighted: true"}


def write_config(folder: Path, data: Path, out: Path, design: str = "uniform") -> Path:
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
        risk: {{xi: 0.395, theta: theorem, small_blocks: merge{{design}}}}
        seed: 20261122
        output: {{dir: {out}, formats: [parquet]}}
        """).replace("{keys}", keys).replace("{design}", DESIGNS[design])
    if design != "uniform":  # its own job: never a member of the uniform release's series
        text = text.replace("name: bench\n", f"name: bench-{design}\n", 1)
    path = folder / ("bench.yaml" if design == "uniform" else f"bench-{design}.yaml")
    path.write_text(text)
    return path


def load() -> float:
    return os.getloadavg()[0]


def run_child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB reported by the wrapper, stdout) of one child process (the
    wrapper's other figures, e.g. the command's CPU seconds, in ``last_stderr``)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{args[:4]} failed ({p.returncode}):\n{out}\n{err}")
    rss = next((float(x.split("=", 1)[1]) for x in err.splitlines()
                if x.startswith("__peak_rss_mb=")), float("nan"))
    last_stderr[:] = err.splitlines()
    return wall, rss, out


last_stderr: list[str] = []


def _wrapped(key: str) -> float:
    return next((float(x.split("=", 1)[1]) for x in last_stderr if x.startswith(f"__{key}=")),
                float("nan"))


def process_cpu(home: Path | None, name: str, children: bool = False
                ) -> tuple[int, float] | None:
    """(pid, CPU seconds so far) of the local server (``name`` "server") or the release worker
    ("worker") of ``home``, None if none runs; ``children``: of its children it has reaped
    (a worker's runs, whole: also their exit)."""
    if home is None:
        return None
    try:
        pid = int(json.loads((home / f"sdc-{name}.json").read_text())["pid"])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, KeyError):
        return None
    i = 13 if children else 11
    return pid, (int(fields[i]) + int(fields[i + 1])) / os.sysconf("SC_CLK_TCK")


def wait_for_worker(home: Path, timeout: float = 300.0) -> bool:
    """Wait until the release worker of ``home`` is ready (the first warm run started it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (home / "sdc-worker.json").exists():
            return True
        time.sleep(0.2)
    return False


# the measured command runs in a wrapper that execs nothing: it waits for the real command and
# prints the real command's own ru_maxrss (os.wait4), so the wrapper's memory is not counted
_WRAP = textwrap.dedent("""\
    import os, subprocess, sys
    p = subprocess.Popen(sys.argv[1:])
    _, status, ru = os.wait4(p.pid, 0)
    print(f"__peak_rss_mb={ru.ru_maxrss / 1024:.0f}", file=sys.stderr)
    print(f"__cpu_s={ru.ru_utime + ru.ru_stime:.3f}", file=sys.stderr)
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


def sdc_release(config: Path, home: Path | None = None, reuse: bool = False,
                worker: bool = True) -> dict:
    """One ``sdc release CONFIG --force --timings`` in a child process. ``home``: its
    PREFECT_HOME; ``reuse``: with the reused local server (else ``--no-reuse``, the temporary
    API; older versions without the option: their default); ``worker`` False: never through
    the pre-imported release worker (``SDC_WORKER=0``: the API only). ``cli_cpu`` is the
    command's CPU seconds (the thin client's when a worker ran it), ``run_cpu`` the run's
    (in-process: ``--timings``' ``cpu_seconds``, taken before the interpreter's exit; the
    worker's child: its whole CPU, exit included), ``server_cpu`` the local server's during
    the run."""
    sdc = str(Path(sys.executable).with_name("sdc"))
    env = {**os.environ, "COLUMNS": "200", "SDC_WORKER": "1" if worker else "0"}
    env.pop("PREFECT_API_URL", None)
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "600")  # a busy machine
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    helptext = subprocess.run([sdc, "release", "--help"], capture_output=True, text=True,
                              env=env).stdout
    extra = ["--timings"] if "--timings" in helptext else []  # older versions: wall only
    if "--no-reuse" in helptext:
        if reuse:
            env.setdefault("SDC_SERVER_IDLE_MINUTES", "30")
        else:
            extra.append("--no-reuse")
    server = process_cpu(home, "server")
    via = process_cpu(home, "worker", children=True) if worker and reuse else None
    wall, rss, out = run_child([sys.executable, "-c", _WRAP, sdc, "release", str(config),
                                "--force", *extra], env=env)
    cli_cpu = _wrapped("cpu_s")
    after = process_cpu(home, "server")
    via_after = process_cpu(home, "worker", children=True) if via is not None else None
    timings = {}
    for line in out.splitlines():
        if line.startswith("timings "):
            timings = json.loads(line.removeprefix("timings "))
    server_cpu = (after[1] - server[1] if server is not None and after is not None
                  and after[0] == server[0] else float("nan"))
    run_cpu = timings.get("cpu_seconds", float("nan"))
    if via is not None and via_after is not None and via_after[0] == via[0]:
        run_cpu = via_after[1] - via[1]  # the worker's child, its exit included
        with contextlib.suppress(OSError, StopIteration, ValueError):  # its peak, as logged
            line = next(x for x in reversed((home / "sdc-worker.log").read_text().splitlines())
                        if " exited with " in x)
            rss = float(line.split(" peak ")[1].split(" MB")[0])
    return {"seconds": wall, "peak_rss_mb": rss, "timings": timings, "load": load(),
            "cli_cpu": cli_cpu, "run_cpu": run_cpu,
            "server_cpu": server_cpu, "worker": via is not None}


def migrate_home(home: Path, config: Path) -> float | None:
    """Create and migrate Prefect's database in a new PREFECT_HOME (a temporary API started
    and stopped; older versions: one discarded ``--no-reuse`` release), so that the cold run
    measures a cold start (no server, imports not cached by a worker), not the one-time
    migration of a new home (~6 CPU s, once per PREFECT_HOME and Prefect version), as the
    demo's first, discarded run does. Its wall seconds; None when the database exists."""
    if (home / "prefect.db").exists():
        return None
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    t0 = time.perf_counter()
    code = ("from flows.ephemeral import TemporaryAPI; a = TemporaryAPI.start(); "
            "a.wait(600); a.stop()")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True)
    if done.returncode != 0 or not (home / "prefect.db").exists():
        sdc_release(config, home, reuse=False)
    return time.perf_counter() - t0


def stop_server(home: Path) -> None:
    sdc = str(Path(sys.executable).with_name("sdc"))
    subprocess.run([sdc, "server", "stop"], env={**os.environ, "PREFECT_HOME": str(home)},
                   capture_output=True, text=True)


class Spinner:
    """One core kept busy (a child spinning in a loop) while in the ``with`` block."""

    def __enter__(self) -> Spinner:
        self.p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self.p.kill()
        self.p.wait()


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def _line(label: str, runs: list[dict]) -> str:
    walls = [r["seconds"] for r in runs]
    jobs = [r["timings"].get("job_seconds") or float("nan") for r in runs]
    loads = [r["load"] for r in runs]
    each = ", ".join(f"{w:.1f}" for w in walls)
    cpu = {k: _median([r.get(k, float("nan")) for r in runs])
           for k in ("cli_cpu", "run_cpu", "server_cpu")}
    return (f"  {label:<34} median {_median(walls):6.2f} s wall  job {_median(jobs):5.2f} s  "
            f"CPU s: command {cpu['cli_cpu']:5.2f}, run {cpu['run_cpu']:5.2f}, server "
            f"{cpu['server_cpu']:5.2f}  load {min(loads):.2f}-{max(loads):.2f}  [runs: {each}]")


def demo(work: Path, repeat: int, loaded: bool) -> None:
    """The demo cold / first / warm, idle and (``loaded``) with one core busy."""
    folder = work / "demo"
    folder.mkdir(exist_ok=True)
    src = ROOT / "configs" / "census_demo.yaml"
    text = src.read_text()
    text = text.replace("../data_samples/census_sample.csv",
                        str(ROOT / "data_samples" / "census_sample.csv"))
    text = text.replace("../secrets/census-demo.seed", str(folder / "census-demo.seed"))
    text = text.replace("../releases/census-demo", str(folder / "release"))
    cfg = folder / "census_demo.yaml"
    cfg.write_text(text)
    for name in ("idle", "loaded") if loaded else ("idle",):
        home = folder / f"home-{name}"
        with Spinner() if name == "loaded" else contextlib.nullcontext():
            print(f"\ndemo (59,033 records), {name} machine"
                  f"{' (one core busy)' if name == 'loaded' else ''}; load {load():.2f}")
            try:
                sdc_release(cfg, home, reuse=False)  # migrate the home: cold = the API only
                cold = [sdc_release(cfg, home, reuse=False) for _ in range(repeat)]
                print(_line("cold (--no-reuse, temporary API)", cold), flush=True)
                stop_server(home)
                first = [sdc_release(cfg, home, reuse=True)]
                print(_line("first (starts the local server)", first), flush=True)
                warm = [sdc_release(cfg, home, reuse=True, worker=False) for _ in range(repeat)]
                print(_line("warm, API only (SDC_WORKER=0)", warm), flush=True)
                if wait_for_worker(home):
                    warm = [sdc_release(cfg, home, reuse=True) for _ in range(repeat)]
                    print(_line("warm, release worker", warm), flush=True)
                else:
                    print("  (no release worker started)")
            finally:
                stop_server(home)


def wide_reports(n: int = 1_000_000, n_keys: int = 6, levels: int = 500) -> dict:
    """Seconds of release_frame and of batch_reports with n_keys keys of ``levels`` levels
    (6 x 500: ~1.6e16 possible cells, about one record a cell at 1M, within the one 62-bit
    cell code; 10 x 500 is refused since the cells got that code)."""
    code = textwrap.dedent(f"""\
        import resource, time
        import numpy as np, pandas as pd
        import sdc
        from sdc.pipeline.report_parts import batch_reports
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
        rep = batch_reports(res, cfg, seed=1)
        t2 = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"cells={{res.cells.n_cells}} release={{t1 - t0:.2f}} reports={{t2 - t1:.2f}} "
              f"peak={{peak:.0f}}")
        """)
    wall, rss, out = measured([sys.executable, "-c", code])
    fields = dict(x.split("=") for x in out.split())
    return {"n": n, "keys": n_keys, "levels": levels, "wall": wall, "peak_rss_mb": rss,
            "load": load(), **fields}


# the release job's stages without Prefect: the flow's four task functions in one process,
# each step's wall and CPU seconds (process_time: every thread of the process; thread_time: the
# main thread's, the job's critical path on an idle machine when the other threads keep up)
# from the same marks the flow's --timings use; CPU seconds compare on a shared machine where
# walls do not
_STAGES = textwrap.dedent("""\
    import logging, os, resource, sys, time
    sys.path.insert(0, sys.argv[2])
    import flows.release as fr
    import sdc
    from sdc.release.job import resolve_engine
    fr.get_run_logger = lambda: logging.getLogger("bench")
    fr.warm_imports()
    marks = []
    def mark(step):
        marks.append((step.split(" (")[0], time.perf_counter(), time.process_time(),
                      time.thread_time()))
    fr._engine_step = mark
    cfg = sys.argv[1]
    mark("load")
    spec = resolve_engine(sdc.load_config(cfg), None)
    job = fr.load_task.fn(cfg, True, spec.kind, False, False, None)
    stage = fr._stage_folder(job.config)
    res = fr.release_task.fn(job, spec, stage / "public", stage / "internal" / "records.parquet")
    mark("reports")
    reports, _ = fr.report_task.fn(job, res)
    mark("write")
    fr.write_task.fn(job, res, True, spec.kind, reports, None, False)
    mark("end")
    import shutil
    shutil.rmtree(stage, ignore_errors=True)
    for (s, w, c, m), (_, w2, c2, m2) in zip(marks, marks[1:]):
        print(f"{s}|{w2 - w:.3f}|{c2 - c:.3f}|{m2 - m:.3f}")
    print(f"total|{marks[-1][1] - marks[0][1]:.3f}|{marks[-1][2] - marks[0][2]:.3f}|"
          f"{marks[-1][3] - marks[0][3]:.3f}")
    print(f"peak|{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}|0|0")
    os._exit(0)
    """)


def stages(config: Path) -> list[tuple[str, float, float, float]]:
    """(step, wall s, CPU s, main thread's CPU s) of the release job run without Prefect, in
    a child process."""
    _, _, out = measured([sys.executable, "-c", _STAGES, str(config), str(ROOT)])
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 3]
    return [(a, float(b), float(c), float(d)) for a, b, c, d in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="*", default=[1_000_000, 5_000_000])
    ap.add_argument("--workdir", type=Path, default=None, help="keep the files here")
    ap.add_argument("--no-wide", action="store_true", help="skip the 6 x 500 report case")
    ap.add_argument("--no-demo", action="store_true", help="skip the demo runs")
    ap.add_argument("--no-loaded", action="store_true", help="skip the one-core-busy runs")
    ap.add_argument("--repeat", type=int, default=3, help="runs per demo figure (median)")
    ap.add_argument("--design", nargs="+", default=["uniform"], choices=list(DESIGNS),
                    help="the N-record cases under each of these transition designs (risk."
                         "destinations / risk.weighted on the same file; default uniform)")
    ap.add_argument("--stages", action="store_true",
                    help="for each N only the job's stages without Prefect: wall and CPU "
                         "seconds per step, min of --repeat runs (compare CPU on a busy machine)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sdc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; load average at start {load():.2f} ({os.cpu_count()} cores)")
    try:
        if not args.no_demo:
            demo(work, args.repeat, not args.no_loaded)
        for n in args.n:
            folder = work / f"n{n}"
            folder.mkdir(exist_ok=True)
            data = folder / "input.parquet"
            if not data.exists():
                make_frame(n).to_parquet(data, index=False)
            for design in args.design:
                # another design in its own folder: not a later release of the same series
                out = folder / ("release" if design == "uniform" else f"{design}/release")
                cfg = write_config(folder, data, out, design)
                case = f"N = {n:,}" + ("" if design == "uniform" else f", design {design}")
                if args.stages:
                    runs = [stages(cfg) for _ in range(args.repeat)]
                    print(f"\n{case}: the job's stages without Prefect, min of {len(runs)} "
                          f"run(s) (wall s / CPU s / main thread's CPU s), load {load():.2f}")
                    for i, (step, *_) in enumerate(runs[0]):
                        w, c, m = (min(r[i][j] for r in runs) for j in (1, 2, 3))
                        print(f"  {step:<40}" + (f"{w:7.0f} MB" if step == "peak" else
                                                   f"{w:7.2f} s wall {c:7.2f} s CPU "
                                                   f"{m:7.2f} s main"))
                    continue
                home = folder / "prefect-home"
                migrated = migrate_home(home, cfg)
                f = floor(data, folder)
                try:
                    r = sdc_release(cfg, home, reuse=False)
                    sdc_release(cfg, home, reuse=True)  # starts the reused server (+ the worker)
                    w = sdc_release(cfg, home, reuse=True, worker=False)
                    ww = sdc_release(cfg, home, reuse=True) if wait_for_worker(home) else None
                finally:
                    stop_server(home)
                t = r["timings"]
                print(f"\n{case}")
                if migrated is not None:
                    print(f"  (a new PREFECT_HOME: its database created and migrated first, "
                          f"{migrated:.1f} s, not part of the cold run)")
                print(f"  floor (read + groupby.size + write)   {f['seconds']:7.2f} s  "
                      f"{f['peak_rss_mb']:6.0f} MB  load {f['load']:.2f}   [{f['detail']}]")
                for label, x in (("cold (temporary API)", r), ("warm, API only", w),
                                 ("warm, release worker", ww)):
                    if x is None:
                        continue
                    job = x["timings"].get("job_seconds") or 0.0
                    print(f"  sdc release, {label:<24}{x['seconds']:7.2f} s  "
                          f"{x['peak_rss_mb']:6.0f} MB  load {x['load']:.2f}   "
                          f"ratio {x['seconds'] / f['seconds']:.1f}x floor; job {job:.2f} s "
                          f"({job / f['seconds']:.1f}x floor), CPU s: command {x['cli_cpu']:.2f}, "
                          f"run {x['run_cpu']:.2f}, server {x['server_cpu']:.2f}")
                if t:
                    job = t.get("job_seconds", 0) or 0
                    print(f"    cold start-up (all but the job)     {r['seconds'] - job:7.2f} s"
                          f"  of which pre-flight {t.get('preflight_seconds', 0):.2f} s, Prefect "
                          f"start-up + shutdown {t.get('prefect_seconds', 0):.2f} s (API server peak "
                          f"{t.get('api_server_peak_rss_mb', float('nan')):.0f} MB)")
                    for name, sec in t.get("tasks", {}).items():
                        print(f"      {name:<34}{sec:7.2f} s")
        if not args.no_wide:
            w = wide_reports()
            print(f"\nreports with {w['keys']} keys x {w['levels']} levels, N = {w['n']:,}: "
                  f"cells {w['cells']}, release_frame {w['release']} s, batch_reports "
                  f"{w['reports']} s, peak {w['peak_rss_mb']:.0f} MB, load {w['load']:.2f}")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
