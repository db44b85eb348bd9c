"""The review gate inside Prefect: a staged release waits in a paused flow run for a decision.

When the release flow runs on a Prefect server that outlives it (``sdc schedule``'s
deployments, or ``sdc release --wait-for-review`` against ``PREFECT_API_URL`` / ``sdc server
start``), a release staged for review (:mod:`sdc.publish.review`) is not left behind: the flow
pauses (``pause_flow_run``) with a typed input, :class:`ReviewDecision` (approve or reject, the
reviewer's name, a comment), which the Prefect UI shows as a form on the paused run. ``sdc
approve`` / ``sdc reject`` send the same input to the paused run (by its id, or the id recorded
in the staged ``internal/review.json``). The flow then approves (publishes) or rejects (deletes)
the staged release itself, exactly as the file-based commands do; a decision it refuses (files
changed) is logged and the run pauses again. A run whose pause times out fails and leaves the
staged release for ``sdc approve DIR`` by hand.

**A decision reaches a live run or is refused.** A paused run is only a row on the server: the
process that paused it (a subprocess of ``sdc schedule``) polls for the decision and applies
it. When that process is gone (``sdc schedule`` stopped or restarted), a decision sent to the
run is applied by nobody and leaves it "Running" for ever. So the waiting process records
who it is on the run (the flow-run input :data:`WAITER_KEY`: host, pid, process start time,
boot id, the staged folder), and :func:`paused_run` reports a run whose waiter is not that
live process on this machine; ``sdc approve RUN_ID`` then refuses (exit 2) and names the next
step, and ``sdc approve DIR`` decides on the files and ends the orphaned run
(:func:`end_orphaned_run`). The approver list is checked before anything is sent.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from prefect.input import RunInput

__all__ = ["WAITER_KEY", "PausedRun", "ReviewDecision", "await_outcome", "end_orphaned_run",
           "paused_run", "paused_run_of", "send_decision", "wait_for_decision"]

#: the flow-run input key under which a paused run's waiting process records who it is
WAITER_KEY = "sdc-review-waiter"


class ReviewDecision(RunInput):
    """The reviewer's decision on a staged release."""

    decision: Literal["approve", "reject"]
    name: str
    comment: str = ""
    discard_extra_files: bool = False


def _waiter_record(staged: Path) -> dict[str, Any]:
    """Who waits: this process (pid, start time, boot id, host) and the staged folder."""
    from flows.server import boot_id, process_start

    ident = process_start(os.getpid())
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "start_ticks": ident[0] if ident else None, "boot_id": boot_id(),
            "staged_dir": str(Path(staged).absolute())}


def _register_waiter(staged: Path) -> None:
    """Record the waiting process on the current flow run (see the module docstring)."""
    from prefect.input import create_flow_run_input, delete_flow_run_input

    record = _waiter_record(staged)
    try:
        delete_flow_run_input(WAITER_KEY)
    except Exception:  # none yet
        pass
    create_flow_run_input(WAITER_KEY, record)


def wait_for_decision(staged: Path, description: str, *, timeout: int = 7 * 24 * 3600,
                      poll_interval: int = 5, attempts: int = 20) -> dict[str, Any]:
    """Pause the current flow run until a valid decision arrives; apply it. Returns
    ``{"status": "approved"|"rejected", "name", "comment", "release_dir"}``."""
    from prefect import get_run_logger
    from prefect.flow_runs import pause_flow_run

    from sdc.publish.review import ReviewError, approve, reject

    logger = get_run_logger()
    _register_waiter(staged)
    for i in range(attempts):
        d = pause_flow_run(
            wait_for_input=ReviewDecision.with_initial_data(description=description,
                                                            decision="approve", name=""),
            timeout=timeout, poll_interval=poll_interval, key=f"review-{i}")
        try:
            if d.decision == "approve":
                done = approve(staged, d.name, d.comment or None,
                               discard_extra_files=d.discard_extra_files)
                logger.info("release approved by %s and published to %s", d.name,
                            done.release_dir)
                return {"status": "approved", "name": d.name, "comment": d.comment,
                        "release_dir": str(done.release_dir)}
            done = reject(staged, d.name, d.comment or None)
            logger.warning("release rejected by %s; the staged folder was deleted", d.name)
            return {"status": "rejected", "name": d.name, "comment": d.comment,
                    "release_dir": None}
        except (ReviewError, OSError, ValueError) as e:
            logger.error("decision of %r refused: %s; waiting for another decision", d.name, e)
    raise RuntimeError(f"{attempts} review decisions refused; the staged release stays at "
                       f"{staged}")


