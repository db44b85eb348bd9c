"""Re-deriving a release from its audit record (``sdc audit``, issue 20 item 7).

The same config copy, source and seed give the same files on any executor, so the audit can do
more than recount: it runs the release again, through the same pipeline and executor (a
streaming or Dask release out of core with the streaming executor), into a private temporary
folder, and compares

- every public file, byte for byte (a difference in a microdata file is reported record by
  record: how many records differ and the first ``record_id``);
- every field of ``internal/audit.json`` with the re-derived record, except the fields listed
  in :data:`NOT_CHECKABLE` (when and with which versions the release ran);
- through the re-derived record's ``internal_files``, every internal file (tables, reports,
  records file) by its SHA-256.

Nothing here writes into the release folder.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.write import sha256_bytes, sha256_file
from sdc.series.seeds import SeedInfo

__all__ = ["NOT_CHECKABLE", "Rederived", "audit_differences", "public_differences", "rederive"]

#: Fields of ``audit.json`` that are recorded but cannot be re-derived, with the reason
#: (docs/RELEASE_FOLDER.md lists them too).
NOT_CHECKABLE: dict[str, str] = {
    "created_at": "the time of the run; nothing in the files depends on it",
    "package_version": "the sdc version that ran; the audit re-derives with the installed "
                       "version, and equal files show the version made no difference",
    "python": "the Python version that ran (as package_version)",
    "seed.created_by_this_run": "whether that run created the seed file; the file's path and "
                                "SHA-256 are checked",
    "config.source_path": "where the config file lay; its exact text (config.text) is checked "
                          "by its SHA-256 and re-run",
}


_REPORTS = {"risk.json", "utility.json", "report.html"}


@dataclass
class Rederived:
    """The files of a release made again: public name -> the file the pipeline wrote into a
    private temporary ``folder`` (microdata) or bytes (codebook, tables), the audit record,
    and the count pass and plan that release made of the source (``counted``:
    :attr:`~sdc.method.outcome.ReleaseOutcome.counted`; ``plan``: a person file's plan), which
    the audit's checks read instead of counting and planning the source again. :meth:`close`
    removes the folder."""

    public: dict[str, Path | bytes]
    audit: dict[str, Any]
    counted: Any = None
    plan: Any = None
    folder: Path | None = None

    def sha256(self, name: str) -> str:
        """The SHA-256 of public file ``name`` (a written file hashed as it is read)."""
        v = self.public[name]
        return sha256_file(v) if isinstance(v, Path) else sha256_bytes(bytes(v))

    def data(self, name: str) -> bytes:
        """Public file ``name``'s bytes (read whole: only to say how a file differs)."""
        v = self.public[name]
        return v.read_bytes() if isinstance(v, Path) else bytes(v)

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def rederive(cfg: ReleaseConfig, recorded: dict[str, Any], seed_info: SeedInfo) -> Rederived:
    """Run the release of ``recorded`` (an ``audit.json``) again with ``cfg`` (rebuilt from its
    config copy, ``input.path`` set to the recorded source) and ``seed_info``, one way for every
    engine: the executor that made it (or the one the registry says audits its releases: a
    Dask release in record batches, the same files, no cluster needed) runs the release pipeline into a private
    temporary folder, and the reports and files are made as the release made them.

    The comparison with the previous release of a series is recomputed when the previous
    release still exists (its records file is read), else taken over as recorded.
    """
    from sdc.executors.registry import recorded_executor
    from sdc.pipeline.report_parts import batch_reports
    from sdc.release.assemble import assemble_batch_release
    from sdc.series.guard import series_risk_vs_previous

    series = dict(recorded.get("series") or {})
    prev = (series.get("previous") or {}).get("dir")
    if prev and Path(prev).is_dir():
        series.pop("risk_vs_previous", None)     # recomputed from the previous release
    if all(Path(d).is_dir() for d in series.get("members") or []):
        series.pop("certificate", None)          # recomputed from the members
    series.pop("lineage", None)                  # the lineage releases are compared again
    seed_info.series = series or None
    wanted = set(recorded.get("internal_files") or {}) & _REPORTS   # reports the release has
    text = recorded["config"]["text"]
    digest = recorded["input"]["sha256"]
    engine = recorded.get("engine")  # not recorded: the in-memory executor made it
    executor = recorded_executor(engine).auditor  # a cluster's release: in batches
    tmp = Path(tempfile.mkdtemp(prefix="sdc-audit-"))       # 0700
    try:
        (tmp / "internal").mkdir(mode=0o700)
        res = executor.release(cfg, seed_info.value, tmp / "public", cfg.executor,
                               records_path=tmp / "internal" / "records.parquet")
        s = series_risk_vs_previous(seed_info, res) if seed_info.series else None
        reports = batch_reports(res, cfg, seed=seed_info.value, series=s).files() if wanted else {}
        reports = {k: v for k, v in reports.items() if k in wanted}
        public, internal = assemble_batch_release(cfg, res, seed_info, input_sha256=digest,
                                                  config_text=text, engine=engine,
                                                  reports=reports)
        return Rederived(dict(public), json.loads(internal["audit.json"]), res.counted,
                         res.plan, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


#: Fields checked elsewhere: ``review`` (the approval, added after the release was made) by
#: :func:`sdc.publish.review.review_checks`.
CHECKED_ELSEWHERE = {"review"}


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if path in NOT_CHECKABLE or path in CHECKED_ELSEWHERE:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if sub in NOT_CHECKABLE or sub in CHECKED_ELSEWHERE:
                continue
            if k not in a:
                out.append(f"{sub}: missing (re-derived {_short(b[k])})")
            elif k not in b:
                out.append(f"{sub}: recorded {_short(a[k])}, not part of the re-derived record")
            else:
                _walk(a[k], b[k], sub, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries recorded, {len(b)} re-derived")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}[{i}]", out)
        return
    if a != b:
        out.append(f"{path}: recorded {_short(a)}, re-derived {_short(b)}")


def _short(v: Any, n: int = 60) -> str:
    t = json.dumps(v, ensure_ascii=False, default=str)
    return t if len(t) <= n else t[:n] + "..."


def audit_differences(recorded: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """Every field of ``recorded`` that differs from ``derived`` (dotted paths, list indices in
    brackets), except :data:`NOT_CHECKABLE`."""
    out: list[str] = []
    _walk(recorded, derived, "", out)
    return out


def _read_table(name: str, data: bytes) -> pd.DataFrame | None:
    if name.endswith(".parquet"):
        return pd.read_parquet(io.BytesIO(data))
    if name.endswith(".csv"):
        return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    return None


def public_differences(name: str, on_disk: bytes, derived: bytes) -> str | None:
    """None if the file equals the re-derived one, else what differs: for a microdata file
    the number of records that differ and the first record_id, else the byte count."""
    if on_disk == derived:
        return None
    try:
        a, b = _read_table(name, on_disk), _read_table(name, derived)
    except Exception as e:  # a damaged file: unreadable is the difference
        return f"{name}: differs from the re-derived release and cannot be read ({e})"
    if a is None or b is None:
        return (f"{name}: differs from the re-derived release ({len(on_disk)} bytes, "
                f"re-derived {len(derived)})")
    if list(a.columns) != list(b.columns):
        return f"{name}: columns {list(a.columns)}, re-derived {list(b.columns)}"
    if len(a) != len(b):
        return f"{name}: {len(a)} records, re-derived {len(b)}"
    a, b = a.astype(str), b.astype(str)
    bad = (a.to_numpy() != b.to_numpy()).any(axis=1)
    if not bad.any():
        return f"{name}: same records as the re-derived release, but not the same bytes"
    first = int(bad.argmax())
    rid = a.iloc[first, 0]
    cols = [c for c, x, y in zip(a.columns, a.iloc[first], b.iloc[first], strict=True) if x != y]
    return (f"{name}: {int(bad.sum())} record(s) differ from the re-derived release, first "
            f"record {a.columns[0]} = {rid} in {cols}")
