"""The release config model: strict keys, dotted error paths, placeholders."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

import sdc
from sdc.config.model import OutputSpec

BASE = {
    "name": "t",
    "input": {"path": "x.csv"},
    "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 99]}},
    "partition": {"sex": "as_is", "age": {"bands": [0, 18, 65]}},
    "risk": {"xi": 0.395},
    "seed": 1,
}


def _with(**over):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for dotted, value in over.items():
        node = d
        *path, last = dotted.split("__")
        for p in path:
            node = node[p]
        node[last] = value
    return d


def test_valid_config_resolves_relative_paths(tmp_path):
    cfg = sdc.parse_config(_with(output={"dir": "out/{month}"}), base_dir=tmp_path)
    assert cfg.input_path == tmp_path / "x.csv"
    # the month read before and after: a run across a month's end sees one of the two
    before = datetime.now(UTC).strftime("%Y-%m")
    got = cfg.output_dir
    assert got in {tmp_path / "out" / m for m in (before, datetime.now(UTC).strftime("%Y-%m"))}
    assert OutputSpec(dir=Path("r/{date}")).dir_for(datetime(2026, 1, 2, tzinfo=UTC)) == Path("r/2026-01-02")


@pytest.mark.parametrize("over,fragment", [
    ({"risk__xy": 1}, "risk.xy: unknown key"),
    ({"risk__xi": "high"}, "risk.xi: xi must be a number"),
    ({"risk__xi": 0.2}, "between 1/3 and 1"),
    ({"risk__small_blocks": "drop"}, "risk.small_blocks"),
    ({"key_variables__age": {"range": [9, 1]}}, "lo <= hi"),
    ({"key_variables__age": {"categories": [1, 1]}}, "more than once"),
    ({"partition__age": {"bands": [0, 65, 18]}}, "strictly increasing"),
    ({"partition__height": "as_is"}, "not declared under key_variables"),
    ({"partition__sex": {"groups": {"a": [1]}}}, "categories [2] of sex are in no group"),
    ({"partition__sex": {"groups": {"a": [1, 2], "b": [2]}}}, "in both 'a' and 'b'"),
    ({"output": {"dir": "r/{when}"}}, "unknown placeholder {when}"),
    ({"name": "a b"}, "name must be letters"),
    ({"key_variables__sex": {"categories": [True, False]}}, "key_variables.sex.categories.0"),
    ({"input__drop": ["sex"]}, "a key cannot be dropped"),
])
def test_bad_configs_name_the_key(over, fragment):
    with pytest.raises(sdc.ConfigError) as err:
        sdc.parse_config(_with(**over))
    assert fragment in str(err.value)


def test_load_config_errors_name_the_file(tmp_path):
    with pytest.raises(sdc.ConfigError, match="does not exist"):
        sdc.load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(sdc.ConfigError, match="not valid YAML at line"):
        sdc.load_config(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(sdc.ConfigError, match="is empty"):
        sdc.load_config(empty)
