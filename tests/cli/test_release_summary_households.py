"""The release summary's "records changed" row of a household file: the expectation printed is
the person stage's only, named so, and none under ``risk.composition: protect`` (no person
stage: sdcMicro's testdata printed "1,302 (expected 0.0)" before)."""

from sdc.cli.release_cmd import _changed_text


def test_person_file_keeps_its_expectation():
    assert _changed_text({"records_changed": 1200, "expected_changed": 1187.25}) == \
        "1,200 (expected 1,187.2)"


def test_household_file_names_the_person_stage():
    s = {"records_changed": 900, "expected_changed": 310.0,
         "households": {"composition_mode": "measure"}}
    assert _changed_text(s) == ("900 (person stage: expected 310.0; the household stage's "
                                "changes below)")


def test_protected_composition_prints_no_expectation():
    s = {"records_changed": 1302, "expected_changed": 0.0,
         "households": {"composition_mode": "protect"}}
    text = _changed_text(s)
    assert "expected" not in text and text.startswith("1,302 (")
