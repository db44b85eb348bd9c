"""``sdc init --household-id COL``: the household part of a drafted config (docs/HOUSEHOLDS.md).

A household file is released in two stages (household keys once per household, then person
keys), and its composition (members per combination of the person keys) is an intruder's key
too. Drafting one:

- **levels** (:func:`household_levels`): a key with one value in every household (region,
  dwelling, water source) is ``level: household``; every other key is a person key. A non-key
  column with one value per household goes to ``input.household_columns`` (checked constant by
  every release). The weight is left out of them (it is the weight).
- **the draft as written** is planned by the household pipeline (both stages, the dependence
  check at both levels: a column giving keys away is dropped or ``derived:`` as on a person
  file), then judged as ``sdc release`` judges it by the household design search
  (:mod:`sdc.authoring.household_design`): released once in memory with the composition
  intruder measured.
- **the design** (:func:`apply_household_design`): when the draft as written is refused (a
  rare household cell no PRB can certify, or the composition intruder above xi) or changes
  more than ``DESIGN_WHEN`` of the records, the certified candidate that changes the fewest
  records is written: ``risk.composition: protect`` and the person keys it recodes.

Whole columns only: the constancy test is one group-by over the household codes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sdc.authoring.household_options import AS_COLUMN
from sdc.authoring.observe import Draft
from sdc.errors import InputError, SmallBlockError
from sdc.method.draws import value_hash

__all__ = ["apply_household_design", "expected_of_plan", "restored", "household_check", "household_levels", "refused_check",
           "set_household_levels"]


def household_levels(frame: pd.DataFrame, household_id: str, columns: list[str]) -> dict[str, bool]:
    """Whether each of ``columns`` has one value (missing counts as a value) in every household
    of ``household_id``: one group-by of the columns' value hashes over the household codes."""
    if not columns:
        return {}
    codes, _ = pd.factorize(frame[household_id], sort=False)
    hashes = pd.DataFrame({c: value_hash(frame[c]).view(np.int64) for c in columns})
    most = hashes.groupby(codes, sort=False).nunique(dropna=False).max()
    return {c: bool(most[c] <= 1) for c in columns}


def _missing_ids_error(frame: pd.DataFrame, household_id: str) -> InputError | None:
    n = int(frame[household_id].isna().sum())
    if not n:
        return None
    return InputError(
        f"--household-id {household_id}: {n:,} of {len(frame):,} records have no household id; "
        "every person of a household file must belong to a household. Fix the file (a person "
        "living alone is a household of one with an id of its own), or draft it as a person "
        "file without --household-id")


def set_household_levels(frame: pd.DataFrame, draft: Draft, household_id: str,
                         others: list[str]) -> None:
    """Mark the household-level keys, put the household id and the household columns into
    ``draft.input`` and remove them from the columns released unchanged. Refused (exit 2)
    when the id has missing values or when the keys are not of both levels."""
    err = _missing_ids_error(frame, household_id)
    if err is not None:
        raise err
    keys = list(draft.keys)
    weight = draft.input.get("weight")
    level = household_levels(frame, household_id, keys + [c for c in others if c != weight])
    household_keys = [k for k in keys if level[k]]
    person_keys = [k for k in keys if not level[k]]
    n_households = int(frame[household_id].nunique())
    if not household_keys or not person_keys:
        which = ("no key has one value per household" if not household_keys
                 else "every key has one value per household")
        raise InputError(
            f"--household-id {household_id}: {which} ({n_households:,} households, keys "
            f"{', '.join(keys)}); a household file needs at least one household-level key "
            "(the same for every member: region, dwelling, water source) and one person-level "
            "key (sex, age, relation to the head). Add such a key to --keys, or draft the file "
            "as a person file without --household-id")
    for k in household_keys:
        draft.keys[k].level = "household"
    columns = [c for c in others if c != weight and level.get(c)]
    draft.input["household_id"] = household_id
    if columns:
        draft.input["household_columns"] = columns
    draft.released_unchanged[:] = [c for c in draft.released_unchanged
                                   if c != household_id and c not in columns]
    draft.history.append(
        f"household file: {n_households:,} households of {household_id}; household-level "
        f"keys (one value per household): {', '.join(household_keys)}; person keys: "
        f"{', '.join(person_keys)}"
        + (f"; household columns: {', '.join(columns)}" if columns else ""))


