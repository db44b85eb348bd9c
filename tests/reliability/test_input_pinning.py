"""Red-team run: the recorded SHA-256 belongs to the bytes released.

The input was read, then hashed in a second open: a file swapped during the run was released
under another file's hash (3 of 6 audits then passed on data that was not released). Now each
file's identity and change time are taken before it is read and checked after it was hashed
and again right before the release folder is renamed into place (``sdc.io.pin``). Each test
changes a file at one point of an in-process ``sdc release`` (a monkeypatched reader or the
``checkpoint`` test hook) and expects exit 2, nothing published, and no staging folder left.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sdc.io.read
import sdc.publish.folder
from sdc.io.write import sha256_file

from .conftest import JobBuilder, contains


def _swap(path: Path, text: str | None = None) -> None:
    """Replace ``path`` by another file (new inode) with one value changed."""
    data = path.read_text(encoding="utf-8") if text is None else text
    lines = data.splitlines(keepends=True)
    lines[3] = lines[3].replace(",1,", ",2,", 1) if ",1," in lines[3] else lines[3] + ""
    tmp = path.with_suffix(".new")
    tmp.write_text("".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _edit_in_place(path: Path) -> None:
    """Overwrite one byte of ``path`` in place (same inode, same size)."""
    with open(path, "r+b") as f:
        data = f.read()
        i = data.index(b"\n") + 1
        f.seek(i)
        f.write(b"X" if data[i:i + 1] != b"X" else b"Y")


def test_input_swapped_while_it_is_read(job: JobBuilder, cli, monkeypatch) -> None:
    cfg = job.write()
    real = sdc.io.read.read_input

    def read_then_swap(config):
        frame = real(config)
        _swap(job.data_path)            # the hash would now be taken of another file
        return frame

    monkeypatch.setattr(sdc.io.read, "read_input", read_then_swap)
    res = cli("release", cfg)
    assert res.exit_code == 2, res.output
    assert contains(res.output, "input file")
    assert contains(res.output, "changed while it was read: it was replaced by another file")
    assert contains(res.output, "nothing was published")
    assert job.leftovers() == []


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
@pytest.mark.parametrize("change", ["swap", "in_place"])
def test_input_changed_before_publish(job: JobBuilder, cli, monkeypatch, engine: str,
                                      change: str) -> None:
    """The file changes after it was read (batch engines: between their passes and the
    publish): refused right before the rename; an earlier release stays as it was."""
    cfg = job.write()
    assert cli("release", cfg, "--engine", engine).exit_code == 0
    before = {p.name: p.read_bytes() for p in (job.out_dir / "public").iterdir()}
    real = sdc.publish.folder.checkpoint

    def hook(name: str) -> None:
        if name == "writing:codebook.md":
            (_swap if change == "swap" else _edit_in_place)(job.data_path)
        real(name)

    monkeypatch.setattr(sdc.publish.folder, "checkpoint", hook)
    res = cli("release", cfg, "--force", "--engine", engine)
    assert res.exit_code == 2, res.output
    assert contains(res.output, "changed during the run, before the release was published")
    assert contains(res.output, str(job.data_path))
    assert {p.name: p.read_bytes() for p in (job.out_dir / "public").iterdir()} == before
    assert job.leftovers() == [job.out_dir]


def test_config_changed_before_publish(job: JobBuilder, cli, monkeypatch) -> None:
    cfg = job.write()
    real = sdc.publish.folder.checkpoint

    def hook(name: str) -> None:
        if name == "writing:codebook.md":
            with open(cfg, "a", encoding="utf-8") as f:
                f.write("# edited during the run\n")
        real(name)

    monkeypatch.setattr(sdc.publish.folder, "checkpoint", hook)
    res = cli("release", cfg)
    assert res.exit_code == 2, res.output
    assert contains(res.output, "the config file")
    assert contains(res.output, "its size changed")
    assert job.leftovers() == []


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_recorded_hash_is_the_released_file(job: JobBuilder, cli, engine: str) -> None:
    """Control: an undisturbed run records the SHA-256 of the file it released (a batch
    executor's run hashes it on a thread while it reads it: Pin.take(background=True))."""
    import json

    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    audit = json.loads((job.out_dir / "internal" / "audit.json").read_text())
    assert audit["input"]["sha256"] == sha256_file(job.data_path)


def test_a_background_hash_gives_the_digest_or_its_error(tmp_path: Path) -> None:
    from sdc.errors import InputError
    from sdc.io.batches import input_sha256
    from sdc.io.pin import Pin

    path = tmp_path / "in.csv"
    path.write_bytes(b"a,b\n1,2\n" * 100_000)
    pin = Pin.take(path, "input file", input_sha256, background=True)
    assert pin.digest() == pin.sha256 == sha256_file(path)
    assert pin.states == Pin.take(path, "input file").states
    gone = Pin.take(tmp_path / "missing.csv", "input file", input_sha256, background=True)
    with pytest.raises(InputError, match="does not exist"):
        gone.digest()
