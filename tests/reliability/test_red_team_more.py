"""Red-team run (issue 20), the cases left open by the first round: each a test that fails on
the code before its fix. Listed in docs/RELIABILITY.md, section "Red-team run (issue 20)",
subsection "Second round".

The releases run through the CLI (``cli`` fixture: typer's CliRunner, in-process) on the small
job of ``conftest.JobBuilder`` unless a case needs a subprocess.
"""

from __future__ import annotations

import pytest

from .conftest import JobBuilder, contains

USER = 2


def _refused(job: JobBuilder, res, *fragments: str) -> None:
    assert res.exit_code == USER, res.output
    assert "Traceback" not in res.output
    missing = [f for f in fragments if not contains(res.output, f)]
    assert not missing, f"missing {missing} in:\n{res.output}"
    assert not job.leftovers(), job.leftovers()


# -- variable labels ---------------------------------------------------------------------------
def test_variable_label_of_an_absent_column_is_refused(job: JobBuilder, cli) -> None:
    """Old code: ``input.labels: {incme: ...}`` (a typo) was accepted silently (exit 0) and the
    label reached the codebook. Now validate and release refuse it (exit 2), naming it."""
    job.config["input"]["labels"] = {"income": "Yearly income", "incme": "Typo of income"}
    path = job.write()
    for cmd in ("validate", "release"):
        res = cli(cmd, path)
        _refused(job, res, "incme", "column present", "input.labels")


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_variable_label_of_a_dropped_column_is_not_published(job: JobBuilder, cli,
                                                             engine: str) -> None:
    """Old code: the label of ``name`` (under ``input.drop``) and of the input's id were
    listed in the public codebook. Now only labels of published columns appear."""
    job.config["input"]["labels"] = {"income": "Yearly income", "name": "Full name (secret)",
                                     "id": "Register number"}
    if engine == "pandas":
        job.config["output"]["formats"] = ["parquet", "csv", "sav"]
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    codebook = (job.out_dir / "public" / "codebook.md").read_text(encoding="utf-8")
    assert "Yearly income" in codebook
    assert "Full name" not in codebook and "Register number" not in codebook
    if engine == "pandas":
        _check_sav_labels(job)
    assert cli("audit", job.out_dir).exit_code == 0


def _check_sav_labels(job: JobBuilder) -> None:
    import pyreadstat

    _, meta = pyreadstat.read_sav(str(job.out_dir / "public" / "microdata.sav"),
                                  metadataonly=True)
    labels = dict(zip(meta.column_names, meta.column_labels, strict=True))
    assert labels["income"] == "Yearly income"
    assert "Full name (secret)" not in [t for t in labels.values() if t]
