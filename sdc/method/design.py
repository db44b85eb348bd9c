"""Design search (``sdc design``): the least-changed certified release over a lattice of
recodings.

The file is counted once; every lattice node (one recoding candidate per key) is evaluated on
the cell table only, through the release's own ``partition_cells`` and ``plan_release``, so its
certificate is the one ``sdc release`` computes. Objectives (minimised): expected share of
records changed, share of key-table entropy lost, a total-variation bound; Flash-style pruning
by the entropy floor; the recommended point keeps at least ``keep`` of the entropy and changes
the fewest records. docs/DESIGN.md, "The search".
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.load import parse_config
from sdc.config.model import ConfigError, Hierarchy, KeyVariable, ReleaseConfig
from sdc.config.recode import recode_classes
from sdc.errors import CertificationError, SmallBlockError
from sdc.method.blocks import plan_blocks
from sdc.method.cells import CellTable, encode_cells
from sdc.method.partition import partition_cells
from sdc.method.plan import default_merge_order

__all__ = ["Candidate", "DesignResult", "Node", "candidates", "entropy", "pareto_front",
           "search"]

RARE_SHARES = (0.002, 0.005, 0.01, 0.02, 0.05)
_DENSE_MAX = 1 << 24
_EMPTY = np.zeros(0, dtype=np.int64)
BAND_WIDTHS = (5, 10, 20)


@dataclass(frozen=True)
class Candidate:
    """One recoding of one key: its YAML ``recode`` value (None: the declared values) and the
    code map of the declared values (``missing`` last) to released values."""

    key: str
    name: str
    rule: dict[str, Any] | None
    code_map: np.ndarray
    n_released: int


def entropy(counts: np.ndarray) -> float:
    """Shannon entropy in bits of the distribution given by ``counts``."""
    c = np.asarray(counts, dtype=float)
    c = c[c > 0]
    if c.size == 0:
        return 0.0
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def _candidate(key: str, kv: KeyVariable, name: str, rule: dict[str, Any] | None,
               hierarchy_table: list[list[str]] | None = None) -> Candidate | None:
    from sdc.config.model import Bands, Groups, TopBottom

    if rule is None:
        cmap = np.arange(len(kv.domain), dtype=np.int64)
        n = len(kv.domain)
    else:
        if "bands" in rule:
            obj: Any = Bands(bands=rule["bands"])
        elif "groups" in rule:
            obj = Groups(groups=rule["groups"])
        elif "hierarchy" in rule:
            obj = Hierarchy(hierarchy=Path(rule["hierarchy"]), level=rule["level"],
                            delimiter=rule.get("delimiter", ";")).with_table(hierarchy_table or [])
        else:
            obj = TopBottom(**rule)
        try:
            cmap, labels = recode_classes(key, kv, obj)
        except (ConfigError, ValueError):
            return None
        n = len(labels)
    if kv.missing == "category":
        cmap = np.append(cmap, n)
        n += 1
    return Candidate(key, name, rule, cmap, n)


def candidates(config: ReleaseConfig, fine_marginals: dict[str, np.ndarray], *,
               derived: bool = True) -> dict[str, list[Candidate]]:
    """Recodings offered for each key: the declared values first, then the config's recoding,
    the levels of the key's ARX hierarchy (partition or recode; not the all-suppressing last
    level) and, with ``derived``, bands / top coding (``range:`` keys) and rare categories
    merged into ``Other`` (``categories:`` keys). Candidates with the same code map are kept
    once, and one that releases a single value is dropped."""
    out: dict[str, list[Candidate]] = {}
    src = config.input_key_variables
    for key, kv in src.items():
        found: list[Candidate | None] = [_candidate(key, kv, "declared values", None)]
        if kv.recode is not None:
            rule = kv.recode.model_dump(mode="json", exclude_none=True)
            table = kv.recode.table if isinstance(kv.recode, Hierarchy) else None
            found.append(_candidate(key, kv, "the config's recoding", rule, table))
        hier = [r for r in (kv.recode, config._user_partition.get(key, config.partition.get(key)))
                if isinstance(r, Hierarchy) and r.table is not None]
        if hier:
            h = hier[0]
            for lev in range(1, len(h.table[0]) - 1):
                found.append(_candidate(key, kv, f"hierarchy level {lev}",
                                        {"hierarchy": str(h.hierarchy), "level": lev}, h.table))
        counts = np.asarray(fine_marginals[key][:len(kv.domain)], dtype=float)
        n = counts.sum()
        if derived and kv.range is not None and kv.range[1] - kv.range[0] >= 10 and n > 0:
            lo, hi = kv.range
            cum = np.cumsum(counts) / n
            vals = np.arange(lo, hi + 1)
            tops = sorted({int(vals[min(np.searchsorted(cum, q), vals.size - 1)])
                           for q in (0.95, 0.99)})
            bottoms = sorted({int(vals[min(np.searchsorted(cum, q), vals.size - 1)])
                              for q in (0.01,)})
            for t in tops:
                if lo < t < hi:
                    found.append(_candidate(key, kv, f"top-coded at {t}", {"top": t}))
                    for b in bottoms:
                        if lo < b < t:
                            found.append(_candidate(key, kv, f"bottom {b}, top {t}",
                                                    {"top": t, "bottom": b}))
            for w in BAND_WIDTHS:
                if (hi - lo + 1) < 2 * w:
                    continue
                first = (lo // w) * w
                edges = list(range(first, hi + 1, w))
                found.append(_candidate(key, kv, f"bands of {w}", {"bands": edges}))
                for t in tops:
                    cut = [e for e in edges if e < t]
                    top_edge = (t // w) * w
                    if top_edge > cut[0]:
                        e2 = sorted(set([e for e in cut if e < top_edge] + [top_edge]))
                        if e2 != edges:
                            found.append(_candidate(key, kv, f"bands of {w}, {top_edge}+",
                                                    {"bands": e2}))
        elif derived and kv.categories is not None and _numbers(kv.categories) is not None \
                and len(kv.categories) >= 10 and n > 0 and _dense(_numbers(kv.categories)):
            # a numeric quantity declared as categories (e.g. ages read as "36.0"): contiguous
            # bands and top coding, as groups of the declared categories. Sparse numeric codes
            # (PUMA 100..8200) are nominal: only their rare categories are merged (below)
            found += _numeric_groups(key, kv, counts, n)
        elif derived and kv.categories is not None and len(kv.categories) >= 3 and n > 0:
            share = counts / n
            for s in RARE_SHARES:
                rare = [c for c, p in zip(kv.categories, share, strict=True) if p < s]
                if 2 <= len(rare) < len(kv.categories):
                    found.append(_candidate(key, kv, f"categories under {s:.1%} merged",
                                            {"groups": {"Other": rare}}))
        seen: set[bytes] = set()
        keep = []
        for c in found:
            if c is None or (c.n_released < 2 and c.rule is not None):
                continue
            sig = c.code_map.tobytes()
            if sig not in seen:
                seen.add(sig)
                keep.append(c)
        out[key] = keep
    return out


def _numbers(cats: list[Any]) -> np.ndarray | None:
    """The categories as numbers when every one is a number or a numeric string, else None."""
    try:
        vals = np.array([float(c) for c in cats], dtype=float)
    except (TypeError, ValueError):
        return None
    return vals if np.all(np.isfinite(vals)) else None


def _dense(vals: np.ndarray | None) -> bool:
    """Numbers that fill at least half of their integer span: an ordered quantity, not codes."""
    if vals is None or not vals.size:
        return False
    return bool(vals.size >= 0.5 * (vals.max() - vals.min() + 1))


def _numeric_groups(key: str, kv: KeyVariable, counts: np.ndarray,
                    n: float) -> list[Candidate | None]:
    vals = _numbers(kv.categories or [])
    assert vals is not None
    cats = list(kv.categories or [])
    order = np.argsort(vals, kind="stable")
    cum = np.cumsum(counts[order]) / n
    sorted_vals = vals[order]
    lo, hi = float(sorted_vals[0]), float(sorted_vals[-1])
    integral = bool(np.all(vals == np.floor(vals)))

    def fmt(x: float) -> str:
        return str(int(x)) if integral or float(x).is_integer() else f"{x:g}"

    def groups_of(labels: list[str]) -> dict[str, Any]:
        g: dict[str, list[Any]] = {}
        for c, lab in zip(cats, labels, strict=True):
            g.setdefault(lab, []).append(c)
        return {"groups": {lab: m for lab, m in g.items() if len(m) > 1}}

    out: list[Candidate | None] = []
    tops = sorted({float(sorted_vals[min(np.searchsorted(cum, q), vals.size - 1)])
                   for q in (0.95, 0.99)})
    for t in tops:
        if lo < t < hi:
            labels = [f"{fmt(t)}+" if v >= t else str(c) for c, v in zip(cats, vals, strict=True)]
            out.append(_candidate(key, kv, f"top-coded at {fmt(t)}", groups_of(labels)))
    for w in BAND_WIDTHS:
        if hi - lo + 1 < 2 * w:
            continue
        first = math.floor(lo / w) * w
        for t in [None, *tops]:
            labels = []
            for _c, v in zip(cats, vals, strict=True):
                if t is not None and v >= math.floor(t / w) * w:
                    labels.append(f"{fmt(math.floor(t / w) * w)}+")
                    continue
                b = first + math.floor((v - first) / w) * w
                labels.append(f"{fmt(b)}-{fmt(b + w - 1)}" if integral else
                              f"[{fmt(b)}, {fmt(b + w)})")
            name = f"bands of {w}" + ("" if t is None else f", {fmt(math.floor(t / w) * w)}+")
            out.append(_candidate(key, kv, name, groups_of(labels)))
    return out


def _coarser(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether code map ``b`` is a coarsening of ``a`` (b's classes are unions of a's)."""
    pair = np.unique(np.stack([a, b], axis=1), axis=0)
    return bool(np.unique(pair[:, 0]).size == pair.shape[0])


