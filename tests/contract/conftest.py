"""The contract's shared fixtures: the planning memo (tests/plan_memo.py: a case planned by
several executors, audits and the library in one process is planned once) and the in-memory
reference release of each case.

The reference lives here, not in test_executors.py: pytest imports that file as
``test_executors`` while test_memory_executor.py imported it as
``tests.contract.test_executors``, two modules with a reference cache each, so every case's
reference was released twice per worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plan_memo import plan_memo  # noqa: F401 - an autouse fixture

from .test_executors import _files, _input, _release

#: the in-memory executor's release of each case, made once per test process (per xdist worker)
_REFERENCE: dict[str, tuple[Path, dict[str, Any]]] = {}


@pytest.fixture
def reference(prefect_harness, tmp_path_factory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The in-memory executor's release of every case, the reference: each case released on
    first use (a case's tests share one ``xdist_group``, so one worker releases it)."""

    class Cases(dict):
        def __missing__(self, case: str) -> tuple[Path, dict[str, Any]]:
            if case not in _REFERENCE:
                root = tmp_path_factory.mktemp(f"contract-ref-{case}")
                inp = _input(root, case)
                _REFERENCE[case] = (inp, _files(_release(root, case, "pandas", inp)))
            return _REFERENCE[case]

    return Cases()
