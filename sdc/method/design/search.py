"""The lattice search of ``sdc design``: nodes finest first, pruned by the entropy floor,
planned in forked workers within the time budget, then finer partitions for the nodes the rule
may pick (docs/DESIGN.md, "The search")."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from sdc.method.designs import design_of

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
           weights: tuple[np.ndarray, np.ndarray] | None = None,
           outcome: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> DesignResult:
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
    balanced one is found (:func:`_balance`; docs/DESIGN.md, "Weighted jobs"); ``outcome``:
    (n_j, S_j, Q_j) of an outcome per declared cell: every node gets each key's expected
    group-mean shift in SE (``Node.key_shift``, :mod:`sdc.method.design.shifts`).
    """
    t0 = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - t0

    keys = list(config.key_names)
    lattice = _Lattice.of(cands, keys)
    nodes = lattice.nodes
    weighted = weights is not None and design_of(config).weighted
    ctx = Context(fine, config, base, cands, keys, _hierarchy_tables(config), min_entropy,
                  weights if weighted else None, outcome)
    imp = ctx.importance if len(set(ctx.importance.values())) > 1 else {}
    order, current = _walk_order(lattice, cands, keep, max_nodes)
    phase1, phase2 = _phase_ends(budget, partitions, weighted)
    planner = _Planner(ctx, workers, len(order))
    try:
        done, complete = _walk(lattice, order, current, planner, phase1, elapsed, progress)
        if partitions:
            jobs, sure = _partition_jobs(nodes, current, keep, target, bool(imp), weighted)
            complete = _plan_partitions(nodes, jobs, sure, planner, phase2, elapsed, progress,
                                        done, len(order)) and complete
        if weighted:
            finished, frontier = _weighted_phase(nodes, planner, config.risk.xi, keep, target,
                                                 budget, elapsed, bool(imp))
            complete = complete and finished
    finally:
        planner.close()
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified"]
    if weighted:
        rec, verdict, given, frontier = _recommend_weighted(nodes, frontier, keep, target,
                                                            bool(imp))
    else:
        frontier = _frontier(nodes, ok)
        rec, verdict, given = _recommend_nzy(nodes, frontier, ok, keep, target, bool(imp))
    return DesignResult(keys, cands, nodes, frontier, rec, current, entropy(fine.frequency),
                        int(fine.frequency.sum()), elapsed(), keep, complete, target,
                        WARN_CHANGED, verdict, given, weighted, imp, context=ctx)


def _hierarchy_tables(config: ReleaseConfig) -> dict[str, list[list[str]]]:
    """The tables of the config's hierarchy rules (partition, user partition, recodings), by
    hierarchy file."""
    tables: dict[str, list[list[str]]] = {}
    for rule in [*config.partition.values(), *config._user_partition.values(),
                 *(kv.recode for kv in config.input_key_variables.values())]:
        if isinstance(rule, Hierarchy) and rule.table is not None:
            tables[str(rule.hierarchy)] = rule.table
    return tables


@dataclass
class _Lattice:
    """The lattice's nodes: ``grid[i, j]`` the candidate of key j at node i, ``rel[k][a, b]``
    whether candidate a of key k is coarser than (or equal to) candidate b."""

    keys: list[str]
    grid: np.ndarray
    rel: dict[str, np.ndarray]
    nodes: list[Node]

    @classmethod
    def of(cls, cands: dict[str, list[Candidate]], keys: list[str]) -> _Lattice:
        """Every combination of the keys' candidates, one node each."""
        rel = {k: np.array([[coarser(a.code_map, b.code_map) for b in cands[k]]
                            for a in cands[k]]) for k in keys}
        grid = np.array(list(itertools.product(*[range(len(cands[k])) for k in keys])),
                        dtype=np.int64).reshape(-1, len(keys))
        return cls(keys, grid, rel, [Node(tuple(int(x) for x in row)) for row in grid])

    def coarser_than(self, levels: tuple[int, ...]) -> np.ndarray:
        """The lattice nodes coarser than (or equal to) the node at ``levels``, as a mask."""
        succ = np.ones(len(self.nodes), dtype=bool)
        for j, (k, lev) in enumerate(zip(self.keys, levels, strict=True)):
            succ &= self.rel[k][lev][self.grid[:, j]]
        return succ


def _walk_order(lattice: _Lattice, cands: dict[str, list[Candidate]], keep: float,
                max_nodes: int | None) -> tuple[np.ndarray, int | None]:
    """The order nodes are planned in and the config's own node (None when not in the lattice):
    the config's node first, then the nodes the rule may pick (every key keeps ``keep`` of its
    entropy, breaks and orders respected), finest (most released values) first."""
    keys, grid, nodes = lattice.keys, lattice.grid, lattice.nodes
    n_rel = [np.array([c.n_released for c in cands[k]]) for k in keys]
    size = sum(n_rel[j][grid[:, j]] for j in range(len(keys)))
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
    return order, current


