"""Release configuration: the YAML file an agency keeps for one release job.

The model is strict: unknown keys and wrong types are rejected with the dotted path of the
offending key and what was expected (:func:`format_validation_error`). Paths are relative to
the config file; :func:`load_config` resolves them and loads every generalization hierarchy it
names, so the engine never touches the file system. The full reference with an example:
docs/CONFIG.md.

This module holds the whole config (:class:`ReleaseConfig`) and the checks across its
sections; the sections are in :mod:`sdc.config.sections`, the key variables and their rules in
:mod:`sdc.config.keys`, the shared base in :mod:`sdc.config.base` (all re-exported here).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, PrivateAttr, field_validator, model_validator

from sdc.config.base import ConfigError, StrictModel
from sdc.config.keys import AsIs, Bands, Groups, Hierarchy, KeyVariable, PartitionRule, TopBottom
from sdc.config.sections import (
    Analysis,
    DPPerturb,
    EngineSpec,
    ExecutorSpec,
    InputSpec,
    NearSpec,
    OutputSpec,
    ReviewSpec,
    RiskSpec,
    Schedule,
    SeedFile,
    UtilitySpec,
    certificate_text,
    check_xi,
    formula_variables,
)

__all__ = [
    "Analysis",
    "AsIs",
    "Bands",
    "ConfigError",
    "DPPerturb",
    "EngineSpec",
    "ExecutorSpec",
    "Groups",
    "Hierarchy",
    "InputSpec",
    "KeyVariable",
    "OutputSpec",
    "ReleaseConfig",
    "ReviewSpec",
    "NearSpec",
    "RiskSpec",
    "Schedule",
    "SeedFile",
    "TopBottom",
    "UtilitySpec",
    "certificate_text",
    "check_xi",
    "formula_variables",
]


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ReleaseConfig(StrictModel):
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
    #: the executor (``executor:``; ``engine:`` is the key's old name, still accepted)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec,
                                   validation_alias=AliasChoices("executor", "engine"))
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

    @model_validator(mode="before")
    @classmethod
    def _one_executor_key(cls, v: Any) -> Any:
        if isinstance(v, dict) and "executor" in v and "engine" in v:
            raise ValueError("give 'executor' (or its old name 'engine'), not both")
        return v

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
        if self.risk.weighted and self.input.weight is None:
            raise ValueError("risk.weighted: true needs input.weight (the survey weight "
                             "column whose cell totals it keeps unbiased); name it, or set "
                             "risk.weighted: false")
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
    def engine(self) -> ExecutorSpec:
        """The old name of :attr:`executor`."""
        return self.executor

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


def _members_sampled(cfg: ReleaseConfig, hid: str | None) -> None:
    """``input.members: sampled``: the composition intruder outside the threat model of every
    group, carried as ``risk.large_groups: 0`` of the two-stage release (not set under
    ``protect``, which certifies every composition anyway)."""
    if hid is None:
        raise ValueError("input.members: sampled needs input.household_id (the column naming "
                         "each member's group)")
    if cfg.risk.large_groups not in (None, 0):
        raise ValueError(
            f"input.members: sampled takes every group out of the composition intruder's "
            f"threat model; risk.large_groups: {cfg.risk.large_groups} says groups of at most "
            f"{cfg.risk.large_groups} members are in it. Remove one of them")
    if cfg.risk.composition != "protect":
        cfg.risk.large_groups = 0


def _check_households(cfg: ReleaseConfig) -> None:
    """Cross checks of ``input.household_id``, ``input.household_columns`` and ``level:``."""
    hid, hcols = cfg.input.household_id, cfg.input.household_columns
    hkeys = cfg.household_keys
    inc = cfg.utility.household_income
    if inc is not None and inc not in hcols:
        raise ValueError(f"utility.household_income: {inc!r} must be one of input."
                         "household_columns (an equivalised income has one value per household)")
    if cfg.input.weight_release == "recalibrated" and (hid is None or cfg.input.weight is None):
        raise ValueError(
            "input.weight_release: recalibrated needs input.weight and input.household_id (the "
            "weight is post-stratified to the released household keys); for a person file "
            "release the weight as_is, or drop it")
    if cfg.input.members == "sampled":
        _members_sampled(cfg, hid)
    elif cfg.risk.large_groups == 0:
        raise ValueError(
            "risk.large_groups: 0 takes every group out of the composition intruder's threat "
            "model: that is the declaration input.members: sampled (members are a sample of "
            "each group, docs/HOUSEHOLDS.md \"Sampled members\"); set it, or a threshold of "
            "1 or more")
    if hid is None:
        if cfg.risk.large_groups is not None:
            raise ValueError("risk.large_groups needs input.household_id (the column naming "
                             "each person's group)")
        if hkeys:
            raise ValueError(f"key_variables: {hkeys} have level: household, which needs "
                             "input.household_id (the column naming each person's household)")
        if hcols:
            raise ValueError("input.household_columns needs input.household_id (the column "
                             "naming each person's household)")
        if cfg.risk.near is not None and cfg.risk.near.fallback_weights is not None:
            raise ValueError("risk.near.fallback_weights is for the composition stage of a "
                             "household file (input.household_id, risk.composition: protect), "
                             "whose dependence check picks each PRB's weights; remove it")
        return
    if cfg.risk.destinations == "near" and cfg.risk.composition != "protect":
        raise ValueError(
            "risk.destinations: near is available for household files with risk.composition: "
            "protect only (its household stage moves a household to a near composition: "
            "docs/HOUSEHOLDS.md); the two-stage release draws its destinations uniformly. "
            "Set risk.composition: protect, or remove risk.destinations (or set it to uniform)")
    if cfg.risk.near is not None and cfg.risk.near.fallback_weights is not None \
            and cfg.risk.weighted:
        raise ValueError("risk.near.fallback_weights is not available with risk.weighted: "
                         "true (the weight groups' W are built apart); remove one of them")
    if cfg.risk.member_bands:
        if cfg.risk.composition != "protect":
            raise ValueError("risk.member_bands is for risk.composition: protect (the bands a "
                             "moved member keeps); set risk.composition: protect or remove it")
        for k, cuts in cfg.risk.member_bands.items():
            kv = cfg.key_variables.get(k)
            if kv is None or kv.level != "person":
                raise ValueError(f"risk.member_bands: {k!r} must be a person-level key variable "
                                 f"(person keys: {cfg.person_keys})")
            if list(cuts) != sorted(set(cuts)):
                raise ValueError(f"risk.member_bands.{k}: cut points must be increasing, got "
                                 f"{list(cuts)}")
    if cfg.risk.large_groups is not None and cfg.risk.composition == "protect":
        raise ValueError(
            "risk.large_groups is for the two-stage release (risk.composition: measure): under "
            "protect the composition intruder of every group is certified. Remove one of them")
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
