"""flows.ephemeral.TemporaryAPI: Prefect's temporary API server started before Prefect is
imported. A real ``sdc release --no-reuse`` in a subprocess without PREFECT_API_URL on a fresh
``PREFECT_HOME``: the run uses the early server (which migrates the new database and marks it),
starts no reused server and no release worker, and leaves nothing running; then a temporary
server in-process on that now warm home: it skips the migrations, answers, and is reaped.

(The ``--no-reuse`` run is the one of tests/cli/test_worker.py's and
tests/flows/test_server.py's end-to-end tests too: each used to start its own.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from flows.ephemeral import TemporaryAPI, migrated_marker, warm_database
from flows.server import state_file

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_no_temporary_api_when_a_url_is_configured(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert TemporaryAPI.start() is None
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_ENABLED", "false")
    assert TemporaryAPI.start() is None


def test_no_reuse_release_on_the_early_server_then_a_warm_temporary_api(server_home,
                                                                        make_small_job):
    cfg = make_small_job("early-api", n=1500)
    assert not warm_database()  # a fresh PREFECT_HOME (server_home)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "SDC_WORKER")}
    # a reused server would be started without --no-reuse (idle time > 0)
    env.update(COLUMNS="200", SDC_SERVER_IDLE_MINUTES="0.4")
    sdc = str(Path(sys.executable).with_name("sdc"))
    p = subprocess.run([sdc, "release", str(cfg), "--timings", "--no-reuse"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("timings "))
    t = json.loads(line.removeprefix("timings "))
    assert t["prefect_api"] == "temporary"
    assert t["api_server_ready_seconds"] > 0 and t["api_server_peak_rss_mb"] > 20
    assert "Error logging to API" not in p.stderr  # the server outlived Prefect's last logs
    with pytest.raises(OSError):  # and was stopped when the command ended
        urllib.request.urlopen(t["api_server_url"] + "/health", timeout=60)
    # --no-reuse: no reused server (state file) and no release worker
    assert not state_file().exists()
    assert not (server_home / "sdc-worker.json").exists()
    assert not (server_home / "sdc-worker.log").exists()
    # the run's temporary server migrated the fresh database and marked it
    assert warm_database() and migrated_marker().is_file()

    # the next temporary server on the warm home skips the migrations
    # (PREFECT_SERVER_DATABASE_MIGRATE_ON_START=false), answers, and is reaped when stopped
    api = TemporaryAPI.start()
    assert api is not None and not api.migrates
    try:
        waited = api.wait(timeout=180)
        assert waited > 0
        with urllib.request.urlopen(api.url + "/health", timeout=60) as r:
            assert r.status == 200
        req = urllib.request.Request(api.url + "/flows/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:  # the database answers queries
            assert r.status == 200
        assert api.current_peak_rss_mb() > 20
        pid = api.process.pid
    finally:
        api.stop()
    assert api.process is None and api.peak_rss_mb > 20
    assert not Path(f"/proc/{pid}").exists()  # reaped, not a zombie
