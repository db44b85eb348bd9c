"""The one entry of the release pipeline: what every executor, ``sdc plan``, ``sdc validate``
and the audit run with a runner (docs/ARCHITECTURE.md).

A runner (:class:`sdc.pipeline.passes.Runner`) maps the pipeline's per-batch functions (the
one set of passes, :mod:`sdc.pipeline.passes`) over the input; this module chooses the
pipeline's stages from the config, never from the runner: a person file is the person stage
(:mod:`sdc.pipeline.release`); a household file (``input.household_id``) adds the household
stage before it (:mod:`sdc.pipeline.households`, docs/HOUSEHOLDS.md). An executor therefore
never asks what kind of file it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sdc.config.model import ReleaseConfig
from sdc.pipeline.households import HouseholdPlan, plan_households, stream_household_release
from sdc.pipeline.kernels import CellCount, ReleaseOutcome
from sdc.pipeline.passes import Runner
from sdc.pipeline.release import count_cells, release_persons

__all__ = ["Counted", "Progress", "count", "release"]

#: ``progress(step)``: called when a step starts (the CLI's spinner, the flow's timings)
Progress = Callable[[str], None]
#: what the count pass gives: the cell table, or both stages of a household file planned
Counted = CellCount | HouseholdPlan


def count(runner: Runner, config: ReleaseConfig) -> Counted:
    """The count pass of ``config``'s file (validated per batch): the cell table
    (:class:`CellCount`); for a household file both stages planned from the count and
    identity passes (:class:`HouseholdPlan`)."""
    if config.input.household_id is not None:
        return plan_households(config, runner=runner)
    return count_cells(runner, config)


def release(runner: Runner, config: ReleaseConfig, seed: int, out_dir: Path, *,
            progress: Progress | None = None,
            records_path: Path | None = None, keep: bool = False,
            intruder: bool = True, reports: bool = True, files: bool = True) -> ReleaseOutcome:
    """Count, plan and apply: the public files into ``out_dir``, the internal records file to
    ``records_path`` when given; spills go to the runner's ``scratch`` folder (None: the
    system's temporary folder). ``keep``: the outcome also holds the released records in
    input order (:class:`~sdc.pipeline.kernels.ReleasedRecords`); ``intruder`` False: no
    background intruder simulation for risk.json (nothing will build the reports);
    ``reports`` False (a person file kept in memory): the report aggregates summed only when
    first used (``release_frame``: most callers never build the reports); ``files`` False
    (``release_frame`` without an output folder): a person file's public records kept in the
    outcome, not written when they need not be."""
    if config.input.household_id is not None:
        return stream_household_release(config, seed, out_dir, tmp_dir=runner.scratch,
                                        progress=progress, records_path=records_path,
                                        runner=runner, keep=keep)
    return release_persons(runner, config, seed, out_dir, tmp_dir=runner.scratch,
                           progress=progress, records_path=records_path, where=runner.where,
                           keep=keep, intruder=intruder, reports=reports, files=files)
