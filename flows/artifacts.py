"""The release flow's record in Prefect: the flow run's name and tags (which job a run is), the
artifacts of a release (summary, PRB table, links; the review note of a staged release), and
the state name of a run that staged its release for review. Aggregates only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import get_run_logger
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

from flows.summary import artifact_key, blocks_table, summary_markdown
from sdc.config.model import ReleaseConfig

__all__ = ["AWAITING_REVIEW", "current_run_id", "job_name", "name_run", "publish_artifacts",
           "run_name"]

def publish_artifacts(summary: dict[str, Any], blocks: pd.DataFrame) -> None:
    name = summary["name"]
    rev = summary.get("review")
    if rev is not None:  # what the reviewers look at: the summary above, the report, the hash
        staged = Path(rev["staged_dir"])
        review = json.loads((staged / "internal" / "review.json").read_text(encoding="utf-8"))
        report = staged / "internal" / "report.html"
        who = ", ".join(rev["approvers"]) or "any named reviewer"
        create_markdown_artifact(
            f"# Release `{name}` awaits review\n\nStaged (owner-only) in `{staged}`; publishes "
            f"to `{rev['release_dir']}` when approved by {who}.\n\n"
            f"- report: `{report}`\n- manifest SHA-256 of every file: "
            f"`{review['manifest_sha256']}`\n\nApprove: `sdc approve {staged} --as NAME "
            f"[--comment TEXT]`; reject: `sdc reject {staged} --as NAME`.\n",
            key=artifact_key("release-review", name),
            description=f"Release {name}: review and approval")
        if report.is_file():
            create_link_artifact(report.resolve().as_uri(), link_text=str(report),
                                 key=artifact_key("release-report", name),
                                 description=f"Risk and utility report of {name} (internal)")
    create_markdown_artifact(summary_markdown(summary), key=artifact_key("release-summary", name),
                             description=f"Release {name}: certificate vs xi")
    create_table_artifact(blocks_table(blocks), key=artifact_key("release-prbs", name),
                          description=f"Post-randomization blocks of {name} (no record data)")
    if summary["release_dir"]:
        url = Path(summary["release_dir"]).resolve().as_uri()
        create_link_artifact(url, link_text=summary["release_dir"],
                             key=artifact_key("release-folder", name),
                             description=f"Release folder of {name}")


def run_name() -> str:
    """The flow run's name, before its config is read: the release's name and config file
    when ``sdc release`` read the config (``prefetched``), else the config file's name (the
    run is renamed once the load task read it: :func:`name_run`)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    params = ctx.parameters if ctx is not None else {}
    path = Path(str(params.get("config_path") or "release"))
    pre = params.get("prefetched")
    checked = getattr(pre, "checked", None)  # flows.release.Prefetch: what sdc release read
    if checked is not None and getattr(pre, "path", None) == path.expanduser().resolve():
        return job_name(checked.config, path)
    return path.name


def job_name(config: ReleaseConfig, config_path: Path) -> str:
    """A run's name: the release and its config file ("census-demo (census_demo.yaml)")."""
    return f"{config.name} ({Path(config_path).name})"


def current_run_id() -> str | None:
    """The current flow run's id (None outside a run)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx is not None and ctx.flow_run is not None else None


#: the name of the final state of a run that staged its release and did not wait for review
AWAITING_REVIEW = "Awaiting review"


def name_run(config: ReleaseConfig, config_path: Path) -> None:
    """Name the flow run after the release and its config ("census-demo (census_demo.yaml)")
    and tag it ``release:<name>``, so Prefect's run list says which job each run is (a
    scheduled run is named after its config file until its config was read)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None or ctx.client is None:
        return
    name, tag = job_name(config, config_path), f"release:{config.name}"
    tags = list(ctx.flow_run.tags or [])
    if ctx.flow_run.name == name and tag in tags:
        return
    try:
        ctx.client.update_flow_run(ctx.flow_run.id, name=name, tags=sorted({*tags, tag}))
        ctx.flow_run.name = name
    except Exception as e:  # a name is no reason to fail a release
        get_run_logger().warning("could not name the flow run: %s", e)
