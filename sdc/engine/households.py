"""Household files: persons grouped by ``input.household_id`` (docs/HOUSEHOLDS.md).

Household-level keys (``level: household``) and declared ``input.household_columns`` belong to
the household: :func:`check_households` refuses a file in which one of them differs between
the members of a household (every violating household counted, the first listed by id), so the
release can post-randomize them once per household and give every member the same values.

Like :mod:`sdc.engine.partition` this module touches records, on whole columns only: the
household of every person is one ``pandas.factorize`` of the id column, and a column is
constant within households iff its per-household minimum and maximum code agree
(``numpy.minimum.reduceat`` over the persons sorted by household).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError

__all__ = ["MAX_LISTED", "check_households", "household_codes"]

MAX_LISTED = 20
"""Violating households listed by id per column (the message gives the full count)."""


def household_codes(frame: pd.DataFrame, config: ReleaseConfig) -> tuple[np.ndarray, np.ndarray]:
    """(code, first): every person's household 0..H-1 (in order of first appearance) and the
    row of every household's first member. Raises :class:`InputError` for persons without a
    household id or a missing household id column."""
    hid = config.input.household_id
    if hid is None:
        raise ValueError("not a household file: input.household_id is not set")
    if hid not in frame.columns:
        raise InputError(f"column {hid!r} (named in input.household_id) is not in the input, "
                         f"which has columns {list(frame.columns)[:20]}; fix the name in the "
                         "config or the input header")
    col = frame[hid]
    isna = col.isna().to_numpy()
    if isna.any():
        rows = ", ".join(str(r) for r in np.flatnonzero(isna)[:5] + 1)
        raise InputError(f"column {hid!r} (input.household_id): {int(isna.sum())} row(s) have no "
                         f"household id (rows {rows}); every person needs a household: fill "
                         "them in (a one-person household gets an id of its own)")
    code, _ = pd.factorize(col, sort=False)
    code = code.astype(np.int64, copy=False)
    n_h = int(code.max()) + 1 if code.size else 0
    first = np.full(n_h, code.size, dtype=np.int64)
    np.minimum.at(first, code, np.arange(code.size, dtype=np.int64))
    return code, first


def check_households(frame: pd.DataFrame, config: ReleaseConfig) -> None:
    """Refuse a household file whose household-level columns vary within a household.

    Checks the household-level keys and ``input.household_columns``; a missing value counts as
    a value (two members, one empty, differ). Raises :class:`InputError` naming, per column,
    how many households violate it and the first :data:`MAX_LISTED` of their ids (in id order)
    with the values found, and the fix.
    """
    if config.input.household_id is None:
        return
    cols = config.household_keys + list(config.input.household_columns)
    missing = [c for c in config.input.household_columns if c not in frame.columns]
    if missing:
        raise InputError(f"column(s) {missing} (named in input.household_columns) are not in the "
                         f"input, which has columns {list(frame.columns)[:20]}; fix the names")
    code, first = household_codes(frame, config)
    if code.size == 0:
        return
    order = np.argsort(code, kind="stable")
    sc = code[order]
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
    hh_of_start = sc[starts]
    problems = []
    hid = config.input.household_id
    for c in cols:
        if c not in frame.columns:
            continue  # a missing key column is reported by the key checks
        v, uniques = pd.factorize(frame[c], use_na_sentinel=False)
        vs = v[order]
        bad = np.minimum.reduceat(vs, starts) != np.maximum.reduceat(vs, starts)
        if not bad.any():
            continue
        bad_h = hh_of_start[bad]
        ids = frame[hid].to_numpy()[first[bad_h]]
        listed = np.sort(ids)[:MAX_LISTED] if ids.dtype != object else sorted(ids, key=str)[:MAX_LISTED]
        examples = []
        for h_id in listed[:3]:
            members = frame[c][frame[hid] == h_id]
            vals = sorted({str(x) for x in members.tolist()})
            examples.append(f"{h_id}: {', '.join(vals[:5])}")
        n_bad = int(bad.sum())
        more = f" (first {MAX_LISTED} of {n_bad} listed)" if n_bad > MAX_LISTED else ""
        problems.append(
            f"column {c!r} differs within {n_bad} household(s){more}: "
            f"{', '.join(str(x) for x in listed)}; values found e.g. {'; '.join(examples)}")
        del uniques
    if problems:
        raise InputError(
            "household-level columns must have one value per household (input.household_id "
            f"{hid!r}):\n  " + "\n  ".join(problems) + "\nFix the input (give every member the "
            "household's value), or declare the variable level: person / remove it from "
            "input.household_columns if it really belongs to the person")
