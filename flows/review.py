"""The review gate inside Prefect: a staged release waits in a paused flow run for a decision.

When the release flow runs on a Prefect server that outlives it (``sdc schedule``'s
deployments, or ``sdc release --wait-for-review`` against ``PREFECT_API_URL`` / ``sdc server
start``), a release staged for review (:mod:`sdc.publish.review`) is not left behind: the flow
pauses (``pause_flow_run``) with a typed input, :class:`ReviewDecision` (approve or reject, the
reviewer's name, a comment), which the Prefect UI shows as a form on the paused run. ``sdc
approve`` / ``sdc reject`` send the same input to the paused run (by its id, or the id recorded
in the staged ``internal/review.json``). The flow then approves (publishes) or rejects (deletes)
the staged release itself, exactly as the file-based commands do; a decision it refuses (a name
not among the approvers, files changed) is logged and the run pauses again. A run whose pause
times out fails and leaves the staged release for ``sdc approve DIR`` by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from prefect.input import RunInput

__all__ = ["ReviewDecision", "paused_run_of", "send_decision", "wait_for_decision"]


class ReviewDecision(RunInput):
    """The reviewer's decision on a staged release."""

    decision: Literal["approve", "reject"]
    name: str
    comment: str = ""
    discard_extra_files: bool = False


def wait_for_decision(staged: Path, description: str, *, timeout: int = 7 * 24 * 3600,
                      poll_interval: int = 5, attempts: int = 20) -> dict[str, Any]:
    """Pause the current flow run until a valid decision arrives; apply it. Returns
    ``{"status": "approved"|"rejected", "name", "comment", "release_dir"}``."""
    from prefect import get_run_logger
    from prefect.flow_runs import pause_flow_run

    from sdc.publish.review import ReviewError, approve, reject

    logger = get_run_logger()
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


def paused_run_of(run_id: str | UUID) -> bool:
    """The flow run exists on the configured API and is paused (awaiting a decision)."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(str(run_id)))
    except Exception:
        return False
    return bool(run.state is not None and run.state.is_paused())


def send_decision(run_id: str | UUID, decision: str, name: str, comment: str | None, *,
                  discard_extra_files: bool = False) -> None:
    """Resume the paused flow run with a :class:`ReviewDecision`."""
    from prefect.flow_runs import resume_flow_run

    resume_flow_run(UUID(str(run_id)), run_input={"decision": decision, "name": name,
                                                  "comment": comment or "",
                                                  "discard_extra_files": discard_extra_files})
