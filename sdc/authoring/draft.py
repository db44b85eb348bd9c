"""``sdc init``: a complete, commented release config drafted from a data file.

Why here (the release layer): drafting reads the data (``sdc.io``), runs the partition and the
plan (``sdc.method``) to check the suggested partition, and writes config text, so it sits
above engine and io; the command in ``sdc/cli/init.py`` only parses options and writes the
file. Everything here is pure apart from :func:`read_for_draft` (which reads the file).

What the draft contains (:func:`build_draft`, :func:`draft_yaml`):

- ``key_variables``: each key's **observed** domain: ``categories`` (sorted), or
  ``range: [min, max]`` for an integer key with more than ``RANGE_THRESHOLD`` distinct values
  that fill at least ``RANGE_DENSITY`` of their span (ages, years; a sparse set of integers
  such as PUMA codes 100..8200 is a list of nominal codes: ``categories``, never banded);
  ``labels`` from SPSS/Stata value labels (a labelled category no record has is included:
  labels are metadata, a public domain); ``label`` from the variable label; ``missing:
  category`` when the key has empty values. The YAML says, in capitals, that an observed
  domain must be replaced by the public domain before a real release: a domain read from the
  data reveals that a rare value (an age of 104) is present.
- ``partition``: bands for integer keys with a range, ``as_is`` for keys with at most
  ``AS_IS_MAX`` categories, nothing for wide categorical keys (they move freely, like PUMA in
  the NZY example). The suggestion is checked on the data: the partition is coarsened (bands
  doubled in width, then the widest as-is variable dropped, then the banded one) until at
  most ``MAX_SMALL_SHARE`` of the PRBs have k < kmin (``small_blocks: merge`` handles those),
  and the draft is run once through the engine (``sdc.release_frame``) to prove it releases.
- ``risk`` defaults (xi = 0.395 as in NZY, theorem theta, merge), a seed file under
  ``secrets/`` (created 0600 by the first release), ``output`` under ``releases/``
  (formats: parquet plus the input's own format for SPSS/Stata input, else csv).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

import sdc
from sdc.config import ConfigError, ReleaseConfig, parse_config
from sdc.config.load import CONTROL_CHARACTERS
from sdc.config.model import certificate_text
from sdc.errors import InputError

__all__ = [
    "AS_IS_MAX",
    "DEFAULT_XI",
    "Draft",
    "KeyDraft",
    "RANGE_THRESHOLD",
    "build_draft",
    "draft_yaml",
    "observe_key",
    "read_for_draft",
    "suggest_partition",
]

RANGE_THRESHOLD = 20       # integer keys with more distinct values get range: [lo, hi] + bands
RANGE_DENSITY = 0.5        # ... when they fill at least this share of their span (else: codes)
AS_IS_MAX = 5              # categorical keys with at most this many categories: as_is
MAX_SMALL_SHARE = 0.10     # at most this share of PRBs may have k < kmin (merged)
DEFAULT_XI = 0.395
_NICE = (1, 2, 5)
_CANONICAL_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
# a whole number as a float writer prints it ('18.0', '18.', '-3.00'): a CSV export of an
# integer column with missing values (pandas, R, Stata write the column as floats)
_WHOLE_DECIMAL = re.compile(r"^-?(0|[1-9][0-9]*)(\.0*)?$")
# a plain decimal number ('2.5', '-0.75', '1e3'): such a column is numeric, not text codes
_DECIMAL_NUMBER = re.compile(r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


@dataclass
class KeyDraft:
    """The observed domain of one key variable."""

    name: str
    categories: list[Any] | None = None
    range: tuple[int, int] | None = None
    labels: dict[Any, str] = field(default_factory=dict)
    label: str | None = None
    missing: bool = False
    #: True when the records missing this key are too few to certify on their own (the draft
    #: then lets missing move like any category, docs/METHOD.md 7.9); False = the default policy
    missing_moves: bool = False
    n_observed: int = 0
    unobserved_labelled: list[Any] = field(default_factory=list)
    dropped_labels: list[Any] = field(default_factory=list)
    recode: dict[str, Any] | None = None
    recode_note: str = ""

    @property
    def integer(self) -> bool:
        dom = self.categories if self.categories is not None else [0]
        return all(isinstance(v, int) for v in dom)

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.label:
            out["label"] = self.label
        if self.range is not None:
            out["range"] = list(self.range)
        else:
            out["categories"] = list(self.categories or [])
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.missing:
            out["missing"] = "category"
            if self.missing_moves:
                out["missing_moves"] = True
        if self.recode is not None:
            out["recode"] = dict(self.recode)
        return out


@dataclass
class Draft:
    """A drafted config plus what the check on the data found."""

    name: str
    input: dict[str, Any]
    keys: dict[str, KeyDraft]
    partition: dict[str, Any]
    risk: dict[str, Any]
    seed_file: str
    output: dict[str, Any]
    input_labels: dict[str, str]
    released_unchanged: list[str]
    history: list[str]
    check: dict[str, Any]
    design_notes: list[str] = field(default_factory=list)
    #: columns the dependence check found giving the key values away -> why (dropped)
    dependent: dict[str, str] = field(default_factory=dict)
    #: such columns that are functions of the keys: released recomputed (``derived:``) -> why
    derived: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The config as a dict (what :func:`draft_yaml` writes, without the comments)."""
        inp = dict(self.input)
        if self.input_labels:
            inp["labels"] = dict(self.input_labels)
        return {
            "name": self.name,
            "input": inp,
            "key_variables": {k: kd.spec() for k, kd in self.keys.items()},
            "partition": dict(self.partition),
            "risk": dict(self.risk),
            "seed": {"file": self.seed_file},
            "output": dict(self.output),
            **({"derived": list(self.derived)} if self.derived else {}),
        }


