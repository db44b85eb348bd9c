"""Missing key values (docs/METHOD.md 7.9): under ``missing_moves: false`` missing
is a cell of its own that never receives or loses records, so no blank in the public file can
be a perturbed real value, on every engine; this is the default. Under ``missing_moves: true``
(the earlier behaviour) blanks move and the codebook says so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.config.load import parse_config


def missing_frame(n: int = 5000, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n).astype(float)
    age[rng.random(n) < 0.03] = np.nan  # a partition variable with missing values
    educ = rng.choice(["low", "mid", "high"], n).astype(object)
    educ[rng.random(n) < 0.05] = None  # a non-partition key with missing values
    return pd.DataFrame({"age": age, "sex": rng.choice(["F", "M"], n), "educ": educ,
                         "region": rng.integers(1, 41, n), "income": rng.lognormal(9, 1, n)})


def config(moves: bool | None = False, small_blocks: str = "merge") -> sdc.ReleaseConfig:
    """``moves=None`` leaves missing_moves out (the default policy)."""
    policy = {} if moves is None else {"missing_moves": moves}
    return parse_config({
        "name": "miss",
        "input": {"path": "unused.parquet", "format": "parquet"},
        "key_variables": {
            "age": {"range": [18, 90], "missing": "category", **policy},
            "sex": {"categories": ["F", "M"]},
            "educ": {"categories": ["low", "mid", "high"], "missing": "category", **policy},
            "region": {"range": [1, 40]}},
        "partition": {"sex": "as_is", "age": {"bands": [18, 50, 80]}},
        "risk": {"xi": 0.395, "small_blocks": small_blocks},
        "seed": 3,
    })


def blanks_changed(frame: pd.DataFrame, out: pd.DataFrame) -> int:
    return int(sum((frame[k].isna().to_numpy() != out[k].isna().to_numpy()).sum()
                   for k in ("age", "educ")))


def test_fixed_policy_no_blank_is_a_perturbed_value_and_none_is_lost():
    frame = missing_frame()
    res = sdc.release_frame(frame, config(), seed=1)
    out = res.frame
    assert (out["educ"] != frame["educ"]).sum() > 50  # records did move
    assert blanks_changed(frame, out) == 0
    labels = set(res.partition_sets["partition_key"])
    assert any(lab.endswith("missing: educ") for lab in labels)
    assert any("missing: age" in lab for lab in labels)


def test_missing_moves_true_lets_blanks_move():
    """The test's power: with the old behaviour blanks do change."""
    frame = missing_frame()
    out = sdc.release_frame(frame, config(moves=True), seed=1).frame
    assert blanks_changed(frame, out) > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streaming_engine_keeps_blanks_and_equals_pandas(tmp_path, seed):
    from sdc.executors.streaming import count_cells
    from sdc.pipeline.kernels import plan_cells

    frame = missing_frame(3000, seed=seed)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    cfg = config(small_blocks="calibrate")
    cfg.input.path = path
    res = sdc.release_frame(frame, cfg, seed=seed)
    plan = plan_cells(count_cells(cfg, batch_rows=600), cfg)
    assert list(plan.partitioned.partition_keys) == list(res.partition_sets["partition_key"])
    assert blanks_changed(frame, res.frame) == 0


def test_a_small_missing_block_is_refused_with_the_policy_named():
    frame = missing_frame(3000, seed=1)
    with pytest.raises(sdc.SmallBlockError, match="missing_moves: true"):
        sdc.release_frame(frame, config(), seed=1)


def test_default_policy_keeps_every_blank_and_files_without_missing_are_unchanged():
    """The default (missing_moves left out) is ``false``: no blank in the public file is a
    perturbed real value and no real value was made blank, while records with blanks do
    move in their other keys; the codebook says so. A file without missing values releases
    the same under both policies."""
    from sdc.config.model import KeyVariable
    from sdc.release.public import codebook_markdown

    assert KeyVariable(range=(0, 3), missing="category").missing_moves is False
    frame = missing_frame()
    default = config(moves=None)
    res = sdc.release_frame(frame, default, seed=5)
    assert blanks_changed(frame, res.frame) == 0
    blank = frame["educ"].isna().to_numpy()
    moved_keys = (res.frame["age"].fillna(-1) != frame["age"].fillna(-1)) | \
        (res.frame["sex"] != frame["sex"])
    assert moved_keys[blank].sum() > 0          # blank records were post-randomized too
    assert res.frame.equals(sdc.release_frame(frame, config(moves=False), seed=5).frame)
    assert "A blank is always a real blank" in codebook_markdown(default, res)
    assert res.certificate <= default.risk.xi
    full = missing_frame(3000).dropna()
    a = sdc.release_frame(full, config(moves=False), seed=2)
    b = sdc.release_frame(full, config(moves=True), seed=2)
    assert a.frame.equals(b.frame)
    assert list(a.partition_sets["partition_key"]) == list(b.partition_sets["partition_key"])


@pytest.mark.parametrize("seed", range(5))
def test_no_blank_is_a_perturbed_value_over_seeds(seed):
    """Over several files and seeds under the default policy: the set of records with a blank
    is exactly the same before and after, key by key."""
    frame = missing_frame(4000, seed=10 + seed)
    res = sdc.release_frame(frame, config(moves=None, small_blocks="calibrate"), seed=seed)
    for k in ("age", "educ"):
        assert np.array_equal(frame[k].isna().to_numpy(), res.frame[k].isna().to_numpy()), k


def test_codebook_states_the_policy():
    from sdc.release.public import codebook_markdown

    frame = missing_frame(5000)
    cfg = config()
    res = sdc.release_frame(frame, cfg, seed=1)
    text = codebook_markdown(cfg, res)
    assert "A blank is always a real blank" in text
    moving = config(moves=True)
    text2 = codebook_markdown(moving, sdc.release_frame(frame, moving, seed=1))
    assert "a blank may stand for a real value" in text2
