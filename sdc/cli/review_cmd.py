"""``sdc approve`` / ``sdc reject``: publish or discard a release staged for review, on the
staged folder or through the flow run paused for it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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


def _send_to_paused_run(target: str, decision: str, name: str, comment: str | None,
                        quiet: bool = False, discard_extra_files: bool = False) -> str | None:
    """When the staged release (or the run id given) belongs to a flow run paused for review
    on a reachable Prefect API, send it the decision (the run applies it), say so (unless
    ``quiet``) and return the run's id; None when there is no such run."""
    import json
    import uuid

    from sdc.publish.review import REVIEW_FILE, ReviewError, target_of

    run_id: str | None = None
    given_run = False
    if not Path(target).exists():
        try:
            run_id, given_run = str(uuid.UUID(target)), True
        except ValueError:
            run_id = None
    if run_id is None:
        review = target_of(Path(target))[1] / "internal" / REVIEW_FILE
        try:
            run_id = json.loads(review.read_text(encoding="utf-8")).get("flow_run_id")
        except (OSError, ValueError):
            run_id = None
    if run_id is None:
        return None
    from flows.run import prefect_api_configured, use_local_server

    use_local_server()
    if not prefect_api_configured():
        if given_run:
            raise ReviewError("a flow run id needs the Prefect server it runs on: set "
                              "PREFECT_API_URL (or start `sdc server start`)")
        return None
    from flows.review import paused_run_of, send_decision

    if not paused_run_of(run_id):
        if given_run:
            raise ReviewError(f"flow run {run_id} is not paused for review on the configured "
                              "Prefect server")
        return None
    send_decision(run_id, decision, name, comment, discard_extra_files=discard_extra_files)
    if not quiet:
        console.print(f"sent '{decision}' by {escape(name)} to the paused flow run {run_id}; "
                      "the run checks the decision and publishes or discards the release (see "
                      "its logs in the Prefect UI)")
    return run_id


def _decide(command: str, target: str, name: str, comment: str | None, as_json: bool,
            discard_extra_files: bool = False) -> None:
    """``sdc approve`` / ``sdc reject``: to the paused flow run when there is one, else on the
    staged folder; a JSON document on stdout under ``--json``."""
    decision = "approve" if command == "approve" else "reject"
    with friendly_errors(command if as_json else None):
        run_id = _send_to_paused_run(target, decision, name, comment, quiet=as_json,
                                     discard_extra_files=discard_extra_files)
        d = None
        if run_id is None:
            from sdc.publish import review

            d = (review.approve(Path(target), name, comment,
                                discard_extra_files=discard_extra_files)
                 if command == "approve" else review.reject(Path(target), name, comment))
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
