"""Release configuration: the YAML file an agency keeps for one release job.

The model is strict: unknown keys and wrong types are rejected with the dotted path of the
offending key and what was expected (:func:`format_validation_error`). Paths are relative to
the config file; :func:`load_config` resolves them and loads every generalization hierarchy it
names, so the engine never touches the file system. The full reference with an example:
README.md, "Release config (YAML)".
"""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime
from numbers import Real
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    Tag,
    field_validator,
    model_validator,
)

__all__ = [
    "Analysis",
    "AsIs",
    "Bands",
    "ConfigError",
    "DPPerturb",
    "EngineSpec",
    "Groups",
    "Hierarchy",
    "InputSpec",
    "KeyVariable",
    "OutputSpec",
    "ReleaseConfig",
    "NearSpec",
    "RiskSpec",
    "Schedule",
    "SeedFile",
    "TopBottom",
    "UtilitySpec",
    "certificate_text",
    "check_xi",
]

def _strict_category(v: Any) -> Any:
    # YAML `true`/`false` or 1.5 must not silently become the category 1 or 0
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise ValueError(f"a category must be an integer or a string, not a {type(v).__name__}; "
                         "quote it in the YAML to make it a string")
    return v


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
MAX_KEY_VALUES = 10_000_000
"""The most values one key variable may declare (a range is sized before anything is
allocated)."""


#: a text an integer column reader would take for a number ("01", "+3", " 7")
_NUMBER_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


def _int_text(c: str) -> int | None:
    """The integer a category text writes exactly as Python writes it (``"1"``, ``"-3"``;
    not ``"01"``), else None."""
    try:
        v = int(c)
    except ValueError:
        return None
    return v if str(v) == c else None


