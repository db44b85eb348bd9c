"""The release job as a Prefect flow, plus the plain functions behind ``sdc plan`` / ``validate``.

``release(config_path, force=False)`` runs the same four tasks on every executor::

    load (config, input hash, seed and series) -> release records (the executor: count,
         plan, apply, public and records files) -> reports -> write (atomic publish)

and returns a JSON-friendly summary (release folder, n, partition sets, PRBs, theta, the exact
certificate max_j,a R_j(a, t) next to xi, records changed). It also publishes three Prefect
artifacts: a markdown summary, a table of the PRBs (one row per block: k, profile, theta, exact
max risk, action - never a record) and a link to the release folder.

The flow runs on Prefect's embedded default: without ``PREFECT_API_URL`` Prefect starts a
temporary local API for the run, so nobody has to start a server by hand. Only cron schedules
need a real server (see :mod:`flows.schedule`).

Randomness comes only from the release seed (``sdc.method.draws``); the tasks still have
``retries=0``, and every task that receives a DataFrame or the config uses ``NO_CACHE`` (Prefect
would otherwise pickle and hash every argument, and a cached write would silently skip the
release).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import opaque

import sdc
from flows.artifacts import (
    AWAITING_REVIEW,
    current_run_id,
    job_tag_on_the_run_only,
    name_run,
    publish_artifacts,
    run_name,
)
from flows.summary import (
    artifact_key,
    blocks_table,
    household_warnings,
    pair_warnings,
    summarize,
    summary_markdown,
)
from sdc.config.model import EngineSpec, ReleaseConfig
from sdc.executors.registry import executor_names, get_executor
from sdc.release.job import (
    Job,
    load_job,
    resolve_engine,
    unchanged_check,
)
from sdc.release.preflight import (
    ConfigFile,
    Preflight,
    check_release_target,
    preflight,
    seed_and_series,
    staged_problem,
)

if TYPE_CHECKING:
    from sdc.pipeline.kernels import ReleaseOutcome

__all__ = [
    "ENGINES",
    "Job",
    "artifact_key",
    "blocks_table",
    "check_release_target",
    "household_warnings",
    "pair_warnings",
    "load_job",
    "prefetch_job",
    "progress_callback",
    "release",
    "resolve_engine",
    "summarize",
    "summary_markdown",
    "warm_imports",
]

log = logging.getLogger("sdc.flows")

# ---------------------------------------------------------------------------------------------
# progress hook (the CLI shows the current step in a spinner)
# ---------------------------------------------------------------------------------------------
_progress: Callable[[str], None] | None = None


@contextmanager
def progress_callback(fn: Callable[[str], None] | None) -> Iterator[None]:
    """While active, every release step calls ``fn(step_description)`` when it starts."""
    global _progress
    old, _progress = _progress, fn
    try:
        yield
    finally:
        _progress = old


def _step(text: str) -> None:
    if _progress is not None:
        _progress(text)


#: (step, perf_counter) of every step a batch engine announces, for ``--timings``
_engine_marks: list[tuple[str, float]] = []


def _engine_step(text: str) -> None:
    _engine_marks.append((text, time.perf_counter()))
    _step(text)


def step_seconds(marks: list[tuple[str, float]], end: float, prefix: str = "") -> dict[str, float]:
    """Seconds of every announced step, from its mark to the next one (the last one to
    ``end``); a step's counter in parentheses ("pass 1 of 3") is not part of its name."""
    times = [t for _, t in marks] + [end]
    out: dict[str, float] = {}
    for i, (step, t) in enumerate(marks):
        name = prefix + step.split(" (")[0]
        out[name] = round(out.get(name, 0.0) + times[i + 1] - t, 3)
    return out


# ---------------------------------------------------------------------------------------------
# plain functions (testable without Prefect)
# ---------------------------------------------------------------------------------------------


