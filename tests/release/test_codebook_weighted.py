"""The codebook of a file with a survey weight says one thing about its weighted totals, with
utility.json's exact figure (issue 49): the weighted-mode codebook no longer also claims that
every combination's expected count equals its count, nor the unweighted design's "weighted
estimates can be biased"; a file with input.weight released with the unweighted design is
told by how much its weighted totals are off and pointed to risk.weighted; the codebook
carries its variance recipe and cites no document a data user lacks."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
import yaml

import sdc
from sdc.series.seeds import SeedInfo
from tests.release_helpers import release_files, reports_of

ROOT = Path(__file__).resolve().parents[2]


def _release(**risk) -> tuple[str, dict]:
    c = yaml.safe_load((ROOT / "configs" / "census_demo_design.yaml").read_text())
    c["input"]["path"] = str(ROOT / "data_samples" / "census_sample.csv")
    c.pop("seed", None)
    c["risk"].update(risk)
    cfg = sdc.parse_config(copy.deepcopy(c), base_dir=ROOT)
    frame = sdc.read_input(cfg).iloc[:12000].reset_index(drop=True)
    with tempfile.TemporaryDirectory() as d:
        res = sdc.release_frame(frame, cfg, seed=7, out_dir=Path(d))
        rep = reports_of(res, cfg, seed=7, n_sim=20)
        public, _ = release_files(cfg, res, SeedInfo(7, None, None, False),
                                  input_sha256="0" * 64, config_text="",
                                  reports=rep.files())
    return public["codebook.md"].decode(), json.loads(rep.files()["utility.json"])


@pytest.mark.parametrize("weighted", [False, True])
def test_weighted_codebook_states_the_exact_expected_totals(weighted: bool) -> None:
    text, utility = _release(weighted=weighted)
    e = utility["expected_totals"]
    assert e["mode"] == ("weighted" if weighted else "nzy")
    share = f"{100 * e['weighted']['share']:.2f}% of the total weight"
    assert share in text
    assert "docs/" not in text and "DATA_USERS" not in text   # no document the user lacks
    assert "How to use the figures below" in text and "sampling variance" in text
    if weighted:
        assert "expected count of every combination of key values equals" not in text
        assert "weighted estimates can be biased" not in text
        assert f"{100 * e['counts']['share']:.2f}% of the records" in text
    else:
        assert "risk.weighted: true" in text
        assert "expected count of every combination of key values equals" in text
