"""The codebook's uncertainty section (sdc.release.uncertainty): only rounded-up aggregates are
published, and the published bound is >= the exact added variance of every category count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import sdc
from sdc.method.variance import publishable_count, set_count_variance
from sdc.release.uncertainty import uncertainty_figures, uncertainty_markdown

REPO = Path(__file__).resolve().parents[2]


def _census():
    cfg = sdc.load_config(REPO / "configs" / "census_demo.yaml")
    frame = pd.read_csv(cfg.input_path)
    return cfg, sdc.release_frame(frame, cfg, seed=1)


def test_published_bound_covers_the_exact_variance_of_every_category():
    cfg, r = _census()
    fig = uncertainty_figures(cfg, r)
    assert fig["theta_bar"] == 0.80                       # theorem's 0.79905, rounded up
    sens = r.cell_prb >= 0
    theta = r.blocks.set_index("prb")["theta"]
    names = r.cells.names
    for var in ("marital", "race", "puma", "age"):
        col = names.index(var)
        for code, (value, c_pub, bound) in enumerate(fig["variables"][var]):
            exact = 0.0
            for b in np.unique(r.cell_prb[sens]):           # loop over PRBs
                idx = np.flatnonzero(r.cell_prb == b)
                mask = r.cells.key_codes[idx, col] == code
                exact += set_count_variance(r.cells.frequency[idx], float(theta[b]), mask)
            c_true = int((r.cells.key_codes[sens, col] == code).sum())
            assert c_pub == publishable_count(c_true) >= c_true
            assert exact <= bound + 1e-9, (var, value, exact, bound)


def test_section_prints_rounded_aggregates_only():
    cfg, r = _census()
    text = "\n".join(uncertainty_markdown(cfg, r))
    assert "theta_bar = 0.80" in text and "0.799" not in text
    assert "### `sex`" in text and "Kept as is" in text
    assert "| 3 | Divorced | 3,100 |" in text               # 3,002 rare cells, rounded up
    for figure in r.blocks["theta"].unique():
        assert f"{figure:.4f}" not in text
