"""One Prefect server and one Dask cluster for all the xdist workers of a run (tests/conftest.py
sections 4 and 5).

Under ``pytest -n N`` the controller process (which runs no test) starts them in
``pytest_configure``, before it starts the workers, and stops them when the run ends: the local
Prefect server (flows.server, in a ``PREFECT_HOME`` of the run, with the session's services
off) and a quiet ``LocalCluster``. The workers inherit the folder's path in
``SDC_TEST_SHARED_FOLDER`` (:data:`FOLDER_ENV`): each takes a run's lease on the server (its
idle stop waits while a lease is held) and connects to the cluster by its scheduler address.
One of each per worker cost three server starts (~5-12 CPU s each) and three clusters (~5 CPU
s each), each idling through the run (~0.6 and ~0.8 CPU s a minute), and each worker's first
releases used a temporary API while its own server came up. Under ``-n 0`` the session starts
its own (tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the run's shared folder (set by the controller, inherited by the workers)
FOLDER_ENV = "SDC_TEST_SHARED_FOLDER"
#: markers in the folder: the server answered (or not); the cluster's scheduler address
PREFECT_READY, PREFECT_FAILED = "prefect.ready", "prefect.failed"
DASK_ADDRESS, DASK_FAILED = "dask.address", "dask.failed"


def folder() -> Path | None:
    """The run's shared folder in a worker (None under ``-n 0`` or in the controller)."""
    raw = os.environ.get(FOLDER_ENV)
    return Path(raw) if raw else None


def prefect_home() -> Path | None:
    """The shared server's ``PREFECT_HOME`` when the controller started one."""
    base = folder()
    home = None if base is None else base / "prefect-home"
    return home if home is not None and home.is_dir() else None


def _mark(path: Path, text: str = "") -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def _wait_for(base: Path, ok: str, failed: str, timeout: float) -> str | None:
    """The text of ``base/ok`` once written; None if ``base/failed`` is, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (base / ok).is_file():
            return (base / ok).read_text()
        if (base / failed).is_file():
            return None
        time.sleep(0.05)
    return None


def wait_prefect(timeout: float = 330.0) -> bool:
    """Whether the shared server answered (waits for the controller's verdict)."""
    base = folder()
    return base is not None and _wait_for(base, PREFECT_READY, PREFECT_FAILED,
                                          timeout) is not None


def dask_address(timeout: float = 300.0) -> str | None:
    """The shared cluster's scheduler address (None: none was started, or it failed)."""
    base = folder()
    if base is None:
        return None
    return _wait_for(base, DASK_ADDRESS, DASK_FAILED, timeout)


class SharedCluster:
    """The worker's handle of the shared cluster: its address (what ``Client`` and
    ``engine.scheduler`` take); the cluster itself lives in the controller."""

    def __init__(self, address: str) -> None:
        self.scheduler_address = address


def start(config: Any, services_off: dict[str, str], quiet_cluster: dict[str, Any]) -> None:
    """In the controller of ``pytest -n N`` (N > 0): make the run's folder, start the Prefect
    server (unless ``SDC_TEST_SHARED_SERVER=0`` or ``PREFECT_API_URL`` is set) and the Dask
    cluster in the background, and stop both at the end of the run."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if getattr(config.option, "collectonly", False):
        return
    base = Path(tempfile.mkdtemp(prefix="sdc-test-shared-"))
    os.environ[FOLDER_ENV] = str(base)
    stops: list[Any] = []
    if (os.environ.get("SDC_TEST_SHARED_SERVER", "1") != "0"
            and not os.environ.get("PREFECT_API_URL")):
        stops.append(_start_prefect(base, services_off))
    stops.append(_start_dask(base, quiet_cluster))

    def stop() -> None:
        for fn in stops:
            with contextlib.suppress(Exception):
                fn()
        os.environ.pop(FOLDER_ENV, None)
        shutil.rmtree(base, ignore_errors=True)

    config.add_cleanup(stop)


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` for the block (earlier values back after it)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _start_prefect(base: Path, services_off: dict[str, str]) -> Any:
    """Launch the server now (its process starts before the workers do), wait for it in a
    thread; returns the function that stops it."""
    from flows.server import Launch, pinned_home, stop_server

    home = base / "prefect-home"
    home.mkdir(mode=0o700)
    launch = None
    try:
        with environ({**services_off, "PREFECT_HOME": str(home)}), pinned_home(home):
            launch = Launch(0, 10.0, "full")
    except Exception:  # the workers' runs use a temporary API, as without a server
        _mark(base / PREFECT_FAILED)

    def wait() -> None:
        try:
            with pinned_home(home):
                launch.wait(300)
            _mark(base / PREFECT_READY)
        except Exception:
            launch.abandon()
            _mark(base / PREFECT_FAILED)

    if launch is not None:
        threading.Thread(target=wait, daemon=True).start()

    def stop() -> None:
        if launch is not None:
            launch.stop()
        with pinned_home(home), contextlib.suppress(Exception):
            stop_server()

    return stop


def _start_dask(base: Path, quiet_cluster: dict[str, Any]) -> Any:
    """Start the ``LocalCluster`` (2 single-threaded worker processes, as ``engine: dask``'s
    default; quiet while idle) in a thread; returns the function that closes it."""
    made: dict[str, Any] = {}

    def run() -> None:
        try:
            import dask
            from distributed import LocalCluster

            from sdc.executors.dask import LOCAL_CLUSTER_CONFIG

            with dask.config.set({**LOCAL_CLUSTER_CONFIG, **quiet_cluster}):
                made["cluster"] = cluster = LocalCluster(
                    n_workers=2, threads_per_worker=1, processes=True,
                    dashboard_address=None, silence_logs=40)
            _mark(base / DASK_ADDRESS, cluster.scheduler_address)
        except Exception as e:  # noqa: BLE001 (each worker then starts its own)
            _mark(base / DASK_FAILED, repr(e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def stop() -> None:
        thread.join(300)
        cluster = made.get("cluster")
        if cluster is not None:
            cluster.close()

    return stop
