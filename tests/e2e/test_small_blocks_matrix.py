"""End-to-end matrix: every shipped config and generated small files, under every
``risk.small_blocks`` policy and both ``risk.theta`` modes, through ``sdc release`` and
``sdc audit`` (in-process, typer's CliRunner, one Prefect API for the session).

Each run either releases (exit 0) and its release passes ``sdc audit`` (exit 0), or refuses
with exit code 2 and one clear paragraph. It never exits 1 (an unexpected error or a failed
certification) and never prints a traceback. A source with no deficient PRB
(:data:`NOTHING_DEFICIENT`) is released once per theta mode, under ``fail``; that case asserts
that ``merge`` and ``calibrate`` plan the same PRBs and certificate.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from sdc.method.risk import max_risk as mechanism_max_risk

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
POLICIES = ("merge", "calibrate", "fail")
THETA_MODES = ("theorem", "calibrated")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _shared_data() -> Path | None:
    """``../shared/data`` beside the repository, or beside the main checkout of a worktree."""
    candidates = [REPO.parent / "shared" / "data"]
    try:
        common = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--git-common-dir"],
                                capture_output=True, text=True, check=True).stdout.strip()
        candidates.append((REPO / common).resolve().parent.parent / "shared" / "data")
    except (OSError, subprocess.CalledProcessError):
        pass
    return next((c.resolve() for c in candidates if (c / "adult" / "adult.csv").is_file()), None)


SHARED = _shared_data()


def _app():
    try:
        from sdc.cli.main import app
    except ImportError:  # the layout before layout-v1
        from cli.main import app
    return app


@pytest.fixture(scope="module")
def cli(prefect_harness):
    """``cli(*args) -> (exit code, output with whitespace collapsed)``."""
    from typer.testing import CliRunner

    app = _app()
    runner = CliRunner()
    mp = pytest.MonkeyPatch()
    _quiet_prefect_console(mp)

    def run(*args: Any) -> tuple[int, str]:
        res = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
        _quiet_prefect_console(mp)
        return res.exit_code, " ".join((res.stdout + res.stderr).split())

    yield run
    mp.undo()


def _quiet_prefect_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefect's console handlers, created inside an earlier CliRunner call, write to a stream
    closed since: point them back at the real stderr and silence them (as ``sdc`` does)."""
    import logging
    import sys

    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, PrefectConsoleHandler):
                if getattr(h.stream, "closed", False):
                    h.stream = sys.__stderr__
                    h.console.file = sys.__stderr__
                monkeypatch.setattr(h, "level", logging.CRITICAL + 1)


# --------------------------------------------------------------------------- the sources
def _relocated(src: Path, tmp: Path, name: str, risk: dict[str, str]) -> Path:
    """A shipped config with its data paths absolute, seed and release folder in ``tmp``."""
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    base = src.resolve().parent

    def fix(p: str) -> str:
        path = (base / p).resolve()
        if not path.exists() and SHARED is not None and "shared/data/" in path.as_posix():
            path = SHARED / path.as_posix().split("shared/data/", 1)[1]
        return str(path)

    data["name"] = name
    data["input"]["path"] = fix(data["input"]["path"])
    for rule in (data.get("partition") or {}).values():
        if isinstance(rule, dict) and "hierarchy" in rule:
            rule["hierarchy"] = fix(rule["hierarchy"])
    data["seed"] = 20261113
    data["output"] = dict(data.get("output") or {}, dir=str(tmp / "releases" / name))
    data["risk"] = dict(data.get("risk") or {}, **risk)
    path = tmp / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _generated_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.char.add("R", np.char.zfill(np.arange(n).astype(str), 6)),
        "sex": rng.integers(1, 3, n),
        "age": rng.integers(0, 91, n),
        "race": rng.choice([1, 2, 3], n, p=[0.7, 0.2, 0.1]),
        "region": rng.integers(1, 6, n),
        "income": rng.gamma(2.0, 20000.0, n).round(0).astype(np.int64),
    })


