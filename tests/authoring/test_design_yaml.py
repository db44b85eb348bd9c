"""The text edits of ``sdc design -o`` (sdc/authoring/design_yaml.py): a value is replaced as
a whole value, never inside a key or another word."""

from __future__ import annotations

import pytest

from sdc.authoring.design_yaml import ConfigPatch, replace_value


@pytest.mark.parametrize(("text", "expected"), [
    # 'out' is also the start of the key 'output': the old edit gave 'out-designput:'
    ("output:\n  dir: out\n  formats: [csv]\n", "output:\n  dir: out-design\n  formats: [csv]\n"),
    ("output: {dir: out, formats: [csv]}\n", "output: {dir: out-design, formats: [csv]}\n"),
    ('output:\n  dir: "out"  # where\n', 'output:\n  dir: "out-design"  # where\n'),
    ("output:\n  dir: out/x\n  other: out\n", "output:\n  dir: out/x\n  other: out-design\n"),
])
def test_a_value_is_replaced_whole(text, expected):
    patch = ConfigPatch(text)
    replace_value(patch, 0, len(patch.lines), "out", "out-design")
    assert patch.text() == expected


def test_a_value_that_is_not_there_changes_nothing():
    patch = ConfigPatch("output:\n  dir: outdoors\n")
    replace_value(patch, 0, len(patch.lines), "out", "out-design")
    assert patch.text() == "output:\n  dir: outdoors\n"
