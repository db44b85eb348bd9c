"""Fixtures of the reliability suite.

- ``prefect_api``: one Prefect API for the session. It reuses the root conftest's
  ``prefect_harness`` when there is one (one server per test session), else starts its own
  ``prefect_test_harness``. Subprocess runs of ``sdc`` get its URL in ``PREFECT_API_URL`` so
  that they do not start (and, when SIGKILLed, orphan) an embedded server of their own.
- ``cli``: runs ``sdc ...`` in-process with typer's ``CliRunner`` against that API and returns
  (exit code, output with whitespace collapsed: rich wraps long lines).
- ``job``: a :class:`JobBuilder` under ``tmp_path``: a small synthetic microdata file and its
  config as a dict, both editable before ``job.write()`` writes them.

Everything is written under ``tmp_path``; the census sample and the demo config are read from
the repository.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CENSUS_CSV = REPO / "data_samples" / "census_sample.csv"
CENSUS_YAML = REPO / "configs" / "census_demo.yaml"
SDC_BIN = REPO / ".venv" / "bin" / "sdc"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


# ---------------------------------------------------------------------------------------------
# Prefect and the CLI
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def prefect_api(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of the session's Prefect API (see the module docstring)."""
    import prefect.settings

    try:
        request.getfixturevalue("prefect_harness")
    except pytest.FixtureLookupError:
        from prefect.testing.utilities import prefect_test_harness

        with prefect_test_harness(server_startup_timeout=300):
            yield str(prefect.settings.PREFECT_API_URL.value())
        return
    yield str(prefect.settings.PREFECT_API_URL.value())


def squash(text: str) -> str:
    """Collapse whitespace runs (rich wraps long lines at spaces) to one space."""
    return re.sub(r"\s+", " ", text).strip()


def contains(output: str, fragment: str) -> bool:
    """``fragment`` occurs in ``output`` up to whitespace; rich may also fold a long word."""
    if squash(fragment) in squash(output):
        return True
    return re.sub(r"\s+", "", fragment) in re.sub(r"\s+", "", output)


@dataclass
class CliResult:
    exit_code: int
    output: str          # stdout + stderr, as printed

    @property
    def text(self) -> str:
        return squash(self.output)


def _quiet_prefect_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``sdc`` does before importing Prefect (console log level CRITICAL), for a Prefect
    already imported by the test session; and a console handler created inside an earlier
    CliRunner call (bound to its stream, closed since) is pointed back at the real stderr."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()  # create the handlers now, outside any CliRunner call
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, PrefectConsoleHandler):
                if getattr(h.stream, "closed", False):
                    h.stream = sys.__stderr__
                    h.console.file = sys.__stderr__
                monkeypatch.setattr(h, "level", logging.CRITICAL + 1)


@pytest.fixture(scope="session")
def cli(prefect_api: str) -> Iterator[Any]:
    """``cli("release", path, "--force") -> CliResult`` (in-process, typer's CliRunner)."""
    from typer.testing import CliRunner

    from sdc.cli.main import app

    mp = pytest.MonkeyPatch()
    _quiet_prefect_console(mp)
    runner = CliRunner()

    def run(*args: str | Path) -> CliResult:
        res = runner.invoke(app, [str(a) for a in args], catch_exceptions=False,
                            env={"COLUMNS": "1000"})  # long temporary paths never wrap
        _quiet_prefect_console(mp)
        return CliResult(res.exit_code, res.output)

    yield run
    mp.undo()


def sdc_env(prefect_api: str, **extra: str) -> dict[str, str]:
    """Environment of an ``sdc`` subprocess that uses the session's Prefect API."""
    env = dict(os.environ)
    env.update({"PREFECT_API_URL": prefect_api, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "COLUMNS": "1000"})
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def forked_sdc(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``sdc`` runs forked from one process of this worker that imported the CLI once
    (:class:`tests.reliability._fork_sdc.ForkedSdc`), using the session's Prefect API."""
    from ._fork_sdc import ForkedSdc

    forks = ForkedSdc(sdc_env(prefect_api), tmp_path_factory.mktemp("forks") / "server.log")
    yield forks
    forks.close()


def run_sdc(prefect_api: str, *args: str | Path, timeout: float = 300,
            **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SDC_BIN), *map(str, args)], env=sdc_env(prefect_api, **env),
                          capture_output=True, text=True, timeout=timeout, check=False)


