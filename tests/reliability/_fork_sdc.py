"""A pre-imported ``sdc`` for the crash tests (``python -m tests.reliability._fork_sdc``).

Each killed ``sdc release`` of tests/reliability/test_crash.py used to be a new process that
spent ~3 CPU s importing the CLI, Prefect, pandas and pyarrow before its work (8 of them). This
process imports them once and forks one child per request; the child runs the ``sdc``
console script's entry point (:func:`sdc.cli.entry.main`, as ``.venv/bin/sdc`` does) with the
request's argv, environment and working folder, in a session of its own (the test SIGKILLs its
process group, as it did the subprocess's), stdout and stderr into the request's log file.
Prefect read its settings at import here, from the environment this process was started with
(the session's ``PREFECT_API_URL``), which the requests share; the crash-test hooks
(``SDC_CHECKPOINT_DIR``, ``SDC_PAUSE_AT``) are read when a checkpoint is reached, in the child.

Protocol, one JSON line each way: request ``{"argv": [...], "env": {...}, "cwd": ..., "log":
...}``; answers ``{"pid": N}`` when the child started, then ``{"exit": CODE}`` when it ended
(``-9``: SIGKILLed). One run at a time.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn


def _child(req: dict[str, Any]) -> NoReturn:
    """Run ``sdc ARGV`` as the console script would, then exit with its code."""
    code = 1
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

        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (exiting anyway)
                pass
        os._exit(code)


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
