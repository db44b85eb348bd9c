"""The sections of a release config besides its key variables: ``input``, ``risk`` (xi and how to
reach it; ``near``), ``seed``, ``output``, ``executor``, ``review``, ``utility``, ``schedule``,
``perturb``; and the xi range every entry point checks (:func:`check_xi`)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from numbers import Real
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import (
    Field,
    StrictStr,
    field_validator,
    model_validator,
)

from sdc.config.base import Category, StrictModel

__all__ = ["EXECUTOR_ALIASES", "EXECUTOR_CHOICES", "Analysis", "DPPerturb", "EngineSpec",
           "ExecutorSpec", "InputSpec", "NearSpec", "OutputSpec", "ReviewSpec", "RiskSpec",
           "Schedule", "SeedFile", "UtilitySpec", "certificate_text", "check_xi",
           "executor_name", "formula_variables"]

_SCHEDULER_RE = re.compile(
    r"^(?:(tcp|tls|ws|wss|ucx)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":([0-9]{1,5})$")


class InputSpec(StrictModel):
    """Where the microdata come from and which columns are identifiers."""

    path: Path
    format: Literal["csv", "parquet", "sav", "dta"] | None = None
    delimiter: str = ","
    encoding: str = "utf-8"
    id_column: str | None = None
    drop: list[str] = Field(default_factory=list)
    weight: str | None = None
    weight_release: Literal["as_is", "recalibrated"] = "as_is"
    """How the weight column is released. ``as_is`` (default): unchanged (the dependence
    check measures it like any column). ``recalibrated`` (household files, a weight constant
    within households): post-stratified to the released household keys, w* = the original
    person-weighted total of the released household-key combination / its released persons,
    so the weighted totals of every released household-key class equal the original ones
    and the weight is a function of the released keys (docs/METHOD.md 7.13)."""
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
    members: Literal["all", "sampled"] = "all"
    """Grouped files: whether each group's members in the file are all of its members
    (``all``, the default: a household survey interviews the whole household) or a
    **sample** of them (``sampled``: a structure-of-earnings survey samples employees within
    enterprises). ``sampled`` is the data producer's declaration that which members were
    sampled is known only to the group itself and the agency, so the composition intruder
    (who knows the keys of every member in the file) is outside the threat model for every
    group: the two-stage release certifies the group-level intruder and the person intruder
    given the group keys, exactly (carried as ``risk.large_groups: 0``; docs/HOUSEHOLDS.md
    "Sampled members", docs/METHOD.md 7.15). Never for household surveys that interview the
    whole household."""

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


class NearSpec(StrictModel):
    """The near-cell destination design W of ``risk.destinations: near`` (docs/METHOD.md 7.12).

    W = sum_{i<=s} a_i (P^i + P^-i)/2 with P one step along the tour of the PRB's cells in
    the order of the reflected (boustrophedon) path of the key domain, which keeps the key
    distance between tour neighbours small (steps: 1 per other value of a nominal key, per
    adjacent value of an ordered key, per level up a hierarchy) and does not depend on which
    other cells are occupied: exactly doubly stochastic.

    - ``neighbours`` = 2s: destinations of every cell (s on each side along the tour);
    - ``bandwidth`` h > 0: a_i proportional to exp(-(i-1)/h) (tour steps);
    - the **spread floor**: at least ``min_destinations`` destinations and none above
      ``max_weight``. A PRB with fewer than 2s other cells gets the uniform W;
    - ``kernel``: ``band`` (the tour above) or ``matching``: W = (1/2s) sum of 2s permutations
      without fixed points, each the least-cost perfect matching of the PRB's cells not using
      the pairs of the earlier ones, the cost the records a move changes (a composition stage:
      the household's size when its household keys change, else the members its composition
      changes; else the key distance). Fewer records change; a cell joining or leaving a PRB
      can change every row (no series locality). ``matched``: how many of the 2s
      destinations come from matchings (default all); the others are the tour's +1, -1, +2,
      ... steps of the band kernel (the matchings then avoid those pairs).
    - ``weights`` (matching kernel only): W = sum_i w_i Q_i, Q_i the i-th matching (the
      first the least costly); at least 2 positive weights summing to 1, in place of 2s equal
      ones and of the spread floor (the destinations are len(weights)). Still exactly doubly
      stochastic; its certificate is computed exactly as for any W (issue 44: more weight on
      the cheaper matchings changes fewer records).
    - ``fallback_weights`` (with ``weights``; a household file's composition stage): a
      ladder of flatter weight vectors, each of 2 or more positive numbers summing to 1
      (``[0.25, 0.25, 0.25, 0.25]``: four equal matchings). A PRB takes ``weights`` unless the release's dependence check (docs/METHOD.md 7.5)
      flags it: it then takes the next vector of the ladder, and so on (per-PRB weights,
      internal like theta: docs/METHOD.md 7.12 "Per-PRB weights"). Every PRB's W stays
      exactly doubly stochastic and certified exactly.
    """

    bandwidth: float = 1.0
    kernel: Literal["band", "matching"] = "band"
    matched: int | None = None
    neighbours: int = 8
    min_destinations: int = 4
    max_weight: float = 0.25
    weights: list[float] | None = None
    fallback_weights: list[list[float]] | None = None

    @property
    def ladder(self) -> list[list[float]]:
        """``weights`` then every ``fallback_weights`` vector (empty without weights): the
        rungs a PRB's weights are taken from (rung 0 unless the dependence check flags it)."""
        return [] if self.weights is None else [self.weights, *(self.fallback_weights or [])]

    @model_validator(mode="after")
    def _sane(self) -> NearSpec:
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"near.bandwidth must be a positive number, got {self.bandwidth}")
        if self.min_destinations < 2:
            raise ValueError(f"near.min_destinations must be at least 2, got "
                             f"{self.min_destinations}")
        if not 0.0 < self.max_weight < 1.0:
            raise ValueError(f"near.max_weight must lie in (0, 1), got {self.max_weight}")
        if self.matched is not None and self.matched < 0:
            raise ValueError(f"near.matched must be 0 or more, got {self.matched}")
        if self.weights is not None:
            w = self.weights
            if self.kernel != "matching":
                raise ValueError("near.weights needs kernel: matching (the band kernel's "
                                 "weights are set by bandwidth and max_weight)")
            if len(w) < 2 or not all(math.isfinite(x) and x > 0 for x in w) \
                    or abs(sum(w) - 1.0) > 1e-9:
                raise ValueError(f"near.weights must be 2 or more positive numbers summing "
                                 f"to 1, got {w}")
            if self.matched is not None:
                raise ValueError("near.weights and near.matched cannot both be given")
            for f in self.fallback_weights or []:
                if len(f) < 2 or not all(math.isfinite(x) and x > 0 for x in f) \
                        or abs(sum(f) - 1.0) > 1e-9:
                    raise ValueError(f"near.fallback_weights: every vector must hold 2 or "
                                     f"more positive numbers summing to 1, got {f}")
            return self
        if self.fallback_weights is not None:
            raise ValueError("near.fallback_weights needs near.weights (the vector a PRB "
                             "takes unless the dependence check flags it)")
        need = max(self.min_destinations, math.ceil(1.0 / self.max_weight - 1e-12))
        if self.neighbours < need:
            raise ValueError(
                f"near.neighbours = {self.neighbours} cannot hold {self.min_destinations} "
                f"destinations with none above max_weight = {self.max_weight}: give at least "
                f"{need}")
        return self


