"""The planning memo of the contract tests (tests/plan_memo.py) cannot hide a
difference between executors: its key leaves out only config fields that name the run, and
the method layer reads none of them; an identical call gets an equal copy, another call its
own plan."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np

from tests import plan_memo

METHOD = Path(__file__).resolve().parents[2] / "sdc" / "method"
#: what reads the run fields the key leaves out (ReleaseConfig: resolve, base_dir,
#: input_path and output_dir read the config file's folder)
RUN_READS = {*plan_memo.RUN_FIELDS, "engine", "base_dir", "_base_dir", "source_path",
             "_source_path", "resolve", "input_path", "output_dir"}
#: the design search parses a node's config relative to the job's folder (it plans through
#: plan_blocks, which the memo does not wrap)
ALLOWED = {("design/evaluate.py", "self.config.base_dir")}


def test_the_method_layer_reads_no_run_field():
    found = set()
    for path in sorted(METHOD.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in RUN_READS:
                found.add((path.relative_to(METHOD).as_posix(), ast.unparse(node)))
    assert found <= ALLOWED, sorted(found - ALLOWED)


def test_an_identical_call_gets_a_copy_and_another_call_its_own_result():
    calls = []

    def plan(a: np.ndarray, *, xi: float) -> dict[str, np.ndarray]:
        calls.append(xi)
        return {"out": a * xi}

    memo = plan_memo.memoized(plan)
    first = memo(np.arange(4), xi=0.5)
    first["out"][0] = 99  # a caller changing its plan changes no later caller's
    again = memo(np.arange(4), xi=0.5)
    other = memo(np.arange(4), xi=0.4)
    third = memo(np.arange(5), xi=0.5)
    assert calls == [0.5, 0.4, 0.5]
    assert again["out"].tolist() == [0, 0.5, 1.0, 1.5]
    assert other["out"].tolist() == [0, 0.4, 0.8, 1.2000000000000002]
    assert len(third["out"]) == 5
    assert pickle.dumps(again) != pickle.dumps(first)