# -- reading --------------------------------------------------------------------------------
def _provisional(data_path: Path, keys: list[str], *, fmt: str | None, delimiter: str,
                 encoding: str, id_column: str | None, drop: list[str],
                 weight: str | None) -> ReleaseConfig:
    """A config used only to read the file: every key declared with text categories, so a
    CSV's key columns are read as text (``"01"`` stays ``"01"``; :func:`observe_key` decides
    whether they are integers)."""
    data = {
        "name": "draft",
        "input": {"path": str(data_path), "delimiter": delimiter, "encoding": encoding,
                  "drop": list(drop),
                  **({"format": fmt} if fmt else {}),
                  **({"id_column": id_column} if id_column else {}),
                  **({"weight": weight} if weight else {})},
        "key_variables": {k: {"categories": ["?"]} for k in keys},
        "risk": {"xi": DEFAULT_XI},
    }
    return parse_config(data, data_path.parent, source="sdc init options",
                        load_hierarchies=False)


def read_for_draft(data_path: str | Path, keys: list[str], *, fmt: str | None = None,
                   delimiter: str = ",", encoding: str = "utf-8", id_column: str | None = None,
                   drop: list[str] | None = None, weight: str | None = None
                   ) -> tuple[pd.DataFrame, dict[str, dict[Any, str]], dict[str, str], str]:
    """Read a data file for drafting: (frame, value labels, variable labels, format).

    Uses the release's own reader (``sdc.io.read_input``: same errors, same types), plus the
    SPSS/Stata metadata (pyreadstat, metadata only) for value and variable labels.

    Raises
    ------
    InputError
        Unreadable file, or a key / id / drop / weight column that is not in the file (names
        the column and lists the file's columns).
    """
    from sdc.io.read import read_input

    path = Path(data_path).expanduser().resolve()
    drop = list(drop or [])
    if not keys:
        raise ConfigError("sdc init needs at least one key variable: --keys a,b,c")
    cfg = _provisional(path, keys, fmt=fmt, delimiter=delimiter, encoding=encoding,
                       id_column=id_column, drop=drop, weight=weight)
    frame = read_input(cfg)
    wanted = {"--keys": keys, "--id": [id_column] if id_column else [], "--drop": drop,
              "--weight": [weight] if weight else []}
    for opt, cols in wanted.items():
        absent = [c for c in cols if c not in frame.columns]
        if absent:
            shown = ", ".join(map(str, list(frame.columns)[:30]))
            raise InputError(f"{opt}: {absent} {'is' if len(absent) == 1 else 'are'} not a "
                             f"column of {str(path)!r} ({len(frame)} rows); its columns are: "
                             f"{shown}{', ...' if frame.shape[1] > 30 else ''}")
    if id_column:
        _check_unique_id(frame[id_column], id_column, path)
    fmt = cfg.input.resolved_format
    value_labels: dict[str, dict[Any, str]] = {}
    variable_labels: dict[str, str] = {}
    if fmt in ("sav", "dta"):
        import pyreadstat

        reader = pyreadstat.read_sav if fmt == "sav" else pyreadstat.read_dta
        _, meta = reader(str(path), metadataonly=True)
        # a label's control characters (a line break, a NUL) become spaces: the config
        # refuses them (sdc.config.load.CONTROL_CHARACTERS)
        for col, labels in (meta.variable_value_labels or {}).items():
            value_labels[col] = {_plain_value(v): _plain_label(t) for v, t in labels.items()}
        variable_labels = {c: _plain_label(t)
                           for c, t in (meta.column_names_to_labels or {}).items() if t}
    return frame, value_labels, variable_labels, fmt


