"""The risk of a release series, measured from the releases' record-level internal files.

Record-level internal file ``internal/records.parquet`` (internal only, mode 0600): one row
per record with ``identity`` (the record's 64-bit identity used for its draws), ``cell`` and
``released`` (the cell identities of its true and released key values, see
:func:`sdc.method.draws.cell_identity`). Nothing else: no key values, no row order of the
input. It is what the series risk is measured from.

**Series risk** (:func:`series_risk_of_files`, ``sdc audit --series DIR ...``), measured
from the records files of the releases, in the order given, out of core on every engine (the
files are joined by identity one identity range at a time):

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
import pyarrow as pa
import pyarrow.parquet as pq

from sdc.io.spill import BucketSpill, bucket_bits
from sdc.method.sorting import distinct
from sdc.series.certificate import SeriesCertificate, series_certificate
from sdc.series.membership import SeriesError, audit_of

__all__ = ["PAIR_ROWS", "RECORDS_FILE", "SeriesRisk", "records_path", "risk_vs_previous", "series_risk_of_dirs",
           "series_risk_of_files"]

#: A records file: its path, or its bytes (an in-memory release's, before it is written).
Records = Path | bytes

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

    def certificate(self) -> SeriesCertificate:
        """The series certificate: the max over (t, a) classes and the classes above xi
        (:mod:`sdc.series.certificate`)."""
        return series_certificate(self.intruder, self.xi, self.n_releases)

    def to_dict(self) -> dict[str, Any]:
        return {"n_releases": self.n_releases, "xi": self.xi,
                "max_changed_share": self.max_changed_share,
                "rate_one_match_series": self.rate_a1("series_rate"),
                "rate_one_match_single": self.rate_a1("single_rate"),
                "changed": self.changed.to_dict(orient="records"),
                "intruder": self.intruder.to_dict(orient="records")}


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


def _parquet(source: Records) -> pq.ParquetFile:
    return pq.ParquetFile(pa.BufferReader(source) if isinstance(source, bytes) else source,
                          pre_buffer=False)


def _row_groups(source: Records, columns: list[str]):
    pf = _parquet(source)
    for g in range(pf.metadata.num_row_groups):
        yield pf.read_row_group(g, columns=columns)


_PAIR_COLUMNS = ["identity", "released"]


def _identity_buckets(source: Records, bits: int, folder: Path | None,
                      columns: list[str] = _PAIR_COLUMNS) -> list:
    """``columns`` (identity first) of a records file split by the top ``bits`` bits of the
    identity: with ``bits = 0`` the whole file in memory (one item), else one pass spilling
    every row group into ``2**bits`` Arrow IPC files under ``folder`` (their paths)."""
    if bits == 0:
        parts = [[] for _ in columns]
        for t in _row_groups(source, columns):
            for p, c in zip(parts, columns, strict=True):
                p.append(t.column(c).to_numpy())
        return [tuple(np.concatenate(p) if p else np.zeros(0, np.uint64) for p in parts)]
    assert folder is not None
    spill = BucketSpill(folder, bits)
    try:
        for t in _row_groups(source, columns):
            spill.add(t, t.column("identity").to_numpy())
    finally:
        spill.close()
    return spill.buckets()


def _bucket_arrays(item, columns: list[str] = _PAIR_COLUMNS) -> tuple[np.ndarray, ...]:
    if isinstance(item, tuple):
        return item
    if not item.exists():
        return tuple(np.zeros(0, np.uint64) for _ in columns)
    with pa.memory_map(str(item)) as src:
        t = pa.ipc.open_file(src).read_all()
    return tuple(t.column(c).to_numpy().copy() for c in columns)


def _scratch_folder(bits: int, scratch: Path | None) -> Path | None:
    """An owner-only folder (mkdtemp) for a spill of internal data, when there is one."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=".sdc-series-", dir=scratch)) if bits else None