class Prefetch:
    """What ``sdc release`` hands its flow: the pre-flight it ran (the config as it read it,
    the engine, the options it checked) and, for an executor that reads the input whole,
    :func:`load_job` started in a thread by :func:`prefetch_job`. The load task takes both
    instead of reading and checking again. Slotted and opaque: Prefect stores a placeholder
    for it among the flow run's parameters, never the frame."""

    __slots__ = ("_future", "checked", "path")

    def __init__(self, checked: Preflight, future: Future[Job] | None = None) -> None:
        assert checked.file is not None
        self.checked, self.path, self._future = checked, checked.file.path, future

    def job(self) -> Job | None:
        """The loaded job (the prefetch's error, if it failed); None without a prefetch."""
        return None if self._future is None else self._future.result()


def prefetch_job(checked: Preflight | str | Path, read_input: bool = True) -> Prefetch:
    """Hand the pre-flight ``checked`` (or run it now on a config path) to the flow, and with
    ``read_input`` start :func:`load_job` (read and hash the input) in a background thread;
    the flow's load task (``prefetched=``) takes the result instead of reading the input
    again.

    ``sdc release`` calls this while Prefect's server boots (a fixed wait of several
    seconds), so that reading the input overlaps it; the input's Arrow schema is made on a
    second thread (a CSV's first block parsed and typed). Any error (unreadable input) is raised by
    the load task, exactly as without the prefetch.
    """
    if not isinstance(checked, Preflight):
        checked = preflight(checked, prefect_home=False)
    if not read_input:
        return Prefetch(checked)
    ex = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sdc-prefetch")
    future = ex.submit(load_job, checked.file)
    ex.submit(_input_schema, checked.file.config)  # beside the read: a CSV's costs about as much
    ex.shutdown(wait=False)
    return Prefetch(checked, future)


def _input_schema(config: ReleaseConfig) -> None:
    """Make the input's Arrow schema (kept for this config object: the executor and the
    reports ask for it, :func:`sdc.io.batches.input_arrow_schema`); an error is the
    executor's to raise, when it asks."""
    from sdc.io.batches import input_arrow_schema

    try:
        input_arrow_schema(config)
    except Exception:  # noqa: BLE001, S110 (raised again where the schema is needed)
        pass


def warm_imports() -> None:
    """Import the modules the tasks import lazily (pandera, scipy, pyarrow's writer, the
    pipeline and the in-memory executor, ...), so that ``sdc release`` pays for them while
    Prefect's temporary API boots, not in the job."""
    import pandera.backends.pandas.builtin_checks  # noqa: F401 (imported on first validate)

    import sdc.executors.memory
    import sdc.io.read
    import sdc.io.schemas
    import sdc.pipeline.release
    import sdc.pipeline.report_parts
    import sdc.publish.folder
    import sdc.release.assemble
    import sdc.reports.build
    import sdc.series.risk  # noqa: F401
    from sdc.reports.html import environment

    env = environment()  # compile the report's templates now (0.2 s), not in the report task
    for name in env.list_templates(extensions=["j2"]):
        env.get_template(name)


# ---------------------------------------------------------------------------------------------
# tasks
# ---------------------------------------------------------------------------------------------
def _seed_with_warnings(config: ReleaseConfig, new_series: bool) -> Any:
    """Load (or create) the seed and place the run in its release series
    (:func:`sdc.release.preflight.seed_and_series`, the pre-flight's check with
    ``create=True``), with the warnings of a new series and a new seed file."""
    seed_info, info = seed_and_series(config, new_series, create=True)
    if info.new_series:
        get_run_logger().warning(
            "starting a NEW release series for %s although %d release(s) exist under another "
            "seed: records released before are randomized afresh (linkable, leaks)",
            info.output_pattern, len(info.other_series))
    if seed_info.created:
        get_run_logger().warning("created a new seed file %s (mode 0600); keep it to reproduce "
                                 "this release", seed_info.path)
    return seed_info


