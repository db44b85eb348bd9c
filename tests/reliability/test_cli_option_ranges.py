"""Issue 34 item 5 (CLI part): every numeric option of ``sdc`` refuses a value outside its
valid range as a usage error: exit 2 (never 1, never a run), a message naming the option and,
for a number of the right type, "valid range" and the range. Hypothesis draws the option and an
out-of-range value: just past a bound, far past it (10^30, -10^30, 1e308), nan, inf and -inf
for floats, and text that is not a number of the option's type.

The ranges are the ones the CLI declares (``sdc.cli.ranges.in_range`` callbacks); this table
lists them independently, so a range changed in one place and not the other fails here too.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sdc.cli.main import app

runner = CliRunner()
_HUNT = int(os.environ.get("SDC_HYPOTHESIS_EXAMPLES", "0"))


@dataclass(frozen=True)
class Opt:
    """An option, the arguments that make the rest of the command line valid, and its range."""

    args: tuple[str, ...]
    option: str
    lo: float | None
    hi: float | None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False


def _opts(out: str) -> list[Opt]:
    rr_sim = ("rr", "simulate", "--probs", "0.5,0.5", "--out", out)
    return [
        Opt(("design", "job.yaml"), "--keep", 0, 1, lo_open=True),
        Opt(("design", "job.yaml"), "--target", 0, 1, lo_open=True, hi_open=True),
        Opt(("design", "job.yaml"), "--budget", 0, 7 * 24 * 3600, lo_open=True),
        Opt(("design", "job.yaml"), "--limit", 0, 10**9, integer=True),
        Opt(("plan", "job.yaml"), "--limit", 0, 10**9, integer=True),
        Opt(("server", "start"), "--port", 1, 65535, integer=True),
        Opt(("server", "start"), "--idle-minutes", 0.1, 10080),
        Opt(("rr", "design", "--epsilon", "1"), "--k", 2, 1000, integer=True),
        Opt(("rr", "design", "--k", "3"), "--epsilon", 0, 90, lo_open=True),
        Opt(("rr", "design", "--k", "3"), "--gamma", 1, math.exp(90), lo_open=True),
        Opt((*rr_sim, "--epsilon", "1"), "--n", 1, 10_000_000, integer=True),
        Opt((*rr_sim, "--n", "5", "--epsilon", "1"), "--seed", 0, 2**63 - 1, integer=True),
        Opt(("rr", "estimate", "answers.csv", "--epsilon", "1"), "--k", 2, 1000, integer=True),
    ]


def _outside(o: Opt) -> st.SearchStrategy[tuple[str, bool]]:
    """(value text, whether it is a number of the option's type)."""
    if o.integer:
        lo, hi = int(o.lo), int(o.hi)
        nums = st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                         st.sampled_from([lo - 1, hi + 1, -10**30, 10**30]))
        return st.one_of(nums.map(lambda v: (str(v), True)),
                         st.sampled_from(["1.5", "nan", "abc", "", "1e3"]).map(lambda v: (v,
                                                                                         False)))
    below = (st.floats(max_value=o.lo, allow_nan=False, allow_infinity=False) if o.lo_open else
             st.floats(max_value=o.lo, exclude_max=True, allow_nan=False, allow_infinity=False))
    above = st.floats(min_value=o.hi, exclude_min=not o.hi_open, allow_nan=False,
                      allow_infinity=False)
    nums = st.one_of(below, above, st.sampled_from([math.nan, math.inf, -math.inf, 1e308,
                                                    -1e308, o.hi * 1.0000001 + 1e-9]))
    return st.one_of(nums.map(lambda v: (repr(float(v)), True)),
                     st.sampled_from(["abc", "", "1,5", "0x10"]).map(lambda v: (v, False)))


@st.composite
def _case(draw, out: str) -> tuple[Opt, str, bool]:
    o = draw(st.sampled_from(_opts(out)))
    value, numeric = draw(_outside(o))
    return o, value, numeric


def _text(result) -> str:
    return " ".join((result.stdout + result.stderr).replace("│", " ").split())


@pytest.fixture(scope="module")
def out_file(tmp_path_factory):
    return tmp_path_factory.mktemp("rr") / "never-written.csv"


@settings(max_examples=_HUNT or 150, deadline=None, derandomize=not _HUNT)
@given(data=st.data())
def test_out_of_range_options_are_usage_errors(data, out_file):
    o, value, numeric = data.draw(_case(str(out_file)))
    r = runner.invoke(app, [*o.args, f"{o.option}={value}"],
                      env={"COLUMNS": "250", "PREFECT_API_URL": ""})
    text = _text(r)
    assert r.exit_code == 2, (o, value, r.exit_code, text)
    assert o.option in text, (o, value, text)
    if numeric:
        assert "valid range" in text, (o, value, text)
    assert "Traceback" not in text and "not expected" not in text
    assert not out_file.exists()                       # nothing ran


@pytest.mark.parametrize("i", range(len(_opts("x.csv"))),
                         ids=[f"{o.args[0]}-{o.args[1]}{o.option}" for o in _opts("x.csv")])
def test_the_bounds_themselves(i, tmp_path, monkeypatch):
    """Exactly at a closed bound the option is accepted (the command then goes on and may fail
    for another reason, never for the range); at an open bound it is refused."""
    monkeypatch.chdir(tmp_path)                 # `rr simulate` writes its --out here
    o = _opts(str(tmp_path / "answers.csv"))[i]
    for bound, closed in ((o.lo, not o.lo_open), (o.hi, not o.hi_open)):
        text_value = str(int(bound)) if o.integer else repr(float(bound))
        if o.args[0] == "server" or (o.args[0] == "rr" and o.option in ("--n", "--seed")
                                    and bound == o.hi):
            continue   # would start a server / draw 10^7 responses: the range alone is tested
        r = runner.invoke(app, [*o.args, f"{o.option}={text_value}"], env={"COLUMNS": "250"})
        text = _text(r)
        assert ("valid range" in text) != closed, (o, text_value, text)


@pytest.mark.parametrize("args", [("design", "job.yaml", "--keep", "1.5"),
                                  ("design", "job.yaml", "--budget=-5"),
                                  ("design", "job.yaml", "--target", "nan"),
                                  ("plan", "job.yaml", "--limit=-1")])
@pytest.mark.parametrize("json_first", [True, False])
def test_out_of_range_under_json_is_a_json_error_document(args, json_first):
    """Under --json (wherever it stands: it is an eager option) the usage error is one JSON
    error document on stdout (docs/cli_json/error.schema.json), exit 2."""
    import json

    from sdc.cli.json_output import validate

    argv = [*args[:2], "--json", *args[2:]] if json_first else [*args, "--json"]
    r = runner.invoke(app, argv, env={"COLUMNS": "250"})
    assert r.exit_code == 2, r.stdout
    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["command"] == "error" and doc["for"] == args[0] and doc["exit_code"] == 2
    option = args[2].split("=")[0]
    assert f"'{option}'" in doc["message"] and "valid range" in doc["message"]
