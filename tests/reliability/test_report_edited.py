"""Issue 47: `sdc report` after one field was added to risk.json exited 1 (ReportSchemaError,
"not expected"), also with --force. An auditor's page shows what the release recorded: a report
file edited after the release (a field added, a figure changed, schema-valid or not) is refused
with exit 2 naming the file and the fix, with or without --force; the release's own files are
re-rendered (exit 0)."""

from __future__ import annotations

import json

import pytest

from .conftest import JobBuilder, contains


@pytest.fixture
def released(job: JobBuilder, cli) -> JobBuilder:
    assert cli("release", job.write()).exit_code == 0
    return job


def _edit(path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("name,change", [
    ("risk.json", lambda d: d.update(note="checked by Ann")),          # an unknown field
    ("risk.json", lambda d: d.update(xi=0.9)),                         # schema-valid figure
    ("utility.json", lambda d: d.update(extra=[1, 2])),
])
@pytest.mark.parametrize("force", [False, True])
def test_an_edited_report_file_is_refused_with_exit_2(released: JobBuilder, cli, name, change,
                                                       force) -> None:
    internal = released.out_dir / "internal"
    page = (internal / "report.html").read_bytes()
    _edit(internal / name, change)
    res = cli("report", released.out_dir, *(["--force"] if force else []))
    assert res.exit_code == 2, res.output
    assert contains(res.output, f"{name} is not the file the release wrote")
    assert contains(res.output, "not even with --force")
    assert "not expected" not in res.output and "Traceback" not in res.output
    assert (internal / "report.html").read_bytes() == page


def test_the_releases_own_reports_are_re_rendered(released: JobBuilder, cli) -> None:
    internal = released.out_dir / "internal"
    page = (internal / "report.html").read_bytes()
    (internal / "report.html").unlink()
    assert cli("report", released.out_dir).exit_code == 0
    assert (internal / "report.html").read_bytes() == page


def test_a_report_file_that_is_not_json_is_exit_2(released: JobBuilder, cli) -> None:
    """Variant: without audit.json's record (an old release) the file is still read; broken
    JSON or a schema error is exit 2 naming the file."""
    internal = released.out_dir / "internal"
    audit = json.loads((internal / "audit.json").read_text())
    del audit["internal_files"]["risk.json"]
    (internal / "audit.json").write_text(json.dumps(audit))
    (internal / "risk.json").write_text("{not json")
    res = cli("report", released.out_dir)
    assert res.exit_code == 2 and contains(res.output, "risk.json is not valid JSON")
    (internal / "risk.json").write_text('{"schema_version": "sdc-risk/1"}')
    res = cli("report", released.out_dir)
    assert res.exit_code == 2 and contains(res.output, "risk.json: field")
