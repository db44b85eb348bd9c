"""sdc.release (public, audit record, folder): the public frame, codebook, audit record, and the atomic release folder."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc
import sdc.publish.folder as folder
from sdc.audit.verify import build_audit, config_text_of
from sdc.io.read import read_input
from sdc.io.schemas import PUBLIC_ID
from sdc.io.write import parquet_bytes, sha256_bytes, sha256_file
from sdc.publish.folder import (
    ReleaseExistsError,
    ReleaseFolderError,
    checkpoint,
    write_release,
)
from sdc.release.public import codebook_markdown
from sdc.series.seeds import SeedInfo
from tests.release_helpers import public_frame, release_files

REPO = Path(__file__).resolve().parents[2]
SEED = 20240611
SEED_INFO = SeedInfo(SEED, None, None, False)


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    cfg = sdc.load_config(REPO / "configs" / "census_demo.yaml")
    cfg.seed = SEED
    frame = read_input(cfg)
    return cfg, frame, sdc.release_frame(frame, cfg, SEED,
                                         out_dir=tmp_path_factory.mktemp("census"))


@pytest.fixture(scope="module")
def files(census):
    cfg, frame, res = census
    return release_files(cfg, res, SEED_INFO, input_sha256=sha256_file(cfg.input_path),
                         config_text=config_text_of(cfg), reports={"risk.json": b'{"x": 1}\n'})


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


# -- public frame ------------------------------------------------------------------------------
def _sorted_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns), kind="mergesort").reset_index(drop=True)


def test_public_frame_shape_and_content(census) -> None:
    cfg, frame, res = census
    pub = public_frame(res)
    assert pub.columns[0] == PUBLIC_ID
    assert pub[PUBLIC_ID].tolist() == list(range(1, len(frame) + 1))
    assert "person_id" not in pub.columns and "full_name" not in pub.columns
    assert isinstance(pub.index, pd.RangeIndex)
    released = res.frame.drop(columns=["person_id"])
    pd.testing.assert_frame_equal(_sorted_rows(pub.drop(columns=[PUBLIC_ID])),
                                  _sorted_rows(released), check_dtype=False)


def test_public_order_is_random_not_input_order(census, tmp_path) -> None:
    cfg, frame, res = census
    pub = public_frame(res)
    # income is released unchanged and nearly unique: locate each public record in the input
    pos = pd.Series(np.arange(len(frame)), index=frame["income"].astype(str) + "/"
                    + frame["hours_worked"].astype(str) + "/" + frame["weight"].astype(str))
    pos = pos[~pos.index.duplicated(keep=False)]
    key = (pub["income"].astype(str) + "/" + pub["hours_worked"].astype(str) + "/"
           + pub["weight"].astype(str))
    matched = key.isin(pos.index)
    assert matched.sum() > 1000
    rank_in = pos[key[matched]].to_numpy()
    rank_out = pub.loc[matched, PUBLIC_ID].to_numpy()
    # a random permutation has rank correlation ~ N(0, 1/m): |r| < 5/sqrt(m) fails w.p. < 1e-6
    r = np.corrcoef(np.argsort(np.argsort(rank_in)), np.argsort(np.argsort(rank_out)))[0, 1]
    assert abs(r) < 5 / np.sqrt(matched.sum())
    other = public_frame(sdc.release_frame(frame, cfg, SEED + 1, out_dir=tmp_path))
    assert not other.drop(columns=[PUBLIC_ID]).equals(pub.drop(columns=[PUBLIC_ID]))


def test_public_bytes_do_not_depend_on_input_order(census, tmp_path) -> None:
    cfg, frame, _ = census
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    a = public_frame(sdc.release_frame(frame, cfg, SEED, out_dir=tmp_path / "a"))
    b = public_frame(sdc.release_frame(shuffled, cfg, SEED, out_dir=tmp_path / "b"))
    assert (tmp_path / "a" / "microdata.parquet").read_bytes() == \
        (tmp_path / "b" / "microdata.parquet").read_bytes()
    assert sha256_bytes(parquet_bytes(a)) == sha256_bytes(parquet_bytes(b))
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                  check_exact=True)


def test_public_frame_without_id_and_record_id_clash(census, tmp_path) -> None:
    cfg = sdc.parse_config({"name": "s", "input": {"path": "x.csv"},
                            "key_variables": {"k": {"categories": [1, 2, 3]}},
                            "partition": {}, "risk": {"xi": 0.395}}, Path("."))
    frame = pd.DataFrame({"k": [1, 1, 1, 2, 2, 2, 3, 3, 3], "v": range(9)})
    res = sdc.release_frame(frame, cfg, 1, out_dir=tmp_path)
    pub = public_frame(res)
    assert list(pub.columns) == [PUBLIC_ID, "k", "v"]
    with pytest.raises(sdc.InputError, match="'record_id' in the input clashes"):
        sdc.release_frame(frame.assign(**{PUBLIC_ID: 0}), cfg, 1)


# -- codebook ----------------------------------------------------------------------------------
def test_codebook_content_and_no_secrets(census) -> None:
    cfg, frame, res = census
    md = codebook_markdown(cfg, res)
    assert "xi = 0.395" in md and f"{len(frame)} records" in md
    for col in ["record_id", "sex", "age", "race", "marital", "puma", "income", "weight"]:
        assert f"`{col}`" in md
    assert "person_id" not in md and "full_name" not in md
    assert "| 5 | Never married |" in md and "Whole numbers 0 to 91." in md
    lines = {ln.split("|")[2].strip(): ln for ln in md.splitlines() if ln.startswith("| ") and
             ln.split("|")[2].strip().startswith("`")}
    assert "never changed" in lines["`sex`"]
    assert "only within its generalized value" in lines["`age`"] and "18-24" in lines["`age`"]
    assert "may have been changed" in lines["`puma`"]
    assert "unchanged" in lines["`income`"]
    for secret in [str(SEED), f"{res.theta:.3f}", f"{res.theta:.2f}", "theta", "PRB",
                   str(res.n_changed)]:
        assert secret not in md
    for b in res.blocks.itertuples():
        assert b.profile not in md


def test_codebook_lists_dp_variables(census) -> None:
    cfg, _, res = census
    cfg2 = cfg.model_copy(deep=True)
    cfg2.perturb = {"hours_worked": sdc.config.DPPerturb(epsilon=1.5, domain_from_data=True)}
    md = codebook_markdown(cfg2, res)
    assert "`hours_worked`: eps = 1.5 (**not differentially private: domain taken from the data**" in md
    assert "PRAM, eps = 1.5; not differentially private: domain taken from the data)" in md


# -- audit record and the assembled files ------------------------------------------------------
def test_assembled_files_and_audit(census, files) -> None:
    cfg, frame, res = census
    public, internal = files
    assert set(public) == {"microdata.parquet", "microdata.csv", "codebook.md"}
    assert set(internal) == {"audit.json", "blocks.parquet", "partition_sets.parquet", "risk.json",
                             "records.parquet"}
    audit = json.loads(internal["audit.json"])
    assert audit["public_files"] == {k: sha256_bytes(v) for k, v in public.items()}
    assert audit["internal_files"]["risk.json"] == sha256_bytes(b'{"x": 1}\n')
    assert audit["input"] == {"path": str(cfg.input_path.resolve()), "format": "csv",
                              "sha256": sha256_file(cfg.input_path), "n_rows": len(frame)}
    text = (REPO / "configs" / "census_demo.yaml").read_text()
    assert audit["config"]["text"] == text
    assert audit["config"]["sha256"] == sha256_bytes(text.encode())
    assert audit["risk"]["certificate"] == res.certificate <= 0.395
    assert audit["risk"]["theta"] == res.theta and audit["risk"]["kmin"] == 5
    assert len(audit["blocks"]) == len(res.blocks) and audit["blocks"][0]["action"] == "theorem"
    back = pd.read_parquet(__import__("io").BytesIO(internal["blocks.parquet"]))
    pd.testing.assert_frame_equal(back, res.blocks)
    assert audit["created_at"] and "created_at" not in public["codebook.md"].decode()


def test_public_bytes_hold_no_secret(census, files) -> None:
    cfg, frame, res = census
    public, _ = files
    blob = b"".join(public.values())
    assert str(SEED).encode() not in blob
    assert repr(res.theta).encode() not in blob and f"{res.theta:.4f}".encode() not in blob
    assert b"person_id" not in blob and b"full_name" not in blob
    csv = public["microdata.csv"].decode()
    names = frame["full_name"].astype(str)
    assert not any(n in csv for n in names.sample(200, random_state=1))


def test_audit_never_holds_the_file_seed(census, tmp_path) -> None:
    cfg, frame, res = census
    seed_file = tmp_path / "s.seed"
    seed_file.write_text("98765432109876543210\n")
    info = SeedInfo(98765432109876543210, seed_file, sha256_file(seed_file), False)
    audit = build_audit(cfg, res, input_path=cfg.input_path, input_sha256="x", n_rows=len(frame),
                        seed_info=info, public_hashes={}, config_text="name: x\n",
                        package_version="0.1.0")
    raw = json.dumps(audit)
    assert "98765432109876543210" not in raw
    assert audit["seed"] == {"source": "file", "path": str(seed_file),
                             "sha256": sha256_file(seed_file), "created_by_this_run": False}


def test_assemble_is_deterministic_and_formats(census, tmp_path) -> None:
    cfg, frame, res = census
    kw = dict(input_sha256="h", config_text="c")
    p1, i1 = release_files(cfg, res, SEED_INFO, **kw)
    p2, i2 = release_files(cfg, res, SEED_INFO, **kw)
    assert p1 == p2 and i1["blocks.parquet"] == i2["blocks.parquet"]
    cfg2 = cfg.model_copy(deep=True)
    cfg2.output.formats = ["csv"]
    res2 = sdc.release_frame(frame, cfg2, SEED, out_dir=tmp_path)
    p3, _ = release_files(cfg2, res2, SEED_INFO, **kw)
    assert set(p3) == {"microdata.csv", "codebook.md"}
    assert p3["microdata.csv"] == p1["microdata.csv"]
    with pytest.raises(ValueError, match="reserved"):
        release_files(cfg, res, SEED_INFO, reports={"audit.json": b"x"}, **kw)
    with pytest.raises(ValueError, match="not a plain file name"):
        release_files(cfg, res, SEED_INFO, reports={"../x": b"x"}, **kw)


# -- the release folder ------------------------------------------------------------------------
PUB = {"microdata.csv": b"record_id,k\n1,2\n", "codebook.md": b"# c\n"}
INT = {"audit.json": b"{}\n", "blocks.parquet": b"PAR1"}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_layout_and_permissions(tmp_path: Path) -> None:
    old = os.umask(0o077)  # the modes must not depend on the umask
    try:
        out = write_release(tmp_path / "rel" / "r1", PUB, INT)
    finally:
        os.umask(old)
    assert out == tmp_path / "rel" / "r1"
    assert sorted(p.name for p in out.iterdir()) == ["internal", "public"]
    assert mode(out) == 0o755 and mode(out / "public") == 0o755
    assert mode(out / "internal") == 0o700
    for f, data in PUB.items():
        assert (out / "public" / f).read_bytes() == data and mode(out / "public" / f) == 0o644
    for f, data in INT.items():
        assert (out / "internal" / f).read_bytes() == data and mode(out / "internal" / f) == 0o600
    assert leftovers(out.parent) == []


def test_never_overwritten_without_force(tmp_path: Path) -> None:
    out = write_release(tmp_path / "r", PUB, INT)
    with pytest.raises(ReleaseExistsError) as e:
        write_release(out, {"codebook.md": b"new"}, INT)
    assert isinstance(e.value, FileExistsError)
    assert "--force" in str(e.value) and str(out) in str(e.value)
    assert (out / "public" / "codebook.md").read_bytes() == b"# c\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "fallback"])
def test_force_replaces(tmp_path: Path, monkeypatch, exchange: bool) -> None:
    if not exchange:
        monkeypatch.setattr(folder, "_renameat2", lambda *a: False)
    out = write_release(tmp_path / "r", PUB, INT)
    write_release(out, {"codebook.md": b"new"}, {"audit.json": b"{}"}, force=True,
                  discard_extra_files=True)
    assert sorted(p.name for p in (out / "public").iterdir()) == ["codebook.md"]
    assert (out / "public" / "codebook.md").read_bytes() == b"new"
    assert sorted(p.name for p in (out / "internal").iterdir()) == ["audit.json"]
    assert mode(out / "internal") == 0o700
    assert leftovers(tmp_path) == []


def test_failure_while_writing_leaves_nothing_and_old_release_intact(tmp_path, monkeypatch) -> None:
    out = write_release(tmp_path / "r", PUB, INT)
    before = {p.name: p.read_bytes() for p in (out / "public").iterdir()}
    real = folder._write_file
    calls = []

    def failing(path, data, m, label):
        calls.append(label)
        if len(calls) % 3 == 0:
            raise OSError(28, "No space left on device")
        real(path, data, m, label)

    monkeypatch.setattr(folder, "_write_file", failing)
    with pytest.raises(ReleaseFolderError, match=r"is full: writing .* failed \(No space"):
        write_release(out, {**PUB, "x.md": b"x"}, INT, force=True, discard_extra_files=True)
    with pytest.raises(ReleaseFolderError, match=r"is full: writing .* failed \(No space"):
        write_release(tmp_path / "fresh", {**PUB, "x.md": b"x"}, INT)
    assert not (tmp_path / "fresh").exists()
    assert {p.name: p.read_bytes() for p in (out / "public").iterdir()} == before
    assert leftovers(tmp_path) == []


def test_a_swallowed_ctrl_c_publishes_nothing(tmp_path, monkeypatch) -> None:
    """Ctrl-C whose KeyboardInterrupt a library swallowed (a Cython callback prints "Exception
    ignored in" and the run goes on; seen once in CI through the worker): the publish step
    sees the signal's record and raises before its rename; the old release stays."""
    import sdc.errors

    out = write_release(tmp_path / "r", PUB, INT)
    monkeypatch.setattr(sdc.errors, "INTERRUPTS", [signal.SIGINT])
    with pytest.raises(KeyboardInterrupt):
        write_release(out, {"codebook.md": b"new"}, INT, force=True, discard_extra_files=True)
    with pytest.raises(KeyboardInterrupt):
        write_release(tmp_path / "fresh", PUB, INT)
    assert not (tmp_path / "fresh").exists()
    assert (out / "public" / "codebook.md").read_bytes() == b"# c\n"
    assert leftovers(tmp_path) == []


def test_refuses_inside_another_release(tmp_path: Path) -> None:
    out = write_release(tmp_path / "r", PUB, INT)
    with pytest.raises(ReleaseFolderError, match=r"lies in the public/ folder of release"):
        write_release(out / "public" / "nested", PUB, INT)
    with pytest.raises(ReleaseFolderError, match=r"the internal/ folder"):
        write_release(out / "internal" / "x" / "y", PUB, INT)
    with pytest.raises(ReleaseFolderError, match=r"lies in inside release"):
        write_release(out / "other", PUB, INT)
    assert sorted(p.name for p in out.iterdir()) == ["internal", "public"]


def test_refuses_to_replace_a_folder_that_is_not_a_release(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    for force in (False, True):
        with pytest.raises(ReleaseFolderError, match="not a release folder.*not even with --force"):
            write_release(home, PUB, INT, force=force)
    assert (home / "thesis.tex").read_text() == "precious"
    (tmp_path / "empty").mkdir()
    write_release(tmp_path / "empty", PUB, INT)  # an empty folder is replaced
    assert (tmp_path / "empty" / "public" / "codebook.md").is_file()


def test_parent_not_writable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(folder.os, "access", lambda p, m: False)
    with pytest.raises(ReleaseFolderError, match=r"is not writable.*chmod"):
        write_release(tmp_path / "r", PUB, INT)
    assert not (tmp_path / "r").exists()


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ReleaseFolderError, match="cannot create the folder"):
        write_release(tmp_path / "f" / "r", PUB, INT)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_parent_not_writable_for_real(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    with pytest.raises(ReleaseFolderError, match="is not writable"):
        write_release(ro / "r", PUB, INT)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temp_folders_are_removed_live_ones_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = tmp_path / f".r.tmp-{dead}-abcd"
    (stale / "public").mkdir(parents=True)
    live = tmp_path / f".r.tmp-{os.getppid()}-beef"  # a live process: a concurrent run
    live.mkdir()
    other = tmp_path / f".rr.tmp-{dead}-abcd"       # another release's temp folder
    other.mkdir()
    write_release(tmp_path / "r", PUB, INT)
    assert not stale.exists() and live.exists() and other.exists()


def test_half_done_fallback_swap_is_undone(tmp_path: Path) -> None:
    # a run killed between the two renames of the fallback swap left the old release aside
    out = write_release(tmp_path / "r", PUB, INT)
    aside = tmp_path / f".r.old-{_dead_pid()}-0123"
    os.rename(out, aside)
    with pytest.raises(ReleaseExistsError):
        write_release(out, {"codebook.md": b"new"}, INT)
    assert (out / "public" / "codebook.md").read_bytes() == b"# c\n" and not aside.exists()


def test_checkpoint_hook(tmp_path: Path, monkeypatch) -> None:
    checkpoint("nothing")  # no env: no effect
    monkeypatch.setenv("SDC_CHECKPOINT_DIR", str(tmp_path / "cp"))
    write_release(tmp_path / "r", PUB, INT)
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == sorted(
        [f"writing:{f}" for f in [*PUB, *INT]] + ["before_rename"])


_CHILD = """
import sys
from pathlib import Path
from sdc.publish.folder import write_release
out, tag = Path(sys.argv[1]), sys.argv[2]
write_release(out, {"microdata.csv": b"a" * 4096 + tag.encode(), "codebook.md": b"c"},
              {"audit.json": b"{}"}, force=True, discard_extra_files=True)
"""


def _kill_at(point: str, out: Path, tag: str, tmp_path: Path) -> None:
    cp = tmp_path / f"cp-{tag}"
    env = {**os.environ, "SDC_CHECKPOINT_DIR": str(cp), "SDC_PAUSE_AT": point,
           "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), tag], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not (cp / point).exists():
            assert proc.poll() is None, f"child exited early ({proc.returncode})"
            assert time.monotonic() < deadline, "checkpoint never reached"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("point", ["writing:microdata.csv", "writing:audit.json",
                                   "before_rename"])
def test_sigkill_leaves_no_release_then_next_run_cleans_up(tmp_path: Path, point: str) -> None:
    fresh = tmp_path / "fresh"
    _kill_at(point, fresh, "new", tmp_path)
    assert not fresh.exists()
    assert len(leftovers(tmp_path)) == 1  # the dead run's temp folder
    # an earlier release under --force stays intact
    old = write_release(tmp_path / "old", {"codebook.md": b"old"}, {"audit.json": b"{}"})
    _kill_at(point, old, "new", tmp_path)
    assert (old / "public" / "codebook.md").read_bytes() == b"old"
    assert sorted(p.name for p in (old / "public").iterdir()) == ["codebook.md"]
    # the next runs succeed and remove the leftovers
    write_release(fresh, PUB, INT)
    write_release(old, PUB, INT, force=True, discard_extra_files=True)
    assert leftovers(tmp_path) == []
    assert (old / "public" / "microdata.csv").read_bytes() == PUB["microdata.csv"]