def _publish(config: ReleaseConfig, public: dict[str, Any], internal: dict[str, bytes],
             force: bool, review: Any = None, discard_extra_files: bool = False,
             before_publish: Callable[[], None] | None = None,
             scheduled: bool = False) -> Path:
    """Publish the release folder, or with a review (``review`` a ReviewSpec) stage it into
    ``<release>.staged`` (owner-only) for ``sdc approve`` / ``sdc reject``. ``before_publish``
    runs right before the rename (input and config unchanged); ``discard_extra_files``: see
    :func:`sdc.publish.folder.write_release`. A release staged meanwhile by another run (the
    pre-flight found none) is replaced only as the pre-flight allows (``force``, never by a
    ``scheduled`` run)."""
    if review is not None and review.required:
        if before_publish is not None:
            before_publish()
        pending = staged_problem(config, force, scheduled)
        if pending is not None:
            raise pending
        from sdc.publish.review import stage_release

        run_id = None
        try:
            from prefect.runtime import flow_run

            run_id = flow_run.id
        except Exception:  # pragma: no cover - outside a flow run
            pass
        return Path(stage_release(config.output_dir, public, internal, force=force,
                                  approvers=list(review.approvers),
                                  input_path=config.input_path,
                                  run_id=str(run_id) if run_id else None)).resolve()
    from sdc.publish.folder import write_release

    return Path(write_release(config.output_dir, public, internal, force=force,
                              input_path=config.input_path, before_publish=before_publish,
                              discard_extra_files=discard_extra_files)).resolve()


def review_spec(config: ReleaseConfig, flag: bool) -> Any:
    """The review gate of a run: the config's ``review:``, or ``--review`` (any approver)."""
    from sdc.config.model import ReviewSpec

    if config.review is not None and config.review.required:
        return config.review
    return ReviewSpec(required=True) if flag else None


def _review_summary(summary: dict[str, Any], rspec: Any, config: ReleaseConfig) -> None:
    if rspec is None:
        return
    staged = summary["release_dir"]
    summary["review"] = {"status": "pending", "staged_dir": staged,
                         "release_dir": str(config.output_dir.absolute()),
                         "approvers": list(rspec.approvers)}


# ---------------------------------------------------------------------------------------------
# tasks: the same on every executor (the registry, sdc.executors, says which runs the records)
# ---------------------------------------------------------------------------------------------
ENGINES = executor_names()


@dataclass
class ReleaseJob:
    """A loaded release job: the config, the input's hash and pin, the seed; ``frame`` is the
    input when :func:`prefetch_job` read it whole (an in-memory executor takes it)."""

    config_path: Path
    config: ReleaseConfig
    config_text: str
    input_sha256: str | None  # None: being hashed on a thread (input_pin.digest())
    seed_info: Any
    input_pin: Any = None
    config_pin: Any = None
    frame: pd.DataFrame | None = None


@task(name="load", cache_policy=NO_CACHE, retries=0, persist_result=False)
def load_task(config_path: str, force: bool, engine: str | None, new_series: bool = False,
              discard_extra_files: bool = False, prefetched: Prefetch | None = None,
              scheduled: bool = False) -> ReleaseJob:
    """The pre-flight (:func:`sdc.release.preflight.preflight`: the config read once, the
    release folder, a release awaiting review, the executor, the seed and the series, without
    writing), unless ``sdc release`` ran it already for this config and these options
    (``prefetched``); then hash the input (or take what :func:`prefetch_job` read and hashed
    while Prefect started), load (or create) the seed and place the run in its release
    series."""
    from sdc.io.batches import input_sha256
    from sdc.io.pin import Pin
    from sdc.publish.folder import checkpoint

    if prefetched is not None and not prefetched.checked.covers(
            config_path, force=force, new_series=new_series,
            discard_extra_files=discard_extra_files, scheduled=scheduled):
        prefetched = None  # checked for another config or other options
    _step("loading config and input" if prefetched is not None else "loading config")
    if prefetched is None:
        checked = preflight(config_path, force=force, new_series=new_series, engine=engine,
                            discard_extra_files=discard_extra_files, scheduled=scheduled,
                            prefect_home=False)
    else:
        checked = prefetched.checked
    file: ConfigFile = checked.file  # type: ignore[assignment]
    config, config_text, config_pin = file.config, file.text, file.pin
    loaded = prefetched.job() if prefetched is not None else None
    frame = None
    if loaded is not None:  # read, hashed and pinned while Prefect started
        frame, digest, input_pin = loaded.frame, loaded.input_sha256, loaded.input_pin
    else:  # the executor reads the records later: the pin is checked again before publishing;
        # the hash on a thread while it reads them (write_task takes it: Pin.digest)
        input_pin = Pin.take(config.input_path, "input file", input_sha256, background=True)
        digest = None
    checkpoint("loaded")  # crash-test hook
    seed_info = _seed_with_warnings(config, new_series)
    return ReleaseJob(file.path, config, config_text, digest, seed_info, input_pin,
                      config_pin, frame)


