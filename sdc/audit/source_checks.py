"""The audit's reading of the source and the public file: the source found and its hash, both
counted by the pipeline's count pass (whole, or in batches for a batch executor's release; a
household file's in batches on every executor), record counts, the output schema, derived
columns and the recoding loss re-derived."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sdc.audit.household_checks import PublicHouseholds
from sdc.audit.report import AuditReport
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.io.schemas import validate_output
from sdc.method.cell_passes import cell_table
from sdc.method.dependence import measure_dependence
from sdc.method.derived import DerivedError
from sdc.method.designs import design_of, plan_release
from sdc.method.draws import value_hash
from sdc.method.households import check_households, person_config
from sdc.method.partition import Partitioned, partition_cells
from sdc.method.plan import ReleasePlan
from sdc.pipeline.release import count_cells
from sdc.reports.recoding import fine_counts, recoding_section

if TYPE_CHECKING:
    from sdc.executors.registry import Executor

__all__ = ["counted_households", "counted_partitions", "derived_check", "open_runner",
           "output_schema", "public_config", "recoding_check", "source_found"]


def source_found(rep: AuditReport, src: Path, exists: bool, what: str,
                 digest_of: Callable[[Path], str], inp: dict[str, Any]) -> bool:
    """Report the source's existence and its hash against ``audit.json``'s; False when it
    is not there (nothing more can be checked)."""
    if not exists:
        rep.add("source: exists", False, f"{what} {str(src)!r} not found; if it moved, point "
                "the audit at it: sdc audit RELEASE_DIR --source NEW_PATH")
        return False
    digest = digest_of(src)
    rep.add("source: hash", digest == inp.get("sha256"),
            f"{src} matches its recorded SHA-256" if digest == inp.get("sha256") else
            f"{src} has SHA-256 {digest[:16]}..., audit.json records "
            f"{str(inp.get('sha256'))[:16]}...: the source changed since the release")
    return True


def public_config(cfg: ReleaseConfig, release_dir: Path) -> ReleaseConfig:
    """The config that reads the public file of ``release_dir`` as an input: released values
    (no recoding), ``microdata.parquet`` (else ``.csv``), no id, dropped or perturbed column;
    a person file without its weight, a household file with its household id, household
    columns and weight (the household-level values checked per household)."""
    pub = Path(release_dir) / "public"
    name = "microdata.parquet" if (pub / "microdata.parquet").is_file() else "microdata.csv"
    pcfg = cfg.without_recoding()  # the public file holds released values
    pcfg.input.path = pub / name
    pcfg.input.format = "parquet" if name.endswith(".parquet") else "csv"
    pcfg.input.delimiter = ","
    pcfg.input.encoding = "utf-8"
    pcfg.input.id_column = None
    pcfg.input.drop = []
    pcfg.perturb = {}
    if cfg.input.household_id is None:
        pcfg.input.weight = None
    else:
        pcfg.derived = []  # the derived columns are compared with the re-derived release
    if pcfg.output is not None:
        pcfg.output.formats = ["parquet"]
    pcfg._base_dir = cfg._base_dir
    return pcfg


def open_runner(auditor: Executor, stack: ExitStack) -> Callable[[ReleaseConfig], Any]:
    """``runner(config)``: the auditor's runner of ``config``'s input (the config's
    ``executor:`` batch size), closed with ``stack``."""
    return lambda config: stack.enter_context(auditor.open(config, config.executor))


def output_schema(rep: AuditReport, frames: Iterable[pd.DataFrame], cfg: ReleaseConfig,
                  batched: bool) -> None:
    """The public file's output schema, batch by batch (``batched``: the details name the
    batch's records)."""
    problems = []
    for batch in frames:
        try:
            validate_output(batch.reset_index(drop=True), cfg)
        except ValueError as e:
            problems.append(f"records {batch.index[0] + 1}-{batch.index[-1] + 1}: {e}"
                            if batched else str(e))
    rep.add("public microdata: output schema", not problems,
            ("key domains, unique record_id within each batch, no identifier column (checked "
             "in batches)" if batched else "key domains, unique record_id, no identifier "
             "column") if not problems else "; ".join(problems[:3]))


