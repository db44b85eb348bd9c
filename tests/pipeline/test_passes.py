"""One set of passes serves person and household files (docs/ARCHITECTURE.md, issue 45 item 2):
a release of either kind maps the same per-batch functions of :mod:`sdc.pipeline.passes`, with
the file's stage object (:class:`~sdc.pipeline.release.PersonStage`,
:class:`~sdc.pipeline.household_stage.HouseholdFileStage`) as their first shared argument.
The static side (no module defines a pass of its own) is
``tests/architecture/test_one_set_of_passes.py``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from engine_configs import household_config

from sdc.config.load import parse_config
from sdc.executors.streaming import LocalBatches
from sdc.pipeline.run import release
from sdc.samples import generate_household_sample


class _Recording(LocalBatches):
    """The streaming runner, recording which function each pass maps and with what stage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mapped: list[tuple[str, str]] = []

    def map(self, fn, shared, per_piece=None, columns=None):
        self.mapped.append((f"{fn.__module__}.{fn.__name__}", type(shared[0]).__name__))
        return super().map(fn, shared, per_piece, columns)


def _release(tmp_path, household: bool) -> list[tuple[str, str]]:
    tmp_path.mkdir()
    frame = generate_household_sample(1200, seed=5, n_regions=6)
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), inp, row_group_size=300)
    d = household_config()
    d["input"].update({"path": str(inp), "format": "parquet", "drop": ["income"]})
    if not household:  # the same file released as persons
        for k in ("household_id", "household_columns", "id_column"):
            d["input"].pop(k)  # no id column: the identity pass runs
        d["input"]["drop"] += ["person_id", "hh_id", "water", "hh_weight"]
        for spec in d["key_variables"].values():
            spec.pop("level", None)
    d["output"] = {"dir": str(tmp_path / "out"), "formats": ["parquet"]}
    cfg = parse_config(d)
    runner = _Recording(cfg, 400)
    release(runner, cfg, 7, tmp_path / "out", intruder=False)
    return runner.mapped


def test_person_and_household_files_map_the_same_pass_functions(tmp_path):
    """Count, identity and apply of both kinds of file are the functions of
    ``sdc.pipeline.passes``; only the stage object differs."""
    persons = _release(tmp_path / "p", household=False)
    households = _release(tmp_path / "h", household=True)
    passes = [f"sdc.pipeline.passes.{p}_batch" for p in ("count", "identity", "apply")]
    person_fns = [f for f, _ in persons]
    household_fns = [f for f, _ in households]
    for fn in passes:
        assert fn in person_fns, (fn, person_fns)
        assert fn in household_fns, (fn, household_fns)
    assert {s for f, s in persons if f in passes} == {"PersonStage"}
    assert {s for f, s in households if f in passes} == {"HouseholdFileStage"}
    assert all(f.startswith("sdc.pipeline.passes.") for f in person_fns + household_fns)