def household_check(result: Any, n_records: int, xi: float) -> dict[str, Any]:
    """The draft's check figures from the household plan (both stages planned)."""
    cert, _where = result.certificate
    prbs = sum(len(getattr(getattr(st, "plan", None), "blocks", ())) for st in (result.ps, result.hs))
    return {"records": int(n_records), "certificate": float(cert), "xi": float(xi),
            "prbs": int(prbs),
            "merges": len(result.merges), "expected_changed": float("nan"),
            "households": True}


def refused_check(error: SmallBlockError, n_records: int, xi: float) -> dict[str, Any]:
    """The check of a draft the household pipeline refused (the design step decides)."""
    return {"records": int(n_records), "certificate": float("nan"), "xi": float(xi),
            "prbs": 0, "merges": 0, "expected_changed": float("nan"), "households": True,
            "refused": str(error).splitlines()[0][:300]}


def apply_household_design(draft: Draft, config_path: Path, *, when: float) -> bool:
    """Judge the household draft written at ``config_path`` as ``sdc release`` would (the
    household design search's "as written"), and when it is refused or changes more than
    ``when`` of its records, put the recommended certified design into ``draft``
    (``risk.composition: protect``, the person keys' recodings). Returns whether the draft
    changed; raises :class:`SmallBlockError` (exit 2) when neither the draft nor any
    candidate is certified."""
    from sdc.authoring.design import run_design

    design: Any = run_design(config_path, release_checks=False)
    cur = design.current
    rec = design.result.recommended
    draft.check.pop("refused", None)
    if draft.input.get("members") == "sampled":  # declared: the search's coarser group keys,
        when = 0.0  # the cheapest certified (what `sdc design` recommends), when cheaper
    if cur.status == "certified" and (cur.share_changed <= when or rec is None
                                      or design.candidates[rec].share_changed
                                      >= cur.share_changed):
        draft.check.update(_figures(cur))
        return False
    if rec is None:
        why = cur.note or "refused"
        raise SmallBlockError(
            f"the drafted household config is refused ({why}) and no household design is "
            f"certified at xi = {design.config.risk.xi}{_why_none(design.candidates)}. Fixes: "
            "coarser household keys (recode a rare value into a larger category), a "
            "household-level key such as household size, fewer person keys, or a larger xi; "
            "then `sdc design` on the draft")
    cand = design.candidates[rec]
    if cand.without_group_id:
        _as_person_file(draft, cand, cur)
        return True
    if cand.large_groups is not None:
        _as_large_groups(draft, cand, cur)
        return True
    for k, r in cand.recoding.items():
        if r["recode"] == AS_COLUMN:  # household size: a household column under protect
            draft.keys.pop(k)
            draft.partition.pop(k, None)
            cols = draft.input.setdefault("household_columns", [])
            if k not in cols:
                cols.append(k)
            if draft.risk.get("merge_along"):
                draft.risk["merge_along"] = [m for m in draft.risk["merge_along"] if m != k]
            continue
        draft.keys[k].recode = dict(r["recode"])
        draft.keys[k].recode_note = f"{r['name']} for households"
        draft.partition.pop(k, None)
    draft.risk["composition"] = "protect"
    for k in ("destinations", "near", "theta", "small_blocks",  # fewest households moved
              "exposed_sizes"):  # households of exposed sizes left out (the search's frame)
        if k in (cand.data.get("risk") or {}):
            draft.risk[k] = copy.deepcopy(cand.data["risk"][k])
    if not (cand.data.get("risk") or {}).get("weighted"):  # (weight released recalibrated)
        draft.risk.pop("weighted", None)
    draft.risk.pop("households", None)
    draft.check.update(_figures(cand))
    draft.design_notes = [
        f"sdc design (household file): as drafted, {_before(cur)}; written: risk.composition: "
        f"protect{' and the person keys recoded' if cand.recoding else ''}: {_changes(cand)} "
        f"({cand.households_changed:,} households changed in one draw), composition "
        f"certificate {cand.certificate:.4f}. Run `sdc design` on this file for the "
        "alternatives.",
    ]
    return True


def _changes(c: Any) -> str:
    """The candidate's records changed in expectation under its plan, with the SD of one
    release (what ``sdc design`` and ``sdc release`` print too; issue 44)."""
    from sdc.method.expected_changes import changes_text

    return changes_text(c.share_changed * c.n_records, c.changed_var, c.n_records)


def _before(cur: Any) -> str:
    return ("refused: " + cur.note) if cur.status != "certified" else (
        _changes(cur))


