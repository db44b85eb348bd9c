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
NICE_WIDTHS = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000)
MAX_BANDS, MIN_BANDS = 50, 3
MIN_CANDIDATE_KEPT = 0.4   # a candidate keeping less of its key's own entropy is not offered
KEY_FLOOR = 0.7            # the rule: no key keeps less than this share of its own entropy
TARGET_CHANGED = 0.08      # the rule aims at this share of records changed, or less
WARN_CHANGED = 0.20        # ... and stays under the release's own warning threshold


@dataclass(frozen=True)
class Candidate:
    """One recoding of one key: its YAML ``recode`` value (None: the declared values), the code
    map of the declared values (``missing`` last) to released codes (the release's own order,
    :func:`sdc.config.recode.released_classes`), the position of every released value on the
    key's scale (declared units, class midpoints; None for a nominal key) and the key's own
    figures: share of its marginal entropy kept, and the TVD between its declared marginal and
    the released one spread uniformly over each class (what the recoding costs this key)."""

    key: str
    name: str
    rule: dict[str, Any] | None
    code_map: np.ndarray
    n_released: int
    kept: float = 1.0
    tvd: float = 0.0
    position: np.ndarray | None = None
    #: False when the recoding puts values on both sides of a declared break in one class or
    #: merges ordered categories that are not neighbours (the config's own recoding may):
    #: such a node is evaluated but never recommended
    meaningful: bool = True


def entropy(counts: np.ndarray) -> float:
    """Shannon entropy in bits of the distribution given by ``counts``."""
    c = np.asarray(counts, dtype=float)
    c = c[c > 0]
    if c.size == 0:
        return 0.0
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def _scale(kv: KeyVariable) -> np.ndarray | None:
    """The declared values' positions on the key's scale: numbers for a numeric ordered key,
    ranks for ``ordered: true`` text; None for a nominal key."""
    kind = key_kind(kv)
    if kind in ("numeric", "numeric_text"):
        return np.asarray([float(c) for c in kv.domain], dtype=float)
    if kind == "ordinal":
        return np.arange(len(kv.domain), dtype=float)
    return None


def _candidate(key: str, kv: KeyVariable, name: str, rule: dict[str, Any] | None,
               hierarchy_table: list[list[str]] | None = None,
               counts: np.ndarray | None = None) -> Candidate | None:
    from sdc.config.model import Bands, Groups, TopBottom
    from sdc.config.recode import released_classes

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
            cmap, labels = released_classes(key, kv, obj)
        except (ConfigError, ValueError):
            return None
        n = len(labels)
    kept, tvd = 1.0, 0.0
    if counts is not None and counts.sum() > 0 and rule is not None:
        c = np.asarray(counts[:len(kv.domain)], dtype=float)
        rel = np.bincount(cmap, weights=c, minlength=n)
        h0 = entropy(c)
        kept = entropy(rel) / h0 if h0 > 0 else 1.0
        size = np.bincount(cmap, minlength=n)
        tvd = 0.5 * float(np.abs(c - rel[cmap] / size[cmap]).sum() / c.sum())
    pos = None
    scale = _scale(kv)
    if scale is not None:
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, cmap, scale)
        np.maximum.at(hi, cmap, scale)
        pos = (lo + hi) / 2
    if kv.missing == "category":
        cmap = np.append(cmap, n)
        n += 1
        if pos is not None:
            pos = np.append(pos, np.nan)
    return Candidate(key, name, rule, cmap, n, kept, tvd, pos)


