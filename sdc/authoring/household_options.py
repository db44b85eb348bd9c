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
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig

__all__ = ["RARE_SHARE", "STANDARD_BANDS", "Option", "band_candidates", "person_key_options",
           "reassembling_columns", "standard_bands", "without_group_id"]

STANDARD_BANDS = (16, 25, 50, 65)
"""Left edges of the standard age classes after the first: 0-15, 16-24, 25-49, 50-64, 65+."""

RARE_SHARE = 0.10
"""A categorical person key's categories below this share of the persons are grouped."""

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
            rare = [c for c in cats if float(share.get(c, 0.0)) < RARE_SHARE]
            if 2 <= len(rare) < len(cats) - 0:
                name = "+".join(rare)
                opts.append((f"rare grouped ({name})", {"groups": {name: rare}},
                             len(cats) - len(rare) + 1))
        options.append(opts)
    return options


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
    for k in ("composition", "households", "destinations", "near"):
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
