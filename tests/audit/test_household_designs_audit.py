"""A household release passes its own ``sdc audit`` under every design combination (issue 44):
uniform or near destinations x weighted or unweighted x ``risk.composition: protect`` or the
two-stage release, on one small generated household file (near destinations exist for
household files under ``protect`` only). The weighted near design's W is recorded per stage in
``audit.json`` (``households.near.weighted_w_sha256``); the audit compares the household
stages' re-derived W with that record (it compared with nothing, and failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from household_helpers import release_folder
from typer.testing import CliRunner

from sdc.cli.main import app
from sdc.samples import generate_household_sample

#: (destinations, weighted, composition, weight_release): the combinations a config may ask
DESIGNS = [
    ("uniform", False, None, "as_is"),
    ("uniform", True, None, "as_is"),
    ("uniform", False, "protect", "as_is"),
    ("uniform", True, "protect", "as_is"),
    ("near", False, "protect", "as_is"),
    ("near", True, "protect", "as_is"),
    ("near", True, "protect", "recalibrated"),
    ("matching", False, "protect", "recalibrated"),   # near: {kernel: matching} (issue 44)
    ("matching", True, "protect", "as_is"),
]


@pytest.fixture(scope="module")
def households(tmp_path_factory) -> Path:
    """:func:`generate_household_sample`'s file of about 2,500 persons in 12 regions."""
    path = tmp_path_factory.mktemp("hh-designs") / "hh.csv"
    generate_household_sample(2500, seed=4, n_regions=12).to_csv(path, index=False)
    return path


def _config(tmp: Path, src: Path, destinations: str, weighted: bool, composition: str | None,
            weight_release: str) -> Path:
    """Household key region; person keys sex and age in the standard bands; ``hh_weight`` the
    survey weight."""
    risk: dict = {"households": "warn", "xi": 0.5, "weighted": weighted}
    if composition:
        risk["composition"] = composition
    if destinations == "matching":
        risk.update({"destinations": "near", "near": {"neighbours": 4, "kernel": "matching"}})
    elif destinations != "uniform":
        risk["destinations"] = destinations
    cfg = {"name": "hh",
           "input": {"path": str(src), "household_id": "hh_id", "id_column": "person_id",
                     "weight": "hh_weight", "weight_release": weight_release,
                     "household_columns": ["water"],
                     "drop": ["income", "relation", "urbrur", "dwelling"]},
           "key_variables": {"region": {"range": [1, 12], "level": "household"},
                             "sex": {"categories": [1, 2]},
                             "age": {"range": [0, 95],
                                     "recode": {"bands": [0, 16, 25, 50, 65]}}},
           "risk": risk, "seed": 11,
           "output": {"dir": str(tmp / "release"), "formats": ["parquet"]}}
    path = tmp / "hh.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize(("destinations", "weighted", "composition", "weight_release"), DESIGNS)
def test_household_release_passes_its_audit(tmp_path, households, destinations, weighted,
                                            composition, weight_release):
    rel = release_folder(_config(tmp_path, households, destinations, weighted, composition,
                                 weight_release))
    r = CliRunner().invoke(app, ["audit", str(rel)], terminal_width=400)
    assert r.exit_code == 0, r.output[-3000:]
    if weighted and destinations != "uniform":  # the stage's W compared with its record
        assert "composition stage: weighted near W re-derived = recorded" in r.output