@dataclass
class PausedRun:
    """A flow run as ``sdc approve`` finds it: ``paused`` (on the configured server) and, if
    so, whether the process waiting in it is alive (``problem`` None) or why a decision sent
    to it would reach nobody."""

    run_id: str
    paused: bool
    state_name: str = ""
    staged_dir: str | None = None
    problem: str | None = None
    state_id: str | None = None

    @property
    def live(self) -> bool:
        return self.paused and self.problem is None


def _waiter_problem(record: Any) -> str | None:
    """Why the recorded waiting process is not alive on this machine (None: it is)."""
    from flows.server import boot_id, process_start

    if not isinstance(record, dict) or not record.get("pid"):
        return ("the run records no waiting process (paused by an older sdc): whether anything "
                "still waits in it cannot be told")
    pid, host = int(record["pid"]), record.get("host") or "?"
    if record.get("boot_id") != boot_id() or host != socket.gethostname():
        return (f"the process waiting in it (pid {pid} on {host}) is not on this machine, or "
                "the machine restarted since")
    now = process_start(pid)
    if now is None or now[1] in ("Z", "X") or (record.get("start_ticks") is not None
                                               and now[0] != record["start_ticks"]):
        return (f"the process that waited in it (pid {pid}) has exited: `sdc schedule` was "
                "stopped or restarted, so nothing applies a decision sent to the run")
    return None


def paused_run(run_id: str | UUID) -> PausedRun:
    """The flow run on the configured API: paused or not, and whether its waiting process
    lives (:class:`PausedRun`)."""
    from prefect.client.orchestration import get_client
    from prefect.input import read_flow_run_input

    from flows.client import httpx_settings

    rid = str(run_id)
    try:
        with get_client(sync_client=True, httpx_settings=httpx_settings()) as client:
            run = client.read_flow_run(UUID(rid))
    except Exception:
        return PausedRun(rid, False, "", problem="no such flow run on the configured Prefect "
                         "server")
    state = run.state
    if state is None or not state.is_paused():
        return PausedRun(rid, False, state.name if state is not None else "",
                         problem=f"the run is {state.name if state else 'without a state'}, "
                         "not paused for review")
    try:
        record = read_flow_run_input(WAITER_KEY, flow_run_id=UUID(rid))
    except Exception:
        record = None
    staged = record.get("staged_dir") if isinstance(record, dict) else None
    return PausedRun(rid, True, state.name, staged, _waiter_problem(record), str(state.id))


def paused_run_of(run_id: str | UUID) -> bool:
    """The flow run exists on the configured API, is paused, and its waiting process lives."""
    return paused_run(run_id).live


def send_decision(run_id: str | UUID, decision: str, name: str, comment: str | None, *,
                  discard_extra_files: bool = False) -> None:
    """Resume the paused flow run with a :class:`ReviewDecision`."""
    from prefect.flow_runs import resume_flow_run

    resume_flow_run(UUID(str(run_id)), run_input={"decision": decision, "name": name,
                                                  "comment": comment or "",
                                                  "discard_extra_files": discard_extra_files})


def await_outcome(run: PausedRun, *, timeout: float = 120.0,
                  poll: float = 0.5) -> tuple[str, str]:
    """After :func:`send_decision`: wait until the run has applied the decision. Returns
    ``("done", state name)`` when the run finished (Completed: approved and published, or
    rejected), ``("refused", ...)`` when it paused again (it refused the decision: its log
    says why), ``("failed", state name)``, or ``("waiting", ...)`` after ``timeout`` s."""
    from prefect.client.orchestration import get_client

    from flows.client import httpx_settings

    deadline = time.monotonic() + timeout
    name = ""
    while time.monotonic() < deadline:
        try:
            with get_client(sync_client=True, httpx_settings=httpx_settings()) as client:
                state = client.read_flow_run(UUID(run.run_id)).state
        except Exception:
            state = None
        if state is not None:
            name = state.name
            if state.is_completed():
                return "done", name
            if state.is_final():
                return "failed", f"{name}: {state.message or ''}".rstrip(": ")
            if state.is_paused() and str(state.id) != run.state_id:
                return "refused", name
        time.sleep(poll)
    return "waiting", name


def end_orphaned_run(run: PausedRun, message: str) -> None:
    """Cancel a paused run whose waiting process is gone, after its staged release was decided
    on the files (``sdc approve DIR``): it is then not left paused (or "Running") for ever."""
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    from flows.client import httpx_settings

    try:
        with get_client(sync_client=True, httpx_settings=httpx_settings()) as client:
            client.set_flow_run_state(UUID(run.run_id), Cancelled(message=message), force=True)
    except Exception:  # the decision stands; the run's record stays as it was
        pass
