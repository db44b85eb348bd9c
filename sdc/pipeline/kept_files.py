"""The public file and the internal records file of a release whose records are held in
memory (a runner holding the whole file: the pandas engine, ``release_frame``): the bytes the
batch engines write from their spilled buckets, without the spill
(:func:`sdc.pipeline.release.release_persons`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.io.public_files import parquet_keeps_types
from sdc.method.draws import DrawPlan
from sdc.pipeline.kernels import write_public_files, write_table_in_order
from sdc.pipeline.records_file import write_records

__all__ = ["write_kept_files"]


def write_kept_files(box: list[tuple], config: ReleaseConfig, schema: pa.Schema,
                     dplan: DrawPlan, out_dir: Path, records_path: Path | None,
                     say: Callable[[str], None], files: bool = True,
                     order: np.ndarray | None = None, distinct: bool = False,
                     positions: np.ndarray | None = None,
                     ) -> tuple[dict[str, Path], Any, Path | None]:
    """The public files and the records file from the records the apply pass kept in memory
    (:attr:`~sdc.pipeline.passes.Runner.whole`; ``box`` holds them and is emptied, so the public table is freed
    once written): the bytes the spilled buckets give, without the spill. The records file
    is sorted and written by a thread while the public file is (no shared data; numpy and
    Parquet's encoder release the GIL; peak RSS about +75 MB at 5M). ``files`` False: no
    public file, the public records kept in memory when Parquet keeps their types
    (:func:`~sdc.pipeline.kernels.write_public_files`' ``in_memory``). ``order``: the
    positions that sort the kept raw identities, when the count pass made them; ``distinct``:
    the count pass found them all distinct (no second look for equal ones); ``positions``:
    the public order of the kept table (:func:`~sdc.pipeline.kernels.public_positions`), when
    the caller made it while it waited for the dependence check."""
    table, raw, rc, rel = box.pop()
    tables = [table]
    del table
    pool = records = None
    if records_path is not None:
        pool = ThreadPoolExecutor(1, thread_name_prefix="sdc-records-file")
        kept = order if order is not None and order.size == raw.size else None
        records = pool.submit(write_records, raw, rc, rel, records_path, dplan.cell_id,
                              dplan.cell_prb, distinct and kept is not None, kept)
    del raw, rc, rel
    try:
        say("writing the public file in order"
            + (" (and the internal records file alongside)" if records is not None else ""))
        files, public_table = write_public_files(
            config, schema, [], out_dir,
            lambda _, writer: write_table_in_order(tables.pop(), writer, positions),
            in_memory=not files and parquet_keeps_types(schema))
    finally:
        if pool is not None:
            pool.shutdown(wait=True)  # the records file is complete (or failed) either way
    return files, public_table, records.result() if records is not None else None
