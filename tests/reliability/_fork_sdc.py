"""A pre-imported ``sdc`` for the reliability tests (``python -m tests.reliability._fork_sdc``).

Each ``sdc release`` subprocess of the reliability tests (the killed runs of test_crash.py, the
Dask runs of test_dask_schedule.py) used to be a new process that spent ~3 CPU s importing the
CLI, Prefect, pandas and pyarrow before its work. This process imports them once and forks
one child per request; the child runs the ``sdc``
console script's entry point (:func:`sdc.cli.entry.main`, as ``.venv/bin/sdc`` does) with the
request's argv, environment and working folder, in a session of its own (the test SIGKILLs its
process group, as it did the subprocess's), stdout and stderr into the request's log file.
Prefect read its settings at import here, from the environment this process was started with
(the session's ``PREFECT_API_URL``), which the requests share; the test hooks
(``SDC_CHECKPOINT_DIR``, ``SDC_PAUSE_AT``, ``SDC_DASK_*``) are read when they are reached, in
the child (and by the Dask workers it starts, with its environment). The child ends through
the interpreter's usual shutdown (``atexit`` handlers, threads joined), as the process would.

:class:`ForkedSdc` is the tests' side (the session fixture ``forked_sdc``): ``start`` /
``exited`` for a run the test kills (test_crash.py), ``run`` for one it waits for with a time
limit, as ``subprocess.run`` (test_dask_schedule.py).

Protocol, one JSON line each way: request ``{"argv": [...], "env": {...}, "cwd": ..., "log":
...}``; answers ``{"pid": N}`` when the child started, then ``{"exit": CODE}`` when it ended
(``-9``: SIGKILLed). One run at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn


class ForkedSdc:
    """``sdc`` runs forked from one process that imported the CLI once
    (:mod:`tests.reliability._fork_sdc`): each killed run used to be a new ``sdc`` process
    paying ~3 CPU s of imports before its work. The child runs the console script's entry
    point in a session of its own, so the kill below is the same SIGKILL of its process group
    at the same checkpoint of the same code."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._fork_sdc"], env=env,
            cwd=Path(__file__).resolve().parents[2], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log,
            text=True)
        assert "ready" in self._answer(300), "the forking sdc did not start"

    def _answer(self, timeout: float) -> dict:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"the forking sdc did not answer in {timeout} s "
                                 f"(exit {self.proc.poll()})")
        return json.loads(line)

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        """Start ``sdc ARGV`` with ``env``; its pid (also its process group)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": os.getcwd(),
                                          "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        return int(self._answer(60)["pid"])

    def exited(self, timeout: float = 0) -> int | None:
        """The exit code of the run started last (None: still running after ``timeout``)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return int(self._answer(1)["exit"]) if ready else None

    def run(self, argv: list[str], env: dict[str, str], log: Path,
            timeout: float) -> subprocess.CompletedProcess[str]:
        """``sdc ARGV`` to its end, as ``subprocess.run`` would run it (its output in
        ``stdout``); killed after ``timeout`` seconds (``subprocess.TimeoutExpired``)."""
        pid = self.start(argv, env, log)
        code = self.exited(timeout)
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            self.exited(30)
            raise subprocess.TimeoutExpired(["sdc", *argv], timeout)
        return subprocess.CompletedProcess(["sdc", *argv], code,
                                           log.read_text(errors="replace"), "")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _child(req: dict[str, Any]) -> NoReturn:
    """Run ``sdc ARGV`` as the console script would and end as that process would: its
    ``SystemExit`` (or exception) unwinds to the interpreter, which exits through the usual
    shutdown (threads joined, ``atexit`` handlers, streams flushed)."""
    try:
        os.setsid()
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.argv = ["sdc", *req["argv"]]
        from sdc.cli.entry import main
    except BaseException:  # noqa: BLE001 (never back into the server's loop)
        os._exit(1)
    main()
    sys.exit(0)


#: what an ``sdc release`` imports (listed from a run's ``sys.modules``), imported once here; a
#: name missing after a refactoring is only imported by each child again, as before
PRELOAD = ("sdc.cli.entry", "sdc.cli.main", "sdc.cli.json_output", "flows.release", "flows.run",
           "flows.schedule", "flows.server", "flows.ephemeral", "sdc.pipeline.run",
           "sdc.executors.memory", "sdc.io.read", "sdc.io.write_stat", "sdc.publish.folder",
           "sdc.publish.review", "sdc.release.assemble", "sdc.release.uncertainty",
           "sdc.reports.build", "sdc.reports.html", "sdc.reports.charts", "sdc.series",
           "sdc.series.risk", "pandera", "fastapi", "graphviz", "jinja2", "prefect.engine",
           "prefect.flow_engine", "prefect.task_engine", "prefect.concurrency.sync")


def main() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass

    out = sys.stdout
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
