"""Deterministic bytes of release files and their hashes.

:func:`parquet_bytes` serializes a frame (the internal tables) to bytes that depend only on the
frame's content (no timestamps, no index), so that the same release gives byte-identical files;
the public files are written by :class:`sdc.io.batches.PublicWriter`.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["HashingFile", "parquet_bytes", "sha256_bytes", "sha256_file", "start_writeback",
           "written_sha256"]

_CHUNK = 1 << 20


# -- hashes ---------------------------------------------------------------------------------
def sha256_bytes(b: bytes) -> str:
    """Hex SHA-256 of ``b``."""
    return hashlib.sha256(b).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


#: the SHA-256 of files this process wrote through :class:`HashingFile`, by the file's state
#: when it was closed (device, inode, size, mtime and ctime in ns); the newest few only
_WRITTEN: OrderedDict[tuple[int, ...], str] = OrderedDict()
_WRITTEN_MAX = 64


def _state(path: str | Path) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def written_sha256(path: str | Path) -> str:
    """:func:`sha256_file` of a file this process wrote through :class:`HashingFile`: the
    digest of the bytes written, taken while they were written, when the file's state is
    still the one it had when it was closed (any later write, rename or touch changes its
    ctime); else the file is read and hashed. For the release's own files before they are
    published (the audit record's digests); checks of a published folder read the bytes
    (:func:`sha256_file`)."""
    try:
        known = _WRITTEN.get(_state(path))
    except OSError:
        known = None
    return known if known is not None else sha256_file(path)


def start_writeback(paths: list[Path | None], min_bytes: int = 8 << 20) -> None:
    """Start writing the pages of the files an executor wrote (the public and records files)
    to disk, on a daemon thread nobody waits for: the flow calls it when the executor is
    done, so the disk works while the reports are built on one core, and the fsync of each
    file when it is published (``sdc.publish.folder``, which still guarantees it) finds them
    written. Files under ``min_bytes`` are left to that fsync. (Started when each file was
    closed, inside the executor, the writeback slowed the public file's step as much as it
    saved.)"""
    todo = [p for p in paths if p is not None]

    def sync() -> None:
        for path in todo:
            try:
                if os.stat(path).st_size < min_bytes:
                    continue
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            except OSError:
                pass  # the publish step's own fsync reports a real failure
            finally:
                os.close(fd)

    if todo:
        threading.Thread(target=sync, name="sdc-writeback", daemon=True).start()


class HashingFile:
    """A binary file being written whose SHA-256 is computed from the bytes written, on a
    thread (hashlib releases the GIL for large buffers), so that the digest is known when
    the file is closed instead of costing a second read: ~0.15 s a 200 MB file on the step's
    critical path (the public file's Parquet encoding is on one thread; the digest's thread
    takes the other core). The same thread writes the bytes to the file, in order, so the
    copy into the page cache (and any wait for the kernel's dirty-page throttling) is off
    the encoding thread too (at 100M records the writes were ~4 s of that thread's samples).
    ``write`` takes ``bytes`` (what pyarrow's writers and the CSV writer pass; other buffers
    are copied) and returns at once; a failed write is raised once, by the next ``write`` or
    by :meth:`close`, and no digest is recorded. :meth:`close` closes the file and records
    the digest for :func:`written_sha256`. (Starting each large file's fsync on a thread
    when it is closed was tried: the publish step's fsync then took 0.1 s instead of 0.3 s
    at 10M, but the public file's step took 0.2 s longer, the writeback's cost on this VM.)"""

    def __init__(self, f: BinaryIO, path: str | Path) -> None:
        self._f, self._path = f, Path(path)
        self._hash = hashlib.sha256()
        # at most 8 writes (a few MB each) held: the writer waits beyond
        self._chunks: queue.Queue = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self._raised = False  # the error has reached the writer
        self._thread = threading.Thread(target=self._drain, name="sdc-sha256", daemon=True)
        self._thread.start()
        self._done = False

    def _drain(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            if self._error is not None:
                continue  # (drained, not written: the writer is told and stops)
            try:
                view = memoryview(chunk).cast("B")
                while view.nbytes:  # a raw file may take part of a buffer
                    n = self._f.write(view)
                    if n is None:  # (a non-blocking file that would block)
                        raise BlockingIOError(f"{self._path} took no bytes")
                    view = view[n:]
            except BaseException as exc:  # raised in the writer's thread
                self._error = exc
                continue
            self._hash.update(chunk)

    def write(self, data: Any) -> int:
        if self._error is not None:
            self._raised = True
            raise self._error
        if self._done:
            raise ValueError(f"write to closed file {self._path}")
        # bytes are immutable; a caller's buffer may be reused after write returns
        chunk = data if isinstance(data, bytes) else bytes(data)
        self._chunks.put(chunk)
        return len(chunk)

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self._chunks.put(None)
            self._thread.join()
        finally:
            self._f.close()
        if self._error is not None:
            if not self._raised:
                self._raised = True
                raise self._error
            return  # (no digest: the file is not what was written)
        _WRITTEN[_state(self._path)] = self._hash.hexdigest()
        while len(_WRITTEN) > _WRITTEN_MAX:
            _WRITTEN.popitem(last=False)

    @property
    def closed(self) -> bool:
        return self._done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> HashingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- deterministic serialization ----------------------------------------------------------
def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as Parquet bytes: same content -> same bytes.

    pyarrow with ``preserve_index=False`` (the index is never written), snappy
    compression, statistics on, and no timestamps in the file or schema metadata (the
    pandas metadata pyarrow writes holds column names and dtypes only).
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()
