"""flows.client: sdc's Prefect clients share one TLS context per process, made by Prefect's
own rule (verified against PREFECT_API_SSL_CERT_FILE or certifi's bundle; none with
PREFECT_API_TLS_INSECURE_SKIP_VERIFY), and a release run's engines and Prefect's result store
take the run's one client instead of each making one (each parsed the whole CA bundle)."""

from __future__ import annotations

import ssl

import certifi
from conftest import run_cli
from prefect.settings import (
    PREFECT_API_SSL_CERT_FILE,
    PREFECT_API_TLS_INSECURE_SKIP_VERIFY,
    temporary_settings,
)


def test_one_tls_context_per_setting_as_prefect_makes_it(tmp_path) -> None:
    from flows.client import httpx_settings

    verified = httpx_settings()["verify"]
    assert httpx_settings()["verify"] is verified
    assert verified.verify_mode == ssl.CERT_REQUIRED and verified.check_hostname
    with temporary_settings({PREFECT_API_TLS_INSECURE_SKIP_VERIFY: True}):
        loose = httpx_settings()["verify"]
    assert loose is not verified
    assert loose.verify_mode == ssl.CERT_NONE and not loose.check_hostname
    own_ca = tmp_path / "ca.pem"
    own_ca.write_bytes(open(certifi.where(), "rb").read())
    with temporary_settings({PREFECT_API_SSL_CERT_FILE: str(own_ca)}):
        mine = httpx_settings()["verify"]
    assert mine is not verified and mine.verify_mode == ssl.CERT_REQUIRED
    assert httpx_settings()["verify"] is verified


def test_a_release_run_makes_one_prefect_client_and_no_tls_context(make_small_job,
                                                                   monkeypatch) -> None:
    import prefect.client.orchestration as orchestration

    assert run_cli("release", make_small_job("warm")).exit_code == 0
    made: list[object] = []
    loads: list[object] = []
    init = orchestration.SyncPrefectClient.__init__
    load = ssl.SSLContext.load_verify_locations

    def counted_init(self, *args, **kwargs):
        made.append(kwargs.get("httpx_settings"))
        init(self, *args, **kwargs)

    def counted_load(self, *args, **kwargs):
        loads.append(args)
        return load(self, *args, **kwargs)

    monkeypatch.setattr(orchestration.SyncPrefectClient, "__init__", counted_init)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted_load)
    res = run_cli("release", make_small_job("second"))
    assert res.exit_code == 0, res.text
    # the process's TLS context is made once; Prefect's log worker, started again for each
    # run of a process, makes its own client (and context) and takes no settings
    assert len(loads) <= 1, loads
    # the run's client (and the API health check's, when an API is configured): Prefect's
    # result store made three more before, one per read of the server's default storage
    assert 1 <= len(made) <= 2, made
    assert all(s is not None and isinstance(s["verify"], ssl.SSLContext) for s in made)
