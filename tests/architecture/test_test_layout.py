"""The test suite's own layout.

pytest (rootdir-based "prepend" imports) imports a ``conftest.py`` outside a package under the
module name ``conftest``: a second one in a folder without ``__init__.py`` replaced the root
tests/conftest.py in ``sys.modules``, and every later ``from conftest import run_cli`` failed
(tests/contract/conftest.py, ninth session: 2 errors and 2 failures in ``make test`` only, where
all folders are collected together)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_nested_conftest_is_in_a_package() -> None:
    loose = [str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py")
             if p.parent != TESTS and not (p.parent / "__init__.py").is_file()]
    assert loose == [], f"add an __init__.py beside {loose} (and import its siblings relatively)"


def test_every_timed_test_in_durations_json_exists() -> None:
    """tests/durations.json orders ``make test``'s work longest first by node id: a test renamed
    or moved keeps its old id there and counts as 0.5 s, so it goes out last and runs alone
    while the other workers idle (twelfth session: ses's group, 240 CPU s, weighed 1.5 s after
    its test was renamed, and was the 18-minute runs' long tail). Every id names a test function
    of an existing module; refresh the table (``python tests/durations.py run.xml``) or rename
    the entry with the test."""
    import ast
    import json

    root = TESTS.parent
    defined: dict[str, set[str]] = {}
    stale = []
    for nodeid in json.loads((TESTS / "durations.json").read_text()):
        module, *names = nodeid.split("::")
        if module not in defined:
            path = root / module
            defined[module] = ({n.name for n in ast.walk(ast.parse(path.read_text()))
                                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
                               if path.is_file() else set())
        if names[-1].split("[")[0] not in defined[module]:
            stale.append(nodeid)
    assert stale == [], f"tests/durations.json names tests that do not exist: {stale}"