def _phase_ends(budget: float, partitions: bool, weighted: bool) -> tuple[float, float]:
    """Seconds after which phase 1 (the lattice) and phase 2 (finer partitions) stop."""
    if weighted:  # room for phase 3
        return budget * (0.45 if partitions else 0.7), budget * 0.7
    return budget * (2 / 3 if partitions else 1.0), budget


class _Planner:
    """Plans nodes in ``workers`` forked processes (each with the :class:`Context` it
    inherits) when there are enough nodes, else in this process."""

    def __init__(self, ctx: Context, workers: int | None, n_nodes: int) -> None:
        self.ctx = ctx
        self.workers = max(1, min(workers if workers is not None else (os.cpu_count() or 1), 8))
        self.pool: Any = None
        if self.workers > 1 and n_nodes > 4 * self.workers:
            import multiprocessing as mp

            global _CTX
            _CTX = ctx
            try:
                self.pool = mp.get_context("fork").Pool(self.workers)
            except (OSError, ValueError):
                self.pool = None
        self.batch = 4 * self.workers if self.pool is not None else 1

    def evaluate(self, jobs: list[tuple[tuple[int, ...], bool, str]]) -> list[dict[str, Any]]:
        """:meth:`Context.evaluate` of every job (levels, prune, variant)."""
        if self.pool is not None and len(jobs) > 1:
            return self.pool.map(_evaluate_levels, jobs)
        return [self.ctx.evaluate(*j) for j in jobs]

    def weighted(self, jobs: list[tuple[tuple[int, ...], str]]) -> list[dict[str, Any]]:
        """:meth:`Context.weighted` of every job (levels, variant)."""
        if self.pool is not None and len(jobs) > 1:
            return self.pool.map(_weighted_levels, jobs, chunksize=1)
        return [self.ctx.weighted(*j) for j in jobs]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


def _take(node: Node, res: dict[str, Any]) -> None:
    """Set the figures ``res`` of a planned node on ``node``."""
    for name, value in res.items():
        setattr(node, name, value)


def _walk(lattice: _Lattice, order: np.ndarray, current: int | None, planner: _Planner,
          end: float, elapsed: Callable[[], float],
          progress: Callable[[int, int], None] | None) -> tuple[int, bool]:
    """Phase 1: plan the nodes in ``order``, ``planner.batch`` at a time, until ``end``
    seconds (at least one node); a node below the entropy floor prunes every coarser node
    (entropy is monotone), the config's own excepted. Returns (nodes planned, complete)."""
    nodes = lattice.nodes
    pruned = np.zeros(len(nodes), dtype=bool)
    done = pos = 0
    while pos < len(order):
        if elapsed() > end and done > 0:
            return done, False
        batch: list[int] = []
        while len(batch) < planner.batch and pos < len(order):
            i = int(order[pos])
            pos += 1
            if pruned[i] and i != current:
                nodes[i].status = "pruned"
                nodes[i].note = "coarser than a node below the entropy floor"
                continue
            batch.append(i)
        if not batch:
            continue
        results = planner.evaluate([(nodes[i].levels, i != current, "config") for i in batch])
        for i, res in zip(batch, results, strict=True):
            _take(nodes[i], res)
            if res["status"] == "pruned":
                pruned |= lattice.coarser_than(nodes[i].levels)
            done += 1
        if progress:
            progress(done, len(order))
    return done, True


def _partition_jobs(nodes: list[Node], current: int | None, keep: float, target: float,
                    importance: bool, weighted: bool) -> tuple[list[tuple[int, str]], int]:
    """Phase 2's jobs (node, partition variant): the 16 best nodes the rule may pick, each
    with every variant; under declared importance the important variants first, the config's
    own node's first of all. Returns (jobs, how many run whatever the budget)."""
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful]
    pick = [i for i in ok if nodes[i].min_key_kept >= keep - 1e-12
            and nodes[i].changed_share <= WARN_CHANGED + 1e-12]
    pick.sort(key=lambda i: (nodes[i].changed_share > target, -nodes[i].entropy_kept
                             if nodes[i].changed_share <= target
                             else nodes[i].changed))
    if not pick:
        pick = sorted((i for i in ok if nodes[i].min_key_kept >= keep - 1e-12),
                      key=lambda i: nodes[i].changed)
    variants = VARIANTS + (IMPORTANT_VARIANTS if importance else ()) + (
        WEIGHTED_VARIANTS if weighted else ())
    jobs = [(i, v) for i in pick[:16] for v in variants]
    if not importance:
        return jobs, 0
    first = ([current] if current in ok else []) + pick[:16]
    lead = list(dict.fromkeys((i, v) for i in first for v in IMPORTANT_VARIANTS))
    return lead + [j for j in jobs if j not in set(lead)], len(IMPORTANT_VARIANTS)


