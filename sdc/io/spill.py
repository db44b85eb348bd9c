"""Spilling records to bucket files by the top bits of a 64-bit key: the one out-of-core
grouping every engine and the series use.

A batch is grouped by bucket with one stable sort and one gather (:func:`split_by_bucket`);
bucket ``b`` holds the records whose key's top ``bits`` bits are ``b``, so a bucket of an
evenly spread key (a keyed hash: the public order key, a record identity) holds about
``n / 2**bits`` records and can be sorted in memory. Buckets are Arrow IPC files: one file a
bucket (``bucket-XXXXX.arrow``, one writer), or a folder a bucket holding one piece a task
(``bucket-XXXXX/piece-YYYYYY.arrow``, Dask). :func:`read_bucket` reads either back.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from sdc.method.sorting import sort_inplace

__all__ = ["BUCKET_ROWS", "BucketSpill", "IdentitySpill", "bucket_bits", "bucket_of", "discard",
           "discarded", "read_bucket", "remove_spills", "split_by_bucket"]

#: records per bucket on average for the public files: one bucket is sorted in memory
BUCKET_ROWS = 1 << 21


def bucket_bits(n: int, rows: int | None = None) -> int:
    """The number of key bits that split ``n`` records into buckets of about ``rows``
    (default :data:`BUCKET_ROWS`) records: 0 (one bucket) up to ``rows`` records."""
    per = BUCKET_ROWS if rows is None else rows
    return max(0, math.ceil(math.log2(max(1, n) / per)))


def bucket_of(keys: np.ndarray, bits: int) -> np.ndarray:
    """Bucket 0..2**bits-1 of every record: the top ``bits`` bits of its uint64 key.

    uint16 up to 2**16 buckets: the stable argsort that groups a batch is then numpy's radix
    sort, O(n) (measured 7x faster than on int64 for 1M records)."""
    dtype = np.uint16 if bits <= 16 else np.int64
    if bits == 0:
        return np.zeros(keys.size, dtype=dtype)
    return (keys >> np.uint64(64 - bits)).astype(dtype)


def split_by_bucket(table: pa.Table, keys: np.ndarray, bits: int) -> tuple[pa.Table, np.ndarray]:
    """``table``'s rows grouped by the bucket of ``keys`` (row order kept within a bucket;
    one gather) and the bounds: the rows of bucket ``b`` are ``bounds[b]:bounds[b + 1]``."""
    buckets = bucket_of(np.asarray(keys, np.uint64), bits)
    order = np.argsort(buckets, kind="stable")
    bounds = np.searchsorted(buckets[order], np.arange((1 << bits) + 1))
    return table.take(pa.array(order)), bounds


class BucketSpill:
    """Append grouped batches to ``2**bits`` bucket files under ``folder`` (created).

    With ``piece`` (a Dask task's number) every bucket is a folder and each :meth:`write`
    adds the file ``piece-YYYYYY.arrow`` to it (one write per piece); else one IPC writer a
    bucket, appended to batch after batch and closed by :meth:`close`.
    """

    def __init__(self, folder: Path, bits: int, piece: int | None = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.bits = int(bits)
        self.piece = piece
        self._writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}

    def add(self, table: pa.Table, keys: np.ndarray) -> None:
        """Spill ``table``'s rows by the buckets of ``keys``."""
        self.write(*split_by_bucket(table, keys, self.bits))

    def write(self, table: pa.Table, bounds: np.ndarray) -> None:
        """Spill a table already grouped by :func:`split_by_bucket`."""
        for b in np.flatnonzero(np.diff(bounds)):
            part = table.slice(bounds[b], bounds[b + 1] - bounds[b])
            if self.piece is not None:
                folder = self.folder / f"bucket-{b:05d}"
                folder.mkdir(exist_ok=True)
                with pa.ipc.new_file(folder / f"piece-{self.piece:06d}.arrow", part.schema) as w:
                    w.write_table(part)
                continue
            if b not in self._writers:
                self._writers[b] = pa.ipc.new_file(self.folder / f"bucket-{b:05d}.arrow",
                                                   part.schema)
            self._writers[b].write_table(part)

    def close(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def buckets(self) -> list[Path]:
        """Every bucket's path, in key order (a bucket that got no record does not exist)."""
        return [self.folder / (f"bucket-{b:05d}" + ("" if self.piece is not None else ".arrow"))
                for b in range(1 << self.bits)]


def read_bucket(path: Path, consume: bool = False) -> pa.Table | None:
    """A spilled bucket: one Arrow IPC file, or a folder of IPC pieces (Dask); None if empty.
    ``consume``: the files are deleted once read (the table is in memory; :func:`discard`),
    so a release frees its spills bucket by bucket while it writes its files."""
    files = sorted(path.glob("*.arrow")) if path.is_dir() else [path] if path.exists() else []
    tables = []
    for f in files:
        with pa.ipc.open_file(f) as reader:
            tables.append(reader.read_all())
        if consume:
            discard(f)
    return pa.concat_tables(tables) if tables else None


_discarding: list[Future] = []
_discard_lock = threading.Lock()
_discard_pool: ThreadPoolExecutor | None = None
_discard_pid = 0  # the process that made the pool: a forked child makes its own


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # gone already, or left to remove_spills' rmtree
        pass


def discard(path: Path) -> None:
    """Delete a spill file that has been read, on a background thread: deleting a file just
    written waits for the file system (its pages under writeback), which at 100M records
    (~6 GB of spills) held one core idle for 3.6 s after the last public row group, and
    stalled the reading thread when done there. :func:`remove_spills` waits for them."""
    global _discard_pool, _discard_pid
    with _discard_lock:
        if _discard_pool is None or _discard_pid != os.getpid():
            # (a pool inherited by a fork has no thread: its work would never run)
            _discard_pool = ThreadPoolExecutor(1, thread_name_prefix="sdc-discard")
            _discard_pid = os.getpid()
            _discarding.clear()
        _discarding[:] = [f for f in _discarding if not f.done()]
        _discarding.append(_discard_pool.submit(_unlink, Path(path)))


def discarded() -> None:
    """Wait until every file handed to :func:`discard` so far is deleted."""
    with _discard_lock:
        pending = list(_discarding)
    for f in pending:
        f.result()


def remove_spills(folder: Path | str) -> None:
    """Remove a release's spill folder: the files handed to :func:`discard` deleted first
    (waited for), then the folder and whatever it still holds."""
    discarded()
    shutil.rmtree(folder, ignore_errors=True)


class IdentitySpill:
    """The 64-bit record identities of a count pass spilled to ``2**bits`` files by their top
    bits (raw uint64, appended batch by batch) instead of held: 8 bytes a record on disk,
    not in memory (100M records: 800 MB). :meth:`duplicates` reads one file at a time
    (``1 / 2**bits`` of them), sorts it in place and keeps the identities that occur more
    than once; the files are deleted then, by :meth:`clear`, or when the spill is
    collected."""

    def __init__(self, folder: Path, bits: int = 4) -> None:
        import shutil
        import weakref

        self.folder, self.bits, self.size = Path(folder), int(bits), 0
        self.folder.mkdir(parents=True, exist_ok=True)
        self._paths = [self.folder / f"identities-{b:03d}.u64" for b in range(1 << self.bits)]
        self._files: list | None = [open(p, "wb") for p in self._paths]  # noqa: SIM115
        self._gone = weakref.finalize(self, shutil.rmtree, self.folder, True)

    def append(self, ident: np.ndarray) -> None:
        """Add a batch's identities."""
        ident = np.asarray(ident, dtype=np.uint64)
        if self._files is None:
            raise RuntimeError("identities added after the spill was read")
        bucket = bucket_of(ident, self.bits) if self.bits else np.zeros(ident.size, np.uint16)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange((1 << self.bits) + 1))
        grouped = ident[order]
        for b, f in enumerate(self._files):
            grouped[bounds[b]:bounds[b + 1]].tofile(f)
        self.size += ident.size

    def _close(self) -> None:
        for f in self._files or []:
            f.close()
        self._files = None

    def duplicates(self) -> np.ndarray | None:
        """The identities that occur more than once (sorted), or None when all differ; the
        files are deleted (as :func:`sdc.pipeline.kernels.duplicate_identities` consumes its
        list)."""
        from concurrent.futures import ThreadPoolExecutor

        self._close()

        def repeated(p: Path) -> np.ndarray | None:
            a = np.fromfile(p, dtype=np.uint64)
            p.unlink()
            sort_inplace(a, parts=1)  # (numpy's AVX-512 sort where it has one: 5x split_sort)
            same = a[1:] == a[:-1]
            return np.unique(a[1:][same]) if same.any() else None

        # two files at a time, each sorted by one thread (numpy's sort releases the GIL): 10%
        # less than one file at a time in two parts merged, and the files are in key order,
        # so the found identities come out sorted
        with ThreadPoolExecutor(2, thread_name_prefix="sdc-sort") as pool:
            found = [f for f in pool.map(repeated, self._paths) if f is not None]
        self.clear()
        return np.concatenate(found) if found else None

    def clear(self) -> None:
        """Delete the files (nothing to read after)."""
        self._close()
        self._gone()