Category = Annotated[StrictInt | StrictStr, BeforeValidator(_strict_category)]
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SCHEDULER_RE = re.compile(
    r"^(?:(tcp|tls|ws|wss|ucx)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":([0-9]{1,5})$")


class ConfigError(ValueError):
    """A release config that cannot be used. The message names the key and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=True)


class InputSpec(_Strict):
    """Where the microdata come from and which columns are identifiers."""

    path: Path
    format: Literal["csv", "parquet", "sav", "dta"] | None = None
    delimiter: str = ","
    encoding: str = "utf-8"
    id_column: str | None = None
    drop: list[str] = Field(default_factory=list)
    weight: str | None = None
    na_values: list[str] = Field(default_factory=list)
    """CSV only: texts that mean missing in the columns that are not key variables, besides
    the empty field (``[NA, "n/a"]``). None by default: ``NA`` or ``null`` is kept as text."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Variable labels of columns that are not key variables (``{income: "Yearly income"}``);
    written into SPSS/Stata files and the codebook. Key variables take ``label:``."""
    household_id: str | None = None
    """Household file: the column grouping persons into households. Household-level keys
    (``level: household``) are post-randomized once per household; the public file keeps this
    column with keyed pseudonyms (see docs/HOUSEHOLDS.md)."""
    household_columns: list[str] = Field(default_factory=list)
    """Non-key columns that belong to the household (dwelling, household weight): checked to
    be constant within every household, like the household-level keys."""

    @field_validator("delimiter")
    @classmethod
    def _one_char(cls, v: str) -> str:
        if len(v) != 1:
            raise ValueError(f"delimiter must be exactly one character, got {v!r}")
        if not v.isascii() or not v.isprintable() and v != "\t" or v == '"':
            what = ("the quote character" if v == '"' else
                    "not an ASCII character" if not v.isascii() else "a control character")
            raise ValueError(
                f"delimiter {v!r} is {what}: the CSV readers split lines on one ASCII byte "
                "(',', ';', tab, '|', ...); convert the file to such a delimiter first (e.g. "
                "pandas.read_csv(path, sep=..., engine='python').to_csv(new_path, index=False))")
        return v

    @property
    def resolved_format(self) -> str:
        """The declared format, or the one implied by the file suffix."""
        if self.format:
            return self.format
        suffix = self.path.suffix.lower().lstrip(".")
        return {"csv": "csv", "txt": "csv", "parquet": "parquet", "pq": "parquet",
                "sav": "sav", "zsav": "sav", "dta": "dta"}.get(suffix, "csv")


class KeyVariable(_Strict):
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
            if lo < _INT64_MIN or hi > _INT64_MAX:
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
                     if isinstance(c, str) and _int_text(c) is not None and _int_text(c) in ints]
            if twins:
                raise ValueError(
                    f"'categories' lists both {_int_text(twins[0])} and {twins[0]!r}: in a CSV "
                    "file the two are the same text, so a record cannot tell them apart. Keep "
                    "one: the number, or the text (then quote every category)")
            numeric = [c for c in self.categories
                       if isinstance(c, str) and _NUMBER_TEXT.fullmatch(c)]
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
        return list(range(lo, hi + 1))

    @property
    def size(self) -> int:
        n = len(self.categories) if self.categories is not None else self.range[1] - self.range[0] + 1  # type: ignore[index]
        return n + (1 if self.missing == "category" else 0)


class AsIs(_Strict):
    """Partition on the variable's own categories (also written as the bare string ``as_is``)."""

    as_is: Literal[True] = True


class Bands(_Strict):
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


class Groups(_Strict):
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


class Hierarchy(_Strict):
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


class TopBottom(_Strict):
    """Top and/or bottom coding of a numeric key (recoding only): every value >= ``top`` is
    released as ``"<top>+"``, every value <= ``bottom`` as ``"<=<bottom>"``; the values between
    are released as they are."""

    top: float | None = None
    bottom: float | None = None

    @model_validator(mode="after")
    def _some(self) -> TopBottom:
        if self.top is None and self.bottom is None:
            raise ValueError("give 'top', 'bottom' or both")
        for x in (self.top, self.bottom):
            if x is not None and not math.isfinite(x):
                raise ValueError(f"top/bottom must be finite numbers, got {x}")
        if self.top is not None and self.bottom is not None and not self.bottom < self.top:
            raise ValueError(f"'bottom' ({self.bottom}) must be below 'top' ({self.top})")
        return self


def _recode_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        found = [k for k in ("bands", "groups", "hierarchy") if k in v]
        if not found and ("top" in v or "bottom" in v):
            return "recode:topbottom"
        return f"recode:{found[0]}" if len(found) == 1 else None
    return {Bands: "recode:bands", Groups: "recode:groups", Hierarchy: "recode:hierarchy",
            TopBottom: "recode:topbottom"}.get(type(v))


RecodeRule = Annotated[
    Annotated[Bands, Tag("recode:bands")]
    | Annotated[Groups, Tag("recode:groups")]
    | Annotated[Hierarchy, Tag("recode:hierarchy")]
    | Annotated[TopBottom, Tag("recode:topbottom")],
    Discriminator(
        _recode_kind,
        custom_error_type="recode_rule",
        custom_error_message=(
            "a recoding is one of: {bands: [left edges]}, {top: value, bottom: value}, "
            "{groups: {name: [categories]}} (categories in no group are kept), "
            "{hierarchy: file.csv, level: n}"
        ),
    ),
]
KeyVariable.model_rebuild()


class NearSpec(_Strict):
    """The near-cell destination design W of ``risk.destinations: near`` (docs/METHOD.md 7.12).

    W = sum_{i<=s} a_i (P^i + P^-i)/2 with P one step along a nearest-neighbour tour of the
    PRB's cells under the key distance (steps: 1 per other value of a nominal key, per
    adjacent value of an ordered key, per level up a hierarchy): exactly doubly stochastic.

    - ``neighbours`` = 2s: destinations of every cell (s on each side along the tour);
    - ``bandwidth`` h > 0: a_i proportional to exp(-(i-1)/h) (tour steps);
    - the **spread floor**: at least ``min_destinations`` destinations and none above
      ``max_weight``. A PRB with fewer than 2s other cells gets the uniform W.
    """

    bandwidth: float = 1.0
    neighbours: int = 8
    min_destinations: int = 4
    max_weight: float = 0.25

    @model_validator(mode="after")
    def _sane(self) -> NearSpec:
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"near.bandwidth must be a positive number, got {self.bandwidth}")
        if self.min_destinations < 2:
            raise ValueError(f"near.min_destinations must be at least 2, got "
                             f"{self.min_destinations}")
        if not 0.0 < self.max_weight < 1.0:
            raise ValueError(f"near.max_weight must lie in (0, 1), got {self.max_weight}")
        need = max(self.min_destinations, math.ceil(1.0 / self.max_weight - 1e-12))
        if self.neighbours < need:
            raise ValueError(
                f"near.neighbours = {self.neighbours} cannot hold {self.min_destinations} "
                f"destinations with none above max_weight = {self.max_weight}: give at least "
                f"{need}")
        return self


