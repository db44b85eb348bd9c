"""The risk of a release series, measured from the releases' record-level internal files.

Record-level internal file ``internal/records.parquet`` (internal only, mode 0600): one row
per record with ``identity`` (the record's 64-bit identity used for its draws), ``cell`` and
``released`` (the cell identities of its true and released key values, see
:func:`sdc.method.draws.cell_identity`). Nothing else: no key values, no row order of the
input. It is what the series risk is measured from.

**Series risk** (:func:`series_risk`, ``sdc audit --series DIR ...``), measured from the
records files of the releases, in the order given:

- *changed share*: of the records present in two consecutive releases, the share whose
  released key values differ between the two;
- *linking intruder*: links the records of all releases by identity (the best an intruder
  linking by non-key values can do), takes each record's modal released cell over the series
  (ties: the latest release), and, knowing a target's true key values c in the last release,
  picks uniformly one of the a records of the last release whose modal cell is c. Its
  correct-match rate is reported per (t_j, a) class, like the single-release intruder, next to
  the same intruder on the last release alone and to xi.

What is certified exactly and what is only measured:

- Per release, the exact certificate of docs/METHOD.md section 6 holds unchanged (each record's
  law is eq. 5.3, records independent).
- A record whose true cell, t_j, theta and PRB (set of cell identities) are the same in
  every release of the series is released identically in all of them (a deterministic
  function of seed and identity): its released history is one draw, so the series adds no
  observation about it and its risk against the linking intruder is its single-release risk
  R_j(a, t) <= xi, *provided the other records it is confused with are also unchanged*.
- Records whose t_j, theta or PRB changed are redrawn only partly (monotone move decision:
  a changed threshold flips only the records between the two thresholds; trie-rendezvous
  destination: a joining or leaving cell changes about depth/k of the movers, depth ~ log16 k):
  the series risk over such records, and over cells mixing both kinds, is only measured,
  not certified. The report shows the measurement next to xi.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sdc.io.spill import BucketSpill, bucket_bits
from sdc.series.membership import SeriesError, audit_of

__all__ = ["PAIR_ROWS", "RECORDS_FILE", "SeriesRisk", "batch_series_risk_vs_previous",
           "load_records", "records_path", "risk_vs_previous", "series_risk",
           "series_risk_of_dirs", "series_risk_of_pair", "series_risk_vs_previous"]

RECORDS_FILE = "records.parquet"


# -- series risk --------------------------------------------------------------------------------
def records_path(release_dir: Path) -> Path:
    """``internal/records.parquet`` of a release (:class:`SeriesError` if it has none)."""
    path = Path(release_dir) / "internal" / RECORDS_FILE
    if not path.is_file():
        raise SeriesError(
            f"{str(path)!r} does not exist: the release was made before record-level internal "
            "data existed (or internal/ was removed), so its series risk cannot be measured; "
            "rerun the release with the same seed file to create it")
    return path


def load_records(release_dir: Path) -> pd.DataFrame:
    """``internal/records.parquet`` of a release (columns identity, cell, released)."""
    return pd.read_parquet(records_path(release_dir), columns=["identity", "cell", "released"])


@dataclass
class SeriesRisk:
    """Measured risk of a release series (see the module docstring).

    Attributes
    ----------
    n_releases : int
    changed : DataFrame
        One row per consecutive pair: ``release``, ``n_common`` (records in both),
        ``n_changed`` (released key values differ), ``share``.
    intruder : DataFrame
        One row per (t, a) class of the last release's targets with 1 <= a <= a_max: ``t``
        (the target's t_j in the last release), ``a`` (matching records), ``n_series`` and
        ``series_rate`` (targets of the class and correct-match rate of the linking intruder,
        modal cell over the series), ``n_single`` and ``single_rate`` (the same intruder on the
        last release alone; its classes use its own a).
    xi : float
    """

    n_releases: int
    changed: pd.DataFrame
    intruder: pd.DataFrame
    xi: float

    @property
    def max_changed_share(self) -> float:
        return float(self.changed["share"].max()) if len(self.changed) else 0.0

    def rate_a1(self, which: str = "series_rate") -> float:
        """Correct-match rate over all targets with exactly one matching record."""
        one = self.intruder[(self.intruder["a"] == 1) & self.intruder[which].notna()]
        w = one["n_" + which.removesuffix("_rate")]
        return float((one[which] * w).sum() / w.sum()) if w.sum() else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n_releases": self.n_releases, "xi": self.xi,
                "max_changed_share": self.max_changed_share,
                "rate_one_match_series": self.rate_a1("series_rate"),
                "rate_one_match_single": self.rate_a1("single_rate"),
                "changed": self.changed.to_dict(orient="records"),
                "intruder": self.intruder.to_dict(orient="records")}


def _intruder(last: pd.DataFrame, modal: pd.Series) -> pd.DataFrame:
    """Per target of ``last``: (t, a, score) for the intruder who sees ``modal`` per identity."""
    m = modal.reindex(last["identity"].to_numpy()).to_numpy()
    cell = last["cell"].to_numpy()
    t = last.groupby("cell")["identity"].transform("size").to_numpy()
    a_of = pd.Series(m).value_counts()
    a = a_of.reindex(cell).fillna(0).to_numpy().astype(np.int64)
    correct = m == cell
    score = np.where(a > 0, correct / np.maximum(a, 1), 0.0)
    return pd.DataFrame({"t": t, "a": a, "score": score})


def series_risk(records: list[pd.DataFrame], xi: float, *, a_max: int = 5) -> SeriesRisk:
    """Measure the risk of a series from the records tables of its releases, in order.

    Parameters
    ----------
    records : list of DataFrame
        Per release: columns ``identity``, ``cell``, ``released`` (uint64).
    xi : float
        The risk target, reported alongside.
    a_max : int
        Classes a = 1..a_max are reported.

    Returns
    -------
    SeriesRisk
    """
    if not records:
        raise SeriesError("a series needs at least one release")
    rows = []
    for i in range(1, len(records)):
        prev = records[i - 1].set_index("identity")["released"]
        cur = records[i][["identity", "released"]]
        common = cur[cur["identity"].isin(prev.index)]
        changed = common["released"].to_numpy() != prev.reindex(common["identity"]).to_numpy()
        rows.append(_changed_row(i, len(common), int(changed.sum())))
    changed_df = pd.DataFrame(rows, columns=["release", "n_common", "n_changed", "share"])

    stacked = pd.concat([r[["identity", "released"]].assign(rel=i)
                         for i, r in enumerate(records)], ignore_index=True)
    g = stacked.groupby(["identity", "released"], sort=False).agg(n=("rel", "size"),
                                                                  last=("rel", "max"))
    g = g.reset_index().sort_values(["identity", "n", "last"], kind="stable")
    modal = g.drop_duplicates("identity", keep="last").set_index("identity")["released"]
    last = records[-1]
    series = _intruder(last, modal)
    single = _intruder(last, last.set_index("identity")["released"])
    return SeriesRisk(len(records), changed_df, _intruder_table(series, single, a_max),
                      float(xi))


def _changed_row(i: int, n: int, n_changed: int) -> dict[str, Any]:
    """Row of :attr:`SeriesRisk.changed` (``share``: the mean of the changed flags)."""
    share = float(np.float64(n_changed) / n) if n else 0.0
    return {"release": i, "n_common": n, "n_changed": n_changed, "share": share}


def _intruder_table(series: pd.DataFrame, single: pd.DataFrame, a_max: int) -> pd.DataFrame:
    """:attr:`SeriesRisk.intruder` from the per-target (t, a, score) of both intruders."""
    def classes(view: pd.DataFrame, name: str) -> pd.DataFrame:
        v = view[(view["a"] >= 1) & (view["a"] <= a_max)]
        return v.groupby(["t", "a"])["score"].agg(["size", "mean"]).rename(
            columns={"size": f"n_{name}", "mean": f"{name}_rate"})

    intr = classes(series, "series").join(classes(single, "single"), how="outer")
    intr = intr.reset_index().fillna({"n_series": 0, "n_single": 0})
    intr[["t", "a", "n_series", "n_single"]] = intr[["t", "a", "n_series", "n_single"]].astype(
        np.int64)
    return intr[["t", "a", "n_series", "series_rate", "n_single", "single_rate"]]


# -- two releases from their records files, out of core ----------------------------------------
#: Records of one file a pairwise comparison holds at once (identity and released: 16 bytes
#: each, so 64 MB a side); larger files are spilled by identity range and joined range by range.
PAIR_ROWS = 1 << 22
_A_MAX = 5  # the classes a = 1..5 reported (series_risk's default a_max)


def _row_groups(path: Path, columns: list[str]):
    pf = pq.ParquetFile(path, pre_buffer=False)
    for g in range(pf.metadata.num_row_groups):
        yield pf.read_row_group(g, columns=columns)


def _identity_buckets(path: Path, bits: int, folder: Path | None) -> list:
    """(identity, released) of a records file split by the top ``bits`` bits of the identity:
    with ``bits = 0`` the whole file in memory (one item), else one pass spilling every row
    group into ``2**bits`` Arrow IPC files under ``folder`` (their paths)."""
    if bits == 0:
        ids, rel = [], []
        for t in _row_groups(path, ["identity", "released"]):
            ids.append(t.column("identity").to_numpy())
            rel.append(t.column("released").to_numpy())
        return [(np.concatenate(ids) if ids else np.zeros(0, np.uint64),
                 np.concatenate(rel) if rel else np.zeros(0, np.uint64))]
    assert folder is not None
    spill = BucketSpill(folder, bits)
    try:
        for t in _row_groups(path, ["identity", "released"]):
            spill.add(t, t.column("identity").to_numpy())
    finally:
        spill.close()
    return spill.buckets()


def _bucket_arrays(item) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(item, tuple):
        return item
    if not item.exists():
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    import pyarrow as pa

    with pa.memory_map(str(item)) as src:
        t = pa.ipc.open_file(src).read_all()
    return (t.column("identity").to_numpy().copy(), t.column("released").to_numpy().copy())


def _changed_of_files(previous: Path, current: Path,
                      scratch: Path | None = None) -> tuple[int, int]:
    """(records in both, of those whose released cell differs): the two files joined by
    identity, out of core when they are large (each spilled once by identity range into
    about :data:`PAIR_ROWS` records a bucket, then joined bucket by bucket)."""
    import shutil
    import tempfile

    n = max(pq.ParquetFile(p).metadata.num_rows for p in (previous, current))
    bits = bucket_bits(n, PAIR_ROWS)
    # the spill is internal data: an owner-only folder (mkdtemp) in ``scratch``
    tmp = Path(tempfile.mkdtemp(prefix=".sdc-series-", dir=scratch)) if bits else None
    try:
        prev_b = _identity_buckets(previous, bits, tmp / "previous" if tmp else None)
        cur_b = _identity_buckets(current, bits, tmp / "current" if tmp else None)
        n_common = n_changed = 0
        for pb, cb in zip(prev_b, cur_b, strict=True):
            pi, pr = _bucket_arrays(pb)
            order = np.argsort(pi)
            pi, pr = pi[order], pr[order]
            del order
            if pi.size > 1 and bool((pi[1:] == pi[:-1]).any()):
                # as the in-memory comparison: a repeated identity cannot be looked up
                raise ValueError(f"{str(previous)!r} has a repeated identity: cannot reindex "
                                 "on an axis with duplicate labels")
            ci, cr = _bucket_arrays(cb)
            if pi.size == 0 or ci.size == 0:
                continue
            pos = np.minimum(np.searchsorted(pi, ci), pi.size - 1)
            hit = pi[pos] == ci
            n_common += int(hit.sum())
            n_changed += int((pr[pos[hit]] != cr[hit]).sum())
        return n_common, n_changed
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _intruder_of_file(path: Path) -> pd.DataFrame:
    """:func:`_intruder` of a release against its own released cells (what the linking
    intruder of two releases sees, see :func:`series_risk_of_pair`), out of core: the
    per-cell counts t (true cell) and a (released cell) in two passes over the file, then the
    targets whose a is small enough to be reported, in file order."""
    cols = ["cell", "released"]
    distinct = np.zeros(0, np.uint64)
    for t in _row_groups(path, cols):
        distinct = np.union1d(distinct, np.unique(t.column("cell").to_numpy()))
    n_cells = max(distinct.size, 1)
    t_count = np.zeros(n_cells, np.int64)
    a_count = np.zeros(n_cells, np.int64)

    def locate(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.minimum(np.searchsorted(distinct, values), n_cells - 1)
        return pos, (distinct[pos] == values) if distinct.size else np.zeros(values.size, bool)

    for t in _row_groups(path, cols):
        cell, _ = locate(t.column("cell").to_numpy())
        t_count += np.bincount(cell, minlength=n_cells)
        rel, hit = locate(t.column("released").to_numpy())
        a_count += np.bincount(rel[hit], minlength=n_cells)
    parts = []
    for t in _row_groups(path, cols):
        c = t.column("cell").to_numpy()
        cell, _ = locate(c)
        a = a_count[cell]
        keep = (a >= 1) & (a <= _A_MAX)
        if keep.any():
            correct = t.column("released").to_numpy()[keep] == c[keep]
            ak = a[keep]
            parts.append(pd.DataFrame({"t": t_count[cell[keep]], "a": ak,
                                       "score": np.where(ak > 0, correct / np.maximum(ak, 1),
                                                         0.0)}))
    if not parts:
        return pd.DataFrame({"t": np.zeros(0, np.int64), "a": np.zeros(0, np.int64),
                             "score": np.zeros(0)})
    return pd.concat(parts, ignore_index=True)


def series_risk_of_pair(previous: Path, current: Path, xi: float, *,
                        scratch: Path | None = None) -> SeriesRisk:
    """:func:`series_risk` of two releases given by their records files, out of core (the
    same figures, bit for bit: ``tests/release/test_series.py``).

    With two releases the linking intruder's modal cell of every record of the last release
    is its released cell there (equal cells count twice, different ones tie and the tie goes
    to the latest release), so the series intruder is the single-release one; only the
    changed share needs the join, made one identity range at a time (:data:`PAIR_ROWS`).
    Memory: the cell counts and one identity range of each file; ``scratch``: where large
    files are spilled (default: the system's temporary folder).
    """
    n_common, n_changed = _changed_of_files(Path(previous), Path(current), scratch)
    changed = pd.DataFrame([_changed_row(1, n_common, n_changed)],
                           columns=["release", "n_common", "n_changed", "share"])
    view = _intruder_of_file(Path(current))
    return SeriesRisk(2, changed, _intruder_table(view, view, _A_MAX), float(xi))


def series_risk_of_dirs(release_dirs: list[Path], xi: float | None = None) -> SeriesRisk:
    """:func:`series_risk` of release folders (their ``internal/records.parquet``); xi from the
    last release's audit when not given. Two releases are measured out of core
    (:func:`series_risk_of_pair`), more in memory (every records file whole)."""
    dirs = [Path(d) for d in release_dirs]
    if xi is None:
        audit = audit_of(dirs[-1]) or {}
        xi = float((audit.get("risk") or {}).get("xi", float("nan")))
    if len(dirs) == 2:  # out of core (the same figures)
        return series_risk_of_pair(records_path(dirs[0]), records_path(dirs[1]), xi)
    return series_risk([load_records(d) for d in dirs], xi)


def risk_vs_previous(previous: Path, records: pd.DataFrame | Path, xi: float) -> dict[str, Any]:
    """Series risk of (previous release, this one): ``audit.json``'s ``series.risk_vs_previous``
    and, through the flow, ``risk.json``'s ``series`` (the same dict, computed once).

    Returns ``previous`` (the folder), ``n_common`` (records in both releases), ``n_changed``
    and ``changed_share`` (of those, released key values differ), ``rate_one_match_series`` /
    ``rate_one_match_single`` (linking intruder over both releases / on this one alone, targets
    with a = 1 matching record), ``xi`` and ``intruder`` (:attr:`SeriesRisk.intruder` rows).
    When the previous release cannot be measured (no records file), ``previous`` and ``error``.
    """
    try:
        if isinstance(records, pd.DataFrame):
            risk = series_risk([load_records(previous), records], xi)
        else:  # a records file (batch engines): out of core, spilled beside it
            risk = series_risk_of_pair(records_path(previous), Path(records), xi,
                                       scratch=Path(records).parent)
    except (SeriesError, OSError, ValueError) as e:
        return {"previous": str(previous), "error": str(e)}
    d = risk.to_dict()
    return {"previous": str(previous), "changed_share": d["max_changed_share"],
            "n_common": int(risk.changed["n_common"].sum()),
            "n_changed": int(risk.changed["n_changed"].sum()),
            "rate_one_match_series": d["rate_one_match_series"],
            "rate_one_match_single": d["rate_one_match_single"], "xi": float(xi),
            "intruder": d["intruder"]}


def series_risk_vs_previous(seed_info: Any, result: Any,
                            records: pd.DataFrame | None = None) -> dict[str, Any] | None:
    """:func:`risk_vs_previous` for the run placed by :func:`series_for`, computed once and kept
    in ``seed_info.series["risk_vs_previous"]``: the audit record and the report both use it.

    ``result`` is the run's :class:`~sdc.method.apply.ReleaseResult`; ``records`` its
    :meth:`~sdc.method.apply.ReleaseResult.records_table` (built here when needed and not
    given). None when the series has no previous release or the result has no cell ids.
    """
    series = getattr(seed_info, "series", None) or {}
    if "risk_vs_previous" in series:
        return series["risk_vs_previous"]
    prev = (series.get("previous") or {}).get("dir")
    if not prev or result.cell_id is None:
        return None
    if records is None:
        records = result.records_table()
    series["risk_vs_previous"] = risk_vs_previous(Path(prev), records, float(result.xi))
    return series["risk_vs_previous"]


def batch_series_risk_vs_previous(seed_info: Any, records_file: Path | None,
                                  xi: float) -> dict[str, Any] | None:
    """:func:`series_risk_vs_previous` for a release of the streaming or Dask engine, from the
    ``records.parquet`` it wrote, out of core (:func:`series_risk_of_pair`: the two files are
    joined by identity one identity range at a time). Computed once and kept in
    ``seed_info.series["risk_vs_previous"]``; None without a previous release."""
    series = getattr(seed_info, "series", None) or {}
    if "risk_vs_previous" in series:
        return series["risk_vs_previous"]
    prev = (series.get("previous") or {}).get("dir")
    if not prev or records_file is None:
        return None
    series["risk_vs_previous"] = risk_vs_previous(Path(prev), Path(records_file), float(xi))
    return series["risk_vs_previous"]

