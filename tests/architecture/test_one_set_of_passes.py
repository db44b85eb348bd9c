"""One set of passes (docs/ARCHITECTURE.md, issue 45 item 2): the count, identity, apply and
refine passes are defined once, in :mod:`sdc.pipeline.passes`, for person and household files;
a file's stages (:class:`~sdc.pipeline.release.PersonStage`,
:class:`~sdc.pipeline.household_stage.HouseholdFileStage`) are objects the passes call, not a
second pipeline. Checked on the source with ``ast``: no other module of ``sdc`` or ``flows``
defines a pass's per-batch function or driver, or maps a function over a runner's batches."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PASSES = REPO / "sdc" / "pipeline" / "passes.py"
SOURCES = sorted(p for d in ("sdc", "flows") for p in (REPO / d).rglob("*.py"))
#: a pass's per-batch function or its driver: count_batch, _apply_pass, refine_passes, _refine ...
PASS_NAME = re.compile(r"^_*(count|identity|identities|apply|refine)_(batch|batches|pass|passes)$"
                       r"|^_*refine$|^_*refinement$", re.IGNORECASE)


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _second_definitions(path: Path) -> list[str]:
    """A pass defined in ``path``: a function or class with a pass's name, or a call of
    ``runner.map`` (mapping a per-batch function over the input's batches)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and PASS_NAME.match(node.name)):
            bad.append(f"line {node.lineno}: defines {node.name}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "map" and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "runner"):
            bad.append(f"line {node.lineno}: runner.map(...)")
    return bad


def test_the_pass_module_defines_the_four_passes() -> None:
    """:mod:`sdc.pipeline.passes` holds each pass's per-batch function and its driver, and is
    where the runner maps them: the four passes and the apply pass's report part when a
    release that keeps its records defers it (``DeferredReports``, ``release_frame``)."""
    found = _second_definitions(PASSES)
    for name in ("count_batch", "identity_batch", "apply_batch", "refine_batch",
                 "count_pass", "identity_pass", "apply_pass", "Refinement"):
        assert any(f"defines {name}" in b for b in found), name
    assert sum("runner.map" in b for b in found) == 5


@pytest.mark.parametrize("path", [p for p in SOURCES if p != PASSES], ids=_rel)
def test_no_second_definition_of_a_pass(path: Path) -> None:
    """Outside :mod:`sdc.pipeline.passes`: no function or class named as a pass
    (``count_batch``, ``_identity_pass``, ``_refine``, ...) and no ``runner.map``: a new
    kind of file adds a stage object, not its own passes."""
    assert not _second_definitions(path), (
        f"{_rel(path)} defines a pass of its own (the passes are sdc/pipeline/passes.py's; a "
        "file's stage adds what it does to a batch as a stage object): "
        + "; ".join(_second_definitions(path)))
