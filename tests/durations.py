"""The expected duration of the slow tests, for ordering the work of ``make test``'s xdist
workers (tests/conftest.py: the longest groups start first, so that no long test starts last
and runs alone while the other workers idle).

``tests/durations.json`` maps a test's node id to its seconds in a full run (tests under one
second are left out and count as :data:`DEFAULT_SECONDS`). It only orders the work: a stale or
missing entry makes the run slower, never different. To refresh it after a full run with
``--junitxml=run.xml``::

    python tests/durations.py run.xml

It is also a pytest plugin that records the CPU a test costs on a shared machine, where wall
time says little: ``SDC_TEST_CPU=cpu.jsonl pytest -p tests.durations ...`` writes one line per
test: its wall seconds, the CPU seconds of the test process and of its live descendants (the
Prefect server, Dask workers, subprocesses), apart the CPU of children that ended during the
test (``cpu_reaped``: their whole life's, so a server started tests earlier is charged to the
test during which it stops), and the test process's main thread split into on CPU /
waiting for a CPU (``runq``: the machine is busy) / sleeping (waiting on a server, a
subprocess, a timeout). ``python tests/durations.py --cpu cpu.jsonl`` sums it per folder;
``--timeline cpu.jsonl`` shows per minute how many cores the machine kept busy, and when each
xdist worker ran out of work (each line also holds the worker, its end time and the machine's
busy CPU seconds). ``python tests/durations.py --reap CMD ...`` runs CMD and prints the CPU
of it and of every descendant, the daemonized Prefect servers included (``/usr/bin/time``
misses them).
"""

from __future__ import annotations

import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")
#: the seconds of a test not in the table
DEFAULT_SECONDS = 0.5
#: tests shorter than this are left out of the table
MIN_SECONDS = 1.0


def load() -> dict[str, float]:
    """The table (empty when it is missing or unreadable)."""
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def from_junit(path: Path, root: Path) -> dict[str, float]:
    """Node id -> seconds (setup + call + teardown) of each test in a JUnit XML report."""
    out: dict[str, float] = {}
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        seconds = float(case.get("time") or 0)
        for cut in range(len(parts), 0, -1):  # the module is the longest prefix that is a file
            module = Path(*parts[:cut]).with_suffix(".py")
            if (root / module).is_file():
                nodeid = "::".join([module.as_posix(), *parts[cut:], case.get("name", "")])
                out[nodeid.split("@")[0]] = round(seconds, 1)
                break
    return out


def _cpu_seconds(pid: int, reaped: bool = False) -> float | None:
    """utime + stime of ``pid`` (/proc/PID/stat); ``reaped``: cutime + cstime instead, the CPU
    of its children that have ended and been waited for."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    part = fields[13:15] if reaped else fields[11:13]
    return sum(int(f) for f in part) / os.sysconf("SC_CLK_TCK")


def _process_tree(pid: int) -> dict[int, float]:
    """CPU seconds of ``pid`` and of every live descendant."""
    seen: dict[int, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        cpu = None if p in seen else _cpu_seconds(p)
        if cpu is None:
            continue
        seen[p] = cpu
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return seen


def _machine_busy() -> float:
    """CPU seconds the whole machine has been busy since boot (/proc/stat: all but idle and
    iowait), over every core: its growth between two tests' ends over their distance in
    time is how many cores the run kept busy."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _main_thread() -> tuple[float, float]:
    """Seconds the main thread ran and waited for a CPU (/proc/self/task/PID/schedstat)."""
    on, runq = Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()[:2]
    return int(on) / 1e9, int(runq) / 1e9


try:
    import pytest
except ImportError:  # the table tool without pytest
    pytest = None

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ANN201 (a pytest hook)
        """With ``SDC_TEST_CPU=FILE``: one JSON line per test (setup, call and teardown)."""
        out = os.environ.get("SDC_TEST_CPU")
        if not out:
            yield
            return
        me = os.getpid()
        t0, tree0, (on0, rq0) = time.monotonic(), _process_tree(me), _main_thread()
        reaped0 = _cpu_seconds(me, reaped=True) or 0.0
        yield
        t1, tree1, (on1, rq1) = time.monotonic(), _process_tree(me), _main_thread()
        # children that ended during the test: their whole lifetime's CPU (a server started
        # tests ago included), so kept apart from the test's own figures
        reaped = (_cpu_seconds(me, reaped=True) or 0.0) - reaped0
        record = {"id": item.nodeid.split("@")[0],
                  "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                  "end": time.time(), "machine_busy": _machine_busy(), "wall": t1 - t0,
                  "cpu": tree1.get(me, 0.0) - tree0.get(me, 0.0),
                  "cpu_children": sum(v - tree0.get(p, 0.0) for p, v in tree1.items()
                                      if p != me),
                  "cpu_reaped": reaped,
                  "on_cpu": on1 - on0, "runq": rq1 - rq0,
                  "sleep": (t1 - t0) - (on1 - on0) - (rq1 - rq0)}
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                 for k, v in record.items()}) + "\n")


