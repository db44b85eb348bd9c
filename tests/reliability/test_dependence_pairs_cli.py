"""The dependence check in pairs through the CLI on every executor (issue 34): pairs of columns
that give a key away together refused with the fixes (the same verdict on pandas, streaming and
Dask: the pairs are chosen from the schema), released once one column of each is dropped;
pairs beyond the bound named in a warning."""

from __future__ import annotations

import numpy as np
import pytest

from tests.method.test_dependence_grain import XI, grain_config, grain_frame
from tests.method.test_dependence_pairs import pair_frame


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_release_refuses_revealing_pairs_on_every_executor(cli, job, engine: str) -> None:
    job.frame = pair_frame()
    job.config = grain_config()
    if engine == "dask":
        job.config["engine"] = {"kind": "dask", "workers": 1}
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 2, res.output
    text = res.text
    for name in ("'p + q'", "'r - s'", "'(u, v)'"):
        assert name in text, (name, text)
    for c in ("'p'", "'r'", "'s'", "'u'", "'v'", "'income'", "'hours'"):
        assert c not in text, (c, text)
    assert "together, p and q (neither alone)" in text and f"xi = {XI}" in text
    assert "Fix each pair" in text and "input.drop: [q, s, v]" in text
    assert job.leftovers() == []
    job.config["input"]["drop"] = ["q", "s", "v"]
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    assert "pair(s) of released columns not checked" not in res.text
    res = cli("audit", job.out_dir)
    assert res.exit_code == 0, res.output


def test_pairs_beyond_the_bound_are_named_in_the_release_warning(cli, job) -> None:
    """15 integer non-key columns: the first 12 pair (every pair among them checked), the
    pairs of the last 3 are named in the release's warning."""
    rng = np.random.default_rng(5)
    f = grain_frame()[["id", "sex", "age", "region"]].copy()
    for i in range(15):
        f[f"c{i:02d}"] = rng.integers(0, 50, len(f))
    job.frame = f
    job.config = grain_config()
    res = cli("release", job.write(), "--engine", "streaming")
    assert res.exit_code == 0, res.output
    text = " ".join(res.text.split())
    assert "39 pair(s) of released columns not checked" in text, text
    assert "the pairs of c12, c13, c14" in text
