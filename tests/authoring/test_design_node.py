"""``sdc design`` plans its recommendation like a release, without a temporary config and
without reading the input again per node (sdc.authoring.design_node, design_checks): the node's
config built in memory is the config ``write_node_config`` writes; its figures on the cell
table (the design registry, the weights' exact sums regrouped) are those of the records read
as ``sdc release`` reads them; the release's checks count the records through the executor
registry, the declared records read once however many nodes are tried."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
import yaml

import sdc
from sdc.authoring import design_checks
from sdc.authoring.design import run_design, write_node_config
from sdc.authoring.design_node import configured_figures, node_config
from sdc.errors import InputError
from tests.method.test_design_weighted import _weighted_job

PLAN_KEYS = ("key_variables", "partition", "risk", "input", "derived", "perturb")


def _job(tmp_path, destinations=None, weighted=True):
    path = _weighted_job(tmp_path, n=3000)
    cfg = yaml.safe_load(path.read_text())
    cfg["risk"]["weighted"] = weighted
    if destinations:
        cfg["risk"]["destinations"] = destinations
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _records_figures(path, i):
    """Node ``i``'s figures as before this module: its config written and loaded, the whole
    input read and partitioned, the config's design planned on the records' cells."""
    from sdc.method.design.balance import balance_figures
    from sdc.method.designs import design_of, plan_release
    from sdc.method.partition import partition_frame
    from sdc.method.weighted import WeightSums

    cfg = sdc.load_config(path)
    frame = sdc.read_input(cfg)
    part = partition_frame(frame, cfg)
    if not design_of(cfg).needs_weights:
        plan = plan_release(part, cfg)
        return {"certificate": plan.certificate, "changed": plan.expected_changed}
    w = frame[cfg.input.weight].to_numpy(np.float64)
    rc = part.cells.record_cell
    wt = WeightSums.of(rc, w).result(np.arange(part.cells.n_cells))
    plan = plan_release(part, cfg, wt)
    fig = balance_figures(plan, wt, np.bincount(rc, weights=w * w,
                                                minlength=part.cells.n_cells))
    return {"certificate": plan.certificate, "changed": plan.expected_changed,
            **{k: fig[k] for k in ("weight_groups", "nzy_groups", "weighted_bias",
                                    "weighted_fallback", "weighted_beyond")}}


@pytest.mark.parametrize(("destinations", "weighted"),
                         [(None, True), ("near", False), ("near", True)])
def test_configured_figures_from_the_cell_table_are_those_of_the_records(
        tmp_path, destinations, weighted):
    """For the recommendation and every node of the frontier: the in-memory config is the
    written one (every section the plan reads), and the figures planned on the cell table
    are those planned from the records of the written config: the certificate, expected
    changes and weight groups exactly (W_j have the same bits: exact sums regrouped); the
    bias, fallback and beyond shares to 1e-12 (sum w^2 is added in another order)."""
    d = run_design(_job(tmp_path, destinations, weighted), budget=20, release_checks=False)
    r = d.result
    assert r.recommended is not None
    nodes = sorted({r.recommended, *r.frontier[:4]})
    for i in nodes:
        written = write_node_config(d, i, tmp_path / f"node{i}.yaml")
        mem = node_config(d, i).model_dump(warnings=False)
        loaded = sdc.load_config(written).model_dump(warnings=False)
        for k in PLAN_KEYS:
            assert mem.get(k) == loaded.get(k), (i, k)
        got = configured_figures(d, i)
        want = _records_figures(written, i)
        if got.get("note"):
            continue
        assert got["certificate"] == want["certificate"], i
        assert got["changed"] == pytest.approx(want["changed"], rel=1e-12, abs=1e-9), i
        for k in ("weight_groups", "nzy_groups"):
            assert got.get(k) == want.get(k), (i, k)
        for k in ("weighted_bias", "weighted_fallback", "weighted_beyond"):
            if weighted:
                assert got[k] == pytest.approx(want[k], rel=1e-12, abs=1e-15), (i, k)
            else:
                assert k not in got, k


def test_the_release_checks_read_the_input_once_and_write_no_config(tmp_path, monkeypatch):
    """A near job whose first two recommendations the release's checks refuse: three
    nodes counted through the executor registry (the in-memory executor: the declared
    records read once, each node's recoding applied), no temporary config written, and the
    accepted node's plan is the recommendation's figures (not planned again)."""
    d = run_design(_job(tmp_path, "near", False), budget=20, release_checks=False)
    r = d.result
    first = r.recommended
    reads: list[str] = []
    import sdc.io.read as io_read

    real_read = io_read.read_input
    monkeypatch.setattr(io_read, "read_input",
                        lambda cfg: reads.append(str(cfg.input_path)) or real_read(cfg))
    made: list[str] = []
    real_tmp = tempfile.TemporaryDirectory
    monkeypatch.setattr(tempfile, "TemporaryDirectory",
                        lambda *a, **k: made.append(str(k.get("prefix"))) or real_tmp(*a, **k))
    import sdc.pipeline.kernels as kernels

    real_plan, planned = kernels.plan_cells, []

    def plan_cells(count, cfg):   # the first two nodes refused, as a dependence check would
        planned.append(count.n_records)
        if len(planned) <= 2:
            raise InputError(f"node refused for the test ({len(planned)})")
        return real_plan(count, cfg)

    monkeypatch.setattr(kernels, "plan_cells", plan_cells)
    checked = design_checks.verify_recommended(d, node_config)
    assert len(checked.refused) == 2 and "refused for the test (2)" in checked.refused[1]
    assert planned == [3000] * 3 and checked.node == r.recommended != first
    assert reads == [str(d.config.input_path)] and made == []
    fig = configured_figures(d, checked.node, plan=checked.plan)
    cells = configured_figures(d, checked.node)
    assert fig["design"] == cells["design"] == "near" and fig["certified"]
    assert fig["certificate"] == cells["certificate"]
    assert fig["changed"] == pytest.approx(cells["changed"], rel=1e-12)