def _plan_partitions(nodes: list[Node], jobs: list[tuple[int, str]], sure: int,
                     planner: _Planner, end: float, elapsed: Callable[[], float],
                     progress: Callable[[int, int], None] | None, done: int,
                     n_order: int) -> bool:
    """Phase 2: plan the partition ``jobs`` until ``end`` seconds (the first ``sure`` whatever
    the budget); every certified partition new for its node is appended as a node of its own.
    Returns whether every job was planned."""
    for s in range(0, len(jobs), planner.batch):
        if elapsed() > end and s >= sure:
            return False
        chunk = jobs[s:s + planner.batch]
        results = planner.evaluate([(nodes[i].levels, False, v) for i, v in chunk])
        for (i, _v), res in zip(chunk, results, strict=True):
            if res.get("status") != "certified" or res.get("partition") == nodes[i].partition:
                continue
            nd = Node(nodes[i].levels)
            _take(nd, res)
            nodes.append(nd)
        done += len(chunk)
        if progress:
            progress(done, n_order + len(jobs))
    return True


def _weighted_phase(nodes: list[Node], planner: _Planner, xi: float, keep: float,
                    target: float, budget: float, elapsed: Callable[[], float],
                    importance: bool) -> tuple[bool, list[int]]:
    """Phase 3 of a weighted job: :func:`_balance`, then the ``_SHOWN`` best frontier points
    planned with the weighted design too, within ``budget``. Returns (complete, frontier)."""
    finished, _ = _balance(nodes, planner.weighted, xi, keep, target, planner.workers,
                           lambda: elapsed() <= budget, importance)
    frontier = _frontier(nodes, [i for i, nd in enumerate(nodes) if nd.status == "certified"])
    shown = sorted(frontier, key=lambda i: (nodes[i].changed, nodes[i].loss))[:_SHOWN]
    todo = [i for i in shown if nodes[i].configured is None]
    for s in range(0, len(todo), planner.workers):
        if elapsed() > budget:
            return False, frontier
        chunk = todo[s:s + planner.workers]
        for i, res in zip(chunk, planner.weighted([(nodes[i].levels, nodes[i].variant)
                                                   for i in chunk]), strict=True):
            nodes[i].take_configured(res["configured"], xi)
    return finished, frontier


def _recommend_weighted(nodes: list[Node], frontier: list[int], keep: float, target: float,
                        importance: bool) -> tuple[int | None, str, list[str], list[int]]:
    """The rule's pick among the balanced nodes, else the least biased node planned with the
    weighted design; shown on the frontier even when dominated. Returns (node, verdict, given
    up, frontier)."""
    rec, verdict, given = recommend(nodes, key_floor=keep, target=target,
                                    accept=lambda nd: bool(nd.balanced), importance=importance)
    if rec is None:   # none balanced: the least biased of those planned
        from sdc.method.design.balance import BEYOND_MAX, BIAS_MAX

        planned = [i for i in rule_order(nodes, key_floor=keep, target=target,
                                         importance=importance)
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
    return rec, verdict, given, frontier


def _recommend_nzy(nodes: list[Node], frontier: list[int], ok: list[int], keep: float,
                   target: float, importance: bool) -> tuple[int | None, str, list[str]]:
    """The rule's pick (:func:`recommend`), replaced by an equal point of the frontier when
    it is not on it."""
    rec, verdict, given = recommend(nodes, key_floor=keep, target=target,
                                    importance=importance)
    if rec is not None and rec not in frontier:  # an equal point is on the frontier
        pts = _points(nodes, ok)
        twin = [f for f in frontier if np.allclose(pts[ok.index(f)], pts[ok.index(rec)])]
        rec = twin[0] if twin else rec
    return rec, verdict, given


def _points(nodes: list[Node], ok: list[int]) -> np.ndarray:
    return np.array([[nodes[i].changed_share, nodes[i].loss, nodes[i].tvd,
                      nodes[i].displacement_sd if nodes[i].displacement_sd
                      == nodes[i].displacement_sd else 0.0] for i in ok]).reshape(-1, 4)


def _frontier(nodes: list[Node], ok: list[int]) -> list[int]:
    """The certified nodes ``ok`` no other dominates (changed, loss, TVD, displacement)."""
    return [ok[j] for j in pareto_front(_points(nodes, ok))]