class RiskSpec(StrictModel):
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
    exposed_sizes: Literal["refuse", "drop"] = "refuse"
    """Household files under ``composition: protect``: a household size held by fewer than
    1/xi households of the whole file is shown by every release with household pseudonyms (its
    members share one), so the household keys x size intruder finds such a household with
    probability >= 1/n whatever the design. ``refuse`` (the default) stops the release (exit
    2) naming the sizes; ``drop`` leaves those households out of the public file (all their
    members, before anything is counted: every certificate is over the released households),
    the weight recalibrated to the whole file's totals, stated in risk.json, the report, the
    codebook and the run summary (docs/HOUSEHOLDS.md, "Exposed sizes"). Publishing them is
    not an option (``report`` was removed: it published risks above xi)."""
    composition: Literal["measure", "protect"] = "measure"
    """Household files: ``protect`` keys the household stage on the household keys x the
    household's composition (members per combination of the person keys), so the composition
    intruder is certified exactly (docs/HOUSEHOLDS.md, "Protecting household composition");
    ``measure`` (the default) only measures it."""
    member_bands: dict[str, list[float]] | None = None
    """Household files under ``composition: protect``: cut points of a person key's released
    values that a moved member never crosses (``{age: [16, 25, 65]}``: a member of 50-64 may
    take 25-49 but never 16-24 or 65+). The person classes are grouped by band like the
    missingness groups (partition sets = household size x members per group), so a member's
    non-key values (an old-age benefit, an employee income) stay with classes of its band
    (docs/HOUSEHOLDS.md "Member bands", docs/METHOD.md 7.7). Unset: members take any class
    of their missingness group."""
    large_groups: int | None = Field(default=None, ge=0, le=12)
    """Grouped files (employees in enterprises), two-stage release: groups of more than this
    many members are outside the composition intruder's threat model (nobody outside an
    enterprise of 200 knows every employee's keys): for them the group-level intruder
    (household stage) and the person intruder given the group keys (person stage) are
    certified; the composition intruder of the groups of at most this many members is
    certified exactly (docs/HOUSEHOLDS.md "Large groups", docs/METHOD.md 7.15). Unset: the
    composition intruder of every group is measured. ``0`` (every group outside it) only
    with ``input.members: sampled``, which sets it."""
    weighted: bool = False
    """``true``: survey-weighted cell totals unbiased (needs ``input.weight``; person files):
    PRBs cut into groups of similar mean weight, m_j = c_g / W_j (docs/METHOD.md 7.11)."""
    destinations: Literal["uniform", "near"] = "uniform"
    """Where a moving record goes inside its PRB: ``uniform`` (NZY: any other cell, 1/(k-1)),
    or ``near``: a doubly stochastic W preferring cells that differ in few keys and by small
    steps (docs/METHOD.md 7.12; options under ``near``)."""
    near: NearSpec | None = None
    """Options of ``destinations: near`` (defaults when absent)."""
    dependence: Literal["report", "strict"] = "report"
    """Released non-key columns that show which records moved (a copy or a finer grain of a
    recoded key: a moved record's value points to another key value than its released one,
    although the identification risk stays <= xi): ``report`` (the default) names them in
    the codebook and the report as "shows moved records"; ``strict`` refuses the release
    (exit 2) naming them and the fixes (docs/METHOD.md, "Columns that show moved records")."""

    @property
    def near_options(self) -> NearSpec:
        """``near`` with its defaults."""
        return self.near if self.near is not None else NearSpec()

    @field_validator("exposed_sizes", mode="before")
    @classmethod
    def _no_report(cls, v: Any) -> Any:
        if v == "report":
            raise ValueError(
                "risk.exposed_sizes: report published the households of exposed sizes above xi "
                "and was removed; fix: risk.exposed_sizes: drop (those households left out of "
                "the public file, the weight recalibrated; docs/HOUSEHOLDS.md, \"Exposed "
                "sizes\") or refuse (the default)")
        return v

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


