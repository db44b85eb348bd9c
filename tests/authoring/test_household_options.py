"""The household design search's options and recommendation (issue 44,
docs/HOUSEHOLDS.md "Design" and "Large groups")."""

from __future__ import annotations

import pandas as pd

import sdc
from sdc.authoring.household_design import HouseholdCandidate, recommend
from sdc.authoring.household_options import (
    person_key_options,
    reassembling_columns,
    standard_bands,
    without_group_id,
)

BASE = {"name": "t", "input": {"path": "x.csv", "household_id": "hid",
                               "household_columns": ["roof"], "weight": "w",
                               "weight_release": "recalibrated", "drop": ["name"]},
        "key_variables": {"region": {"categories": [1, 2], "level": "household"},
                          "cit": {"categories": ["AT", "EU", "Other", "X"]},
                          "age": {"range": [0, 97]}},
        "risk": {"xi": 0.395, "composition": "protect", "destinations": "near"}, "seed": 1}


def test_standard_bands_cut_to_the_range():
    assert standard_bands(0, 97) == [0, 16, 25, 50, 65]
    assert standard_bands(-1, 97) == [-1, 16, 25, 50, 65]
    assert standard_bands(18, 60) == [18, 25, 50]
    assert standard_bands(1, 9) is None


def test_person_key_options_offer_standard_bands_and_rare_groups():
    frame = pd.DataFrame({"cit": ["AT"] * 80 + ["EU"] * 5 + ["Other"] * 5 + ["X"] * 10,
                          "age": list(range(100)), "region": 1, "hid": range(100)})
    cfg = sdc.parse_config(BASE)
    cit, age = person_key_options(frame, cfg)
    assert ("rare grouped (EU+Other)", {"groups": {"EU+Other": ["EU", "Other"]}}, 3) in cit
    assert any(o[1] == {"bands": [0, 16, 25, 50, 65]} for o in age)


def test_without_group_id_is_a_person_file():
    data = without_group_id(BASE)
    cfg = sdc.parse_config(data)
    assert cfg.input.household_id is None and "hid" in cfg.input.drop
    assert cfg.household_keys == [] and cfg.risk.composition != "protect"
    assert cfg.input.weight_release == "as_is" and cfg.risk.destinations == "uniform"


def _cand(changed, bands=None, group=False):
    rec = {"age": {"recode": {"bands": bands}, "released_values": len(bands)}} if bands else {}
    return HouseholdCandidate({}, rec, status="certified", changed=changed, n_records=1000,
                              without_group_id=group)


def test_recommend_keeps_age_classes_within_the_target_else_the_fewest_changes():
    c = [_cand(90, [0, 40]), _cand(120, [0, 16, 25, 50, 65]), _cand(200, [0, 16, 25, 50, 65, 80]),
         _cand(60, group=True)]
    assert recommend(c) == 1  # 5 classes at 12%; 6 classes at 20% is beyond 15%
    big = [_cand(800, [0, 40]), _cand(900, [0, 16, 25, 50, 65]), _cand(60, group=True)]
    assert recommend(big) == 2  # no household design within 15%: without the group id


def test_columns_with_one_value_per_household_reassemble_the_households():
    """A household weight (one value per household, nearly unique) links the members of a
    household as surely as its id: the release without the id is not a person file then.
    Columns that vary within households, or whose per-household values are shared by other
    households, single nobody out."""
    f = pd.DataFrame({"hid": [1, 1, 2, 2, 3, 3, 4],
                      "w": [10.5, 10.5, 11.0, 11.0, 12.5, 12.5, 9.0],   # unique per household
                      "roof": [1, 1, 1, 1, 2, 2, 2],                    # shared by households
                      "age": [30, 5, 40, 38, 70, 66, 20]})              # varies within
    cols, singled, groups = reassembling_columns(f, "hid", ["w", "roof", "age"])
    assert (cols, singled, groups) == (["w", "roof"], 3, 3)
    cols, singled, groups = reassembling_columns(f, "hid", ["roof", "age"])
    assert cols == ["roof"] and singled == 1 and groups == 3   # roof=2 only in household 3
    f.loc[f["hid"] == 3, "roof"] = 1                           # every household shares it
    assert reassembling_columns(f, "hid", ["roof", "age"])[1:] == (0, 3)
    assert reassembling_columns(f, "hid", ["age"]) == ([], 0, 3)


def test_group_key_options_merge_rare_groups_and_pair_numbered_classes():
    """The coarser group keys of the sampled-members candidates (docs/HOUSEHOLDS.md "Sampled
    members"): a text group key's categories held by < 5% of the groups grouped (shares of
    groups, not of members: the 100-member group of "C" does not make C common), and size
    classes whose labels carry numbers paired in the order of those numbers."""
    from sdc.authoring.household_options import group_key_options

    sizes = ["E10_49", "E50_249", "E250_499", "E500_999", "E1000"]
    nace = ["A"] * 50 + ["B"] * 44 + ["C", "D", "E"] * 2  # C, D, E: 2 of 100 groups each
    groups = pd.DataFrame({"hid": range(100), "nace": nace,
                           "size": [sizes[i % 5] for i in range(100)]})
    frame = pd.concat([groups, groups[groups.nace == "C"].iloc[[0] * 99]], ignore_index=True)
    frame["age"] = 30
    cfg = sdc.parse_config({
        "name": "t", "input": {"path": "x.csv", "household_id": "hid", "members": "sampled"},
        "key_variables": {"nace": {"categories": ["A", "B", "C", "D", "E"], "level": "household"},
                          "size": {"categories": sizes, "level": "household"},
                          "age": {"range": [0, 97]}},
        "risk": {"xi": 0.395}, "seed": 1})
    opts = dict(group_key_options(frame, cfg))
    assert opts["nace"][0][1] is None  # as written first
    assert ("rare grouped (C+D+E)", {"groups": {"C+D+E": ["C", "D", "E"]}}, 3) in opts["nace"]
    paired = {"E10_49+E50_249": ["E10_49", "E50_249"],
              "E250_499+E500_999": ["E250_499", "E500_999"]}
    assert any(o[1] == {"groups": paired} and o[2] == 3 for o in opts["size"])
