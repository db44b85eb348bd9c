"""The dependence check of released non-key columns (docs/METHOD.md "Dependence of non-key
columns"): exact and near functions of the keys are refused, ordinary correlated columns are
not, and every engine measures the same figures from its count pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import sdc
from sdc.config.load import parse_config
from sdc.executors.streaming import count_cells
from sdc.method.dependence import DependenceCounter, DependenceError, frame_dependence, key_sizes
from sdc.method.designs import plan_release
from sdc.method.partition import partition_frame
from sdc.pipeline.kernels import plan_cells

REGIONS = [f"R{i:02d}" for i in range(30)]
NAMES = {r: f"Region number {i}" for i, r in enumerate(REGIONS)}


def dependent_frame(n: int = 6000, seed: int = 5) -> pd.DataFrame:
    """Keys age, sex, region, educ; non-key columns: an exact function of age (agesq), a near
    function (birth year: two candidate ages), a name of the region code (exact, nominal), a
    function of two keys (years since school = age - educ), and ordinary correlated columns
    (income rising with age, hours differing by sex) plus an independent weight."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 81, n)
    sex = rng.choice(["F", "M"], n)
    region = rng.choice(REGIONS, n)
    educ = rng.integers(8, 19, n)
    return pd.DataFrame({
        "age": age, "sex": sex, "region": region, "educ": educ,
        "agesq": age * age,
        "birthyear": 2020 - age - rng.integers(0, 2, n),
        "region_name": [NAMES[r] for r in region],
        "since_school": age - educ,
        "income": np.round(np.exp(8 + 0.02 * age + rng.normal(0, 0.8, n)), 2),
        "hours": np.clip(np.rint(np.where(sex == "M", 42, 36) + rng.normal(0, 8, n)), 1, 99),
        "weight": rng.integers(50, 300, n),
    })


