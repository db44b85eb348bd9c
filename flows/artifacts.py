"""The release flow's record in Prefect: the flow run's name and tags (which job a run is), the
artifacts of a release (summary, PRB table, links; the review note of a staged release), and
the state name of a run that staged its release for review. Aggregates only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import get_run_logger
from prefect.artifacts import Artifact, LinkArtifact, MarkdownArtifact, TableArtifact

from flows.summary import artifact_key, blocks_table, summary_markdown
from sdc.config.model import ReleaseConfig

__all__ = ["AWAITING_REVIEW", "current_run_id", "job_name", "job_tag_on_the_run_only", "name_run",
           "publish_artifacts", "run_name"]

def _create(artifact: Artifact) -> None:
    """``artifact.create()`` (what ``create_*_artifact`` call) through the flow run's own
    client: Prefect's synchronous ``create`` opens a new client for every artifact (an SSL
    context loaded from certifi and a connection, ~30 ms each); the request is the same
    (:class:`ArtifactCreate` of the artifact's type, key, description, formatted data and the
    run's id). Outside a flow run, as ``create`` does it."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.actions import ArtifactCreate
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    client = None if ctx is None or ctx.flow_run is None else ctx.client
    if not isinstance(client, SyncPrefectClient):  # an async flow's client, or none
        artifact.create(_sync=True)  # type: ignore[call-arg]
        return
    from prefect.utilities.context import get_task_and_flow_run_ids

    task_run_id, flow_run_id = get_task_and_flow_run_ids()
    client.create_artifact(artifact=ArtifactCreate(
        type=artifact.type, key=artifact.key, description=artifact.description,
        task_run_id=artifact.task_run_id or task_run_id,
        flow_run_id=artifact.flow_run_id or flow_run_id,
        data=artifact.format(_sync=True)))  # type: ignore[call-arg]


def publish_artifacts(summary: dict[str, Any], blocks: pd.DataFrame) -> None:
    """The run's artifacts (the review note and report link of a staged release, the summary,
    the PRB table, the release folder's link), sent to the API at once: each is one request
    of ~50 ms, mostly the server's, and they do not depend on each other."""
    name = summary["name"]
    made: list[Artifact] = []
    rev = summary.get("review")
    if rev is not None:  # what the reviewers look at: the summary above, the report, the hash
        staged = Path(rev["staged_dir"])
        review = json.loads((staged / "internal" / "review.json").read_text(encoding="utf-8"))
        report = staged / "internal" / "report.html"
        who = ", ".join(rev["approvers"]) or "any named reviewer"
        made.append(MarkdownArtifact(
            markdown=f"# Release `{name}` awaits review\n\nStaged (owner-only) in `{staged}`; "
            f"publishes to `{rev['release_dir']}` when approved by {who}.\n\n"
            f"- report: `{report}`\n- manifest SHA-256 of every file: "
            f"`{review['manifest_sha256']}`\n\nApprove: `sdc approve {staged} --as NAME "
            f"[--comment TEXT]`; reject: `sdc reject {staged} --as NAME`.\n",
            key=artifact_key("release-review", name),
            description=f"Release {name}: review and approval"))
        if report.is_file():
            made.append(LinkArtifact(link=report.resolve().as_uri(), link_text=str(report),
                                     key=artifact_key("release-report", name),
                                     description=f"Risk and utility report of {name} (internal)"))
    made.append(MarkdownArtifact(markdown=summary_markdown(summary),
                                 key=artifact_key("release-summary", name),
                                 description=f"Release {name}: certificate vs xi"))
    made.append(TableArtifact(table=blocks_table(blocks), key=artifact_key("release-prbs", name),
                              description=f"Post-randomization blocks of {name} (no record data)"))
    if summary["release_dir"]:
        url = Path(summary["release_dir"]).resolve().as_uri()
        made.append(LinkArtifact(link=url, link_text=summary["release_dir"],
                                 key=artifact_key("release-folder", name),
                                 description=f"Release folder of {name}"))
    _create_all(made)


def _create_all(artifacts: list[Artifact]) -> None:
    """:func:`_create` of every artifact on its own thread, each in a copy of this thread's
    context (the flow run's client and ids); the first failure is raised."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    if len(artifacts) < 2:
        for a in artifacts:
            _create(a)
        return
    with ThreadPoolExecutor(len(artifacts), thread_name_prefix="sdc-artifacts") as pool:
        done = [pool.submit(contextvars.copy_context().run, _create, a) for a in artifacts]
    for f in done:
        f.result()


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


@contextmanager
def job_tag_on_the_run_only() -> Iterator[None]:
    """The job's tag ``release:<name>``, which ``sdc release`` gives the flow run (the run
    list says which job each run is), is not passed on to the task runs: Prefect makes a
    tagged task run take and release a concurrency slot of each of its tags through the API
    before it starts (a request each way per task, and the async client they need, all of it
    waited for); no limit is set on these tags. Other tags pass on as before."""
    from prefect.context import TagsContext

    current = set(TagsContext.get().current_tags)
    keep = {t for t in current if not t.startswith("release:")}
    if keep == current:
        yield
        return
    with TagsContext(current_tags=keep):
        yield
