"""flows.run: a release runs without Prefect's flow heartbeats (its end would wait up to 1 s
for the heartbeat thread) unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set; a server lost during
the run is told by what the folders hold."""

from __future__ import annotations

import os

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
