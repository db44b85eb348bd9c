"""Relations an intruder computes, through the CLI on every executor (issue 46 item 1): a running
total of age, a birth date written day-first and a column whose ratio to another is age are
refused (exit 2, nothing written) naming each and the fixes, with the same verdict on pandas,
streaming (batches of 500) and Dask; released once they are dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.method.test_dependence_grain import XI, grain_config, grain_frame


def relations_frame() -> pd.DataFrame:
    f = grain_frame()
    rng = np.random.default_rng(17)
    age = f["age"].to_numpy()
    f["cum_age"] = np.cumsum(age)
    f["dob"] = pd.to_datetime(f["bdate"]).dt.strftime("%d.%m.%Y")
    f["x"] = rng.integers(1000, 10 ** 6, len(f))
    f["y"] = f["x"] * age
    return f[["id", "sex", "age", "region", "income", "hours", "cum_age", "dob", "x", "y"]]


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_release_refuses_relations_on_every_executor(cli, job, engine: str) -> None:
    job.frame = relations_frame()
    job.config = grain_config()
    if engine == "dask":
        job.config["engine"] = {"kind": "dask", "workers": 1}
    if engine == "streaming":
        job.config["engine"] = {"kind": "streaming", "batch_rows": 500}
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 2, res.output
    text = " ".join(res.text.split())
    assert "'cum_age'" in text and "sorted, minus the previous value" in text, text
    assert "'dob'" in text and "read as a day-first date" in text, text
    assert "'x / y'" in text or "'y'" in text, text
    assert f"xi = {XI}" in text and "input.drop: [" in text, text
    assert "'income'" not in text and "'hours'" not in text, text
    assert job.leftovers() == []
    job.config["input"]["drop"] = ["cum_age", "dob", "y"]
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output


def test_a_column_that_shows_moved_records_is_named_and_refused_when_strict(cli, tmp_path) -> None:
    """The demo file with age in 10-year bands and a copy of the band (issue 47): released
    (exit 0) with the codebook saying the column shows moved records and ``sdc audit`` passing;
    refused (exit 2, nothing written) under ``risk.dependence: strict``."""
    from tests.method.test_dependence_relations import _band_copy, _ten_year_bands, write_case

    path = write_case(tmp_path, _band_copy(), _ten_year_bands)
    res = cli("release", path)
    assert res.exit_code == 0, res.output
    out = tmp_path / "release"
    row = next(line for line in (out / "public" / "codebook.md").read_text().splitlines()
               if "`age_band`" in line)
    assert "shows moved records" in row, row
    res = cli("audit", out)
    assert res.exit_code == 0, res.output

    def strict(raw: dict) -> None:
        _ten_year_bands(raw)
        raw["risk"]["dependence"] = "strict"
        raw["output"]["dir"] = str(tmp_path / "strict")

    res = cli("release", write_case(tmp_path, _band_copy(), strict))
    assert res.exit_code == 2, res.output
    text = " ".join(res.text.split())
    assert "'age_band'" in text and "risk.dependence: strict" in text, text
    assert not (tmp_path / "strict").exists()
