"""flows.release.prefetch_job: the pre-flight and the input read while Prefect starts are
handed to the flow (``prefetched=``, no module global) and are what the load task uses; its
errors surface from the flow exactly as without the prefetch."""

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
    monkeypatch.setattr(fr, "load_job", lambda p: calls.append(p.path) or real(p))
    summary = release_flow(config_path=str(cfg), prefetched=prefetch_job(cfg))
    assert calls == [cfg.resolve()]  # read once: by the prefetch, not again by the load task
    out = Path(summary["release_dir"])
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert len(pub) == 1200 and summary["n"] == 1200


def test_prefetch_errors_surface_from_the_load_task(prefect_harness, make_small_job):
    cfg = make_small_job("prefetch-bad", n=300)
    Path(sdc.load_config(cfg).input_path).unlink()
    with pytest.raises((sdc.InputError, FileNotFoundError)):
        release_flow(config_path=str(cfg), prefetched=prefetch_job(cfg))


def test_a_prefetch_of_another_config_is_not_used(prefect_harness, make_small_job, monkeypatch):
    """The load task takes a prefetch only of the config it loads, and only when it was
    checked with the run's options (else it runs the pre-flight itself)."""
    cfg, other = make_small_job("prefetch-a", n=300), make_small_job("prefetch-b", n=200)
    calls = []
    real = fr.load_job
    monkeypatch.setattr(fr, "load_job", lambda p: calls.append(p.path) or real(p))
    early = prefetch_job(cfg)  # checked without --force, before the release exists
    wrong = prefetch_job(other)
    checks = []
    real_preflight = fr.preflight
    monkeypatch.setattr(fr, "preflight", lambda *a, **k: checks.append(k) or
                        real_preflight(*a, **k))
    summary = release_flow(config_path=str(cfg), prefetched=wrong)
    assert summary["n"] == 300 and calls == [cfg.resolve(), other.resolve()]
    assert len(checks) == 1 and checks[0]["force"] is False  # the load task checked cfg
    # checked without --force: a --force run checks again (and replaces the release)
    summary = release_flow(config_path=str(cfg), force=True, prefetched=early)
    assert summary["n"] == 300
    assert len(checks) == 2 and checks[1]["force"] is True
