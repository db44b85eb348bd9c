"""Issue 34 item 1: no command overwrites what it did not write. Every command that writes a
file the user names refuses an existing path without --force, and the job's own config, input,
seed file and hierarchy files always (the same path, a symlink to it, a hard link to it),
exit 2 with a message naming the path and the fix; the refused file keeps its bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sdc.io.guard import OverwriteError, job_files, refuse_overwrite, write_atomic
from tests.cli.test_cli import assert_clean_error, run


def _bytes(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths]


# --- sdc design -o (the red team's data loss) -----------------------------------------------
@pytest.mark.parametrize("target", ["input", "config", "input_symlink", "input_hardlink",
                                    "seed_file"])
def test_design_never_overwrites_the_jobs_own_files(make_small_job, tmp_path, target):
    cfg = make_small_job(n=600)
    data = tmp_path / "data" / "small.csv"
    seed = tmp_path / "seed.txt"
    seed.write_text("12345\n")
    conf = yaml.safe_load(cfg.read_text())
    conf["seed"] = {"file": str(seed)}
    cfg.write_text(yaml.safe_dump(conf))
    path = {"input": data, "config": cfg, "seed_file": seed,
            "input_symlink": tmp_path / "link.csv", "input_hardlink": tmp_path / "hard.csv"}[target]
    if target == "input_symlink":
        path.symlink_to(data)
    if target == "input_hardlink":
        os.link(data, path)
    before = _bytes(data, cfg, seed)
    for extra in ([], ["--force"]):      # refused even with --force
        r = run("design", cfg, "-o", path, "--budget", "1", *extra)
        assert_clean_error(r, 2, "never overwrites the job's own files", "another file")
        assert str(path) in r.text
    assert _bytes(data, cfg, seed) == before


def test_design_refuses_an_existing_file_without_force(make_small_job, tmp_path):
    cfg = make_small_job(n=600)
    other = tmp_path / "notes.yaml"
    other.write_text("mine\n")
    r = run("design", cfg, "-o", other, "--budget", "1")
    assert_clean_error(r, 2, str(other), "already exists", "--force")
    assert other.read_text() == "mine\n"
    r = run("design", cfg, "-o", other, "--budget", "2", "--force")
    assert r.exit_code == 0, r.text
    assert other.read_text() != "mine\n"


def test_design_refuses_a_folder_and_json_says_so(make_small_job, tmp_path):
    cfg = make_small_job(n=600)
    r = run("design", cfg, "-o", tmp_path, "--budget", "1", "--json")
    assert r.exit_code == 2, r.text
    assert "is a folder" in r.text


# --- sdc init -o ----------------------------------------------------------------------------
def test_init_never_overwrites_its_data_file(make_small_job, tmp_path):
    make_small_job(n=600)
    data = tmp_path / "data" / "small.csv"
    before = data.read_bytes()
    for extra in ([], ["--force"]):
        r = run("init", data, "--keys", "sex,age", "-o", data, *extra)
        assert_clean_error(r, 2, "the data file", str(data))
    assert data.read_bytes() == before


# --- sdc rr simulate --out ------------------------------------------------------------------
def test_rr_simulate_refuses_an_existing_file(tmp_path):
    out = tmp_path / "answers.csv"
    out.write_text("precious\n")
    r = run("rr", "simulate", "--probs", "0.5,0.5", "--n", "10", "--epsilon", "1", "--out", out)
    assert r.exit_code == 2, r.text
    assert "already exists" in r.text and "--force" in r.text
    assert out.read_text() == "precious\n"
    r = run("rr", "simulate", "--probs", "0.5,0.5", "--n", "10", "--epsilon", "1", "--out", out,
            "--force")
    assert r.exit_code == 0, r.text
    assert out.read_text().startswith("z1,z2\n")


# --- sdc sample --out -----------------------------------------------------------------------
def test_sample_rewrites_its_own_bytes_but_not_other_files(tmp_path):
    r = run("sample", "--out", tmp_path)
    assert r.exit_code == 0, r.text
    f = tmp_path / "census_sample.csv"
    good = f.read_bytes()
    assert run("sample", "--out", tmp_path).exit_code == 0       # the same bytes: no overwrite
    f.write_bytes(b"someone's file\n")
    assert_clean_error(run("sample", "--out", tmp_path), 2, str(f), "--force")
    assert f.read_bytes() == b"someone's file\n"
    assert run("sample", "--out", tmp_path, "--force").exit_code == 0
    assert f.read_bytes() == good


# --- the guard itself -----------------------------------------------------------------------
def test_guard_protects_inside_a_protected_folder_and_dangling_links(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    with pytest.raises(OverwriteError, match="the job's input"):
        refuse_overwrite(parts / "new.yaml", force=True, option="-o",
                         protected={"the job's input": parts})
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OverwriteError, match="already exists"):
        refuse_overwrite(dangling, force=False, option="-o")
    assert refuse_overwrite(tmp_path / "fresh", force=False, option="-o") == tmp_path / "fresh"


def test_write_atomic_replaces_a_symlink_not_its_target(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert target.read_text() == "keep" and link.read_text() == "new" and not link.is_symlink()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_job_files_reads_an_invalid_config_leniently(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text("input: {path: d.csv}\nkey_variables: {a: {recode: {hierarchy: h.csv}}}\n"
                   "partition: {b: {hierarchy: p.csv}}\nseed: {file: s.txt}\nbogus: 1\n")
    files = {p.name for p in job_files(cfg).values()}
    assert files == {"job.yaml", "d.csv", "h.csv", "p.csv", "s.txt"}
    cfg.write_text(": not yaml [")
    assert list(job_files(cfg).values()) == [cfg]


# --- sdc release --force --discard-extra-files never deletes the job's own files -------------
@pytest.mark.parametrize("which", ["config", "seed_file"])
def test_release_folder_holding_the_jobs_own_files_is_refused(make_small_job, tmp_path, which):
    """A config or seed file kept inside the release folder would be deleted with the old
    release by `--force --discard-extra-files`: refused (before Prefect starts), exit 2."""
    import sdc
    from sdc.publish.folder import ReleaseFolderError
    from sdc.release.preflight import check_release_target

    cfg = make_small_job(n=600)
    out = tmp_path / "releases" / "small"
    (out / "internal").mkdir(parents=True)
    (out / "public").mkdir()
    (out / "internal" / "audit.json").write_text("{}")          # an existing release
    conf = yaml.safe_load(cfg.read_text())
    if which == "config":
        inside = out / "job.yaml"
        inside.write_text(yaml.safe_dump(conf))
    else:
        inside = out / "job.seed"
        inside.write_text("12345\n")
        inside.chmod(0o600)
        conf["seed"] = {"file": str(inside)}
        cfg.write_text(yaml.safe_dump(conf))
    job = inside if which == "config" else cfg
    with pytest.raises(ReleaseFolderError, match="refused even with --force"):
        check_release_target(sdc.load_config(job), True, True)
    r = run("release", job, "--force", "--discard-extra-files")
    assert_clean_error(r, 2, str(inside), "even with --force")
    assert inside.is_file()
