"""flows.release.prefetch_job: the input read while Prefect starts is handed to the flow
(``prefetched=``, no module global) and is what the load task uses; its errors surface from
the flow exactly as without the prefetch."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import flows.release as fr
import sdc
from flows.release import prefetch_job
from flows.release import release as release_flow


def test_prefetched_job_is_used_and_consumed(prefect_harness, make_small_job, monkeypatch):
    cfg = make_small_job("prefetch", n=1200)
    calls = []
    real = fr.load_job
    monkeypatch.setattr(fr, "load_job", lambda p: calls.append(p) or real(p))
    summary = release_flow(config_path=str(cfg), prefetched=prefetch_job(cfg))
    assert calls == [cfg]  # read once: by the prefetch, not again by the load task
    out = Path(summary["release_dir"])
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert len(pub) == 1200 and summary["n"] == 1200


def test_prefetch_errors_surface_from_the_load_task(prefect_harness, make_small_job):
    cfg = make_small_job("prefetch-bad", n=300)
    Path(sdc.load_config(cfg).input_path).unlink()
    with pytest.raises((sdc.InputError, FileNotFoundError)):
        release_flow(config_path=str(cfg), prefetched=prefetch_job(cfg))


def test_a_prefetch_of_another_config_is_not_used(prefect_harness, make_small_job, monkeypatch):
    """The load task takes a prefetch only of the config it loads."""
    cfg, other = make_small_job("prefetch-a", n=300), make_small_job("prefetch-b", n=200)
    calls = []
    real = fr.load_job
    monkeypatch.setattr(fr, "load_job", lambda p: calls.append(p) or real(p))
    summary = release_flow(config_path=str(cfg), prefetched=prefetch_job(other))
    assert summary["n"] == 300 and calls == [other]
