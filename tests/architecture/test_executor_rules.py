"""Executors run functions and nothing else (docs/ARCHITECTURE.md, issue 30 item 3): what an
executor reads and how the flow and the audit treat it is declared in its registration
(``sdc/executors/registry.py``, ``sdc/executors/__init__.py``); nothing else asks which
executor runs, and no executor asks what kind of file it runs (the pipeline's stages,
:mod:`sdc.pipeline.run`, come from the config). Checked on the source with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ("sdc", "flows") for p in (REPO / d).rglob("*.py"))
REGISTRY = {REPO / "sdc" / "executors" / "registry.py", REPO / "sdc" / "executors" / "__init__.py"}
NAMES = {"pandas", "streaming", "dask"}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def _picks_by_name(call: ast.Call) -> bool:
    """``get_executor("pandas")``, ``get_executor(engine or "pandas")``, ``engine="streaming"``:
    an executor chosen by a name written in the code (the registry's declarations say which
    one: ``recorded_executor``, ``Executor.auditor``)."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    parts = list(call.args) if name == "get_executor" else []
    parts += [k.value for k in call.keywords if k.arg in ("engine", "executor")]
    return any(_is_name(x) for part in parts for x in ast.walk(part))


def test_picking_an_executor_by_name_is_found() -> None:
    """The rule can fail: each form is found, a name in a message is not."""
    src = ("get_executor('pandas')\nreg.get_executor(e or 'pandas')\n"
           "plan_job(p, engine='streaming')\nsay('the dask executor')\n")
    calls = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)]
    assert [_picks_by_name(c) for c in calls] == [True, True, True, False]


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_no_executor_name_branch_outside_the_registry(path: Path) -> None:
    """No ``.batched``, no comparison with an executor's name (``engine == "dask"``) and no
    executor picked by a name written in the code (``get_executor("pandas")``; outside
    sdc/executors) outside the registry and the config's own validation; no ``check_streamable`` (the batch
    reader's refusal) outside the reader: an executor's refusals are ``Executor.check``."""
    if path in REGISTRY:
        return
    bad = []
    config = _rel(path).startswith("sdc/config/")
    reader = _rel(path).startswith("sdc/io/")
    own = _rel(path).startswith("sdc/executors/")   # an executor's module names itself
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "batched":
            bad.append(f"line {node.lineno}: .batched")
        elif isinstance(node, ast.Compare) and not config:
            if any(_is_name(x) for x in [node.left, *node.comparators]):
                bad.append(f"line {node.lineno}: compares with an executor name")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "check_streamable" and not reader):
            bad.append(f"line {node.lineno}: check_streamable (use Executor.check)")
        elif isinstance(node, ast.Call) and not (config or own) and _picks_by_name(node):
            bad.append(f"line {node.lineno}: picks an executor by its name")
    assert not bad, f"{_rel(path)} asks which executor runs:\n" + "\n".join(bad)


#: the pipeline's household passes (the release's and the count's, split by job)
HOUSEHOLD_PASSES = ("sdc.pipeline.households", "sdc.pipeline.household_count",
                    "sdc.pipeline.household_stage")


@pytest.mark.parametrize("path", sorted((REPO / "sdc" / "executors").glob("*.py")), ids=_rel)
def test_no_executor_asks_what_kind_of_file_it_runs(path: Path) -> None:
    """The stages of a household file are the pipeline's (:mod:`sdc.pipeline.run`): no
    executor tests ``input.household_id`` or imports the household passes itself."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(
                isinstance(x, ast.Attribute) and x.attr == "household_id"
                for part in [node.left, *node.comparators] for x in ast.walk(part)):
            bad.append(f"line {node.lineno}: tests household_id")
        elif isinstance(node, ast.ImportFrom) and node.module in HOUSEHOLD_PASSES:
            bad.append(f"line {node.lineno}: imports {node.module}")
    assert not bad, f"{_rel(path)} runs a stage of the pipeline itself:\n" + "\n".join(bad)


def test_the_registry_declares_what_the_flow_and_the_audit_ask() -> None:
    """Every executor declares whether it reads the input whole, which executor audits its
    releases and whether the audit record names it; each of them runs the one pipeline."""
    from sdc.executors.registry import executor_names, get_executor

    for name in executor_names():
        ex = get_executor(name)
        assert isinstance(ex.reads_whole_input, bool) and isinstance(ex.in_audit_record, bool)
        assert ex.auditor.name in executor_names()
        assert ex.auditor.auditor is ex.auditor  # the auditor audits its own releases
