"""Where a streaming release's CPU goes, thread by thread.

Runs :func:`sdc.executors.streaming.stream_release` (and the reports) on bench_scale's synthetic
file of N records with a cProfile of ``time.thread_time`` in every thread (the main thread and
each thread started after this script's start: batch workers, read-ahead, dependence check,
intruder), so every function's figure is CPU seconds of the thread that ran it, not wall time
while it waited for the GIL or for another thread. Prints the wall and CPU seconds of each step,
the CPU seconds of each thread, and the functions with the most CPU (cumulative and own).

cProfile adds ~10% to Python-heavy code and nothing to numpy's or Arrow's own loops; compare
two versions of the code with the same script (a ``git worktree`` of the old commit first on
``PYTHONPATH``), several runs each, alternated. py-spy's samples of non-idle threads overstated
some steps on this code by 10x (docs/PERFORMANCE.md); ``perf record -g`` shows the C side.

    python benchmarks/profile_threads.py --n 10000000 --top 40
    python benchmarks/profile_threads.py --input big.parquet --save prof.out
    python benchmarks/profile_threads.py --n 10000000 --spill   # 100M's path at 10M
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import generate, make_config  # noqa: E402

_profiles: list[tuple[str, cProfile.Profile, threading.Thread]] = []
_run = threading.Thread.run


def _profiled_run(self: threading.Thread) -> None:
    prof = cProfile.Profile(time.thread_time)
    _profiles.append((self.name, prof, self))
    prof.enable()
    try:
        _run(self)
    finally:
        prof.disable()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="records of the synthetic file")
    ap.add_argument("--input", default=None, help="an existing file of bench_scale's layout")
    ap.add_argument("--top", type=int, default=40, help="functions listed")
    ap.add_argument("--save", default=None, help="write the merged pstats here")
    ap.add_argument("--dir", default=None, help="work folder")
    ap.add_argument("--spill", action="store_true",
                    help="the path of files over KEEP_RECORDS (16.7M): nothing kept per record "
                         "between the passes, the records file from its spilled buckets")
    args = ap.parse_args()
    if args.spill:
        import sdc.pipeline.release as release

        release.KEEP_RECORDS = 0
    work = Path(tempfile.mkdtemp(prefix="sdc-profile-", dir=args.dir))
    try:
        path = Path(args.input) if args.input else work / "input.parquet"
        if not args.input:
            generate(path, args.n)
        cfg = make_config(path, work / "release")
        from sdc.executors.streaming import stream_release
        from sdc.pipeline.report_parts import batch_reports

        threading.Thread.run = _profiled_run  # type: ignore[method-assign]
        marks: list[tuple[str, float, float]] = []
        main_prof = cProfile.Profile(time.thread_time)
        _profiles.append(("MainThread", main_prof, threading.main_thread()))
        t0, c0 = time.perf_counter(), time.process_time()
        main_prof.enable()
        res = stream_release(cfg, 7, work / "public", tmp_dir=work,
                             progress=lambda s: marks.append((s, time.perf_counter(),
                                                              time.process_time())),
                             records_path=work / "records.parquet")
        batch_reports(res, cfg, seed=7)
        main_prof.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        threading.Thread.run = _run  # type: ignore[method-assign]
        print(f"wall {wall:.2f} s, CPU {cpu:.2f} s (all threads)")
        ends = [(m[1], m[2]) for m in marks[1:]] + [(t0 + wall, c0 + cpu)]
        for (step, t, c), (t_end, c_end) in zip(marks, ends, strict=True):
            print(f"  {step.split(' (')[0]:<42} {t_end - t:6.2f} s wall {c_end - c:6.2f} CPU s")
        merged: pstats.Stats | None = None
        by_thread: dict[str, float] = {}
        live = [name for name, _, th in _profiles
                if th is not threading.main_thread() and th.is_alive()]
        for name, prof, th in _profiles:
            if th is not threading.main_thread() and th.is_alive():
                # a pool that outlives the run (sdc-discard): its pending call would be
                # timed with this thread's clock (seconds of another thread), so left out
                continue
            stats = pstats.Stats(prof)
            key = name.rstrip("0123456789_")
            by_thread[key] = by_thread.get(key, 0.0) + sum(v[2] for v in stats.stats.values())
            if merged is None:
                merged = stats
            else:
                merged.add(stats)
        print("CPU seconds by thread (own time of its functions)"
              + (f"; still running, not counted: {', '.join(sorted(set(live)))}" if live else "")
              + ":")
        for name, sec in sorted(by_thread.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<30} {sec:6.2f}")
        if merged is not None:
            if args.save:
                merged.dump_stats(args.save)
            merged.sort_stats("cumulative").print_stats(args.top)
            merged.sort_stats("tottime").print_stats(args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