class RiskSpec(_Strict):
    """The identification-risk target and how to reach it.

    - ``xi``: bound on every correct-match probability R_j(a, t); must lie in (1/3, 1).
    - ``theta``: ``theorem`` uses theta solving h(theta) = xi for every PRB (NZY);
      ``calibrated`` uses, per PRB, the smallest theta whose exact max risk is <= xi.
    - ``small_blocks``: what to do with a PRB of k < kmin = ceil(1/(1-theta)) cells:
      ``merge`` it with a neighbouring partition set, ``calibrate`` its theta exactly (merging
      if even theta -> 1 cannot certify it), or ``fail``.
    - ``merge_along``: partition variables to coarsen along, in order (default: banded
      variables, then hierarchies, then groups, then as-is variables, in config order).
    - ``destinations``: ``uniform`` (NZY) or ``near`` (``near:`` options, :class:`NearSpec`;
      docs/METHOD.md 7.12).
    """

    xi: float
    theta: Literal["theorem", "calibrated"] = "theorem"
    small_blocks: Literal["merge", "calibrate", "fail"] = "merge"
    merge_along: list[str] | None = None
    households: Literal["fail", "warn"] = "fail"
    """Household files: when the composition intruder's measured risk exceeds xi, ``fail``
    (the default) refuses the release (exit 2, nothing written); ``warn`` publishes it, stated
    in the codebook and the report as "household composition not protected"
    (docs/HOUSEHOLDS.md)."""
    composition: Literal["measure", "protect"] = "measure"
    """Household files: ``protect`` keys the household stage on the household keys x the
    household's composition (members per combination of the person keys), so the composition
    intruder is certified exactly (docs/HOUSEHOLDS.md, "Protecting household composition");
    ``measure`` (the default) only measures it."""
    weighted: bool = False
    """``true``: survey-weighted cell totals unbiased (needs ``input.weight``; person files):
    PRBs cut into groups of similar mean weight, m_j = c_g / W_j (docs/METHOD.md 7.11)."""
    destinations: Literal["uniform", "near"] = "uniform"
    """Where a moving record goes inside its PRB: ``uniform`` (NZY: any other cell, 1/(k-1)),
    or ``near``: a doubly stochastic W preferring cells that differ in few keys and by small
    steps (docs/METHOD.md 7.12; options under ``near``)."""
    near: NearSpec | None = None
    """Options of ``destinations: near`` (defaults when absent)."""

    @property
    def near_options(self) -> NearSpec:
        """``near`` with its defaults."""
        return self.near if self.near is not None else NearSpec()

    @field_validator("xi", mode="before")
    @classmethod
    def _xi_number(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"xi must be a number in (1/3, 1), got {v!r}")
        return v

    @field_validator("xi")
    @classmethod
    def _xi_range(cls, v: float) -> float:
        return check_xi(v)


class SeedFile(_Strict):
    """A file holding the release seed (a decimal integer). Created with mode 0600 if missing."""

    file: Path


