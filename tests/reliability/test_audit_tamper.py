"""Red-team run: ``sdc audit`` re-derives the release and checks every
figure it records, the public files record for record, and the modes.

One release per engine (pandas, streaming) of ``conftest.JobBuilder``'s job is made through
``sdc release``; each test tampers with a copy (``shutil.copytree`` keeps the modes) and runs
``sdc audit`` on it. Before this change every tampering below passed the audit (exit 0).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sdc.audit.rederive import NOT_CHECKABLE
from sdc.io.write import sha256_bytes

from .conftest import REPO, JobBuilder, contains


@pytest.fixture(scope="module", params=["pandas", "streaming"])
def made(request, tmp_path_factory, cli) -> Path:
    job = JobBuilder(tmp_path_factory.mktemp(f"tamper-{request.param}"))
    res = cli("release", job.write(), "--engine", request.param)
    assert res.exit_code == 0, res.output
    return job.out_dir


@pytest.fixture
def rel(made: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(made, dst)
    return dst


def _audit(rel: Path) -> dict:
    return json.loads((rel / "internal" / "audit.json").read_text(encoding="utf-8"))


def _rewrite(rel: Path, edit) -> None:
    data = _audit(rel)
    edit(data)
    (rel / "internal" / "audit.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def _failed(cli, rel: Path) -> dict[str, str]:
    res = cli("audit", rel, "--json")
    doc = json.loads(res.output)
    assert res.exit_code == (0 if doc["passed"] else 1)
    return {c["name"]: c["detail"] for c in doc["checks"] if not c["ok"]}


def test_untouched_copy_passes(cli, rel: Path) -> None:
    res = cli("audit", rel)
    assert res.exit_code == 0, res.output
    assert contains(res.output, "re-derived release: public files")


def test_internal_folder_0755_with_0644_files(cli, rel: Path) -> None:
    (rel / "internal").chmod(0o755)
    for p in (rel / "internal").iterdir():
        p.chmod(0o644)
    failed = _failed(cli, rel)
    assert set(failed) == {"permissions"}
    assert "internal/ is 0755 (expected 0700)" in failed["permissions"]
    assert "internal/audit.json is 0644 (expected 0600)" in failed["permissions"]


def test_group_writable_public_file(cli, rel: Path) -> None:
    (rel / "public" / "codebook.md").chmod(0o664)
    assert set(_failed(cli, rel)) == {"permissions"}


@pytest.mark.parametrize("field,edit", [
    ("counts.records_changed", lambda a: a["counts"].__setitem__(
        "records_changed", a["counts"]["records_changed"] + 1)),
    ("seed.sha256", lambda a: a["seed"].__setitem__("sha256", "0" * 64)),
    ("seed.path", lambda a: a["seed"].__setitem__("path", "/elsewhere/job.seed")),
    ("blocks[0].changed", lambda a: a["blocks"][0].__setitem__(
        "changed", a["blocks"][0]["changed"] + 3)),
    ("risk.merges", lambda a: a["risk"].__setitem__(
        "merges", a["risk"]["merges"] + ["PRB 3 (sex=Male) merged into PRB 4"])),
    ("counts.cells", lambda a: a["counts"].__setitem__("cells", 1)),
    ("blocks[0].expected_changed", lambda a: a["blocks"][0].__setitem__(
        "expected_changed", 0.5)),
    ("name", lambda a: a.__setitem__("name", "other")),
])
def test_rewritten_figure_fails(cli, rel: Path, field: str, edit) -> None:
    _rewrite(rel, edit)
    failed = _failed(cli, rel)
    assert "re-derived release: audit record" in failed or \
        "audit record: fields from the config" in failed, failed
    assert field in " ".join(failed.values()) or field.split(".")[0] in " ".join(failed.values())


def test_seed_rewrite_named(cli, rel: Path) -> None:
    _rewrite(rel, lambda a: a["seed"].__setitem__("sha256", "0" * 64))
    failed = _failed(cli, rel)
    assert "seed.sha256 recorded 0000000000000000..." in failed["seed file: path and hash"]


def test_csv_edited_and_hash_updated(cli, rel: Path) -> None:
    """An edited microdata.csv whose hash was updated in audit.json: the CSV was never compared
    with the Parquet file or the source. Now every public file is compared with the
    re-derived release, record for record."""
    path = rel / "public" / "microdata.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[5].rstrip("\n").split(",")
    i = header.index("income")
    cells[i] = str(int(cells[i]) + 1)
    lines[5] = ",".join(cells) + "\n"
    data = "".join(lines).encode("utf-8")
    path.write_bytes(data)
    _rewrite(rel, lambda a: a["public_files"].__setitem__("microdata.csv", sha256_bytes(data)))
    failed = _failed(cli, rel)
    assert set(failed) == {"re-derived release: public files",
                           "re-derived release: audit record"}, failed
    assert "public_files.microdata.csv" in failed["re-derived release: audit record"]
    assert re.search(r"microdata.csv: 1 record\(s\) differ from the re-derived release, first "
                     r"record record_id = 5 in \['income'\]",
                     failed["re-derived release: public files"])


def test_missing_seed_file_fails_clearly(cli, rel: Path, made: Path) -> None:
    seed = Path(_audit(rel)["seed"]["path"])
    kept = seed.read_bytes()
    seed.unlink()
    try:
        failed = _failed(cli, rel)
    finally:
        seed.write_bytes(kept)
        seed.chmod(0o600)
    assert "seed file: readable" in failed
    assert "cannot be re-derived" in failed["seed file: readable"]


def test_not_checkable_fields_are_documented() -> None:
    """Every recorded field the audit cannot re-derive is listed in the docs with its
    reason (the rest is compared)."""
    doc = (REPO / "docs" / "RELEASE_FOLDER.md").read_text(encoding="utf-8")
    section = doc[doc.index("Recorded, not checkable"):]
    for key in NOT_CHECKABLE:
        assert f"`{key}`" in section, key


def test_config_copy_is_read_with_the_strict_loader(cli, rel: Path) -> None:
    """The stored config copy is read like the config itself (``sdc.config.load.load_yaml``).
    Old code: ``yaml.safe_load`` took a copy with ``xi`` given twice (hash updated) and the
    audit passed; now the copy is refused, naming the key and both lines."""
    def edit(a: dict) -> None:
        text = a["config"]["text"]
        assert "  xi: 0.395\n" in text
        text = text.replace("  xi: 0.395\n", "  xi: 0.395\n  xi: 0.395\n", 1)
        a["config"]["text"] = text
        a["config"]["sha256"] = sha256_bytes(text.encode("utf-8"))

    _rewrite(rel, edit)
    failed = _failed(cli, rel)
    assert "config copy: parses" in failed
    assert "'xi' is given twice" in failed["config copy: parses"]
