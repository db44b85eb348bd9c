"""The dependence check at any grain through the CLI on every executor (issue 34): finer
grains of a key refused with the fixes, merely unique columns released; the figures in
audit.json and ``sdc audit``'s re-measure agree."""

from __future__ import annotations

import json

import pytest

from tests.method.test_dependence_grain import FLAGGED, PASSING, XI, grain_config, grain_frame


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_release_refuses_finer_grains_on_every_executor(cli, job, engine: str) -> None:
    """Exit 2, nothing written, naming each finer-grain column, the key it reveals, its figure
    against xi and the fixes; income and the token pass. With the refused columns dropped the
    release runs, audit.json records each column's figures (``via``) and ``sdc audit``
    re-measures the same."""
    job.frame = grain_frame()
    job.config = grain_config()
    if engine == "dask":
        job.config["engine"] = {"kind": "dask", "workers": 1}
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 2, res.output
    text = res.text
    for c in FLAGGED:
        assert f"'{c}'" in text, (c, text)
    assert "'income'" not in text and "'token'" not in text and "'hours'" not in text
    assert "in order" in text and "age" in text and f"xi = {XI}" in text
    assert "derived:" in text and "input.drop" in text and "key variable" in text
    assert job.leftovers() == []
    job.config["input"]["drop"] = FLAGGED
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    audit = json.loads((job.out_dir / "internal" / "audit.json").read_text())
    cols = {c["column"]: c for c in audit["dependence"]["columns"]}
    assert set(cols) == set(PASSING)
    assert all(c["via"] in ("values", "order") and not c["flagged"] for c in cols.values())
    res = cli("audit", job.out_dir)
    assert res.exit_code == 0, res.output
    assert "dependence check: recomputed = recorded" in res.text