def _check_unique_id(s: pd.Series, name: str, path: Path) -> None:
    """``--id`` must name a column with one distinct, non-empty value per record (the release
    refuses anything else on every row); refused with the counts and the first duplicates."""
    empty = s.isna().to_numpy()
    dup = s.duplicated(keep=False).to_numpy() & ~empty
    if not empty.any() and not dup.any():
        return
    parts = []
    if dup.any():
        vals = s[dup]
        n_vals = int(vals.nunique())
        first = list(dict.fromkeys(vals.tolist()))[:5]
        shown = "; ".join(
            f"{v!r} at rows {[int(i) + 1 for i in np.flatnonzero(dup & (s == v).to_numpy())[:3]]}"
            for v in first)
        parts.append(f"{int(dup.sum())} rows share {n_vals} id value(s) (first: {shown})")
    if empty.any():
        parts.append(f"{int(empty.sum())} rows have no id (first rows: "
                     f"{[int(i) + 1 for i in np.flatnonzero(empty)[:5]]})")
    raise InputError(
        f"--id {name!r} is not a unique record id in {str(path)!r} ({len(s)} rows): "
        f"{'; '.join(parts)}. Rows are 1-based data rows. Fix: choose a column with one "
        "distinct value per record, remove the duplicated records from the file, or leave out "
        "--id (the public file gets its own record_id either way)")


