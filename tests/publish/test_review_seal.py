"""Issue 47, the review gate: what `sdc approve` publishes is the approved bytes in files only
the release holds, with the modes docs/RELEASE_FOLDER.md promises (public 0644 in 0755,
internal 0600 in 0700), and an approval that fails for lack of room leaves nothing behind.

Each case failed before the fix: a staged file hardlinked to a file outside the release was
published as the same inode (a later write to the outside name changed the published
microdata), a staged file made 0666 was published world-writable, a loosened internal/ was
published readable by everyone, and an approval on a full disk exited 1 leaving
``internal/.audit.json.tmp-PID``, after which every approval was refused ("added: ...")."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc.io.guard import DiskFullError
from sdc.io.write import sha256_bytes
from sdc.publish.review import ReviewError, approve, stage_release

REPO = Path(__file__).resolve().parents[2]
MICRODATA = b"record_id,sex\n" + b"".join(b"%d,%d\n" % (i, 1 + i % 2) for i in range(1, 2001))


def sdc(*args: str | Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """``sdc ARGS`` in a subprocess (this checkout's code), under an RLIMIT_FSIZE of ``fsize``
    bytes when given (set in the child: a real EFBIG, not a mock)."""
    limit = (f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize})); "
             if fsize else "")
    code = f"{limit}import sys; from sdc.cli.entry import main; sys.argv[0] = 'sdc'; main()"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SDC_WORKER": "0", "COLUMNS": "1000"}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def _stage(tmp_path: Path, root: Path | None = None) -> tuple[Path, Path]:
    """A release staged for review (no Prefect) under ``root`` (default ``tmp_path``)."""
    cfg = tmp_path / "job.yaml"
    cfg.write_text("name: w\nreview: {required: true, approvers: [alice]}\n")
    text = cfg.read_text(encoding="utf-8")
    public = {"microdata.csv": MICRODATA, "codebook.md": b"# codebook\n"}
    internal = {"blocks.parquet": b"x" * 100, "risk.json": b"{}\n"}
    audit = {"public_files": {k: sha256_bytes(v) for k, v in public.items()},
             "internal_files": {k: sha256_bytes(v) for k, v in internal.items()},
             "config": {"text": text, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                        "source_path": str(cfg)}}
    internal["audit.json"] = json.dumps(audit).encode()
    out = (root or tmp_path) / "releases" / "w"
    stage_release(out, public, internal, force=False, approvers=["alice"])
    return out, out.with_name("w.staged")


def _modes(out: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (mode, link count) of every entry of a published release."""
    res = {".": (stat.S_IMODE(out.stat().st_mode), 1)}
    for p in sorted(out.rglob("*")):
        st = p.lstat()
        res[str(p.relative_to(out))] = (stat.S_IMODE(st.st_mode), st.st_nlink if p.is_file()
                                        else 1)
    return res


def _assert_documented(out: Path) -> None:
    for rel, (mode, links) in _modes(out).items():
        want = (0o755 if rel in (".", "public") else 0o700 if rel == "internal"
                else 0o644 if rel.startswith("public/") else 0o600)
        assert (mode, links) == (want, 1), (rel, oct(mode), links)


@pytest.mark.parametrize("where", ["public/microdata.csv", "internal/risk.json",
                                   "internal/blocks.parquet"])
def test_a_hardlinked_staged_file_is_published_as_a_fresh_copy(tmp_path, where):
    out, staged = _stage(tmp_path)
    outside = tmp_path / "outside"
    os.link(staged / where, outside)
    d = approve(staged, "alice")
    assert f"{where}: re-copied (2 hard links)" in d.sealed
    published = out / where
    before = published.read_bytes()
    with outside.open("ab") as f:              # the other name is written to later
        f.write(b"9999,2\n")
    assert published.read_bytes() == before    # ... the published file does not change
    assert not os.path.samefile(published, outside)
    _assert_documented(out)


def test_a_hardlink_made_inside_the_release_is_re_copied_too(tmp_path):
    """Variant: the other link is a name inside the staged folder itself (the check of added
    files refuses it, naming it); a link in the parent folder is re-copied."""
    out, staged = _stage(tmp_path)
    os.link(staged / "public" / "codebook.md", staged / "public" / "copy.md")
    with pytest.raises(ReviewError, match="added: public/copy.md"):
        approve(staged, "alice")
    os.unlink(staged / "public" / "copy.md")
    os.link(staged / "public" / "codebook.md", out.parent / "codebook.md")
    approve(staged, "alice")
    _assert_documented(out)


@pytest.mark.parametrize("loosen", [
    {"public/codebook.md": 0o666},
    {"public/microdata.csv": 0o600, "public": 0o700},          # tighter is repaired too
    {"internal": 0o755, "internal/risk.json": 0o644, "internal/blocks.parquet": 0o644},
    {"internal/audit.json": 0o644, "internal/review.json": 0o666},
    {"public": 0o777, "internal": 0o777},
])
def test_loosened_modes_are_published_with_the_documented_ones(tmp_path, loosen):
    out, staged = _stage(tmp_path)
    for rel, mode in loosen.items():
        os.chmod(staged / rel, mode)
    d = approve(staged, "alice")
    _assert_documented(out)
    for rel in loosen:
        if rel not in ("internal/audit.json", "internal/review.json"):   # rewritten anyway
            assert any(s.startswith(f"{rel}:") or s.startswith(f"{rel}/:") for s in d.sealed)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_staged_file_of_another_user_is_re_copied(tmp_path):
    out, staged = _stage(tmp_path)
    os.chown(staged / "public" / "microdata.csv", 12345, 12345)
    d = approve(staged, "alice")
    assert "public/microdata.csv: re-copied (owned by user id 12345)" in d.sealed
    assert (out / "public" / "microdata.csv").stat().st_uid == os.geteuid()
    _assert_documented(out)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_staged_public_folder_of_another_user_is_refused(tmp_path):
    out, staged = _stage(tmp_path)
    os.chown(staged / "public", 12345, 12345)
    with pytest.raises(ReviewError, match=r"public/ of the staged release .* belongs to user "
                                          r"id 12345.*Reject the release and release again"):
        approve(staged, "alice")
    assert not out.exists()


def test_the_cli_approval_publishes_the_documented_modes(tmp_path):
    """The interactive path: `sdc approve` on the command line (exit 0, modes repaired)."""
    out, staged = _stage(tmp_path)
    os.link(staged / "public" / "microdata.csv", tmp_path / "elsewhere.csv")
    os.chmod(staged / "internal", 0o755)
    res = sdc("approve", out, "--as", "alice")
    assert res.returncode == 0, res.stderr
    _assert_documented(out)


# ---------------------------------------------------------------------------------------------
# an approval without room
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def tiny_disk(mount_tmpfs):
    """A 256 KiB tmpfs (root only)."""
    return mount_tmpfs("256k")


def _fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` up to the last byte."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _leftovers(staged: Path) -> list[str]:
    return sorted(p.name for p in staged.rglob(".*"))


@pytest.mark.parametrize("hardlinked", [False, True])
def test_an_approval_on_a_full_disk_is_refused_then_succeeds(tmp_path, tiny_disk, hardlinked):
    """A real full disk (tmpfs): exit-2 error naming the file, nothing published, no temp
    file left; once space is freed the same approval publishes. ``hardlinked``: the failing
    write is the gate's re-copy of a hardlinked file."""
    out, staged = _stage(tmp_path, tiny_disk)
    if hardlinked:
        os.link(staged / "public" / "microdata.csv", tiny_disk / "outside.csv")
    filler = _fill(tiny_disk)
    with pytest.raises(DiskFullError, match=r"is full: writing .* failed \(No space left on "
                                            r"device\).*nothing was published") as e:
        approve(staged, "alice")
    assert isinstance(e.value, ValueError)     # an InputError: the CLI exits 2
    assert not out.exists() and _leftovers(staged) == []
    filler.unlink()
    approve(staged, "alice")
    _assert_documented(out)


def test_an_approval_under_a_file_size_limit_exits_2_then_succeeds(tmp_path):
    """RLIMIT_FSIZE in the `sdc approve` subprocess (a real EFBIG, not a mock): exit 2 with
    the limit named, nothing published, no temp file; without the limit it publishes."""
    out, staged = _stage(tmp_path)
    res = sdc("approve", staged, "--as", "alice", fsize=600)
    assert res.returncode == 2, res.stdout + res.stderr
    msg = " ".join(res.stderr.split())
    assert "file-size limit of 600 bytes" in msg.replace("0.6 KB (600 bytes)", "600 bytes")
    assert "nothing was published" in msg and "Traceback" not in res.stderr
    assert not out.exists() and _leftovers(staged) == []
    approve(staged, "alice")
    _assert_documented(out)


def test_temp_files_of_an_approval_that_died_do_not_block_the_next(tmp_path):
    """What the old code left (``internal/.audit.json.tmp-PID`` of a process gone) is the
    gate's own: removed, not reported as "added"; a live process's is left alone."""
    out, staged = _stage(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (staged / "internal" / f".audit.json.tmp-{dead}").write_text("{")
    (staged / "public" / f".microdata.csv.seal-{dead}").write_text("x")
    approve(staged, "alice")
    assert _leftovers(out) == []
    (tmp_path / "b").mkdir()
    out2, staged2 = _stage(tmp_path / "b")
    (staged2 / "internal" / f".audit.json.tmp-{os.getpid()}x").write_text("{")  # not ours
    with pytest.raises(ReviewError, match="added: internal/.audit.json.tmp-"):
        approve(staged2, "alice")


# -- the property: whatever was done to the staged modes and links, what is published is the
# -- approved bytes in fresh files with the documented modes ----------------------------------
_FILES = ["public/microdata.csv", "public/codebook.md", "internal/blocks.parquet",
          "internal/risk.json", "internal/audit.json", "internal/review.json"]
_MODES = st.sampled_from([0o600, 0o644, 0o666, 0o640, 0o400, 0o777, 0o604])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(modes=st.dictionaries(st.sampled_from(_FILES), _MODES, max_size=4),
       links=st.sets(st.sampled_from(_FILES[:4]), max_size=3),
       folders=st.dictionaries(st.sampled_from(["public", "internal"]),
                               st.sampled_from([0o700, 0o750, 0o755, 0o777, 0o711]), max_size=2))
def test_any_staged_modes_and_links_publish_the_approved_bytes_with_the_documented_modes(
        tmp_path_factory, modes, links, folders) -> None:
    root = tmp_path_factory.mktemp("seal")
    out, staged = _stage(root)
    before = {rel: (staged / rel).read_bytes() for rel in _FILES[:4]}
    outside = {}
    for i, rel in enumerate(sorted(links)):
        outside[rel] = root / f"link{i}"
        os.link(staged / rel, outside[rel])
    for rel, mode in modes.items():
        os.chmod(staged / rel, mode)
    for rel, mode in folders.items():
        os.chmod(staged / rel, mode)
    approve(staged, "alice")
    _assert_documented(out)
    for other in outside.values():                 # the other names are written to later
        with other.open("ab") as f:
            f.write(b"tampered\n")
    assert {rel: (out / rel).read_bytes() for rel in _FILES[:4]} == before
