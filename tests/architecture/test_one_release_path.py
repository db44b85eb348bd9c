"""One release path (docs/ARCHITECTURE.md, issue 30 item 1): the executors, the audit, the
authoring commands (``sdc init``, ``sdc design``) and the CLI reach records through the one
pipeline (:mod:`sdc.pipeline`), and nothing imports the whole-frame release it replaced.

Checked on the source with ``ast`` (imports inside functions included). Run as a script, it
prints the import graph's edges into ``sdc.pipeline`` from those packages:
``python tests/architecture/test_one_release_path.py``."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: the packages that must reach records through the pipeline
USERS = ("sdc.executors", "sdc.audit", "sdc.authoring", "sdc.cli", "sdc.release")
#: the deleted whole-frame path: no module may import these
DELETED_MODULES = {"sdc.method.apply"}
DELETED_NAMES = {"assemble_release", "public_records", "build_reports", "release_households",
                 "ReleaseResult", "apply_plan", "HouseholdStage",
                 "composition_risk", "household_section", "household_utility", "records_bytes"}


def _module(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(module imported, name or "", line) of every import of ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.module, a.name, node.lineno) for a in node.names]
    return out


def _sources() -> list[Path]:
    return sorted(p for d in ("sdc", "flows", "tests", "benchmarks")
                  for p in (REPO / d).rglob("*.py"))


def pipeline_edges() -> list[tuple[str, str]]:
    """(importer, sdc.pipeline module) for every importer in :data:`USERS`."""
    edges = set()
    for path in sorted((REPO / "sdc").rglob("*.py")):
        mod = _module(path)
        if not mod.startswith(USERS):
            continue
        for imported, name, _ in _imports(path):
            target = imported if imported != "sdc.pipeline" else f"sdc.pipeline.{name}"
            if target.startswith("sdc.pipeline"):
                edges.add((mod, target))
    return sorted(edges)


def test_the_pipeline_is_what_the_executors_audit_authoring_and_cli_use() -> None:
    """The registry opens runners and runs :mod:`sdc.pipeline.run`; the audit re-derives
    through an executor; ``sdc init`` and ``sdc design`` count/plan/release with the
    pipeline (directly or through the registry)."""
    edges = pipeline_edges()
    importers = {a for a, _ in edges}
    assert ("sdc.executors.registry", "sdc.pipeline.run") in edges
    assert "sdc.authoring.draft" in importers  # sdc init: the count pass and plan_cells
    text = (REPO / "sdc" / "authoring" / "household_design.py").read_text(encoding="utf-8")
    assert "get_executor" in text  # sdc design of a household file: the pipeline's release


def test_nothing_imports_the_deleted_whole_frame_path() -> None:
    """``sdc.method.apply`` (``release_frame``'s own whole-frame release, ``ReleaseResult``)
    and the reports/public files built from its released frame are gone: no import of them
    anywhere (sources, tests, benchmarks)."""
    bad = []
    for path in _sources():
        if path == Path(__file__).resolve():
            continue
        for imported, name, line in _imports(path):
            if imported in DELETED_MODULES or name in DELETED_NAMES:
                bad.append(f"{path.relative_to(REPO)}:{line}: {imported} {name}".rstrip())
    for mod in DELETED_MODULES:
        assert not (REPO / (mod.replace(".", "/") + ".py")).exists(), mod
    assert not bad, "imports of the deleted whole-frame path:\n" + "\n".join(bad)


def test_release_frame_is_the_pipeline_on_one_batch() -> None:
    """The library's ``sdc.release_frame`` is the in-memory runner's call of the pipeline."""
    import sdc
    from sdc.executors.memory import release_frame

    assert sdc.release_frame is release_frame
    imports = {m for m, _, _ in _imports(REPO / "sdc" / "executors" / "memory.py")}
    assert "sdc.pipeline.run" in imports


if __name__ == "__main__":
    for a, b in pipeline_edges():
        print(f"{a} -> {b}")
    sys.exit(0)