@task(name="release records", cache_policy=NO_CACHE, retries=0, persist_result=False)
def release_task(job: ReleaseJob, spec: EngineSpec, stage: Path,
                 records: Path | None = None) -> ReleaseOutcome:
    """Count cells, plan, and release every record (the executor: in memory, in batches or
    on a cluster); the public files are written into ``stage``, the internal records file
    (release series) to ``records``."""
    config, seed = job.config, job.seed_info.value
    frame, job.frame = job.frame, None  # the executor holds the only reference
    res = get_executor(spec.kind).release(config, seed, stage, spec, progress=_engine_step,
                                          records_path=records, frame=frame)
    del frame
    if not res.certificate <= res.xi + 1e-12:
        raise sdc.CertificationError(
            f"certificate {res.certificate:.6f} exceeds xi = {res.xi}; nothing was published")
    logger = get_run_logger()
    logger.info("%d non-empty cells in %d partition sets, %d sensitive", res.cells.n_cells,
                len(res.partition_sets), int(res.sensitive_cell.sum()))
    logger.info("%s engine: %d records, %d PRBs, certificate %.6f (xi %s), %d changed",
                spec.kind, res.n_records, len(res.blocks), res.certificate, res.xi,
                res.n_changed)
    return res


@task(name="reports", cache_policy=NO_CACHE, retries=0, persist_result=False)
def report_task(job: ReleaseJob,
                result: ReleaseOutcome) -> tuple[dict[str, bytes], dict[str, Any]]:
    """risk.json, utility.json and report.html from the aggregates the executor accumulated
    during its passes; with a previous release in the series, its comparison with this one
    (kept in ``seed_info.series`` for the audit record) becomes the "Release series" section."""
    from sdc.pipeline.report_parts import batch_reports
    from sdc.reports.build import headline
    from sdc.series.guard import series_risk_vs_previous

    _step("building risk and utility reports")
    series = series_risk_vs_previous(job.seed_info, result)
    reports = batch_reports(result, job.config, seed=job.seed_info.value, series=series)
    return reports.files(), headline(reports.risk, reports.utility)


@task(name="write", cache_policy=NO_CACHE, retries=0, persist_result=False)
def write_task(job: ReleaseJob, result: ReleaseOutcome, force: bool, engine: str,
               reports: dict[str, bytes] | None = None, review: Any = None,
               discard_extra_files: bool = False, scheduled: bool = False) -> Path:
    """Codebook, internal tables and audit record from aggregates; atomic publish (the public
    files are moved in from the stage folder)."""
    from sdc.release.assemble import assemble_batch_release

    _step("writing the release")
    # the audit record names the executor when the registry says so (`sdc audit` then
    # re-derives with the executor the registry names for it); an in-memory release's record
    # is as it always was
    public, internal = assemble_batch_release(
        job.config, result, job.seed_info,
        input_sha256=job.input_sha256 or job.input_pin.digest(),
        config_text=job.config_text,
        engine=engine if get_executor(engine).in_audit_record else None, reports=reports)
    out = _publish(job.config, public, internal, force, review, discard_extra_files,
                   unchanged_check(job.input_pin, job.config_pin), scheduled)
    get_run_logger().info("release written to %s", out)
    return out