def config(drop: list[str] | None = None, extra: dict | None = None) -> sdc.ReleaseConfig:
    return parse_config({
        "name": "dep",
        "input": {"path": "unused.csv", "format": "csv", "drop": list(drop or [])},
        "key_variables": {"age": {"range": [18, 80]}, "sex": {"categories": ["F", "M"]},
                          "region": {"categories": REGIONS}, "educ": {"range": [8, 18]}},
        "partition": {"sex": "as_is", "age": {"bands": [18, 40, 60]}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 3,
        **(extra or {}),
    })


def figures(frame: pd.DataFrame, cfg: sdc.ReleaseConfig) -> dict[str, object]:
    plan = plan_release(partition_frame(frame, cfg), cfg)
    return {f.column: f for f in frame_dependence(frame, plan, cfg)}


EXACT = ["agesq", "region_name"]
NEAR = ["birthyear", "since_school"]
ORDINARY = ["income", "hours", "weight"]


def test_exact_and_near_functions_of_the_keys_fail_ordinary_columns_pass():
    frame = dependent_frame()
    cfg = config()
    got = figures(frame, cfg)
    for c in EXACT + NEAR:
        assert got[c].flagged, (c, got[c])
        assert got[c].figure > cfg.risk.xi > got[c].baseline
    for c in ORDINARY:
        assert not got[c].flagged, (c, got[c])
        # an ordinary column barely changes the filter intruder's success
        assert got[c].figure <= got[c].baseline + 0.05
    assert max(got["agesq"].revealed, key=got["agesq"].revealed.get) == "age"
    assert got["region_name"].revealed["region"] > 0.9


def test_release_refuses_naming_the_columns_keys_figures_and_fixes():
    frame = dependent_frame()
    with pytest.raises(DependenceError) as e:
        sdc.release_frame(frame, config(), seed=1)
    msg = str(e.value)
    for c in EXACT + NEAR:
        assert repr(c) in msg
    for c in ORDINARY:
        assert repr(c) not in msg
    assert "xi = 0.395" in msg and "reveals the original value(s) of age" in msg
    assert "derived:" in msg and "input.drop" in msg and "key variable" in msg
    assert isinstance(e.value, sdc.InputError)  # exit 2 in the CLI


def test_release_passes_once_the_dependent_columns_are_dropped():
    frame = dependent_frame()
    res = sdc.release_frame(frame, config(drop=EXACT + NEAR), seed=1)
    assert {f.column for f in res.dependence} == set(ORDINARY)
    assert not any(f.flagged for f in res.dependence)


def test_unique_continuous_values_never_inform():
    rng = np.random.default_rng(1)
    frame = dependent_frame(3000)[["age", "sex", "region", "educ"]]
    frame["x"] = rng.normal(size=len(frame))
    got = figures(frame, config())
    assert got["x"].revealed == {} and not got["x"].flagged


def test_counter_in_batches_equals_one_batch():
    """Batches merged in any grouping give the same aggregates (the batch engines' property)."""
    frame = dependent_frame(4000)
    cfg = config()
    plan = plan_release(partition_frame(frame, cfg), cfg)
    whole = frame_dependence(frame, plan, cfg)
    cells = plan.partitioned.cells
    cols = [f.column for f in whole]
    parts = []
    for lo in range(0, len(frame), 700):
        c = DependenceCounter(cols, 4, 3, sizes=key_sizes(cfg), merge_every=3)
        rc = cells.record_cell[lo:lo + 700]
        c.add(frame.iloc[lo:lo + 700], rc, cells.key_codes[rc])
        parts.append(c)
    total = DependenceCounter(cols, 4, 3, sizes=key_sizes(cfg), merge_every=2)
    for p in parts:
        total.merge(p)
    from sdc.method.dependence import measure_dependence

    merged = measure_dependence(total, plan, cfg, lambda x: x)
    assert [f.as_dict() for f in merged] == [f.as_dict() for f in whole]


def test_streaming_count_pass_measures_the_same_figures(tmp_path):
    frame = dependent_frame(3000)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    cfg = config(drop=EXACT + NEAR)
    cfg.input.path, cfg.input.format = path, "parquet"
    expected = [f.as_dict() for f in sdc.release_frame(frame, cfg, seed=1).dependence]
    plan = plan_cells(count_cells(cfg, batch_rows=400), cfg)
    assert [f.as_dict() for f in plan.dependence] == expected
    cfg_all = config()
    cfg_all.input.path, cfg_all.input.format = path, "parquet"
    with pytest.raises(DependenceError, match="agesq"):
        plan_cells(count_cells(cfg_all, batch_rows=400), cfg_all)


# -- derived: columns -------------------------------------------------------------------------
DERIVED = {"derived": ["agesq", "region_name", "since_school"]}


def test_derived_columns_are_the_mapping_of_the_released_keys():
    frame = dependent_frame()
    res = sdc.release_frame(frame, config(drop=["birthyear"], extra=DERIVED), seed=1)
    out = res.frame
    assert (out["age"] != frame["age"]).sum() > 100  # records moved
    assert (out["agesq"] == out["age"] ** 2).all()
    assert (out["since_school"] == out["age"] - out["educ"]).all()
    assert (out["region_name"] == out["region"].map(NAMES)).all()
    assert out["agesq"].dtype == frame["agesq"].dtype
    unmoved = res.released_cell == res.cells.record_cell
    assert out.loc[unmoved, "agesq"].equals(frame.loc[unmoved, "agesq"])
    assert {f.column for f in res.dependence} == set(ORDINARY)


def test_derived_column_that_is_not_a_function_of_the_keys_is_refused(tmp_path):
    from sdc.method.derived import DerivedError

    frame = dependent_frame(3000)
    cfg = config(extra={"derived": ["birthyear"]}, drop=["agesq", "region_name",
                                                         "since_school"])
    with pytest.raises(DerivedError, match="'birthyear' is not a function of the key values"):
        sdc.release_frame(frame, cfg, seed=1)
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg.input.path, cfg.input.format = path, "parquet"
    with pytest.raises(DerivedError, match="input.drop"):
        plan_cells(count_cells(cfg, batch_rows=700), cfg)


@pytest.mark.parametrize("bad", [{"derived": ["age"]}, {"derived": ["w"], "input": "weight"},
                                 {"derived": ["agesq", "agesq"]}])
def test_derived_config_is_checked(bad):
    data = {"name": "d", "input": {"path": "x.csv", "format": "csv"},
            "key_variables": {"age": {"range": [0, 9]}}, "risk": {"xi": 0.4}, "seed": 1,
            "derived": bad["derived"]}
    if bad.get("input") == "weight":
        data["input"]["weight"] = "w"
    with pytest.raises(sdc.ConfigError, match="derived"):
        parse_config(data)


def test_streaming_engine_releases_derived_columns_byte_identically(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "executors"))
    from test_engines import pandas_public, sha

    from sdc.executors.streaming import stream_release

    frame = dependent_frame(3000)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    cfg = config(drop=["birthyear"], extra={**DERIVED, "output": {
        "dir": str(tmp_path / "rel"), "formats": ["parquet", "csv"]}})
    cfg.input.path, cfg.input.format = path, "parquet"
    expected, res = pandas_public(cfg, 3)
    got = stream_release(cfg, 3, tmp_path / "s", batch_rows=400)
    for name, data in expected.items():
        assert sha((tmp_path / "s" / name).read_bytes()) == sha(data), name
    assert [f.as_dict() for f in got.dependence] == [f.as_dict() for f in res.dependence]


