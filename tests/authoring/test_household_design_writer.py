"""`sdc design -o` of a household file writes a config a reviewer can read (issue 31 item 3
for household files): the input's comments, layout and ints kept, changed values in flow style,
a comment block on what changed, a new seed file, relative paths that still name the files."""

from __future__ import annotations

from pathlib import Path

import yaml

from sdc.authoring.household_design import HouseholdCandidate, HouseholdDesign, _Result
from sdc.config.load import load_config

CONFIG = """\
# our household job: reviewed by the methods unit
name: hh
input:
  path: data/hh.csv                  # the survey extract
  household_id: hid
key_variables:
  urbrur: {categories: [1, 2], level: household}   # urban / rural
  sex: {categories: [1, 2]}
  age: {range: [0, 95]}              # years
partition:
  age: {bands: [0, 15, 30, 45, 65]}
risk: {xi: 0.395, small_blocks: calibrate}
seed: {file: secrets/hh.seed}
output: {dir: releases/hh, formats: [parquet]}
"""


def test_household_design_config_keeps_comments_ints_and_gets_a_new_seed(tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hh.csv").write_text("hid,urbrur,sex,age\n1,1,1,30\n")
    src = tmp_path / "hh.yaml"
    src.write_text(CONFIG)
    config = load_config(src)
    data = yaml.safe_load(CONFIG)
    data["key_variables"]["age"]["recode"] = {"bands": [0, 19]}
    data.pop("partition")
    data["risk"]["composition"] = "protect"
    cand = HouseholdCandidate(data=data, recoding={"age": {"name": "2 bands"}},
                              status="certified", certificate=0.395, changed=10,
                              households_changed=3, n_records=40,
                              composition={"person_max_cell_estimate": 0.11})
    d = HouseholdDesign(src.resolve(), config, data, cand, [cand], _Result(0))
    out = tmp_path / "sub" / "designed.yaml"
    d.write(0, out)
    text = out.read_text()
    assert "# our household job: reviewed by the methods unit" in text
    assert "# the survey extract" in text and "# urban / rural" in text and "# years" in text
    assert "age: {range: [0, 95], recode: {bands: [0, 19]}}" in text   # ints, flow style
    assert "risk: {xi: 0.395, small_blocks: calibrate, composition: protect}" in text
    assert "partition" not in yaml.safe_load(text)
    assert "new seed" in text and "2 bands" in text
    written = load_config(out)                     # paths resolve from the new folder
    assert written.input_path == (tmp_path / "data" / "hh.csv").resolve()
    assert written.name == "hh-design"
    seed = Path(yaml.safe_load(text)["seed"]["file"])
    assert seed.name == "hh-design.seed"
    assert (out.parent / seed).resolve().parent == (tmp_path / "secrets").resolve()
