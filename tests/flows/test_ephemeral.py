"""flows.ephemeral.TemporaryAPI: Prefect's temporary API server started before Prefect is
imported. A real server subprocess and a real ``sdc release`` in a subprocess
without PREFECT_API_URL: the run uses the early server, and nothing is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from flows.ephemeral import TemporaryAPI

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_temporary_api_answers_and_stops(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    api = TemporaryAPI.start()
    assert api is not None
    try:
        waited = api.wait(timeout=120)
        assert waited > 0
        with urllib.request.urlopen(api.url + "/health", timeout=5) as r:
            assert r.status == 200
        assert api.current_peak_rss_mb() > 20
        pid = api.process.pid
    finally:
        api.stop()
    assert api.process is None and api.peak_rss_mb > 20
    assert not Path(f"/proc/{pid}").exists()  # reaped, not a zombie


def test_no_temporary_api_when_a_url_is_configured(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert TemporaryAPI.start() is None
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_ENABLED", "false")
    assert TemporaryAPI.start() is None


def test_sdc_release_runs_on_the_early_server(make_small_job, tmp_path):
    cfg = make_small_job("early-api", n=1500)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env.update(COLUMNS="200", PREFECT_HOME=str(tmp_path / "home"))  # no server sdc started
    sdc = str(Path(sys.executable).with_name("sdc"))
    p = subprocess.run([sdc, "release", str(cfg), "--timings"], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("timings "))
    t = json.loads(line.removeprefix("timings "))
    assert t["api_server_ready_seconds"] > 0 and t["api_server_peak_rss_mb"] > 20
    assert "Error logging to API" not in p.stderr  # the server outlived Prefect's last logs
    with pytest.raises(OSError):  # and was stopped when the command ended
        urllib.request.urlopen(t["api_server_url"] + "/health", timeout=5)


def test_warm_home_skips_the_migrations(tmp_path, monkeypatch):
    """The first temporary server on a fresh PREFECT_HOME migrates its database and marks it;
    the next one starts with PREFECT_SERVER_DATABASE_MIGRATE_ON_START=false and still works."""
    from flows.ephemeral import migrated_marker, warm_database

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    assert not warm_database()
    with TemporaryAPI.start() as first:
        assert first.migrates
        first.wait(timeout=180)
    assert warm_database() and migrated_marker().is_file()
    with TemporaryAPI.start() as second:
        assert not second.migrates
        second.wait(timeout=180)
        req = urllib.request.Request(second.url + "/flows/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:  # the database answers queries
            assert r.status == 200