_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
_PLACEHOLDERS = {"date": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


class OutputSpec(_Strict):
    """Where the release folder goes. ``dir`` may contain ``{date}`` (YYYY-MM-DD), ``{month}``
    (YYYY-MM) or ``{year}``, filled with the UTC date of the run, so a scheduled job writes one
    release per period instead of finding last period's folder in the way."""

    dir: Path
    formats: list[Literal["parquet", "csv", "sav", "dta"]] = Field(
        default_factory=lambda: ["parquet"])

    @field_validator("dir")
    @classmethod
    def _known_placeholders(cls, v: Path) -> Path:
        unknown = [m for m in _PLACEHOLDER_RE.findall(str(v)) if m not in _PLACEHOLDERS]
        if unknown:
            raise ValueError(f"unknown placeholder {{{unknown[0]}}} in output.dir; use "
                             f"{', '.join('{' + k + '}' for k in _PLACEHOLDERS)}")
        return v

    def dir_for(self, when: datetime | None = None) -> Path:
        """``dir`` with its placeholders filled for ``when`` (default: now, UTC)."""
        when = when or datetime.now(UTC)
        text = _PLACEHOLDER_RE.sub(lambda m: when.strftime(_PLACEHOLDERS[m.group(1)]), str(self.dir))
        return Path(text)

    @field_validator("formats")
    @classmethod
    def _some(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("'formats' needs at least one of parquet, csv, sav, dta")
        if not {"parquet", "csv"} & set(v):
            raise ValueError(f"'formats' {list(v)} needs parquet or csv as well: sav and dta are "
                             "written in addition, and `sdc audit` re-verifies a release from "
                             "its Parquet or CSV file; use e.g. [parquet, sav]")
        return list(dict.fromkeys(v))


class EngineSpec(_Strict):
    """Which executor runs the two record passes (count cells, apply the plan).

    ``engine: pandas`` (default: the file in memory), ``engine: streaming`` (one machine, out of
    core: record batches) or ``engine: {kind: dask, scheduler: tcp://host:port, workers: 2,
    scratch: /shared/tmp, batch_rows: 1048576}``. Without ``scheduler`` the dask engine starts a
    LocalCluster of ``workers`` processes; ``scratch`` is the temporary folder for the public
    order buckets (on an existing cluster: a folder every worker and the client can reach).
    Every engine gives the same release (byte-identical public files)."""

    kind: Literal["pandas", "streaming", "dask"] = "pandas"
    scheduler: str | None = None
    workers: int = Field(default=2, ge=1, le=256)
    scratch: Path | None = None
    batch_rows: int = Field(default=1 << 20, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        return {"kind": v} if isinstance(v, str) else v

    @field_validator("scheduler")
    @classmethod
    def _scheduler_address(cls, v: str | None) -> str | None:
        """A Dask scheduler address, ``tcp://HOST:PORT`` (also tls, ws, wss, ucx; the scheme
        may be left out): refused here, with the form, rather than by Dask at run time."""
        if v is None:
            return v
        m = _SCHEDULER_RE.match(v.strip())
        if m is None or not 1 <= int(m.group(3)) <= 65535:
            raise ValueError(
                f"{v!r} is not a Dask scheduler address; write tcp://HOST:PORT with a port "
                "1..65535 (e.g. tcp://10.0.0.5:8786, the address `dask scheduler` prints), or "
                "leave engine.scheduler out to start a local cluster")
        return v.strip()

    @model_validator(mode="after")
    def _dask_only(self) -> EngineSpec:
        if self.kind != "dask" and self.scheduler is not None:
            raise ValueError(f"'scheduler' is for kind: dask, not {self.kind!r}")
        return self


class ReviewSpec(_Strict):
    """A review gate before publishing: the release is staged (owner-only) and published only
    when one of ``approvers`` runs ``sdc approve`` (an empty list: any named person)."""

    required: bool = True
    approvers: list[StrictStr] = Field(default_factory=list)


#: names a formula may use besides columns: numpy (np.log), formulaic's own transforms
_FORMULA_FUNCTIONS = {"np", "numpy", "log", "exp", "sqrt", "abs", "log1p", "log2", "log10",
                      "center", "scale", "standardize", "poly", "bs", "C", "I", "lag",
                      "contr", "hashed", "basis_spline", "cs", "cr"}


def formula_variables(formula: str) -> list[str]:
    """The data columns a Wilkinson formula (formulaic) uses, sorted; raises ValueError with
    formulaic's message when the formula does not parse or has no ``~``."""
    from formulaic import Formula

    if "~" not in formula:
        raise ValueError("a formula needs an outcome and '~' (e.g. 'log(wage) ~ education')")
    try:
        f = Formula(formula)
        names = f.required_variables
    except Exception as e:  # formulaic's syntax errors carry the position in their message
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m|[⧚⧛]", "", str(e)).split())
        raise ValueError(f"does not parse: {text}") from None
    if not getattr(f, "lhs", None) or not list(f.lhs):
        raise ValueError("a formula needs an outcome left of '~'")
    return sorted(str(n) for n in names if str(n) not in _FORMULA_FUNCTIONS)


class Analysis(_Strict):
    """One analysis the agency cares about (``utility.analyses``): a formula (formulaic's
    Wilkinson syntax, e.g. ``log(wage) ~ education + experience + I(experience**2)``), fitted
    by OLS on the original and on the public file; ``name`` labels it in the report."""

    formula: StrictStr
    name: StrictStr | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_formula(cls, v: Any) -> Any:
        return {"formula": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _parses(self) -> Analysis:
        try:
            formula_variables(self.formula)
        except ValueError as e:
            raise ValueError(f"formula {self.formula!r}: {e}") from None
        return self

    @property
    def variables(self) -> list[str]:
        """The data columns the formula uses."""
        return formula_variables(self.formula)

    @property
    def label(self) -> str:
        return self.name or self.formula


class UtilitySpec(_Strict):
    """``utility:``: what the report measures besides the built-in figures."""

    analyses: list[Analysis] = Field(default_factory=list)


class Schedule(_Strict):
    cron: str
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, v: str) -> str:
        if len(v.split()) != 5:
            raise ValueError(f"cron must have 5 fields (minute hour day month weekday), got {v!r}")
        return v


class DPPerturb(_Strict):
    """eps-differentially private PRAM (Ayed et al.) of one non-key categorical variable.

    ``categories``: the variable's public domain, decided without looking at the data;
    required. A domain read from the data reveals every value present (one "astronaut" in 600
    records came out as 113: the value exists), so it is not differentially private; it is
    allowed only with ``domain_from_data: true``, and the codebook then says "not
    differentially private: domain taken from the data".
    ``proportions``: public proportions (same order as ``categories``) the design is optimised
    for. Without them the input's own proportions are used; the design then depends on the
    confidential data and is kept internal (see ``sdc.method.perturb``).
    """

    mechanism: Literal["dp_pram"] = "dp_pram"
    epsilon: float = Field(gt=0, le=20)
    categories: list[Category] | None = None
    proportions: list[float] | None = None
    domain_from_data: bool = False

    @model_validator(mode="after")
    def _proportions(self) -> DPPerturb:
        if self.categories is None and not self.domain_from_data:
            raise ValueError(
                "DP-PRAM needs the variable's public domain: list every value it can take under "
                "'categories' (decided without looking at the data). Taking the values from the "
                "data reveals which values occur (a value held by one respondent appears in "
                "the public file many times), so the release would not be differentially "
                "private; to accept that, set 'domain_from_data: true' (the codebook then says "
                "so)")
        if self.categories is not None and self.domain_from_data:
            raise ValueError("give either 'categories' or 'domain_from_data: true', not both")
        if self.proportions is not None:
            if self.categories is None or len(self.categories) != len(self.proportions):
                raise ValueError("'proportions' needs 'categories' of the same length")
            if any(p < 0 for p in self.proportions) or abs(sum(self.proportions) - 1) > 1e-6:
                raise ValueError(f"'proportions' must be >= 0 and sum to 1, got {self.proportions}")
        if self.categories is not None and len(self.categories) < 2:
            raise ValueError("'categories' needs at least 2 categories for DP-PRAM")
        return self


class ReleaseConfig(_Strict):
    """One release job. See the module docstring for the YAML shape."""

    name: str
    input: InputSpec
    key_variables: dict[str, KeyVariable]
    partition: dict[str, PartitionRule] = Field(default_factory=dict)
    risk: RiskSpec
    seed: int | SeedFile | None = None
    output: OutputSpec | None = None
    schedule: Schedule | None = None
    perturb: dict[str, DPPerturb] = Field(default_factory=dict)
    #: non-key columns released as a function of the RELEASED key values (the mapping observed
    #: in the input; refused when the column is not a function of the keys)
    derived: list[str] = Field(default_factory=list)
    engine: EngineSpec = Field(default_factory=EngineSpec)
    review: ReviewSpec | None = None
    utility: UtilitySpec = Field(default_factory=UtilitySpec)
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source_path: Path | None = PrivateAttr(default=None)
    # recoded keys (sdc.config.recode): the user's declaration of each recoded key, its
    # partition rule as written, and the map of its input codes to released codes
    _source_keys: dict[str, KeyVariable] = PrivateAttr(default_factory=dict)
    _user_partition: dict[str, Any] = PrivateAttr(default_factory=dict)
    _recode_maps: dict[str, Any] = PrivateAttr(default_factory=dict)
    _user_merge_along: bool = PrivateAttr(default=True)

    @field_validator("seed", mode="before")
    @classmethod
    def _seed_not_bool(cls, v: Any) -> Any:
        # YAML `true` is a bool, and a bool is an int in Python: `seed: true` became seed 1
        if isinstance(v, bool) or isinstance(v, float):
            raise ValueError(
                f"seed must be {{file: secrets/<name>.seed}} (a seed file sdc creates with 128 "
                f"random bits on the first run) or, for tests and demos, a whole number; got "
                f"{v!r} ({type(v).__name__})")
        return v

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                f"name must be letters, digits, '.', '_' or '-' (it names folders), got {v!r}"
            )
        return v

    @field_validator("key_variables")
    @classmethod
    def _some_keys(cls, v: dict[str, KeyVariable]) -> dict[str, KeyVariable]:
        if not v:
            raise ValueError("declare at least one key variable")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ReleaseConfig:
        keys = set(self.key_variables)
        not_keys = [p for p in self.partition if p not in keys]
        if not_keys:
            raise ValueError(
                f"partition: {not_keys} {'is' if len(not_keys) == 1 else 'are'} not declared under "
                f"key_variables ({sorted(keys)}); partition sets are built from generalized key "
                "variables only"
            )
        if self.risk.merge_along is not None:
            bad = [m for m in self.risk.merge_along if m not in self.partition]
            if bad:
                raise ValueError(f"risk.merge_along: {bad} not among the partition variables")
        if self.risk.weighted and self.risk.destinations == "near":
            raise ValueError(
                "risk.weighted: true and risk.destinations: near cannot be combined yet (the "
                "weighted mode draws uniformly inside its weight groups): choose one")
        if self.risk.weighted and self.input.weight is None:
            raise ValueError("risk.weighted: true needs input.weight (the survey weight "
                             "column whose cell totals it keeps unbiased); name it, or set "
                             "risk.weighted: false")
        if self.risk.weighted and self.input.household_id is not None:
            raise ValueError(
                "risk.weighted: true is not available for household files yet (the household "
                "stage would need the household weights and the person stage the person "
                "weights, each balanced within its own PRBs; docs/METHOD.md 7.11); set "
                "risk.weighted: false: counts stay unbiased, weighted totals are reported")
        special = {
            "input.id_column": self.input.id_column,
            "input.weight": self.input.weight,
        }
        for where, col in special.items():
            if col is not None and col in keys:
                raise ValueError(f"{where}: {col!r} is also a key variable; it cannot be both")
        labelled_keys = [c for c in self.input.labels if c in keys]
        if labelled_keys:
            raise ValueError(f"input.labels: {labelled_keys} are key variables; give their label "
                             f"as key_variables.{labelled_keys[0]}.label")
        if "record_id" in keys:
            # the public file numbers its records in record_id (sdc.io.schemas.PUBLIC_ID); a key
            # cannot be the id column or dropped, so renaming is the one fix
            raise ValueError(
                "key_variables: 'record_id' is the name of the public record id the release "
                "adds; rename the column (in the file, e.g. to 'record_no', and under "
                "key_variables)")
        clash = [d for d in self.input.drop if d in keys]
        if clash:
            raise ValueError(f"input.drop: {clash} are key variables; a key cannot be dropped")
        if self.input.id_column is not None and self.input.id_column in self.input.drop:
            raise ValueError(
                f"input.drop lists the id column {self.input.id_column!r} (input.id_column): the "
                "release needs it to key its draws and never publishes it; remove it from "
                "input.drop")
        for var, rule in self.partition.items():
            kv = self.key_variables[var]
            if isinstance(rule, Groups):
                _check_groups(var, rule, kv)
            if isinstance(rule, Bands) and kv.categories is not None:
                nonnum = [c for c in kv.categories if not isinstance(c, int | float)]
                if nonnum:
                    raise ValueError(
                        f"partition.{var}: bands need numeric categories, but {var} has {nonnum[:3]}"
                    )
        _check_households(self)
        for var in self.perturb:
            if var in keys:
                raise ValueError(
                    f"perturb.{var}: {var!r} is a key variable (NZY perturbs it); DP-PRAM applies "
                    "to non-key variables only"
                )
        _check_derived(self)
        _check_analyses(self)
        return self

    # -- resolved paths ---------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """The folder the config's relative paths are relative to."""
        return self._base_dir

    @property
    def source_path(self) -> Path | None:
        return self._source_path

    def resolve(self, path: Path) -> Path:
        """``path`` made absolute relative to the config file's folder."""
        p = Path(path).expanduser()
        return Path(os.path.normpath(p if p.is_absolute() else (self._base_dir / p)))

    @property
    def input_path(self) -> Path:
        return self.resolve(self.input.path)

    @property
    def output_dir(self) -> Path:
        """The release folder (placeholders such as ``{date}`` filled with today's UTC date)."""
        if self.output is None:
            return self.resolve(Path("releases") / self.name)
        return self.resolve(self.output.dir_for())

    @property
    def input_key_variables(self) -> dict[str, KeyVariable]:
        """The key variables as the input file holds them: a recoded key's declaration before
        recoding (``key_variables`` holds the released, recoded domains)."""
        if not self._source_keys:
            return self.key_variables
        return {k: self._source_keys.get(k, kv) for k, kv in self.key_variables.items()}

    @property
    def recoded_keys(self) -> list[str]:
        """Key variables whose released values are recoded (``key_variables.X.recode``)."""
        return [k for k in self.key_variables if k in self._source_keys]

    def recode_map(self, key: str) -> Any:
        """``(code_map, n_released)`` of a recoded key: ``code_map[c]`` is the released code
        of input code ``c`` (the ``missing`` category included, last)."""
        return self._recode_maps[key]

    def without_recoding(self) -> ReleaseConfig:
        """A copy whose key variables are taken as the file holds them (no recoding step):
        the view for a file that is already in released values, e.g. the public file."""
        c = self.model_copy(deep=True)
        c._source_keys, c._recode_maps = {}, {}
        c._base_dir, c._source_path = self._base_dir, self._source_path
        return c

    def declared_view(self) -> ReleaseConfig:
        """A copy in the declared values: the recoded keys as the user declared them (their
        partition rules as written), no recoding step. For counting the file's own values."""
        c = self.without_recoding()
        c.key_variables = dict(self.input_key_variables)
        c.partition = {**self.partition, **self._user_partition}
        c._user_partition = {}
        if c.output is not None:
            c.output.formats = ["parquet"]
        return c

    @property
    def partition_variables(self) -> list[str]:
        return list(self.partition)

    @property
    def key_names(self) -> list[str]:
        return list(self.key_variables)

    @property
    def household_keys(self) -> list[str]:
        """Key variables of ``level: household`` (config order); empty for a person file."""
        return [k for k, kv in self.key_variables.items() if kv.level == "household"]

    @property
    def person_keys(self) -> list[str]:
        """Key variables of ``level: person`` (config order)."""
        return [k for k, kv in self.key_variables.items() if kv.level == "person"]


def _check_households(cfg: ReleaseConfig) -> None:
    """Cross checks of ``input.household_id``, ``input.household_columns`` and ``level:``."""
    hid, hcols = cfg.input.household_id, cfg.input.household_columns
    hkeys = cfg.household_keys
    if hid is None:
        if hkeys:
            raise ValueError(f"key_variables: {hkeys} have level: household, which needs "
                             "input.household_id (the column naming each person's household)")
        if hcols:
            raise ValueError("input.household_columns needs input.household_id (the column "
                             "naming each person's household)")
        return
    if cfg.risk.destinations == "near":
        raise ValueError(
            "risk.destinations: near is not available for household files yet (input."
            "household_id is set): the household and person stages draw their destinations "
            "uniformly. Remove risk.destinations (or set it to uniform)")
    keys = set(cfg.key_variables)
    if hid in keys:
        raise ValueError(f"input.household_id: {hid!r} is also a key variable; it cannot be both")
    if hid == cfg.input.id_column:
        raise ValueError(f"input.household_id: {hid!r} is also input.id_column; the person id "
                         "and the household id must be different columns")
    if hid in cfg.input.drop:
        raise ValueError(f"input.household_id: {hid!r} is listed in input.drop; the public file "
                         "keeps the household column (with pseudonyms), so it cannot be dropped")
    bad = [c for c in hcols if c in keys]
    if bad:
        raise ValueError(f"input.household_columns: {bad} are key variables; declare them "
                         "with level: household under key_variables instead")
    bad = [c for c in hcols if c == hid or c == cfg.input.id_column or c in cfg.input.drop]
    if bad:
        raise ValueError(f"input.household_columns: {bad} is the household id, the person id "
                         "or a dropped column; list only released non-key columns")
    if not hkeys:
        raise ValueError("input.household_id is set but no key variable has level: household; "
                         "mark the household variables (region, urban/rural, ...) with "
                         "level: household, or remove input.household_id")
    if not cfg.person_keys:
        raise ValueError("every key variable has level: household; a household file needs "
                         "at least one person-level key (sex, age, ...), otherwise release "
                         "the household table as a file of its own")


def _check_analyses(cfg: ReleaseConfig) -> None:
    """A formula of ``utility.analyses`` may use keys and non-key columns the public file
    holds as collected: not the id, dropped identifiers, ``perturb:`` or ``derived:``
    columns (their public values are not the input's). Columns missing from the input are
    refused when the input is read (:func:`sdc.method.partition.check_columns`)."""
    bad = {c: "input.id_column (never released)" for c in [cfg.input.id_column] if c}
    bad.update({c: "input.drop (never released)" for c in cfg.input.drop})
    bad.update({c: "perturb: (randomized in the public file)" for c in cfg.perturb})
    bad.update({c: "derived: (recomputed from the released keys; use the keys)"
                for c in cfg.derived})
    seen: set[str] = set()
    for i, a in enumerate(cfg.utility.analyses):
        where = f"utility.analyses[{i}] ({a.formula!r})"
        for v in a.variables:
            if v in bad:
                raise ValueError(f"{where}: column {v!r} is in {bad[v]}; an analysis compares "
                                 "the original with the public file, so use columns the public "
                                 "file holds as collected")
        if a.label in seen:
            raise ValueError(f"{where}: two analyses are named {a.label!r}; give each a "
                             "distinct name")
        seen.add(a.label)


def _check_derived(cfg: ReleaseConfig) -> None:
    """``derived:`` names non-key columns that are released (not dropped, not the id, the
    weight or a ``perturb:`` column), each once."""
    roles = {**{k: "a key variable" for k in cfg.key_variables},
             **{d: "in input.drop (never released)" for d in cfg.input.drop},
             **{p: "a perturb: column" for p in cfg.perturb}}
    if cfg.input.id_column:
        roles[cfg.input.id_column] = "input.id_column (never released)"
    if cfg.input.weight:
        roles[cfg.input.weight] = "input.weight (drop it, or make the weight a key)"
    for c in cfg.derived:
        if c in roles:
            raise ValueError(f"derived: {c!r} is {roles[c]}; a derived column is a released "
                             "non-key column recomputed from the released key values")
    dup = sorted({c for c in cfg.derived if cfg.derived.count(c) > 1})
    if dup:
        raise ValueError(f"derived: {dup} listed twice")


def _check_groups(var: str, rule: Groups, kv: KeyVariable) -> None:
    domain = kv.domain
    dom = set(domain)
    where: dict[Any, str] = {}
    for g, members in rule.groups.items():
        for m in members:
            if m in where:
                raise ValueError(
                    f"partition.{var}.groups: category {m!r} is in both {where[m]!r} and {g!r}; "
                    "each category must be in exactly one group"
                )
            where[m] = g
    unknown = [m for m in where if m not in dom]
    if unknown:
        raise ValueError(
            f"partition.{var}.groups: {unknown[:5]} are not declared categories of {var}"
        )
    missing = [c for c in domain if c not in where]
    if missing:
        raise ValueError(
            f"partition.{var}.groups: categories {missing[:10]} of {var} are in no group; "
            "add them to a group"
        )


_XI_HELP = (
    "xi must lie strictly between 1/3 and 1: below or at 1/3 no unbiased NZY PRAM can bound "
    "every correct-match probability (h(theta) > 1/3 for all theta < 1), and at or above 1 "
    "there is nothing to protect"
)


def certificate_text(certificate: float, xi: float, digits: int = 6, tol: float = 1e-12) -> str:
    """``"0.394025 <="`` (or ``">"``): the certificate with at least ``digits`` decimals and as
    many more as it takes for the comparison with xi to read true (at xi = 0.9999999 a
    certificate of 0.99999983 printed as "1.000000 <= xi"). Within ``tol`` above xi counts as
    <= xi (the checks' tolerance) and is shown as xi."""
    ok = certificate <= xi + tol
    c = min(certificate, xi) if ok else certificate
    for d in range(digits, 18):
        shown = f"{c:.{d}f}"
        v = float(shown)
        if (v <= xi) == ok and (v != xi or c == xi):
            return f"{shown} {'<=' if ok else '>'}"
    return f"{c!r} {'<=' if ok else '>'}"


def check_xi(xi: object) -> float:
    """Return ``xi`` as a float if 1/3 < xi < 1, else raise ``ValueError`` saying why."""
    if isinstance(xi, bool) or not isinstance(xi, Real | np.floating | np.integer):
        raise ValueError(f"{_XI_HELP}; got {xi!r} ({type(xi).__name__}), not a number")
    x = float(xi)
    if not math.isfinite(x) or not (1.0 / 3.0 < x < 1.0):
        raise ValueError(f"{_XI_HELP}; got xi = {x!r}")
    if x - 1.0 / 3.0 < 1e-9:
        # theta = 1 - 3 (xi - 1/3) + ...: closer than 1e-9 to 1/3, theta rounds towards 1 and
        # kmin = ceil(1/(1 - theta)) exceeds any real file.
        raise ValueError(f"{_XI_HELP}; got xi = {x!r}, which is so close to 1/3 that theta "
                         "rounds to 1 and every PRB would need more than 10^8 cells: use a "
                         "larger xi (0.35 or more is usual)")
    return x


