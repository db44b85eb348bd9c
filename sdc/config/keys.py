"""The key variables of a release config: a key's declared domain (``KeyVariable``), its
partition rule (``as_is``, bands, groups, an ARX hierarchy level) and its recoding rule (bands,
top/bottom coding, groups, a hierarchy level)."""

from __future__ import annotations

import math
import re
import weakref
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from sdc.config.base import (
    INT64_MAX,
    INT64_MIN,
    MAX_KEY_VALUES,
    NUMBER_TEXT,
    Category,
    StrictModel,
    int_text,
)

__all__ = ["AsIs", "Bands", "Groups", "Hierarchy", "KeyVariable", "PartitionRule", "RecodeBands",
           "RecodeRule", "TopBottom"]

#: how a numeric class is released (docs/CONFIG.md, "Recoding"): ``lower`` its edge (the
#: smallest declared value it holds; a bottom code its largest), ``midpoint`` the middle of the
#: declared values it holds (closed classes; open top/bottom classes keep their edge)
ReleasedValue = Literal["lower", "midpoint"]

#: ``importance: high | normal | low`` as weights of the design's move distortion
#: (docs/DESIGN.md, "Analytic importance"); a positive number is its own weight
IMPORTANCE = {"high": 4.0, "normal": 1.0, "low": 0.25}


class AsIs(StrictModel):
    """Partition on the variable's own categories (also written as the bare string ``as_is``)."""

    as_is: Literal[True] = True


class Bands(StrictModel):
    """Numeric bands given by their left edges, strictly increasing: [0, 18, 25] means
    [0, 18), [18, 25), [25, inf). Every declared value must fall in a band."""

    bands: list[float]

    @field_validator("bands")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if len(v) == 0:
            raise ValueError("'bands' needs at least one left edge")
        if any(not math.isfinite(x) for x in v):
            raise ValueError(f"'bands' must be finite numbers, got {v}")
        bad = [(a, b) for a, b in zip(v, v[1:], strict=False) if not a < b]
        if bad:
            raise ValueError(
                f"'bands' left edges must be strictly increasing (sorted, no overlap or repeat); "
                f"{bad[0][0]} is followed by {bad[0][1]}"
            )
        return v


class Groups(StrictModel):
    """Category groups: group name -> the categories it contains. Every declared category must
    be in exactly one group; group order is the merge order."""

    groups: dict[str, list[Category]]

    @field_validator("groups")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Category]]) -> dict[str, list[Category]]:
        if not v:
            raise ValueError("'groups' needs at least one group")
        for name, members in v.items():
            if not members:
                raise ValueError(f"group {name!r} is empty")
        return v


class Hierarchy(StrictModel):
    """An ARX-format generalization hierarchy file (``value;level1;level2;...;*``) at a level.

    Level 0 is the value itself; level 1 the second column, and so on. The file is read by
    :func:`load_config` (into ``table``), not by the engine.
    """

    hierarchy: Path
    level: int = Field(ge=0)
    delimiter: str = ";"
    _table: list[list[str]] | None = PrivateAttr(default=None)

    @property
    def table(self) -> list[list[str]] | None:
        return self._table

    def with_table(self, table: list[list[str]]) -> Hierarchy:
        self._table = table
        return self


def _rule_kind(v: Any) -> str | None:
    """Which partition rule the user wrote: chosen by its key, so only that one is validated."""
    if isinstance(v, str):
        return "rule:as_is_word"
    if isinstance(v, dict):
        found = [k for k in ("bands", "groups", "hierarchy", "as_is") if k in v]
        return f"rule:{found[0]}" if len(found) == 1 else None
    return {AsIs: "rule:as_is", Bands: "rule:bands", Groups: "rule:groups",
            Hierarchy: "rule:hierarchy"}.get(type(v))


PartitionRule = Annotated[
    Annotated[Literal["as_is"], Tag("rule:as_is_word")]
    | Annotated[AsIs, Tag("rule:as_is")]
    | Annotated[Bands, Tag("rule:bands")]
    | Annotated[Groups, Tag("rule:groups")]
    | Annotated[Hierarchy, Tag("rule:hierarchy")],
    Discriminator(
        _rule_kind,
        custom_error_type="partition_rule",
        custom_error_message=(
            "a partition rule is one of: as_is, {bands: [left edges]}, "
            "{groups: {name: [categories]}}, {hierarchy: file.csv, level: n}"
        ),
    ),
]


def _finite(x: float | None, what: str) -> None:
    if x is not None and not math.isfinite(x):
        raise ValueError(f"'{what}' must be a finite number, got {x}")


