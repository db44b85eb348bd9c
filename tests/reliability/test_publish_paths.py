"""Red-team run: output, seed and
staging paths are resolved (realpath) before every check, through ``sdc release``.

Each test builds the small job of ``conftest.JobBuilder``, bends one path and runs the CLI
in-process. A refusal is exit 2 with the fix in the message and nothing written where it
must not be; an accepted case is a complete release that ``sdc audit`` passes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from .conftest import JobBuilder, contains


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _fake_release(root: Path) -> Path:
    (root / "public").mkdir(parents=True)
    (root / "internal").mkdir(parents=True)
    (root / "internal" / "audit.json").write_text("{}", encoding="utf-8")
    return root


def test_symlinked_releases_folder_into_another_release_is_refused(job: JobBuilder, cli) -> None:
    """``releases`` -> ``other/public``: the new release (internal/ included) was written into
    ``other/public/job`` (exit 0). Now the check runs on the realpath: exit 2."""
    other = _fake_release(job.root / "other")
    (job.root / "releases").symlink_to(other / "public")
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "public/ folder of release")
    assert contains(res.output, str(other))
    assert list((other / "public").iterdir()) == []        # nothing written into the release
    assert not any(p.name.startswith(".job.") for p in (other / "public").iterdir())


def test_seed_file_inside_a_release_through_a_symlink_is_refused(job: JobBuilder, cli) -> None:
    other = _fake_release(job.root / "other")
    job.config["seed"] = {"file": "secrets/job.seed"}
    (job.root / "secrets").symlink_to(other / "public")
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "lies inside the release folder")
    assert contains(res.output, "seed must stay outside every release")
    assert not job.out_dir.exists()


def test_release_holding_its_input_is_refused(job: JobBuilder, cli) -> None:
    """Re-releasing a release's own public file into that release with --force would replace
    (delete) the input: refused before anything is computed."""
    cfg = job.write()
    assert cli("release", cfg).exit_code == 0
    job.config["input"] = {"path": "releases/job/public/microdata.csv", "format": "csv",
                           "id_column": None}
    job.config["input"].pop("id_column")
    job.config["output"]["formats"] = ["csv"]
    job.skip_data = True
    res = cli("release", job.write(), "--force")
    assert res.exit_code == 2, res.output
    assert contains(res.output, "holds the input")
    assert (job.out_dir / "public" / "microdata.csv").is_file()


def test_world_writable_parent_without_sticky_bit_is_refused(job: JobBuilder, cli) -> None:
    rel = job.root / "releases"
    rel.mkdir()
    rel.chmod(0o777)
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "everybody may write to and which has no sticky bit")
    assert contains(res.output, f"chmod o-w {rel}")
    assert not job.out_dir.exists()
    rel.chmod(0o1777)           # with the sticky bit (like /tmp) it is fine
    assert cli("release", job.config_path).exit_code == 0


def test_parents_are_created_0750_under_umask_000(job: JobBuilder, cli) -> None:
    """Under umask 000 ``releases/`` was created 0777 (world-writable). Now the missing
    parents get 0750 whatever the umask; the release keeps its modes."""
    job.config["output"]["dir"] = "releases/2026/job"
    cfg = job.write()
    old = os.umask(0)
    try:
        res = cli("release", cfg)
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert _mode(job.root / "releases") == 0o750
    assert _mode(job.root / "releases" / "2026") == 0o750
    out = job.root / "releases" / "2026" / "job"
    assert _mode(out / "internal") == 0o700
    assert {_mode(p) for p in (out / "internal").iterdir()} == {0o600}
    assert {_mode(p) for p in (out / "public").iterdir()} == {0o644}


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_output_folder_name_of_250_characters(job: JobBuilder, cli, engine: str) -> None:
    """A 250-character folder name is a valid name, but the staging sibling
    ``.<name>.tmp-<pid>-<hex>`` was too long (OSError, exit 1). The staging name is now
    shortened (prefix + hash of the name); the release is published and audits."""
    name = "r" * 250
    job.config["output"]["dir"] = f"releases/{name}"
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    out = job.root / "releases" / name
    assert (out / "internal" / "audit.json").is_file()
    assert [p.name for p in (job.root / "releases").iterdir()] == [name]   # no staging left
    assert cli("audit", out).exit_code == 0
    res = cli("release", job.config_path, "--force", "--engine", engine)
    assert res.exit_code == 0, res.output
    assert [p.name for p in (job.root / "releases").iterdir()] == [name]


def test_output_folder_name_over_255_bytes(job: JobBuilder, cli) -> None:
    job.config["output"]["dir"] = "releases/" + "r" * 256
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "has 256 bytes; a file name may have at most 255 bytes")