def _plain_value(v: Any) -> Any:
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return int(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


# -- observed domains -----------------------------------------------------------------------
def _refuse_fraction(name: str, values: np.ndarray) -> None:
    """A key holding non-whole numbers (a float-valued key such as an income or a BMI): refused
    with the counts and the fixes (a key is categorical: every distinct value is a cell)."""
    frac = values[values != np.floor(values)]
    n_distinct = int(np.unique(values).size)
    raise InputError(
        f"key variable {name!r} holds non-whole numbers ({frac.size} of {values.size} rows, "
        f"e.g. {frac[0]:g}; {n_distinct} distinct values from {values.min():g} to "
        f"{values.max():g}): key variables are categorical, every distinct value is its own "
        "cell. Fix: band it in the data (e.g. bands of equal width, written as whole-number "
        "band starts or as text labels) and declare the bands as the key's categories; or "
        "round it to whole numbers (then `recode: {bands: [...]}` can band it); or leave it "
        "out of --keys (it is then released unchanged and measured by the dependence check)")


def is_ordered_quantity(values: list[int] | np.ndarray) -> bool:
    """Whether sorted distinct integers look like an ordered quantity (ages, years, counts)
    rather than nominal codes: they fill at least ``RANGE_DENSITY`` of their span. PUMA codes
    (610 values over 100..8200: 7.5%) are codes; ages 15..49 with 35 values are a quantity."""
    v = np.asarray(values, dtype=float)
    return bool(v.size and v.size >= RANGE_DENSITY * (v[-1] - v[0] + 1))


def _plain_label(text: Any) -> str:
    return CONTROL_CHARACTERS.sub(" ", str(text))


def observe_key(s: pd.Series, name: str, value_labels: dict[Any, str] | None = None,
                label: str | None = None) -> KeyDraft:
    """The observed domain of one key column (vectorized: one ``unique`` per column).

    Integers (numbers that are whole, or text that is a canonical integer such as ``"12"`` but
    not ``"012"``) with more than ``RANGE_THRESHOLD`` distinct values that fill at least
    ``RANGE_DENSITY`` of their span get a range, others a sorted category list.

    Raises
    ------
    InputError
        A boolean key, a key with non-whole numbers, or a key with no value at all.
    """
    value_labels = dict(value_labels or {})
    missing = bool(s.isna().any())
    present = s.dropna()
    if present.empty:
        raise InputError(f"key variable {name!r} has no values ({len(s)} rows, all empty); "
                         "choose another key")
    if pd.api.types.is_bool_dtype(s.dtype):
        raise InputError(f"key variable {name!r} is boolean; recode it as 0/1 or as text "
                         "in the data (YAML true/false are not categories)")
    uniq = pd.unique(present)
    values: list[Any]
    if pd.api.types.is_numeric_dtype(s.dtype):
        arr = np.asarray(uniq, dtype=float)
        if (arr != np.floor(arr)).any():
            _refuse_fraction(name, present.to_numpy(dtype=float))
        values = sorted(int(v) for v in arr)
    else:
        text = pd.Series(uniq).astype(str)
        if text.str.match(_CANONICAL_INT).all():
            values = sorted(int(v) for v in text)
        elif text.str.match(_WHOLE_DECIMAL).all():
            # '18.0' is the integer 18 written by a float writer (the same data as Parquet,
            # SPSS or Stata gives 18): same draft whatever the file format
            values = sorted(set(int(float(v)) for v in text))
        elif text.str.match(_DECIMAL_NUMBER).all() and not text.str.match(r"^0[0-9]").any():
            _refuse_fraction(name, present.astype(str).astype(float).to_numpy())
        else:
            values = sorted(text.tolist())
    kd = KeyDraft(name=name, label=label, missing=missing, n_observed=len(values))
    integer = all(isinstance(v, int) for v in values)
    labels = {(_plain_value(v) if integer else str(v)): t for v, t in value_labels.items()}
    if integer and len(values) > RANGE_THRESHOLD and is_ordered_quantity(values):
        lo, hi = values[0], values[-1]
        kd.range = (lo, hi)
        kd.labels = {v: t for v, t in labels.items() if isinstance(v, int) and lo <= v <= hi}
        kd.dropped_labels = [v for v in labels if v not in kd.labels]
    else:
        extra = [v for v in labels if v not in set(values)
                 and isinstance(v, int) == integer and not isinstance(v, bool)]
        kd.unobserved_labelled = sorted(extra, key=lambda v: (str(type(v)), v))
        kd.categories = sorted(set(values) | set(extra)) if extra else values
        kd.labels = {v: t for v, t in labels.items() if v in set(kd.categories)}
        kd.dropped_labels = [v for v in labels if v not in kd.labels]
    return kd


# -- partition -------------------------------------------------------------------------------
def _nice_width(span: int, max_bands: int) -> int:
    """Smallest width in 1, 2, 5, 10, 20, 50, ... giving at most ``max_bands`` bands."""
    mag = 1
    while True:
        for m in _NICE:
            w = m * mag
            if math.ceil(span / w) <= max_bands:
                return w
        mag *= 10


def _bands(lo: int, hi: int, width: int) -> list[int]:
    start = (lo // width) * width
    return list(range(start, hi + 1, width))


def _prb_sizes(frame: pd.DataFrame, data: dict[str, Any], base_dir: Path) -> np.ndarray:
    """k of every partition set's PRB (0 when it has no sensitive cell)."""
    cfg = parse_config(data, base_dir, source="the draft", load_hierarchies=False)
    part = sdc.partition_frame(frame, cfg)
    return np.bincount(part.cell_partition_set[part.sensitive],
                       minlength=len(part.partition_keys))


def suggest_partition(frame: pd.DataFrame, data: dict[str, Any], keys: dict[str, KeyDraft],
                      base_dir: Path, *, xi: float = DEFAULT_XI
                      ) -> tuple[dict[str, Any], list[str], dict[str, int]]:
    """(partition, what was coarsened and why, PRB counts of the result).

    Starts with bands (at most 8, nice widths) for the range key with the widest range (bands
    suit ordered integers such as ages; other range keys are often codes) and as_is for keys
    with at most ``AS_IS_MAX`` categories. Runs the partition on the data, and while more than
    ``MAX_SMALL_SHARE`` of the PRBs have k < kmin, applies the coarsening step (double a band
    width, stop partitioning by a variable) that reaches the target with the most PRBs, or
    else leaves the most PRBs with k >= kmin. Loops over steps and variables only.
    """
    km = sdc.kmin(sdc.solve_theta(xi))
    widths: dict[str, int] = {}
    ranged = [n for n, kd in keys.items() if kd.range is not None]
    if ranged:
        n = max(ranged, key=lambda v: keys[v].range[1] - keys[v].range[0])  # type: ignore[index]
        lo, hi = keys[n].range  # type: ignore[misc]
        w = _nice_width(hi - lo + 1, 8)
        if len(_bands(lo, hi, w)) >= 2:
            widths[n] = w
    as_is = [n for n, kd in keys.items()
             if kd.categories is not None and 2 <= len(kd.categories) <= AS_IS_MAX]

    def rules(widths: dict[str, int], as_is: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in keys:  # config order
            if name in widths:
                lo, hi = keys[name].range  # type: ignore[misc]
                out[name] = {"bands": _bands(lo, hi, widths[name])}
            elif name in as_is:
                out[name] = "as_is"
        return out

    def evaluate(widths: dict[str, int], as_is: list[str]) -> dict[str, int]:
        k = _prb_sizes(frame, {**data, "partition": rules(widths, as_is)}, base_dir)
        prbs = int((k > 0).sum())
        small = int(((k > 0) & (k < km)).sum())
        return {"partition_sets": int(k.size), "prbs": prbs, "small_prbs": small, "kmin": km}

    def ok(st: dict[str, int]) -> bool:
        return st["small_prbs"] <= MAX_SMALL_SHARE * max(st["prbs"], 1)

    history: list[str] = []
    stats = evaluate(widths, as_is)
    while not ok(stats) and (widths or as_is):
        moves: list[tuple[str, dict[str, int], list[str]]] = []
        for n, w in widths.items():
            lo, hi = keys[n].range  # type: ignore[misc]
            if len(_bands(lo, hi, 2 * w)) >= 2:
                moves.append((f"widened the bands of {n} to {2 * w}", {**widths, n: 2 * w}, as_is))
            moves.append((f"{n} no longer partitions the file",
                          {v: x for v, x in widths.items() if v != n}, as_is))
        for n in as_is:
            moves.append((f"{n} no longer partitions the file", widths,
                          [v for v in as_is if v != n]))
        results = [(evaluate(w, a), why, w, a) for why, w, a in moves]
        reaching = [r for r in results if ok(r[0])]
        if reaching:
            best = max(reaching, key=lambda r: r[0]["prbs"])
        else:
            best = max(results, key=lambda r: (r[0]["prbs"] - r[0]["small_prbs"],
                                               -r[0]["small_prbs"]))
        history.append(f"{stats['small_prbs']} of {stats['prbs']} PRBs had k < kmin = {km}: "
                       f"{best[1]}")
        stats, widths, as_is = best[0], best[2], best[3]
    return rules(widths, as_is), history, stats


# -- the draft -------------------------------------------------------------------------------
def _safe_name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")
    return name if name and name[0].isalnum() else f"release-{name}".rstrip("-")


def build_draft(frame: pd.DataFrame, *, data_path: Path, config_path: Path, keys: list[str],
                fmt: str, id_column: str | None = None, drop: list[str] | None = None,
                weight: str | None = None, delimiter: str = ",", encoding: str = "utf-8",
                value_labels: dict[str, dict[Any, str]] | None = None,
                variable_labels: dict[str, str] | None = None,
                name: str | None = None, xi: float = DEFAULT_XI) -> Draft:
    """Draft the config for ``frame`` (read from ``data_path``) to be written at ``config_path``.

    Paths in the draft are relative to the config's folder. The draft is checked by running
    the engine once (``sdc.release_frame`` with a throw-away seed): if the merge policy cannot
    certify it, ``small_blocks: calibrate`` is tried; if that fails too, the engine's error
    (naming the partition set and what to do) is raised.
    """
    value_labels = value_labels or {}
    variable_labels = variable_labels or {}
    drop = list(drop or [])
    base = config_path.resolve().parent
    rel = Path(_relpath(data_path.resolve(), base))
    name = _safe_name(name or data_path.stem)
    kds = {k: observe_key(frame[k], k, value_labels.get(k), variable_labels.get(k))
           for k in keys}
    frame = _typed_keys(frame, kds)
    inp: dict[str, Any] = {"path": rel.as_posix(), "format": fmt}
    if fmt == "csv":
        inp["delimiter"] = delimiter
        inp["encoding"] = encoding
    if id_column:
        inp["id_column"] = id_column
    inp["drop"] = drop
    if weight:
        inp["weight"] = weight
    special = set(keys) | set(drop) | {c for c in (id_column, weight) if c}
    others = [c for c in frame.columns if c not in special]
    input_labels = {c: t for c, t in variable_labels.items()
                    if t and c in frame.columns and c not in keys and c not in drop}
    risk = {"xi": xi, "theta": "theorem", "small_blocks": "merge"}
    if weight:  # survey-weighted totals unbiased too (docs/METHOD.md, weighted mode)
        risk["weighted"] = True
    formats = ["parquet", fmt] if fmt in ("sav", "dta") else ["parquet", "csv"]
    draft = Draft(name=name, input=inp, keys=kds, partition={}, risk=risk,
                  seed_file=f"secrets/{name}.seed",
                  output={"dir": f"releases/{name}", "formats": formats},
                  input_labels=input_labels, released_unchanged=others, history=[], check={})
    data = draft.as_dict()
    data["seed"] = 0  # the check below needs no seed file
    part, history, stats = suggest_partition(frame, data, kds, base, xi=xi)
    draft.partition, draft.history = part, history
    data["partition"] = part
    # the default missing policy first (a blank stays a real blank); only if the records with
    # a missing key value are too few to certify on their own, missing moves like a category
    missing_keys = [k for k, kd in kds.items() if kd.missing]
    attempts = [(False, "merge"), (False, "calibrate")]
    if missing_keys:
        attempts += [(True, "merge"), (True, "calibrate")]
    for n, (moves, policy) in enumerate(attempts):
        for k in missing_keys:
            kds[k].missing_moves = moves
        data["key_variables"] = {k: kd.spec() for k, kd in kds.items()}
        data["risk"] = {**risk, "small_blocks": policy}
        try:
            result = _checked_release(frame, data, base, draft)
        except sdc.SmallBlockError as e:
            if n == len(attempts) - 1:
                raise sdc.SmallBlockError(f"the drafted partition cannot be certified: {e}") from None
            continue
        draft.risk["small_blocks"] = policy
        if moves:
            draft.history.append(
                f"the records with a missing {', '.join(missing_keys)} are too few to certify "
                "on their own: missing_moves: true (a blank may stand for a real value; the "
                "codebook says so)")
        if policy != "merge":
            draft.history.append("merging could not certify every PRB: small_blocks: calibrate")
        draft.check = {**stats, "records": int(len(frame)), "prbs": int(len(result.blocks)),
                       "certificate": float(result.certificate), "xi": float(result.xi),
                       "merges": len(result.merges),
                       "expected_changed": float(result.blocks["expected_changed"].sum())
                       if len(result.blocks) else 0.0}
        break
    return draft


def _checked_release(frame: pd.DataFrame, data: dict[str, Any], base: Path,
                     draft: Draft) -> Any:
    """``release_frame`` of the draft; a column the dependence check fails goes to
    ``derived:`` when it is a function of the key values, else to ``input.drop`` (the reason
    is written as a comment), and the check reruns."""
    from sdc.method.dependence import DependenceError

    while True:
        cfg = parse_config(data, base, source="the draft", load_hierarchies=False)
        try:
            return sdc.release_frame(frame, cfg, seed=0)
        except DependenceError as e:
            bad = [f for f in e.figures if f.flagged]
            keys = list(cfg.key_names)
            weight = data["input"].get("weight")
            for f in bad:
                shown = ", ".join(sorted(f.revealed, key=lambda k: -f.revealed[k])[:2])
                why = (f"gives {shown} away (an intruder using it picks a target with "
                       f"probability {f.figure:.2f} > xi = {cfg.risk.xi})")
                if f.column == weight:
                    _weight_fix(frame, data, draft, weight, keys, why)
                    continue
                if f.column in draft.released_unchanged:
                    draft.released_unchanged.remove(f.column)
                if _is_function_of(frame, f.column, keys):
                    draft.derived[f.column] = why
                else:
                    draft.dependent[f.column] = why
                    draft.input["drop"].append(f.column)
            data["input"]["drop"] = list(draft.input["drop"])
            if draft.derived:
                data["derived"] = list(draft.derived)


def _weight_fix(frame: pd.DataFrame, data: dict[str, Any], draft: Draft, weight: str,
                keys: list[str], why: str) -> None:
    """The survey weight gives keys away (weights constant within strata of a key): the key it
    is a function of is kept as is (partition ``as_is``: its records never change it, so the
    weight says nothing about a moved record); if there is none, or that did not suffice, the
    weight is dropped (a weight cannot be ``derived:``: it would no longer weight the record)."""
    part = data.setdefault("partition", {})
    for k in keys:
        if part.get(k) != "as_is" and _is_function_of(frame, weight, [k]):
            part[k] = draft.partition[k] = "as_is"
            draft.history.append(
                f"the weight {weight} {why}; it is a function of {k}: {k} is kept as is "
                "(never perturbed), so the weight reveals nothing about a moved record")
            return
    del data["input"]["weight"]
    draft.input.pop("weight", None)
    draft.risk.pop("weighted", None)  # the same dict as the check's risk (no weight, no mode)
    data.get("risk", {}).pop("weighted", None)
    draft.dependent[weight] = f"(the survey weight) {why}"
    draft.input["drop"].append(weight)
    data["input"]["drop"] = list(draft.input["drop"])


def _is_function_of(frame: pd.DataFrame, column: str, keys: list[str]) -> bool:
    """Whether ``column`` has one value per combination of ``keys`` (by value hash)."""
    from sdc.method.draws import value_hash

    h = pd.Series(value_hash(frame[column]).view(np.int64), index=frame.index)
    grouped = h.groupby([frame[k] for k in keys], dropna=False, sort=False)
    return bool((grouped.nunique() <= 1).all())


def _typed_keys(frame: pd.DataFrame, kds: dict[str, KeyDraft]) -> pd.DataFrame:
    """Integer keys read as text (CSV) -> int64 (float64 when some are missing), as
    ``read_input`` returns them once the config declares integers."""
    frame = frame.copy(deep=False)
    for k, kd in kds.items():
        s = frame[k]
        if kd.integer and not pd.api.types.is_numeric_dtype(s.dtype):
            num = pd.to_numeric(s, errors="raise").astype(float)
            frame[k] = num.astype(np.int64) if not num.isna().any() else num
        elif kd.integer and pd.api.types.is_float_dtype(s.dtype) and not s.isna().any():
            frame[k] = s.astype(np.int64)
    return frame


def _relpath(target: Path, base: Path) -> str:
    import os

    try:
        return os.path.relpath(target, base)
    except ValueError:  # different drives (Windows)
        return str(target)


# -- YAML with comments ------------------------------------------------------------------------
class _OneLineDumper(yaml.SafeDumper):
    """SafeDumper that writes a string holding a line break double-quoted (``"a\\nb"``): as a
    plain scalar it spans lines, and the draft puts every value on one line (a category with a
    newline made ``sdc init`` write an invalid YAML draft)."""


def _str_one_line(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if any(ch in data for ch in "\r\n\x85\u2028\u2029"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return dumper.represent_str(data)


_OneLineDumper.add_representer(str, _str_one_line)


def _flow(value: Any) -> str:
    """One YAML value in flow style on one line (strings quoted by YAML's own rules)."""
    text = yaml.dump(value, Dumper=_OneLineDumper, default_flow_style=True, allow_unicode=True,
                     width=10**9, sort_keys=False).strip()
    return text.removesuffix("...").strip()


def _wrap_list(prefix: str, items: list[Any], width: int = 96) -> list[str]:
    """``prefix: [a, b, ...]`` wrapped over several lines when long."""
    one = f"{prefix}{_flow(items)}"
    if len(one) <= width:
        return [one]
    lines, cur = [], prefix + "["
    # a comment's continuation lines must stay comments: "  # released: [a," -> "  #            b]"
    lead = prefix[: len(prefix) - len(prefix.lstrip())]
    if prefix.lstrip().startswith("#"):
        pad = lead + "#" + " " * (len(prefix) - len(lead))
    else:
        pad = " " * (len(prefix) + 1)
    for i, v in enumerate(items):
        piece = _flow([v])[1:-1] + ("," if i < len(items) - 1 else "]")
        if len(cur) + len(piece) + 1 > width and cur.strip() not in ("", prefix.strip() + "["):
            lines.append(cur.rstrip())
            cur = pad
        cur += piece + " "
    lines.append(cur.rstrip())
    return lines


def draft_yaml(draft: Draft, *, data_display: str | None = None) -> str:
    """The draft as commented YAML; ``yaml.safe_load`` of it equals :meth:`Draft.as_dict`."""
    d = draft
    L: list[str] = [
        f"# Release config drafted by `sdc init` from {data_display or d.input['path']}.",
        "# Review every line before a real release; `sdc plan` shows what a release would do.",
        "#",
        "# !! OBSERVED DOMAINS: the categories and ranges below were READ FROM THE DATA. Before a",
        "# !! real release replace each one by the variable's PUBLIC domain (all codes of the",
        "# !! questionnaire or classification), because a domain read from the data can reveal a",
        "# !! rare value: an age range ending at 104, or a category only one respondent has, tells",
        "# !! everyone that such a respondent is in the file.",
        "#",
        "# Direct identifiers (names, addresses, phone numbers, exact dates) must be listed under",
        "# input.drop: sdc does not detect them. Every column that is not a key, the id, the",
        "# weight or dropped is released unchanged.",
        f"name: {_flow(d.name)}",
        "input:",
    ]
    for k, v in d.input.items():
        if k == "drop":
            L.append(f"  drop: {_flow(v)}" + ("" if v else
                     "                    # direct identifiers: never released"))
            for col, why in d.dependent.items():
                if why.startswith("(the survey weight)"):
                    L.append(f"  # dropped by sdc init: {col} {why}; a weight cannot be "
                             "derived: and keeping its key as_is did not suffice (small PRBs "
                             "merged across it)")
                    continue
                L.append(f"  # dropped by sdc init: {col} {why}; it is not a function of the")
                L.append("  # keys (derived: would be refused): to release it, make it a key "
                         "variable")
        else:
            L.append(f"  {k}: {_flow(v)}")
    if d.input_labels:
        L.append("  labels:                     # variable labels of non-key columns (SPSS/Stata)")
        L += [f"    {_flow(c)}: {_flow(t)}" for c, t in d.input_labels.items()]
    if d.released_unchanged:
        L += _wrap_list("  # released unchanged: ", [str(c) for c in d.released_unchanged])
    if d.derived:
        L.append(f"derived: {_flow(list(d.derived))}   # recomputed from the RELEASED key values")
        for col, why in d.derived.items():
            L.append(f"  # {col} {why}; it is a function of the keys, so sdc releases it "
                     "recomputed")
    L += ["key_variables:                # what an intruder can match on (OBSERVED domains!)"]
    for k, kd in d.keys.items():
        L.append(f"  {_flow(k)}:")
        if kd.label:
            L.append(f"    label: {_flow(kd.label)}")
        if kd.range is not None:
            L.append(f"    range: {_flow(list(kd.range))}"
                     f"           # observed min and max ({kd.n_observed} distinct values)")
        else:
            note = f"    # observed: {kd.n_observed} categories"
            if kd.unobserved_labelled:
                note += (f"; labelled in the file but absent from the data: "
                         f"{_flow(kd.unobserved_labelled)}")
            L.append(note)
            L += _wrap_list("    categories: ", list(kd.categories or []))
        if kd.labels:
            L.append("    labels:")
            L += [f"      {_flow(v)}: {_flow(t)}" for v, t in kd.labels.items()]
        if kd.dropped_labels:
            L.append(f"    # value labels outside this domain, not used: {_flow(kd.dropped_labels)}")
        if kd.missing:
            L.append("    missing: category          # the data have empty values")
            if kd.missing_moves:
                L.append("    # too few records miss it to certify them on their own: missing moves "
                         "like a category")
                L.append("    missing_moves: true        # (default false: a blank stays a real blank)")
            else:
                L.append("    # missing_moves: false (default): a blank is never a perturbed "
                         "real value")
        if kd.recode is not None:
            L.append(f"    # recoded by `sdc design` ({kd.recode_note}): released values are coarser")
            L.append(f"    recode: {_flow(kd.recode)}")
    c = d.check
    L += [
        "partition:                    # generalized keys -> partition sets; PRAM never leaves one",
        f"  # suggested by sdc init and checked on the data: {c.get('partition_sets', '?')} "
        f"partition sets, {c.get('small_prbs', '?')} PRB(s) with k < kmin = {c.get('kmin', '?')}",
    ]
    L += [f"  # {h}" for h in d.history]
    L += [f"  # {h}" for h in d.design_notes]
    if not d.partition:
        L.append("  {}")
    for var, rule in d.partition.items():
        if rule == "as_is" or rule == {"as_is": True}:
            L.append(f"  {_flow(var)}: as_is")
        elif isinstance(rule, dict) and set(rule) == {"bands"}:
            L.append(f"  {_flow(var)}: {{bands: {_flow(rule['bands'])}}}   # left edges")
        else:
            L.append(f"  {_flow(var)}: {_flow(rule)}")
    L += [
        "risk:",
        f"  xi: {d.risk['xi']}                     # every correct-match probability <= xi (1/3 < xi < 1)",
        f"  theta: {d.risk['theta']}               # theorem | calibrated (changes fewer records)",
        f"  small_blocks: {d.risk['small_blocks']}          # merge | calibrate | fail: PRBs with k < kmin",
    ]
    if d.risk.get("weighted"):
        L.append("  weighted: true              # weighted cell totals unbiased too (the weight "
                 "decides who moves; false: NZY, counts only)")
    if c:
        L.append(f"  # checked: certificate {certificate_text(c['certificate'], c['xi'], 4)} xi "
                 f"on {c['records']} "
                 f"records, {c['prbs']} PRBs, {c['merges']} merge(s), about "
                 f"{c['expected_changed']:.0f} records changed")
    L += [
        "seed:",
        f"  file: {_flow(d.seed_file)}   # created (mode 0600) by the first release; back it up",
        "output:",
        f"  dir: {_flow(d.output['dir'])}",
        f"  formats: {_flow(d.output['formats'])}   # parquet, csv, sav, dta",
    ]
    return "\n".join(L) + "\n"


DESIGN_WHEN = 0.2
"""``sdc init`` searches recodings (``sdc design``) when the drafted release would change more
than this share of the records."""


def apply_design(draft: Draft, config_path: Path, *, budget: float = 30.0) -> bool:
    """When the draft written at ``config_path`` changes more than :data:`DESIGN_WHEN` of its
    records, search recodings (:func:`sdc.authoring.design.run_design`) and put the recommended
    design into ``draft`` (each key's ``recode:``, the partition it needs, and a note of the
    figures). Returns whether the draft changed."""
    c = draft.check
    if not c or c.get("records", 0) == 0 or c["expected_changed"] / c["records"] <= DESIGN_WHEN:
        return False
    from sdc.authoring.design import run_design

    d = run_design(config_path, budget=budget)
    r = d.result
    if r.recommended is None or r.current is None:
        return False
    rec, cur = r.nodes[r.recommended], r.nodes[r.current]
    if rec.levels == cur.levels or not rec.changed < cur.changed:
        return False
    for k, lev in zip(r.keys, rec.levels, strict=True):
        cand = r.cands[k][lev]
        if cand.rule is not None and k in draft.keys:
            draft.keys[k].recode = cand.rule
            draft.keys[k].recode_note = cand.name
    if rec.partition:
        draft.partition = {v: rule for v, rule in rec.partition.items()}
    recoded = [k for k, kd in draft.keys.items() if kd.recode is not None]
    for col, why in list(draft.derived.items()):
        # a function of the unrecoded keys is in general no function of the recoded ones:
        # ``derived:`` would be refused, so the draft drops the column instead
        draft.dependent[col] = (f"{why}; with {', '.join(recoded)} recoded it cannot be "
                                "recomputed from the released keys")
        draft.input["drop"].append(col)
        del draft.derived[col]
    draft.design_notes = [
        f"sdc design: unrecoded, about {cur.changed:,.0f} records ({cur.changed_share:.1%}) "
        f"would change; with the recodings under key_variables about {rec.changed:,.0f} "
        f"({rec.changed_share:.1%}), keeping {rec.entropy_kept:.1%} of the key table's entropy "
        f"(certificate {rec.certificate:.4f}). Run `sdc design` on this file for the alternatives.",
    ]
    return True
