"""Crash safety and reruns through the CLI.

``sdc release`` runs in a process of its own (forked from one process that imported the CLI
once, the ``forked_sdc`` fixture; its own session, using the test session's Prefect API so
that it starts no server of its own) with the crash-test hook of
``sdc.publish.folder.checkpoint``:
``SDC_CHECKPOINT_DIR`` makes it touch ``<dir>/<name>`` at each checkpoint and
``SDC_PAUSE_AT=<name>`` makes it sleep there, so the test SIGKILLs it at exactly that point:

- ``loaded``: config and input read, nothing computed or written;
- ``writing:microdata.parquet`` / ``writing:microdata.csv``: half of that file's bytes are in
  the temp sibling folder;
- ``before_rename``: the temp folder is complete, the rename has not happened.

After each kill: without an earlier release, no release folder exists (a complete one with
matching hashes would also be acceptable, but before the rename there must be none); with an
earlier release and ``--force``, the earlier release is byte for byte what it was. The next run
succeeds, removes the killed run's temp folder, and its public files are byte-identical to
those of an uninterrupted run. All runs use the census sample's first
:data:`CRASH_RECORDS` records and one seed file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from ._fork_sdc import ForkedSdc
from .conftest import CENSUS_CSV, CensusRelease, public_bytes, release_census, sdc_env

POINTS = ["loaded", "writing:microdata.parquet", "writing:microdata.csv", "before_rename"]
#: the records of the census sample these runs release (its first lines): a kill at a
#: checkpoint pauses the run there whatever the size, and what it leaves behind, the rerun's
#: clean-up and its bytes do not depend on the size; ~1.0 CPU s per release instead of ~2.0
#: for all 59,033 (about 20 releases and killed runs in this module)
CRASH_RECORDS = 15_000


@pytest.fixture(scope="module")
def census_release(tmp_path_factory: pytest.TempPathFactory, cli) -> CensusRelease:
    """This module's reference: the demo config released on the census sample's first
    :data:`CRASH_RECORDS` records (the file's first lines, byte for byte)."""
    root = tmp_path_factory.mktemp("census-crash")
    with open(CENSUS_CSV, "rb") as src:
        lines = [next(src) for _ in range(CRASH_RECORDS + 1)]  # the header and the records
    part = root / "census_part.csv"
    part.write_bytes(b"".join(lines))
    return release_census(root, part, cli)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: relative path -> (bytes, mode)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(out_dir: Path) -> list[Path]:
    return sorted(p for p in out_dir.parent.iterdir()
                  if p.name.startswith((f".{out_dir.name}.tmp-", f".{out_dir.name}.old-")))


def hashes_match_audit(out_dir: Path) -> bool:
    audit = json.loads((out_dir / "internal" / "audit.json").read_text(encoding="utf-8"))
    files = audit["public_files"]
    on_disk = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
               for p in (out_dir / "public").iterdir()}
    return files == on_disk