@dataclass
class Node:
    """One lattice node: a candidate per key, its figures and status."""

    levels: tuple[int, ...]
    entropy_kept: float = math.nan
    changed: float = math.nan           # expected records changed (count)
    changed_share: float = math.nan
    loss: float = math.nan
    tvd: float = math.nan
    tvd_recode: float = math.nan
    certificate: float = math.nan
    n_cells: int = 0
    n_sensitive: int = 0
    n_prbs: int = 0
    partition: dict[str, Any] = field(default_factory=dict)
    status: str = "not evaluated"       # certified | refused | pruned | not evaluated
    note: str = ""


@dataclass
class DesignResult:
    """All nodes, the frontier (indices into ``nodes``), the recommended node and the figures
    the rule used."""

    keys: list[str]
    cands: dict[str, list[Candidate]]
    nodes: list[Node]
    frontier: list[int]
    recommended: int | None
    current: int | None
    fine_entropy: float
    n_records: int
    seconds: float
    keep: float
    complete: bool


def _move_abs(theta: np.ndarray) -> np.ndarray:
    """E|A - L| for independent A, L ~ Poisson(theta) (theta <= 1: 30 terms are exact to 1e-15),
    computed once per distinct theta."""
    k = np.arange(30)
    logf = np.cumsum(np.log(np.maximum(k, 1)))
    dist = np.abs(k[:, None] - k[None, :])
    uniq, inv = np.unique(np.asarray(theta, dtype=float), return_inverse=True)
    vals = np.empty(uniq.size)
    for i, th in enumerate(uniq):
        p = np.exp(k * math.log(max(th, 1e-300)) - th - logf)
        vals[i] = float((dist * np.outer(p, p)).sum())
    return vals[inv]


