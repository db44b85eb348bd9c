"""``sdc approve`` / ``sdc reject``: publish or discard a release staged for review, on the
staged folder or through the flow run paused for it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from sdc.cli.common import JsonOpt, console, friendly_errors

AsOpt = Annotated[str, typer.Option("--as", help="The reviewer's name (one of the config's "
                                    "review.approvers, if it lists any).", show_default=False)]
CommentOpt = Annotated[str | None, typer.Option("--comment", help="Recorded with the decision.",
                                                show_default=False)]


RunOrDirArg = Annotated[str, typer.Argument(
    help="A release folder (or its .staged folder), or the id of a flow run paused for review.",
    show_default=False, metavar="RUN|RELEASE_DIR")]


def _run_id_of(target: str) -> tuple[str | None, bool]:
    """(the flow run id, whether it was given as the target): a run id given, else the one
    the staged ``internal/review.json`` records (None: none)."""
    import json
    import uuid

    from sdc.publish.review import REVIEW_FILE, target_of

    if not Path(target).exists():
        try:
            return str(uuid.UUID(target)), True
        except ValueError:
            pass
    review = target_of(Path(target))[1] / "internal" / REVIEW_FILE
    try:
        run_id = json.loads(review.read_text(encoding="utf-8")).get("flow_run_id")
    except (OSError, ValueError, AttributeError):
        run_id = None
    return (str(run_id) if run_id else None), False


def _send_to_paused_run(target: str, decision: str, name: str, comment: str | None,
                        quiet: bool = False, discard_extra_files: bool = False
                        ) -> tuple[str | None, Any]:
    """When the staged release (or the run id given) belongs to a flow run paused for review
    on a reachable Prefect API whose waiting process lives, check the reviewer, send it the
    decision, wait until the run applied it and say so (unless ``quiet``); returns ``(run
    id, None)``. ``(None, orphan)`` when the decision is for the files (``orphan``: a paused
    run whose process is gone, to end once the files are decided). A run id given that no
    live paused run answers is refused (:class:`ReviewError`, exit 2) with the next step;
    nothing is sent to a run that could not apply it (flows.review)."""
    from sdc.publish.review import ReviewError, check_reviewer, target_of

    run_id, given_run = _run_id_of(target)
    if run_id is None:
        return None, None
    from flows.run import prefect_api_configured, use_local_server

    use_local_server()
    if not prefect_api_configured():
        if given_run:
            raise ReviewError(f"flow run {run_id}: a flow run id needs the Prefect server it "
                              "runs on; set PREFECT_API_URL (or start `sdc server start`), or "
                              f"{decision} the staged release folder: `sdc {decision} "
                              "RELEASE_DIR --as NAME`")
        return None, None
    from flows.review import await_outcome, paused_run, send_decision

    run = paused_run(run_id)
    folder = run.staged_dir or "RELEASE_DIR.staged"
    if given_run and not run.paused:
        raise ReviewError(f"flow run {run_id}: {run.problem}; nothing was sent. If its release "
                          f"is still staged, {decision} the folder: `sdc {decision} "
                          "RELEASE_DIR --as NAME` (`sdc audit RELEASE_DIR.staged` shows it)")
    if given_run and run.problem is not None:
        raise ReviewError(f"flow run {run_id} is paused for review, but {run.problem}; nothing "
                          f"was sent. {decision.capitalize()} the staged release on its "
                          f"folder instead: `sdc {decision} {folder} --as {name or 'NAME'}` "
                          "(the paused run is then cancelled), or restart `sdc schedule` and "
                          "let the next scheduled run stage a new release")
    if not run.live:
        return None, (run if run.paused else None)
    staged = check_reviewer(Path(run.staged_dir) if run.staged_dir and given_run
                            else target_of(Path(target))[1], name, decision)
    send_decision(run_id, decision, name, comment, discard_extra_files=discard_extra_files)
    outcome, state = await_outcome(run)
    if outcome == "refused":
        raise ReviewError(f"the paused flow run {run_id} refused '{decision}' by {name} (its "
                          "log in the Prefect UI says why) and waits for another decision; "
                          f"the release stays staged in {staged}")
    if outcome == "failed":
        raise ReviewError(f"the flow run {run_id} ended {state} after '{decision}' by {name}; "
                          f"see its log. `sdc audit {staged}` shows what is staged, if "
                          "anything")
    if not quiet:
        done = ("approved and published it" if decision == "approve" else
                "rejected it (the staged release was deleted)")
        if outcome == "waiting":
            done = ("has not finished applying it yet (it polls every 5 s); its log in the "
                    "Prefect UI shows the outcome")
        console.print(f"'{decision}' by {escape(name)} went to the paused flow run {run_id}, "
                      f"which {done}", markup=False)
    return run_id, None


def _decide(command: str, target: str, name: str, comment: str | None, as_json: bool,
            discard_extra_files: bool = False) -> None:
    """``sdc approve`` / ``sdc reject``: to the paused flow run when one waits for it, else on
    the staged folder; a JSON document on stdout under ``--json``."""
    decision = "approve" if command == "approve" else "reject"
    with friendly_errors(command if as_json else None):
        run_id, orphan = _send_to_paused_run(target, decision, name, comment, quiet=as_json,
                                             discard_extra_files=discard_extra_files)
        d = None
        if run_id is None:
            from sdc.publish import review

            d = (review.approve(Path(target), name, comment,
                                discard_extra_files=discard_extra_files)
                 if command == "approve" else review.reject(Path(target), name, comment))
            if orphan is not None:  # its process is gone: end it, it would wait for ever
                from flows.review import end_orphaned_run

                end_orphaned_run(orphan, f"{'approved' if command == 'approve' else 'rejected'} by {name} on the staged folder (`sdc "
                                 f"{command} DIR`) after the process of this run had exited")
        if as_json:
            from sdc.cli.json_output import decision_document, print_document

            print_document(decision_document(command, d, name=name, comment=comment,
                                             flow_run_id=run_id))
            return
        if d is None:
            return
        if command == "approve":
            console.print(f"[green]approved[/green] by {escape(d.name)} at {d.at}; published "
                          f"{escape(str(d.release_dir))} (manifest SHA-256 "
                          f"{d.manifest_sha256})")
        else:
            console.print(f"rejected by {escape(d.name)} at {d.at}: deleted "
                          f"{escape(str(d.staged_dir))}; nothing was published", markup=True)


def approve(target: RunOrDirArg, name: AsOpt, comment: CommentOpt = None,
            as_json: JsonOpt = False,
            discard_extra_files: Annotated[bool, typer.Option(
                "--discard-extra-files",
                help="When the approval replaces an existing release: also delete files staff "
                     "put into it (an approval, a signature). Without it the approval refuses "
                     "and lists them.")] = False) -> None:
    """Publish a release staged for review (its folder, or the paused flow run's id).

    RELEASE_DIR or RELEASE_DIR.staged, or the paused flow run's id: the staged files are checked
    against what was staged, the approval recorded in audit.json."""
    _decide("approve", target, name, comment, as_json, discard_extra_files)


def reject(target: RunOrDirArg, name: AsOpt, comment: CommentOpt = None,
           as_json: JsonOpt = False) -> None:
    """Discard a release staged for review (its staged folder is deleted)."""
    _decide("reject", target, name, comment, as_json)