def key_kind(kv: KeyVariable) -> str:
    """How ``sdc design`` may recode a key: ``numeric`` (ordered numbers: bands, top and bottom
    codes at breaks or round numbers), ``numeric_text`` (the same, numbers written as text),
    ``ordinal`` (``ordered: true`` text: neighbours merged) or ``nominal`` (merged along a
    declared hierarchy or partition groups, or rare categories with ``merge: rare``)."""
    if kv.range is not None:
        return "numeric"
    cats = list(kv.categories or [])
    nums = _numbers(cats)
    is_num = all(isinstance(c, int | float) and not isinstance(c, bool) for c in cats)
    # labelled codes (1 = White, 2 = Black, ...) are categories, not a quantity
    coded = len(kv.labels) >= max(2, len(cats) // 2)
    if nums is not None and kv.ordered is not False and (
            kv.ordered or kv.breaks is not None
            or (len(cats) >= 3 and _dense(nums) and not coded)):
        return "numeric" if is_num else "numeric_text"
    if kv.ordered:
        return "ordinal"
    return "nominal"


def _round_unit(span: float) -> int:
    """The round number top and bottom codes are rounded to: 1 below a span of 30, else 5."""
    return 1 if span < 30 else 5


def _class_rules(vals: np.ndarray, counts: np.ndarray, breaks: list[float] | None
                 ) -> list[tuple[str, list[float], float | None, float | None]]:
    """Class designs of an ordered numeric key as ``(name, cuts, bottom, top)``: ``cuts`` the
    values that start a band (bands: [min, *cuts]; empty = no bands), ``bottom`` the largest
    value of a bottom class, ``top`` the smallest of a top class. Cut points are the declared
    ``breaks`` (then nothing else), else round numbers (multiples of 1, 2, 5, 10, 20, ...
    giving 3..20 bands); top and bottom codes at breaks, else at round numbers near the 95th
    and 99th (1st) percentiles. ``vals`` sorted ascending, ``counts`` in that order."""
    from sdc.config.recode import span_label

    lo, hi = float(vals[0]), float(vals[-1])
    n = counts.sum()
    cum = np.cumsum(counts) / max(n, 1)
    out: list[tuple[str, list[float], float | None, float | None]] = []

    def below(x: float) -> float | None:      # the largest declared value under x
        v = vals[vals < x]
        return float(v[-1]) if v.size else None

    def at_least(x: float) -> float | None:   # the smallest declared value >= x
        v = vals[vals >= x]
        return float(v[0]) if v.size else None

    if breaks:
        # the breaks cut the values into intervals; each interval is kept value by value or
        # released as one class, so no class ever spans a break
        inner = [float(b) for b in breaks if lo < b <= hi]
        starts = [lo, *inner]
        m = len(starts)
        span_of = [(s0, float(vals[vals < (starts[j + 1] if j + 1 < m else np.inf)][-1]))
                   for j, s0 in enumerate(starts)]
        multi = [j for j in range(m) if np.sum((vals >= span_of[j][0])
                                              & (vals <= span_of[j][1])) > 1]
        subsets: list[tuple[int, ...]] = []
        for r in range(len(multi), 0, -1):
            subsets += list(itertools.combinations(multi, r))
        for merged in subsets[:31]:
            cuts: list[float] = []
            for j in range(m):
                inside = vals[(vals >= span_of[j][0]) & (vals <= span_of[j][1])]
                cuts += [float(inside[0])] if j in merged else [float(v) for v in inside]
            names = [span_label(*span_of[j], open_top=False) for j in merged]
            out.append((f"{', '.join(names)} merged (breaks)", cuts[1:], None, None))
        return out
    unit = _round_unit(hi - lo)
    tops: list[float] = []
    for q in (0.95, 0.99):
        v = float(vals[min(int(np.searchsorted(cum, q)), vals.size - 1)])
        t = at_least(math.floor(v / unit) * unit) if unit > 1 else v
        if t is not None and lo < t < hi and t not in tops:
            tops.append(t)
    bottoms: list[float] = []
    v = float(vals[min(int(np.searchsorted(cum, 0.01)), vals.size - 1)])
    b = below(math.ceil((v + 1) / unit) * unit) if unit > 1 else v
    if b is not None and lo < b < hi:
        bottoms.append(b)
    for t in tops:
        out.append((f"top-coded at {_fmt(t)}", [], None, t))
        for bb in bottoms:
            if bb < t:
                out.append((f"{_fmt(bb)} or less, {_fmt(t)}+", [], bb, t))
    for w in NICE_WIDTHS:
        cuts = [float(x) for x in range(math.floor(lo / w) * w + w, int(hi) + 1, w)]
        cuts = [c for c in cuts if lo < c <= hi and at_least(c) is not None]
        if not MIN_BANDS <= len(cuts) + 1 <= MAX_BANDS or w == 1:
            continue
        out.append((f"bands of {w}", cuts, None, None))
        for t in tops:
            tc = math.floor(t / w) * w
            kept = [c for c in cuts if c <= tc]     # the last band is the top code
            if tc > lo and kept != cuts and len(kept) >= 1:
                out.append((f"bands of {w}, {_fmt(at_least(tc) or tc)}+", kept, None, None))
    return out


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _fmt_list(xs: list[float]) -> str:
    return ", ".join(_fmt(x) for x in xs)


def _as_number(x: float, integral: bool) -> int | float:
    return int(x) if integral and float(x).is_integer() else float(x)


def _numeric_candidates(key: str, kv: KeyVariable, counts: np.ndarray,
                        text: bool) -> list[Candidate | None]:
    """The class designs of :func:`_class_rules` as recodings: bands / top / bottom rules of a
    numeric key, groups of the declared categories (named by what is in them) for numbers
    written as text."""
    from sdc.config.recode import span_label

    cats = list(kv.domain)
    vals = np.asarray([float(c) for c in cats])
    order = np.argsort(vals, kind="stable")
    svals, scounts = vals[order], np.asarray(counts, dtype=float)[order]
    integral = bool(np.all(vals == np.floor(vals)))
    out: list[Candidate | None] = []
    for name, cuts, bottom, top in _class_rules(svals, scounts, kv.breaks):
        if not text:
            if cuts:
                rule: dict[str, Any] = {"bands": [_as_number(svals[0], integral),
                                                  *(_as_number(c, integral) for c in cuts)]}
            else:
                rule = {**({"bottom": _as_number(bottom, integral)} if bottom is not None
                           else {}),
                        **({"top": _as_number(top, integral)} if top is not None else {})}
            out.append(_candidate(key, kv, name, rule, counts=counts))
            continue
        edges = np.asarray([svals[0], *cuts]) if cuts else None
        cls = np.empty(vals.size, dtype=np.int64)
        if edges is not None:
            cls = np.searchsorted(edges, vals, side="right") - 1
        else:
            cls = np.where(vals <= (bottom if bottom is not None else -np.inf), -1,
                           np.where(vals >= (top if top is not None else np.inf), -2,
                                    np.arange(vals.size)))
        groups: dict[str, list[Any]] = {}
        for c in np.unique(cls):
            members = [cats[i] for i in np.flatnonzero(cls == c)]
            if len(members) < 2:
                continue
            mv = vals[cls == c]
            last = edges is not None and c == len(edges) - 1 or c == -2
            groups[span_label(mv.min(), mv.max(), bool(last))] = members
        if groups:
            out.append(_candidate(key, kv, name, {"groups": groups}, counts=counts))
    return out


def _ordinal_candidates(key: str, kv: KeyVariable, counts: np.ndarray) -> list[Candidate | None]:
    """Ordered text categories: each category under a share merged with its smaller
    neighbour (never out of order), named "first to last"."""
    cats = list(kv.domain)
    n = counts.sum()
    out: list[Candidate | None] = []
    for s in RARE_SHARES + (0.1,):
        runs = [[i] for i in range(len(cats))]
        while len(runs) > 2:
            sizes = [sum(counts[i] for i in r) for r in runs]
            small = [j for j, z in enumerate(sizes) if z < s * n]
            if not small:
                break
            j = min(small, key=lambda j: sizes[j])
            nb = [x for x in (j - 1, j + 1) if 0 <= x < len(runs)]
            m = min(nb, key=lambda x: sizes[x])
            a, b = sorted((j, m))
            runs[a:b + 1] = [runs[a] + runs[b]]
        groups = {f"{cats[r[0]]} to {cats[r[-1]]}": [cats[i] for i in r]
                  for r in runs if len(r) > 1}
        if groups:
            out.append(_candidate(key, kv, f"neighbours under {s:.1%} merged",
                                  {"groups": groups}, counts=counts))
    return out


def _declared_groups(rule: Any) -> dict[str, list[Any]] | None:
    """A partition rule's groups (a grouping the user declared), as recode groups."""
    from sdc.config.model import Groups

    if isinstance(rule, Groups):
        return {g: list(m) for g, m in rule.groups.items() if len(m) > 1}
    return None


def candidates(config: ReleaseConfig, fine_marginals: dict[str, np.ndarray], *,
               derived: bool = True) -> dict[str, list[Candidate]]:
    """Recodings offered for each key, respecting what the key means (:func:`key_kind`): the
    declared values first, then the config's recoding, the levels of the key's ARX hierarchy
    (not the all-suppressing last one) and, with ``derived``: for an ordered numeric key bands,
    top and bottom codes at its declared ``breaks`` or at round numbers (never across a
    break); for ``ordered: true`` text, neighbours merged; for a nominal key the groups its
    partition rule declares and, only with ``merge: rare``, its rare categories merged into
    ``Other``. Candidates with the same code map are kept once; one that releases a single
    value, or keeps less than ``MIN_CANDIDATE_KEPT`` of the key's own entropy, is dropped."""
    out: dict[str, list[Candidate]] = {}
    src = config.input_key_variables
    for key, kv in src.items():
        counts = np.asarray(fine_marginals[key][:len(kv.domain)], dtype=float)
        found: list[Candidate | None] = [_candidate(key, kv, "declared values", None)]
        if kv.recode is not None:
            rule = kv.recode.model_dump(mode="json", exclude_none=True)
            table = kv.recode.table if isinstance(kv.recode, Hierarchy) else None
            found.append(_candidate(key, kv, "the config's recoding", rule, table, counts))
        user_part = config._user_partition.get(key, config.partition.get(key))
        hier = [r for r in (kv.recode, user_part)
                if isinstance(r, Hierarchy) and r.table is not None]
        if hier:
            h = hier[0]
            for lev in range(1, len(h.table[0]) - 1):
                found.append(_candidate(key, kv, f"hierarchy level {lev}",
                                        {"hierarchy": str(h.hierarchy), "level": lev}, h.table,
                                        counts))
        kind = key_kind(kv)
        if derived and counts.sum() > 0 and kv.merge != "never":
            if kind in ("numeric", "numeric_text") and len(kv.domain) >= 3:
                found += _numeric_candidates(key, kv, counts, kind == "numeric_text")
            elif kind == "ordinal" and len(kv.domain) >= 3:
                found += _ordinal_candidates(key, kv, counts)
            elif kind == "nominal":
                groups = _declared_groups(user_part)
                if groups:
                    found.append(_candidate(key, kv, "the partition's groups",
                                            {"groups": groups}, counts=counts))
                if kv.merge == "rare" and len(kv.domain) >= 3:
                    share = counts / counts.sum()
                    for s in RARE_SHARES:
                        rare = [c for c, p in zip(kv.domain, share, strict=True) if p < s]
                        if 2 <= len(rare) < len(kv.domain):
                            found.append(_candidate(key, kv, f"categories under {s:.1%} merged",
                                                    {"groups": {"Other": rare}}, counts=counts))
        found = [_check_meaning(c, kv) if c is not None else None for c in found]
        seen: set[bytes] = set()
        keep = []
        for c in found:
            if c is None or (c.rule is not None and (
                    c.n_released < 2 or (c.kept < MIN_CANDIDATE_KEPT
                                         and not c.name.startswith("the config's recoding")))):
                continue
            sig = c.code_map.tobytes()
            if sig not in seen:
                seen.add(sig)
                keep.append(c)
        out[key] = keep
    return out


def _check_meaning(c: Candidate, kv: KeyVariable) -> Candidate:
    """``c`` marked not meaningful when a class spans a declared break (``breaks:``) or holds
    ordered categories that are not neighbours (``ordered: true``, declared order)."""
    import dataclasses

    cm = c.code_map[:len(kv.domain)]
    ok = True
    if kv.breaks:
        vals = np.asarray([float(v) for v in kv.domain])
        side = np.searchsorted(np.asarray(kv.breaks, dtype=float), vals, side="right")
        ok = all(np.unique(side[cm == g]).size == 1 for g in np.unique(cm))
    elif kv.ordered and kv.categories is not None:
        ok = all(np.all(np.diff(np.flatnonzero(cm == g)) == 1) for g in np.unique(cm))
    return c if ok else dataclasses.replace(c, meaningful=False,
                                            name=c.name + " (crosses a declared break/order)")


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


def _coarser(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether code map ``b`` is a coarsening of ``a`` (b's classes are unions of a's)."""
    pair = np.unique(np.stack([a, b], axis=1), axis=0)
    return bool(np.unique(pair[:, 0]).size == pair.shape[0])


@dataclass
class Node:
    """One lattice node: a candidate per key and a partition variant, its figures and status.

    ``variant``: ``config`` (the config's partition; a rule finer than the node's recoding
    becomes ``as_is``), ``fine`` or ``finest`` (:func:`partition_variant`), each also with
    small PRBs merged across nominal keys first (``merge_along``: nominal, then ordered)."""

    levels: tuple[int, ...]
    variant: str = "config"
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
    merge_along: list[str] | None = None   # risk.merge_along of the variant (None: default)
    key_kept: dict[str, float] = field(default_factory=dict)
    key_tvd: dict[str, float] = field(default_factory=dict)
    min_key_kept: float = math.nan
    displacement: dict[str, float] = field(default_factory=dict)
    #: the distortion of a move, per moved record: sum over ordered keys of E|delta| / sd
    #: plus, over nominal keys, the chance the key changes (scale-free; minimised)
    displacement_sd: float = math.nan
    key_change: dict[str, float] = field(default_factory=dict)  # P(key changes | moved)
    keys_changed: float = math.nan      # expected keys changed per moved record
    meaningful: bool = True             # every recoding respects declared breaks and orders
    status: str = "not evaluated"       # certified | refused | pruned | not evaluated
    note: str = ""


@dataclass
class DesignResult:
    """All nodes, the frontier (indices into ``nodes``), the recommended node, the figures
    the rule used and, when the rule could not meet its aims, what must be given up."""

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
    target: float = TARGET_CHANGED
    warn: float = WARN_CHANGED
    verdict: str = ""
    given_up: list[str] = field(default_factory=list)


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


def displacement(x: np.ndarray, block: np.ndarray, theta_of_block: np.ndarray,
                 k_of_block: np.ndarray) -> tuple[float, float]:
    """(expected sum of |delta| over moved records, expected number of moved records) for one
    ordered key under uniform moves within a PRB: each sensitive cell j of PRB b loses
    theta_b records in expectation (t_j * theta_b / t_j), each to another cell of b chosen
    uniformly, so E sum |delta| = sum_b theta_b / (k_b - 1) * sum_{j != l in b} |x_j - x_l|.
    ``x``: each sensitive cell's position (declared units; NaN cells are left out),
    ``block``: its PRB. Pairwise sums per PRB from the sorted positions,
    sum_{i<l} (x_(l) - x_(i)) = sum_i x_(i) (2 i - k + 1): O(cells log cells)."""
    ok = np.isfinite(x)
    x, block = x[ok], block[ok]
    if not x.size:
        return 0.0, 0.0
    order = np.lexsort((x, block))
    xs, bs = x[order], block[order]
    start = np.r_[0, np.flatnonzero(np.diff(bs)) + 1]
    size = np.diff(np.r_[start, bs.size])
    rank = np.arange(bs.size) - np.repeat(start, size)
    k = np.repeat(size, size)
    pair = np.bincount(bs, weights=xs * (2 * rank - k + 1), minlength=theta_of_block.size)
    kb = k_of_block.astype(float)
    w = np.where(kb > 1, theta_of_block / np.maximum(kb - 1, 1), 0.0)
    return float((2 * pair * w).sum()), float((theta_of_block * kb).sum())


def changes_of_key(codes: np.ndarray, block: np.ndarray, theta_of_block: np.ndarray,
                   k_of_block: np.ndarray) -> float:
    """Expected number of moved records whose value of one key changes, under uniform moves
    within a PRB: sum_b theta_b / (k_b - 1) * #{ordered pairs j != l of b with different
    values} = sum_b theta_b / (k_b - 1) * (k_b^2 - sum_v n_bv^2), n_bv the cells of b with
    value v. ``codes``: each sensitive cell's released code of the key."""
    if not codes.size:
        return 0.0
    nb = theta_of_block.size
    width = int(codes.max()) + 1
    pair = np.bincount(block * width + codes, minlength=nb * width).astype(float)
    same = np.bincount(np.repeat(np.arange(nb), width), weights=pair ** 2, minlength=nb)
    kb = k_of_block.astype(float)
    w = np.where(kb > 1, theta_of_block / np.maximum(kb - 1, 1), 0.0)
    return float((w * (kb ** 2 - same)).sum())


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


def certify(part: Any, config: ReleaseConfig) -> tuple[Any, float]:
    """The block plan and the certificate of a partitioned cell table: the first half of
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
    return bplan, float(cert)


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


NOMINAL_FIRST = ", nominal keys merged first"
VARIANTS = ("fine", "finest", "fine" + NOMINAL_FIRST, "finest" + NOMINAL_FIRST)
FINE_AS_IS = 12     # an ordered key with at most this many released values: as_is (fine)
FINE_BANDS = 8      # ... else at most about this many bands (breaks or round numbers)
NOMINAL_AS_IS = 5   # a nominal key with at most this many released values: as_is


def partition_variant(config: ReleaseConfig, cands: dict[str, list[Candidate]],
                      levels: tuple[int, ...], variant: str) -> dict[str, Any] | None:
    """A partition (YAML data over the declared values) finer than the config's, confining
    PRAM's moves: ``fine``: an ordered key as_is when it has at most ``FINE_AS_IS`` released
    values, else in bands cut at its declared ``breaks`` or at round numbers (at most about
    ``FINE_BANDS``), moved to released class edges; ``finest``: every
    ordered key as_is; both: a nominal key with at most ``NOMINAL_AS_IS`` released values
    as_is, else its config rule (or none: it moves freely). Small PRBs are merged as usual
    (``small_blocks``), so a finer partition is certified like any other."""
    src = config.input_key_variables
    out: dict[str, Any] = {}
    for key, lev in zip(config.key_names, levels, strict=True):
        kv, c = src[key], cands[key][lev]
        n_rel = c.n_released - (1 if kv.missing == "category" else 0)
        kind = key_kind(kv)
        user = config._user_partition.get(key, config.partition.get(key))
        if kind in ("numeric", "numeric_text", "ordinal"):
            if variant == "finest" or n_rel <= FINE_AS_IS or kind != "numeric":
                out[key] = "as_is"
                continue
            dom = np.asarray([float(v) for v in kv.domain])
            cm = c.code_map[:len(dom)]
            first = np.full(n_rel, np.inf)
            np.minimum.at(first, cm, dom)
            starts = set(first[np.isfinite(first)].tolist())
            lo, hi = float(dom.min()), float(dom.max())
            if kv.breaks:        # the declared breaks, where they start a released class
                cuts = [float(b) for b in kv.breaks]
            else:                # round numbers: the smallest nice width giving <= FINE_BANDS
                w = next((w for w in NICE_WIDTHS if (hi - lo) / w <= FINE_BANDS), NICE_WIDTHS[-1])
                cuts = [float(x) for x in range(math.floor(lo / w) * w + w, int(hi) + 1, w)]
            edges = [lo]
            for cut in cuts:     # moved up to the start of the released class holding it
                up = [x for x in starts if x >= cut]
                if up and min(up) > edges[-1] and min(up) <= hi:
                    edges.append(min(up))
            integral = bool(np.all(dom == np.floor(dom)))
            out[key] = {"bands": [_as_number(e, integral) for e in edges]}
        elif n_rel <= NOMINAL_AS_IS:
            out[key] = "as_is"
        elif user is not None:
            out[key] = (user if isinstance(user, str)
                        else user.model_dump(mode="json", exclude_none=True))
    return out or None


def _snap(edges: list[float], kv: KeyVariable) -> list[Any]:
    """Partition band edges moved down to the start of the recoding's class holding them (the
    first edge kept), so the partition is as coarse as the recoding."""

    cmap, _ = recode_classes("key", kv, kv.recode)
    dom = np.asarray([float(v) for v in kv.domain])
    start = np.full(cmap.max() + 1, np.inf)
    np.minimum.at(start, cmap, dom)
    integral = bool(np.all(dom == np.floor(dom)))
    out = [edges[0]]
    for e in edges[1:]:
        inside = np.flatnonzero(dom >= e)
        if not inside.size:
            continue
        s = float(start[cmap[inside[0]]])
        if s > float(out[-1]):
            out.append(_as_number(s, integral))
    return out


def _node_config(data: dict[str, Any], base_dir: Path,
                 tables: dict[str, list[list[str]]]) -> tuple[ReleaseConfig, dict[str, Any]]:
    """Parse a node's config; a partition rule finer than the node's recoding becomes
    ``as_is`` (partition on the released values). Hierarchy tables come from ``tables``."""
    from sdc.config.recode import apply_recodings

    snapped: set[str] = set()
    for _ in range(2 * len(data.get("partition") or {}) + 1):
        cfg = parse_config(data, base_dir, source="design node", load_hierarchies=False,
                           recode=False)
        for rule in [*cfg.partition.values(), *(kv.recode for kv in cfg.key_variables.values())]:
            if isinstance(rule, Hierarchy):
                rule.with_table(tables[str(rule.hierarchy)])
        declared = dict(cfg.key_variables)
        try:
            apply_recodings(cfg)
        except ConfigError as e:
            bad = [v for v in (data.get("partition") or {}) if f"partition.{v}:" in str(e)]
            if not bad:
                raise
            v = bad[0]
            rule = data["partition"][v]
            kv = declared[v]
            if isinstance(rule, dict) and "bands" in rule and v not in snapped \
                    and kv.recode is not None:
                # bands of the partition moved down to the recoding's class edges (coarser)
                snapped.add(v)
                data["partition"][v] = {"bands": _snap(rule["bands"], kv)}
                continue
            data["partition"][v] = "as_is"
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
        # the spread of every ordered key (declared values, weighted by records): E|delta| / sd
        # adds ordered keys on one scale
        self.sd: dict[str, float] = {}
        for i, k in enumerate(keys):
            pos = cands[k][0].position
            if pos is None:
                continue
            x = pos[fine.key_codes[:, i]]
            ok = np.isfinite(x)
            w = fine.frequency[ok].astype(float)
            if w.sum() > 0:
                m = float((x[ok] * w).sum() / w.sum())
                self.sd[k] = float(np.sqrt((w * (x[ok] - m) ** 2).sum() / w.sum())) or 1.0

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

    def evaluate(self, levels: tuple[int, ...], floor: bool = True,
                 variant: str = "config") -> dict[str, Any]:
        """A node's figures (the :class:`Node` fields) and status."""
        n, keys = self.n, self.keys
        cells, fine_to_node = self.aggregate(levels)
        h = entropy(cells.frequency)
        kept = h / self.h_fine if self.h_fine > 0 else 1.0
        cand = {k: self.cands[k][lev] for k, lev in zip(keys, levels, strict=True)}
        out: dict[str, Any] = {"entropy_kept": kept, "loss": 1.0 - kept,
                               "meaningful": all(c.meaningful for c in cand.values()),
                               "n_cells": cells.n_cells, "variant": variant,
                               "key_kept": {k: c.kept for k, c in cand.items()},
                               "key_tvd": {k: c.tvd for k, c in cand.items()},
                               "min_key_kept": min(c.kept for c in cand.values())}
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
            if variant != "config":
                part_data = partition_variant(self.config, self.cands, levels,
                                              variant.split(",")[0])
                if part_data is None:
                    data.pop("partition", None)
                else:
                    data["partition"] = part_data
                data.setdefault("risk", {}).pop("merge_along", None)
                if variant.endswith(NOMINAL_FIRST) and part_data:
                    # small PRBs merged across nominal keys first, ordered keys last
                    src = self.config.input_key_variables
                    ordered = [v for v in part_data if key_kind(src[v]) != "nominal"]
                    data["risk"]["merge_along"] = [v for v in part_data if v not in ordered] \
                        + ordered
                    out["merge_along"] = list(data["risk"]["merge_along"])
            cfg, data = _node_config(data, self.config.base_dir, self.tables)
            out["partition"] = copy.deepcopy(data.get("partition") or {})
            part = partition_cells(cells, cfg)
            bplan, cert = certify(part, cfg)
        except (SmallBlockError, CertificationError, ConfigError) as e:
            return {**out, "status": "refused", "note": str(e)[:300]}
        blocks = bplan.blocks
        thetas = np.array([b.theta for b in blocks])
        ks = np.array([b.k for b in blocks])
        changed = float((thetas * ks).sum())
        pram = float((ks * _move_abs(thetas)).sum()) / (2 * n) if thetas.size else 0.0
        # displacement of moved records per ordered key (declared units)
        sens = np.flatnonzero(part.sensitive)
        cell_block = bplan.block_of_partition_set[part.cell_partition_set[sens]]
        inb = cell_block >= 0
        disp: dict[str, float] = {}
        key_change: dict[str, float] = {}
        score = 0.0
        moved = float((thetas * ks).sum())
        for j, k in enumerate(keys):
            if not thetas.size or moved <= 0:
                break
            codes = cells.key_codes[sens[inb], j]
            key_change[k] = changes_of_key(codes, cell_block[inb], thetas, ks) / moved
            pos = cand[k].position
            if pos is None or k not in self.sd:
                score += key_change[k]        # a nominal key: the chance it changes
                continue
            total, _ = displacement(pos[codes], cell_block[inb], thetas, ks)
            disp[k] = total / moved
            score += disp[k] / self.sd[k]     # an ordered key: E|delta| in standard deviations
        return {**out, "changed": changed, "changed_share": changed / n,
                "tvd": out["tvd_recode"] + pram, "certificate": cert,
                "n_sensitive": int(part.sensitive.sum()), "n_prbs": len(blocks),
                "displacement": disp, "displacement_sd": score, "key_change": key_change,
                "keys_changed": float(sum(key_change.values())),
                "status": "certified" if cert <= self.config.risk.xi + 1e-12 else "refused"}