def pareto_front(points: np.ndarray) -> list[int]:
    """Indices of the rows of ``points`` (minimised objectives) no other row dominates; equal
    rows are kept once (the first)."""
    idx = []
    for i in range(points.shape[0]):
        le = np.all(points <= points[i], axis=1)
        lt = np.any(points < points[i], axis=1)
        dominated = np.any(le & lt)
        dup = np.any(np.all(points[:i] == points[i], axis=1)) if i else False
        if not dominated and not dup:
            idx.append(i)
    return idx


def certify(part: Any, config: ReleaseConfig) -> tuple[list[Any], float]:
    """The PRBs and the certificate of a partitioned cell table: the first half of
    :func:`sdc.method.plan.plan_release` (profiles, :func:`sdc.method.blocks.plan_blocks` in the
    config's merge order, max over PRBs of their exact risk and over non-sensitive cells of
    1/t), without its report tables. Raises what ``plan_blocks`` raises."""
    t, sens, cell_ps = part.cells.frequency, part.sensitive, part.cell_partition_set
    t_max = max(1, math.ceil(1.0 / part.xi) - 1)
    n_ps = part.ps_codes.shape[0]
    flat = np.bincount(cell_ps[sens] * (t_max + 1) + t[sens], minlength=n_ps * (t_max + 1))
    profiles = flat.reshape(n_ps, t_max + 1).astype(np.int64)
    pvars = config.partition_variables
    order = [pvars.index(v) for v in default_merge_order(config)]
    labels = part.partition_keys
    bplan = plan_blocks(part.ps_codes, profiles, xi=part.xi, theta=part.theta, kmin=part.kmin,
                        theta_mode=config.risk.theta, policy=config.risk.small_blocks,
                        merge_along=order,
                        describe=lambda b: " + ".join(labels[m] for m in b.members))
    cert = max((b.risk.max_risk for b in bplan.blocks), default=0.0)
    if (~sens).any():
        cert = max(cert, 1.0 / int(t[~sens].min()))
    return bplan.blocks, float(cert)