#: generated small files: name -> (records, key variables, partition, extra risk options),
#: chosen to have small PRBs of every kind (one cell, two singletons, a few cells) next to large
#: ones, singletons only (xi = 0.55), no sensitive cell at all, and blocks no merge can fix.
GENERATED: dict[str, tuple[int, list[str], dict[str, Any], dict[str, Any]]] = {
    "gen300": (300, ["sex", "age", "race", "region"],
               {"sex": "as_is", "age": {"bands": [0, 20, 40, 60, 80]}, "race": "as_is"}, {}),
    "gen1000": (1000, ["sex", "age", "race"],
                {"sex": "as_is", "age": {"bands": [0, 18, 35, 50, 65]}, "race": "as_is"}, {}),
    "gen3000": (3000, ["sex", "age", "race"],
                {"sex": "as_is", "age": {"bands": [0, 10, 20, 30, 40, 50, 60, 70, 80]},
                 "race": "as_is"}, {}),
    "gen400-xi55": (400, ["sex", "age", "race"],
                    {"sex": "as_is", "age": {"bands": [0, 20, 40, 60, 80]}, "race": "as_is"},
                    {"xi": 0.55}),
    "gen2000-nosensitive": (2000, ["sex", "race", "region"], {"sex": "as_is"}, {}),
    "gen200-stuck": (200, ["sex", "age", "race", "region"],
                     {"sex": "as_is", "age": {"bands": [0, 30, 60]}, "race": "as_is",
                      "region": "as_is"}, {"merge_along": ["region"]}),
}

#: sources where merging cannot always reach a certifiable release (refusing is right there)
MAY_REFUSE_ALWAYS = {"gen200-stuck"}

#: sources with no deficient PRB under either theta mode (census_demo: 42 large partition sets;
#: gen2000-nosensitive: no sensitive cell). ``fail`` releases them, so ``merge`` and
#: ``calibrate`` have nothing to act on: their plan is the ``fail`` one (asserted in the
#: ``fail`` case, in-process) and their release through the CLI, made and audited again, was
#: the same release (4 CLI releases and audits of the 59,033-record demo file, ~10 CPU s)
NOTHING_DEFICIENT = {"census_demo.yaml", "gen2000-nosensitive"}


def _generated(tmp: Path, name: str, risk: dict[str, str]) -> Path:
    n, keys, partition, extra = GENERATED[name]
    data_path = tmp / "data" / f"{name}.csv"
    data_path.parent.mkdir(parents=True, exist_ok=True)
    if not data_path.exists():
        _generated_frame(n, seed=n).to_csv(data_path, index=False)
    key_variables = {
        "sex": {"categories": [1, 2]},
        "age": {"range": [0, 90]},
        "race": {"categories": [1, 2, 3]},
        "region": {"categories": [1, 2, 3, 4, 5]},
    }
    config = {
        "name": f"{name}-{risk['small_blocks']}-{risk['theta']}",
        "input": {"path": str(data_path), "format": "csv", "id_column": "id"},
        "key_variables": {k: key_variables[k] for k in keys},
        "partition": partition,
        "risk": {"xi": 0.395, **extra, **risk},
        "seed": 20261113,
        "output": {"dir": str(tmp / "releases" / f"{name}-{risk['small_blocks']}-"
                                             f"{risk['theta']}"),
                   "formats": ["parquet"]},
    }
    path = tmp / "configs" / f"{config['name']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


