"""Issue 47: YAML merge keys and long values in configs.

- ``risk: {<<: [{xi: 0.9}, {xi: 0.5}]}`` released at xi 0.5 without a word (the YAML merge spec
  gives 0.9, PyYAML the last mapping; the duplicate-key guard did not look inside merge
  sequences). Now refused with exit 2 and both lines; a key written in the mapping itself
  still overrides merged ones (docs/CONFIG.md). The property test draws merge sequences of
  random mappings (flow and block style, anchors, nested merges): every config either is
  refused with :class:`ConfigYAMLError` or reads as the merge spec says, and it is refused
  exactly when two merged mappings give one key different values.
- A 1 MB label aliased 50,000 times (under the 100,000 alias limit) did not finish `sdc plan`
  in 120 s (the control-character check searched the same 1 MB once per alias), and an
  error naming such a value was 1-6 MB long. Now each distinct text is searched once and
  every error message cuts long values to their start, end and length.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc.cli.common import LONG_MESSAGE, shorten
from sdc.config.load import ConfigYAMLError, control_characters, load_yaml

from .conftest import JobBuilder, contains


def _with_risk(job: JobBuilder, risk_text: str) -> str:
    text = yaml.safe_dump(job.config, sort_keys=False)
    start = text.index("risk:")
    end = text.index("seed:")
    return text[:start] + risk_text + text[end:]


@pytest.mark.parametrize("risk", [
    "risk: {<<: [{xi: 0.9}, {xi: 0.5}], theta: theorem}\n",
    "base: &a {xi: 0.9}\nrisk:\n  <<: [*a, {xi: 0.5}]\n",
])
def test_two_merged_mappings_giving_xi_are_refused(job: JobBuilder, cli, risk: str) -> None:
    job.config_text = _with_risk(job, risk)
    res = cli("plan", job.write())
    assert res.exit_code == 2, res.output
    assert contains(res.output, "key 'xi' is given by two mappings of one merge")
    assert contains(res.output, "the YAML merge spec: the first; PyYAML: the last")
    assert "Traceback" not in res.output


def test_a_key_written_beside_the_merge_wins_and_releases(job: JobBuilder, cli) -> None:
    """The documented way: the explicit key overrides both merged mappings (every YAML tool
    agrees), and the release records that xi."""
    job.config_text = _with_risk(job, "risk: {<<: [{xi: 0.9}, {xi: 0.5}], xi: 0.395}\n")
    res = cli("release", job.write())
    assert res.exit_code == 0, res.output
    import json
    audit = json.loads((job.out_dir / "internal" / "audit.json").read_text())
    assert audit["risk"]["xi"] == 0.395


def test_merge_variants() -> None:
    # the same anchor merged twice, equal scalars: no order can differ
    assert load_yaml("a: &a {x: 1}\nb: {<<: [*a, *a]}\n")["b"] == {"x": 1}
    assert load_yaml("b: {<<: [{x: 1}, {x: 1}]}\n")["b"] == {"x": 1}
    # disjoint keys merge; a single merged mapping is overridden by the mapping's own key
    assert load_yaml("b: {<<: [{x: 1}, {y: 2}]}\n")["b"] == {"x": 1, "y": 2}
    assert load_yaml("a: &a {x: 1}\nb: {<<: *a, x: 2}\n")["b"] == {"x": 2}
    # a nested merge: the key reaches the sequence through another merge
    with pytest.raises(ConfigYAMLError, match=r"key 'x' is given by two mappings .* 'c'"):
        load_yaml("a: &a {x: 1}\nb: &b {<<: *a}\nc: {<<: [*b, {x: 2}]}\n")
    # block style, the lines named
    with pytest.raises(ConfigYAMLError, match=r"lines 2 and 4"):
        load_yaml("a: &a\n  x: 1\nb: &b\n  x: 2\nc:\n  <<: [*a, *b]\n")


_KEYS = st.sampled_from(["xi", "theta", "kmin", "small_blocks"])
_VALS = st.sampled_from([0.5, 0.9, "theorem", 3, "merge"])


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(maps=st.lists(st.dictionaries(_KEYS, _VALS, max_size=3), min_size=1, max_size=4),
       own=st.dictionaries(_KEYS, _VALS, max_size=2),
       anchors=st.booleans(), block=st.booleans())
def test_merge_sequences_read_as_the_spec_or_are_refused(maps: list[dict[str, Any]],
                                                          own: dict[str, Any], anchors: bool,
                                                          block: bool) -> None:
    def flow(d: dict[str, Any]) -> str:
        return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"

    head = "".join(f"m{i}: &m{i} {flow(m)}\n" for i, m in enumerate(maps)) if anchors else ""
    seq = ", ".join(f"*m{i}" if anchors else flow(m) for i, m in enumerate(maps))
    if block:
        body = f"risk:\n  <<: [{seq}]\n" + "".join(f"  {k}: {v}\n" for k, v in own.items())
    else:
        body = f"risk: {{<<: [{seq}]{''.join(f', {k}: {v}' for k, v in own.items())}}}\n"
    conflict = any(k not in own and any(k in m2 and m2[k] != m1[k] for m2 in maps[i + 1:])
                   for i, m1 in enumerate(maps) for k in m1)
    spec: dict[str, Any] = {}
    for m in maps:                      # the merge spec: earlier mappings win
        for k, v in m.items():
            spec.setdefault(k, v)
    spec.update(own)                    # and the mapping's own keys win over all
    try:
        got = load_yaml(head + body)["risk"]
    except ConfigYAMLError as e:
        assert conflict, (head + body, e)
        assert "given by two mappings of one merge" in str(e)
        return
    assert not conflict, head + body
    assert got == spec


# -- long values ---------------------------------------------------------------------------------
def test_a_1mb_label_aliased_many_times_is_checked_once() -> None:
    """20,000 aliases of a 1 MB label: before, one regex search of 1 MB per alias (~20 ms
    each: 400 s); now one search. The YAML parse itself (pure-Python PyYAML) takes ~4 s of
    this; the bound leaves room for a slow machine."""
    big = "x" * 1_000_000
    labels = "0: &big " + big + ", " + ", ".join(f"{i}: *big" for i in range(1, 20_000))
    text = f"key_variables:\n  age: {{range: [0, 20000], labels: {{{labels}}}}}\n"
    t0 = time.thread_time()  # CPU time, not wall: under make test a test mostly waits for a core
    data = load_yaml(text)
    assert control_characters(data) == []
    assert time.thread_time() - t0 < 60


def test_a_control_character_in_an_aliased_label_is_named_at_every_use() -> None:
    data = load_yaml("key_variables:\n  a: {categories: [1, 2], labels: {1: &l \"x\\ny\", "
                     "2: *l}}\n")
    assert [w for w, _, _ in control_characters(data)] == ["key_variables.a.labels.1",
                                                           "key_variables.a.labels.2"]


def test_long_values_are_cut_in_messages(job: JobBuilder, cli) -> None:
    """An error naming a 1 MB value (an unknown key given it, 50 categories aliasing it):
    the message stays short and still says where and what to do."""
    big = "x" * 1_000_000
    text = yaml.safe_dump(job.config, sort_keys=False)
    text = text.replace("name: job\n", f"name: job\nextra: &big {big}\n")
    text = text.replace("  sex:\n", "  sex:\n    label: *big\n", 1)
    job.config_text = text
    res = cli("plan", job.write())
    assert res.exit_code == 2
    assert len(res.output) < 3000, len(res.output)
    assert contains(res.output, "extra: unknown key")
    assert "[1,000,000 characters]" in res.output


def test_shorten_keeps_the_start_the_end_and_short_messages() -> None:
    assert shorten("a short message 'x'") == "a short message 'x'"
    msg = "column 'c' holds '" + "v" * 5000 + "'; fix: drop it"
    out = shorten(msg)
    assert out.startswith("column 'c' holds 'vvv") and out.endswith("; fix: drop it")
    assert "[5,000 characters]" in out and len(out) < 1000
    spaced = "lorem ipsum " * 100_000 + "the fix"
    out = shorten(spaced)
    assert len(out) < LONG_MESSAGE + 100 and out.endswith("the fix")