def _timer(timings: dict[str, float]) -> Callable[..., Any]:
    """``timed(name, fn, *args)``: run ``fn(*args)`` and record its wall seconds (a task's
    including Prefect's bookkeeping of its run) in ``timings[name]``."""

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args)
        timings[name] = round(time.perf_counter() - t, 3)
        return out

    return timed


def _finish(summary: dict[str, Any], rspec: Any, config: ReleaseConfig, blocks: pd.DataFrame,
            timings: dict[str, float], t0: float) -> dict[str, Any]:
    """The end of every run: the review state, the Prefect artifacts, the timings."""
    t = time.perf_counter()
    _review_summary(summary, rspec, config)
    publish_artifacts(summary, blocks)
    timings["artifacts"] = round(time.perf_counter() - t, 3)
    summary["timings"] = timings
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


def _stage_folder(config: ReleaseConfig) -> Path:
    """A temp folder beside the release (same file system: the public files are renamed into
    the release), named like write_release's temp folders so a killed run's is cleaned up."""
    import os

    from sdc.publish.folder import ReleaseFolderError, prepare_parent, staging_path

    out = prepare_parent(config.output_dir, config.input_path)
    stage = staging_path(out)
    try:
        os.mkdir(stage, 0o700)
    except OSError as e:
        raise ReleaseFolderError(
            f"cannot write into {str(out.parent)!r} for release {out.name!r} ({e.strerror or e}); "
            "make it writable or choose another output.dir") from None
    return stage


def _release(config_path: str, force: bool, engine: str | None, t0: float,
             new_series: bool = False,
             review: bool = False, discard_extra_files: bool = False,
             prefetched: Prefetch | None = None, scheduled: bool = False) -> dict[str, Any]:
    import shutil

    from sdc.io.write import start_writeback

    timings: dict[str, float] = {}
    timed = _timer(timings)

    job = timed("load", load_task, str(config_path), force, engine, new_series,
                discard_extra_files, prefetched, scheduled)
    spec = resolve_engine(job.config, engine)
    name_run(job.config, job.config_path)
    stage = _stage_folder(job.config)
    try:
        _engine_marks.clear()
        t = time.perf_counter()
        result = release_task(opaque(job), spec, stage / "public",
                              stage / "internal" / "records.parquet")
        end = time.perf_counter()
        # the disk writes the executor's files while the reports are built
        start_writeback([*result.files.values(), getattr(result, "records_file", None)])
        # the executor's own steps (passes, writing, report passes), then the task's remainder
        # (Prefect's bookkeeping of the task run)
        timings.update(step_seconds(_engine_marks or [("release records", t)], end,
                                    prefix=f"{spec.kind}: "))
        if _engine_marks:
            timings[f"{spec.kind}: task start-up"] = round(_engine_marks[0][1] - t, 3)
        _engine_marks.clear()
        reports, head = timed("reports", report_task, opaque(job), opaque(result))
        rspec = review_spec(job.config, review)
        out = timed("write", write_task, opaque(job), opaque(result), force, spec.kind,
                    opaque(reports), rspec,
                    discard_extra_files, scheduled)
    except OSError as e:
        import errno

        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        from sdc.publish.folder import ReleaseFolderError, free_bytes

        raise ReleaseFolderError(
            f"the disk holding {str(stage.parent)!r} is full: the {spec.kind} engine could not "
            f"write {str(e.filename or stage)!r} ({e.strerror}); "
            f"{free_bytes(stage.parent) / 2**20:,.1f} MB are free. The public files need about "
            "the size of the input per output format; free space there or choose another "
            "output.dir. Nothing was published") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    summary = summarize(job.config, result, n_records=result.n_records, release_dir=out,
                        seed_created=bool(job.seed_info.created), seed_file=job.seed_info.path,
                        seconds=time.perf_counter() - t0)
    summary["engine"] = spec.kind
    summary["headline"] = head
    summary["warnings"].extend(household_warnings(result) + pair_warnings(result, job.config))
    return _finish(summary, rspec, job.config, result.blocks, timings, t0)


