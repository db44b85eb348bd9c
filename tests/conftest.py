"""Shared test fixtures.

Sections (add new fixtures to the section they belong to, or a new section at the end):

1. Paths: the repository, its demo data, the shared real data (``../shared/data``).
2. Prefect: ``prefect_harness``, one temporary Prefect API + database for the whole session,
   requested only by the few flow-level tests (everything else tests plain functions).
3. Release jobs in ``tmp_path``: ``make_repo_job`` (any config of ``configs/``),
   ``make_census_job`` (the demo config on the repo's census sample) and ``make_small_job``
   (a small synthetic file and config); all write outputs and seeds under ``tmp_path`` only.
4. The local Prefect server sdc starts: the session's own ``PREFECT_HOME`` and one reused
   server in it for every CLI run of the session; ``server_home`` for tests of the server.
5. One Dask cluster for the session (in-process Dask runs; ``own_dask_cluster`` opts out).
6. Logging: no handler left writing to a closed stream of an earlier ``CliRunner`` call.
7. Hypothesis tests: the already imported ``websockets`` / ``prefect`` modules draw from a
   private ``random.Random``, not the global state a strategy's draw is checked against.

Parallel runs (``make test``: pytest-xdist, ``-n 3 --dist loadgroup --no-loadscope-reorder``):
every session fixture is per worker (its own temp folder), except the local Prefect server
(one ``PREFECT_HOME`` and server for the run) and the Dask cluster, which xdist's controller
starts once for all the workers (tests/shared_services.py); a test writes only under its
``tmp_path``. Tests that must
run on one worker (a module-scoped release reused by several tests) carry
``pytest.mark.xdist_group(NAME)``; the work goes out longest group first (tests/durations.json).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

# what ``sdc`` sets before it imports Prefect (sdc.cli.main._root), set here before any test
# imports Prefect: no telemetry calls, and Prefect's console handler quiet (its INFO lines and
# task tracebacks are not the CLI's output); ``--debug`` output of a subprocess is unaffected.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
# a temporary Prefect API (a run before the session's server answers) on a machine busy with
# parallel workers: wait up to 5 minutes for it (sdc's default, 60 s, is for a user's run)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
# No terminal size in the environment, in this process and in every process it starts: pytest
# imports readline (its capture plugin), and GNU readline then exports COLUMNS=80 and LINES=24
# (the terminfo size of TERM, no terminal being attached) into the C environment; Python's
# os.environ does not see that, but pytest-xdist's workers (and any subprocess started with the
# inherited environment) get them as real variables: every CLI call of an xdist worker printed
# at 80 columns while `-n 0` printed at the plain width, and an assertion on a line that a long
# temporary path wrapped failed under `make test` only. A test wanting a width sets COLUMNS in
# its own call (``run_cli(columns=...)``, ``CliRunner().invoke(env={"COLUMNS": ...})``).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)

# ---------------------------------------------------------------------------------------------
# 1. paths
# ---------------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
CENSUS_CSV = REPO / "data_samples" / "census_sample.csv"
SHARED_DATA = REPO / ".." / "shared" / "data"
#: session fixtures of a helper module (tests/eusilc_helpers.py: one eusilc release)
pytest_plugins = ["eusilc_helpers"]


# ---------------------------------------------------------------------------------------------
# 2. Prefect
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def prefect_harness(_session_prefect_home: Path) -> Iterator[None]:
    """A Prefect API for the session's flow-level tests: the session's own local server (section
    4; this worker's ``PREFECT_HOME``) when it runs; else a throwaway API and database
    (Prefect's test harness, ~10 s). One server per worker instead of two: each costs 10-16
    CPU s to start and CPU in the background while it runs (docs/TESTING.md)."""
    url = _session_server_url()
    if url is not None:
        yield from _api_of(url)
        return
    from prefect.testing.utilities import prefect_test_harness

    # the harness's server subprocess inherits this: no telemetry calls (and no noisy errors)
    old = os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    try:
        with prefect_test_harness(server_startup_timeout=300):
            yield
    finally:
        if old is None:
            os.environ.pop("PREFECT_SERVER_ANALYTICS_ENABLED", None)
        else:
            os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = old


def _api_of(url: str) -> Iterator[None]:
    """``PREFECT_API_URL`` set to ``url`` in this process, as Prefect's harness sets it (also as
    the process-global settings context)."""
    import prefect.context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}), \
            prefect.context._temporary_global_settings_context(
                prefect.context.get_settings_context()):
        yield
        _drain_prefect_workers()


def _drain_prefect_workers() -> None:
    """Send the queued logs and events before the API goes (as Prefect's harness does)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        import inspect

        try:
            result = APILogWorker.instance().drain()
            if inspect.isawaitable(result):
                await result
        except RuntimeError:  # never started
            pass
        result = EventsWorker.drain_all()
        if inspect.isawaitable(result):
            await result

    run_coro_as_sync(drain())


# ---------------------------------------------------------------------------------------------
# 3. release jobs in tmp_path
# ---------------------------------------------------------------------------------------------
def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _deep_update(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` merged into ``base``; a value of ``None`` deletes the key."""
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


JobMaker = Callable[..., Path]


def run_cli(*args: Any, columns: int = 1000) -> Any:
    """``sdc ARGS`` in-process (typer's ``CliRunner``); the result with ``.text``: stdout +
    stderr, whitespace collapsed (rich wraps long lines). ``from conftest import run_cli``."""
    from typer.testing import CliRunner

    from sdc.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})
    result.text = " ".join((result.stdout + result.stderr).split())
    return result


def relocate_config(src: Path, tmp_path: Path, name: str | None = None,
                    **changes: Any) -> Path:
    """Copy the repo config ``src`` to ``tmp_path/configs/``: its input and hierarchy paths made
    absolute (as they resolve from ``src``'s folder), its seed file and release folder moved
    under ``tmp_path``. ``changes`` are merged into the YAML (``None`` deletes a key)."""
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    name = name or data["name"]
    base = src.resolve().parent
    data["name"] = name
    data["input"]["path"] = str((base / data["input"]["path"]).resolve())
    for rule in (data.get("partition") or {}).values():
        if isinstance(rule, dict) and "hierarchy" in rule:
            rule["hierarchy"] = str((base / rule["hierarchy"]).resolve())
    data["seed"] = {"file": str(tmp_path / "secrets" / f"{name}.seed")}
    data["output"] = dict(data.get("output") or {}, dir=str(tmp_path / "releases" / name))
    data = _deep_update(data, changes)
    return write_yaml(tmp_path / "configs" / f"{name}.yaml", data)


@pytest.fixture
def make_repo_job(tmp_path: Path) -> JobMaker:
    """``make_repo_job("adult.yaml", name=None, **changes) -> config path``: a config from
    ``configs/`` relocated into ``tmp_path`` (see :func:`relocate_config`)."""

    def make(filename: str, name: str | None = None, **changes: Any) -> Path:
        return relocate_config(CONFIGS / filename, tmp_path, name, **changes)

    return make


@pytest.fixture
def make_census_job(tmp_path: Path) -> JobMaker:
    """``make_census_job(name="census-demo", **changes) -> config path``: the demo config on
    the repo's ``data_samples/census_sample.csv``, seed file and release under ``tmp_path``."""

    def make(name: str = "census-demo", **changes: Any) -> Path:
        return relocate_config(CONFIGS / "census_demo.yaml", tmp_path, name, **changes)

    return make


#: a fixed series seed for tests of a release series (a 128-bit integer, as a seed file holds)
SERIES_SEED = 0x2026_1206_5DC5_E21E_0000_0000_0000_0001


def series_seed_file(path: Path, value: int = SERIES_SEED) -> Path:
    """Write the seed file ``path`` (mode 0600, parent 0700) holding ``value``: a test of a
    release series with a fixed seed. The series certificate is measured on one draw of the
    releases (its class test flags a class whose rate is exactly xi with probability ~2.3%),
    so a seed file the first release drew at random made such tests fail now and then (the
    linking intruder's rate 0.4681 over 188 targets against the 2-SE bound 0.4663, a full run
    of 2026-12-08): the same seed, the same figures, every run."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(f"{value}\n", encoding="ascii")
    path.chmod(0o600)
    return path


def small_frame(n: int = 3000, seed: int = 7) -> pd.DataFrame:
    """A small synthetic microdata file: id, name, 4 key variables, income, weight."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.char.add("R", np.char.zfill(np.arange(n).astype(str), 6)),
        "name": np.char.add("person ", np.arange(n).astype(str)),
        "sex": rng.integers(1, 3, n),
        "age": rng.integers(0, 91, n),
        "race": rng.choice([1, 2, 3], n, p=[0.7, 0.2, 0.1]),
        "region": rng.integers(1, 6, n),
        "income": rng.gamma(2.0, 20000.0, n).round(0).astype(np.int64),
        "weight": rng.integers(50, 300, n),
    })


@pytest.fixture
def make_small_job(tmp_path: Path) -> JobMaker:
    """``make_small_job(name="small", n=3000, frame=None, **changes) -> config path``.

    Writes ``tmp_path/data/<name>.csv`` (``small_frame(n)`` unless ``frame`` is given) and a
    config releasing it into ``tmp_path/releases/<name>`` with an integer seed.
    """

    def make(name: str = "small", n: int = 3000, frame: pd.DataFrame | None = None,
             **changes: Any) -> Path:
        data_path = tmp_path / "data" / f"{name}.csv"
        data_path.parent.mkdir(parents=True, exist_ok=True)
        (small_frame(n) if frame is None else frame).to_csv(data_path, index=False)
        config = {
            "name": name,
            "input": {"path": str(data_path), "format": "csv", "id_column": "id",
                      "drop": ["name"], "weight": "weight"},
            "key_variables": {
                "sex": {"categories": [1, 2], "labels": {1: "Male", 2: "Female"}},
                "age": {"range": [0, 90]},
                "race": {"categories": [1, 2, 3], "labels": {1: "White", 2: "Black",
                                                             3: "Other"}},
                "region": {"categories": [1, 2, 3, 4, 5]},
            },
            "partition": {"sex": "as_is", "age": {"bands": [0, 30, 60]}},
            "risk": {"xi": 0.395, "theta": "theorem", "small_blocks": "merge"},
            "seed": 20260101,
            "output": {"dir": str(tmp_path / "releases" / name), "formats": ["parquet", "csv"]},
        }
        return write_yaml(tmp_path / "configs" / f"{name}.yaml", _deep_update(config, changes))

    return make


# ---------------------------------------------------------------------------------------------
# 4. the local Prefect server sdc starts (flows.server): none is left running by a test
# ---------------------------------------------------------------------------------------------
#: a session of at least this many tests starts one local Prefect server for its CLI runs
SHARED_SERVER_MIN_TESTS = 30


@pytest.fixture(scope="session", autouse=True)
def _session_prefect_home(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own ``PREFECT_HOME`` (never the user's), and in it one local Prefect
    server (flows.server) that every ``sdc release`` of the session without a Prefect API
    reuses, in-process or in a subprocess: instead of a temporary API per run (5-10 s each).
    Started in the background when the session holds >= ``SHARED_SERVER_MIN_TESTS`` tests
    (runs before it answers use a temporary API); stopped at the end (and by itself after 10
    idle minutes should the session die). ``SDC_SERVER_IDLE_MINUTES=0`` for the session: a
    test run in another ``PREFECT_HOME`` never starts a server that outlives it; tests of
    the reused server set it themselves in their own home (``server_home``).
    Under xdist the home and server are the run's, shared by all the workers: the
    controller starts the server before the workers (tests/shared_services.py), each
    worker holds a lease on it, and the controller stops it at the end.
    ``SDC_TEST_SHARED_SERVER=0`` turns the shared server off."""
    import contextlib
    import os
    import threading

    import shared_services

    shared = shared_services.prefect_home()  # the run's server, started by xdist's controller
    home = shared or tmp_path_factory.mktemp("prefect-home")
    home.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("PREFECT_HOME", "SDC_SERVER_IDLE_MINUTES")}
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["SDC_SERVER_IDLE_MINUTES"] = "0"
    launch = None
    if shared is not None:
        _SESSION["ready"] = threading.Event()
        threading.Thread(target=_lease_shared, args=(shared,), daemon=True).start()
    elif (len(request.session.items) >= SHARED_SERVER_MIN_TESTS
            and os.environ.get("SDC_TEST_SHARED_SERVER", "1") != "0"
            and not os.environ.get("PREFECT_API_URL")):
        from flows.server import Launch

        with contextlib.suppress(Exception), _environ(SESSION_SERVER_SERVICES_OFF):
            launch = Launch(0, 10.0, "full")
            _SESSION["ready"] = threading.Event()
            threading.Thread(target=_wait_quietly, args=(launch,), daemon=True).start()
    try:
        yield home
    finally:
        os.environ["PREFECT_HOME"] = str(home)
        from flows.server import stop_server

        lease = _SESSION.pop("lease", None)
        if lease is not None:
            lease.close()
        if launch is not None:
            launch.stop()
        if shared is None:  # the run's shared server: the controller stops it
            with contextlib.suppress(Exception):
                stop_server()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: Prefect server services the session's server does not run (its environment only: a server
#: a test starts in a home of its own keeps Prefect's defaults). The tests release against it
#: and read back flow runs, states, logs, artifacts and deployments, all written by the API
#: itself; these services act on events (the task run recorder, the event persister and
#: logger) or on a clock (schedules, late runs, pause expirations, leases, cancellation, worker
#: health). Server CPU of a small in-process `sdc release`: 0.265 -> 0.11 s (the task run
#: recorder ~0.09 s of it), idle 1.0 -> 0.56 s per minute; ~400 releases of a full run reach
#: the session servers. A test that reads task runs (the recorder's) or needs the scheduler
#: starts a server with all services: ``full_prefect_server``.
SESSION_SERVER_SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
    for name in ("TASK_RUN_RECORDER", "EVENT_PERSISTER", "EVENT_LOGGER", "TRIGGERS",
                 "SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP",
                 "PAUSE_EXPIRATIONS", "REPOSSESSOR", "CLEANUP_RECONCILER")}


def _environ(values: dict[str, str]) -> Any:
    """``values`` set in ``os.environ`` for the block (``shared_services.environ``)."""
    import shared_services

    return shared_services.environ(values)


@pytest.fixture
def full_prefect_server(server_home: Path) -> Iterator[None]:
    """A Prefect server with all its services (the session's runs without some:
    ``SESSION_SERVER_SERVICES_OFF``) in the test's own home, its API set as the session's
    is by ``prefect_harness``; stopped at the end (``server_home``)."""
    from flows.server import Launch

    launch = Launch(0, None, "full")
    try:
        server = launch.wait(300)
        # the process's events client is Prefect's singleton, made for the API of this
        # process's earlier runs (the session's server): drained and stopped, the run's
        # events go to this server, whose task run recorder makes its task runs of them
        _drain_prefect_workers()
        yield from _api_of(server.url)
    finally:
        launch.stop()


#: the session's server (section 4): "ready" set once it answered or failed; "lease": the
#: session's lease on it (``flows.server.Reuse``) when it answered
_SESSION: dict[str, Any] = {}


def _session_server_url() -> str | None:
    """The URL of the session's local server once it answers; None when none was started or it
    did not come up."""
    ready = _SESSION.get("ready")
    if ready is None:
        return None
    ready.wait(330)
    lease = _SESSION.get("lease")
    return None if lease is None else lease.server.url


def _wait_quietly(launch: Any) -> None:
    """Wait for the session's server, then hold a run's lease on it until the session ends:
    its idle stop (10 minutes without a request) waits while a lease is held. Without it the
    server stopped while the first, longest tests ran on other APIs, and every later CLI run
    started a temporary API of its own (5-9 s each)."""
    from flows.server import acquire_reused_server, pinned_home

    try:
        # in the session's home, not $PREFECT_HOME of the moment: a test that set its own home
        # (server_home) while this thread waited made the session lease that test's server,
        # and once it stopped every later CLI run of the worker exited 2 ("PREFECT_API_URL
        # is set to ..., but no Prefect server answers there": 83 failures in one run)
        with pinned_home(launch.home):
            launch.wait(300)
            _SESSION["lease"] = acquire_reused_server(10.0, start=False)
    except Exception:  # the session's runs use a temporary API, as without it
        launch.abandon()
    finally:
        _SESSION["ready"].set()


def _lease_shared(home: Path) -> None:
    """Hold a run's lease on the run's shared server (``shared_services``; the controller
    started it in ``home``) until the session ends, once it answers."""
    import shared_services

    from flows.server import acquire_reused_server, pinned_home

    try:
        if shared_services.wait_prefect():
            with pinned_home(home):
                _SESSION["lease"] = acquire_reused_server(10.0, start=False)
    finally:
        _SESSION["ready"].set()


@pytest.fixture
def server_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``PREFECT_HOME`` of the test's own (also for subprocesses): any server sdc starts
    there is stopped at teardown (the process recorded in its state file, and any process
    whose state file a test removed: every pid listed in ``started_pids`` of the home)."""
    import os
    import signal

    home = tmp_path / "prefect-home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    yield home
    from flows.server import process_start, stop_server

    stop_server()
    log = home / "sdc-server.log"
    pids = set()
    if log.exists():  # every server started in this home logs "sdc: server pid N ..."
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("sdc: server pid "):
                pids.add(int(line.split()[3]))
    for pid in pids:
        now = process_start(pid)
        if now is not None and now[1] not in "ZX":
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"flows.server_process" in cmd and str(home).encode() in Path(
                    f"/proc/{pid}/environ").read_bytes():
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------
# 5. one Dask cluster for the session
# ---------------------------------------------------------------------------------------------
#: environment variables the Dask executor's test hooks read inside the workers: a run with one
#: of them set gets a LocalCluster of its own (started now, with the variable)
_WORKER_HOOKS = ("SDC_DASK_KILL_AT", "SDC_CHECKPOINT_DIR", "SDC_PAUSE_AT")


#: the session cluster's periodic work while idle (most of a test run): memory checks every 2 s
#: instead of 100 ms, no work stealing (2 workers, tasks of one release), the event-loop and
#: system monitors every 2 s / 10 s. Idle CPU of the scheduler + 2 workers per 30 s: 1.08 ->
#: 0.42 s (one cluster per xdist worker, ~13 minutes: ~50 CPU s less per run). Not the
#: product's: a user's cluster lives for one release (sdc.executors.dask.LOCAL_CLUSTER_CONFIG).
QUIET_CLUSTER_CONFIG = {"distributed.worker.memory.monitor-interval": "2s",
                        "distributed.scheduler.work-stealing": False,
                        "distributed.admin.tick.interval": "2s",
                        "distributed.admin.system-monitor.interval": "10s"}


@pytest.fixture(scope="session")
def dask_cluster() -> Iterator[Any]:
    """One ``LocalCluster`` (2 single-threaded worker processes, as ``engine: dask``'s default)
    for the whole run, quiet while idle (:data:`QUIET_CLUSTER_CONFIG`): under xdist the one
    its controller started for all the workers (tests/shared_services.py; this worker gets its
    address, ``.scheduler_address``); under ``-n 0`` started on first use (~4-9 s on this
    machine) and closed at the end."""
    import shared_services

    address = shared_services.dask_address()  # the run's cluster, in xdist's controller
    if address is not None:
        yield shared_services.SharedCluster(address)
        return
    import dask
    from distributed import LocalCluster

    from sdc.executors.dask import LOCAL_CLUSTER_CONFIG

    with dask.config.set({**LOCAL_CLUSTER_CONFIG, **QUIET_CLUSTER_CONFIG}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(autouse=True)
def _shared_dask_cluster(request: pytest.FixtureRequest,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process Dask releases without ``engine.scheduler`` run on the session's
    :func:`dask_cluster` instead of starting and closing a LocalCluster each (9 s of a 13 s
    case). The bytes do not depend on the cluster (the contract suite checks every executor
    against the others). Not for: a test marked ``own_dask_cluster``, a run with a worker test
    hook set (``_WORKER_HOOKS``), a config naming a scheduler, and runs in a subprocess; these
    start their own cluster as before (so that path stays tested)."""
    if request.node.get_closest_marker("own_dask_cluster"):
        return
    import os
    from contextlib import contextmanager

    import sdc.executors.dask as dask_executor

    original = dask_executor.dask_client

    @contextmanager
    def shared_client(spec: Any) -> Iterator[Any]:
        if spec.scheduler or any(os.environ.get(v) for v in _WORKER_HOOKS):
            with original(spec) as client:
                yield client
            return
        from distributed import Client

        client = Client(request.getfixturevalue("dask_cluster").scheduler_address)
        try:
            yield client
        finally:
            client.close()

    monkeypatch.setattr(dask_executor, "dask_client", shared_client)


# ---------------------------------------------------------------------------------------------
# 5b. parallel runs (pytest-xdist): tests sharing an expensive fixture stay on one worker
# ---------------------------------------------------------------------------------------------
#: session fixtures every worker has anyway (cheap per worker, or needed by most tests)
_PER_WORKER_FIXTURES = {"prefect_harness", "prefect_api", "cli", "dask_cluster",
                        "forked_sdc", "_session_prefect_home", "tmp_path_factory", "worker_id",
                        "testrun_uid"}


def pytest_configure(config: pytest.Config) -> None:
    import shared_services

    _compile_before_the_workers(config)
    # xdist's controller: one Prefect server and one Dask cluster for all its workers
    shared_services.start(config, SESSION_SERVER_SERVICES_OFF, QUIET_CLUSTER_CONFIG)
    _build_each_cli_once()


def _build_each_cli_once() -> None:
    """Typer's ``CliRunner.invoke(app)`` builds the app's click command from every command's
    signature at each call (~23 ms for sdc's CLI); the tests' ~1,000 CLI runs in-process
    (``run_cli`` and every ``CliRunner``) now use one command object per app, as the
    product's worker does for its forked runs (``sdc.cli.worker._build_cli_once``). Click
    parses each call afresh (a new context); the object only carries the signatures."""
    import typer.testing

    make = typer.testing._get_command
    built: dict[int, tuple[Any, Any]] = {}

    def get_command(app: Any) -> Any:
        made = built.get(id(app))
        if made is None or made[0] is not app:
            made = built[id(app)] = (app, make(app))
        return made[1]

    typer.testing._get_command = get_command


def _compile_before_the_workers(config: pytest.Config) -> None:
    """Under xdist, in the controller before it starts the workers (``make test``, bytecode
    writing on): compile sdc/, flows/ and the tests' helpers, and cache pytest's assertion
    rewriting of every test module and conftest. In a fresh clone the workers start together,
    find no cache and each did all of it again (~6.5 CPU s of rewriting and ~2 s of compiling
    per worker); now they read what the controller wrote once. The same code objects either
    way (pytest checks its cache against the source's hash, Python against the mtime)."""
    if (hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
            or sys.dont_write_bytecode):
        return
    import compileall

    from _pytest.assertion import rewrite

    state = config.stash.get(rewrite.assertstate_key, None)
    if state is None:  # --assert=plain: nothing is rewritten
        return
    tests = REPO / "tests"
    for folder in (REPO / "sdc", REPO / "flows", tests):
        compileall.compile_dir(folder, quiet=2, rx=re.compile(r"(^|/)(test_[^/]*|conftest)\.py$"))
    for fn in sorted(tests.rglob("*.py")):
        if not (fn.name == "conftest.py" or fn.name.startswith("test_")):
            continue
        cache_dir = rewrite.get_cache_dir(fn)
        pyc = cache_dir / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(fn, pyc) is not None:
            continue
        if not rewrite.try_makedirs(cache_dir):
            return
        try:
            source_hash, co = rewrite._rewrite_test(fn, config)
        except SyntaxError:  # the worker's collection reports it, as without this
            continue
        rewrite._write_pyc(state, co, source_hash, pyc)


#: the xdist group of the tests marked ``waits`` (they mostly sleep: a real one-minute cron, a
#: server killed and awaited, a Dask worker killed, a connection timeout): one worker runs them
#: one after another while the others keep both cores busy. Ordered by their wall time they
#: went out first together (the longest units first) and two or three slept at once, leaving
#: cores idle; one at a time, they fill the third worker's share of the cores' idle time.
WAITING_GROUP = "waits"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``: a test marked ``waits`` joins :data:`WAITING_GROUP`; a test
    that uses a module- or session-scoped fixture of its own (a release made once and checked
    by several tests) joins the group of that fixture (its module, or the session fixture's
    name), so that the fixture is made on one worker only; a test already marked
    ``xdist_group`` keeps its group. Runs before xdist reads the marks (tryfirst)."""
    if not getattr(config.option, "loadgroup", False):  # set by xdist in its workers
        return
    for item in items:
        if item.get_closest_marker("waits") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(WAITING_GROUP))
        if item.get_closest_marker("xdist_group"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        for name in getattr(item, "fixturenames", ()):
            defs = info.name2fixturedefs.get(name) if info else None
            if not defs or name in _PER_WORKER_FIXTURES:
                continue
            scope = defs[-1].scope
            if scope in ("module", "package", "class"):
                item.add_marker(pytest.mark.xdist_group(f"module:{item.module.__name__}"))
                break
            if scope == "session":
                item.add_marker(pytest.mark.xdist_group(f"session:{name}"))
                break
    longest_first(items)
    for item in items:
        _group_suffix(item)


def _group_suffix(item: pytest.Item) -> None:
    """Give ``item``'s node id the ``@GROUP`` suffix xdist's loadgroup scheduler groups by.
    xdist (3.8) appends it by setting ``item._nodeid``, which pytest >= 9.2 no longer reads
    (``Node.nodeid`` is ``str(item._id)``): without this, every test was its own unit, and the
    tests of a module fixture went to different workers, each making the fixture again (the
    calibrated person stage of tests/method/test_household_weights.py made 3 times). Where xdist's
    own suffix works (older pytest), the id is left to it."""
    group = item.get_closest_marker("xdist_group")
    ident = getattr(item, "_id", None)
    if group is None or ident is None or "@" in item.nodeid:
        return
    name = group.args[0] if group.args else group.kwargs.get("name", "default")
    item._id = type(ident).parse(f"{item.nodeid}@{name}")


def longest_first(items: list[pytest.Item]) -> None:
    """Order ``items`` by work unit (an ``xdist_group``, else the test alone), the longest unit
    first by the seconds in tests/durations.json, ties in collection order. xdist hands the
    units out in this order (``make test`` passes ``--no-loadscope-reorder``; xdist's own
    order is by number of tests, which started the longest single tests last, each running
    alone at the end while the other workers idled). Only the order changes."""
    from tests.durations import DEFAULT_SECONDS, load

    seconds = load()
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        key = f"@{group.args[0] if group.args else group.kwargs.get('name')}" if group else ""
        units.setdefault(key or item.nodeid, []).append(item)
    weight = {k: sum(seconds.get(i.nodeid, DEFAULT_SECONDS) for i in v) for k, v in units.items()}
    order = sorted(units, key=lambda k: -weight[k])  # stable: ties keep the collection order
    items[:] = [item for k in order for item in units[k]]


# ---------------------------------------------------------------------------------------------
# 6. logging: no handler bound to a closed stream
# ---------------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_handler_on_a_closed_stream() -> Iterator[None]:
    """A logging handler created inside an earlier ``CliRunner`` call (Prefect sets up its
    handlers at the first flow run) writes to that call's stream, closed since: its next
    record prints "--- Logging error ---" and a traceback into whatever stderr the current
    test captures, failing a test that asserts on a clean output only after some other test
    ran first (an order dependence). Such streams are pointed back at the real stderr before
    and after every test."""
    _reopen_closed_handler_streams()
    yield
    _reopen_closed_handler_streams()


def _reopen_closed_handler_streams() -> None:
    import logging
    import sys

    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for lg in loggers:
        for h in lg.handlers:
            stream = getattr(h, "stream", None)
            if stream is not None and getattr(stream, "closed", False):
                h.stream = sys.__stderr__
                console = getattr(h, "console", None)  # Prefect's handler prints with rich
                if console is not None and hasattr(console, "file"):
                    console.file = sys.__stderr__


# ---------------------------------------------------------------------------------------------
# 7. Hypothesis: library threads off the global random state
# ---------------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _library_threads_off_the_global_random(request: pytest.FixtureRequest,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hypothesis test warns (HypothesisDeprecationWarning, an error in a later major
    version) when the global ``random`` state changes while a strategy draws. sdc never uses
    it, but threads left in the worker by earlier tests do: the websockets keepalive of
    Prefect's events client pings every 20 s with ``random.getrandbits(32)`` on its event-loop
    thread, and Prefect's ephemeral server picks its port with ``random.choice`` (found by
    wrapping the ``random`` functions and logging calls from other threads). For a Hypothesis
    test, the already imported ``websockets`` and ``prefect`` modules that use the global
    ``random`` get a private ``random.Random`` instead (the same functions, their own state)."""
    if not getattr(getattr(request, "function", None), "is_hypothesis_test", False):
        return
    import random

    own = random.Random()
    for name, module in list(sys.modules.items()):
        if (name.split(".")[0] in ("websockets", "prefect")
                and getattr(module, "random", None) is random):
            monkeypatch.setattr(module, "random", own)


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``mount_tmpfs("64k")``: a tmpfs of that size under ``tmp_path`` (a real full disk for the
    ENOSPC tests; root only: skips where it cannot be mounted), unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        mnt = tmp_path / f"tiny{len(mounted)}"
        mnt.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()})")
        mounted.append(mnt)
        return mnt

    try:
        yield mount
    finally:
        for mnt in mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


# ---------------------------------------------------------------------------------------------
# 7. the large sorts: numpy's AVX-512 sort and the split sort (sdc.method.sorting.SIMD_SORT)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(params=[True, False], ids=["numpy-sort", "split-sort"])
def both_sorts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The test runs with each of the two ways to sort 64-bit arrays (the host picks one;
    the results must be the same)."""
    import sdc.method.sorting
    import sdc.pipeline.order

    monkeypatch.setattr(sdc.method.sorting, "SIMD_SORT", request.param)
    monkeypatch.setattr(sdc.pipeline.order, "SIMD_SORT", request.param)
    return request.param
