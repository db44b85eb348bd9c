"""Deterministic bytes of release files and their hashes.

:func:`parquet_bytes` serializes a frame (the internal tables) to bytes that depend only on the
frame's content (no timestamps, no index), so that the same release gives byte-identical files;
the public files are written by :class:`sdc.io.batches.PublicWriter`.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["parquet_bytes", "sha256_bytes", "sha256_file"]

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
