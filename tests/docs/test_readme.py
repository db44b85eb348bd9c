"""The README's examples run as written: the Python API block and the config block."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block(after_heading: str, lang: str) -> str:
    section = README.split(after_heading, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m, f"no ```{lang} block after {after_heading!r}"
    return m.group(1)


def test_python_api_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(_block("## Python API", "python"), "README.md", "exec"), ns)  # noqa: S102
    cfg, result = ns["cfg"], ns["result"]
    assert result.certificate <= cfg.risk.xi
    assert len(result.frame) == len(ns["frame"])


def test_python_api_example_runs_on_a_recoded_config(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same block on a config with ``recode:`` (the old example read the CSV itself and
    failed there: the released domain holds band labels, the file raw ages)."""
    text = (ROOT / "configs" / "census_demo.yaml").read_text(encoding="utf-8")
    text = text.replace("age: {range: [0, 91]}",
                        "age: {range: [0, 91], recode: {bands: [0, 18, 25, 35, 45, 55, 65]}}")
    text = text.replace("age: {bands: [0, 18, 25, 35, 45, 55, 65]}", "age: as_is")
    text = text.replace("../data_samples/", str(ROOT / "data_samples") + "/")
    assert "recode" in text
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "census_demo.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(_block("## Python API", "python"), "README.md", "exec"), ns)  # noqa: S102
    assert ns["result"].certificate <= ns["cfg"].risk.xi
    assert set(ns["result"].frame["age"].unique()) <= set(ns["cfg"].key_variables["age"].categories)


def test_config_example_is_a_valid_config(tmp_path: Path) -> None:
    import sdc

    text = _block("## A release config", "yaml")
    (tmp_path / "data").mkdir()
    src = ROOT / "data_samples" / "census_sample.csv"
    os.symlink(src, tmp_path / "data" / "census_sample.csv")
    text = text.replace("../data_samples/census_sample.csv", "data/census_sample.csv")
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    cfg = sdc.load_config(tmp_path / "job.yaml")
    assert cfg.risk.xi == 0.395
    assert set(cfg.key_names) == {"sex", "age", "race"}


def test_readme_is_short_and_its_links_resolve() -> None:
    """A newcomer's page (<= 300 lines); every relative link points at a file of the repo."""
    assert README.count("\n") <= 300
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to missing {target}"