class SeedFile(StrictModel):
    """A file holding the release seed (a decimal integer). Created with mode 0600 if missing."""

    file: Path


_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
_PLACEHOLDERS = {"date": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


class OutputSpec(StrictModel):
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


#: executor names accepted besides the registered ones (``sdc.executors.registry``):
#: ``memory`` is the in-memory executor, registered under its first name ``pandas`` (which
#: stays accepted, in configs and on the command line)
EXECUTOR_ALIASES = {"memory": "pandas"}
#: what a config or ``--executor`` may name, in the words of the docs
EXECUTOR_CHOICES = ("memory", "streaming", "dask")


def executor_name(name: str) -> str:
    """The registered name of the executor ``name`` (``memory`` -> ``pandas``; others as
    given)."""
    return EXECUTOR_ALIASES.get(name, name)


class ExecutorSpec(StrictModel):
    """Which executor runs the record passes (count cells, apply the plan).

    ``executor: memory`` (default: the file in memory; ``pandas`` is its old name),
    ``executor: streaming`` (one machine, out of core: record batches) or ``executor: {kind:
    dask, scheduler: tcp://host:port, workers: 2, scratch: /shared/tmp, batch_rows: 1048576}``
    (``engine:`` is the key's old name, still accepted). Without ``scheduler`` the dask executor
    starts a LocalCluster of ``workers`` processes; ``scratch`` is the temporary folder for the
    public order buckets (on an existing cluster: a folder every worker and the client can
    reach). Every executor gives the same release (byte-identical public files)."""

    kind: Literal["pandas", "streaming", "dask"] = "pandas"
    scheduler: str | None = None
    workers: int = Field(default=2, ge=1, le=256)
    scratch: Path | None = None
    batch_rows: int = Field(default=1 << 20, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        v = {"kind": v} if isinstance(v, str) else v
        if isinstance(v, dict) and isinstance(v.get("kind"), str):
            kind = v["kind"]
            if kind not in (*EXECUTOR_CHOICES, *EXECUTOR_ALIASES.values()):
                raise ValueError(f"unknown executor {kind!r}; use one of "
                                 f"{', '.join(EXECUTOR_CHOICES)} (memory: the file in memory)")
            v = {**v, "kind": executor_name(kind)}
        return v

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
                "leave executor.scheduler (engine.scheduler) out to start a local cluster")
        return v.strip()

    @model_validator(mode="after")
    def _dask_only(self) -> ExecutorSpec:
        if self.kind != "dask" and self.scheduler is not None:
            raise ValueError(f"'scheduler' is for kind: dask, not {self.kind!r}")
        return self


#: the old name of :class:`ExecutorSpec`
EngineSpec = ExecutorSpec


class ReviewSpec(StrictModel):
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


class Analysis(StrictModel):
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


class UtilitySpec(StrictModel):
    """``utility:``: what the report measures besides the built-in figures."""

    analyses: list[Analysis] = Field(default_factory=list)
    household_income: StrictStr | None = None
    """A household file's equivalised income (one of ``input.household_columns``): utility.json
    ``households.survey`` gives the weighted at-risk-of-poverty rate, the mean income (overall
    and by every household key, in standard errors) and the Gini coefficient, original and
    released (docs/HOUSEHOLDS.md "Utility")."""


class Schedule(StrictModel):
    cron: str
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, v: str) -> str:
        if len(v.split()) != 5:
            raise ValueError(f"cron must have 5 fields (minute hour day month weekday), got {v!r}")
        return v


class DPPerturb(StrictModel):
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


_XI_HELP = (
    "xi must lie strictly between 1/3 and 1: below or at 1/3 no unbiased NZY PRAM can bound "
    "every correct-match probability (h(theta) > 1/3 for all theta < 1), and at or above 1 "
    "there is nothing to protect"
)


def certificate_text(certificate: float, xi: float, digits: int = 6, tol: float = 1e-12) -> str:
    """``"0.394025 <="`` (or ``">"``): the certificate with at least ``digits`` decimals and as
    many more as it takes for the comparison with xi to read true (at xi = 0.9999999 a
    certificate of 0.99999983 printed as "1.000000 <= xi"). Within ``tol`` above xi counts as
    <= xi (the checks' tolerance) and is shown as xi; so does a certificate within 1e-8 below
    xi (a design calibrated to xi attains it up to the solver's tolerance: "0.395000 <=",
    not "0.394999999999 <=" or "0.39499999 <=")."""
    ok = certificate <= xi + tol
    c = (xi if xi - certificate < 1e-8 else certificate) if ok else certificate
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
