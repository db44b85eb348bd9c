"""Missingness patterns of person columns against the person classes (issue 44;
docs/HOUSEHOLDS.md "Risk", docs/METHOD.md 7.7 "Missingness groups").

A person's non-key values come out exactly as they went in. When a column is missing for the
persons of some person classes only (eusilc's incomes: missing exactly under 16), a member whose
class changed while keeping its values shows an impossible pattern (an income at age 0-15, none
at 25-49) and is recognisable as moved. The count pass therefore treats a **missing value as a
value**: every person's **missingness pattern** (which of the released person columns are
missing: :func:`pattern_columns`, :func:`missing_patterns`) is counted per person class
(:class:`ClassPatterns`, mergeable over batches), and the classes are split into
**missingness groups**: the connected components of the bipartite graph "class c holds pattern
q" (:func:`class_groups`). Two classes in different groups share no pattern, and a member
never leaves its group: the composition stage's partition sets are the household
sizes x the members per group (:func:`sdc.method.household_composition.composition_config`),
and the realization gives a moved member a missing class of its own group. The groups are a
function of the source only (never of the seed), so ``sdc audit`` re-derives them.

What is guaranteed: no released person holds a pattern no original person of its released
group holds; in particular a column missing exactly for some classes (a deterministic
relation) is missing exactly for them in the public file. What is not: within one group,
patterns are not tied to classes (a pattern seen in 25-49 only may be released at 65+ when both
classes share another pattern).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.unique_rows import unique_rows

__all__ = ["ClassPatterns", "MissingGroups", "class_groups", "constrain", "frame_groups",
           "member_bands",
           "foreign_patterns", "missing_groups", "mixed_person_prbs", "person_classes_of",
           "missing_patterns", "pattern_columns"]

_WORD = 63  # columns per pattern word


def pattern_columns(columns: list[str], config: Any) -> list[str]:
    """The person columns whose missingness makes a person's pattern: the released
    person-level non-key columns (:func:`~sdc.method.dependence.member_columns`), not the
    person keys, not a recalibrated weight (a function of the released household keys)."""
    from sdc.method.dependence import member_columns

    keys = set(config.person_keys)
    out = [c for c in member_columns(list(columns), config) if c not in keys]
    if getattr(config.input, "weight_release", "as_is") == "recalibrated":
        out = [c for c in out if c != config.input.weight]
    return out


def missing_patterns(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """(n, words) int64: bit i of word i // 63 is set when column ``columns[i]`` is missing."""
    n = len(frame)
    words = max(1, -(-len(columns) // _WORD))
    out = np.zeros((n, words), dtype=np.int64)
    for i, c in enumerate(columns):
        na = frame[c].isna().to_numpy()
        out[:, i // _WORD] |= na.astype(np.int64) << np.int64(i % _WORD)
    return out


class ClassPatterns:
    """Count-pass partial: persons per (class, missingness pattern). ``add`` per batch,
    ``merge`` partials; the same table whatever the batches (sorted distinct rows)."""

    def __init__(self) -> None:
        self.columns: list[str] | None = None
        self._rows = np.zeros((0, 2), dtype=np.int64)   # class, pattern words...
        self._n = np.zeros(0, dtype=np.int64)

    def add(self, frame: pd.DataFrame, person_class: np.ndarray, config: Any) -> None:
        if self.columns is None:
            self.columns = pattern_columns(list(frame.columns), config)
        if not len(frame):
            return
        rows = np.column_stack([np.asarray(person_class, np.int64),
                                missing_patterns(frame, self.columns)])
        self._add(rows, np.ones(len(frame), np.int64))

    def _add(self, rows: np.ndarray, n: np.ndarray) -> None:
        if self._n.size:
            rows, n = np.vstack([self._rows, rows]), np.r_[self._n, n]
        u, inv = unique_rows(rows)
        self._rows = u
        self._n = np.bincount(inv.reshape(-1), weights=n, minlength=u.shape[0]).astype(np.int64)

    def merge(self, other: ClassPatterns) -> None:
        if self.columns is None:
            self.columns = other.columns
        if other._n.size:
            self._add(other._rows, other._n)

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(class (m,), pattern words (m, w), persons (m,)), sorted."""
        return self._rows[:, 0], self._rows[:, 1:], self._n


def class_groups(person_class: np.ndarray, pattern: np.ndarray, n_classes: int) -> np.ndarray:
    """(P,) int64 group of every class: the connected components of the bipartite graph
    class -- pattern (``person_class`` (m,), ``pattern`` (m, w) the distinct pairs), labelled
    by their smallest class; a class no person holds is a group of its own. Union-find over the
    pairs (loops over the distinct patterns, not over records)."""
    parent = np.arange(n_classes, dtype=np.int64)

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = int(parent[c])
        return c

    cls = np.asarray(person_class, np.int64)
    if cls.size:
        _, pat = np.unique(np.asarray(pattern).reshape(cls.size, -1), axis=0,
                           return_inverse=True)
        pat = pat.reshape(-1)
        order = np.lexsort((cls, pat))
        for q in np.unique(pat):
            members = cls[order][pat[order] == q]
            r0 = root(int(members[0]))
            for c in members[1:]:
                r = root(int(c))
                if r != r0:
                    lo, hi = min(r, r0), max(r, r0)
                    parent[hi] = lo
                    r0 = lo
    return np.array([root(c) for c in range(n_classes)], dtype=np.int64)


@dataclass(frozen=True)
class MissingGroups:
    """The missingness groups of a file's person classes: ``group`` (P,) (labels:
    :func:`class_groups`), ``columns`` the pattern columns, ``relations`` the columns whose
    missingness alone splits the present classes, each with the classes where it is missing
    (``{column: [classes]}``); ``present`` (P,) bool the classes some person holds."""

    group: np.ndarray
    columns: tuple[str, ...]
    relations: dict[str, list[int]]
    present: np.ndarray
    #: the distinct (class, pattern words) pairs counted (:meth:`ClassPatterns.table`)
    pairs: tuple[np.ndarray, np.ndarray] | None = None

    def missing_sets(self) -> list[tuple[int, frozenset[str]]]:
        """Every counted (class, the names of the columns missing) pair (column order aside:
        a public file's columns may come in another order than the source's)."""
        if self.pairs is None:
            return []
        cls, pat = self.pairs
        out = []
        for c, row in zip(cls.tolist(), np.asarray(pat).reshape(len(cls), -1), strict=True):
            out.append((int(c), frozenset(name for i, name in enumerate(self.columns)
                                          if (int(row[i // _WORD]) >> (i % _WORD)) & 1)))
        return out

    @property
    def n_groups(self) -> int:
        """Groups among the present classes."""
        return int(np.unique(self.group[self.present]).size)

    @property
    def constrains(self) -> bool:
        return self.n_groups > 1

    def describe(self, config: Any) -> list[str]:
        """One line per relation: ``py010n, py050n missing <=> age in {0}`` (the person-key
        values of the classes where the columns are missing, the keys that take every
        present value left out; columns missing for the same classes on one line)."""
        from sdc.method.household_composition import class_codes

        pk = list(config.person_keys)
        allc = class_codes(np.flatnonzero(self.present), config)
        out = []
        same: dict[tuple[int, ...], list[str]] = {}
        for col, where in self.relations.items():  # columns missing for the same classes
            same.setdefault(tuple(where), []).append(col)
        for where, cols in same.items():
            col = ", ".join(cols)
            codes = class_codes(np.asarray(where, np.int64), config)
            parts = []
            for v, k in enumerate(pk):
                vals = np.unique(codes[:, v])
                if vals.size < np.unique(allc[:, v]).size:
                    cats = config.key_variables[k].categories
                    names = [str(cats[i]) if cats is not None and i < len(cats) else str(i)
                             for i in vals]
                    parts.append(f"{k} in {{{', '.join(names)}}}")
            out.append(f"{col} missing <=> " + (" and ".join(parts) or
                                                 f"{len(where)} person classes"))
        return out


def missing_groups(person_class: np.ndarray, pattern: np.ndarray, counts: np.ndarray,
                   n_classes: int, columns: list[str]) -> MissingGroups:
    """:class:`MissingGroups` from the (class, pattern) table (:meth:`ClassPatterns.table`)."""
    cls = np.asarray(person_class, np.int64)
    pattern = np.asarray(pattern, np.int64).reshape(cls.size, -1)
    present = np.zeros(n_classes, dtype=bool)
    present[cls[np.asarray(counts) > 0]] = True
    group = class_groups(cls, pattern, n_classes)
    if present.any():  # a class no person holds is in no composition: any label will do
        group[~present] = group[present].min()
    relations = {}
    for i, c in enumerate(columns):
        na = ((pattern[:, i // _WORD] >> (i % _WORD)) & 1).astype(bool)
        miss, have = np.unique(cls[na]), np.unique(cls[~na])
        if miss.size and have.size and not np.intersect1d(miss, have).size:
            relations[c] = [int(x) for x in miss]
    return MissingGroups(group, tuple(columns), relations, present, (cls, pattern))


def foreign_patterns(source: MissingGroups, public: MissingGroups) -> int:
    """``sdc audit``: the distinct (released class, missing columns) pairs of the public file
    whose pattern no source person of the class's group has (0 when the groups held)."""
    allowed = {(int(source.group[c]), m) for c, m in source.missing_sets()}
    cols = set(source.columns)
    return sum((int(source.group[c]), m & cols) not in allowed
               for c, m in public.missing_sets() if c < source.group.size)


def frame_groups(frame: pd.DataFrame, person_class: np.ndarray, n_classes: int,
                 config: Any) -> MissingGroups:
    """:class:`MissingGroups` of a whole file in memory (``sdc design``, the tests): the
    count pass's :class:`ClassPatterns` over one batch."""
    cp = ClassPatterns()
    cp.add(frame, person_class, config)
    cls, pat, n = cp.table()
    return missing_groups(cls, pat, n, n_classes, list(cp.columns or []))


def member_bands(n_classes: int, config: Any) -> tuple[np.ndarray, list[str]] | None:
    """``risk.member_bands`` (docs/HOUSEHOLDS.md "Member bands"): (P,) int64 the band of every
    person class (mixed radix over the keys with cut points: the classes a moved member may
    take are those of its own band) and one line per key naming its bands; None when unset.
    A key's band is counted on its released values (the recoded bands' lower bounds: age
    -1/16/25/50/65 with cuts [16, 25, 65] gives -1 | 16 | 25, 50 | 65). Raises
    :class:`~sdc.errors.InputError` for a key without numeric released values."""
    from sdc.errors import InputError
    from sdc.method.designs.households import household_design_of
    from sdc.method.household_composition import class_codes

    spec = household_design_of(config).bands
    if not spec:
        return None
    pk = list(config.person_keys)
    codes = class_codes(np.arange(n_classes, dtype=np.int64), config)
    band = np.zeros(n_classes, np.int64)
    lines = []
    for k, cuts in spec.items():
        cats = config.key_variables[k].categories
        try:
            values = np.asarray([float(c) for c in cats], np.float64)
        except (TypeError, ValueError):
            raise InputError(
                f"risk.member_bands: {k!r} needs numeric released values (a range key recoded "
                f"into bands: `recode: {{bands: [...]}}`); its values are {cats}") from None
        cut = np.asarray(sorted(float(c) for c in cuts), np.float64)
        b = np.searchsorted(cut, values, side="right")  # band of every released value
        band = band * (cut.size + 1) + b[codes[:, pk.index(k)]]
        names = [", ".join(f"{v:g}" for v in values[b == i]) for i in np.unique(b)]
        lines.append(f"{k} kept within " + " | ".join(names) + " (risk.member_bands)")
    return band, lines


def constrain(table: Any, groups: MissingGroups | None, config: Any,
              hk_codes: np.ndarray | None = None) -> Any:
    """The composition table ``table`` with the missingness groups as its constraint
    (``group``, and ``relations``: :meth:`MissingGroups.describe`) when they split the
    present classes, and ``risk.member_bands`` (:func:`member_bands`: ``band``, the partition
    sets split by members per band); else ``table`` as it is (one group: the release does not
    change).

    With bands and ``hk_codes`` (H, p) (the households' household-key codes): a banded set
    with exactly one sensitive (HK, composition) cell (t < 1/xi) cannot hold a PRB, and its
    households would all draw their household keys (every member changes); such sets are
    joined per household size and missingness groups (``unbanded``: their members may cross
    a band, the fewest that must), which a PRB can then hold. A function of the source only,
    so ``sdc audit`` re-derives it."""
    import dataclasses

    n_cls = int(np.asarray(table.counts).shape[1])
    bands = member_bands(n_cls, config)
    split = groups is not None and groups.constrains
    if bands is None and not split:
        return table
    out = table
    if split:
        out = dataclasses.replace(out, group=np.asarray(groups.group, np.int64),
                                  relations=tuple(groups.describe(config)))
    if bands is None:
        return out
    out = dataclasses.replace(out, band=np.asarray(bands[0], np.int64),
                              relations=tuple(out.relations) + tuple(bands[1]))
    if hk_codes is None:
        return out
    hk = np.asarray(hk_codes, np.int64).reshape(out.household.size, -1)
    rows, inv, t = np.unique(np.column_stack([hk, out.household]), axis=0,
                             return_inverse=True, return_counts=True)
    sensitive = t * float(config.risk.xi) < 1.0
    cset = out.partition_set()
    cell_set = cset[rows[:, -1]]
    sens = np.bincount(cell_set[sensitive], minlength=int(cset.max(initial=0)) + 1)
    lone = np.flatnonzero(sens == 1)
    if lone.size:
        out = dataclasses.replace(out, unbanded=np.isin(cset, lone))
    return out


def person_classes_of(codes: np.ndarray, config: Any) -> np.ndarray:
    """(n,) int64 mixed-radix code of the person-key codes ``codes`` (n, q), config order of
    ``config.person_keys`` (any number of classes: the two-stage release's person stage)."""
    from sdc.method.cells import combine_codes

    sizes = [int(config.key_variables[k].size) for k in config.person_keys]
    codes = np.asarray(codes, np.int64).reshape(-1, len(sizes))
    return combine_codes(codes.T, sizes, codes.shape[0])


def mixed_person_prbs(plan: Any, patterns: ClassPatterns, config: Any) -> str | None:
    """The two-stage release's person stage (no ``protect``): a person PRB that holds person
    classes of two missingness groups would move a member into a class whose pattern it does
    not have (a column missing exactly under 16 released for a moved child). The refusal
    message (exit 2: the column, the relation, the fixes) when a PRB mixes groups, else
    None."""
    cls, pat, n = patterns.table()
    if cls.size == 0 or plan is None or not len(plan.prb_start):
        return None
    u, local = np.unique(cls, return_inverse=True)
    grp = class_groups(local.reshape(-1), pat, u.size)
    if np.unique(grp).size <= 1:
        return None
    table = plan.partitioned.cells
    names = list(table.names)
    pk = [names.index(k) for k in config.person_keys]
    cell_cls = person_classes_of(np.asarray(table.key_codes, np.int64)[:, pk], config)
    pos = np.clip(np.searchsorted(u, cell_cls), 0, max(u.size - 1, 0))
    cell_grp = np.where(u[pos] == cell_cls, grp[pos], -1)
    cells = np.asarray(plan.prb_cells, np.int64)
    starts = np.r_[np.asarray(plan.prb_start, np.int64), cells.size]
    bad = [b for b in range(starts.size - 1)
           if np.unique(cell_grp[cells[starts[b]:starts[b + 1]]]).size > 1]
    if not bad:
        return None
    g = missing_groups(local.reshape(-1), pat, n, u.size, list(patterns.columns or []))
    cols = list(g.relations) or list(patterns.columns or [])
    where = [str(plan.blocks["partition_key"].iat[b]) for b in bad[:3]]
    return (f"{len(bad)} person PRB(s) mix person classes whose members have different "
            f"missing values ({', '.join(cols[:8])} missing for some classes of "
            f"{', '.join(config.person_keys)} only; e.g. PRB {where}): a person moved between "
            "them keeps its missing values and shows a pattern its released class never has, "
            "which shows it moved; nothing was released. Fixes: `risk.composition: protect` "
            "(members never leave the classes their missing values allow: docs/HOUSEHOLDS.md, "
            "'Risk'), a partition of the person key that keeps those classes apart "
            "(`partition: {KEY: {bands: [...]}}` or `{groups: ...}`, a boundary where the columns "
            "start or stop being missing, e.g. `{age: {bands: [0, 16]}}`), or drop "
            f"the columns (`input.drop: [{', '.join(cols[:8])}]`).")
