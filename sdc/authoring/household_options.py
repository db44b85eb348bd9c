"""The person-key classes the household design search tries (``sdc design`` of a household
file, :mod:`sdc.authoring.household_design`; docs/HOUSEHOLDS.md "Design").

Under ``risk.composition: protect`` a household's composition (members per person class) is
a key, so the person classes decide how many households are rare, hence how many change. The
search tries, per person key:

- a numeric key (``range:``): 2 to 4 bands at quantiles of its values, and the **standard
  bands** 0-15 / 16-24 / 25-49 / 50-64 / 65+ (:data:`STANDARD_BANDS`, cut where the key's
  range allows: the classes agencies publish ages in, and where income sources change: work
  income from 16, pensions from 65);
- a categorical key: as declared, and its **rare categories grouped** (those holding less than
  :data:`RARE_SHARE` of the persons each, two or more of them, merged into one class named by
  its members: citizenship "EU+Other" next to "AT"), text categories only.

At most :data:`~sdc.method.household_composition.MAX_CLASSES` person classes a candidate.

Coarser household keys (:func:`household_key_options`): a household key equal to every
household's member count (household size, detected from the data) **top-coded** at
:data:`SIZE_TOPS` (a size key is never moved, so its rare large values are what leaves a
household alone in its cell) or made a household column (the composition, a key under
``protect``, holds the size: the fix the size-key refusal names), and a household key partitioned or recoded by a generalization
**hierarchy** at each of the hierarchy's coarser levels (region -> larger region).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig

__all__ = ["AS_COLUMN", "RARE_GROUP_SHARE", "RARE_SHARE", "SIZE_TOPS", "STANDARD_BANDS", "Option",
           "band_candidates", "group_key_options", "household_key_options", "person_key_options", "reassembling_columns",
           "rare_grouped", "reassembly_note",
           "standard_bands", "without_group_id"]

STANDARD_BANDS = (16, 25, 50, 65)
"""Left edges of the standard age classes after the first: 0-15, 16-24, 25-49, 50-64, 65+."""

RARE_SHARE = 0.10
"""A categorical person key's categories below this share of the persons are grouped."""

SIZE_TOPS = (6, 5, 4)
"""Top codes tried for a household-size key (the top class "5+" stands for 5 and more)."""

AS_COLUMN: dict[str, Any] = {"as_household_column": True}
"""The option that makes a household-size key a household column (released unchanged: under
``risk.composition: protect`` every household keeps its members, so it is always right, and
the composition, a key of the composition stage, holds the size; docs/HOUSEHOLDS.md)."""

RARE_GROUP_SHARE = 0.05
"""A categorical group key's categories held by less than this share of the groups are grouped
(:func:`group_key_options`: laeken's ses, NACE1's six smallest sections)."""

Option = tuple[str, dict[str, Any] | None, int]
"""(name, recode rule or None for as declared, number of released values)."""


