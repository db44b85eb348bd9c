"""flows.run: a release runs without Prefect's flow heartbeats (its end would wait up to 1 s
for the heartbeat thread) unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set; a server lost during
the run is told by what the folders hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prefect.settings import get_current_settings

from flows.run import _run_settings


def test_release_runs_without_flow_heartbeats_unless_configured(monkeypatch) -> None:
    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    before = get_current_settings()
    with _run_settings("http://127.0.0.1:9/api"):
        now = get_current_settings()
        assert now.flows.heartbeat_frequency is None
        assert str(now.api.url) == "http://127.0.0.1:9/api"
    with _run_settings(None):  # the API as configured
        assert get_current_settings().api.url == before.api.url
        assert get_current_settings().flows.heartbeat_frequency is None
    assert get_current_settings().flows.heartbeat_frequency == before.flows.heartbeat_frequency
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")  # the user's choice is kept
    with _run_settings(None):
        assert get_current_settings().flows.heartbeat_frequency == 60


def test_a_server_lost_after_the_release_was_written_is_not_a_failure(tmp_path):
    """Issue 47: killing sdc's persistent server mid-release exited 2 although the release was
    published, and called it "the temporary one this command started". The folder decides:
    a release (or a staged release) written during the run is reported as done, naming the
    server the run used; without one, nothing was published."""
    import time

    import httpx

    from flows.run import PrefectServerLostError, lost_server, server_lost

    out = tmp_path / "releases" / "r"
    lost = httpx.ConnectError("[Errno 111] Connection refused")
    started = time.time() - 1.0
    e = server_lost(RuntimeError("x"), None, out, started)
    assert e is None  # not a lost connection
    e = server_lost(lost, None, out, started, "at http://127.0.0.1:5/api (the local server "
                    "sdc started, pid 7)")
    assert e.published is None and "Nothing was published" in str(e)
    assert "the local server sdc started" in str(e) and "temporary" not in str(e)
    for folder in (out, tmp_path / "releases" / "r.staged"):
        (folder / "internal").mkdir(parents=True)
        (folder / "internal" / "audit.json").write_text("{}")
        e = server_lost(lost, "http://127.0.0.1:5/api", out, started)
        assert e.published == folder, str(e)
        assert f"sdc audit {folder}" in str(e) and "at http://127.0.0.1:5/api" in str(e)
        os.utime(folder / "internal" / "audit.json", (started - 60, started - 60))
    assert server_lost(lost, None, out, started).published is None  # written before the run
    with pytest.raises(PrefectServerLostError, match="at URL-OF-THE-LEASE"):
        with lost_server(None, out, lambda: "at URL-OF-THE-LEASE"):
            raise RuntimeError("flow failed") from lost


def test_a_runs_settings_are_made_once_and_as_temporary_settings_makes_them(monkeypatch) -> None:
    """run_settings keeps what copy_with_update built (the release worker makes its server's
    before it forks a child per run): the same object for the same URL, heartbeat choice and
    base settings, equal to what temporary_settings builds; another URL, another choice or
    another base settings object is built afresh."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    from flows.run import run_settings

    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    url = "http://127.0.0.1:9/api"
    made = run_settings(url)
    assert run_settings(url) is made
    with temporary_settings({PREFECT_API_URL: url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}) as t:
        assert made.model_dump() == t.model_dump()
    other = run_settings("http://127.0.0.1:10/api")
    assert other is not made and str(other.api.url) == "http://127.0.0.1:10/api"
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")
    beats = run_settings(url)
    assert beats is not made and beats.flows.heartbeat_frequency == 60
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:11/api"}) as base:
        assert run_settings(url, base) is not beats  # another base: built from it
        assert str(run_settings(url, base).api.url) == url
    # a server that proved its CSRF protection is off: the client skips the token probe
    quiet = run_settings(url, csrf_off=True)
    assert quiet is not beats and run_settings(url, csrf_off=True) is quiet
    assert quiet.client.csrf_support_enabled is False and beats.client.csrf_support_enabled


def test_the_release_flow_is_run_with_its_local_result_storage_named(tmp_path) -> None:
    """flows.run.release_flow: the release flow persists nothing and names the settings' local
    result storage (so Prefect does not ask the server for a default storage block at each
    run), made once per folder; another folder, another flow."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    from flows.release import release
    from flows.run import release_flow

    made = release_flow()
    assert made is release_flow() and made.fn is release.fn and made.name == release.name
    assert made.persist_result is False and release.persist_result is False
    with temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: tmp_path}):
        other = release_flow()
        assert other is not made and Path(other.result_storage) == tmp_path