def _filter_intruder(res, frame: pd.DataFrame, column_age: np.ndarray) -> float:
    """Success of the intruder who keeps the records released in a singleton target's cell
    whose age-squared column fits the target's age and picks one uniformly, given that it
    finds one (NZY's risk is conditional on the released records seen): the sum over targets
    of the exact expectation of the uniform pick over the number of targets whose cell holds
    a fitting record."""
    cells = res.cells
    rc, rel = cells.record_cell, res.released_cell
    age_j = frame["age"].to_numpy()  # original age of the record = its cell's age
    cell_age = np.zeros(cells.n_cells, dtype=np.int64)
    cell_age[rc] = age_j
    fits = column_age == cell_age[rel]  # released record fits the cell it is released in
    n_fit = np.bincount(rel[fits], minlength=cells.n_cells)
    targets = np.flatnonzero(cells.frequency[rc] == 1)
    hit = (rel[targets] == rc[targets]) & fits[targets]
    found = n_fit[rc[targets]] >= 1
    return float(np.where(hit, 1.0 / np.maximum(n_fit[rc[targets]], 1), 0.0).sum() / found.sum())


def test_monte_carlo_intruder_using_a_derived_column_does_no_better_than_xi():
    """R releases under different seeds; per release the exact mean
    success of the filter intruder over the singleton targets. The tolerance is 3 standard
    errors of the mean over the R releases (sd of the per-release means / sqrt(R)). With the
    column released unchanged the same intruder does far better than xi (the test's power)."""
    frame = dependent_frame(6000, seed=9)
    cfg = config(drop=["birthyear", "region_name", "since_school"],
                 extra={"derived": ["agesq"]})
    xi = cfg.risk.xi
    derived, unchanged = [], []
    for seed in range(12):
        res = sdc.release_frame(frame, cfg, seed=seed)
        sq = res.frame["agesq"].to_numpy()
        derived.append(_filter_intruder(res, frame, np.rint(np.sqrt(sq)).astype(np.int64)))
        orig_age = np.rint(np.sqrt(frame["agesq"].to_numpy())).astype(np.int64)
        unchanged.append(_filter_intruder(res, frame, orig_age))
    d, u = np.array(derived), np.array(unchanged)
    se_d = d.std(ddof=1) / np.sqrt(d.size)
    se_u = u.std(ddof=1) / np.sqrt(u.size)
    assert d.mean() <= xi + 3 * se_d, (d.mean(), se_d)
    assert u.mean() > xi + 3 * se_u, (u.mean(), se_u)