# ---------------------------------------------------------------------------------------------
# a small release job
# ---------------------------------------------------------------------------------------------
def base_frame(n: int = 600, seed: int = 11) -> pd.DataFrame:
    """Synthetic microdata: id, name (a direct identifier, dropped), 4 key variables, income,
    weight. 600 records over 2 x 91 x 3 x 5 cells: plenty of singletons and doubletons."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.char.add("R", np.char.zfill((rng.permutation(n) + 1).astype(str), 6)),
        "name": np.char.add(np.char.add("Person ", np.arange(n).astype(str)),
                            np.char.add(" Surname", (np.arange(n) % 97).astype(str))),
        "sex": rng.integers(1, 3, n),
        "age": rng.integers(0, 91, n),
        "race": rng.choice([1, 2, 3], n, p=[0.7, 0.2, 0.1]),
        "region": rng.integers(1, 6, n),
        "income": rng.gamma(2.0, 20000.0, n).round(0).astype(np.int64),
        "weight": rng.integers(50, 300, n),
    })


def base_config(name: str = "job") -> dict[str, Any]:
    return {
        "name": name,
        "input": {"path": "data/input.csv", "format": "csv", "id_column": "id",
                  "drop": ["name"], "weight": "weight"},
        "key_variables": {
            "sex": {"categories": [1, 2], "labels": {1: "Male", 2: "Female"}},
            "age": {"range": [0, 90]},
            "race": {"categories": [1, 2, 3], "labels": {1: "White", 2: "Black", 3: "Other"}},
            "region": {"categories": [1, 2, 3, 4, 5]},
        },
        "partition": {"sex": "as_is", "age": {"bands": [0, 30, 60]},
                      "race": {"groups": {"white": [1], "black": [2], "other": [3]}}},
        "risk": {"xi": 0.395, "theta": "theorem", "small_blocks": "merge"},
        "seed": {"file": "secrets/job.seed"},
        "output": {"dir": "releases/job", "formats": ["parquet", "csv"]},
    }


class JobBuilder:
    """A release job under ``root``: ``frame`` and ``config`` (a dict) are edited by a test,
    then ``write()`` writes ``root/data/input.csv`` (unless ``data_bytes`` / ``skip_data``)
    and ``root/job.yaml`` (unless ``config_text``) and returns the config path."""

    def __init__(self, root: Path, seed_value: int = 202601012026010120260101) -> None:
        self.root = root
        self.frame = base_frame()
        self.config = base_config()
        self.data_bytes: bytes | None = None
        self.config_text: str | None = None
        self.skip_data = False
        self.seed_value = seed_value
        self.config_path = root / "job.yaml"
        self.cleanup: list[Any] = []  # callables run after the CLI (e.g. chattr -i)

    @property
    def data_path(self) -> Path:
        return self.root / self.config["input"]["path"]

    @property
    def out_dir(self) -> Path:
        return self.root / self.config["output"]["dir"]

    @property
    def seed_path(self) -> Path:
        return self.root / self.config["seed"]["file"]

    def write_seed(self, mode: int = 0o600) -> Path:
        p = self.seed_path
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        p.write_text(f"{self.seed_value}\n", encoding="ascii")
        p.chmod(mode)
        return p

    def write(self) -> Path:
        if not self.skip_data:
            self.data_path.parent.mkdir(parents=True, exist_ok=True)
            if self.data_bytes is not None:
                self.data_path.write_bytes(self.data_bytes)
            elif self.config["input"].get("format") == "parquet":
                self.frame.to_parquet(self.data_path, index=False)
            else:
                self.frame.to_csv(self.data_path, index=False)
        if isinstance(self.config.get("seed"), dict) and not self.seed_path.exists():
            self.write_seed()
        if self.config_text is not None:
            self.config_path.write_text(self.config_text, encoding="utf-8")
        else:
            self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False,
                                                       allow_unicode=True), encoding="utf-8")
        return self.config_path

    def leftovers(self) -> list[Path]:
        """The release folder and any temp/old sibling of it that exist."""
        out = self.out_dir
        found = [out] if out.exists() else []
        if out.parent.is_dir():
            found += sorted(p for p in out.parent.iterdir()
                            if p.name.startswith((f".{out.name}.tmp-", f".{out.name}.old-")))
        return found


@pytest.fixture
def job(tmp_path: Path) -> JobBuilder:
    return JobBuilder(tmp_path)


# ---------------------------------------------------------------------------------------------
# one census release shared by the crash, rerun and leak tests
# ---------------------------------------------------------------------------------------------
@dataclass
class CensusRelease:
    """The demo config on the repo's census sample, released once for the session.

    ``config(name, **changes)`` writes a variant of the config (same seed file, output under
    ``root/releases/<name>`` unless changed); ``public`` maps public file names to bytes.
    """

    root: Path
    config_path: Path
    out_dir: Path
    seed_path: Path
    cli_output: str
    public: dict[str, bytes]

    def config(self, name: str, **changes: Any) -> Path:
        data = yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        data["output"]["dir"] = str(self.root / "releases" / name)
        for k, v in changes.items():
            node = data
            *parents, last = k.split("__")
            for p in parents:
                node = node[p]
            node[last] = v
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    @property
    def seed(self) -> int:
        return int(self.seed_path.read_text(encoding="ascii").strip())


def public_bytes(out_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out_dir / "public").iterdir())}


@pytest.fixture(scope="session")
def census_release(tmp_path_factory: pytest.TempPathFactory, cli) -> CensusRelease:
    """``sdc release`` of the demo config (census sample, 59,033 records) in a temp folder.

    The seed file does not exist beforehand: this run creates it (mode 0600), and every
    variant written by ``config()`` reuses it.
    """
    return release_census(tmp_path_factory.mktemp("census"), CENSUS_CSV, cli)


def release_census(root: Path, csv: Path, cli: Any) -> CensusRelease:
    """``sdc release`` of the demo config on ``csv`` (the census sample or a part of it) under
    ``root``, creating its seed file: the :class:`CensusRelease` of :func:`census_release`."""
    data = yaml.safe_load(CENSUS_YAML.read_text(encoding="utf-8"))
    data["input"]["path"] = str(csv)
    data["seed"] = {"file": str(root / "secrets" / "census.seed")}
    data["output"]["dir"] = str(root / "releases" / "reference")
    config_path = root / "reference.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    res = cli("release", config_path)
    assert res.exit_code == 0, res.output
    out = root / "releases" / "reference"
    return CensusRelease(root, config_path, out, root / "secrets" / "census.seed", res.output,
                         public_bytes(out))
