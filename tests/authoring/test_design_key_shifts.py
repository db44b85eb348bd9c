"""``sdc design``: the expected shift of the outcome's mean by every key's category, in SE, for
the keys a design holds and for those it lets move (sdc.method.design.shifts; docs/DESIGN.md,
"What each key pays", issue 49 item 4).

Exact test: on a tiny file (600 records) the shift of a key left free is recomputed by brute
force, record by record (each record of a sensitive cell stays with probability
1 - theta_b / t_c and goes to each other cell of its PRB with theta_b / (t_c (k_b - 1)), the
design's move model), its SE from the records' own standard deviation: the figures agree to
1e-9 (floating sums, no sampling: no tolerance from a variance is needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from sdc.authoring.design import count_declared, design_document, run_design
from sdc.authoring.design_outcome import NO_OUTCOME, outcome_sums
from sdc.method.design.candidates import candidates
from sdc.method.design.evaluate import Context, certify
from sdc.method.design.shifts import MIN_GROUP

sys.path.insert(0, str(Path(__file__).parents[1] / "method"))
from test_design_importance import _write  # noqa: E402

KEYS = ["yb", "mb", "ed", "urban"]


def _file(tmp: Path, analyses: bool) -> Path:
    p = _write(tmp, {"yb": "high", "ed": "high"})
    d = pd.read_csv(tmp / "d.csv")
    rng = np.random.default_rng(11)
    d["y"] = 3.0 * d["urban"] + 0.2 * d["ed"] + rng.normal(size=len(d))  # urban matters
    d.to_csv(tmp / "d.csv", index=False)
    text = p.read_text().replace("dir: out", "dir: rel")
    if analyses:
        text += "utility:\n  analyses:\n  - y ~ urban + ed\n"
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def designed(tmp_path_factory):
    p = _file(tmp_path_factory.mktemp("keyshift"), analyses=True)
    return p, run_design(p, budget=20)


def _brute(config, d: pd.DataFrame, ctx: Context, levels, variant) -> dict[str, float]:
    """Each key's largest expected group-mean shift (SE), record by record."""
    fine = ctx.fine
    src = config.input_key_variables
    code = {tuple(int(x) for x in row): j for j, row in enumerate(fine.key_codes)}
    dec = np.column_stack([d[k].map({v: i for i, v in enumerate(src[k].domain)}).to_numpy()
                           for k in KEYS])
    fine_of = np.array([code[tuple(int(x) for x in r)] for r in dec])
    assert (np.bincount(fine_of, minlength=fine.n_cells) == fine.frequency).all()
    cells, fine_to_node = ctx.aggregate(levels)
    cfg, part = ctx._node_part(cells, levels, variant, {})
    bplan, _ = certify(part, cfg)
    sens = np.flatnonzero(part.sensitive)
    block_of = dict(zip(sens, bplan.block_of_partition_set[part.cell_partition_set[sens]],
                        strict=True))
    members: dict[int, list[int]] = {}
    for c, b in block_of.items():
        if b >= 0:
            members.setdefault(int(b), []).append(int(c))
    y = d["y"].to_numpy(float)
    node_of = fine_to_node[fine_of]
    out = {}
    for j, k in enumerate(KEYS):
        g_of = cells.key_codes[:, j]
        size = int(g_of.max()) + 1
        s_after, n_after = np.zeros(size), np.zeros(size)
        for i in range(len(y)):                      # record by record
            c = int(node_of[i])
            b = int(block_of.get(c, -1))
            if b < 0:
                dest = {c: 1.0}
            else:
                th, kb, t = bplan.blocks[b].theta, len(members[b]), cells.frequency[c]
                dest = {c: 1.0 - th / t} | {m: th / (t * (kb - 1))
                                            for m in members[b] if m != c}
            for m, pr in dest.items():
                s_after[g_of[m]] += pr * y[i]
                n_after[g_of[m]] += pr
        best = None
        for g in range(size):
            yy = y[g_of[node_of] == g]
            if yy.size < MIN_GROUP:
                continue
            sh = (s_after[g] / n_after[g] - yy.mean()) / (yy.std(ddof=1) / np.sqrt(yy.size))
            if best is None or abs(sh) > abs(best):
                best = sh
        out[k] = best
    return out


def test_a_free_key_pays_exactly_as_brute_force_says(designed):
    p, des = designed
    r = des.result
    assert des.outcome == "y"
    # a certified point that lets urban move (not in its partition), changing it most
    free = [n for n in r.nodes if n.status == "certified" and "urban" not in n.partition
            and n.key_change.get("urban", 0) > 0]
    assert free
    rec = max(free, key=lambda n: n.changed_share * n.key_change["urban"])
    config = des.config
    fine = count_declared(config)
    marg = {k: np.bincount(fine.key_codes[:, i], weights=fine.frequency,
                           minlength=config.input_key_variables[k].size).astype(np.int64)
            for i, k in enumerate(KEYS)}
    ctx = Context(fine, config, des.base, candidates(config, marg), KEYS, {}, 0.0,
                  outcome=outcome_sums(config, fine, "y"))
    again = ctx.evaluate(rec.levels, floor=False, variant=rec.variant)
    assert again["key_shift"] == pytest.approx(rec.key_shift, rel=1e-12)
    brute = _brute(config, pd.read_csv(p.parent / "d.csv"), ctx, rec.levels, rec.variant)
    assert set(rec.key_shift) == {k for k, v in brute.items() if v is not None}
    for k, v in rec.key_shift.items():
        assert v == pytest.approx(brute[k], rel=1e-9, abs=1e-9), k
    # urban carries the outcome and moves: its group means are diluted toward each other
    assert abs(rec.key_shift["urban"]) > 1.0
    doc = design_document(des)
    assert doc["outcome"] == "y" and doc["outcome_note"] is None
    shown = r.nodes[r.recommended]
    assert doc["recommended"]["key_moves"]["urban"]["mean_shift_se"] == \
        shown.key_shift.get("urban")


def test_every_frontier_point_shows_its_shifts_within_80_columns(designed):
    p, _ = designed
    res = run_cli("design", p, "--budget", "10", columns=80)
    assert res.exit_code == 0, res.output
    assert "mean y by each key's category, largest expected shift" in res.text
    assert "(free)" in res.text or "(confined)" in res.text
    assert max(len(line) for line in res.stdout.splitlines()) <= 80


def test_no_outcome_no_shift(tmp_path):
    """Without utility.analyses the design says so and invents no outcome."""
    p = _file(tmp_path, analyses=False)
    des = run_design(p, budget=5)
    doc = design_document(des)
    assert doc["outcome"] is None and doc["outcome_note"] == NO_OUTCOME
    assert all(m["mean_shift_se"] is None for m in doc["recommended"]["key_moves"].values())
    res = run_cli("design", p, "--budget", "5", columns=80)
    assert "no outcome: the shifts" in res.text