SOURCES = [p.name for p in sorted(CONFIGS.glob("*.yaml"))] + sorted(GENERATED)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The test's own folder (a module-scoped one would put all 54 cases on one xdist worker,
    tests/conftest.py; the generated files take milliseconds to write again)."""
    return tmp_path


def _config(source: str, workdir: Path, policy: str, theta: str) -> Path:
    risk = {"small_blocks": policy, "theta": theta}
    if source in GENERATED:
        return _generated(workdir, source, risk)
    text = (CONFIGS / source).read_text(encoding="utf-8")
    if "shared/data" in text and SHARED is None:
        pytest.skip(f"{source} reads ../shared/data, which is not present beside the repository")
    return _relocated(CONFIGS / source, workdir, f"{Path(source).stem}-{policy}-{theta}", risk)


def _check_outcome(source: str, policy: str, theta: str, code: int, text: str,
                   cli, config: Path) -> str:
    where = f"{source} small_blocks={policy} theta={theta}"
    assert "Traceback" not in text, f"{where}: {text}"
    assert "This was not expected" not in text, f"{where}: {text}"
    assert code in (0, 2), f"{where}: exit {code}: {text}"
    if code == 2:
        assert "error:" in text, f"{where}: {text}"
        return "refused"
    out = Path(yaml.safe_load(config.read_text(encoding="utf-8"))["output"]["dir"])
    a_code, a_text = cli("audit", out)
    assert a_code == 0 and "audit passed" in a_text, f"{where}: audit exit {a_code}: {a_text}"
    audit = json.loads((out / "internal" / "audit.json").read_text(encoding="utf-8"))
    xi, cert = float(audit["risk"]["xi"]), float(audit["risk"]["certificate"])
    assert cert <= xi + 1e-12, f"{where}: certificate {cert} > xi = {xi}"
    # every PRB of the release, rechecked against an intruder who knows the mechanism
    blocks = pd.read_parquet(out / "internal" / "blocks.parquet")
    for _, b in blocks.iterrows():
        profile = {int(t): int(m) for t, m in (x.split(":") for x in b["profile"].split(","))}
        r = mechanism_max_risk(profile, float(b["theta"]))
        assert r.max_risk <= xi + 1e-12, (where, b["partition_key"], profile, b["theta"], r)
    return "released"


def _same_plan_under_every_policy(source: str, workdir: Path, theta: str) -> None:
    """A source of :data:`NOTHING_DEFICIENT`: ``merge`` and ``calibrate`` plan the PRBs,
    thetas and certificate of ``fail`` (nothing to merge or calibrate), so the ``fail``
    release, audited and rechecked above, is theirs too."""
    import sdc
    from sdc.io.schemas import validate_input
    from sdc.method.designs import plan_release

    plans = {}
    for policy in POLICIES:
        cfg = sdc.load_config(_config(source, workdir / "plans" / policy, policy, theta))
        assert cfg.risk.small_blocks == policy
        if not plans:
            part = sdc.partition_frame(validate_input(sdc.read_input(cfg), cfg), cfg)
        plans[policy] = plan_release(part, cfg)
    for policy in ("merge", "calibrate"):
        where = f"{source} small_blocks={policy} theta={theta}"
        pd.testing.assert_frame_equal(plans[policy].blocks, plans["fail"].blocks,
                                      check_exact=True, obj=where)
        assert plans[policy].certificate == plans["fail"].certificate, where


def _matrix() -> list[Any]:
    """source x policy x theta, less the ``merge`` and ``calibrate`` releases of the sources
    with nothing deficient (their ``fail`` case asks about them)."""
    return [pytest.param(source, policy, theta, id=f"{source}-{policy}-{theta}")
            for source in SOURCES for policy in POLICIES for theta in THETA_MODES
            if policy == "fail" or source not in NOTHING_DEFICIENT]


@pytest.mark.parametrize(("source", "policy", "theta"), _matrix())
def test_matrix(source, policy, theta, cli, workdir):
    config = _config(source, workdir, policy, theta)
    code, text = cli("release", config, "--force")
    outcome = _check_outcome(source, policy, theta, code, text, cli, config)
    if source in NOTHING_DEFICIENT:  # fail released it: no PRB is deficient
        assert outcome == "released", text
        _same_plan_under_every_policy(source, workdir, theta)
    if outcome == "refused":
        # refusals name what to change; calibrate merges what no theta certifies, and every
        # source here can be coarsened far enough
        assert policy != "calibrate" or source in MAY_REFUSE_ALWAYS, text
        assert re.search(r"small_blocks|merge_along|partition", text), text
