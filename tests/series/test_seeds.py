"""sdc.series.seeds: the seed file is created private, read back, and refused when exposed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

import sdc
from sdc.series.seeds import SeedInfo, load_seed

ROOT = os.geteuid() == 0


def cfg(tmp_path: Path, seed) -> sdc.ReleaseConfig:
    data = {"name": "t", "input": {"path": "x.csv"}, "key_variables": {"s": {"categories": [1]}},
            "risk": {"xi": 0.395}}
    if seed is not None:
        data["seed"] = seed
    return sdc.parse_config(data, tmp_path)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_int_seed_as_is(tmp_path: Path) -> None:
    assert load_seed(cfg(tmp_path, 12345)) == SeedInfo(12345, None, None, False)


def test_no_seed_says_add_one(tmp_path: Path) -> None:
    with pytest.raises(sdc.ConfigError, match=r"no seed.*seed: \{file:"):
        load_seed(cfg(tmp_path, None))


def test_negative_seed(tmp_path: Path) -> None:
    with pytest.raises(sdc.ConfigError, match="non-negative"):
        load_seed(cfg(tmp_path, -3))


def test_created_private_then_reused(tmp_path: Path) -> None:
    c = cfg(tmp_path, {"file": "secrets/deep/r.seed"})
    old = os.umask(0)  # modes must not depend on the umask
    try:
        first = load_seed(c)
    finally:
        os.umask(old)
    path = tmp_path / "secrets" / "deep" / "r.seed"
    assert first.created and first.path == path
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700 and mode(path.parent.parent) == 0o700
    raw = path.read_bytes()
    assert raw.decode().strip() == str(first.value)
    assert 0 <= first.value < 2**128 and first.value > 2**64  # 128 random bits (P(fail) = 2^-64)
    assert first.sha256 == hashlib.sha256(raw).hexdigest()
    again = load_seed(c)
    assert (again.value, again.sha256, again.created) == (first.value, first.sha256, False)
    assert str(first.value) not in repr(first)


def test_two_files_differ(tmp_path: Path) -> None:
    a = load_seed(cfg(tmp_path, {"file": "a.seed"})).value
    b = load_seed(cfg(tmp_path, {"file": "b.seed"})).value
    assert a != b


def test_missing_without_create(tmp_path: Path) -> None:
    with pytest.raises(sdc.InputError, match="does not exist.*restore the seed file"):
        load_seed(cfg(tmp_path, {"file": "x.seed"}), create=False)
    assert not (tmp_path / "x.seed").exists()


@pytest.mark.parametrize("bits", [0o640, 0o604, 0o620, 0o602, 0o644])
def test_exposed_seed_file_refused(tmp_path: Path, bits: int) -> None:
    p = tmp_path / "s.seed"
    p.write_text("98765432109876543210\n")
    p.chmod(bits)
    with pytest.raises(sdc.InputError) as e:
        load_seed(cfg(tmp_path, {"file": "s.seed"}))
    assert f"mode {bits:04o}" in str(e.value) and f"chmod 600 {p}" in str(e.value)
    p.chmod(0o600)
    assert load_seed(cfg(tmp_path, {"file": "s.seed"})).value == 98765432109876543210


@pytest.mark.parametrize("content,what", [(b"", "is empty"), (b"  \n", "is empty"),
                                          (b"12abc\n", "does not hold one decimal integer"),
                                          (b"-5\n", "does not hold one decimal integer"),
                                          (b"1 2\n", "does not hold one decimal integer"),
                                          (b"\xff\xfe", "does not hold one decimal integer")])
def test_garbage_content(tmp_path: Path, content: bytes, what: str) -> None:
    p = tmp_path / "s.seed"
    p.write_bytes(content)
    p.chmod(0o600)
    with pytest.raises(sdc.InputError, match=what + r".*decimal integer"):
        load_seed(cfg(tmp_path, {"file": "s.seed"}))


def test_seed_path_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "s.seed").mkdir(mode=0o700)
    with pytest.raises(sdc.InputError, match="not a regular file"):
        load_seed(cfg(tmp_path, {"file": "s.seed"}))


@pytest.mark.skipif(ROOT, reason="root reads any file; permission denied cannot be provoked")
def test_unreadable_seed_file(tmp_path: Path) -> None:
    p = tmp_path / "s.seed"
    p.write_text("98765432109876543210\n")
    p.chmod(0o200)
    with pytest.raises(sdc.InputError, match="cannot be read"):
        load_seed(cfg(tmp_path, {"file": "s.seed"}))


def test_unreadable_seed_file_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the same path as above, provoked without relying on the user id
    p = tmp_path / "s.seed"
    p.write_text("98765432109876543210\n")
    p.chmod(0o600)

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(sdc.InputError, match=r"cannot be read \(permission denied\).*chmod 600"):
        load_seed(cfg(tmp_path, {"file": "s.seed"}))


def test_a_kill_during_the_first_write_leaves_no_empty_seed_file(tmp_path):
    """SIGKILL a process while it writes a new seed file (its fsync blocks): the seed path
    does not exist afterwards (only a temporary file may), and the next run creates a full one."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    seed_path = tmp_path / "secrets" / "job.seed"
    ready = tmp_path / "ready"
    code = textwrap.dedent(f"""
        import os, time, pathlib
        from sdc.series import seeds
        real = os.fsync
        def slow(fd):
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(60)
        os.fsync = slow
        seeds._create(pathlib.Path({str(seed_path)!r}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    # the child imports sdc before it reaches fsync: on a loaded machine (make test) that can
    # take longer than the 15 s this loop allowed; a deadline of minutes fails only if it never
    # gets there
    deadline = time.monotonic() + 300
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), f"the child never reached fsync (exit {proc.poll()})"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not seed_path.exists()
    info = load_seed(cfg(tmp_path, {"file": str(seed_path)}))
    assert info.created and seed_path.read_text().strip().isdigit()
    assert not list(seed_path.parent.glob(".job.seed.tmp-*"))   # the stale temp file is gone
