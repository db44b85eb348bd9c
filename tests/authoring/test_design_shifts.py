"""``sdc design``: what each design lets move, key by key, and whether the declared importance
was honoured (sdc.authoring.design_shifts; docs/DESIGN.md, "What each key pays", issue 49).

Exact tests: every key's share of records changed adds up to the node's expected changed
keys (changed share x keys changed per moved record: the same NZY figures, summed two ways);
a key held ``as_is`` with no merged sets changes for no record; the reasons an important
partition was not taken; and the terminal output at 80 columns.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import run_cli

from sdc.authoring.design import design_document, run_design
from sdc.authoring.design_shifts import importance_notes, key_moves
from sdc.method.design import Node
from sdc.method.design.rule import DesignResult

sys.path.insert(0, str(Path(__file__).parents[1] / "method"))
from test_design_importance import _write  # noqa: E402


@pytest.fixture(scope="module")
def designed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shifts")
    p = _write(tmp, {"yb": "high", "ed": "high"})
    p.write_text(p.read_text().replace("dir: out", "dir: rel"))
    return p, run_design(p, budget=20)


def test_every_key_of_every_point_has_its_share_changed(designed):
    _, d = designed
    doc = design_document(d)
    keys = ["yb", "mb", "ed", "urban"]
    for p in [doc["recommended"], *doc["frontier"]]:
        moves = p["key_moves"]
        assert list(moves) == keys           # held and free keys alike
        total = sum(m["records_changed"] for m in moves.values())
        assert total == pytest.approx(p["share_changed"] * p["keys_changed_when_moved"],
                                      rel=1e-9, abs=1e-12)
        for k, m in moves.items():
            assert m["partition"] == ("held" if p["partition"].get(k) == "as_is" else
                                      "free" if k not in p["partition"] else "confined")
    rec = doc["recommended"]
    # the important partition: ed held; the free keys pay (mb, urban change most)
    assert rec["partition_variant"] == "important"
    free = [m["records_changed"] for k, m in rec["key_moves"].items() if k in ("mb", "urban")]
    assert min(free) > rec["key_moves"]["ed"]["records_changed"]


def test_an_important_key_that_still_changes_is_named(designed):
    _, d = designed
    r = d.result
    rec = r.nodes[r.recommended]
    share = key_moves(rec, r.keys)["yb"]["records_changed"]
    notes = importance_notes(r)
    if share >= 0.001:
        assert any(n.startswith("yb (declared important) still changes for") for n in notes)
    assert not any(n.startswith("ed ") for n in notes) or \
        key_moves(rec, r.keys)["ed"]["records_changed"] >= 0.001


def _node(variant, status="certified", share=0.1, note="", part=None):
    return Node(levels=(0, 0), variant=variant, status=status, changed_share=share,
                changed=share * 100, note=note, partition=part or {},
                key_change={"a": 0.0, "b": 1.0})


def test_why_the_important_partition_was_not_taken():
    """The recommendation under the config's partition: each important variant of its
    recoding says why it was not taken (refused with its note, more records changed, not
    evaluated); none without declared importance."""
    nodes = [_node("config", share=0.10, part={}),
             _node("important", status="refused", note="PRB 3: risk 0.6 > xi"),
             _node("all but the least important", share=0.25, part={"a": "as_is"})]
    res = DesignResult(keys=["a", "b"], cands={}, nodes=nodes, frontier=[0], recommended=0,
                       current=0, fine_entropy=1.0, n_records=100, seconds=0.0, keep=0.7,
                       complete=True, importance={"a": 1.6, "b": 0.4})
    notes = importance_notes(res)
    assert any("'important' was refused: PRB 3: risk 0.6 > xi" in n for n in notes)
    assert any("'all but the least important' changes 25.0% of the records against 10.0%"
               in n for n in notes)
    res.nodes = [nodes[0]]
    assert any("not evaluated" in n for n in importance_notes(res))
    res.importance = {}
    assert importance_notes(res) == []


def test_the_terminal_shows_every_key_within_80_columns(designed, tmp_path):
    p, _ = designed
    out = tmp_path / "imp-design.yaml"
    r = run_cli("design", p, "--budget", "20", "--verbose", "-o", out, columns=80)
    assert r.exit_code == 0, r.text
    for k in ("yb", "mb", "ed", "urban"):
        assert f"{k}: keeps" in r.text
    assert "PRAM changes it for" in r.text and "(free)" in r.text and "(held)" in r.text
    assert "node " in r.text and "changed):" in r.text       # --verbose: every point
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert "Records whose key PRAM changes" in out.read_text()
