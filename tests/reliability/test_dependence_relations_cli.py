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
