"""The lattice search of ``sdc design``: nodes finest first, pruned by the entropy floor,
planned in forked workers within the time budget, then finer partitions for the nodes the rule
may pick (docs/DESIGN.md, "The search")."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sdc.config.model import Hierarchy, ReleaseConfig
from sdc.method.cells import CellTable
from sdc.method.design.candidates import Candidate, coarser, entropy
from sdc.method.design.evaluate import VARIANTS, WEIGHTED_VARIANTS, Context
from sdc.method.design.importance import IMPORTANT_VARIANTS
from sdc.method.design.rule import (
    KEY_FLOOR,
    TARGET_CHANGED,
    WARN_CHANGED,
    DesignResult,
    Node,
    pareto_front,
    recommend,
    rule_order,
)

__all__ = ["search"]

_CTX: Context | None = None



def _evaluate_levels(arg: tuple[tuple[int, ...], bool, str]) -> dict[str, Any]:
    assert _CTX is not None
    return _CTX.evaluate(*arg)


def _weighted_levels(arg: tuple[tuple[int, ...], str]) -> dict[str, Any]:
    assert _CTX is not None
    return _CTX.weighted(*arg)


#: a weighted job: at least this many nodes are planned with the weighted design, whatever
#: the budget, and at most ``_MAX_CHECKS`` while looking for a balanced recommendation
_MIN_CHECKS, _MAX_CHECKS = 8, 200
_SMALL_PRBS = 0.25
#: a weighted job: the shown frontier points planned with the weighted design (``--limit``)
_SHOWN = 25


def _balance(nodes: list[Node], run: Callable[[list[Any]], list[dict[str, Any]]],
             xi: float, keep: float, target: float, batch: int,
             left: Callable[[], bool], importance: bool = False) -> tuple[bool, int]:
    """A weighted job's phase 3: plan the nodes in the rule's order with the config's own
    design (:meth:`Context.weighted`), ``batch`` at a time, until the rule's best node among
    those not found unbalanced is planned and balanced. Nodes with more than ``_SMALL_PRBS``
    of the weight in PRBs too small for weight groups are planned after the others (they
    mostly keep NZY): within the budget the best balanced node found is recommended.
    Returns (finished, nodes planned)."""
    checked = 0
    while True:
        order = rule_order(nodes, key_floor=keep, target=target,
                           accept=lambda nd: nd.balanced is not False, importance=importance)
        if not order or nodes[order[0]].balanced:
            return True, checked
        if checked >= _MAX_CHECKS or (checked >= _MIN_CHECKS and not left()):
            return False, checked
        # nodes whose weight sits mostly in PRBs too small for weight groups planned last
        rank = {i: r for r, i in enumerate(order)}
        todo = sorted((i for i in order if nodes[i].configured is None),
                      key=lambda i: (not nodes[i].small_prb_weight <= _SMALL_PRBS, rank[i])
                      )[:batch]
        for i, res in zip(todo, run([(nodes[i].levels, nodes[i].variant) for i in todo]),
                          strict=True):
            nodes[i].take_configured(res["configured"], xi)
        checked += len(todo)


def search(fine: CellTable, config: ReleaseConfig, base: dict[str, Any],
           cands: dict[str, list[Candidate]], *, budget: float = 60.0,
           keep: float = KEY_FLOOR, min_entropy: float = 0.5, max_nodes: int | None = None,
           workers: int | None = None, partitions: bool = True,
           target: float = TARGET_CHANGED,
           progress: Callable[[int, int], None] | None = None,
           weights: tuple[np.ndarray, np.ndarray] | None = None) -> DesignResult:
    """Evaluate the lattice spanned by ``cands`` on the declared-value cell table ``fine``.

    ``config``: the loaded config (its ``input_key_variables`` are the declared domains);
    ``base``: its YAML data as written (node configs are ``base`` with ``recode`` changed);
    ``budget``: seconds for planning nodes; ``min_entropy``: the joint entropy floor below
    which a node (and, by monotonicity, every coarser one) is not planned; ``keep``: the share
    of its own entropy every key of the recommended node keeps (:func:`recommend`);
    ``partitions``: also try the finer partitions of :func:`partition_variant` on the nodes
    the rule may pick (phase 2, the last third of the budget); ``workers``: processes
    planning nodes (default: the CPU count; forked, each with the cell table it inherits; 1
    plans in this process); ``weights``: (W_j, Q_j), the sums of the weights and of the squared
    weights of every declared cell, for a weighted job (``risk.weighted``): the lattice is
    walked under NZY's design in the first 45% of the budget, finer partitions until 70%,
    then nodes are planned with the weighted design in the rule's order until the best
    balanced one is found (:func:`_balance`; docs/DESIGN.md, "Weighted jobs").
    """
    t0 = time.perf_counter()
    keys = list(config.key_names)
    src = config.input_key_variables
    n = int(fine.frequency.sum())
    h_fine = entropy(fine.frequency)
    tables: dict[str, list[list[str]]] = {}
    for rule in [*config.partition.values(), *config._user_partition.values(),
                 *(kv.recode for kv in src.values())]:
        if isinstance(rule, Hierarchy) and rule.table is not None:
            tables[str(rule.hierarchy)] = rule.table
    # per key: coarser-than relation between its candidates, members per released value
    rel = {k: np.array([[coarser(a.code_map, b.code_map) for b in cands[k]] for a in cands[k]])
           for k in keys}
    grid = np.array(list(itertools.product(*[range(len(cands[k])) for k in keys])),
                    dtype=np.int64).reshape(-1, len(keys))
    nodes = [Node(tuple(int(x) for x in row)) for row in grid]
    weighted = weights is not None and bool(config.risk.weighted)
    ctx = Context(fine, config, base, cands, keys, tables, min_entropy,
                  weights if weighted else None)
    imp = ctx.importance if len(set(ctx.importance.values())) > 1 else {}
    # finest first: more released values first
    n_rel = [np.array([c.n_released for c in cands[k]]) for k in keys]
    size = sum(n_rel[j][grid[:, j]] for j in range(len(keys)))
    # nodes the rule may pick (every key above its floor, breaks and orders respected) first
    key_kept = np.min(np.stack([np.array([c.kept for c in cands[k]])[grid[:, j]]
                                for j, k in enumerate(keys)]), axis=0) if keys else size
    sense = np.all(np.stack([np.array([c.meaningful for c in cands[k]])[grid[:, j]]
                             for j, k in enumerate(keys)]), axis=0)
    later = (key_kept < keep - 1e-12) | ~sense
    order = np.lexsort((-np.asarray(size), later))
    current_levels = tuple(next((j for j, c in enumerate(cands[k]) if c.name.startswith(
        "the config's recoding")), 0) for k in keys)
    current = next((i for i, nd in enumerate(nodes) if nd.levels == current_levels), None)
    if current is not None:  # the config as it is: evaluated first, whatever the budget
        order = np.concatenate([[current], order[order != current]])
    if max_nodes is not None:
        order = order[:max_nodes]
    pruned = np.zeros(len(nodes), dtype=bool)
    done = 0
    complete = True
    workers = max(1, min(workers if workers is not None else (os.cpu_count() or 1), 8))
    pool = None
    if workers > 1 and len(order) > 4 * workers:
        import multiprocessing as mp

        global _CTX
        _CTX = ctx
        try:
            pool = mp.get_context("fork").Pool(workers)
        except (OSError, ValueError):
            pool = None
    batch_size = 4 * workers if pool is not None else 1
    phase1 = budget * (2 / 3 if partitions else 1.0)
    phase2 = budget
    if weighted:  # room for phase 3
        phase1, phase2 = budget * (0.45 if partitions else 0.7), budget * 0.7

    def run(jobs: list[tuple[tuple[int, ...], bool, str]]) -> list[dict[str, Any]]:
        if pool is not None and len(jobs) > 1:
            return pool.map(_evaluate_levels, jobs)
        return [ctx.evaluate(*j) for j in jobs]

    def run_weighted(jobs: list[tuple[tuple[int, ...], str]]) -> list[dict[str, Any]]:
        if pool is not None and len(jobs) > 1:
            return pool.map(_weighted_levels, jobs, chunksize=1)
        return [ctx.weighted(*j) for j in jobs]

    pos = 0
    try:
        while pos < len(order):
            if time.perf_counter() - t0 > phase1 and done > 0:
                complete = False
                break
            batch: list[int] = []
            while len(batch) < batch_size and pos < len(order):
                i = int(order[pos])
                pos += 1
                if pruned[i] and i != current:
                    nodes[i].status = "pruned"
                    nodes[i].note = "coarser than a node below the entropy floor"
                    continue
                batch.append(i)
            if not batch:
                continue
            results = run([(nodes[i].levels, i != current, "config") for i in batch])
            for i, res in zip(batch, results, strict=True):
                for name, value in res.items():
                    setattr(nodes[i], name, value)
                if res["status"] == "pruned":
                    succ = np.ones(len(nodes), dtype=bool)
                    for j, (k, lev) in enumerate(zip(keys, nodes[i].levels, strict=True)):
                        succ &= rel[k][lev][grid[:, j]]
                    pruned |= succ
                done += 1
            if progress:
                progress(done, len(order))
        if partitions:
            # phase 2: finer partitions for the nodes the rule may pick, best first
            ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful]
            pick = [i for i in ok if nodes[i].min_key_kept >= keep - 1e-12
                    and nodes[i].changed_share <= WARN_CHANGED + 1e-12]
            pick.sort(key=lambda i: (nodes[i].changed_share > target, -nodes[i].entropy_kept
                                     if nodes[i].changed_share <= target
                                     else nodes[i].changed))
            if not pick:
                pick = sorted((i for i in ok if nodes[i].min_key_kept >= keep - 1e-12),
                              key=lambda i: nodes[i].changed)
            variants = VARIANTS + (IMPORTANT_VARIANTS if imp else ()) + (
                WEIGHTED_VARIANTS if weighted else ())
            jobs = [(i, v) for i in pick[:16] for v in variants]
            sure = 0   # jobs run whatever the budget
            if imp:   # declared importance: the variants holding the important keys first,
                # the config's own node's first of all and whatever the budget
                first = ([current] if current in ok else []) + pick[:16]
                lead = list(dict.fromkeys((i, v) for i in first for v in IMPORTANT_VARIANTS))
                jobs = lead + [j for j in jobs if j not in set(lead)]
                sure = len(IMPORTANT_VARIANTS)
            for s in range(0, len(jobs), batch_size):
                if time.perf_counter() - t0 > phase2 and s >= sure:
                    complete = False
                    break
                chunk = jobs[s:s + batch_size]
                results = run([(nodes[i].levels, False, v) for i, v in chunk])
                for (i, _v), res in zip(chunk, results, strict=True):
                    if res.get("status") != "certified" or res.get("partition") == \
                            nodes[i].partition:
                        continue
                    nd = Node(nodes[i].levels)
                    for name, value in res.items():
                        setattr(nd, name, value)
                    nodes.append(nd)
                done += len(chunk)
                if progress:
                    progress(done, len(order) + len(jobs))
        if weighted:
            finished, _ = _balance(
                nodes, run_weighted, config.risk.xi, keep, target, max(workers, 1),
                lambda: time.perf_counter() - t0 <= budget, bool(imp))
            complete = complete and finished
            # the shown points get the weighted design's figures too
            frontier = _frontier(nodes, [i for i, nd in enumerate(nodes)
                                         if nd.status == "certified"])
            shown = sorted(frontier, key=lambda i: (nodes[i].changed, nodes[i].loss))[:_SHOWN]
            todo = [i for i in shown if nodes[i].configured is None]
            for s in range(0, len(todo), max(workers, 1)):
                if time.perf_counter() - t0 > budget:
                    complete = False
                    break
                chunk = todo[s:s + max(workers, 1)]
                for i, res in zip(chunk, run_weighted([(nodes[i].levels, nodes[i].variant)
                                                       for i in chunk]), strict=True):
                    nodes[i].take_configured(res["configured"], config.risk.xi)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified"]
    if not weighted:
        frontier = _frontier(nodes, ok)
    pts = _points(nodes, ok)
    if weighted:
        rec, verdict, given = recommend(nodes, key_floor=keep, target=target,
                                        accept=lambda nd: bool(nd.balanced),
                                        importance=bool(imp))
        if rec is None:   # none balanced: the least biased of those planned
            from sdc.method.design.balance import BEYOND_MAX, BIAS_MAX

            planned = [i for i in rule_order(nodes, key_floor=keep, target=target,
                                             importance=bool(imp))
                       if "weighted_bias" in (nodes[i].configured or {})]
            if planned:
                rec = min(planned, key=lambda i: (nodes[i].configured["weighted_bias"],
                                                  planned.index(i)))
                verdict = (f"no planned design keeps weighted totals balanced (bias <= "
                           f"{BIAS_MAX:.1%} of the total weight, <= {BEYOND_MAX:.1%} of cells "
                           "beyond 3 SE over 30 releases); the least biased")
                given = []
        else:
            verdict += "; weighted totals balanced"
        if rec is not None and rec not in frontier:   # shown even when dominated
            frontier = [rec, *frontier]
    else:
        rec, verdict, given = recommend(nodes, key_floor=keep, target=target,
                                        importance=bool(imp))
        if rec is not None and rec not in frontier:  # an equal point is on the frontier
            twin = [f for f in frontier if np.allclose(pts[ok.index(f)], pts[ok.index(rec)])]
            rec = twin[0] if twin else rec
    return DesignResult(keys, cands, nodes, frontier, rec, current, h_fine, n,
                        time.perf_counter() - t0, keep, complete, target, WARN_CHANGED,
                        verdict, given, weighted, imp)


def _points(nodes: list[Node], ok: list[int]) -> np.ndarray:
    return np.array([[nodes[i].changed_share, nodes[i].loss, nodes[i].tvd,
                      nodes[i].displacement_sd if nodes[i].displacement_sd
                      == nodes[i].displacement_sd else 0.0] for i in ok]).reshape(-1, 4)


def _frontier(nodes: list[Node], ok: list[int]) -> list[int]:
    """The certified nodes ``ok`` no other dominates (changed, loss, TVD, displacement)."""
    return [ok[j] for j in pareto_front(_points(nodes, ok))]
