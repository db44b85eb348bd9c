"""The series risk measured in memory, from whole records tables (pandas groupby): the oracle of
:func:`sdc.series.risk.series_risk_of_files` (which joins the records files out of core)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sdc.series.risk import SeriesRisk, _changed_row, _intruder_table


def records_file(frame: pd.DataFrame, row_group_size: int | None = None) -> bytes:
    """A records table (identity, cell, released) as records-file bytes."""
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame[["identity", "cell", "released"]],
                                        preserve_index=False), buf,
                   row_group_size=row_group_size)
    return buf.getvalue()


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


def series_risk_in_memory(records: list[pd.DataFrame], xi: float, a_max: int = 5) -> SeriesRisk:
    """The series risk of records tables (one per release, in order), every table whole."""
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
