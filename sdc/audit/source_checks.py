"""The audit's reading of the source and the public file: the source found and its hash, both
counted (whole, or in batches for a batch executor's release), record counts, the output
schema, derived columns and the recoding loss re-derived."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sdc.audit.report import AuditReport
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.io.batches import input_sha256
from sdc.io.read import integer_keys, read_input, string_key_dtypes
from sdc.io.schemas import validate_output
from sdc.io.write import sha256_file
from sdc.method.dependence import measure_dependence
from sdc.method.derived import DerivedError
from sdc.method.draws import value_hash
from sdc.method.partition import Partitioned, partition_cells
from sdc.method.plan import plan_release
from sdc.pipeline.release import count_cells
from sdc.reports.recoding import fine_counts, recoding_section

if TYPE_CHECKING:
    from sdc.executors.registry import Executor

__all__ = ["counted_partitions", "derived_check", "read_in_memory", "read_public", "recoding_check", "source_found"]


def read_public(release_dir: Path, config) -> pd.DataFrame:
    """The released public microdata: ``public/microdata.parquet``, else ``microdata.csv``
    (key columns with string categories read as strings)."""
    pub = Path(release_dir) / "public"
    if (pub / "microdata.parquet").is_file():
        return pd.read_parquet(pub / "microdata.parquet")
    path = pub / "microdata.csv"
    header = pd.read_csv(path, nrows=0).columns.tolist()
    released = config.without_recoding()  # the public file holds released values
    frame = pd.read_csv(path, dtype=string_key_dtypes(released, header), low_memory=False)
    return integer_keys(frame, released)


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


def read_in_memory(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig, src: Path,
                   inp: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Source and public file read whole (releases of the in-memory executor), with the source's hash and
    row count and the public file's record count and output schema checked."""
    if not source_found(rep, src, src.is_file(), "source file", sha256_file, inp):
        return None
    cfg.input.path = src
    try:
        original = read_input(cfg)
    except InputError as e:
        rep.add("source: readable", False, str(e))
        return None
    n_rows = int(inp.get("n_rows", -1))
    rep.add("source: row count", len(original) == n_rows,
            f"{len(original)} rows (audit.json: {n_rows})")

    # -- public microdata ------------------------------------------------------------------------
    try:
        public = read_public(release_dir, cfg)
    except (OSError, ValueError) as e:
        rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
        return None
    rep.add("public microdata: record count", len(public) == len(original),
            f"{len(public)} released records, {len(original)} in the source")
    try:
        validate_output(public, cfg)
        rep.add("public microdata: output schema", True,
                "key domains, unique record_id, no identifier column")
    except ValueError as e:
        rep.add("public microdata: output schema", False, str(e))
    return original, public


def counted_partitions(rep: AuditReport, release_dir: Path, cfg: ReleaseConfig, src: Path,
                       inp: dict[str, Any], auditor: Executor
                       ) -> tuple[Partitioned, Partitioned, Any] | None:
    """Source and public file counted by the release pipeline's count pass
    (:func:`sdc.pipeline.release.count_cells`), with the runner of the executor the registry
    names for auditing the release's executor (``auditor``): in record batches for a
    streaming or Dask release (memory bounded by a batch and the cell table; the output schema
    checked per batch), whole for a pandas release (the in-memory runner: any input format,
    the output schema checked on the whole file)."""
    from contextlib import ExitStack

    from sdc.config.model import EngineSpec

    opened = ExitStack()  # the runners of a local executor hold nothing to close

    def runner(config: ReleaseConfig) -> Any:
        return opened.enter_context(auditor.open(config, EngineSpec()))

    if not source_found(rep, src, src.exists(), "source", input_sha256, inp):
        return None
    cfg.input.path = src
    try:
        orig = count_cells(runner(cfg), cfg, validate=False)
    except InputError as e:
        rep.add("source: readable", False, str(e))
        return None
    n_rows = int(inp.get("n_rows", -1))
    rep.add("source: row count", orig.n_records == n_rows,
            f"{orig.n_records} rows (audit.json: {n_rows})")
    pub = Path(release_dir) / "public"
    name = "microdata.parquet" if (pub / "microdata.parquet").is_file() else "microdata.csv"
    pcfg = cfg.without_recoding()  # the public file holds released values
    pcfg.input.path = pub / name
    pcfg.input.format = "parquet" if name.endswith(".parquet") else "csv"
    pcfg.input.delimiter = ","
    pcfg.input.encoding = "utf-8"
    pcfg.input.id_column = None
    pcfg.input.drop = []
    pcfg.input.weight = None
    pcfg.perturb = {}
    if pcfg.output is not None:
        pcfg.output.formats = ["parquet"]
    pcfg._base_dir = cfg._base_dir
    try:
        public = runner(pcfg)
        batched = bool(public.checked)
        rel = count_cells(public, pcfg, validate=False, dependence=False)
        if cfg.derived:
            cells_o = np.asarray(orig.cell_codes)
            derived_check(rep, cfg, orig.derived, cells_o, rel.derived,
                          np.asarray(rel.cell_codes))
        problems = []
        for batch in public.frames():
            try:
                validate_output(batch.reset_index(drop=True), cfg)
            except ValueError as e:
                problems.append(f"records {batch.index[0] + 1}-{batch.index[-1] + 1}: {e}"
                                if batched else str(e))
    except (OSError, ValueError) as e:
        rep.add("public microdata: readable", False, f"{type(e).__name__}: {e}")
        return None
    rep.add("public microdata: record count", rel.n_records == orig.n_records,
            f"{rel.n_records} released records, {orig.n_records} in the source")
    rep.add("public microdata: output schema", not problems,
            ("key domains, unique record_id within each batch, no identifier column (checked "
             "in batches)" if batched else "key domains, unique record_id, no identifier "
             "column") if not problems else "; ".join(problems[:3]))
    po = partition_cells(orig.cells, cfg)
    try:
        plan = plan_release(po, cfg)
        codes = orig.cell_codes
        rep.dependence = measure_dependence(orig.dependence, plan, cfg,
                                            lambda x: np.searchsorted(codes, x))
    except (InputError, ConfigError, SmallBlockError) as e:
        rep.add("dependence check: recomputed", False, f"cannot recompute: {e}")
    return po, partition_cells(rel.cells, cfg), orig.weight_total


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
