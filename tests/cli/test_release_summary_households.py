"""The release summary's "records changed" row: the realised count beside the expectation of
the release's plan. A household file's expectation is the persons both stages (or, under
``risk.composition: protect``, the composition stage) change, with its SD over releases
(issue 44; before: the person stage's only, and none under protect, where sdcMicro's testdata
printed "1,302 (expected 0.0)"). The figure itself: tests/method/test_expected_changes.py,
tests/e2e/test_household_changes_agree.py."""

from sdc.cli.release_cmd import _changed_text


def test_person_file_keeps_its_expectation():
    assert _changed_text({"records_changed": 1200, "expected_changed": 1187.25}) == \
        "1,200 (expected 1,187.2)"


def test_household_file_prints_both_stages_expectation_and_sd():
    s = {"records_changed": 900, "expected_changed": 912.34, "expected_changed_sd": 20.06,
         "households": {"composition_mode": "measure"}}
    assert _changed_text(s) == "900 (expected 912.3, SD 20.1)"


def test_protected_composition_prints_the_composition_stages_expectation():
    s = {"records_changed": 1302, "expected_changed": 1290.0, "expected_changed_sd": 35.2,
         "households": {"composition_mode": "protect"}}
    assert _changed_text(s) == "1,302 (expected 1,290.0, SD 35.2)"