_CTX: _Context | None = None


def _evaluate_levels(arg: tuple[tuple[int, ...], bool, str]) -> dict[str, Any]:
    assert _CTX is not None
    return _CTX.evaluate(*arg)


def _cost(nodes: list[Node], ok: list[int], share: float, key_floor: float) -> list[str]:
    """What getting to at most ``share`` changed would cost: the keys whose own-entropy floor
    the best such evaluated design (the highest lowest per-key share) breaks."""
    reach = [i for i in ok if nodes[i].changed_share <= share + 1e-12]
    if not reach:
        return [f"no evaluated design changes <= {share:.0%} of the records: the keys are too "
                "fine for this file (drop a key, or declare coarser public domains)"]
    alt = max(reach, key=lambda i: (nodes[i].min_key_kept, nodes[i].entropy_kept))
    lost = sorted(((k, v) for k, v in nodes[alt].key_kept.items() if v < key_floor),
                  key=lambda kv: kv[1])
    return [f"to change <= {share:.0%} (node {alt}: {nodes[alt].changed_share:.1%}): "
            + "; ".join(f"{k} would keep only {v:.0%} of its own entropy" for k, v in lost)]


def recommend(nodes: list[Node], *, key_floor: float = KEY_FLOOR,
              target: float = TARGET_CHANGED, warn: float = WARN_CHANGED
              ) -> tuple[int | None, str, list[str]]:
    """The rule: among certified nodes whose recodings respect the declared breaks and orders
    and where every key keeps at least ``key_floor`` of its own entropy, (1) those changing
    at most ``target`` of the records: the one keeping the most of the key table's entropy
    (ties: smaller displacement, fewer changed); else (2) those under ``warn`` (the release's own warning threshold): the fewest changed (ties:
    more entropy, smaller displacement); else (3) the fewest changed, and what must be given
    up to get under ``warn``: the keys whose floor the best such design breaks (or that no
    evaluated design gets there). Returns (node, verdict, given up)."""
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful]
    good = [i for i in ok if nodes[i].min_key_kept >= key_floor - 1e-12]

    def disp(i: int) -> float:
        d = nodes[i].displacement_sd
        return d if d == d else 0.0

    under = [i for i in good if nodes[i].changed_share <= target + 1e-12]
    if under:
        best = min(under, key=lambda i: (-round(nodes[i].entropy_kept, 9), disp(i),
                                         nodes[i].changed, i))
        return best, (f"changes at most {target:.0%} of the records with every key keeping >= "
                      f"{key_floor:.0%} of its own entropy; the most informative such design"), []
    below = [i for i in good if nodes[i].changed_share <= warn + 1e-12]
    if below:
        best = min(below, key=lambda i: (round(nodes[i].changed, 6), -nodes[i].entropy_kept,
                                         disp(i), i))
        return best, (f"no evaluated design with every key keeping >= {key_floor:.0%} of its "
                      f"own entropy changes <= {target:.0%}; the fewest changed under "
                      f"{warn:.0%}"), _cost(nodes, ok, target, key_floor)
    best = min(good, key=lambda i: (nodes[i].changed, -nodes[i].entropy_kept, disp(i), i),
               default=None)
    given = _cost(nodes, ok, warn, key_floor) + _cost(nodes, ok, target, key_floor)
    verdict = (f"no evaluated design keeps >= {key_floor:.0%} of every key's entropy and "
               f"changes <= {warn:.0%}")
    return best, verdict, given


