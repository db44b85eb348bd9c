"""Issue 47: a new user's first hour and the messages around it.

- `plan --json` without a config printed nothing on stdout (click's usage box on stderr): a
  usage error of a `--json` command is a JSON error document on stdout, exit 2.
- numpy's RuntimeWarnings reached stderr as Python's file:line dump and were missing from the
  `--json` warnings: one `warning:` line, or listed in the document only.
- `sdc init` on a file with one rare cell said "partition set all records: k=1. Partition more
  coarsely" (nothing to act on before a config exists): it names the rare combination and
  what to do.
- output redirected to a file was padded with spaces to the console's width.
- a script beside a clone folder named `sdc` imported the folder (an empty namespace package).
- the draft's comments contradicted it: its partition-set count and steps described a
  partition the design step had replaced, `merge_along` was called "least important keys
  first" for `importance: high` keys.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from sdc.io.write_stat import VAR_LABEL_LIMIT, _fit_label

from .conftest import REPO, JobBuilder, base_frame, contains


@pytest.mark.parametrize("args", [["plan", "--json"], ["plan", "job.yaml", "--json", "--bogus"],
                                  ["validate", "--json"], ["audit", "--json"]])
def test_a_usage_error_under_json_is_a_json_document(cli, args) -> None:
    res = cli(*args)
    assert res.exit_code == 2, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "error" and doc["for"] == args[0] and doc["exit_code"] == 2
    assert "Missing argument" in doc["message"] or "No such option" in doc["message"]
    from sdc.cli.json_output import validate
    validate(doc)


def test_a_usage_error_without_json_is_clicks_message(cli) -> None:
    res = cli("plan")
    assert res.exit_code == 2 and "Missing argument" in res.output
    assert not res.output.lstrip().startswith("{")


def _perturbed(job: JobBuilder) -> None:
    """A perturb: variable of 30 categories: the DP-PRAM search warns (RuntimeWarning: not
    certified, a local search instead; 3,000 records: 600 do not reach the limit)."""
    job.frame = base_frame(3000)
    rng = np.random.default_rng(5)
    job.frame["occupation"] = rng.integers(1, 31, len(job.frame))
    job.config["perturb"] = {"occupation": {"epsilon": 1.0, "categories": list(range(1, 31))}}


def test_runtime_warnings_go_into_the_json_warnings(job: JobBuilder, cli) -> None:
    _perturbed(job)
    res = cli("plan", job.write(), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)          # nothing else on the output: stderr stays clean
    found = [w for w in doc["warnings"] if w.startswith("RuntimeWarning: ")]
    assert len(found) == 1 and "not certified" in found[0], doc["warnings"]


def test_runtime_warnings_are_one_line_without_json(job: JobBuilder, cli) -> None:
    _perturbed(job)
    res = cli("plan", job.write())
    assert res.exit_code == 0, res.output
    assert res.output.count("warning: RuntimeWarning: ") == 1
    assert "warnings.warn(" not in res.output and ".py:" not in res.output


def test_init_on_a_file_with_one_rare_cell_says_what_to_do(tmp_path, cli) -> None:
    rows = ["id,sex,region"] + [f"{i},{1 + i % 2},{1 + i % 3}" for i in range(500)]
    (tmp_path / "d.csv").write_text("\n".join(rows + ["500,1,9"]) + "\n")
    res = cli("init", tmp_path / "d.csv", "--keys", "sex,region", "--id", "id",
              "-o", tmp_path / "d.yaml")
    assert res.exit_code == 2, res.output
    assert contains(res.output, "only 1 rare combination(s) of the keys sex, region")
    assert contains(res.output, "sex=1, region=9 (1 record)")
    assert contains(res.output, "leave the key that makes them rare out of --keys")
    assert "Partition more coarsely" not in res.output
    assert not (tmp_path / "d.yaml").exists()


@pytest.mark.waits
def test_output_to_a_file_has_no_padding(job: JobBuilder, prefect_api, tmp_path) -> None:
    """`sdc plan` and `sdc release` into a file (not a terminal), with and without COLUMNS."""
    cfg = job.write()
    for columns in ("", "210"):
        for args in (["plan", cfg], ["release", cfg, "--force", "--no-reuse"]):
            out = tmp_path / "out.txt"
            env = {**os.environ, "PYTHONPATH": str(REPO), "SDC_WORKER": "0",
                   "PREFECT_API_URL": prefect_api, "COLUMNS": columns}
            with out.open("w") as f:
                res = subprocess.run([sys.executable, "-c", "import sys; from sdc.cli.entry "
                                      "import main; sys.argv[0] = 'sdc'; main()",
                                      *map(str, args)], stdout=f, stderr=subprocess.STDOUT,
                                     env=env, cwd=job.root, timeout=300, check=False)
            lines = out.read_text().splitlines()
            assert res.returncode == 0, lines
            padded = [ln for ln in lines if ln != ln.rstrip()]
            assert padded == [], padded[:3]


def test_a_script_beside_a_clone_named_sdc_gets_the_package(tmp_path) -> None:
    (tmp_path / "sdc").symlink_to(REPO, target_is_directory=True)
    (tmp_path / "script.py").write_text("import sdc\nprint(sdc.__file__)\n"
                                        "print(callable(sdc.release_frame))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    where, ok = res.stdout.split()
    assert Path(where) == (REPO / "sdc" / "__init__.py").resolve() and ok == "True"


def test_readme_new_job_puts_sdc_on_the_path() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("A new job from your own file", 1)[1].split("```bash", 1)[1]
    assert block.lstrip().startswith(". .venv/bin/activate")


def test_the_drafts_comments_agree_with_the_draft(tmp_path, cli) -> None:
    """The partition-set count of the comment is `sdc plan`'s; every "X no longer partitions
    the file" names a key the partition does not hold; merge_along is not called "least
    important" (the analysis keys are importance: high)."""
    base_frame(3000).to_csv(tmp_path / "d.csv", index=False)
    out = tmp_path / "d.yaml"
    res = cli("init", tmp_path / "d.csv", "--keys", "sex,age,race,region", "--analysis-keys",
              "age,race", "--id", "id", "--drop", "name", "--weight", "weight", "-o", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    partition = yaml.safe_load(text)["partition"]
    for var in re.findall(r"# .*?: (\w+) no longer partitions the file", text):
        assert var not in partition, (var, partition)
    said = int(re.search(r"checked on the data: (\d+) partition sets", text).group(1))
    plan = json.loads(cli("plan", out, "--json").output)
    assert said == len(plan["partition_sets"])
    assert "least important" not in text


def test_fit_label_cuts_a_1mb_label_at_once() -> None:
    """A label cut to Stata's/SPSS's limit took one re-encoding per character removed (a 1 MB
    input label: minutes); one cut now, the same result as cutting character by character."""
    import time

    for text in ("é" * 1_000_000, "x" * 1_000_000, "ab€" * 100):
        t0 = time.thread_time()  # CPU time: a wall bound failed whenever the machine was busy
        for fmt in ("sav", "dta"):
            got = _fit_label(text, fmt, VAR_LABEL_LIMIT)
            size = len(got.encode()) if fmt == "sav" else len(got)
            assert size <= VAR_LABEL_LIMIT[fmt] and got.endswith("…")
            slow = text[:VAR_LABEL_LIMIT[fmt] + 1]
            while (len((slow + "…").encode()) if fmt == "sav" else len(slow + "…")) \
                    > VAR_LABEL_LIMIT[fmt]:
                slow = slow[:-1]
            assert got == slow + "…"
        assert time.thread_time() - t0 < 1.0
