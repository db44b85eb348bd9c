"""The release flow (flows/release.py): plain functions first, then a few real flow runs under
one session-scoped Prefect test harness (census demo and adult end to end)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pandas as pd
import pytest

import sdc
from flows.release import (
    artifact_key,
    blocks_table,
    check_release_target,
    load_job,
    release,
    summarize,
    summary_markdown,
)
from sdc.publish.folder import ReleaseExistsError, ReleaseFolderError
from sdc.release.job import plan_job, validate_release_input
from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[2]


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


# ---------------------------------------------------------------------------------------------
# plain functions
# ---------------------------------------------------------------------------------------------
def test_load_job_reads_and_hashes(make_small_job):
    cfg = make_small_job(n=500)
    job = load_job(cfg)
    data = Path(job.config.input_path)
    assert len(job.frame) == 500
    assert job.input_sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    assert job.config_text == cfg.read_text(encoding="utf-8")
    assert job.config_path == cfg.resolve()


def test_check_release_target(make_small_job, tmp_path):
    config = sdc.load_config(make_small_job())
    out = config.output_dir
    check_release_target(config, force=False)          # absent: fine
    out.mkdir(parents=True)
    check_release_target(config, force=False)          # empty folder: fine
    (out / "notes.txt").write_text("someone's files")
    for force in (False, True):                        # not a release: never replaced
        with pytest.raises(ReleaseFolderError, match="not a release folder"):
            check_release_target(config, force=force)
    (out / "notes.txt").unlink()
    (out / "internal").mkdir()
    (out / "internal" / "audit.json").write_text("{}")
    with pytest.raises(ReleaseExistsError, match="--force"):
        check_release_target(config, force=False)
    check_release_target(config, force=True)


def test_plan_release_writes_nothing_and_matches_the_engine(make_census_job):
    cfg_path = make_census_job()
    config = sdc.load_config(cfg_path)
    seed_file = config.resolve(config.seed.file)
    plan = plan_job(cfg_path)
    assert not seed_file.exists() and not seed_file.parent.exists()
    assert not config.output_dir.exists()
    assert plan.changed is None and not plan.seed_known and plan.notes
    # the paper's partition on the demo data: 42 partition sets, each with its own PRB
    assert (plan.n_records, plan.n_partition_sets, plan.n_prbs, plan.kmin) == (59033, 42, 42, 5)
    assert plan.theta == pytest.approx(0.7990, abs=1e-4)
    assert plan.certificate <= plan.xi
    # expected changed = sum over PRBs of theta_b * k_b
    assert plan.expected_changed == pytest.approx(float((plan.blocks.theta * plan.blocks.k).sum()))
    assert len(plan.small_block_actions) == 0

    # the plan is seed-independent: two seeds give the same blocks except the realized changes
    frame = load_job(cfg_path).frame
    a = sdc.release_frame(frame, config, 1).blocks.drop(columns="changed")
    b = sdc.release_frame(frame, config, 2).blocks.drop(columns="changed")
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(plan.blocks.drop(columns="changed"), a)

    # once the seed exists, the plan also states the realized number of changed records
    seed_file.parent.mkdir(mode=0o700)
    seed_file.write_text("123456789123456789\n")
    seed_file.chmod(0o600)
    plan2 = plan_job(cfg_path)
    assert plan2.seed_known and not plan2.notes
    assert plan2.changed == sdc.release_frame(frame, config, 123456789123456789).n_changed


def test_plan_reports_small_block_actions(make_small_job):
    cfg = make_small_job(n=400, partition={"sex": "as_is", "age": {"bands": list(range(0, 91, 10))},
                                           "race": "as_is"})
    plan = plan_job(cfg)
    assert len(plan.small_block_actions) > 0
    assert plan.merges
    assert plan.certificate <= plan.xi


def test_validate_release_input(make_small_job):
    ok = validate_release_input(make_small_job(n=800))
    assert (ok.n_records, ok.key_variables) == (800, ["sex", "age", "race", "region"])
    assert ok.n_partition_sets == 6 and ok.n_cells > 0

    from conftest import small_frame

    bad = small_frame(800)
    bad.loc[[3, 5], "sex"] = 7
    bad.loc[[10], "age"] = 150
    with pytest.raises(sdc.InputError) as e:
        validate_release_input(make_small_job("bad", frame=bad))
    msg = str(e.value)
    assert "sex" in msg and "age" in msg           # every problem at once


def test_summary_markdown_table_and_keys(make_small_job):
    config = sdc.load_config(make_small_job(n=1500))
    frame = load_job(config.source_path).frame
    result = sdc.release_frame(frame, config, 99)
    s = summarize(config, result, n_records=len(frame), release_dir=Path("/x/rel"),
                  warnings=["w1"], seconds=1.23456)
    json.dumps(s)                                   # plain JSON types only
    assert s["records_changed"] == result.n_changed == int(result.changed.sum())
    assert s["expected_changed"] == pytest.approx(float((result.blocks.theta * result.blocks.k).sum()))
    assert s["certified"] and s["certificate"] <= s["xi"]
    assert (s["n"], s["n_prbs"], s["release_dir"]) == (1500, len(result.blocks), "/x/rel")
    md = summary_markdown(s)
    assert f"| certificate max R_j(a, t) | {s['certificate']:.6f} |" in md
    assert "| certificate <= xi | yes |" in md and "- w1" in md
    assert "**NO**" in summary_markdown(dict(s, certified=False))
    merged = summary_markdown(dict(s, merges=["a=1 | b=2 joined a=1 | b=3"]))
    row = next(line for line in merged.splitlines() if line.startswith("| merges |"))
    assert row == "| merges | a=1 \\| b=2 joined a=1 \\| b=3 |"   # pipes escaped in the cell

    rows = blocks_table(result.blocks)
    assert len(rows) == len(result.blocks)
    assert set(rows[0]) == {"prb", "partition_key", "n_partition_sets", "k", "n_records",
                            "profile", "theta", "max_risk", "action", "expected_changed",
                            "changed"}
    assert artifact_key("release-prbs", "Census_Demo.2") == "release-prbs-census-demo-2"


# ---------------------------------------------------------------------------------------------
# real flow runs (few): census demo and adult end to end
# ---------------------------------------------------------------------------------------------
def _check_release_folder(out: Path, summary: dict, config: sdc.ReleaseConfig) -> None:
    from sdc.audit.verify import verify_release

    assert Path(summary["release_dir"]) == out
    assert sorted(p.name for p in (out / "public").iterdir()) == [
        "codebook.md", "microdata.csv", "microdata.parquet"]
    internal = {p.name for p in (out / "internal").iterdir()}
    assert {"audit.json", "blocks.parquet"} <= internal
    assert {"risk.json", "utility.json", "report.html"} <= internal
    assert summary["headline"]["pass"] is True
    # permissions: internal/ 0700 with 0600 files
    assert stat.S_IMODE((out / "internal").stat().st_mode) == 0o700
    for p in (out / "internal").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    # codebook names the key variables and xi
    codebook = (out / "public" / "codebook.md").read_text(encoding="utf-8")
    assert str(config.risk.xi) in codebook
    for v in config.key_names:
        assert v in codebook
    # public microdata: every record, no dropped identifier, no original id
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert len(pub) == summary["n"]
    for col in [*config.input.drop, config.input.id_column]:
        if col:
            assert col not in pub.columns
    # the certificate and the audit
    assert summary["certificate"] <= summary["xi"] == config.risk.xi
    audit = verify_release(out)
    assert audit.ok, [c for c in audit.checks if not c.ok]
    blocks = pd.read_parquet(out / "internal" / "blocks.parquet")
    assert len(blocks) == summary["n_prbs"]
    assert blocks["max_risk"].max() <= config.risk.xi


def _artifacts(flow_run_id) -> dict[str, object]:
    """The flow run's artifacts by key (Prefect stores link artifacts as markdown links)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return {a.key: a for a in arts}


