"""A release job without Prefect: loading it, and what ``sdc plan`` and ``sdc validate`` compute.

:func:`load_job` parses the config, reads the input and hashes both (the release flow's load
task, or its prefetch); :func:`resolve_engine` is the engine of a run; :func:`plan_job`
(``sdc plan``) and :func:`validate_release_input` (``sdc validate``) run the release's own
steps up to the plan and write nothing. No Prefect here: the flows (``flows/release.py``)
orchestrate these as tasks, the command line calls the two checks directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import sdc
from sdc.config.model import ReleaseConfig, SeedFile
from sdc.config.sections import ExecutorSpec, executor_name
from sdc.executors.registry import get_executor
from sdc.method.household_composition import expected_persons_changed
from sdc.method.plan import expected_changed
from sdc.release.preflight import ConfigFile, read_config

__all__ = ["Job", "PlanSummary", "ValidationSummary", "load_job", "plan_job",
           "resolve_engine", "unchanged_check", "validate_release_input"]


@dataclass
class Job:
    """A loaded release job: the parsed config, the raw input and what the audit needs.

    ``input_pin`` / ``config_pin`` (:class:`sdc.io.pin.Pin`): the files' states from before
    they were hashed; checked again before the release is published."""

    config_path: Path
    config: ReleaseConfig
    config_text: str
    frame: pd.DataFrame
    input_sha256: str
    input_pin: Any = None
    config_pin: Any = None


def load_job(config_path: str | Path | ConfigFile) -> Job:
    """Parse the config (or take the :class:`~sdc.release.preflight.ConfigFile` the run read
    already), read its input and hash both (the hashes go into ``audit.json``).

    The hashes belong to the bytes parsed: each file's identity and change time are taken
    before it is read and checked after it was hashed (:class:`sdc.io.pin.Pin`); a file
    that changed in between is refused (``InputError``, exit 2).

    Raises ``sdc.ConfigError`` (bad config) or ``sdc.InputError`` (missing or unreadable
    input, or a file that changed while it was read).
    """
    from sdc.io.pin import Pin
    from sdc.io.read import read_input
    from sdc.io.write import sha256_file

    file = config_path if isinstance(config_path, ConfigFile) else read_config(config_path)
    config = file.config
    input_pin = Pin.take(config.input_path, "input file")
    frame = read_input(config)
    input_pin.sha256 = sha256_file(config.input_path)
    input_pin.check("while it was read")
    return Job(file.path, config, file.text, frame, input_pin.sha256, input_pin, file.pin)


def unchanged_check(*pins: Any) -> Callable[[], None]:
    """The check ``write_release`` runs right before the release is renamed into place: every
    pinned file (input, config) is as it was when it was read and hashed."""
    def check() -> None:
        for pin in pins:
            if pin is not None:
                pin.check("during the run, before the release was published")
    return check


def resolve_engine(config: ReleaseConfig, engine: str | None) -> ExecutorSpec:
    """The executor spec of a run: ``--executor`` (if given; ``memory`` is the registered
    ``pandas``) over the config's ``executor:``.

    A ``--executor dask`` keeps the config's dask settings (scheduler, workers, scratch) when
    the config's executor is dask too."""
    spec = config.executor
    engine = executor_name(engine) if engine is not None else None
    if engine is None or engine == spec.kind:
        return spec
    get_executor(engine)  # unknown name: ConfigError naming the registered ones
    return ExecutorSpec(kind=engine, batch_rows=spec.batch_rows)


