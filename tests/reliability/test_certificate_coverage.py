"""End to end: the certificate covers the whole released file.

A file with an exact derived column (``agesq`` = age^2), a near-derived column (``birthyear``:
two candidate ages) and an ordinary correlated column (``income``, rising with age):

- ``sdc release`` refuses (exit 2, nothing written) naming the first two, not the third;
- with ``derived: [agesq]`` and ``birthyear`` under ``input.drop`` it releases (pandas,
  streaming and dask give the same bytes), ``agesq`` equals the mapping of the released ages in
  every record, and ``sdc audit`` passes (it re-checks the derived column);
- an intruder who uses ``agesq`` does no better than xi (Monte Carlo over releases; tolerance
  3 standard errors of the mean, from the spread of the per-release figures), while the same
  intruder on the column released unchanged does much better (the test's power).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.config.load import parse_config

pytestmark = pytest.mark.slow

XI = 0.395


def coverage_frame(n: int = 4000, seed: int = 21) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(16, 86, n)
    sex = rng.integers(1, 3, n)
    region = rng.integers(1, 9, n)
    return pd.DataFrame({
        "id": np.arange(n) * 13 + 7,
        "sex": sex, "age": age, "region": region,
        "agesq": age * age,                                        # exact function of age
        "birthyear": 2025 - age - rng.integers(0, 2, n),           # near: two candidate ages
        "income": np.round(np.exp(8.5 + 0.015 * age + rng.normal(0, 0.7, n)), 2),  # ordinary
    })


def coverage_config(**extra) -> dict:
    return {
        "name": "coverage",
        # Parquet: every engine reads it (dask reads Parquet only)
        "input": {"path": "data/input.parquet", "format": "parquet", "id_column": "id",
                  "drop": []},
        "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [16, 85]},
                          "region": {"range": [1, 8]}},
        "partition": {"sex": "as_is", "age": {"bands": [16, 30, 45, 60, 75]}},
        "risk": {"xi": XI, "theta": "theorem", "small_blocks": "merge"},
        "seed": {"file": "secrets/job.seed"},
        "output": {"dir": "releases/job", "formats": ["parquet", "csv"]},
        **extra,
    }


def test_release_refuses_the_exact_and_near_columns_not_the_ordinary_one(cli, job):
    job.frame = coverage_frame()
    job.config = coverage_config()
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    text = res.text
    assert "'agesq'" in text and "'birthyear'" in text and "'income'" not in text
    assert "derived:" in text and "input.drop" in text and "key variable" in text
    assert f"xi = {XI}" in text
    assert job.leftovers() == []                                   # nothing written


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_released_with_derived_and_dropped_columns(cli, job, engine, tmp_path_factory):
    job.frame = coverage_frame()
    job.config = coverage_config(derived=["agesq"])
    job.config["input"]["drop"] = ["birthyear"]
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    pub = pq.read_table(job.out_dir / "public" / "microdata.parquet").to_pandas()
    assert "birthyear" not in pub and "id" not in pub
    assert (pub["agesq"] == pub["age"] ** 2).all()                 # every record
    assert pub["income"].notna().all()
    audit = cli("audit", job.out_dir)
    assert audit.exit_code == 0, audit.output
    # the same bytes on every engine (the first engine's files kept for the others)
    store = tmp_path_factory.getbasetemp() / "coverage-public"
    store.mkdir(exist_ok=True)
    for name in ("microdata.parquet", "microdata.csv"):
        data = (job.out_dir / "public" / name).read_bytes()
        ref = store / name
        if ref.exists():
            assert data == ref.read_bytes(), (engine, name)
        else:
            ref.write_bytes(data)


def _intruder_success(res, frame: pd.DataFrame, column_age: np.ndarray) -> float:
    """Mean success over the singleton targets of the intruder who knows the target's key
    values, keeps the records released in the target's cell whose column value fits the
    target's age (``column_age`` = the age each released record's column points to) and picks
    one uniformly, given that some record fits (NZY's risk is conditional on what is seen).
    Exact expectation of the uniform pick per target (no inner simulation)."""
    cells = res.cells
    rc, rel = cells.record_cell, res.released_cell
    cell_age = np.zeros(cells.n_cells, dtype=np.int64)
    cell_age[rc] = frame["age"].to_numpy()
    fits = column_age == cell_age[rel]
    n_fit = np.bincount(rel[fits], minlength=cells.n_cells)
    targets = np.flatnonzero(cells.frequency[rc] == 1)
    hit = (rel[targets] == rc[targets]) & fits[targets]
    found = n_fit[rc[targets]] >= 1
    return float(np.where(hit, 1.0 / np.maximum(n_fit[rc[targets]], 1), 0.0).sum()
                 / max(int(found.sum()), 1))


def test_monte_carlo_intruder_using_the_derived_column_does_no_better_than_xi(tmp_path):
    frame = coverage_frame()
    data = coverage_config(derived=["agesq"])
    data["input"] = {"path": str(tmp_path / "unused.csv"), "format": "csv", "id_column": "id",
                     "drop": ["birthyear"]}
    data["seed"] = 1
    cfg = parse_config(data, tmp_path)
    derived, unchanged = [], []
    original_age = np.rint(np.sqrt(frame["agesq"].to_numpy())).astype(np.int64)
    for seed in range(16):
        res = sdc.release_frame(frame, cfg, seed=seed)
        assert (res.frame["agesq"] == res.frame["age"] ** 2).all()
        released_age = np.rint(np.sqrt(res.frame["agesq"].to_numpy())).astype(np.int64)
        derived.append(_intruder_success(res, frame, released_age))
        unchanged.append(_intruder_success(res, frame, original_age))
    d, u = np.array(derived), np.array(unchanged)
    se_d = d.std(ddof=1) / np.sqrt(d.size)
    se_u = u.std(ddof=1) / np.sqrt(u.size)
    assert d.mean() <= XI + 3 * se_d, (d.mean(), se_d)
    assert u.mean() > XI + 3 * se_u, (u.mean(), se_u)
    assert u.mean() > 0.8                                # the unchanged column gives ages away