def test_counter_aggregates_equal_a_brute_force_groupby() -> None:
    """The count pass's aggregates (hashed, scattered, dense for wide columns, merged over
    batches and partial counters) equal plain pandas groupbys of the whole file: per value
    bucket its count and key-code interval, the (cell, value) pairs of the cells with fewer than
    ``small_limit`` records, and the (value, key pair) combinations."""
    from sdc.method.dependence import HASH_BITS
    from sdc.method.draws import value_hash

    rng = np.random.default_rng(11)
    n, sizes, limit = 120_000, [3, 40, 25], 6
    kc = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
    cell = (kc[:, 0] * sizes[1] + kc[:, 1]) * sizes[2] + kc[:, 2]
    frame = pd.DataFrame({"small": rng.integers(0, 40, n), "text": rng.choice(list("abcde"), n),
                          "wide": rng.normal(size=n), "dep": kc[:, 1] * 3})
    parts = []
    for piece in np.array_split(np.arange(n), 3):  # three Dask-like partial counters
        c = DependenceCounter(list(frame.columns), 3, limit, sizes=sizes, merge_every=2)
        for b in np.array_split(piece, 4):
            c.add(frame.iloc[b], cell[b], kc[b])
        parts.append(c)
    for other in parts[1:]:
        parts[0].merge(other)
    counter = parts[0]
    total = pd.Series(cell).value_counts()
    for col in frame.columns:
        bucket = (value_hash(frame[col]) & np.uint64((1 << HASH_BITS) - 1)).astype(np.int64)
        g = pd.DataFrame({"b": bucket, **{f"k{j}": kc[:, j] for j in range(3)}}).groupby("b")
        (vb, vn, vlo, vhi), (pc, pb, pn) = counter.tables(col)
        assert np.array_equal(vb, g.size().index) and np.array_equal(vn, g.size().to_numpy())
        assert np.array_equal(vlo, g.min().to_numpy()) and np.array_equal(vhi, g.max().to_numpy())
        small = total.index[total < limit].to_numpy()
        keep = np.isin(cell, small)
        pairs = pd.DataFrame({"c": cell[keep], "b": bucket[keep]}).value_counts().sort_index()
        assert np.array_equal(pc, pairs.index.get_level_values(0))
        assert np.array_equal(pb, pairs.index.get_level_values(1))
        assert np.array_equal(pn, pairs.to_numpy())
        combos = counter.combos(col)
        if col == "wide":
            assert combos == {}
            continue
        for (k1, k2), (u, cnt) in combos.items():
            code = (bucket * sizes[k1] + kc[:, k1]) * sizes[k2] + kc[:, k2]
            eu, en = np.unique(code, return_counts=True)
            assert np.array_equal(u, eu) and np.array_equal(cnt, en)


@pytest.mark.parametrize("executor", ["memory", "streaming"])
def test_the_cli_refuses_with_exit_2_and_leaves_no_file(tmp_path, executor):
    """Through ``sdc release`` the refusal is exit 2 naming the columns, and nothing is left:
    no release folder, no stage folder (the in-memory executor's check measures on a thread
    beside the apply pass; its verdict comes before any file)."""
    from conftest import run_cli

    dependent_frame(3000).to_csv(tmp_path / "dep.csv", index=False)
    data = {"name": "dep", "input": {"path": str(tmp_path / "dep.csv"), "format": "csv"},
            "key_variables": {"age": {"range": [18, 80]}, "sex": {"categories": ["F", "M"]},
                              "region": {"categories": REGIONS}, "educ": {"range": [8, 18]}},
            "partition": {"sex": "as_is", "age": {"bands": [18, 40, 60]}},
            "risk": {"xi": 0.395, "small_blocks": "merge"},
            "seed": {"file": str(tmp_path / "dep.seed")},
            "output": {"dir": str(tmp_path / "out" / "dep"), "formats": ["parquet"]}}
    job = tmp_path / "dep.yaml"
    job.write_text(yaml.safe_dump(data), encoding="utf-8")
    r = run_cli("release", job, "--executor", executor)
    assert r.exit_code == 2, r.text
    assert "'agesq'" in r.text and "xi = 0.395" in r.text
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