def _check_tags(flow_run_id) -> None:
    """The job's tag is the flow run's; its task runs keep the caller's other tags only (a
    tagged task run takes a concurrency slot of each tag through the API before it starts).
    The server records task runs from their events (its task run recorder, which the session's
    server does not run: ``full_prefect_server``): wait for the four."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        assert {"release:census-demo", "theirs"} <= set(client.read_flow_run(flow_run_id).tags)
        deadline = time.monotonic() + 30
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[flow_run_id])))
            if len(runs) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert len(runs) == 4 and all(r.tags == ["theirs"] for r in runs), [
        (r.name, r.tags) for r in runs]


@pytest.mark.waits
@pytest.mark.e2e
def test_flow_census_demo_end_to_end(full_prefect_server, make_census_job):
    cfg_path = make_census_job()
    config = sdc.load_config(cfg_path)
    out = config.output_dir

    from prefect import tags

    with tags("release:census-demo", "theirs"):  # as sdc release tags it, and a caller's tag
        state = release(str(cfg_path), return_state=True)
    assert state.is_completed()
    summary = state.result()
    _check_release_folder(out, summary, config)
    assert (summary["n"], summary["n_partition_sets"], summary["n_prbs"]) == (59033, 42, 42)
    _check_tags(state.state_details.flow_run_id)
    assert summary["seed_created"]
    assert stat.S_IMODE(config.resolve(config.seed.file).stat().st_mode) == 0o600

    # artifacts: markdown summary, PRB table (no record-level data), link to the folder
    arts = _artifacts(state.state_details.flow_run_id)
    assert set(arts) == {"release-summary-census-demo", "release-prbs-census-demo",
                         "release-folder-census-demo"}
    md = arts["release-summary-census-demo"]
    assert md.type == "markdown" and f"{summary['certificate']:.6f}" in md.data
    table = arts["release-prbs-census-demo"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert table.type == "table" and len(rows) == 42
    assert {r["k"] for r in rows} == set(pd.read_parquet(out / "internal" / "blocks.parquet").k)
    assert "P0000" not in json.dumps(rows)          # no record ids or record-level values
    assert arts["release-folder-census-demo"].data == f"[{out}]({out.as_uri()})"

    first = _hashes(out / "public")
    audit_before = (out / "internal" / "audit.json").read_bytes()

    # an existing release is never overwritten without force, and stays intact
    with pytest.raises(ReleaseExistsError):
        release(str(cfg_path))
    assert _hashes(out / "public") == first
    assert (out / "internal" / "audit.json").read_bytes() == audit_before

    # rerun with the same seed (--force): byte-identical public files
    again = release(str(cfg_path), force=True)
    assert not again["seed_created"]
    assert _hashes(out / "public") == first
    assert again["records_changed"] == summary["records_changed"]


@pytest.mark.e2e
def test_flow_adult_end_to_end(prefect_harness, make_repo_job):
    if not (SHARED_DATA / "adult" / "adult.csv").is_file():
        pytest.skip(f"shared data not found at {SHARED_DATA.resolve()}/adult (../shared/data)")
    cfg_path = make_repo_job("adult.yaml")
    config = sdc.load_config(cfg_path)
    summary = release(str(cfg_path))
    _check_release_folder(config.output_dir, summary, config)
    assert summary["n"] == len(pd.read_csv(config.input_path, sep=config.input.delimiter))
