"""The contract of every registered household design (sdc/method/designs/households.py, issue 45
item 1), like tests/contract/test_designs.py for the transition designs: each design the
registry knows plans the small generated household file through the batch pipeline (count
pass, household stage, person stage), the plan carries the design (``hs.design``), the
certificate is at most xi, and its words for the report, the codebook and the audit are not
empty. :func:`household_design_of` is the one reader of the config's household options and
resolves each of them."""

from __future__ import annotations

from pathlib import Path

import pytest

import sdc
from sdc.executors.registry import get_executor
from sdc.method.designs import (
    HouseholdDesign,
    get_household_design,
    household_design_names,
    household_design_of,
)
from sdc.release.job import resolve_engine
from sdc.samples import generate_household_sample

XI = 0.5


@pytest.fixture(scope="module")
def households(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hh-designs") / "hh.csv"
    generate_household_sample(2500, seed=4, n_regions=12).to_csv(path, index=False)
    return path


def _config(src: Path, **risk):
    return sdc.parse_config({
        "name": "hh",
        "input": {"path": str(src), "household_id": "hh_id", "id_column": "person_id",
                  "weight": "hh_weight", "household_columns": ["water"],
                  "drop": ["income", "relation", "urbrur", "dwelling"]},
        "key_variables": {"region": {"range": [1, 12], "level": "household"},
                          "sex": {"categories": [1, 2]},
                          "age": {"range": [0, 95], "recode": {"bands": [0, 16, 25, 50, 65]}}},
        "risk": {"xi": XI, "households": "warn", **risk}, "seed": 11})


def test_the_built_in_household_designs_are_registered():
    assert {"households", "households x composition"} <= set(household_design_names())
    assert get_household_design("households x composition").protect
    with pytest.raises(sdc.ConfigError, match="unknown household design"):
        get_household_design("no such design")


@pytest.mark.parametrize("name", household_design_names())
def test_each_household_design_plans_carries_itself_and_certifies(households, name):
    """The design planned from a config that asks for it: the household stage's plan
    carries it (the same object every step after planning reads), certificate <= xi."""
    design = get_household_design(name)
    cfg = _config(households, composition=design.composition)
    assert household_design_of(cfg).name == name
    spec = resolve_engine(cfg, None)
    p = get_executor(spec.kind).count(cfg, spec)  # both stages planned, nothing written
    assert isinstance(p.hs.design, HouseholdDesign)
    assert p.hs.design == household_design_of(cfg)
    cert, _at = p.certificate
    assert 0 < cert <= XI + 1e-12
    assert (p.hs.composition is not None) == design.protect


@pytest.mark.parametrize("name", household_design_names())
def test_each_household_design_has_its_words(name):
    """Its title, description and codebook bullets (report, codebook, audit) are not empty."""
    design = get_household_design(name)
    assert design.title.strip() and design.description.strip()
    assert design.codebook and all(line.strip() for line in design.codebook)


def test_the_reader_resolves_every_option(households):
    """``risk.large_groups``, ``exposed_sizes``, ``member_bands`` and ``input.members`` as
    the design's fields, and what the exposed-size rule makes of them."""
    src = households
    measured = household_design_of(_config(src))
    assert (measured.name, measured.large_groups, measured.holds_exposed_sizes) == (
        "households", None, False)
    assert "measured, not certified" in measured.description
    large = household_design_of(_config(src, large_groups=3))
    assert (large.large_groups, large.size_cap, large.holds_exposed_sizes) == (3, 3, True)
    assert "more than 3 members" in large.description
    banded = household_design_of(_config(src, composition="protect", exposed_sizes="drop",
                                          member_bands={"age": [25, 65]}))
    assert banded.bands == {"age": [25.0, 65.0]} and banded.exposed_sizes == "drop"
    assert banded.size_cap is None and banded.holds_exposed_sizes
    assert "certified exactly" in banded.description