def node_data(base: dict[str, Any], cands: dict[str, list[Candidate]], levels: tuple[int, ...],
              keys: list[str]) -> dict[str, Any]:
    """The YAML data of a node's release config: ``base`` (the config as written) with each
    key's ``recode`` set to the node's candidate (removed for the declared values)."""
    data = copy.deepcopy(base)
    for key, lev in zip(keys, levels, strict=True):
        kv = data["key_variables"][key]
        rule = cands[key][lev].rule
        if rule is None:
            kv.pop("recode", None)
        else:
            kv["recode"] = copy.deepcopy(rule)
    return data


def _node_config(data: dict[str, Any], base_dir: Path,
                 tables: dict[str, list[list[str]]]) -> tuple[ReleaseConfig, dict[str, Any]]:
    """Parse a node's config; a partition rule finer than the node's recoding becomes
    ``as_is`` (partition on the released values). Hierarchy tables come from ``tables``."""
    from sdc.config.recode import apply_recodings

    for _ in range(len(data.get("partition") or {}) + 1):
        cfg = parse_config(data, base_dir, source="design node", load_hierarchies=False,
                           recode=False)
        for rule in [*cfg.partition.values(), *(kv.recode for kv in cfg.key_variables.values())]:
            if isinstance(rule, Hierarchy):
                rule.with_table(tables[str(rule.hierarchy)])
        try:
            apply_recodings(cfg)
        except ConfigError as e:
            bad = [v for v in (data.get("partition") or {}) if f"partition.{v}:" in str(e)]
            if not bad:
                raise
            data["partition"][bad[0]] = "as_is"
            continue
        return cfg, data
    raise ConfigError("design node: no partition compatible with the recoding")


