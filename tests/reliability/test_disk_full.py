"""Red-team run: a full disk names the path and the space needed.

A release on a full disk ended in ``OSError: [Errno 28] No space left on device`` (exit 1,
"not expected"). Now: the release's size is checked against the free space before writing
(exit 2: needed and free); a disk that fills up while writing (simulated at the OS boundary:
``_write_file`` raising ENOSPC) is exit 2 naming the file, with nothing published and an
earlier release intact; the seed file and the batch engines' staging folder the same. The
tmpfs cases need root (``mount -t tmpfs``) and are skipped elsewhere.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import sdc.publish.folder as folder
import sdc.series.seeds as seeds

from .conftest import JobBuilder, contains


@pytest.fixture
def tiny_disk(mount_tmpfs):
    """A 64 KiB tmpfs (root only)."""
    return mount_tmpfs("64k")


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_release_larger_than_the_free_space(job: JobBuilder, cli, tiny_disk: Path,
                                            engine: str) -> None:
    job.config["output"]["dir"] = str(tiny_disk / "job")
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 2, res.output
    assert contains(res.output, str(tiny_disk))
    assert ("not enough space for release 'job'" in res.text
            or "is full" in res.text), res.output
    assert "MB are free" in res.text or "KB are free" in res.text
    assert [p.name for p in tiny_disk.iterdir()] == []


def test_disk_fills_up_while_writing(job: JobBuilder, cli, monkeypatch) -> None:
    cfg = job.write()
    assert cli("release", cfg).exit_code == 0
    before = {p.name: p.read_bytes() for p in (job.out_dir / "public").iterdir()}
    real = folder._write_file

    def full(path, data, mode, label):
        if label == "microdata.csv":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, mode, label)

    monkeypatch.setattr(folder, "_write_file", full)
    res = cli("release", cfg, "--force")
    assert res.exit_code == 2, res.output
    assert contains(res.output, "is full: writing")
    assert contains(res.output, "microdata.csv' failed (No space left on device)")
    assert contains(res.output, "nothing was published")
    assert {p.name: p.read_bytes() for p in (job.out_dir / "public").iterdir()} == before
    assert job.leftovers() == [job.out_dir]


def test_new_release_disk_fills_up(job: JobBuilder, cli, monkeypatch) -> None:
    def full(path, data, mode, label):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(folder, "_write_file", full)
    res = cli("release", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "Release 'job' needs")
    assert job.leftovers() == []


def test_seed_file_on_a_full_disk(job: JobBuilder, cli, monkeypatch) -> None:
    job.config["seed"] = {"file": "secrets/new.seed"}

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(seeds, "_create", full)
    cfg = job.write()
    job.seed_path.unlink()          # the run must create it
    res = cli("release", cfg)
    assert res.exit_code == 2, res.output
    assert contains(res.output, "cannot create seed file")
    assert contains(res.output, "is full (No space left on device)")
    assert job.leftovers() == []


@pytest.mark.parametrize("engine", ["streaming", "dask"])
def test_disk_fills_up_while_an_executor_writes_the_public_file(job: JobBuilder, cli,
                                                                 monkeypatch, engine: str) -> None:
    """The batch executors write the public file through ``HashingFile``, whose thread does
    the writes: a write that fails there (the disk fills up after the first bytes) still
    reaches the release as the disk-full refusal (exit 2), and nothing is published."""
    import sdc.pipeline.kernels as kernels

    class Filling:
        def __init__(self, f) -> None:
            self.f, self.n = f, 0

        def write(self, b) -> int:
            self.n += len(b)
            if self.n > 64:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(b)

        def __getattr__(self, name: str):
            return getattr(self.f, name)

    real_open = open
    monkeypatch.setattr(kernels, "open", lambda p, mode="r": Filling(real_open(p, mode)),
                        raising=False)
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 2, res.output
    assert contains(res.output, "is full")
    assert contains(res.output, "No space left on device")
    assert contains(res.output, "nothing was published")
    assert job.leftovers() == []
