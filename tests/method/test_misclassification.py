"""Per-key misclassification (sdc.method.misclassification, docs/METHOD.md 7.14): the exact
expectation E[N_x(v -> w) | t] of the design used keeps the original counts in its rows and
the expected released counts in its columns, and equals the mean realized (original,
released) counts of the release engine over seeds; the codebook publishes it."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

import sdc
from sdc.method.misclassification import key_misclassification
from sdc.method.transition import expected_totals
from sdc.reports.expected import transition_design

ROOT = Path(__file__).resolve().parents[2]


def _config(**risk) -> sdc.ReleaseConfig:
    c = yaml.safe_load((ROOT / "configs" / "census_demo_design.yaml").read_text())
    c["input"]["path"] = str(ROOT / "data_samples" / "census_sample.csv")
    c.pop("seed", None)
    c["risk"].update(risk)
    return sdc.parse_config(copy.deepcopy(c), base_dir=ROOT)


@pytest.mark.parametrize("risk", [{}, {"destinations": "near"}, {"weighted": True}])
def test_rows_and_columns_are_the_original_and_expected_counts(risk) -> None:
    cfg = _config(**risk)
    res = sdc.release_frame(sdc.read_input(cfg).iloc[:15000], cfg, seed=3)
    _, design = transition_design(res)
    t = np.asarray(res.cells.frequency, dtype=np.float64)
    et = expected_totals(t, design)
    for j, k in enumerate(cfg.key_names):
        size = cfg.key_variables[k].size
        codes = res.cells.key_codes[:, j]
        m = key_misclassification(t, codes, size, design)
        np.testing.assert_allclose(m.sum(axis=1), np.bincount(codes, t, size), atol=1e-9)
        np.testing.assert_allclose(m.sum(axis=0), np.bincount(codes, et, size), atol=1e-9)
        assert (m >= -1e-12).all()


def test_expectation_equals_the_engines_mean_over_seeds() -> None:
    """40 releases (seeds 0-39) of 8,000 records: the mean realized number of puma changes
    (original v -> released w != v, summed) lies within 4 SE of the exact expectation; the SE
    is the realized counts' standard deviation over the seeds / sqrt(40).

    The plan does not depend on the seed, so the file is released once through
    ``release_frame`` (seed 0: the whole pipeline) and the 40 seeds are drawn from that
    release's own plan with the release's draw function (:func:`released_cells` on
    ``draw_plan(plan)``, every record's identity as the release computed it), as
    tests/method/test_weighted.py's Monte Carlo does: the draws of seed 0 are checked equal,
    record by record, to the release's released cells, so every replicate is the released
    cells a release with that seed writes (40 full releases planned the same design 40 times:
    ~4.4 CPU s)."""
    from sdc.method.draws import record_identity
    from sdc.method.plan import draw_plan
    from sdc.method.postrandomize import released_cells

    cfg = _config()
    frame = sdc.read_input(cfg).iloc[:8000].reset_index(drop=True)
    j = cfg.key_names.index("puma")
    size = cfg.key_variables["puma"].size
    first = sdc.release_frame(frame, cfg, seed=0)
    codes = first.cells.key_codes[:, j]
    _, design = transition_design(first)
    m = key_misclassification(np.asarray(first.cells.frequency, float), codes, size, design)
    want = m.sum() - np.trace(m)
    # the release's draws: its plan, its identities (person_id is unique: no tiebreak step)
    assert first.counted.identities_unique
    rc = first.record_cell
    dplan = draw_plan(first.plan, cfg)
    drawing = np.flatnonzero(dplan.cell_prb[rc] >= 0)
    identity = record_identity(frame, cfg)[drawing]
    got = []
    for seed in range(40):
        rl = rc.copy()
        rl[drawing] = released_cells(dplan, rc[drawing], identity, seed)
        if seed == 0:
            assert np.array_equal(rl, first.released.released_cell)  # what the release wrote
        got.append(int((codes[rc] != codes[rl]).sum()))
    se = np.std(got, ddof=1) / np.sqrt(len(got))
    assert abs(np.mean(got) - want) <= 4 * se, (np.mean(got), want, se)


def test_codebook_publishes_the_misclassification() -> None:
    from sdc.series.seeds import SeedInfo
    from tests.release_helpers import release_files, reports_of

    cfg = _config()
    with tempfile.TemporaryDirectory() as d:
        res = sdc.release_frame(sdc.read_input(cfg).iloc[:12000], cfg, seed=7, out_dir=Path(d))
        rep = reports_of(res, cfg, seed=7, n_sim=20)
        public, _ = release_files(cfg, res, SeedInfo(7, None, None, False),
                                  input_sha256="0" * 64, config_text="",
                                  reports=rep.files())
    text = public["codebook.md"].decode()
    sec = text[text.index("## Misclassification by key"):]
    assert "### `puma`" in sec and "| original value | kept |" in sec
    assert "| original \\ released | 1 (Male) | 2 (Female) |" in sec
    assert "mcsimex" in sec and "docs/" not in sec