def search(fine: CellTable, config: ReleaseConfig, base: dict[str, Any],
           cands: dict[str, list[Candidate]], *, budget: float = 60.0,
           keep: float = KEY_FLOOR, min_entropy: float = 0.5, max_nodes: int | None = None,
           workers: int | None = None, partitions: bool = True,
           target: float = TARGET_CHANGED,
           progress: Callable[[int, int], None] | None = None) -> DesignResult:
    """Evaluate the lattice spanned by ``cands`` on the declared-value cell table ``fine``.

    ``config``: the loaded config (its ``input_key_variables`` are the declared domains);
    ``base``: its YAML data as written (node configs are ``base`` with ``recode`` changed);
    ``budget``: seconds for planning nodes; ``min_entropy``: the joint entropy floor below
    which a node (and, by monotonicity, every coarser one) is not planned; ``keep``: the share
    of its own entropy every key of the recommended node keeps (:func:`recommend`);
    ``partitions``: also try the finer partitions of :func:`partition_variant` on the nodes
    the rule may pick (phase 2, the last third of the budget); ``workers``: processes
    planning nodes (default: the CPU count; forked, each with the cell table it inherits; 1
    plans in this process).
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

    def run(jobs: list[tuple[tuple[int, ...], bool, str]]) -> list[dict[str, Any]]:
        if pool is not None and len(jobs) > 1:
            return pool.map(_evaluate_levels, jobs)
        return [ctx.evaluate(*j) for j in jobs]

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
            jobs = [(i, v) for i in pick[:16] for v in VARIANTS]
            for s in range(0, len(jobs), batch_size):
                if time.perf_counter() - t0 > budget:
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
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified"]
    pts = np.array([[nodes[i].changed_share, nodes[i].loss, nodes[i].tvd,
                     nodes[i].displacement_sd if nodes[i].displacement_sd == nodes[i].displacement_sd
                     else 0.0] for i in ok]).reshape(-1, 4)
    frontier = [ok[j] for j in pareto_front(pts)]
    rec, verdict, given = recommend(nodes, key_floor=keep, target=target)
    if rec is not None and rec not in frontier:  # an equal point is on the frontier already
        twin = [f for f in frontier if np.allclose(pts[ok.index(f)], pts[ok.index(rec)])]
        rec = twin[0] if twin else rec
    return DesignResult(keys, cands, nodes, frontier, rec, current, h_fine, n,
                        time.perf_counter() - t0, keep, complete, target, WARN_CHANGED,
                        verdict, given)