def _counted_source(rep: AuditReport, inp: dict[str, Any], counted: Any,
                   count: Callable[[], Any], refusals: tuple[type[Exception], ...]) -> Any:
    """The source's count (``counted`` when the re-derived release made it, else ``count()``)
    with its row count checked against audit.json's; None (failed "source: readable") when
    ``count()`` raises one of ``refusals``."""
    if counted is None:
        try:
            counted = count()
        except refusals as e:
            rep.add("source: readable", False, str(e))
            return None
    n_rows = int(inp.get("n_rows", -1))
    rep.add("source: row count", counted.n_records == n_rows,
            f"{counted.n_records} rows (audit.json: {n_rows})")
    return counted


def counted_households(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig,
                       inp: dict[str, Any], auditor: Executor, source: Any = None
                       ) -> tuple[Any, PublicHouseholds] | None:
    """A household release's source (``cfg.input.path``, found) and public file counted by the
    pipeline's count pass with
    the auditor's runner, out of core on every executor: the source counted and both stages
    planned (:meth:`Executor.count <sdc.executors.registry.Executor.count>`: a
    :class:`~sdc.pipeline.household_result.HouseholdPlan`; ``source``: that plan, already
    made by the re-derived release), the public file counted in batches
    (:func:`~sdc.pipeline.household_count.count_households`: its person cells and household
    table; the households whose household-level values differ gathered in a filtered read,
    refused with the in-memory check's words), its record count and output schema checked."""
    from sdc.pipeline.household_count import count_households, refuse_inconsistent

    source = _counted_source(rep, inp, source, lambda: auditor.count(cfg, cfg.executor),
                             (InputError, ConfigError, SmallBlockError))
    if source is None:
        return None
    pcfg = public_config(cfg, release_dir)
    with ExitStack() as stack:
        try:
            public = open_runner(auditor, stack)(pcfg)
            try:  # the household id and household columns are there
                check_households(pd.DataFrame(columns=public.input_columns()), pcfg)
            except InputError as e:
                rep.add("households: consistent", False, str(e))
                return None
            counted = count_households(public, pcfg, [], validate=False)
            agg = counted.households.result()
            rep.add("public microdata: record count", counted.n == source.n_records,
                    f"{counted.n} released records, {source.n_records} in the source")
            output_schema(rep, public.frames(), cfg, bool(public.checked))
            try:
                refuse_inconsistent(public, pcfg, agg)
                rep.add("households: consistent", True, "every public household has one "
                        "value of each household-level key and household column")
            except InputError as e:
                rep.add("households: consistent", False, str(e))
        except (OSError, ValueError, KeyError) as e:
            rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
            return None
    return source, PublicHouseholds(cell_table(counted.codes, counted.counts,
                                               person_config(cfg)), agg)


