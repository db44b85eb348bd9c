"""Member bands in the household design search (``risk.member_bands``, issue 44;
docs/HOUSEHOLDS.md "Member bands").

Under ``risk.composition: protect`` a member whose class changes keeps its non-key values: a
pensioner moved into 16-24 brings an old-age benefit into a class that has almost none. The
design search therefore also tries, for a person key recoded into at least
:data:`MIN_CLASSES` bands, candidates whose moved members keep their band
(:func:`band_variants`: every class its own band, and every band boundary but one) when the
preferred candidate's class shift is above :data:`SHIFT_OK`, and measures for every candidate
the **class shift** (:func:`class_shift`): the largest move of a
released numeric person column's mean within a class of a banded person key, in standard
errors of the original mean (weighted by the survey weight, clustered by household), in the
search's one draw. The recommendation prefers a candidate whose shift is at most
:data:`SHIFT_OK` (docs/HOUSEHOLDS.md "Design")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.method.unique_rows import unique_rows

__all__ = ["MIN_CLASSES", "SHIFT_OK", "band_variants", "class_shift", "dependence_rungs",
           "verify_banded"]

MIN_CLASSES = 5
"""Band variants are tried for a person key recoded into at least this many bands."""

SHIFT_OK = 3.0
"""A class shift (in standard errors) the recommendation accepts (module docstring)."""

MIN_PERSONS = 30
"""Classes with fewer persons holding a value are left out of the class shift (their
standard error is not estimated well)."""


def band_variants(recoding: dict[str, dict[str, Any]]) -> list[dict[str, list[float]]]:
    """``risk.member_bands`` values to try with ``recoding`` (the candidate's person-key
    recodings): for each key recoded into bands of at least :data:`MIN_CLASSES` classes,
    every boundary (members keep their class of that key), then every boundary but one."""
    out: list[dict[str, list[float]]] = []
    for k, r in recoding.items():
        bands = (r.get("recode") or {}).get("bands") if isinstance(r.get("recode"), dict) \
            else None
        if not bands or len(bands) < MIN_CLASSES:
            continue
        cuts = [float(b) for b in bands[1:]]
        out.append({k: cuts})
        out.extend({k: [c for c in cuts if c != drop]} for drop in cuts)
    return out


def _means(x: np.ndarray, w: np.ndarray, cls: np.ndarray, hh: np.ndarray, n_cls: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weighted mean, its standard error clustered by household, persons) of ``x`` per
    class (x finite only)."""
    ok = np.isfinite(x)
    x, w, cls, hh = x[ok], w[ok], cls[ok], hh[ok]
    sw = np.bincount(cls, weights=w, minlength=n_cls)
    m = np.bincount(cls, weights=w * x, minlength=n_cls) / np.where(sw > 0, sw, 1.0)
    r = w * (x - m[cls])
    _, cell = unique_rows(np.column_stack([cls, hh]))
    per = np.bincount(cell.reshape(-1), weights=r)
    cell_cls = np.zeros(per.size, np.int64)
    cell_cls[cell.reshape(-1)] = cls
    se = np.sqrt(np.bincount(cell_cls, weights=per * per, minlength=n_cls)) / np.where(
        sw > 0, sw, 1.0)
    return m, se, np.bincount(cls, minlength=n_cls)


def class_shift(frame: pd.DataFrame, cfg: Any, household: np.ndarray, before: np.ndarray,
                after: np.ndarray) -> tuple[float, str]:
    """(largest |z|, where) over the released numeric person columns and the classes of every
    banded person key: z = (mean of the persons released in the class - the original mean of
    the class) / the original mean's standard error; ``before`` / ``after`` every person's
    class (:func:`~sdc.method.household_composition.person_classes` codes) in the source and
    in the draw. (0.0, "") without a banded person key or a numeric column."""
    from sdc.config.model import Bands
    from sdc.method.household_composition import class_codes
    from sdc.method.household_missing import pattern_columns

    pk = list(cfg.person_keys)
    banded = [v for v, k in enumerate(pk) if isinstance(
        getattr(cfg.input_key_variables.get(k, cfg.key_variables[k]), "recode", None), Bands)]
    cols = [c for c in pattern_columns(list(frame.columns), cfg)
            if pd.api.types.is_numeric_dtype(frame[c])]
    if not banded or not cols:
        return 0.0, ""
    w_col = cfg.input.weight
    w = (pd.to_numeric(frame[w_col], errors="coerce").fillna(0.0).to_numpy(float)
         if w_col else np.ones(len(frame)))
    hh = np.asarray(household, np.int64)
    best, where = 0.0, ""
    cb, ca = class_codes(before, cfg), class_codes(after, cfg)
    for v in banded:
        n_cls = int(cfg.key_variables[pk[v]].size)
        values = cfg.key_variables[pk[v]].categories or list(range(n_cls))
        for c in cols:
            x = pd.to_numeric(frame[c], errors="coerce").to_numpy(float)
            m0, se, n = _means(x, w, cb[:, v], hh, n_cls)
            m1, _, _ = _means(x, w, ca[:, v], hh, n_cls)
            ok = (se > 0) & (n >= MIN_PERSONS)
            z = np.where(ok, np.abs(m1 - m0) / np.where(ok, se, 1.0), 0.0)
            i = int(np.argmax(z))
            if z[i] > best:
                best, where = float(z[i]), f"{c} at {pk[v]} {values[i]}"
    return best, where


def verify_banded(frame: pd.DataFrame, c: Any, base_dir: Any, release: Any) -> None:
    """A certified candidate ``c`` with ``risk.member_bands`` or ``risk.near.weights``
    released once in memory
    (``release(frame, config)``), as ``sdc release`` judges it: its smaller composition PRBs
    can let a released household column tell compositions apart (eusilc's eqSS counts the
    members aged 14 and over), which the release's dependence check refuses; ``c`` is then
    refused with that reason."""
    import copy

    from sdc.config.load import parse_config
    from sdc.errors import InputError, SmallBlockError
    from sdc.io.recode import recode_frame

    risk = c.data.get("risk") or {}
    if not (risk.get("member_bands") or (risk.get("near") or {}).get("weights")):
        return  # (weighted matchings concentrate W as smaller PRBs do: verified the same way)
    try:
        cfg = parse_config(copy.deepcopy(c.data), base_dir, source="household design")
        release(recode_frame(frame, cfg), cfg)
    except (InputError, SmallBlockError, ValueError) as e:
        c.status, c.note = "refused", "released in memory: " + str(e).splitlines()[0][:200]


def dependence_rungs(frame: pd.DataFrame, cfg: Any) -> dict[str, int] | None:
    """The per-PRB weights (partition key -> rung of ``near.weights``' ladder) that ``sdc
    release`` gives the composition stage of ``cfg`` on ``frame`` (declared values), None
    without a ladder (``near.fallback_weights``): the count pass and both stages planned by
    the in-memory executor (:func:`sdc.method.household_rungs.checked_household_stage`: the
    dependence check picks them), so the candidate's figures are the release's. Raises as the
    release's count refuses (``InputError``: a PRB flagged at every rung)."""
    from sdc.executors import get_executor
    from sdc.io.recode import recode_frame
    from sdc.method.designs import fallback_rungs, rungs_of
    from sdc.method.households import household_config

    if not fallback_rungs(household_config(cfg)):
        return None
    counted = get_executor("memory").count(cfg, frame=recode_frame(frame, cfg))
    return rungs_of(counted.hs.plan.design) if counted.hs.plan is not None else {}
