"""R laeken's synthetic EU-SILC (Debian r-cran-laeken: 14,827 persons in 6,000 households),
and laeken's other data sets (``ses``), exported by Rscript into the test's temporary folder
when laeken is installed (never copied into the project); else the test skips: a test module's
fixture calls :func:`export_eusilc` or :func:`export_laeken`.

Also a pytest plugin (tests/conftest.py ``pytest_plugins``): :func:`eusilc_release`, eusilc
through ``sdc init``, ``sdc design -o`` and ``sdc release`` once per session (once per xdist
worker, and its tests share one worker: tests/conftest.py groups them), checked by the tests
that ask what that one user's run gives (tests/e2e)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def export_laeken(tmp_path_factory, name: str) -> Path:
    """R laeken's data set ``name`` (``eusilc``, ``ses``) exported by Rscript into a temporary
    folder (skips the test without R's laeken)."""
    if shutil.which("Rscript") is None:
        pytest.skip(f"Rscript not found: install r-cran-laeken (R's laeken ships {name}) to run "
                    "this test")
    out = tmp_path_factory.mktemp(name) / f"{name}.csv"
    r = subprocess.run(["Rscript", "-e", f"suppressMessages(library(laeken)); data({name}); "
                        f"write.csv({name}, '{out}', row.names=FALSE)"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not out.is_file():
        pytest.skip(f"R's laeken is not installed (Rscript: {r.stderr.strip()[:200]}); "
                    "apt-get install r-cran-laeken to run this test")
    return out


def export_eusilc(tmp_path_factory) -> Path:
    """The synthetic EU-SILC exported by Rscript (skips the test without R's laeken)."""
    return export_laeken(tmp_path_factory, "eusilc")


#: the eusilc run of :func:`eusilc_release`: household id, weight, keys (region and household
#: size for the household; age, sex, citizenship for the person) and id. The household weight
#: db090, equal to the weight rb050, is left in the file: init must not draft it as a
#: person-level ``derived:`` column (the issue-44 bug: init refused its own draft), which
#: tests/e2e/test_eusilc_household.py checks on this run (it was a second eusilc init of its
#: own in tests/cli/test_cli_household_roundtrip.py, ~60 CPU s)
HOUSEHOLD_COLUMNS = ["hy040n", "hy050n", "hy070n", "hy080n", "hy090n", "hy110n", "hy130n",
                     "hy145n", "eqIncome", "hsize"]
REGIONS = ["Burgenland", "Carinthia", "Lower Austria", "Salzburg", "Styria", "Tyrol",
           "Upper Austria", "Vienna", "Vorarlberg"]


def eusilc_draft(path: Path, *, near: dict | None = None, member_bands: dict | None = None,
                 drop: tuple[str, ...] | list[str] = (),
                 household_columns: list[str] | None = None) -> dict[str, Any]:
    """init's eusilc draft as a config dict (protect, the near matching with ``near`` merged
    into its options, exposed sizes left out, the weight recalibrated, age in the standard
    bands, citizenship AT / EU+Other / NA), ``drop`` dropped too (and left out of the
    household columns unless ``household_columns`` names them)."""
    risk: dict[str, Any] = {
        "xi": 0.395, "theta": "calibrated", "small_blocks": "calibrate",
        "composition": "protect", "destinations": "near",
        "near": {"neighbours": 4, "kernel": "matching", **(near or {})},
        "exposed_sizes": "drop"}
    if member_bands:
        risk["member_bands"] = member_bands
    if household_columns is None:
        household_columns = [c for c in HOUSEHOLD_COLUMNS if c not in drop]
    return {
        "name": "eu", "seed": 1, "risk": risk, "partition": {"rb090": "as_is"},
        "input": {"path": str(path), "id_column": "rb030", "drop": ["db090", "pl030", *drop],
                  "weight": "rb050", "na_values": ["NA"], "household_id": "db030",
                  "household_columns": household_columns, "weight_release": "recalibrated"},
        "key_variables": {
            "db040": {"level": "household", "categories": REGIONS},
            "age": {"range": [-1, 97], "recode": {"bands": [-1, 16, 25, 50, 65]}},
            "rb090": {"categories": ["female", "male"]},
            "pb220a": {"categories": ["AT", "EU", "NA", "Other"],
                       "recode": {"groups": {"EU+Other": ["EU", "Other"]}}}}}


EUSILC_INIT = ("--household-id", "db030", "--weight", "rb050", "--keys",
               "db040,hsize,age,rb090,pb220a", "--id", "rb030")
#: the release seed of :func:`eusilc_release` (one draw, the same every run)
EUSILC_SEED = 20261206


@pytest.fixture(scope="session")
def eusilc_release(tmp_path_factory) -> dict[str, Any]:
    """eusilc as a new user releases it: ``sdc init`` (:data:`EUSILC_INIT`), ``sdc design -o
    --json``, the designed config given the four output formats and the utility's household
    income (``eqIncome``), ``sdc release``. Made once (~60 CPU s) for every test that checks
    that run; each test asserts on its own part. Returns the original ``csv``, the three
    commands' results (``init``, ``design``, ``release``: ``run_cli`` results, ``.text``
    collapsed), ``job`` (init's draft, as written), ``designed`` (the config released) and
    ``out`` (the release folder)."""
    from conftest import run_cli

    csv = export_eusilc(tmp_path_factory)
    base = tmp_path_factory.mktemp("eusilc-release")
    data, job, designed = base / "eusilc.csv", base / "job.yaml", base / "d.yaml"
    shutil.copy(csv, data)
    init = run_cli("init", data, *EUSILC_INIT, "-o", job)
    assert init.exit_code == 0, init.text
    job_text = job.read_text()
    design = run_cli("design", job, "-o", designed, "--json")
    assert design.exit_code == 0, design.text
    cfg = yaml.safe_load(designed.read_text())
    cfg["output"]["formats"] = ["parquet", "csv", "sav", "dta"]
    cfg["utility"] = {"household_income": "eqIncome"}
    # a fixed release seed (init drafts a seed file the first release fills with new random
    # bits): the tests judge one draw (poverty by region within 2 SE over 9 regions), so a
    # random seed made them pass or fail by chance; the same seed, the same figures, every run
    cfg["seed"] = EUSILC_SEED
    designed.write_text(yaml.safe_dump(cfg, sort_keys=False))
    release = run_cli("release", designed)
    assert release.exit_code == 0, release.text
    return {"csv": csv, "init": init, "design": design, "release": release,
            "job": yaml.safe_load(job_text), "designed": cfg,
            "recommended": json.loads(design.stdout)["recommended"],
            "out": base / cfg["output"]["dir"]}
