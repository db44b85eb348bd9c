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