class RecodeBands(Bands):
    """Bands as a recoding: ``value`` (default ``lower``) chooses the number each class is
    released as (:data:`ReleasedValue`); ``top_value`` declares the open last band's."""

    value: ReleasedValue | None = None
    top_value: float | None = None

    @model_validator(mode="after")
    def _finite_values(self) -> RecodeBands:
        _finite(self.top_value, "top_value")
        return self


class TopBottom(StrictModel):
    """Top and/or bottom coding of a numeric key (recoding only): every value >= ``top`` is
    released as ``"<top>+"``, every value <= ``bottom`` as ``"<=<bottom>"``; the values between
    are released as they are. ``top_value`` / ``bottom_value`` declare the number the top /
    bottom class is released as (default: its edge); ``value`` as for bands (kept values are
    single values, so only the declared values matter)."""

    top: float | None = None
    bottom: float | None = None
    value: ReleasedValue | None = None
    top_value: float | None = None
    bottom_value: float | None = None

    @model_validator(mode="after")
    def _some(self) -> TopBottom:
        if self.top is None and self.bottom is None:
            raise ValueError("give 'top', 'bottom' or both")
        for x in (self.top, self.bottom):
            if x is not None and not math.isfinite(x):
                raise ValueError(f"top/bottom must be finite numbers, got {x}")
        if self.top is not None and self.bottom is not None and not self.bottom < self.top:
            raise ValueError(f"'bottom' ({self.bottom}) must be below 'top' ({self.top})")
        _finite(self.top_value, "top_value")
        _finite(self.bottom_value, "bottom_value")
        if self.top_value is not None and self.top is None:
            raise ValueError("'top_value' needs 'top' (the released value of the top code)")
        if self.bottom_value is not None and self.bottom is None:
            raise ValueError("'bottom_value' needs 'bottom' (the released value of the bottom "
                             "code)")
        return self


def _recode_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        found = [k for k in ("bands", "groups", "hierarchy") if k in v]
        if not found and ("top" in v or "bottom" in v):
            return "recode:topbottom"
        return f"recode:{found[0]}" if len(found) == 1 else None
    return {Bands: "recode:bands", RecodeBands: "recode:bands", Groups: "recode:groups",
            Hierarchy: "recode:hierarchy", TopBottom: "recode:topbottom"}.get(type(v))


RecodeRule = Annotated[
    Annotated[RecodeBands, Tag("recode:bands")]
    | Annotated[Groups, Tag("recode:groups")]
    | Annotated[Hierarchy, Tag("recode:hierarchy")]
    | Annotated[TopBottom, Tag("recode:topbottom")],
    Discriminator(
        _recode_kind,
        custom_error_type="recode_rule",
        custom_error_message=(
            "a recoding is one of: {bands: [left edges]}, {top: value, bottom: value}, "
            "{groups: {name: [categories]}} (categories in no group are kept), "
            "{hierarchy: file.csv, level: n}; bands and top/bottom codes may add "
            "value: lower | midpoint (the number each class is released as)"
        ),
    ),
]


#: a large range's values per KeyVariable (by id; dropped when the model is collected)
_RANGE_VALUES: dict[int, tuple[tuple[int, int], tuple[int, ...]]] = {}
#: ranges this short are listed on every access (the cache would cost more than it saves)
_CACHE_FROM = 4096


def _range_values(kv: KeyVariable, lo: int, hi: int) -> tuple[int, ...] | range:
    """The integers lo..hi of ``kv``'s range, made once per model for a large range (a
    5-million range took 0.1 s per :attr:`KeyVariable.domain`, which a release reads ~60
    times; copying the kept tuple into a list costs a fifth of that). Kept while the model
    lives and keyed by the bounds too: a model whose range is reassigned gets its values
    anew; a ``model_copy`` is another model; nothing is added to a pickled config."""
    if hi - lo < _CACHE_FROM:
        return range(lo, hi + 1)
    hit = _RANGE_VALUES.get(id(kv))
    if hit is not None and hit[0] == (lo, hi):
        return hit[1]
    values = tuple(range(lo, hi + 1))
    if hit is None:
        weakref.finalize(kv, _RANGE_VALUES.pop, id(kv), None)
    _RANGE_VALUES[id(kv)] = ((lo, hi), values)
    return values


