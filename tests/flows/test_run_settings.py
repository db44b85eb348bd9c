"""flows.run._run_settings: a release runs without Prefect's flow heartbeats (its end would
wait up to 1 s for the heartbeat thread) unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set."""

from __future__ import annotations

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