def kill_at(forks: ForkedSdc, prefect_api: str, point: str, config: Path, *extra: str,
            workdir: Path) -> None:
    """Run ``sdc release CONFIG [extra]`` and SIGKILL its process group at ``point``."""
    marks = workdir / f"checkpoints-{point.replace(':', '_')}"
    env = sdc_env(prefect_api, SDC_CHECKPOINT_DIR=str(marks), SDC_PAUSE_AT=point)
    log = workdir / f"sdc-{point.replace(':', '_')}.log"
    pid = forks.start(["release", str(config), *extra], env, log)
    target = marks / point.replace("/", "_")
    deadline = time.monotonic() + 120
    code = None
    try:
        while not target.exists():
            code = forks.exited()
            if code is not None:
                pytest.fail(f"sdc exited ({code}) before checkpoint {point}:\n"
                            f"{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                pytest.fail(f"checkpoint {point} not reached in 120 s")
            time.sleep(0.02)
    finally:
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            code = forks.exited(timeout=30)
    assert code == -signal.SIGKILL, f"sdc was not killed at {point} (exit {code})"


@pytest.fixture(scope="module")
def earlier(census_release: CensusRelease, cli) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    """An earlier release made with another (integer) seed, snapshotted and copied aside
    (``earlier-copy`` next to ``releases/``: bytes and modes): the --force runs below replace it, and
    :func:`put_back` restores it from the copy for the next point."""
    out = census_release.root / "earlier-releases" / "earlier"
    # a folder of its own: the releases of the demo job beside it use the session's seed
    # file, and the seed guard refuses a job's release beside releases under another seed
    cfg = census_release.config("earlier", seed=777, output__dir=str(out))
    res = cli("release", cfg)
    assert res.exit_code == 0, res.output
    shutil.copytree(out, census_release.root / "earlier-copy")
    return cfg, snapshot(out)


def put_back(out: Path) -> None:
    """The earlier release back in ``out`` exactly as it was written (every file's bytes and
    mode, the folders' modes): what a rerun of its config would write, without the run (its
    reproducibility is test_rerun_is_byte_identical's; a release series is read from the
    release folders only, so nothing outside ``out`` needs putting back)."""
    for folder in (out, *(p for p in out.rglob("*") if p.is_dir())):
        folder.chmod(0o700)  # writable, whatever the release set, to remove it
    shutil.rmtree(out)
    shutil.copytree(out.parent.parent / "earlier-copy", out)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("point", POINTS)
def test_kill_without_earlier_release(point: str, census_release: CensusRelease,
                                      prefect_api: str, tmp_path: Path, cli,
                                      forked_sdc: ForkedSdc) -> None:
    name = f"fresh-{point.replace(':', '-').replace('.', '-')}"
    cfg = census_release.config(name)
    out = census_release.root / "releases" / name
    kill_at(forked_sdc, prefect_api, point, cfg, workdir=tmp_path)
    if out.exists():  # only acceptable if complete and consistent
        assert point != "before_rename" and hashes_match_audit(out), snapshot(out).keys()
    assert not out.exists(), f"a killed run at {point} left a release folder"
    # the next run (in-process: only the killed run needs a subprocess) succeeds, cleans up,
    # and equals an uninterrupted run byte for byte
    res = cli("release", cfg)
    assert res.exit_code == 0, res.output
    assert leftovers(out) == []
    assert public_bytes(out) == census_release.public
    assert hashes_match_audit(out)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("point", POINTS)
def test_kill_with_force_keeps_earlier_release(point: str, census_release: CensusRelease,
                                               earlier, prefect_api: str,
                                               tmp_path: Path, cli, forked_sdc: ForkedSdc
                                               ) -> None:
    """The --force run replaces an earlier release (seed 777) with the reference one (the
    session's seed file); killed anywhere, the earlier release is intact."""
    _, before = earlier
    out = census_release.root / "earlier-releases" / "earlier"
    cfg = census_release.config(f"force-{point.replace(':', '-').replace('.', '-')}")
    # same output folder as the earlier release, the reference seed file
    data = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    data["output"]["dir"] = str(out)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    # another seed for the same output folder: a new release series, so --new-series
    kill_at(forked_sdc, prefect_api, point, cfg, "--force", "--new-series", workdir=tmp_path)
    assert snapshot(out) == before, f"the earlier release changed after a kill at {point}"
    res = cli("release", cfg, "--force", "--new-series")
    assert res.exit_code == 0, res.output
    assert leftovers(out) == []
    assert public_bytes(out) == census_release.public
    assert hashes_match_audit(out)
    # put the earlier release back for the next point
    put_back(out)
    assert snapshot(out) == before


# ---------------------------------------------------------------------------------------------
# reruns through the CLI
# ---------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_rerun_is_byte_identical(census_release: CensusRelease, cli) -> None:
    res = cli("release", census_release.config("rerun"))
    assert res.exit_code == 0, res.output
    assert public_bytes(census_release.root / "releases" / "rerun") == census_release.public


@pytest.mark.e2e
def test_shuffled_input_is_byte_identical(census_release: CensusRelease, cli) -> None:
    frame = pd.read_csv(census_release.root / "census_part.csv")
    rng = np.random.default_rng(2024)
    shuffled = census_release.root / "census_shuffled.csv"
    frame.iloc[rng.permutation(len(frame))].to_csv(shuffled, index=False)
    res = cli("release", census_release.config("shuffled", input__path=str(shuffled)))
    assert res.exit_code == 0, res.output
    assert public_bytes(census_release.root / "releases" / "shuffled") == census_release.public


@pytest.mark.e2e
def test_existing_release_is_not_overwritten_without_force(census_release: CensusRelease,
                                                           cli) -> None:
    before = snapshot(census_release.out_dir)
    res = cli("release", census_release.config_path)
    assert res.exit_code == 2
    assert "--force" in res.text and "already exists" in res.text
    assert snapshot(census_release.out_dir) == before