@dataclass
class PlanSummary:
    """What a release would do, computed without writing anything.

    The plan (partition sets, PRBs, k, theta, actions, certificate) does not depend on the
    seed: randomness only decides *which* records move. ``changed`` is the actual number of
    records the release would change, known only when the seed already exists.
    """

    name: str
    config_path: Path
    input_path: Path
    output_dir: Path
    n_records: int
    n_cells: int
    n_sensitive_cells: int
    n_sensitive_records: int
    xi: float
    theta: float
    theta_mode: str
    kmin: int
    small_blocks: str
    partition_sets: pd.DataFrame
    blocks: pd.DataFrame
    merges: list[str]
    certificate: float
    certificate_at: dict[str, Any]
    expected_changed: float
    changed: int | None
    seed_known: bool
    release_exists: bool
    notes: list[str] = field(default_factory=list)
    #: how ``expected_changed`` is computed (the configured design's m_j)
    expected_how: str = "sum of theta * k"

    @property
    def n_partition_sets(self) -> int:
        return int(len(self.partition_sets))

    @property
    def n_prbs(self) -> int:
        return int(len(self.blocks))

    @property
    def small_block_actions(self) -> pd.DataFrame:
        """PRBs that did not simply use the theorem's theta (merged and/or calibrated)."""
        return self.blocks[self.blocks["action"] != "theorem"]


def _plan_batches(config_path: str | Path, spec: Any) -> PlanSummary:
    """``sdc plan --engine streaming|dask``: one counting pass in batches (validated per batch),
    then the shared planning code. ``changed`` needs the apply pass: not computed here."""
    from sdc.pipeline.kernels import plan_cells

    path = Path(config_path).expanduser()
    config = sdc.load_config(path)

    count = get_executor(spec.kind).count(config, spec)
    if config.input.household_id is not None:
        return _household_plan_summary(config, path, spec, count)
    return _person_plan_summary(config, path, spec, int(count.n_records),
                                plan_cells(count, config))


def _person_plan_summary(config: ReleaseConfig, path: Path, spec: Any, n_records: int,
                         plan: Any) -> PlanSummary:
    """The plan summary of a person file from its :class:`~sdc.method.plan.ReleasePlan`."""
    part = plan.partitioned
    sens = plan.cell_prb >= 0
    blocks = plan.blocks
    out = config.output_dir.resolve()
    return PlanSummary(
        name=config.name, config_path=path.resolve(), input_path=config.input_path.resolve(),
        output_dir=out, n_records=n_records, n_cells=int(part.cells.n_cells),
        n_sensitive_cells=int(sens.sum()),
        n_sensitive_records=int(part.cells.frequency[sens].sum()),
        xi=float(part.xi), theta=float(part.theta), theta_mode=config.risk.theta,
        kmin=int(part.kmin), small_blocks=config.risk.small_blocks,
        partition_sets=plan.partition_sets, blocks=blocks, merges=list(plan.merges),
        certificate=float(plan.certificate), certificate_at=dict(plan.certificate_at),
        expected_changed=expected_changed(blocks, plan.weighted)[0],
        expected_how=expected_changed(blocks, plan.weighted)[1],
        changed=None, seed_known=False, release_exists=out.exists(),
        notes=[f"engine {spec.kind}: one counting pass; the number of changed records is "
               "known after the release pass"],
    )


def _household_note(person_certificate: float, n_households: int, household_blocks: Any,
                    certificate: float, small_classes: int, small_class_persons: int) -> str:
    """The plan's note on a household file's two stages (every engine words it so)."""
    hb = household_blocks
    expected = float(hb["expected_changed"].sum()) if len(hb) else 0.0
    return (f"household file: the PRBs below are the person stage's (certificate "
            f"{person_certificate:.6f}, inside the household keys' values); the household "
            f"stage has {n_households:,} households, {len(hb)} household PRB(s), "
            f"certificate {certificate:.6f}, {expected:.1f} "
            f"households expected to change; {small_classes} household-key class(es) "
            f"({small_class_persons} persons) too small for a person PRB "
            "(docs/HOUSEHOLDS.md)")