def _why_none(cands: list[Any]) -> str:
    """Why the household design search certified nothing: the first protect candidate's
    reason and the release without the group id's (what reassembles the groups, its fix and
    cost), for the refusal."""
    protect = next((c.note for c in cands if not c.without_group_id and c.note
                    and getattr(c, "large_groups", None) is None), "")
    group = next((c.note for c in cands if c.without_group_id and c.note), "")
    large = next((c.note for c in cands if getattr(c, "large_groups", None) is not None
                  and c.status != "certified"), "")
    parts = [f"under protect: {protect}" if protect else "",
             f"the release {group[len('without '):]}" if group.startswith("without ") else group,
             f"the threat model of large groups (two stages, risk.large_groups): {large}"
             if large else ""]
    return "".join(f"; {p}" for p in parts if p)


def _figures(c: Any) -> dict[str, Any]:
    """The draft's check figures of the written candidate: records changed in expectation
    (``expected_changed``, ``sd_changed``: seed-free, the plan's), one draw's (``changed``)."""
    return {"certificate": float(c.certificate), "changed": int(c.changed),
            "households_changed": int(c.households_changed),
            "expected_changed": float(c.share_changed * c.n_records),
            "sd_changed": float(c.sd_changed)}


def _as_person_file(draft: Draft, cand: Any, cur: Any) -> None:
    """Write the release without the group id into ``draft`` (the household design's
    recommendation when no household design changes few enough records: large groups)."""
    hid = draft.input.pop("household_id")
    cols = draft.input.pop("household_columns", None) or []
    draft.input.pop("weight_release", None)
    draft.input["drop"].append(hid)
    draft.released_unchanged.extend(c for c in cols if c not in draft.released_unchanged)
    for c in getattr(cand, "dropped", None) or []:  # one value per group: would reassemble
        if c not in draft.input["drop"]:
            draft.input["drop"].append(c)
        if c in draft.released_unchanged:
            draft.released_unchanged.remove(c)
    for kd in draft.keys.values():
        kd.level = "person"
    for k in ("composition", "households", "destinations", "near"):
        draft.risk.pop(k, None)
    draft.check.update(_figures(cand))
    draft.design_notes = [
        f"sdc design (grouped file): as drafted, {_before(cur)}; no household design changes at "
        f"most 15% of the records (every large group's composition is unique), so the file is "
        f"written WITHOUT the group id {hid} (a person file: no group can be reassembled; the "
        f"person-level certificate is the release's): {_changes(cand)}. Run `sdc design` on the household config for "
        "the household designs and their cost.",
    ]


def _as_large_groups(draft: Draft, cand: Any, cur: Any) -> None:
    """Write the two-stage release under the threat model of large groups into ``draft``
    (``risk.large_groups``, the weight recalibrated, ``theta: calibrated``; the columns the
    dependence check refused dropped)."""
    risk = cand.data["risk"]
    for k in ("composition", "destinations", "near", "weighted", "households", "large_groups"):
        draft.risk.pop(k, None)
    if "large_groups" in risk:  # input.members: sampled sets 0 itself
        draft.risk["large_groups"] = int(risk["large_groups"])
    draft.risk["theta"] = risk["theta"]
    for k, r in cand.recoding.items():  # coarser group keys (members sampled)
        draft.keys[k].recode = copy.deepcopy(r["recode"])
        draft.keys[k].recode_note = f"{r['name']} (the design's: fewer records change)"
        if draft.partition.get(k) not in (None, "as_is", {"as_is": True}):
            draft.partition.pop(k)
    if draft.input.get("weight"):
        draft.input["weight_release"] = "recalibrated"
    for c in getattr(cand, "dropped", None) or []:
        if c not in draft.input["drop"]:
            draft.input["drop"].append(c)
        if c in draft.released_unchanged:
            draft.released_unchanged.remove(c)
    draft.check.update(_figures(cand))
    how = ("input.members: sampled (the composition intruder outside the threat model, "
           "declared)" + (" and the group keys recoded: " + "; ".join(
               f"{k} {r['name']}" for k, r in cand.recoding.items()) if cand.recoding else "")
           if "large_groups" not in risk else
           f"risk.large_groups: {risk['large_groups']} (groups of more than "
           f"{risk['large_groups']} members outside the composition intruder's threat model, "
           "docs/HOUSEHOLDS.md \"Large groups\")")
    draft.design_notes = [
        f"sdc design (grouped file): as drafted, {_before(cur)}; written: two stages with "
        f"{how}: {_changes(cand)}; {cand.note}.",
    ]