class _Context:
    """What evaluating a node needs (inherited by forked workers)."""

    def __init__(self, fine: CellTable, config: ReleaseConfig, base: dict[str, Any],
                 cands: dict[str, list[Candidate]], keys: list[str],
                 tables: dict[str, list[list[str]]], min_entropy: float) -> None:
        self.fine, self.config, self.base, self.cands, self.keys = fine, config, base, cands, keys
        self.tables, self.min_entropy = tables, min_entropy
        self.n = int(fine.frequency.sum())
        self.p_fine = fine.frequency / self.n
        self.h_fine = entropy(fine.frequency)
        # every candidate's released code of every fine cell, gathered once
        self.cols = {k: [c.code_map[fine.key_codes[:, i]] for c in cands[k]]
                     for i, k in enumerate(keys)}
        self.inv_members = {k: [1.0 / np.bincount(c.code_map, minlength=c.n_released)
                                for c in cands[k]] for k in keys}

    def aggregate(self, levels: tuple[int, ...]) -> tuple[CellTable, np.ndarray]:
        """The node's cell table from the fine one: codes mapped, equal cells added up (a
        dense count when the node's cross-product has at most 2**24 cells, else a sort)."""
        keys, fine = self.keys, self.fine
        sizes = [self.cands[k][lev].n_released for k, lev in zip(keys, levels, strict=True)]
        cols = [self.cols[k][lev] for k, lev in zip(keys, levels, strict=True)]
        if math.prod(sizes) > _DENSE_MAX:
            ct = encode_cells(cols, sizes, keys)
            freq = np.bincount(ct.record_cell, weights=fine.frequency,
                               minlength=ct.n_cells).astype(np.int64)
            return CellTable(_EMPTY, ct.key_codes, freq, keys), ct.record_cell
        code = cols[0].copy()
        for c, sz in zip(cols[1:], sizes[1:], strict=True):
            code *= sz
            code += c
        dense = np.bincount(code, weights=fine.frequency, minlength=math.prod(sizes))
        present = np.flatnonzero(dense)
        index = np.full(dense.size, -1, dtype=np.int64)
        index[present] = np.arange(present.size)
        key_codes = np.empty((present.size, len(sizes)), dtype=np.int64)
        rest = present.copy()
        for j in range(len(sizes) - 1, -1, -1):
            rest, key_codes[:, j] = np.divmod(rest, sizes[j])
        return (CellTable(_EMPTY, key_codes, dense[present].astype(np.int64), keys),
                index[code])

    def evaluate(self, levels: tuple[int, ...], floor: bool = True) -> dict[str, Any]:
        """A node's figures (the :class:`Node` fields) and status."""
        n, keys = self.n, self.keys
        cells, fine_to_node = self.aggregate(levels)
        h = entropy(cells.frequency)
        kept = h / self.h_fine if self.h_fine > 0 else 1.0
        out: dict[str, Any] = {"entropy_kept": kept, "loss": 1.0 - kept,
                               "n_cells": cells.n_cells}
        if floor and kept < self.min_entropy:
            return {**out, "status": "pruned",
                    "note": f"keeps {kept:.1%} of the entropy (floor {self.min_entropy:.0%})"}
        # recoding part of the tvd: uniform spread of each released cell over its declared cells
        q = cells.frequency[fine_to_node] / n
        for k, lev in zip(keys, levels, strict=True):
            q = q * self.inv_members[k][lev][self.cols[k][lev]]
        out["tvd_recode"] = 0.5 * (np.abs(self.p_fine - q).sum() + max(1.0 - q.sum(), 0.0))
        try:
            data = node_data(self.base, self.cands, levels, keys)
            cfg, data = _node_config(data, self.config.base_dir, self.tables)
            out["partition"] = copy.deepcopy(data.get("partition") or {})
            part = partition_cells(cells, cfg)
            blocks, cert = certify(part, cfg)
        except (SmallBlockError, CertificationError, ConfigError) as e:
            return {**out, "status": "refused", "note": str(e)[:300]}
        thetas = np.array([b.theta for b in blocks])
        ks = np.array([b.k for b in blocks])
        changed = float((thetas * ks).sum())
        pram = float((ks * _move_abs(thetas)).sum()) / (2 * n) if thetas.size else 0.0
        return {**out, "changed": changed, "changed_share": changed / n,
                "tvd": out["tvd_recode"] + pram, "certificate": cert,
                "n_sensitive": int(part.sensitive.sum()), "n_prbs": len(blocks),
                "status": "certified" if cert <= self.config.risk.xi + 1e-12 else "refused"}