def _household_plan_summary(config: ReleaseConfig, path: Path, spec: Any,
                            hp: Any) -> PlanSummary:
    """``sdc plan --engine streaming|dask`` of a household file: both stages planned in
    batches (:func:`sdc.pipeline.households.plan_households`)."""
    ps = hp.ps
    part = ps.plan.partitioned
    sens = hp.cell_prb >= 0
    blocks = ps.plan.blocks
    cert, cert_at = hp.certificate
    out = config.output_dir.resolve()
    note = _household_note(float(ps.plan.certificate), int(hp.agg.n_households),
                           hp.household_blocks, float(hp.hs.plan.certificate),
                           int(ps.small_classes), int(ps.small_class_persons))
    expected = float(blocks["expected_changed"].sum()) if len(blocks) else 0.0
    how = "sum of theta * k"
    if hp.hs.composition is not None:  # risk.composition: protect: no person PRB
        expected, var = expected_persons_changed(hp.hs.composition, hp.hs.composition_table)
        how = ("composition stage: persons of the moved households whose keys change, "
               f"expected under the plan; SD {var ** 0.5:,.1f} over releases")
        note = ("household file, risk.composition: protect: the household stage is keyed on the "
                f"household keys x the composition ({len(hp.household_blocks)} household "
                "PRBs); no person PRB (person keys move with their household's composition); "
                f"composition certificate {cert:.6f}")
    return PlanSummary(
        name=config.name, config_path=path.resolve(), input_path=config.input_path.resolve(),
        output_dir=out, n_records=int(hp.n_records), n_cells=int(hp.cells.n_cells),
        n_sensitive_cells=int(sens.sum()),
        n_sensitive_records=int(hp.cells.frequency[sens].sum()),
        xi=float(part.xi), theta=float(part.theta), theta_mode=config.risk.theta,
        kmin=int(part.kmin), small_blocks=config.risk.small_blocks,
        partition_sets=hp.partition_sets, blocks=blocks, merges=hp.merges,
        certificate=cert, certificate_at=cert_at,
        expected_changed=expected, expected_how=how,
        changed=None, seed_known=False, release_exists=out.exists(),
        notes=[note, f"engine {spec.kind}: the count and identity passes; the number of "
               "changed records is known after the release pass"],
    )


def plan_job(config_path: str | Path, engine: str | None = None) -> PlanSummary:
    """Everything ``sdc plan`` prints. Writes nothing: the seed file is read if it exists but
    never created, and the release folder is not touched.

    ``expected_changed`` = sum over cells of t_j m_j of the configured design (NZY: sum over
    PRBs of theta_b * k_b; :func:`sdc.method.plan.expected_changed`). ``engine`` (default: the
    config's) chooses how the records are read: the pipeline's count pass with the executor's
    runner, then the shared planning code. An executor that reads the file whole also counts
    the records the release would change (the pipeline's release into a private temporary
    folder, deleted after) when the seed is known.
    """
    import shutil
    import tempfile

    from sdc.series.seeds import load_seed

    config = sdc.load_config(config_path)
    spec = resolve_engine(config, engine)
    executor = get_executor(spec.kind)
    if not executor.reads_whole_input:
        return _plan_batches(config_path, spec)
    persons = config.input.household_id is None  # planned by the release below, once
    summary = None if persons else _plan_batches(config_path, spec)
    seed: int | None = None
    notes: list[str] = []
    seed_file = config.resolve(config.seed.file) if isinstance(config.seed, SeedFile) else None
    if seed_file is None or seed_file.exists() or seed_file.is_symlink():
        seed = load_seed(config, create=False).value  # bad permissions etc. are errors
    else:
        notes.append("the seed file does not exist yet; `sdc release` will create it. "
                     "The plan does not depend on the seed, only which records move does")
    # the plan is seed-independent; with no seed yet, 0 only fills the draws (the PRB table's
    # `changed` column), whose count is not reported
    tmp = Path(tempfile.mkdtemp(prefix="sdc-plan-"))  # 0700
    try:
        res = executor.release(config, seed if seed is not None else 0, tmp / "public", spec)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if summary is None:  # a person file: the release's own count pass and plan
        summary = _person_plan_summary(config, Path(config_path).expanduser(), spec,
                                       int(res.n_records), res.plan)
    summary.notes = summary.notes[:-1] + notes  # the changed records are counted here
    summary.blocks = res.blocks
    summary.changed, summary.seed_known = (int(res.n_changed), True) if seed is not None else (
        None, False)
    return summary


@dataclass
class ValidationSummary:
    """``sdc validate``: the config parsed and the input passed the pandera input schema."""

    name: str
    config_path: Path
    input_path: Path
    input_sha256: str
    n_records: int
    n_columns: int
    key_variables: list[str]
    n_cells: int
    n_partition_sets: int
    n_sensitive_cells: int


