"""``risk.destinations`` and ``risk.near`` (docs/METHOD.md 7.11): defaults, ranges, and the
refusal for two-stage household files."""

from __future__ import annotations

import pytest

from sdc.config.load import parse_config
from sdc.config.model import ConfigError


def _data(**risk):
    return {"name": "t", "input": {"path": "x.csv"},
            "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 9]}},
            "risk": {"xi": 0.395, **risk}, "seed": 1}


def test_uniform_is_the_default_and_near_has_sane_defaults():
    cfg = parse_config(_data())
    assert cfg.risk.destinations == "uniform" and cfg.risk.near is None
    o = parse_config(_data(destinations="near")).risk.near_options
    assert (o.neighbours, o.bandwidth, o.min_destinations, o.max_weight) == (8, 1.0, 4, 0.25)


@pytest.mark.parametrize("near,needle", [
    ({"bandwidth": 0}, "bandwidth"),
    ({"min_destinations": 1}, "min_destinations"),
    ({"max_weight": 1.0}, "max_weight"),
    ({"max_weight": 0.1}, "give at least 10"),
    ({"neighbours": 3}, "give at least 4"),
])
def test_bad_near_options_are_refused(near, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(_data(destinations="near", near=near))


def test_near_is_refused_for_two_stage_household_files_and_taken_under_protect():
    d = _data(destinations="near")
    d["input"]["household_id"] = "hid"
    d["key_variables"]["region"] = {"categories": [1, 2], "level": "household"}
    with pytest.raises(ConfigError, match="composition: protect only"):
        parse_config(d)
    d["risk"]["composition"] = "protect"
    assert parse_config(d).risk.destinations == "near"
