"""sdc's Prefect clients share one TLS context per process.

Prefect builds a new ``ssl.SSLContext`` for every client it makes (``SyncPrefectClient``:
``ssl.create_default_context(cafile=...)`` parses the whole CA bundle, ~16-20 CPU ms), and
a release made two (the API health check and the flow run's client). A long-lived process
(the release worker, an embedding program, the test suite) made two per run. Here the
context is made once per (``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``,
``PREFECT_API_SSL_CERT_FILE``) as Prefect itself would make it, and handed to Prefect as
``httpx_settings={"verify": context}``, which Prefect uses as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["client_context", "httpx_settings"]

#: (skip verify, CA file) -> the context Prefect would build for them
_contexts: dict[tuple[bool, str], Any] = {}


def httpx_settings() -> dict[str, Any]:
    """``{"verify": context}`` for ``get_client``: the TLS context of the current settings,
    made once per process (Prefect's own rule: no verification with
    ``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``, else the CA file ``PREFECT_API_SSL_CERT_FILE`` or
    certifi's bundle)."""
    import ssl

    import certifi
    from prefect.settings import PREFECT_API_SSL_CERT_FILE, PREFECT_API_TLS_INSECURE_SKIP_VERIFY

    skip = bool(PREFECT_API_TLS_INSECURE_SKIP_VERIFY.value())
    cafile = "" if skip else str(PREFECT_API_SSL_CERT_FILE.value() or certifi.where())
    ctx = _contexts.get((skip, cafile))
    if ctx is None:
        if skip:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=cafile)
        _contexts[(skip, cafile)] = ctx
    return {"verify": ctx}


@contextmanager
def client_context() -> Iterator[Any]:
    """Prefect's sync client context for one run, its client made with the process's TLS
    context: the flow and task engines take the client of an open context
    (``SyncClientContext.get_or_create``) and so does every ``get_client(sync_client=True)``
    whose ``httpx_settings`` equal the context's. The context is built without ``__init__``
    (``model_construct``), so that it records no settings (None, as Prefect's own): its client
    is configured as Prefect's default one would be (the same TLS rule), and Prefect's calls
    without settings (the result store's, three per run) take it instead of each making a
    client of their own."""
    from prefect.client.orchestration import get_client
    from prefect.context import SyncClientContext

    client = get_client(sync_client=True, httpx_settings=httpx_settings())
    with SyncClientContext.model_construct(client=client) as ctx:
        yield ctx
