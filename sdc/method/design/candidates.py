"""The recoding candidates of ``sdc design``: per key, coarser public versions of its declared
values (bands, top/bottom codes, merged rare categories, hierarchy levels), each with the share
of the key's own entropy it keeps and whether it respects the declared breaks and order
(docs/DESIGN.md, "Candidates")."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.model import ConfigError, Hierarchy, KeyVariable, ReleaseConfig

__all__ = ["Candidate", "candidates", "entropy", "key_kind"]

RARE_SHARES = (0.002, 0.005, 0.01, 0.02, 0.05)
NICE_WIDTHS = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000)
MAX_BANDS, MIN_BANDS = 50, 3
MIN_CANDIDATE_KEPT = 0.4   # a candidate keeping less of its key's own entropy is not offered

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


def as_number(x: float, integral: bool) -> int | float:
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
                rule: dict[str, Any] = {"bands": [as_number(svals[0], integral),
                                                  *(as_number(c, integral) for c in cuts)]}
            else:
                rule = {**({"bottom": as_number(bottom, integral)} if bottom is not None
                           else {}),
                        **({"top": as_number(top, integral)} if top is not None else {})}
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


def coarser(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether code map ``b`` is a coarsening of ``a`` (b's classes are unions of a's)."""
    pair = np.unique(np.stack([a, b], axis=1), axis=0)
    return bool(np.unique(pair[:, 0]).size == pair.shape[0])