def band_candidates(values: np.ndarray, lo: int) -> list[list[int]]:
    """Band breaks of a numeric person key for household files: 2 to 4 bands at quantiles of
    its values (integers, distinct, the first = the declared lower bound ``lo``)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    out: list[list[int]] = []
    for n in (2, 3, 4):
        q = np.quantile(v, np.linspace(0, 1, n + 1)[1:-1]) if v.size else []
        breaks = sorted({int(lo), *(int(round(x)) for x in q if round(x) > lo)})
        if len(breaks) == n and breaks not in out:
            out.append(breaks)
    return out


def standard_bands(lo: int, hi: int) -> list[int] | None:
    """The standard age bands cut to the range [lo, hi] (the first edge ``lo``), or None when
    fewer than 3 classes fit (not an age)."""
    edges = [int(lo)] + [b for b in STANDARD_BANDS if lo < b <= hi]
    return edges if len(edges) >= 3 else None


def person_key_options(frame: pd.DataFrame, config: ReleaseConfig) -> list[list[Option]]:
    """Per person key (``config.person_keys`` order) the classes to try (module docstring)."""
    kvs = config.input_key_variables
    options: list[list[Option]] = []
    for k in config.person_keys:
        kv = kvs[k]
        if kv.range is not None:
            vals = pd.to_numeric(frame[k], errors="coerce").to_numpy(float)
            opts: list[Option] = [(f"{len(b)} bands", {"bands": b}, len(b))
                                  for b in band_candidates(vals, kv.range[0])]
            std = standard_bands(*kv.range)
            if std is not None and all(o[1] != {"bands": std} for o in opts):
                opts.append(("standard bands " + "/".join(
                    f"{a}-{b - 1}" for a, b in zip(std, std[1:], strict=False)) + f"/{std[-1]}+",
                    {"bands": std}, len(std)))
            options.append(opts or [("as declared", None, kv.size)])
            continue
        opts = [("as declared", None, kv.size)]
        cats = list(kv.categories or [])
        if cats and all(isinstance(c, str) for c in cats):
            share = frame[k].astype("string").value_counts(normalize=True)
            opts += rare_grouped(cats, share, RARE_SHARE, min_kept=1)
        options.append(opts)
    return options


def rare_grouped(cats: list[str], share: pd.Series, threshold: float,
                 min_kept: int) -> list[Option]:
    """The option grouping the categories ``cats`` whose ``share`` (of persons or of groups)
    is below ``threshold`` into one, when two or more are that rare and at least
    ``min_kept`` categories stay apart; else no option."""
    rare = [c for c in cats if float(share.get(c, 0.0)) < threshold]
    if not 2 <= len(rare) <= len(cats) - min_kept:
        return []
    name = "+".join(rare)
    return [(f"rare grouped ({name})", {"groups": {name: rare}}, len(cats) - len(rare) + 1)]


def _size_key(frame: pd.DataFrame, config: ReleaseConfig, k: str) -> np.ndarray | None:
    """The numeric values of household key ``k`` when it is every household's member count
    (possibly top-coded already), else None."""
    hid = config.input.household_id
    v = pd.to_numeric(frame[k], errors="coerce")
    if v.isna().any():
        return None
    size = frame.groupby(hid, sort=False)[hid].transform("size").to_numpy(float)
    x = v.to_numpy(float)
    top = float(x.max(initial=0.0))
    ok = (x == size) | ((x == top) & (size >= top))
    return x if bool(ok.all()) and np.unique(x).size > 1 else None


def _hierarchy_levels(config: ReleaseConfig, k: str) -> tuple[dict[str, Any], int] | None:
    """(the hierarchy rule's YAML mapping, its number of levels) of a household key that a
    generalization hierarchy partitions or recodes, else None."""
    from sdc.config.keys import Hierarchy

    for rule in (config.key_variables[k].recode, (config.partition or {}).get(k)):
        if isinstance(rule, Hierarchy) and rule.table:
            return ({"hierarchy": str(rule.hierarchy), "delimiter": rule.delimiter},
                    len(rule.table[0]))
    return None


def household_key_options(frame: pd.DataFrame,
                          config: ReleaseConfig) -> list[tuple[str, list[Option]]]:
    """Per household key with coarser classes to try (module docstring): ``(key, options)``,
    the first option the key as written."""
    out: list[tuple[str, list[Option]]] = []
    kvs = config.key_variables
    for k in config.household_keys:
        opts: list[Option] = [("as written", None, kvs[k].size)]
        x = _size_key(frame, config, k)
        if x is not None:  # under protect the composition gives the size: a column suffices
            opts.append(("a household column (the composition gives the size)", AS_COLUMN, 0))
            for t in SIZE_TOPS:
                if t < x.max():
                    opts.append((f"top-coded {t}+", {"top": t},
                                 int(np.unique(np.minimum(x, t)).size)))
        h = _hierarchy_levels(config, k)
        if h is not None:
            rule, n_levels = h
            for level in range(1, n_levels - 1):
                opts.append((f"hierarchy level {level}", {**rule, "level": level},
                             kvs[k].size))
        if len(opts) > 1:
            out.append((k, opts))
    return out


def group_key_options(frame: pd.DataFrame,
                      config: ReleaseConfig) -> list[tuple[str, list[Option]]]:
    """Coarser group keys for the two-stage release of a grouped file (the large-groups
    candidates, :mod:`sdc.authoring.large_groups`): :func:`household_key_options` (size
    top-coded, hierarchy levels) and, per text categorical group key, its **rare categories
    grouped** (those of less than :data:`RARE_GROUP_SHARE` of the groups, two or more) and,
    when every category's label carries a number (size classes E10_49 .. E1000), its
    **adjacent classes paired** in the order of those numbers (5 size classes -> 3).
    ``(key, options)``, the first option the key as written."""
    hid = config.input.household_id
    opts = dict(household_key_options(frame, config))
    kvs = config.key_variables
    first = frame.groupby(hid, sort=False).head(1)
    for k in config.household_keys:
        cats = [c for c in (kvs[k].categories or []) if isinstance(c, str)]
        if kvs[k].recode is not None or len(cats) < 3 or len(cats) != len(kvs[k].categories):
            continue
        mine = opts.get(k, [("as written", None, kvs[k].size)])
        share = first[k].astype("string").value_counts(normalize=True)
        mine += rare_grouped(cats, share, RARE_GROUP_SHARE, min_kept=2)
        nums = [re.search(r"\d+", c) for c in cats]
        if len(cats) >= 4 and all(nums):
            order = sorted(cats, key=lambda c: int(re.search(r"\d+", c).group()))  # type: ignore[union-attr]
            pairs = [order[i:i + 2] for i in range(0, len(order), 2)]
            groups = {"+".join(p): p for p in pairs if len(p) == 2}
            mine.append((f"adjacent classes paired ({', '.join(groups)})", {"groups": groups},
                         len(pairs)))
        if len(mine) > 1:
            opts[k] = mine
    return [(k, opts[k]) for k in config.household_keys if k in opts]


def without_group_id(base: dict[str, Any]) -> dict[str, Any]:
    """The config mapping ``base`` as a person file (docs/HOUSEHOLDS.md "Large groups"): the
    household (group) id dropped, every key a person key, the household columns released as
    ordinary columns (the dependence check measures them per person), no composition stage.
    When no released column singles a group out (:func:`reassembling_columns`), no group can
    be reassembled from the public file, so neither a household nor a composition intruder
    has a target; the person-level certificate is the release's."""
    import copy

    data = copy.deepcopy(base)
    inp = data["input"]
    hid = inp.pop("household_id")
    inp.pop("household_columns", None)
    inp.pop("weight_release", None)
    inp["drop"] = [*(inp.get("drop") or []), hid]
    for kv in data["key_variables"].values():
        kv.pop("level", None)
    risk = dict(data.get("risk") or {})
    for k in ("composition", "households", "destinations", "near", "large_groups"):
        risk.pop(k, None)
    data["risk"] = risk
    return data


def reassembling_columns(frame: pd.DataFrame, group_id: str,
                         released: list[str]) -> tuple[list[str], int, int]:
    """Whether a release without the group id still lets the groups be put back together.

    A released column with one value in every group (a household weight, the dwelling's
    roof, the household keys) is the same for all members; the combination of such columns
    that only one group of 2+ members has links its members as surely as the id would, and
    the composition intruder is back. Returns ``(columns, singled_out, groups)``: the
    released columns constant within every group, the groups of 2+ members whose
    combination of them no other group has, and the number of groups of 2+ members."""
    g = frame.groupby(group_id, sort=False)
    size = g.size()
    multi = size[size >= 2].index
    if not len(multi) or not released:
        return [], 0, len(multi)
    nunique = g[released].nunique(dropna=False)
    const = [c for c in released if bool((nunique[c] <= 1).all())]
    if not const:
        return [], 0, len(multi)
    per_group = g[const].first().loc[multi]
    singled = int((~per_group.duplicated(keep=False)).sum())
    return const, singled, len(multi)


def reassembly_note(frame: pd.DataFrame, config: ReleaseConfig, const: list[str],
                     singled: int, groups: int, dropped: list[str]) -> str:
    """Why the release without the group id is refused after the automatic fix (the group
    level columns that are neither key nor weight dropped), and what each remaining column
    singles out alone: the weight (the fix would cost the weighted estimates) or the group
    level keys (coarsen them)."""
    hid = config.input.household_id
    alone = []
    for c in const:
        n = reassembling_columns(frame, hid, [c])[1]
        if n:
            what = "the weight" if c == config.input.weight else (
                "key" if c in config.key_names else "column")
            alone.append(f"{what} {c} {n:,}")
    keys = [c for c in const if c in config.key_names]
    by_keys = reassembling_columns(frame, hid, keys)[1] if keys else 0
    note = (f"without the group id {hid}: {', '.join(const)} have one value per household and "
            f"single out {singled:,} of {groups:,} households of 2+ members, so the households "
            "can be put back together")
    if dropped:
        note += f" (even with {', '.join(dropped)} dropped)"
    if alone:
        note += "; alone: " + ", ".join(alone)
    if by_keys:
        note += (f"; the household keys {' x '.join(keys)} single out {by_keys:,}: coarsen "
                 "them")
    if config.input.weight in const:
        note += (f"; the weight {config.input.weight} has one value per household: released "
                 "without the group id it would have to be dropped (no weighted estimates)")
    return note