_CTX: _Context | None = None


def _evaluate_levels(arg: tuple[tuple[int, ...], bool]) -> dict[str, Any]:
    assert _CTX is not None
    return _CTX.evaluate(*arg)


def search(fine: CellTable, config: ReleaseConfig, base: dict[str, Any],
           cands: dict[str, list[Candidate]], *, budget: float = 60.0, keep: float = 0.9,
           min_entropy: float = 0.5, max_nodes: int | None = None,
           workers: int | None = None,
           progress: Callable[[int, int], None] | None = None) -> DesignResult:
    """Evaluate the lattice spanned by ``cands`` on the declared-value cell table ``fine``.

    ``config``: the loaded config (its ``input_key_variables`` are the declared domains);
    ``base``: its YAML data as written (node configs are ``base`` with ``recode`` changed);
    ``budget``: seconds for planning nodes; ``min_entropy``: the entropy floor below which a
    node (and, by monotonicity, every coarser one) is not planned; ``keep``: the entropy share
    the recommended node keeps at least; ``workers``: processes planning nodes (default: the
    CPU count; forked, each with the cell table it inherits; 1 plans in this process).
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
    rel = {k: np.array([[_coarser(a.code_map, b.code_map) for b in cands[k]] for a in cands[k]])
           for k in keys}
    grid = np.array(list(itertools.product(*[range(len(cands[k])) for k in keys])),
                    dtype=np.int64).reshape(-1, len(keys))
    nodes = [Node(tuple(int(x) for x in row)) for row in grid]
    ctx = _Context(fine, config, base, cands, keys, tables, min_entropy)
    # finest first: more released values first
    n_rel = [np.array([c.n_released for c in cands[k]]) for k in keys]
    size = sum(n_rel[j][grid[:, j]] for j in range(len(keys)))
    order = np.argsort(-np.asarray(size), kind="stable")
    current_levels = tuple(next((j for j, c in enumerate(cands[k]) if c.name ==
                                 "the config's recoding"), 0) for k in keys)
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
    pos = 0
    try:
        while pos < len(order):
            if time.perf_counter() - t0 > budget and done > 0:
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
            floor = [(i, i != current) for i in batch]
            if pool is not None:
                results = pool.map(_evaluate_levels, [(nodes[i].levels, f) for i, f in floor])
            else:
                results = [ctx.evaluate(nodes[i].levels, f) for i, f in floor]
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
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified"]
    pts = np.array([[nodes[i].changed_share, nodes[i].loss, nodes[i].tvd] for i in ok]
                   ).reshape(-1, 3)
    frontier = [ok[j] for j in pareto_front(pts)]
    good = [i for i in ok if nodes[i].entropy_kept >= keep - 1e-12]
    rec = min(good, key=lambda i: (nodes[i].changed, nodes[i].tvd, nodes[i].loss, i),
              default=None)
    if rec is not None and rec not in frontier:  # an equal point is on the frontier already
        twin = [f for f in frontier if np.allclose(
            [nodes[f].changed_share, nodes[f].loss, nodes[f].tvd],
            [nodes[rec].changed_share, nodes[rec].loss, nodes[rec].tvd])]
        rec = twin[0] if twin else rec
    return DesignResult(keys, cands, nodes, frontier, rec, current, h_fine, n,
                        time.perf_counter() - t0, keep, complete)
