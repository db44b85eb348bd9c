"""A node of ``sdc design`` planned like a release, without a file and without the records.

- :func:`node_config`: the release config :func:`sdc.authoring.design.write_node_config`
  writes for a node (each key's ``recode:`` with its chosen ``value:``, the node's partition
  and ``risk.merge_along``), built in memory from the config as written: no temporary YAML.
- :func:`configured_figures`: the node planned with the config's own transition design (the
  design registry, :func:`sdc.method.designs.plan_release`) on the node's cell table,
  aggregated from the declared one the search counted (:meth:`Context.aggregate
  <sdc.method.design.evaluate.Context.aggregate>`), with the weights' exact sums regrouped
  (:meth:`sdc.method.weighted.WeightSums.regroup`): the figures the release's count pass
  and plan give, with no second read of the input. What needs the records (the dependence
  and ``derived:`` checks) is :func:`sdc.authoring.design_checks.verify_recommended`'s,
  through the executor registry.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from sdc.authoring.design_values import with_value
from sdc.authoring.design_yaml import as_plain
from sdc.config.model import ReleaseConfig

__all__ = ["configured_figures", "node_config", "node_data", "plain_rule"]


def plain_rule(o: Any) -> Any:
    """A rule as YAML should show it: whole floats as ints (band edges 15, not 15.0)."""
    if isinstance(o, dict):
        return {k: plain_rule(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [plain_rule(v) for v in o]
    if isinstance(o, float) and o.is_integer():
        return int(o)
    return o


def node_data(design: Any, i: int) -> dict[str, Any]:
    """The YAML data of node ``i``'s release config: the config as written (``design.base``)
    with the edits :func:`~sdc.authoring.design.write_node_config` makes to its text where
    they change the plan (recodings with their ``value:``, partition, ``risk.merge_along``;
    not the name, the seed file or the output folder)."""
    r = design.result
    node = r.nodes[i]
    data = copy.deepcopy(design.base)
    kvs = data["key_variables"]
    for k, lev in zip(r.keys, node.levels, strict=True):
        c = r.cands[k][lev]
        if c.rule is None:
            kvs[k].pop("recode", None)
        else:
            kvs[k]["recode"] = plain_rule(with_value(c.rule, design.values(k, c.rule)))
    new_part = plain_rule(copy.deepcopy(node.partition or {}))
    if new_part != as_plain(data.get("partition") or {}):
        data["partition"] = new_part
    risk = data.get("risk")
    if node.variant != "config" and isinstance(risk, dict) and (
            "merge_along" in risk or node.merge_along):
        if node.merge_along:
            risk["merge_along"] = list(node.merge_along)
        else:
            risk.pop("merge_along", None)
    return data


def node_config(design: Any, i: int) -> ReleaseConfig:
    """Node ``i``'s release config, parsed from :func:`node_data` (paths relative to the
    config's folder, hierarchy files read): what ``sdc.load_config`` gives for the file
    ``write_node_config`` writes, up to the name, seed file and output folder."""
    from sdc.config.load import parse_config

    return parse_config(node_data(design, i), design.config.base_dir,
                        source=f"design node {i}")


def _rows_in(table: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The position in ``table`` of every row of ``rows`` (None when one is not there)."""
    if table.shape[1] != rows.shape[1]:
        return None
    _, inv = np.unique(np.vstack([table, rows]), axis=0, return_inverse=True)
    inv = inv.ravel()
    pos = np.full(int(inv.max()) + 1 if inv.size else 0, -1, dtype=np.int64)
    pos[inv[:len(table)]] = np.arange(len(table))
    out = pos[inv[len(table):]]
    return None if (out < 0).any() else out


def configured_figures(design: Any, i: int, config: ReleaseConfig | None = None,
                       plan: Any = None) -> dict[str, Any] | None:
    """Node ``i`` planned and certified as ``sdc release`` would, with the config's own
    transition design (near W, weighted groups on the file's weights), on the node's cell
    table (module docstring): its certificate, expected records changed (sum of t_j m_j of
    that design) and, for the weighted mode, its weight groups and weighted balance (exact
    bias share, weight in groups that keep NZY, expected share of cells beyond 3 SE over 30
    releases: :func:`sdc.method.design.balance.balance_figures`). None when the config uses
    NZY's uniform design (the search's figures are then the release's). ``config``: node
    ``i``'s config (default :func:`node_config`); ``plan``: node ``i`` already planned from
    the records (:func:`sdc.authoring.design_checks.verify_recommended`: the release's count
    pass), not planned again."""
    from sdc.errors import CertificationError, SmallBlockError
    from sdc.method.design.balance import balance_figures
    from sdc.method.designs import design_of, get_design, plan_release
    from sdc.method.partition import partition_cells

    cfg = node_config(design, i) if config is None else config
    chosen = design_of(cfg)
    if chosen is get_design("uniform"):
        return None
    r = design.result
    cells, to_node = r.context.aggregate(r.nodes[i].levels)
    n = r.n_records
    at = None if plan is None else _rows_in(cells.key_codes,
                                            plan.partitioned.cells.key_codes)
    balance = None
    try:
        if chosen.needs_weights:
            dw = design.weights
            wt = dw.sums.regroup(np.arange(dw.total.size), to_node).result(
                np.arange(cells.n_cells))
            q = np.bincount(to_node, weights=dw.squares, minlength=cells.n_cells)
            if at is None:
                plan = plan_release(partition_cells(cells, cfg), cfg, wt)
            else:   # the plan's cells in the count pass's order
                wt, q = wt[at], q[at]
            balance = balance_figures(plan, wt, q)
        elif plan is None:
            plan = plan_release(partition_cells(cells, cfg), cfg)
    except (SmallBlockError, CertificationError) as e:
        return {"design": chosen.name, "node": i, "certified": False, "note": str(e)[:300]}
    out: dict[str, Any] = {
        "design": chosen.name, "node": i,
        "certified": plan.certificate <= cfg.risk.xi + 1e-12,
        "certificate": float(plan.certificate), "changed": plan.expected_changed,
        "share_changed": plan.expected_changed / n if n else 0.0, "note": None}
    if balance is not None:
        out.update({k: balance[k] for k in ("weight_groups", "nzy_groups", "weighted_bias",
                                            "weighted_fallback", "weighted_beyond")})
    return out