def validate_release_input(config_path: str | Path,
                           engine: str | None = None) -> ValidationSummary:
    """Check the config and the input only (no seed, no randomness, no writes). ``engine``
    (default: the config's) chooses how the records are read: streaming and dask check and
    count them in batches (the release's count pass), never holding the file.

    A household file is checked as its release checks it: the households, both stages'
    PRBs and dependence checks (docs/HOUSEHOLDS.md), not as a file of persons.

    Raises ``sdc.ConfigError`` / ``sdc.InputError`` (every input problem in one table; a
    released non-key column that gives the key values away: ``DependenceError``) /
    ``FileNotFoundError`` / ``SmallBlockError``.
    """
    from sdc.io.schemas import validate_input
    from sdc.method.dependence import frame_dependence, raise_if_dependent, schema_kinds
    from sdc.method.designs import design_of, plan_release
    from sdc.release.public import public_schema_for

    file = read_config(config_path)  # read once: the count pass or load_job takes it
    config = file.config
    spec = resolve_engine(config, engine)
    if not get_executor(spec.kind).reads_whole_input or config.input.household_id is not None:
        # the pipeline's count pass (a household file: both stages, as its release checks it)
        return _validate_counted(file, spec)
    job = load_job(file)
    frame = validate_input(job.frame, job.config)
    part = sdc.partition_frame(frame, job.config)
    # the dependence check of the released non-key columns needs the PRBs (a plan: no seed;
    # the weighted mode's groups do not change them)
    plan = plan_release(part, job.config, design=design_of(job.config, weighted=False))
    kinds = schema_kinds(public_schema_for(job.config, frame))  # as the release's count
    raise_if_dependent(frame_dependence(frame, plan, job.config, kinds), plan, job.config)
    n_cells, n_sets = int(part.cells.n_cells), int(len(part.partition_keys))
    n_sensitive = int(part.sensitive.sum())
    public_schema_for(job.config, frame)  # the public types every output format can hold
    return ValidationSummary(
        name=job.config.name,
        config_path=job.config_path,
        input_path=job.config.input_path.resolve(),
        input_sha256=job.input_sha256,
        n_records=int(len(frame)),
        n_columns=int(frame.shape[1]),
        key_variables=job.config.key_names,
        n_cells=n_cells,
        n_partition_sets=n_sets,
        n_sensitive_cells=n_sensitive,
    )


def _validate_counted(file: ConfigFile, spec: Any) -> ValidationSummary:
    """``sdc validate`` by the pipeline's count pass with the executor's runner (every input
    problem of the whole file, with global rows; a household file's households and both
    stages' plans and dependence checks), the plan and its dependence check, the public
    types; an executor that reads in batches never holds the file."""
    from sdc.io.batches import input_sha256
    from sdc.method.partition import partition_cells
    from sdc.pipeline.kernels import plan_cells
    from sdc.pipeline.run import count

    path, config = file.path, file.config

    def counted(runner: Any) -> tuple[int, int, int, int, int]:
        counts = count(runner, config)
        if config.input.household_id is not None:
            n_cells, n_sets = int(counts.cells.n_cells), int(len(counts.partition_sets))
            n_sensitive = int((counts.cell_prb >= 0).sum())
        else:
            plan_cells(counts, config)  # and the dependence check of the counted columns
            part = partition_cells(counts.cells, config)
            n_cells, n_sets = int(part.cells.n_cells), int(len(part.partition_keys))
            n_sensitive = int(part.sensitive.sum())
        runner.public_schema()  # the public types every output format can hold
        return (int(counts.n_records), len(runner.input_columns()), n_cells, n_sets,
                n_sensitive)

    n_records, n_columns, n_cells, n_sets, n_sensitive = get_executor(spec.kind).run(
        config, spec, counted)
    return ValidationSummary(
        name=config.name, config_path=path.resolve(), input_path=config.input_path.resolve(),
        input_sha256=input_sha256(config.input_path), n_records=n_records,
        n_columns=n_columns, key_variables=config.key_names, n_cells=n_cells,
        n_partition_sets=n_sets, n_sensitive_cells=n_sensitive)
