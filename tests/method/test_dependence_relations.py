"""Relations an intruder computes from the public file (issue 46 item 1; docs/METHOD.md,
"Relations an intruder computes", "Columns that show moved records"): on the demo file each
counter-example of the issue is refused (exit 2 naming the column and the fix) or published with
its risk measured by an intruder written here, apart from the check, at most xi.

The intruder (:func:`intruder_success`) knows a target's key values (its cell j) and a way to
decode the target's age from the public file (``decode``: the relation itself, e.g. the
differences of the public file sorted by a running total); among the records released in j it
keeps those whose decoded age band is j's and picks one at random. Its success is averaged over
the targets in sensitive cells; the test's tolerance is three standard errors of that mean
(the targets' successes are independent enough across cells for the SE of a mean; the spread is
taken from the data, so the bound follows the variance, not a fixed margin).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import sdc
from sdc.io.schemas import validate_input
from sdc.method import dependence as D
from sdc.method.designs import plan_release
from sdc.release.job import load_job

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data_samples" / "census_sample.csv"
CONFIG = ROOT / "configs" / "census_demo_design.yaml"
XI = 0.395
REF = np.datetime64("2025-01-01")


@functools.cache
def _demo() -> pd.DataFrame:
    return pd.read_csv(DEMO)


def demo_frame() -> pd.DataFrame:
    """The demo file: read once per process, a copy for each caller."""
    return _demo().copy()


def write_case(tmp: Path, frame: pd.DataFrame, edit=None) -> Path:
    """The demo design's config on ``frame`` (written as CSV into ``tmp``), edited by
    ``edit(raw)``."""
    raw = yaml.safe_load(CONFIG.read_text())
    frame.to_csv(tmp / "input.csv", index=False)
    raw["input"]["path"] = str(tmp / "input.csv")
    raw["seed"] = {"file": str(tmp / "job.seed")}
    raw["output"]["dir"] = str(tmp / "release")
    if edit is not None:
        edit(raw)
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def check(path: Path) -> tuple[list[D.ColumnDependence], str | None]:
    """The dependence check as ``sdc validate`` runs it (in memory): figures and refusal."""
    from sdc.release.public import public_schema_for

    job = load_job(path)
    frame = validate_input(job.frame, job.config)
    plan = plan_release(sdc.partition_frame(frame, job.config), job.config)
    kinds = D.schema_kinds(public_schema_for(job.config, frame))
    figures = D.frame_dependence(frame, plan, job.config, kinds)
    return figures, D.dependence_error(figures, plan, job.config)


def band_of(age: np.ndarray, edges: list[int]) -> np.ndarray:
    """The released band index of a raw age (the config's ``recode.bands``), -1 when unknown."""
    a = np.asarray(age, dtype=np.float64)
    out = np.searchsorted(np.asarray(edges, dtype=np.float64), a, side="right") - 1
    return np.where(np.isfinite(a), out, -1)


def intruder_success(path: Path, decode, seed: int = 11,
                     exact: bool = False) -> tuple[float, float, int]:
    """Release ``path`` with ``seed`` (sdc.release_frame) and measure the filter intruder that
    decodes every released record's raw age with ``decode(public frame) -> ages`` (NaN: not
    decoded, kept): (mean success over targets in sensitive cells, its SE, targets)."""
    job = load_job(path)
    config = job.config
    frame = sdc.read_input(config)
    res = sdc.release_frame(frame, config, seed=seed)
    edges = yaml.safe_load(path.read_text())["key_variables"]["age"]["recode"]["bands"]
    public = res.frame.reset_index(drop=True)
    rel = res.released.released_cell
    orig = res.released.record_cell
    cells = res.cells
    age_key = config.key_names.index("age")
    cell_band = cells.key_codes[:, age_key]  # the released age code = the band index
    # the released age code is the band's index (checked on the records that kept their cell)
    kept = rel == orig
    raw_age = pd.read_csv(config.input_path)["age"].to_numpy()
    assert (band_of(raw_age, edges)[kept] == cell_band[orig][kept]).all()
    t = cells.frequency[orig]
    target = t * XI < 1  # records of sensitive cells
    if exact:  # the intruder knows the target's age as collected: candidates of that age
        ages = decode(public)
        known = np.isfinite(ages)
        a = np.maximum(np.where(known, np.round(ages), -1), -1).astype(np.int64)
        span = int(max(a.max(), raw_age.max())) + 2
        cand = np.bincount(rel * span + a + 1, minlength=cells.n_cells * span)
        wild = np.bincount(rel[~known], minlength=cells.n_cells)  # undecoded: kept
        n_comp = cand[orig * span + raw_age + 1] + wild[orig]
        own = (rel == orig) & (~known | (a == raw_age))
        seen = target & (n_comp > 0)
        success = np.where(own, 1.0 / np.maximum(n_comp, 1), 0.0)[seen]
        return float(success.mean()), float(success.std(ddof=1) / math.sqrt(success.size)), \
            int(success.size)
    decoded = band_of(decode(public), edges)
    compat = (decoded < 0) | (decoded == cell_band[rel])
    n_comp = np.bincount(rel[compat], minlength=cells.n_cells)
    own = (rel == orig) & compat
    # R_j(a, t) is the chance of a right pick given the records the intruder sees in j: the
    # targets whose cell holds a compatible released record (a ratio of expectations)
    seen = target & (n_comp[orig] > 0)
    success = np.where(own, 1.0 / np.maximum(n_comp[orig], 1), 0.0)[seen]
    return float(success.mean()), float(success.std(ddof=1) / math.sqrt(success.size)), \
        int(success.size)


def ages_from_dates(text: pd.Series, fmt: str) -> np.ndarray:
    d = pd.to_datetime(text, format=fmt)
    return ((REF - d.to_numpy().astype("datetime64[D]")).astype(np.int64) / 365.25)


def birth_dates(age: np.ndarray, rng: np.random.Generator) -> pd.DatetimeIndex:
    days = (age * 365.25 + rng.integers(0, 365, age.size)).astype("timedelta64[D]")
    return pd.to_datetime(REF - days)


def _cases() -> dict:
    """The counter-examples' columns (case -> column -> values), a copy for each caller: made
    once per process (59,033 birth dates formatted twice: ~0.26 CPU s a call, and the tests
    of the issue called it 14 times)."""
    return {case: {c: v.copy() for c, v in cols.items()} for case, cols in _case_columns().items()}


@functools.cache
def _case_columns() -> dict:
    rng = np.random.default_rng(5)
    f = demo_frame()
    age = f["age"].to_numpy()
    dob = birth_dates(age, rng)
    x = rng.integers(1000, 10 ** 6, age.size)
    xf = rng.uniform(1.0, 1000.0, age.size)
    return {
        "cum_age": {"cum_age": np.cumsum(age)},
        "dob_day_first": {"dob": dob.strftime("%d.%m.%Y").to_numpy()},
        "dob_month_name": {"dob": dob.strftime("%b %d %Y").to_numpy()},
        "ratio": {"x": x, "y": x * age},
        "float_ratio": {"xf": xf, "yf": xf * (age + 0.5)},
    }


@pytest.mark.parametrize("case", ["cum_age", "dob_day_first", "dob_month_name", "ratio",
                                  "float_ratio"])
def test_each_counter_example_of_issue_46_is_refused(case, tmp_path):
    """Released with exit 0 before (each lets an intruder recover the exact age of every moved
    record: 0.567 against xi 0.395): refused now, naming the column(s) and the fixes."""
    f = demo_frame()
    for c, v in _cases()[case].items():
        f[c] = v
    figures, msg = check(write_case(tmp_path, f))
    assert msg is not None, [g.as_dict() for g in figures]
    bad = [g for g in figures if g.flagged]
    names = {g.column for g in bad} | {c for g in bad for c in g.of}
    assert names & set(_cases()[case]), msg
    assert "input.drop" in msg and "Fix" in msg, msg
    # refused for its figure, or for holding age at a finer grain than released (a birth date
    # next to age in bands of 2: the recoding no longer protects)
    assert max(g.figure for g in bad) > XI or any(g.finer == ("age",) for g in bad), msg


def test_a_running_total_in_any_order_is_refused(tmp_path):
    """The public file is in keyed-hash order, not the file's: a running total summed in an
    order of its own (here by a random permutation) is still decoded by sorting by it."""
    f = demo_frame()
    perm = np.random.default_rng(3).permutation(len(f))
    total = np.empty(len(f), np.int64)
    total[perm] = np.cumsum(f["age"].to_numpy()[perm] * 3 + 1)
    f["running"] = total
    figures, msg = check(write_case(tmp_path, f))
    assert msg is not None and "'running'" in msg, msg


def _unchecked(monkeypatch) -> None:
    """Release without the refusal, to measure what the refused column would give away."""
    import sdc.pipeline.kernels as K

    monkeypatch.setattr(K, "raise_if_dependent", lambda *a, **k: None)


def test_the_refusal_of_a_running_total_is_no_false_alarm(tmp_path, monkeypatch):
    """The intruder of the issue on the running total released anyway: it sorts the public
    file by ``cum_age``, takes differences (every record's age as collected) and keeps the
    records of the target's cell whose age is the target's: well above xi (0.46 against 0.27
    without the column on seed 11); so refusing is the right verdict."""
    f = demo_frame()
    f["cum_age"] = np.cumsum(f["age"].to_numpy())
    path = write_case(tmp_path, f)

    def decode(public: pd.DataFrame) -> np.ndarray:
        order = np.argsort(public["cum_age"].to_numpy(), kind="stable")
        s = public["cum_age"].to_numpy()[order]
        out = np.empty(len(s))
        out[order] = np.r_[s[0], np.diff(s)]
        return out

    _unchecked(monkeypatch)
    mean, se, n = intruder_success(path, decode, exact=True)
    assert mean > XI + 3 * se, (mean, se, n)


def test_a_near_copy_passes_with_its_real_risk_under_xi(tmp_path):
    """A column correlated 0.99 with age passes; the intruders who round it to an age (and
    keep the records of the target's cell whose band, or whose age as collected, agrees) stay
    under xi (three SE)."""
    f = demo_frame()
    rng = np.random.default_rng(9)
    age = f["age"].to_numpy()
    f["near_age"] = np.round(age + rng.normal(0, 0.1425 * age.std(), age.size), 3)
    assert np.corrcoef(age, f["near_age"])[0, 1] > 0.985
    path = write_case(tmp_path, f)
    figures, msg = check(path)
    assert msg is None, msg
    for exact in (False, True):
        mean, se, n = intruder_success(path, lambda p: np.round(p["near_age"].to_numpy()),
                                       exact=exact)
        assert mean <= XI + 3 * se, (exact, mean, se, n)


def _ten_year_bands(raw: dict) -> None:
    raw["key_variables"]["age"]["recode"] = {"bands": list(range(0, 91, 10))}
    raw["partition"] = {"sex": "as_is", "age": "as_is", "marital": "as_is"}


def test_a_copy_of_a_banded_key_is_refused_as_a_finer_grain(tmp_path, monkeypatch):
    """``age_copy = age`` with age released in 10-year bands (issue 47): its filter figure at
    the released grain stays under xi, but the copy gives back the age as collected, which an
    intruder who knows it matches on: the recoding no longer protects (0.75 on seed 11). It is
    refused, naming the finer grain and the fixes."""
    f = demo_frame()
    f["age_copy"] = f["age"]
    path = write_case(tmp_path, f, _ten_year_bands)
    figures, msg = check(path)
    copy = next(g for g in figures if g.column == "age_copy")
    assert copy.flagged and copy.finer == ("age",), copy.as_dict()
    assert "finer grain" in msg and "'age_copy'" in msg and "input.drop: [age_copy]" in msg, msg
    _unchecked(monkeypatch)
    mean, se, n = intruder_success(path, lambda p: p["age_copy"].to_numpy(), exact=True)
    assert mean > XI + 3 * se, (mean, se, n)


def _band_copy() -> pd.DataFrame:
    f = demo_frame()
    f["age_band"] = np.minimum(f["age"] // 10 * 10, 90)  # the released grain, unchanged
    return f


def test_a_copy_at_the_released_grain_is_reported_as_showing_moved_records(tmp_path):
    """A copy of the banded age at its released grain: moved records show their original
    band although the figure stays under xi (the identification guarantee holds: the
    intruders measured here, by band and by the age as collected, stay under xi). It is named
    as showing moved records (``visible``) and ``risk.dependence: strict`` refuses it."""
    f = _band_copy()
    path = write_case(tmp_path, f, _ten_year_bands)
    figures, msg = check(path)
    assert msg is None, msg
    copy = next(g for g in figures if g.column == "age_band")
    assert copy.visibly_moved and not copy.flagged and not copy.finer, copy.as_dict()
    assert copy.as_dict()["visible"]["age"] > 0
    assert not any(g.visibly_moved for g in figures if g.column != "age_band")
    for exact in (False, True):
        mean, se, n = intruder_success(path, lambda p: p["age_band"].to_numpy() + 0.5,
                                       exact=exact)
        assert mean <= XI + 3 * se, (exact, mean, se, n)

    def strict(raw: dict) -> None:
        _ten_year_bands(raw)
        raw["risk"]["dependence"] = "strict"

    _, msg = check(write_case(tmp_path, f, strict))
    assert msg is not None and "'age_band'" in msg and "strict" in msg, msg
    assert "input.drop: [age_band]" in msg and "derived: [age_band]" in msg, msg


def test_the_codebook_names_a_column_that_shows_moved_records(tmp_path):
    """The released codebook says the copy shows moved records instead of "unchanged"."""
    path = write_case(tmp_path, _band_copy(), _ten_year_bands)
    job = load_job(path)
    res = sdc.release_frame(sdc.read_input(job.config), job.config, seed=3)
    from sdc.release.public import codebook_markdown

    text = codebook_markdown(job.config, res)
    row = next(line for line in text.splitlines() if "`age_band`" in line)
    assert "shows moved records" in row and "`age`" in row, row
    income = next(line for line in text.splitlines() if "`income`" in line)
    assert income.rstrip(" |").endswith("unchanged"), income


def test_dates_are_read_in_every_common_form():
    """One day number whatever the spelling; ``a/b/yyyy`` under both readings."""
    from sdc.method.dependence.dates import date_image

    forms = ["1987-03-14", "1987/3/14", "19870314", "14.03.1987", "14/03/87", "Mar 14 1987",
             "March 14, 1987", "14 Mar 1987", "14-Mar-1987", "1987 Mar 14",
             "1987-03-14T10:00:00", "14th March 1987"]
    _, day, ok = date_image(pd.Series(forms), "day")
    want = (dt.date(1987, 3, 14) - dt.date(1970, 1, 1)).days
    assert ok.all() and (day == want).all(), list(zip(forms, day, ok, strict=True))
    _, day, ok = date_image(pd.Series(["03/14/1987", "14/03/1987", "x", None]), "month")
    assert list(ok) == [True, False, False, False] and day[0] == want


def test_every_engine_gives_the_same_verdict_and_figures(tmp_path):
    """The relations are counted per batch (pairs, dates) or collected and sorted once (the
    sorted relations: the same records whatever the batches), so the in-memory release, the
    streaming count pass in batches of 2,500 and Dask-like partial counters of 4,000 records
    merged in reverse order give the same figures, and each refuses.

    On the demo file's first 20,000 records (8 streaming batches, 5 partial counters): the
    question is the batching, not the file's size (the whole file, 59,033 records in batches
    of 5,000: 12.9 -> 7 CPU s; the same columns flagged, with the same verdict)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sdc.executors.streaming import count_cells
    from sdc.pipeline.kernels import plan_cells

    f = demo_frame()
    for case in ("cum_age", "ratio", "float_ratio", "dob_day_first"):
        for c, v in _cases()[case].items():
            f[c] = v
    f = f.iloc[:20_000]
    path = write_case(tmp_path, f)
    parquet = tmp_path / "input.parquet"
    pq.write_table(pa.Table.from_pandas(f, preserve_index=False), parquet, row_group_size=2500)
    raw = yaml.safe_load(path.read_text())
    raw["input"].update(path=str(parquet), format="parquet")
    raw["input"].pop("delimiter", None)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = sdc.load_config(path)
    with pytest.raises(D.DependenceError) as whole:
        sdc.release_frame(sdc.read_input(cfg), cfg, seed=1)
    with pytest.raises(D.DependenceError) as streamed:
        plan_cells(count_cells(cfg, batch_rows=2500), cfg)
    want = [g.as_dict() for g in whole.value.figures]
    assert [g.as_dict() for g in streamed.value.figures] == want
    assert {g["column"] for g in want if g["flagged"]} >= {"cum_age", "dob"}, want

    frame = validate_input(sdc.read_input(cfg), cfg)
    plan = plan_release(sdc.partition_frame(frame, cfg), cfg)
    cells = plan.partitioned.cells
    kinds = D.schema_kinds(pq.read_schema(parquet))
    cols = D.checked_columns(list(frame.columns), cfg)
    pairs = D.pair_plan(cols, kinds, cfg)

    def counter() -> D.DependenceCounter:
        return D.DependenceCounter(cols, len(cfg.key_names), D.small_limit(cfg),
                                   sizes=D.key_sizes(cfg), pairs=pairs, merge_every=3)

    parts = []
    for lo in range(0, len(frame), 4000):
        c = counter()
        rc = cells.record_cell[lo:lo + 4000]
        c.add(frame.iloc[lo:lo + 4000].reset_index(drop=True), rc, cells.key_codes[rc])
        parts.append(c)
    total = counter()
    for p in reversed(parts):
        total.merge(p)
    merged = D.measure_dependence(total, plan, cfg, lambda x: x)
    assert [g.as_dict() for g in merged] == [g.as_dict() for g in D.frame_dependence(
        frame, plan, cfg, kinds)]


def test_the_report_page_names_a_column_that_shows_moved_records():
    """risk.json's ``visible`` reaches the report page as a note under the dependence table."""
    import json

    from sdc.reports.html import render_html

    golden = ROOT / "tests" / "reports" / "golden"
    risk = json.loads((golden / "weighted.risk.json").read_text())
    utility = json.loads((golden / "weighted.utility.json").read_text())
    assert "Shows moved records" not in render_html(risk, utility)
    col = risk["dependence"]["columns"][0]
    col["visible"] = {"age": 0.02}
    assert f"Shows moved records: {col['column']} (fixes the original age)" in render_html(
        risk, utility)


def test_the_gain_counts_beyond_three_standard_errors_or_the_margin():
    """The finite-sample rule: above xi, a gain of 0.04 fails in a PRB of 2,000 sensitive
    records (3 SE = 0.033) but not in one of 20 (3 SE = 0.33: the 0.05 margin applies); under xi
    nothing fails."""
    from sdc.method.dependence.measure import failing

    fig = np.array([0.42, 0.42, 0.42, 0.39])
    base = np.array([0.38, 0.38, 0.30, 0.20])
    n = np.array([2000.0, 20.0, 20.0, 2000.0])
    assert failing(fig, base, n, XI).tolist() == [True, False, True, False]
