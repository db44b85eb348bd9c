"""sdc.audit.verify.verify_release: passes on good releases, detects every kind of tampering."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import sdc
from sdc.audit.verify import AuditError, AuditReport, verify_release
from sdc.io.read import read_input
from sdc.io.write import parquet_bytes, sha256_bytes, sha256_file
from sdc.publish.folder import write_release
from sdc.series.seeds import load_seed
from tests.conftest import SHARED_DATA
from tests.release_helpers import release_files

REPO = Path(__file__).resolve().parents[2]
SHARED = SHARED_DATA


def release(config_path: Path, out: Path, seed: int = 7) -> Path:
    cfg = sdc.load_config(config_path)
    cfg.seed = seed
    frame = read_input(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        res = sdc.release_frame(frame, cfg, seed, out_dir=Path(tmp))
        data = yaml.safe_load(config_path.read_text())
        text = config_path.read_text() if data.get("seed") == seed else yaml.safe_dump(
            {**data, "seed": seed}, sort_keys=False)  # the config copy names the seed used
        public, internal = release_files(cfg, res, load_seed(cfg),
                                         input_sha256=sha256_file(cfg.input_path),
                                         config_text=text)
    return write_release(out, public, internal)


def _census_head(path: Path, n: int = 15_000) -> Path:
    """The census sample's header and first ``n`` records, written to ``path``."""
    with open(REPO / "data_samples" / "census_sample.csv", encoding="utf-8") as src:
        head = [line for _, line in zip(range(n + 1), src, strict=False)]
    path.write_text("".join(head), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A census-demo release on a private copy of the input (so tests may alter it): the
    sample's first 15,000 records (the same 42 partition sets as the whole 59,033; every
    test here audits the release again, and an audit re-derives it: ~0.45 instead of ~1.1
    CPU s each)."""
    base = tmp_path_factory.mktemp("census")
    _census_head(base / "census.csv")
    data = yaml.safe_load((REPO / "configs" / "census_demo.yaml").read_text())
    data["input"]["path"] = "census.csv"
    data["seed"] = 7
    (base / "job.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return release(base / "job.yaml", base / "releases" / "good")


@pytest.fixture()
def copy(good: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "rel"
    shutil.copytree(good, dst)
    return dst


def by_name(rep: AuditReport) -> dict[str, sdc.audit.verify.Check]:
    return {c.name: c for c in rep.checks}


def failed(rep: AuditReport) -> set[str]:
    return {c.name for c in rep.failed}


def rewrite_public(rel: Path, df: pd.DataFrame) -> None:
    """Replace the public microdata and fix up their hashes, as a careful forger would."""
    audit = json.loads((rel / "internal" / "audit.json").read_text())
    for name, data in (("microdata.parquet", parquet_bytes(df)), ("microdata.csv", df.to_csv(index=False, lineterminator="\n").encode())):
        (rel / "public" / name).write_bytes(data)
        audit["public_files"][name] = sha256_bytes(data)
    (rel / "internal" / "audit.json").write_text(json.dumps(audit))


def test_good_release_passes(good: Path) -> None:
    rep = verify_release(good)
    assert rep.ok, [(c.name, c.detail) for c in rep.failed]
    names = set(by_name(rep))
    for must in ["public files: hashes", "source: hash", "source: row count",
                 "partition sets: counts equal", "non-sensitive cells unchanged", "no new cells",
                 "PRB max risk <= xi", "certificate <= xi", "certificate = recorded",
                 "theta and kmin", "public microdata: record count"]:
        assert must in names
    assert "42 partition sets" in by_name(rep)["partition sets: counts equal"].detail


def test_modified_public_file(copy: Path) -> None:
    p = copy / "public" / "microdata.csv"
    data = bytearray(p.read_bytes())
    data[-3] = ord("9") if data[-3] != ord("9") else ord("8")
    p.write_bytes(bytes(data))
    rep = verify_release(copy)
    assert not rep.ok and failed(rep) == {"public files: hashes",
                                          "re-derived release: public files"}
    assert "microdata.csv" in by_name(rep)["public files: hashes"].detail


def test_unlisted_public_file_and_modified_internal_file(copy: Path) -> None:
    (copy / "public" / "seed.txt").write_text("7")
    (copy / "internal" / "blocks.parquet").write_bytes(b"x")
    rep = verify_release(copy)
    assert {"public files: nothing unlisted", "internal files: hashes"} <= failed(rep)
    assert "seed.txt" in by_name(rep)["public files: nothing unlisted"].detail


def test_changed_source_file(good: Path) -> None:
    audit = json.loads((good / "internal" / "audit.json").read_text())
    src = Path(audit["input"]["path"])
    original = src.read_bytes()
    try:
        lines = original.decode().splitlines(keepends=True)
        src.write_text("".join(lines[:-1]))  # one record fewer
        rep = verify_release(good)
        assert {"source: hash", "source: row count"} <= failed(rep)
        assert "the source changed" in by_name(rep)["source: hash"].detail
        src.unlink()
        rep = verify_release(good)
        assert failed(rep) == {"source: exists"}
    finally:
        src.write_bytes(original)
    assert verify_release(good).ok


def test_certificate_above_xi(copy: Path) -> None:
    # a release whose block 0 was perturbed with a theta far below the theorem's
    path = copy / "internal" / "audit.json"
    audit = json.loads(path.read_text())
    audit["blocks"][0]["theta"] = 0.05
    path.write_text(json.dumps(audit))
    rep = verify_release(copy)
    assert {"PRB max risk <= xi", "certificate <= xi", "PRB max risk recomputed = recorded",
            "certificate = recorded"} <= failed(rep)
    assert "PRB 0" in by_name(rep)["PRB max risk <= xi"].detail
    # ...and one that only claims a better certificate than it has
    audit["blocks"][0]["theta"] = json.loads((copy.parent / "rel" / "internal" / "audit.json")
                                             .read_text())["blocks"][0]["theta"]
    good_theta = sdc.solve_theta(0.395)
    audit["blocks"][0]["theta"] = good_theta
    audit["risk"]["certificate"] = 0.2
    path.write_text(json.dumps(audit))
    assert failed(verify_release(copy)) == {"certificate = recorded",
                                            "re-derived release: audit record"}


def test_tampered_prb_profile(copy: Path) -> None:
    path = copy / "internal" / "audit.json"
    audit = json.loads(path.read_text())
    audit["blocks"][3]["profile"] = "1:5"
    path.write_text(json.dumps(audit))
    rep = verify_release(copy)
    assert "PRB profiles match the source" in failed(rep)
    assert "PRB 3" in by_name(rep)["PRB profiles match the source"].detail


def test_new_cell_detected(copy: Path) -> None:
    pub = pd.read_parquet(copy / "public" / "microdata.parquet")
    audit = json.loads((copy / "internal" / "audit.json").read_text())
    src = pd.read_csv(audit["input"]["path"])
    keys = ["sex", "age", "race", "marital", "puma"]
    present = set(map(tuple, src[keys].to_numpy().tolist()))
    # move one record to a key combination absent from the original, in the same partition set
    row = pub.iloc[0]
    for puma in range(101, 145):
        combo = (row.sex, row.age, row.race, row.marital, puma)
        if combo not in present:
            break
    else:  # pragma: no cover
        pytest.fail("no empty cell next to record 1")
    pub.loc[0, "puma"] = puma
    rewrite_public(copy, pub)
    rep = verify_release(copy)
    assert "no new cells" in failed(rep)
    assert "public files: hashes" not in failed(rep)
    assert f"puma={puma}" in by_name(rep)["no new cells"].detail
    assert "partition sets: counts equal" not in failed(rep)


def test_record_moved_across_partition_sets(copy: Path) -> None:
    pub = pd.read_parquet(copy / "public" / "microdata.parquet")
    i = int(np.flatnonzero(pub["sex"].to_numpy() == 1)[0])
    pub.loc[i, "sex"] = 2
    rewrite_public(copy, pub)
    rep = verify_release(copy)
    assert "partition sets: counts equal" in failed(rep)
    assert "sex=Male" in by_name(rep)["partition sets: counts equal"].detail


def test_dropped_record_and_leaked_identifier(copy: Path) -> None:
    pub = pd.read_parquet(copy / "public" / "microdata.parquet").iloc[1:]
    pub = pub.assign(person_id="P1")
    rewrite_public(copy, pub)
    rep = verify_release(copy)
    assert {"public microdata: record count", "public microdata: output schema",
            "partition sets: counts equal"} <= failed(rep)
    assert "person_id" in by_name(rep)["public microdata: output schema"].detail


def test_csv_only_release(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "configs" / "census_demo.yaml").read_text())
    data["output"]["formats"] = ["csv"]
    data["input"]["path"] = str(_census_head(tmp_path / "census.csv"))
    data["seed"] = 3
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(data))
    out = release(tmp_path / "job.yaml", tmp_path / "r", seed=3)
    assert not (out / "public" / "microdata.parquet").exists()
    rep = verify_release(out)
    assert rep.ok, [(c.name, c.detail) for c in rep.failed]


def test_unreadable_release_folder(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="does not exist"):
        verify_release(tmp_path / "nope")
    (tmp_path / "r" / "internal").mkdir(parents=True)
    with pytest.raises(AuditError, match="not a release folder"):
        verify_release(tmp_path / "r")
    (tmp_path / "r" / "internal" / "audit.json").write_text("{not json")
    with pytest.raises(AuditError, match="not valid JSON"):
        verify_release(tmp_path / "r")
    (tmp_path / "r" / "internal" / "audit.json").write_text("[1, 2]")
    with pytest.raises(AuditError, match="not an sdc audit record"):
        verify_release(tmp_path / "r")


@pytest.mark.slow
def test_adult_config_release_and_audit(tmp_path: Path) -> None:
    if not (SHARED / "adult" / "adult.csv").is_file():
        pytest.skip(f"shared data not found at {SHARED.resolve()} (../shared/data beside the repo)")
    cfg = sdc.load_config(REPO / "configs" / "adult.yaml")
    assert cfg.input_path.resolve() == (SHARED / "adult" / "adult.csv").resolve()
    from sdc.io.schemas import validate_input

    validate_input(read_input(cfg), cfg)  # every category present in the file is declared
    out = release(REPO / "configs" / "adult.yaml", tmp_path / "adult", seed=11)
    rep = verify_release(out)
    assert rep.ok, [(c.name, c.detail) for c in rep.failed]
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert audit["risk"]["certificate"] <= 0.395
    assert audit["counts"]["records"] == 30162
    md = (out / "public" / "codebook.md").read_text()
    assert "adult_hierarchy_age.csv level 2" in md and "20-29" in md
    if audit["risk"]["merges"]:  # small partition sets were merged: the codebook says so
        assert "merged with neighbouring partition sets" in md
        assert "compared as one" in {c.name: c for c in rep.checks}[
            "partition sets: counts equal"].detail


def test_moved_source_audited_with_source_option(good: Path, tmp_path: Path) -> None:
    """``sdc audit --source``: a moved input is found again (its SHA-256 must still match);
    without the option the failure says how to point the audit at it."""
    from typer.testing import CliRunner

    from sdc.cli.main import app

    audit = json.loads((good / "internal" / "audit.json").read_text())
    src = Path(audit["input"]["path"])
    moved = tmp_path / "archive" / "census-moved.csv"
    moved.parent.mkdir()
    shutil.move(src, moved)
    try:
        rep = verify_release(good)
        assert failed(rep) == {"source: exists"}
        assert "--source" in by_name(rep)["source: exists"].detail
        rep = verify_release(good, source=moved)
        assert rep.ok, [(c.name, c.detail) for c in rep.checks if not c.ok]
        r = CliRunner().invoke(app, ["audit", str(good), "--source", str(moved)])
        assert r.exit_code == 0, r.stdout
        other = tmp_path / "other.csv"  # another file under the old name: the hash fails
        other.write_text("".join(moved.read_text().splitlines(keepends=True)[:-1]))
        rep = verify_release(good, source=other)
        assert "source: hash" in failed(rep)
        r = CliRunner().invoke(app, ["audit", str(good), "--source", str(other)])
        assert r.exit_code == 1
    finally:
        shutil.move(moved, src)
    assert verify_release(good).ok
