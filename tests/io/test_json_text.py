"""dumps_indented writes json.dumps(obj, indent=2, ensure_ascii=False)'s text exactly (what
audit.json is): nested dicts and lists, numbers of every kind the encoders format (NaN,
infinities, -0.0, large ints, exponents), keys of every JSON-able type, escapes, empty
containers; a value json.dumps refuses is refused the same way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc.io.json_text import dumps_indented

CASES = [
    {}, [], (), "s", 1, 2.0, None, True, {"a": []}, {"a": {}}, [[], {}], (1, 2),
    {7: 2, 2.5: "x", True: 1, None: [1.0, float("nan"), float("inf"), -float("inf"), -0.0,
                                     1e-5, 10**30, 1.5e300]},
    {"é\n\"\\\u2028\x00\t": ["é", "a, b", 1]}, [True, False, None, 1], [1, 2.5, True],
    {"x": [{"y": (1, [2, [3, []]])}]}, [1, "a, b"], {"k": [0.1, 2, -3]},
    np.float64(1.5), [np.float64(0.1), 3],
    {"designs": {"prbs": [{"prb": b, "t": [1, 2, 1], "groups": [
        {"group": g, "cells": [0, 1, 2], "c": 0.1 * g, "weight_total": [100.5, 1e-9, 3.0]}
        for g in range(3)]} for b in range(3)]}},
]


@pytest.mark.parametrize("obj", CASES, ids=range(len(CASES)))
def test_the_text_of_json_dumps(obj):
    assert dumps_indented(obj) == json.dumps(obj, indent=2, ensure_ascii=False)


def test_a_value_json_refuses_is_refused():
    for obj in ({"a": np.int64(3)}, [Path("x")], {(1, 2): 1}):
        with pytest.raises(TypeError):
            json.dumps(obj, indent=2, ensure_ascii=False)
        with pytest.raises(TypeError):
            dumps_indented(obj)


@pytest.mark.parametrize("obj", CASES, ids=range(len(CASES)))
def test_sorted_keys_as_json_dumps_sorts_them(obj):
    """risk.json and utility.json: sorted keys (json.dumps sorts the items by the original
    keys, then converts them to text)."""
    try:
        want = json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True)
    except TypeError:  # keys of mixed types: not comparable, refused the same way
        with pytest.raises(TypeError):
            dumps_indented(obj, sort_keys=True)
        return
    assert dumps_indented(obj, sort_keys=True) == want


@pytest.mark.parametrize("obj", [float("nan"), [1.0, float("inf")], {"a": -float("inf")},
                                 {"a": [{"b": float("nan")}]}, [1, "x", float("nan")]])
def test_without_nan_a_non_finite_number_is_refused_as_json_dumps_refuses_it(obj):
    with pytest.raises(ValueError):
        json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False)
    with pytest.raises(ValueError):
        dumps_indented(obj, allow_nan=False)


_leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
_documents = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=4), inner, max_size=5)),
    max_leaves=40)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_documents)
def test_any_document_has_the_text_of_json_dumps(obj):
    """Random documents of the types the reports hold (str keys, numbers, text, nesting):
    the same text as the standard library's for both key orders."""
    for sort_keys in (False, True):
        assert (dumps_indented(obj, sort_keys=sort_keys, allow_nan=False)
                == json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=sort_keys,
                              allow_nan=False))