def timeline(path: Path, step: float = 60.0) -> str:
    """Per minute of a run recorded with ``SDC_TEST_CPU`` (the lines' ``end`` and
    ``machine_busy``): the cores the machine kept busy, and per xdist worker its last test's
    end (the run's tail: workers that finished early left their core idle)."""
    recs = sorted((json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()),
                  key=lambda r: r.get("end", 0.0))
    recs = [r for r in recs if "end" in r]
    if not recs:
        return "no timeline (lines without 'end': recorded before it was added)"
    t0 = recs[0]["end"] - recs[0]["wall"]
    lines = ["minute  cores busy  tests ended"]
    mark, busy0, n = t0, None, 0
    for r in recs:
        if busy0 is None:
            busy0, mark = r["machine_busy"], r["end"]
        n += 1
        if r["end"] - mark >= step:
            lines.append(f"{(r['end'] - t0) / 60:6.1f}  {(r['machine_busy'] - busy0) / (r['end'] - mark):10.2f}"
                         f"  {n:11d}")
            mark, busy0, n = r["end"], r["machine_busy"], 0
    ends: dict[str, float] = {}
    for r in recs:
        ends[r.get("worker", "main")] = r["end"]
    lines.append("last test ended (minutes after the first began): " + ", ".join(
        f"{w} {(e - t0) / 60:.1f}" for w, e in sorted(ends.items())))
    return "\n".join(lines)


def cpu_summary(path: Path) -> str:
    """The ``SDC_TEST_CPU`` lines of ``path`` summed per folder, most CPU first."""
    sums: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        folder = "/".join(rec["id"].split("::")[0].split("/")[:2])
        row = sums.setdefault(folder, {"tests": 0})
        row["tests"] += 1
        for k in ("wall", "cpu", "cpu_children", "cpu_reaped", "on_cpu", "runq", "sleep"):
            row[k] = row.get(k, 0.0) + rec.get(k, 0.0)
    head = (f"{'folder':28} {'tests':>5} {'wall':>7} {'cpu':>7} {'children':>8} {'reaped':>7} "
            f"{'runq':>7} {'sleep':>7}")
    rows = [f"{f:28} {r['tests']:5d} {r['wall']:7.0f} {r['cpu']:7.0f} {r['cpu_children']:8.0f} "
            f"{r['cpu_reaped']:7.0f} {r['runq']:7.0f} {r['sleep']:7.0f}"
            for f, r in sorted(sums.items(), key=lambda kv: -kv[1]["cpu"] - kv[1]["cpu_children"])]
    return "\n".join([head, *rows])


def reap(argv: list[str]) -> int:
    """Run ``argv`` as a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``) and print the CPU
    of it and of every descendant, those that daemonize included: the Prefect servers a run
    starts (flows.server_process forks away from its parent), which ``/usr/bin/time`` and the
    shell never count, are reparented here and reaped when they stop. Returns argv's exit
    code."""
    import ctypes
    import resource
    import subprocess

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    code = subprocess.call(argv)
    deadline = time.monotonic() + 120  # a server still stopping after the run
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.2)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"CPU of the run and every descendant: user {ru.ru_utime:.1f} s + sys "
          f"{ru.ru_stime:.1f} s = {ru.ru_utime + ru.ru_stime:.1f} s", file=sys.stderr)
    return code


if __name__ == "__main__":
    if sys.argv[1] == "--reap":
        sys.exit(reap(sys.argv[2:]))
    if sys.argv[1] == "--cpu":
        print(cpu_summary(Path(sys.argv[2])))
        sys.exit(0)
    if sys.argv[1] == "--timeline":
        print(timeline(Path(sys.argv[2])))
        sys.exit(0)
    table = {k: v for k, v in sorted(from_junit(Path(sys.argv[1]), TABLE.parents[1]).items())
             if v >= MIN_SECONDS}
    TABLE.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{TABLE}: {len(table)} tests, {sum(table.values()):.0f} s")