def counted_partitions(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig,
                       inp: dict[str, Any], auditor: Executor, counted: Any = None,
                       plan: ReleasePlan | None = None
                       ) -> tuple[Partitioned, Partitioned, Any, ReleasePlan | None] | None:
    """Source (``cfg.input.path``, found) and public file counted by the release pipeline's
    count pass (:func:`sdc.pipeline.release.count_cells`), with the runner of the executor the
    registry names for auditing the release's executor (``auditor``): in record batches for a
    streaming or Dask release (memory bounded by a batch and the cell table; the output schema
    checked per batch), whole for a pandas release (the in-memory runner: any input format,
    the output schema checked on the whole file). ``counted`` and ``plan``: the source's
    count and plan as the re-derived release made them (then the source is not counted and
    planned again). Returns the source's and the public file's partitions, the source's
    weight totals and the plan (None when only counted here)."""
    from sdc.config.model import EngineSpec

    opened = ExitStack()  # the runners of a local executor hold nothing to close

    def runner(config: ReleaseConfig) -> Any:
        return opened.enter_context(auditor.open(config, EngineSpec()))

    orig = _counted_source(rep, inp, counted,
                           lambda: count_cells(runner(cfg), cfg, validate=False), (InputError,))
    if orig is None:
        return None
    pcfg = public_config(cfg, release_dir)
    try:
        public = runner(pcfg)
        batched = bool(public.checked)
        rel = count_cells(public, pcfg, validate=False, dependence=False)
        if cfg.derived:
            cells_o = np.asarray(orig.cell_codes)
            derived_check(rep, cfg, orig.derived, cells_o, rel.derived,
                          np.asarray(rel.cell_codes))
        rep.add("public microdata: record count", rel.n_records == orig.n_records,
                f"{rel.n_records} released records, {orig.n_records} in the source")
        output_schema(rep, public.frames(), cfg, batched)
    except (OSError, ValueError) as e:
        rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
        return None
    po = partition_cells(orig.cells, cfg)
    if plan is not None:  # the re-derived release measured the dependence on its plan
        rep.dependence = list(plan.dependence)
    else:
        try:
            codes = orig.cell_codes
            unweighted = plan_release(po, cfg, design=design_of(cfg, weighted=False))
            rep.dependence = measure_dependence(orig.dependence, unweighted, cfg,
                                                lambda x: np.searchsorted(codes, x))
        except (InputError, ConfigError, SmallBlockError) as e:
            rep.add("dependence check: recomputed", False, f"cannot recompute: {e}")
    return po, partition_cells(rel.cells, cfg), orig.weight_total, plan


def derived_check(rep: AuditReport, cfg: ReleaseConfig, src, src_cells: np.ndarray, pub,
                  pub_cells: np.ndarray) -> None:
    """Every ``derived:`` column of the public file is a function of the released cell and
    equals the source's mapping there (compared by value hash)."""
    bad = []
    o_src, o_pub = np.argsort(src_cells), np.argsort(pub_cells)
    for c in cfg.derived:
        try:
            sv = src.values(c, src_cells[o_src], lambda j: f"cell {j}")
            pv = pub.values(c, pub_cells[o_pub], lambda j: f"cell {j}")
        except DerivedError as e:
            bad.append(str(e))
            continue
        at = np.searchsorted(src_cells[o_src], pub_cells[o_pub])
        at = np.minimum(at, max(src_cells.size - 1, 0))
        known = src_cells[o_src][at] == pub_cells[o_pub]
        diff = ~known | (value_hash(sv.take(at)) != value_hash(pv))
        if diff.any():
            bad.append(f"{c!r}: {int(diff.sum())} released cell(s) hold a value other than the "
                       "source's mapping of their key values")
    rep.add("derived columns follow the released keys", not bad,
            f"{cfg.derived}: every released record carries the source's mapping of its "
            "released key values" if not bad else "; ".join(bad[:3]))


def recoding_check(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig,
                   po: Partitioned) -> None:
    """The recoding loss re-derived from the source (its declared values counted again) and
    compared with ``utility.json``'s ``recoding`` section."""
    try:
        again = recoding_section(cfg, fine_counts(cfg), po.cells.key_codes, po.cells.frequency)
        stored = json.loads((release_dir / "internal" / "utility.json").read_text())["recoding"]
    except (OSError, ValueError, KeyError) as e:
        rep.add("recoding loss = recorded", False, f"cannot re-derive it: {e}")
        return
    bad = [r["name"] for r, s in zip(again["keys"], stored.get("keys", []), strict=False)
           if r["records_coarsened"] != s.get("records_coarsened")
           or not math.isclose(r["entropy_after"], s.get("entropy_after", -1), rel_tol=1e-9,
                               abs_tol=1e-12)
           or not math.isclose(r["entropy_before"], s.get("entropy_before", -1), rel_tol=1e-9,
                               abs_tol=1e-12)]
    ok = (not bad and len(again["keys"]) == len(stored.get("keys", []))
          and again["records_coarsened"] == stored.get("records_coarsened"))
    rep.add("recoding loss = recorded", ok,
            f"{len(again['keys'])} recoded key(s), {again['records_coarsened']} records with a "
            "coarsened value, entropies recomputed from the source" if ok else
            f"recomputed recoding loss differs from utility.json for {bad or 'the overall count'}")