def restored(draft: Draft, saved: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """The draft's (derived, dependent, input) as before the household design judged it
    (``saved``), for a design without ``protect``; under ``risk.large_groups`` with what the
    design wrote into the input kept (the weight recalibrated, the columns it dropped)."""
    new = draft.input
    derived, dependent, inp = saved
    if "large_groups" in draft.risk or new.get("members") == "sampled":  # the two stages
        if "weight_release" in new:
            inp["weight_release"] = new["weight_release"]
        recoded = any(kd.recode is not None for kd in draft.keys.values()
                      if kd.level == "household")
        inp["drop"] = [*inp["drop"], *(c for c in new["drop"] if c not in inp["drop"]
                                       and (recoded or c not in derived))]
        if recoded:  # group keys recoded by the design: household derived: columns (functions
            # of the declared keys) cannot be recomputed: dropped, as judged
            hcols = inp.get("household_columns") or []
            for c in [c for c in derived if c in new["drop"]]:
                dependent[c] = (f"{derived.pop(c)}; not a function of the recoded group keys")
                if c in hcols:
                    hcols.remove(c)
    return derived, dependent, inp


def expected_of_plan(hp: Any, draft: Draft) -> None:
    """The draft's expected records changed (and SD) from its final plan under ``protect``
    (the exact expectation of the composition stage), for a design whose plan the final check
    changed (the weight released recalibrated: ``risk.weighted`` left out)."""
    from sdc.method.household_composition import expected_persons_changed

    planned = getattr(getattr(hp, "hs", None), "composition_planned", None)
    table = getattr(getattr(hp, "hs", None), "composition_table", None)
    if planned is None or table is None:
        return
    from sdc.method.expected_changes import changes_text

    e, var = expected_persons_changed(planned[0], table)
    c, n = draft.check, int(draft.check.get("records") or 0)
    if "expected_changed" in c and "sd_changed" in c and n:  # the design note says the same
        was = changes_text(c["expected_changed"], c["sd_changed"] ** 2, n)
        draft.design_notes = [x.replace(was, changes_text(e, var, n))
                              for x in draft.design_notes]
    c.update({"expected_changed": float(e), "sd_changed": float(var) ** 0.5})


def search_unweighted(draft: Draft, config_path: Path, text: Callable[[Draft], str],
                      replan: Callable[[], None]) -> None:
    """The design search once more on the written (now unweighted) draft, as `sdc design`
    would run it, its design kept when it changes fewer records (:func:`apply_household_design`
    with ``when`` 0), then ``replan`` (the final plan); the draft unchanged when nothing
    certified changes fewer. ``text``: the draft's YAML."""
    import os
    import tempfile

    fd, name = tempfile.mkstemp(prefix=f".{config_path.stem}.", suffix=".judge.yaml",
                                dir=config_path.parent)
    trial = Path(name)
    saved = copy.deepcopy((draft.keys, draft.partition, draft.risk, draft.input,
                           draft.check, draft.design_notes))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text(draft))
        again = apply_household_design(draft, trial, when=0.0)
    except SmallBlockError:
        again = False
    finally:
        trial.unlink(missing_ok=True)
    if again:
        replan()
    else:
        (draft.keys, draft.partition, draft.risk, draft.input, draft.check,
         draft.design_notes) = saved


def retry_dependent(frame: pd.DataFrame, draft: Draft) -> None:
    """The columns the draft as written dropped because they gave keys away are tried again
    under the household design (``risk.composition: protect``: a column is then measured
    against the household keys x composition, and an income that gave the exact age away
    may not give an age band away); the final plan drops again only those that still fail.
    A column giving a key away is a reason to change the design, not to drop the column."""
    cols = [c for c, why in draft.dependent.items()
            if not why.startswith("(the survey weight)") and c in frame.columns]
    if not cols:
        return
    hid = draft.input["household_id"]
    level = household_levels(frame, hid, cols)
    for c in cols:
        del draft.dependent[c]
        draft.input["drop"] = [d for d in draft.input["drop"] if d != c]
        if level[c]:
            draft.input.setdefault("household_columns", []).append(c)
        else:
            draft.released_unchanged.append(c)
    draft.history.append(
        "tried again under the household design (dropped as drafted: they gave keys away "
        f"before the composition was protected): {', '.join(cols)}")