class KeyVariable(StrictModel):
    """A key variable: what an intruder can match on. Exactly one of ``categories`` or ``range``.

    ``categories`` lists the declared domain (integers or strings) in the order used for codes,
    codebooks and merging; ``range: [lo, hi]`` declares the integers lo..hi inclusive (ages).
    ``missing: error`` rejects empty values; ``missing: category`` treats them as one more
    category (released as empty).
    """

    categories: list[Category] | None = None
    range: tuple[int, int] | None = None
    labels: dict[Category, str] = Field(default_factory=dict)
    missing: Literal["error", "category"] = "error"
    #: with ``missing: category``: False (default) = missing is a cell of its own that never
    #: receives or loses records (records with a missing value are post-randomized only among
    #: records missing the same keys, so a blank is always a real blank); True = a missing
    #: value moves like any category (a blank may be a perturbed real value; needed when the
    #: records with a missing value are too few to certify on their own). The codebook states
    #: which applies (docs/METHOD.md 7.9).
    missing_moves: bool = False
    label: str | None = None
    """Variable label (SPSS/Stata variable label, codebook)."""
    level: Literal["household", "person"] = "person"
    """``household``: the variable belongs to the household (constant within it; needs
    ``input.household_id``) and is post-randomized once per household."""
    _composition_counts: Any = PrivateAttr(default=None)
    """The composition stage's own key only (sdc.method.household_composition): (C, P) members
    per person class of every composition code, for the near design's distance."""

    @property
    def composition_counts(self) -> Any:
        return self._composition_counts

    def with_composition_counts(self, counts: Any, classes: Any = None) -> KeyVariable:
        self._composition_counts = counts
        self._composition_classes = classes
        return self

    _composition_classes: Any = PrivateAttr(default=None)
    """The composition stage's own key only: (P, q) codes of every person class in the
    person keys that are ordered (age bands), None without one: the matching kernel's
    preference for destinations that move members to adjacent classes."""

    @property
    def composition_classes(self) -> Any:
        return self._composition_classes
    breaks: list[float] | None = None
    """Cut points with meaning for ``sdc design`` (a numeric key): a value at or above a break
    starts a new class, so no recoding it proposes puts values on both sides of a break in one
    class (years of schooling ``breaks: [9, 12, 16]``: 12 is never merged with 11 or 16)."""
    ordered: bool | None = None
    """Whether the categories are ordered (in the order listed): ``sdc design`` then merges
    only neighbours. Default: numbers filling at least half of their span (a ``range:``,
    ages, counts) are ordered; text and sparse numeric codes are nominal."""
    merge: Literal["rare", "never"] | None = None
    """``rare``: ``sdc design`` may merge this nominal key's rare categories into ``Other``
    (by frequency). Without it a nominal key is merged only along a declared hierarchy or the
    groups its partition rule declares."""
    importance: float | str | None = None
    """How much analysts need this key's released values (``sdc design`` only; the release
    ignores it): ``high``, ``normal`` (default), ``low`` or a positive weight (high = 4,
    normal = 1, low = 0.25). The design weighs each key's moves by it, tries a partition
    holding the important keys and lets the least important ones move (docs/DESIGN.md,
    "Analytic importance")."""
    recode: RecodeRule | None = None
    """Recoding of the released values (``sdc.config.recode``): bands, top/bottom coding,
    groups or an ARX hierarchy level. The release (cells, PRBs, certificate, public files) is
    in the recoded values; :func:`load_config` replaces this key by its released domain."""

    @model_validator(mode="after")
    def _one_domain(self) -> KeyVariable:
        if (self.categories is None) == (self.range is None):
            raise ValueError("give exactly one of 'categories' (a list) or 'range' ([lo, hi])")
        if self.categories is not None:
            if len(self.categories) == 0:
                raise ValueError("'categories' must not be empty")
            seen: set[Any] = set()
            dupes = [c for c in self.categories if c in seen or seen.add(c)]
            if dupes:
                raise ValueError(f"'categories' lists {dupes[:5]} more than once")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"'range' must be [lo, hi] with lo <= hi, got {list(self.range)}")
        if self.range is not None:
            lo, hi = self.range
            if lo < INT64_MIN or hi > INT64_MAX:
                raise ValueError(
                    f"'range' [{lo}, {hi}] goes beyond 64-bit integers (-2^63 .. 2^63-1), which "
                    "no input column can hold: give the range of the values that occur")
            if hi - lo + 1 > MAX_KEY_VALUES:
                raise ValueError(
                    f"'range' [{lo}, {hi}] declares {hi - lo + 1:,} values; a key variable may "
                    f"have at most {MAX_KEY_VALUES:,} (every value gets a code, a cell in the "
                    "key space and a codebook line): give the range of the values that occur, "
                    "or recode the variable into bands (recode: {bands: [...]})")
        if self.categories is not None:
            if len(self.categories) > MAX_KEY_VALUES:
                raise ValueError(f"'categories' lists {len(self.categories):,} values; a key "
                                 f"variable may have at most {MAX_KEY_VALUES:,}")
            ints = {c for c in self.categories if isinstance(c, int)}
            twins = [c for c in self.categories
                     if isinstance(c, str) and int_text(c) is not None and int_text(c) in ints]
            if twins:
                raise ValueError(
                    f"'categories' lists both {int_text(twins[0])} and {twins[0]!r}: in a CSV "
                    "file the two are the same text, so a record cannot tell them apart. Keep "
                    "one: the number, or the text (then quote every category)")
            numeric = [c for c in self.categories
                       if isinstance(c, str) and NUMBER_TEXT.fullmatch(c)]
            if ints and numeric:
                n = next(c for c in self.categories if isinstance(c, int))
                raise ValueError(
                    f"'categories' mixes numbers ({n}) and text that reads as a number "
                    f"({numeric[0]!r}): a column holding both is read either as numbers (then "
                    f"{numeric[0]!r} would become {int(numeric[0].strip())}) or as text (then no "
                    f"value matches {n}). Quote every category (all text, leading zeros kept: "
                    f"{[str(c) if isinstance(c, int) else c for c in self.categories][:4]}...) "
                    "or give only numbers")
        if self.labels:
            self.labels = self._labels_on_domain()
        if self.breaks is not None:
            if self.categories is not None and not all(
                    isinstance(c, int | float) and not isinstance(c, bool)
                    for c in self.categories):
                raise ValueError("'breaks' are cut points of a numeric key; this key has text "
                                 "categories (declare 'ordered: true' to keep their order)")
            if any(not math.isfinite(b) for b in self.breaks) or any(
                    not a < b for a, b in zip(self.breaks, self.breaks[1:], strict=False)):
                raise ValueError(f"'breaks' must be finite, strictly increasing numbers, got "
                                 f"{self.breaks}")
        return self

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, str) and v.strip().lower() in IMPORTANCE:
            return v.strip().lower()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) \
                and v > 0:
            return float(v)
        raise ValueError("'importance' must be high, normal, low or a positive number (a "
                         "weight; normal = 1): e.g. importance: high")

    @property
    def importance_weight(self) -> float:
        """The key's weight in the design's move distortion (1 when not declared)."""
        v = self.importance
        if v is None:
            return 1.0
        return IMPORTANCE[v] if isinstance(v, str) else float(v)

    def _in_domain(self, v: Any, cats: set[Any]) -> bool:
        if self.categories is not None:
            return v in cats  # ints and strs never compare equal: one set holds both exactly
        lo, hi = self.range  # type: ignore[misc]
        return isinstance(v, int) and lo <= v <= hi

    def _labels_on_domain(self) -> dict[Any, str]:
        """``labels`` keyed by declared categories. A label quoted as a string for an integer
        category (``labels: {"1": Male}`` with ``categories: [1, 2]``), or the other way
        round, is moved to that category; a label of anything else is refused with the key
        (it was silently dropped: its category never occurs)."""
        out: dict[Any, str] = {}
        where: dict[Any, Any] = {}
        cats = set(self.categories or ())
        for key, text in self.labels.items():
            target = key
            if not self._in_domain(key, cats):
                alt: Any = None
                if isinstance(key, str) and re.fullmatch(r"[+-]?[0-9]+", key.strip()):
                    alt = int(key)
                elif isinstance(key, int):
                    alt = str(key)
                if alt is None or not self._in_domain(alt, cats):
                    dom = (f"categories {list(self.categories)[:10]}"
                           + (" ..." if len(self.categories) > 10 else "")
                           if self.categories is not None
                           else f"range {list(self.range)}")  # type: ignore[arg-type]
                    raise ValueError(
                        f"'labels' has a label for {key!r} ({text!r}), which is not a declared "
                        f"category ({dom}); fix the key or add the category")
                target = alt
            if target in out:
                raise ValueError(
                    f"'labels' gives category {target!r} two labels: {where[target]!r}: "
                    f"{out[target]!r} and {key!r}: {text!r}; keep one")
            out[target] = text
            where[target] = key
        return out

    @property
    def domain(self) -> list[Category]:
        """Declared categories in code order (the range expanded)."""
        if self.categories is not None:
            return list(self.categories)
        lo, hi = self.range  # type: ignore[misc]
        return list(_range_values(self, lo, hi))

    def range_values(self) -> np.ndarray | None:
        """A ``range:`` key's integers lo..hi in code order as int64 (without the missing
        category), for callers that need them as one array; None for a ``categories:`` key."""
        if self.range is None:
            return None
        lo, hi = self.range
        return lo + np.arange(hi - lo + 1, dtype=np.int64)  # no overflow at hi = 2^63 - 1

    @property
    def size(self) -> int:
        n = len(self.categories) if self.categories is not None else self.range[1] - self.range[0] + 1  # type: ignore[index]
        return n + (1 if self.missing == "category" else 0)
