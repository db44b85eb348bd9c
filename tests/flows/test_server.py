"""``sdc server start|stop|status`` (flows.server) and the migration marker of flows.ephemeral."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.ephemeral import migrated_marker, warm_database
from flows.server import local_server, state_file

BIN = Path(sys.executable).parent


def test_marker_needs_the_database_and_this_version(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", raising=False)
    from importlib.metadata import version

    migrated_marker().write_text(f"prefect {version('prefect')}\n")
    assert not warm_database()  # no database file: it must be created (migrated)
    (tmp_path / "prefect.db").write_bytes(b"")
    assert warm_database()
    migrated_marker().write_text("prefect 0.0.1\n")  # another Prefect version migrated it
    assert not warm_database()
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://x/y")
    assert migrated_marker() is None and not warm_database()  # the user's database: never


def test_state_of_a_dead_server_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert local_server() is None
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    state_file().write_text(json.dumps({"pid": p.pid, "url": "http://127.0.0.1:9/api"}))
    assert local_server() is None
    state_file().write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:9/api"}))
    srv = local_server()
    assert srv is not None and not srv.healthy(timeout=0.5)


@pytest.mark.slow
@pytest.mark.e2e
def test_server_start_release_stop(tmp_path, make_small_job):
    """`sdc server start` runs a server that `sdc release` uses (no temporary API); `sdc
    server stop` ends it; nothing is left running."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               COLUMNS="200")
    sdc = str(BIN / "sdc")
    pid = None
    try:
        r = subprocess.run([sdc, "server", "start", "--port", str(port)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        pid = json.loads((tmp_path / "home" / "sdc-server.json").read_text())["pid"]
        assert (tmp_path / "home" / "sdc-server.json").stat().st_mode & 0o077 == 0
        cfg = make_small_job("srv", n=1000)
        r = subprocess.run([sdc, "release", str(cfg), "--timings"], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        t = json.loads(next(x for x in r.stdout.splitlines() if x.startswith("timings "))[8:])
        assert "api_server_url" not in t  # no temporary API: the running server was used
        assert subprocess.run([sdc, "server", "status"], env=env).returncode == 0
    finally:
        r = subprocess.run([sdc, "server", "stop"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert "stopped" in r.stdout
    assert pid is not None and not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert subprocess.run([sdc, "server", "status"], env=env).returncode == 1
