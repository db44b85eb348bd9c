"""Household files through the command line: release, audit, public household ids,
the Dask engine's release, the refusal of perturb: in batches and the validation of inconsistent households."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from engine_configs import HOUSEHOLD_INPUT, HOUSEHOLD_KEYS, HOUSEHOLD_PARTITION

import sdc
from sdc.samples import generate_household_sample
from tests.cli.test_cli import assert_clean_error, run

HH_CHANGES = {
    "input": {"drop": [], "weight": None, **HOUSEHOLD_INPUT},
    "key_variables": HOUSEHOLD_KEYS,
    "partition": HOUSEHOLD_PARTITION,
    "risk": {"xi": 0.5},
}


def _job(make_small_job, name, frame):
    cfg = make_small_job(name, frame=frame, **HH_CHANGES)
    # make_small_job's key variables are replaced, not merged
    d = yaml.safe_load(cfg.read_text())
    d["key_variables"] = HH_CHANGES["key_variables"]
    d["partition"] = HH_CHANGES["partition"]
    d["input"]["drop"] = ["income"]  # 0 for every child: it gives age away (dependence check)
    d["input"].pop("weight", None)
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    return cfg


@pytest.mark.e2e
def test_household_release_audit_and_public_households(prefect_harness, make_small_job):
    frame = generate_household_sample(4000, seed=3, n_regions=12)
    cfg = _job(make_small_job, "hh", frame)
    out = sdc.load_config(cfg).output_dir
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    r = run("audit", out)
    assert r.exit_code == 0, r.text
    assert "households: consistent" in r.text and "FAIL" not in r.text

    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    n_h = frame["hh_id"].nunique()
    # pseudonyms 1..H, households contiguous, in pseudonym order, consistent
    assert pub["hh_id"].dtype.kind == "i"
    assert sorted(pub["hh_id"].unique()) == list(range(1, n_h + 1))
    assert (np.diff(pub["hh_id"].to_numpy()) >= 0).all()
    cols = ["region", "urbrur", "dwelling", "water", "hh_weight"]
    assert (pub.groupby("hh_id")[cols].nunique() == 1).all().all()
    # the household sizes survive, the original ids and the input order do not
    assert sorted(pub.groupby("hh_id").size()) == sorted(frame.groupby("hh_id").size())
    first = frame.drop_duplicates("hh_id")  # households in input (= original id) order
    assert not (pub.drop_duplicates("hh_id")["hh_weight"].to_numpy()
                == first["hh_weight"].to_numpy()).all()
    assert "person_id" not in pub.columns

    # same config + input in another row order -> byte-identical public files: the shuffled
    # file read and released by the library's in-memory call of the pipeline the CLI ran (a
    # second CLI release asked the same at 3x the CPU: flow, reports, audit record)
    shuffled = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    cfg2 = sdc.load_config(_job(make_small_job, "hh2", shuffled))
    out2 = sdc.release_frame(sdc.read_input(cfg2), cfg2, seed=20260101,
                             out_dir=cfg2.output_dir / "public").files
    for name in ("microdata.parquet", "microdata.csv"):
        assert (out / "public" / name).read_bytes() == out2[name].read_bytes()


def test_household_release_on_the_dask_engine(prefect_harness, make_small_job):
    """The Dask engine releases a household file (Parquet input; the files equal the pandas
    engine's: tests/contract/test_executors.py) with ``perturb:`` of a household column;
    households stay consistent (the perturbed column once per household) and together,
    ``sdc audit`` passes. (One release: the same file without ``perturb:``, released and
    audited first, asked nothing this release does not; its Dask audit is also
    tests/audit/test_household_audit.py's.)"""
    frame = generate_household_sample(800, seed=3, n_regions=12)
    cfg = _job(make_small_job, "hhb", frame)
    d = yaml.safe_load(cfg.read_text())
    parquet = cfg.parent / "hhb.parquet"
    frame.to_parquet(parquet, index=False, row_group_size=300)
    d["input"].update({"path": str(parquet), "format": "parquet"})
    # perturb: of a household column (once per household) on the batch engines too
    d["perturb"] = {"water": {"epsilon": 1.0, "categories": list(range(1, 10))}}
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    r = run("release", cfg, "--engine", "dask")
    assert r.exit_code == 0, r.text
    out = sdc.load_config(cfg).output_dir
    r = run("audit", out)
    assert r.exit_code == 0, r.text
    assert "households: consistent" in r.text and "FAIL" not in r.text
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert (np.diff(pub["hh_id"].to_numpy()) >= 0).all()
    cols = ["region", "urbrur", "dwelling", "water", "hh_weight"]
    assert (pub.groupby("hh_id")[cols].nunique() == 1).all().all()
    # the perturbation reached the file: some household's water differs from its input's
    src = frame.drop_duplicates("hh_id")["water"].value_counts().sort_index()
    got = pub.drop_duplicates("hh_id")["water"].value_counts().sort_index()
    assert not src.equals(got), (src, got)


def test_validate_lists_inconsistent_households(make_small_job):
    frame = generate_household_sample(500, seed=3, n_regions=12)
    multi = frame["hh_id"].value_counts()
    bad = multi[multi > 1].index[:2]
    rows = frame.index[frame["hh_id"].isin(bad)]
    frame.loc[rows[frame.loc[rows, "hh_id"].duplicated()], "dwelling"] = 6
    frame.loc[frame["hh_id"].isin(bad), "dwelling"] = np.where(
        frame.loc[frame["hh_id"].isin(bad), "hh_id"].duplicated(), 6, 5)
    cfg = _job(make_small_job, "hhv", frame)
    assert_clean_error(run("validate", cfg), 2, "'dwelling' differs within 2 household(s)",
                       *sorted(bad))


def test_plan_notes_the_household_stage(make_small_job):
    frame = generate_household_sample(1500, seed=3, n_regions=12)
    cfg = _job(make_small_job, "hhp", frame)
    r = run("plan", cfg)
    assert r.exit_code == 0, r.text
    assert "household file: the PRBs below are the person stage's" in r.text
    assert "household PRB(s)" in r.text


@pytest.mark.e2e
def test_household_release_with_perturb_passes_the_audit(prefect_harness, make_small_job):
    """perturb: on a household file: the household column water once per
    household, the person column employed per person; released, consistent, audited."""
    frame = generate_household_sample(3000, seed=5, n_regions=12)
    frame["employed"] = (np.random.default_rng(2).random(len(frame)) < 0.6).astype(np.int64)
    cfg = _job(make_small_job, "hhdp", frame)
    d = yaml.safe_load(cfg.read_text())
    d["perturb"] = {"water": {"epsilon": 1.0, "categories": list(range(1, 10))},
                    "employed": {"epsilon": 1.0, "categories": [0, 1]}}
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    out = sdc.load_config(cfg).output_dir
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    r = run("audit", out)
    assert r.exit_code == 0, r.text
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert (pub.groupby("hh_id")["water"].nunique() == 1).all()
    assert (pub.groupby("hh_id")["employed"].nunique() > 1).any()


@pytest.mark.e2e
def test_a_refusal_inside_a_dask_task_is_one_clean_error(prefect_harness, make_small_job,
                                                        capfd):
    """A refusal raised by a task on a Dask worker (here: protect with person keys of 2 x 96 x
    5 combinations, more than 64) is the same one paragraph, exit 2, as on the other
    executors, with no worker log of a failed computation and its traceback on stderr (the
    workers are processes writing to the same stderr: capfd sees them)."""
    pytest.importorskip("distributed")
    frame = generate_household_sample(600, seed=5, n_regions=12)
    cfg = _job(make_small_job, "hhr", frame)
    d = yaml.safe_load(cfg.read_text())
    parquet = cfg.parent / "hhr.parquet"
    frame.to_parquet(parquet, index=False, row_group_size=200)
    d["input"].update({"path": str(parquet), "format": "parquet"})
    d["risk"]["composition"] = "protect"
    d["partition"] = {}
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    texts = {}
    for executor in ("streaming", "dask"):
        r = run("plan", cfg, "--executor", executor)
        err = capfd.readouterr().err
        assert r.exit_code == 2, r.text
        texts[executor] = " ".join(r.text.split())
        assert "more than 64" in texts[executor]
        assert "Compute Failed" not in err and "Traceback" not in err, err
    assert texts["dask"] == texts["streaming"]
