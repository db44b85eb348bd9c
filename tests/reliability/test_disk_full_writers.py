"""Issue 47: every writer turns a full disk (ENOSPC) or a file-size limit (EFBIG) into exit 2
naming the file, with nothing half-written and its own temp files removed.

Before: `design -o`, `sample --out` and a release exited 1 ("not expected"), `rr simulate
--out` printed a raw traceback, a release under `ulimit -f` exited 1. Real conditions, not
mocks: RLIMIT_FSIZE set in the `sdc` subprocess (``resource.setrlimit`` before the CLI
starts; the session's Prefect server runs outside the limit) and a small tmpfs filled to the
last byte (root only; skipped elsewhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, JobBuilder, sdc_env


def sdc(prefect_api: str | None, *args: str | Path, fsize: int | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``sdc ARGS`` of this checkout in a subprocess, under RLIMIT_FSIZE = ``fsize`` bytes."""
    limit = (f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize})); "
             if fsize else "")
    code = f"{limit}import sys; from sdc.cli.entry import main; sys.argv[0] = 'sdc'; main()"
    env = sdc_env(prefect_api) if prefect_api else {**os.environ, "COLUMNS": "1000"}
    env.update(PYTHONPATH=str(REPO), SDC_WORKER="0")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=600, check=False, cwd=cwd)


def text(res: subprocess.CompletedProcess[str]) -> str:
    return " ".join((res.stdout + res.stderr).split())


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def tiny_disk(mount_tmpfs):
    """A 128 KiB tmpfs (root only)."""
    return mount_tmpfs("128k")


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill ``folder``'s file system, then free ``leave`` bytes again."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
        if leave:
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("force", [False, True])
def test_rr_simulate_under_a_file_size_limit(tmp_path, force):
    out = tmp_path / "rr.csv"
    if force:
        out.write_text("z1,z2\n1,0\n")
    args = ["rr", "simulate", "-p", "0.5,0.5", "-n", "50000", "--epsilon", "1", "--out", out]
    res = sdc(None, *args, *(["--force"] if force else []), fsize=4096)
    assert res.returncode == 2, text(res)
    assert "Traceback" not in res.stderr
    assert f"writing '{out}' failed: the file would exceed the file-size limit" in text(res)
    assert "(4,096 bytes)" in text(res) and "ulimit -f unlimited" in text(res)
    assert hidden(tmp_path) == []                                     # no temp file
    assert (out.read_text() == "z1,z2\n1,0\n") if force else not out.exists()


def test_rr_simulate_on_a_full_disk(tiny_disk):
    fill(tiny_disk)
    res = sdc(None, "rr", "simulate", "-p", "0.5,0.5", "-n", "20000", "--epsilon", "1",
              "--out", tiny_disk / "rr.csv")
    assert res.returncode == 2, text(res)
    assert f"the disk holding '{tiny_disk}' is full" in text(res)
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


def test_sample_under_a_file_size_limit(tmp_path):
    res = sdc(None, "sample", "--out", tmp_path / "smp", fsize=50_000)
    assert res.returncode == 2, text(res)
    assert "census_sample.csv' failed: the file would exceed the file-size limit" in text(res)
    assert list((tmp_path / "smp").iterdir()) == []


def test_sample_on_a_full_disk(tiny_disk):
    fill(tiny_disk)
    res = sdc(None, "sample", "--out", tiny_disk)
    assert res.returncode == 2, text(res)
    assert "is full: writing" in text(res) and "census_sample.csv" in text(res)
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("command", ["design", "init"])
def test_design_and_init_output_on_a_full_disk(job: JobBuilder, tiny_disk, command):
    """`design -o` / `init -o` into a full tmpfs: exit 2, nothing there."""
    cfg = job.write()
    fill(tiny_disk)
    target = tiny_disk / "out.yaml"
    args = (["design", cfg, "-o", target] if command == "design"
            else ["init", job.data_path, "-o", target, "--id", "id", "--keys", "sex,age,race"])
    res = sdc(None, *args)
    assert res.returncode == 2, text(res)
    assert f"the disk holding '{tiny_disk}' is full" in text(res), text(res)
    assert "Traceback" not in res.stderr and "not expected" not in text(res)
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("formats,executor", [(["parquet", "csv"], "memory"),
                                             (["parquet", "dta", "sav"], "memory"),
                                             (["parquet", "csv"], "streaming")])
def test_release_under_a_file_size_limit(job: JobBuilder, prefect_api, formats, executor):
    """A release whose files exceed `ulimit -f`: exit 2 naming the limit, nothing published,
    no temp folder; the same release without the limit publishes."""
    job.config["output"]["formats"] = formats
    cfg = job.write()
    res = sdc(prefect_api, "release", cfg, "--no-reuse", "--executor", executor, fsize=20_000,
              cwd=job.root)
    assert res.returncode == 2, text(res)
    assert "file-size limit of 19.5 KB (20,000 bytes)" in text(res), text(res)
    assert ("nothing of release 'job' was published" in text(res)
            or "file was not written and nothing was published" in text(res)
            or "pass stopped and nothing was published" in text(res)), text(res)
    assert job.leftovers() == []
    res = sdc(prefect_api, "release", cfg, "--no-reuse", cwd=job.root)
    assert res.returncode == 0, text(res)


def test_report_under_a_file_size_limit(job: JobBuilder, prefect_api):
    """`sdc report` re-rendering report.html (hundreds of KB) under a small limit: exit 2, the
    page the release wrote is unchanged, no temp file."""
    cfg = job.write()
    assert sdc(prefect_api, "release", cfg, "--no-reuse", cwd=job.root).returncode == 0
    page = job.out_dir / "internal" / "report.html"
    before = page.read_bytes()
    assert len(before) > 60_000
    res = sdc(prefect_api, "report", job.out_dir, fsize=50_000)
    assert res.returncode == 2, text(res)
    assert "file-size limit" in text(res) and "Traceback" not in res.stderr
    assert page.read_bytes() == before and hidden(job.out_dir / "internal") == []
