"""The dependence check at any grain (issue 34): a column whose values, taken in order, fall
into runs that each hold one value of a key (age in months, a birth date, a yyyymmdd number, a
region code with the region as its prefix) is refused, while a column whose values are merely
unique (a continuous income, a random token) is not. docs/METHOD.md, "Dependence of non-key
columns", "The check in order".
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sdc.config.load import parse_config
from sdc.method import dependence as D
from sdc.method.designs import plan_release
from sdc.method.partition import partition_frame

XI = 0.395
FLAGGED = ["months", "bdate", "yyyymmdd", "regcode", "ageplus"]
PASSING = ["income", "token", "hours"]


def grain_frame(n: int = 2000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(16, 86, n)
    sex = rng.integers(1, 3, n)
    region = rng.integers(1, 9, n)
    day = rng.integers(0, 365, n)
    bdate = (np.datetime64("2025-01-01") - (age * 365.25 + day).astype("timedelta64[D]"))
    ymd = pd.to_datetime(bdate)
    return pd.DataFrame({
        "id": np.arange(n) * 7 + 3,
        "sex": sex, "age": age, "region": region,
        "months": age * 12 + rng.integers(0, 12, n),             # finer grain of age
        "bdate": bdate.astype("datetime64[s]"),                    # a birth date
        "yyyymmdd": (ymd.year * 10000 + ymd.month * 100 + ymd.day).to_numpy(),
        "regcode": [f"{r:02d}{x:03d}" for r, x in zip(region, rng.integers(0, 1000, n),
                                                        strict=True)],  # region as prefix
        "ageplus": age + 0.5,
        "income": np.round(np.exp(8.5 + 0.015 * age + rng.normal(0, 0.7, n)), 2),
        "token": [f"{x:016x}" for x in rng.integers(0, 2 ** 62, n)],
        "hours": rng.integers(1, 80, n),
    })


def grain_config(**extra) -> dict:
    return {
        "name": "grain",
        "input": {"path": "data/input.parquet", "format": "parquet", "id_column": "id"},
        "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [16, 85]},
                          "region": {"range": [1, 8]}},
        "partition": {"sex": "as_is", "age": {"bands": [16, 30, 45, 60, 75]}},
        "risk": {"xi": XI, "theta": "theorem", "small_blocks": "merge"},
        "seed": {"file": "secrets/job.seed"},
        "output": {"dir": "releases/job", "formats": ["parquet", "csv"]},
        **extra,
    }


def _figures(frame: pd.DataFrame) -> dict[str, D.ColumnDependence]:
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(frame, cfg), cfg)
    return {f.column: f for f in D.frame_dependence(frame, plan, cfg)}


def test_finer_grains_are_refused_unique_columns_are_not() -> None:
    figs = _figures(grain_frame())
    for c in FLAGGED:
        assert figs[c].flagged, (c, figs[c])
        assert figs[c].figure > XI
    for c in ("months", "bdate", "yyyymmdd"):
        assert figs[c].via == "order" and figs[c].revealed.get("age", 0) > 0.9, figs[c]
    assert figs["regcode"].via == "order" and figs["regcode"].revealed["region"] > 0.9
    for c in PASSING:
        assert not figs[c].flagged, (c, figs[c])
        assert figs[c].figure < figs[c].baseline + 0.02, figs[c]


@pytest.mark.parametrize("seed", range(8))
def test_random_columns_teach_nothing_in_order(seed: int) -> None:
    """How the check tells a finer grain from a merely unique column: a run of values all of
    one key value x must hold N records with N log P(x) < log(ALPHA / n); for columns
    independent of the keys no run comes close (the chance of any such run anywhere in the
    file is below ALPHA). Random floats, integers of a wide range, tokens, and a column
    constant on long stretches (hours, 79 values): none informs in order."""
    rng = np.random.default_rng(100 + seed)
    frame = grain_frame(seed=seed)
    n = len(frame)
    frame["u"] = rng.random(n)
    frame["wide"] = rng.integers(-10 ** 12, 10 ** 12, n)
    frame["few"] = rng.integers(0, 3, n)
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(frame, cfg), cfg)
    counter = D.DependenceCounter(["u", "wide", "few", "income", "token", "hours"], 3,
                                  D.small_limit(cfg), sizes=D.key_sizes(cfg))
    cells = plan.partitioned.cells
    rc = cells.record_cell
    counter.add(frame, rc, cells.key_codes[rc])
    ctx = D.MeasureContext(plan, cfg)
    for c in counter.columns:
        part = counter.order_table(c)
        _, _, inform = D.order_inform(part, ctx)
        assert not inform.any(), c


def _counter(frame: pd.DataFrame, plan, cfg, pieces: list[np.ndarray]) -> D.DependenceCounter:
    cells = plan.partitioned.cells
    rc = cells.record_cell
    cols = ["months", "bdate", "regcode", "income", "token"]
    counters = []
    for rows in pieces:
        c = D.DependenceCounter(cols, 3, D.small_limit(cfg), sizes=D.key_sizes(cfg))
        c.add(frame.iloc[rows].reset_index(drop=True), rc[rows], cells.key_codes[rc[rows]])
        counters.append(c)
    first = counters[0]
    for c in counters[1:]:
        first.merge(c)
    return first


def test_ordered_tables_do_not_depend_on_the_batches() -> None:
    """The same ordered table (bin width, bins, counts, intervals, small-cell pairs) from one
    batch, from 7 uneven batches and from partial counters merged in another order: every
    executor measures the same figures."""
    frame = grain_frame()
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(frame, cfg), cfg)
    n = len(frame)
    rng = np.random.default_rng(1)
    cuts = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
    whole = _counter(frame, plan, cfg, [np.arange(n)])
    split = _counter(frame, plan, cfg, np.split(np.arange(n), cuts))
    shuffled = _counter(frame, plan, cfg, np.split(rng.permutation(n), cuts)[::-1])
    for c in whole.columns:
        a, b, s = whole.order_table(c), split.order_table(c), shuffled.order_table(c)
        for x in (b, s):
            assert (a.kind, a.e, a.img_lo, a.img_hi) == (x.kind, x.e, x.img_lo, x.img_hi), c
            for f in ("bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
                assert np.array_equal(getattr(a, f), getattr(x, f)), (c, f)
    fw = D.measure_dependence(whole, plan, cfg, lambda x: x)
    fs = D.measure_dependence(shuffled, plan, cfg, lambda x: x)
    assert [f.as_dict() for f in fw] == [f.as_dict() for f in fs]


def test_order_image_keeps_the_order() -> None:
    s = pd.Series(["", "a", "ab", "abcdefgh", "abcdefgi", "b", "\xff", None])
    kind, x, valid = D.order_image(s)
    assert kind == "str" and not valid[-1]
    assert list(np.argsort(x[:-1], kind="stable")) == list(range(7))
    kind, x, valid = D.order_image(pd.Series([3, -1.5, np.nan, np.inf]))
    assert kind == "num" and list(valid) == [True, True, False, False]
    d = pd.Series(pd.to_datetime(["2001-01-02", "1999-12-31", None]))
    kind, x, valid = D.order_image(d)
    assert kind == "num" and x[1] < x[0] and not valid[2]
    # nanosecond times beyond 2^53 (found by the CLI property suite: exit 1 before)
    ts = pd.Series(pd.to_datetime([1_600_000_000, 1_500_000_000], unit="s", utc=True))
    kind, x, _ = D.order_image(ts.astype(object))
    assert kind == "num" and x[1] < x[0]
    assert D.order_image(pd.Series([True, False])) is None
    dates = pd.Series([dt.date(2000, 1, 2), dt.date(1990, 5, 6)])
    kind, x, _ = D.order_image(dates)
    assert kind == "num" and x[1] < x[0]


@pytest.mark.parametrize("dtype", [np.uint8, np.int16])
def test_narrow_key_codes_give_the_same_tables(dtype, monkeypatch) -> None:
    """The count pass hands the check narrow key codes (``narrow_codes``: uint8 / int16), whose
    per-key min/max tables are narrow too: every table (values, dense values over batches,
    ordered, pairs) equals the one from int64 codes."""
    from sdc.method.cells import narrow_codes
    from sdc.method.dependence import counting

    assert narrow_codes([2, 256]) == np.uint8 and narrow_codes([257]) == np.int16
    monkeypatch.setattr(counting, "DENSE_VALUES", 64)  # "income" goes dense after a batch
    frame = grain_frame()
    rng = np.random.default_rng(4)
    frame["u"] = rng.random(len(frame))
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(frame, cfg), cfg)
    cells = plan.partitioned.cells
    rc = cells.record_cell
    cols = ["months", "income", "token", "u"]
    pieces = np.array_split(np.arange(len(frame)), 3)
    out = []
    for width in (np.int64, dtype):
        c = D.DependenceCounter(cols, 3, D.small_limit(cfg), sizes=D.key_sizes(cfg))
        for rows in pieces:
            codes = np.asfortranarray(cells.key_codes[rc[rows]].astype(width))
            c.add(frame.iloc[rows].reset_index(drop=True), rc[rows], codes)
        out.append(c)
    assert out[0]._dense
    for col in cols:
        for a, b in zip(out[0].tables(col), out[1].tables(col), strict=True):
            for x, y in zip(a, b, strict=True):
                assert x.dtype == y.dtype and np.array_equal(x, y), col
        a, b = out[0].order_table(col), out[1].order_table(col)
        for f in ("bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (col, f)
