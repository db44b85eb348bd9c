"""Red-team run (issue 20, "Also"): the Dask engine and Prefect servers that fail.

A bad ``engine.scheduler`` address, a scheduler without workers, a worker killed in the
middle of the apply pass, and a ``PREFECT_API_URL`` naming a server that is not there (or
that goes away during a scheduled run). Each ends in exit 0 with the right files or in exit 2
with a clear message; never a traceback, exit 1 or a hang. Listed in docs/RELIABILITY.md,
section "Red-team run (issue 20)", subsection "Second round".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import JobBuilder, contains, public_bytes, run_sdc

USER = 2


def _dask_job(job: JobBuilder, **engine) -> Path:
    job.config["input"]["path"] = "data/input.parquet"
    job.config["input"]["format"] = "parquet"
    job.config["engine"] = {"kind": "dask", "workers": 2, **engine}
    return job.write()


@pytest.mark.parametrize("address", ["foo://x", "notanaddress", "tcp://127.0.0.1:99999"])
def test_malformed_scheduler_address_is_a_config_error(job: JobBuilder, cli,
                                                       address: str) -> None:
    """Old code: ``validate`` passed and ``release`` ended in Dask's ValueError (exit 1) for
    the first two; now the config check refuses all three (exit 2) with the form."""
    path = _dask_job(job, scheduler=address)
    for cmd in ("validate", "release"):
        res = cli(cmd, path)
        assert res.exit_code == USER, res.output
        assert "Traceback" not in res.output
        assert contains(res.output, "engine.scheduler")
        assert contains(res.output, "is not a Dask scheduler address")
        assert contains(res.output, "tcp://HOST:PORT")
    assert not job.leftovers()


def test_scheduler_without_workers_is_refused_not_awaited(job: JobBuilder, prefect_api: str
                                                          ) -> None:
    """Old code: with a scheduler that has no worker every task waited forever (the run hung:
    killed by this test's time limit). Now exit 2 after SDC_DASK_WORKER_WAIT_SECONDS."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, dashboard_address=None, processes=True,
                      host="127.0.0.1") as cluster:
        path = _dask_job(job, scheduler=cluster.scheduler_address)
        p = run_sdc(prefect_api, "release", path, timeout=240,
                    SDC_DASK_WORKER_WAIT_SECONDS="5")
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == USER, out
    assert "Traceback" not in out
    assert "has no worker (none joined within 5 s" in out and "dask worker" in out
    assert not job.leftovers()


def test_unreachable_scheduler_is_refused(job: JobBuilder, cli) -> None:
    """Nothing listens at the address: exit 2 naming it (control: held before)."""
    path = _dask_job(job, scheduler="tcp://127.0.0.1:9")
    res = cli("release", path)
    assert res.exit_code == USER, res.output
    assert contains(res.output, "cannot reach the Dask scheduler 'tcp://127.0.0.1:9'")
    assert not job.leftovers()


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_killed_mid_run_is_replaced_and_the_release_is_identical(
        job: JobBuilder, tmp_path: Path, prefect_api: str, cli, workers: int) -> None:
    """A worker SIGKILLed in the apply pass (the test hook ``SDC_DASK_KILL_AT=apply`` kills
    the first worker that starts an apply task): Dask restarts it and reruns its tasks (with
    one worker, the data scattered to it too); the release exits 0 with the same public files
    as an undisturbed pandas run."""
    path = _dask_job(job, workers=workers)
    marks = tmp_path / "marks"
    p = run_sdc(prefect_api, "release", path, timeout=600, SDC_CHECKPOINT_DIR=str(marks),
                SDC_DASK_KILL_AT="apply")
    out = " ".join((p.stdout + p.stderr).split())
    assert (marks / "dask-killed-apply").is_file(), out   # a worker was really killed
    assert p.returncode == 0, out
    assert "Traceback" not in out
    dask_files = public_bytes(job.out_dir)
    assert cli("audit", job.out_dir).exit_code == 0
    job.config["engine"] = {"kind": "pandas"}
    assert cli("release", job.write(), "--force").exit_code == 0
    assert public_bytes(job.out_dir) == dask_files


def test_worker_dying_every_time_is_exit_2(job: JobBuilder, tmp_path: Path,
                                           prefect_api: str) -> None:
    """A task that kills its worker every time (``SDC_DASK_KILL_AT=apply:always``, one
    worker): Dask gives up, the release is tried once more, then exit 2 with the reason and
    the fix; nothing published. Old code: exit 1 (FutureCancelledError / KilledWorker)."""
    path = _dask_job(job, workers=1)
    p = run_sdc(prefect_api, "release", path, timeout=600, SDC_DASK_KILL_AT="apply:always")
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == USER, out
    assert "Traceback" not in out
    assert "the Dask cluster (a local cluster of 1 worker(s)) failed twice" in out
    assert "Nothing was published" in out and "--engine streaming" in out
    assert not job.leftovers()