def _changed_of_files(previous: Records, current: Records,
                      scratch: Path | None = None) -> tuple[int, int]:
    """(records in both, of those whose released cell differs): the two files joined by
    identity, out of core when they are large (each spilled once by identity range into
    about :data:`PAIR_ROWS` records a bucket, then joined bucket by bucket)."""
    import shutil

    n = max(_parquet(p).metadata.num_rows for p in (previous, current))
    bits = bucket_bits(n, PAIR_ROWS)
    tmp = _scratch_folder(bits, scratch)
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
                raise ValueError(f"{_name(previous)} has a repeated identity: cannot reindex "
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


def _name(source: Records) -> str:
    return repr(str(source)) if isinstance(source, Path) else "the records file"


class _Cells:
    """The true cells of a release's records (sorted distinct values) and their counts t."""

    def __init__(self, source: Records) -> None:
        cells = np.zeros(0, np.uint64)
        for t in _row_groups(source, ["cell"]):  # (by sorts: numpy's np.unique is slow here)
            cells = distinct(np.concatenate([cells, distinct(t.column("cell").to_numpy())]))
        self.distinct = cells
        self.n = max(cells.size, 1)
        self.t = np.zeros(self.n, np.int64)
        for t in _row_groups(source, ["cell"]):
            self.t += np.bincount(self.locate(t.column("cell").to_numpy())[0], minlength=self.n)

    def locate(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Position of every value among the cells, and whether it is one of them."""
        pos = np.minimum(np.searchsorted(self.distinct, values), self.n - 1)
        hit = (self.distinct[pos] == values) if self.distinct.size else np.zeros(values.size,
                                                                                 bool)
        return pos, hit


def _targets(cells: _Cells, pairs, a_count: np.ndarray) -> pd.DataFrame:
    """(t, a, score) of the targets with 1 <= a <= a_max from (true cell, cell the intruder
    sees) of the last release's records, ``pairs`` an iterable of arrays."""
    parts = []
    for cell, seen in pairs:
        pos, _ = cells.locate(cell)
        a = a_count[pos]
        keep = (a >= 1) & (a <= _A_MAX)
        if keep.any():
            correct = seen[keep] == cell[keep]
            ak = a[keep]
            parts.append(pd.DataFrame({"t": cells.t[pos[keep]], "a": ak,
                                       "score": np.where(ak > 0, correct / np.maximum(ak, 1),
                                                         0.0)}))
    if not parts:
        return pd.DataFrame({"t": np.zeros(0, np.int64), "a": np.zeros(0, np.int64),
                             "score": np.zeros(0)})
    return pd.concat(parts, ignore_index=True)


def _a_counts(cells: _Cells, pairs) -> np.ndarray:
    """Per true cell of the last release, the records whose seen cell it is (a)."""
    a_count = np.zeros(cells.n, np.int64)
    for _, seen in pairs:
        pos, hit = cells.locate(seen)
        a_count += np.bincount(pos[hit], minlength=cells.n)
    return a_count


def _intruder_of_file(source: Records) -> pd.DataFrame:
    """Per target of a release: (t, a, score) of the intruder who sees its released cells
    (the single-release intruder), out of core: the per-cell counts t (true cell) and a
    (released cell) in passes over the file, then the targets whose a is small enough to be
    reported, in file order."""
    cells = _Cells(source)

    def pairs():
        for t in _row_groups(source, ["cell", "released"]):
            yield t.column("cell").to_numpy(), t.column("released").to_numpy()

    return _targets(cells, pairs(), _a_counts(cells, pairs()))


def _modal(ids: list[np.ndarray], rel: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(identity, modal released cell) over releases 0..N-1 (``ids[i]``, ``rel[i]``): the
    released cell a record had most often, ties to the latest release; sorted by identity."""
    i = np.concatenate(ids)
    r = np.concatenate(rel)
    k = np.concatenate([np.full(x.size, j, np.int64) for j, x in enumerate(ids)])
    order = np.lexsort((k, r, i))  # by identity, released cell, release
    i, r, k = i[order], r[order], k[order]
    end = np.ones(i.size, bool)  # last record of each (identity, released cell) run
    end[:-1] = (i[1:] != i[:-1]) | (r[1:] != r[:-1])
    ends = np.flatnonzero(end)
    n = np.diff(np.concatenate(([-1], ends)))
    ri, rr, latest = i[ends], r[ends], k[ends]  # the run's latest release: its last
    o = np.lexsort((latest, n, ri))  # per identity, the most frequent, then the latest, last
    ri, rr = ri[o], rr[o]
    last = np.ones(ri.size, bool)
    last[:-1] = ri[1:] != ri[:-1]
    return ri[last], rr[last]


def _modal_intruder(files: list[Records], scratch: Path | None) -> pd.DataFrame:
    """(t, a, score) of the linking intruder who sees every record's modal released cell over
    the series, per target of the last release: all files spilled once by identity range
    (about :data:`PAIR_ROWS` records a range over the releases), the modal cells found range
    by range, in two passes over the ranges (the counts a, then the targets)."""
    import shutil

    cells = _Cells(files[-1])
    n = sum(_parquet(f).metadata.num_rows for f in files)
    bits = bucket_bits(n, PAIR_ROWS)
    tmp = _scratch_folder(bits, scratch)
    last_cols = ["identity", "cell", "released"]
    try:
        spilled = [_identity_buckets(f, bits, tmp / f"r{j}" if tmp else None)
                   for j, f in enumerate(files[:-1])]
        spilled.append(_identity_buckets(files[-1], bits, tmp / "last" if tmp else None,
                                         last_cols))

        def pairs():
            for b in range(len(spilled[-1])):
                li, lc, lr = _bucket_arrays(spilled[-1][b], last_cols)
                if li.size == 0:
                    continue
                parts = [_bucket_arrays(s[b]) for s in spilled[:-1]]
                mi, mr = _modal([p[0] for p in parts] + [li], [p[1] for p in parts] + [lr])
                yield lc, mr[np.searchsorted(mi, li)]

        return _targets(cells, pairs(), _a_counts(cells, pairs()))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def series_risk_of_files(files: list[Records], xi: float, *,
                         scratch: Path | None = None) -> SeriesRisk:
    """The risk of a series from the records files of its releases, in order (see the module
    docstring), out of core: consecutive files joined one identity range at a time
    (:data:`PAIR_ROWS`), cell counts in passes. Memory: the last release's cell counts and one
    identity range of the files; ``scratch``: where large files are spilled (default: the
    system's temporary folder).

    With one or two releases the linking intruder's modal cell of every record of the last
    release is its released cell there (with two, equal cells count twice, different ones tie
    and the tie goes to the latest release): the series intruder is the single-release one.
    """
    if not files:
        raise SeriesError("a series needs at least one release")
    rows = [_changed_row(i, *_changed_of_files(files[i - 1], files[i], scratch))
            for i in range(1, len(files))]
    changed = pd.DataFrame(rows, columns=["release", "n_common", "n_changed", "share"])
    single = _intruder_of_file(files[-1])
    series = single if len(files) <= 2 else _modal_intruder(files, scratch)
    return SeriesRisk(len(files), changed, _intruder_table(series, single, _A_MAX), float(xi))


def series_risk_of_dirs(release_dirs: list[Path], xi: float | None = None) -> SeriesRisk:
    """:func:`series_risk_of_files` of release folders (their ``internal/records.parquet``);
    xi from the last release's audit when not given."""
    dirs = [Path(d) for d in release_dirs]
    if xi is None:
        audit = audit_of(dirs[-1]) or {}
        xi = float((audit.get("risk") or {}).get("xi", float("nan")))
    return series_risk_of_files([records_path(d) for d in dirs], xi)


def risk_vs_previous(previous: Path, records: Records, xi: float) -> dict[str, Any]:
    """Series risk of (previous release, this one): ``audit.json``'s ``series.risk_vs_previous``
    and, through the flow, ``risk.json``'s ``series`` (the same dict, computed once).

    Returns ``previous`` (the folder), ``n_common`` (records in both releases), ``n_changed``
    and ``changed_share`` (of those, released key values differ), ``rate_one_match_series`` /
    ``rate_one_match_single`` (linking intruder over both releases / on this one alone, targets
    with a = 1 matching record), ``xi`` and ``intruder`` (:attr:`SeriesRisk.intruder` rows).
    When the previous release cannot be measured (no records file), ``previous`` and ``error``.
    ``records``: this release's records file (spilled beside it when large), or its bytes.
    """
    try:
        scratch = Path(records).parent if isinstance(records, Path) else None
        risk = series_risk_of_files([records_path(previous), records], xi, scratch=scratch)
    except (SeriesError, OSError, ValueError) as e:
        return {"previous": str(previous), "error": str(e)}
    d = risk.to_dict()
    return {"previous": str(previous), "changed_share": d["max_changed_share"],
            "n_common": int(risk.changed["n_common"].sum()),
            "n_changed": int(risk.changed["n_changed"].sum()),
            "rate_one_match_series": d["rate_one_match_series"],
            "rate_one_match_single": d["rate_one_match_single"], "xi": float(xi),
            "intruder": d["intruder"]}
