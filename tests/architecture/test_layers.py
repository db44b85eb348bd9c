"""The house rules of docs/ARCHITECTURE.md, checked on the source: no module imports a module of a
higher layer, the config model imports nothing of the engine, and no package imports another in a
circle. Every ``import`` statement counts, also those inside functions (lazy imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# low -> high; a module may import its own layer and the layers below it
LAYERS = ["sdc.errors", "sdc.config", "sdc.mechanisms", "sdc.method", "sdc.io", "sdc.reports",
          "sdc.publish", "sdc.pipeline", "sdc.series", "sdc.executors", "sdc.release", "sdc.audit",
          "sdc.authoring", "flows", "sdc.cli"]
# modules outside the layers: the public API facade (re-exports config and engine, so importing
# it counts as importing the engine) and the sample generator (imports numpy only)
FACADES = {"sdc", "sdc.samples"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int | None:
    best = None
    for i, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            best = i
    return best


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            # "from sdc import io" imports the submodule sdc.io
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                    if (REPO / node.module.replace(".", "/") / a.name).exists()
                    or (REPO / (node.module.replace(".", "/") + f"/{a.name}.py")).exists()]
    return out


SOURCES = sorted(p for d in ("sdc", "flows") for p in (REPO / d).rglob("*.py"))


def test_every_module_belongs_to_a_layer() -> None:
    stray = [_module_name(p) for p in SOURCES
             if _layer(_module_name(p)) is None and _module_name(p) not in FACADES]
    assert not stray, f"modules outside every layer of docs/ARCHITECTURE.md: {stray}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_import_of_a_higher_layer(path: Path) -> None:
    me = _module_name(path)
    mine = _layer(me)
    if mine is None:
        return
    bad = []
    for line, target in _imports(path):
        # the facade re-exports config and engine: it counts as the engine layer
        theirs = LAYERS.index("sdc.method") if target == "sdc" else _layer(target)
        if theirs is not None and theirs > mine:
            bad.append(f"line {line}: {target} ({LAYERS[theirs]}) is above {LAYERS[mine]}")
    assert not bad, f"{me} imports upwards:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", ["model", "base", "keys", "sections"])
def test_config_model_imports_nothing_of_the_engine(name: str) -> None:
    targets = [t for _, t in _imports(REPO / "sdc" / "config" / f"{name}.py")]
    assert not [t for t in targets if t.startswith("sdc.") and not t.startswith("sdc.config")
                and t != "sdc.errors"], targets


def test_no_circular_imports_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in SOURCES}
    for p in SOURCES:
        graph[_module_name(p)] = {t for _, t in _imports(p) if t in names and t != _module_name(p)}
    # package __init__ re-exports are facades of their own package; skip edges into them from inside
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not m.startswith(d + ".")}
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if seen.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in seen:
                visit(d)
        stack.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_import_of_another_modules_private_names(path: Path) -> None:
    """A name with a leading underscore is its module's own: another module that needs it
    needs a public name (and the module a public promise), not a private import."""
    me = _module_name(path)
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                and node.module.split(".")[0] in ("sdc", "flows") and node.module != me):
            bad += [f"line {node.lineno}: {a.name} from {node.module}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, f"{me} imports private names of other modules:\n" + "\n".join(bad)


MAX_MODULE_LINES = 600


def test_no_module_over_600_lines() -> None:
    """One room per idea: a module over 600 lines holds two ideas (docs/ARCHITECTURE.md); split
    it along them (e.g. sdc/reports/household_verdicts.py out of sdc/reports/households.py)."""
    over = {str(p.relative_to(REPO)): n for p in sorted((REPO / "sdc").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"