# ---------------------------------------------------------------------------------------------
# the flow
# ---------------------------------------------------------------------------------------------
@flow(name="release", retries=0, log_prints=False, flow_run_name=run_name, persist_result=False)
def release(config_path: str, force: bool = False, new_series: bool = False,
            engine: str | None = None, review: bool = False,
            wait_for_review: bool = False,
            discard_extra_files: bool = False,
            prefetched: Prefetch | None = None) -> dict[str, Any]:
    """Run one release job from its YAML config and publish the release folder.

    Parameters
    ----------
    config_path : str
        The job's YAML config (relative paths inside it are relative to its folder).
    force : bool
        Replace an existing release folder (the old one stays until the new one is complete).
        Refused when the release holds files it did not write (an approval, a signature),
        unless ``discard_extra_files``.
    discard_extra_files : bool
        With ``force``: delete such files with the old release.
    new_series : bool
        Start a new seed (an independent randomization: a leak for records released before)
        for an output pattern that already has releases under another seed.
    engine : {"pandas", "streaming", "dask"}, optional
        Overrides the config's ``engine:``. The Dask computation runs inside this flow's task
        (see :mod:`sdc.executors.dask` for why not prefect-dask's task runner).
    wait_for_review : bool
        A run that stages its release for review pauses until the reviewers decide
        (:mod:`flows.review`); ``sdc schedule``'s deployments set it. Such a run never
        replaces a release awaiting review (not even with ``force``): its pre-flight fails
        the run and the staged release stays as it was.
    prefetched : Prefetch, optional
        What ``sdc release`` checked and read (:func:`prefetch_job`: its pre-flight, and the
        input it started reading while Prefect started): the load task takes it instead of
        reading and checking again. Without it, the load task runs the pre-flight itself.

    Returns
    -------
    dict
        :func:`summarize`'s summary, with ``release_dir`` set, ``seconds`` = wall time of the
        job inside the flow (from the first task to the artifacts) and ``timings`` = wall
        seconds per task (each including Prefect's own bookkeeping of that task run). A run
        that staged its release and does not wait ends in a Completed state named
        "Awaiting review" (the Prefect UI does not show it as done).
    """
    t0 = time.perf_counter()
    with job_tag_on_the_run_only():
        summary = _after_review(_release(config_path, force, engine, t0, new_series, review,
                                         discard_extra_files, prefetched,
                                         scheduled=wait_for_review), wait_for_review)
    rev = summary.get("review")
    if rev is not None and rev.get("status") == "pending":
        from prefect.states import Completed

        who = ", ".join(rev["approvers"]) or "any named reviewer"
        return Completed(data=summary, name=AWAITING_REVIEW,  # type: ignore[return-value]
                         message=f"staged in {rev['staged_dir']}; awaiting approval by {who}")
    return summary


def _after_review(summary: dict[str, Any], wait: bool) -> dict[str, Any]:
    """With ``wait`` and a staged release: pause for the reviewers' decision (flows.review)."""
    rev = summary.get("review")
    if not wait or rev is None:
        return summary
    from flows.review import wait_for_decision

    _step("waiting for the review decision")
    who = ", ".join(rev["approvers"]) or "any named reviewer"
    description = (f"Release `{summary['name']}` is staged for review in `{rev['staged_dir']}` "
                   f"(approvers: {who}). See the release-review artifact. Choose approve or "
                   "reject and give your name.")
    get_run_logger().warning(
        "release %s is staged for review in %s; this run waits for the decision of %s: `sdc "
        "approve %s --as NAME [--comment TEXT]` (or `sdc reject ... --as NAME`), or the Resume "
        "form of this run in the Prefect UI. Scheduled runs of this job fail until it is "
        "decided", summary["name"], rev["staged_dir"], who, current_run_id() or rev["staged_dir"])
    outcome = wait_for_decision(Path(rev["staged_dir"]), description)
    summary["review"] = {**rev, **outcome}
    if outcome["status"] == "approved":
        summary["release_dir"] = outcome["release_dir"]
    return summary
