"""``sdc init``: a complete, commented release config drafted from a data file.

Why here (the release layer): drafting reads the data (``sdc.io``), runs the partition and the
plan (``sdc.method``) to check the suggested partition, and writes config text, so it sits
above engine and io; the command in ``sdc/cli/init.py`` only parses options and writes the
file. Everything here is pure apart from :func:`read_for_draft` (which reads the file).

The steps: the data read and each key observed (:mod:`sdc.authoring.observe`), the partition
suggested and the draft checked by a release (this module), the draft written as commented YAML
(:mod:`sdc.authoring.draft_text`); the names of all three are importable from here.

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
  and the draft is planned once by the release pipeline (its count pass on the frame, the
  plan and the dependence check) to prove it releases.
- ``risk`` defaults (xi = 0.395 as in NZY, theorem theta, merge), a seed file under
  ``secrets/`` (created 0600 by the first release), ``output`` under ``releases/``
  (formats: parquet plus the input's own format for SPSS/Stata input, else csv).
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import sdc
from sdc.authoring.design import run_design
from sdc.authoring.draft_checks import SUGGESTION_STEP, prb_sizes, rare_cells_hint
from sdc.authoring.draft_text import draft_yaml
from sdc.authoring.observe import (
    AS_IS_MAX,
    DEFAULT_XI,
    MAX_SMALL_SHARE,
    RANGE_DENSITY,
    RANGE_THRESHOLD,
    Draft,
    KeyDraft,
    observe_key,
    read_for_draft,
)
from sdc.config import parse_config
from sdc.method.dependence import DependenceError
from sdc.method.draws import value_hash

__all__ = [
    "AS_IS_MAX",
    "DESIGN_WHEN",
    "DEFAULT_XI",
    "MAX_SMALL_SHARE",
    "RANGE_DENSITY",
    "Draft",
    "KeyDraft",
    "RANGE_THRESHOLD",
    "apply_design",
    "build_draft",
    "checked_plan",
    "draft_yaml",
    "judge_household_draft",
    "observe_key",
    "read_for_draft",
    "suggest_partition",
    "typed_keys",
]

_NICE = (1, 2, 5)


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
        k = prb_sizes(frame, {**data, "partition": rules(widths, as_is)}, base_dir)
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
        history.append(f"{stats['small_prbs']} of {stats['prbs']} {SUGGESTION_STEP} = {km}: "
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
                name: str | None = None, xi: float = DEFAULT_XI,
                household_id: str | None = None) -> Draft:
    """Draft the config for ``frame`` (read from ``data_path``) to be written at ``config_path``.

    Paths in the draft are relative to the config's folder. The draft is checked by planning
    it once with the release pipeline (:func:`checked_plan`): if the merge policy cannot
    certify it, ``small_blocks: calibrate`` is tried; if that fails too, the plan's error
    (naming the partition set and what to do) is raised. ``household_id``: a household file
    (:mod:`sdc.authoring.draft_households`: key levels, household columns, the household plan;
    a draft the household stage cannot certify is left to the household design step).
    """
    value_labels = value_labels or {}
    variable_labels = variable_labels or {}
    drop = list(drop or [])
    na = frame.attrs.get("na_values")  # read_for_draft: numbers but for a missing token
    base = config_path.resolve().parent
    rel = Path(_relpath(data_path.resolve(), base))
    name = _safe_name(name or data_path.stem)
    kds = {k: observe_key(frame[k], k, value_labels.get(k), variable_labels.get(k))
           for k in keys}
    frame = typed_keys(frame, kds)
    inp = _draft_input(rel, fmt, delimiter, encoding, id_column, drop, weight)
    if na:
        inp["na_values"] = list(na["tokens"])
    special = set(keys) | set(drop) | {c for c in (id_column, weight, household_id) if c}
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
    if na:
        draft.na_columns = list(na["columns"])
    if household_id:
        from sdc.authoring.draft_households import set_household_levels

        set_household_levels(frame, draft, household_id, others)
    data = draft.as_dict()
    data["seed"] = 0  # the check below needs no seed file
    part, history, stats = suggest_partition(frame, data, kds, base, xi=xi)
    draft.partition, draft.history = part, history
    data["partition"] = part
    _check_draft(frame, draft, data, kds, risk, base, stats, household_id, xi)
    return draft


def _draft_input(rel: Path, fmt: str, delimiter: str, encoding: str, id_column: str | None,
                 drop: list[str], weight: str | None) -> dict[str, Any]:
    """The draft's ``input:`` section (``rel``: the data file relative to the config)."""
    inp: dict[str, Any] = {"path": rel.as_posix(), "format": fmt}
    if fmt == "csv":
        inp["delimiter"] = delimiter
        inp["encoding"] = encoding
    if id_column:
        inp["id_column"] = id_column
    inp["drop"] = drop
    if weight:
        inp["weight"] = weight
    return inp


def _check_draft(frame: pd.DataFrame, draft: Draft, data: dict[str, Any],
                 kds: dict[str, KeyDraft], risk: dict[str, Any], base: Path,
                 stats: dict[str, Any], household_id: str | None, xi: float) -> None:
    """Plan the draft once (:func:`checked_plan`) and record the check in ``draft.check``:
    ``small_blocks: merge``, then ``calibrate``; with keys that have missing values, the same
    again with ``missing_moves: true`` when a blank cannot certify on its own. The last
    refusal is raised (a household draft's is recorded: the household design decides)."""
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
            result = checked_plan(frame, data, base, draft)
        except sdc.SmallBlockError as e:
            if n < len(attempts) - 1:
                continue
            if not household_id:
                hint = rare_cells_hint(frame, list(kds), xi)
                raise sdc.SmallBlockError(hint or f"the drafted partition cannot be certified: "
                                          f"{e}") from None
            from sdc.authoring.draft_households import refused_check

            draft.check = {**stats, **refused_check(e, len(frame), xi)}  # the design decides
            break
        draft.risk["small_blocks"] = policy
        if moves:
            draft.history.append(
                f"the records with a missing {', '.join(missing_keys)} are too few to certify "
                "on their own: missing_moves: true (a blank may stand for a real value; the "
                "codebook says so)")
        if policy != "merge":
            draft.history.append("merging could not certify every PRB: small_blocks: calibrate")
        if household_id:
            from sdc.authoring.draft_households import household_check

            draft.check = {**stats, **household_check(result, len(frame), xi)}
            break
        draft.check = {**stats, "records": int(len(frame)), "prbs": int(len(result.blocks)),
                       "certificate": float(result.certificate),
                       "xi": float(result.partitioned.xi),
                       "merges": len(result.merges),
                       "expected_changed": float(result.blocks["expected_changed"].sum())
                       if len(result.blocks) else 0.0}
        break


def checked_plan(frame: pd.DataFrame, data: dict[str, Any], base: Path,
                  draft: Draft) -> Any:
    """The draft's plan by the release pipeline (in memory, ``frame`` not validated again) and
    the dependence check of the released non-key columns: a failing column goes to
    ``derived:`` when a function of the keys, else to ``input.drop`` (reason as a comment), and
    the check reruns. A household file: both stages, the check at both levels."""
    from sdc.executors.memory import InMemory
    from sdc.io.recode import recode_frame
    from sdc.pipeline.households import plan_households
    from sdc.pipeline.kernels import plan_cells
    from sdc.pipeline.release import count_cells

    while True:
        cfg = parse_config(data, base, source="the draft", load_hierarchies=False)
        # a draft recoded by its design step is planned (and judged) in released values
        rframe = frame if cfg.input.household_id is not None else recode_frame(frame, cfg)
        try:
            if cfg.input.household_id is not None:  # (recoded by the household design)
                return plan_households(cfg, runner=InMemory(cfg, recode_frame(frame, cfg)))
            return plan_cells(count_cells(InMemory(cfg, rframe), cfg, validate=False), cfg)
        except DependenceError as e:
            bad = [f for f in e.figures if f.flagged]
            wanted = set(e.to_drop(draft.input["drop"]))  # (a pair broken already: none)
            keys = list(cfg.key_names)
            weight, weight_fixed = data["input"].get("weight"), False
            for f in bad:
                shown = ", ".join(sorted(f.revealed, key=lambda k: -f.revealed[k])[:2])
                why = (f"gives {shown} away (an intruder using it picks a target with "
                       f"probability {f.figure:.2f} > xi = {cfg.risk.xi})")
                if f.of:  # a pair of columns gives keys away together: drop the second
                    if f.of[1] not in frame.columns or f.of[1] not in wanted:
                        continue  # rebuilt from the member count (refused) or pair dropped
                    f = replace(f, column=f.of[1])
                if f.column == weight:  # its own figure or a dropped copy's: fixed once
                    if not weight_fixed:
                        _weight_fix(frame, data, draft, weight, keys, why)
                    weight_fixed = True
                    continue
                if f.column in draft.input["drop"] or f.column in draft.derived:
                    continue  # named by another failing pair or rebuilt column already
                if f.column in draft.released_unchanged:
                    draft.released_unchanged.remove(f.column)
                hcols = draft.input.get("household_columns") or []
                was_household = f.column in hcols
                if was_household:  # a household column is checked, not released unchanged
                    hcols.remove(f.column)
                    if not hcols:
                        del draft.input["household_columns"]
                level = _derived_level(rframe, f.column, cfg, was_household)
                if level is not None:
                    draft.derived[f.column] = why
                    if level == "household":  # recomputed from the household keys
                        draft.input.setdefault("household_columns", []).append(f.column)
                else:
                    draft.dependent[f.column] = why
                    draft.input["drop"].append(f.column)
            data["input"]["drop"] = list(draft.input["drop"])
            data["input"].pop("household_columns", None)
            if draft.input.get("household_columns"):
                data["input"]["household_columns"] = list(draft.input["household_columns"])
            if draft.derived:
                data["derived"] = list(draft.derived)


def _weight_fix(frame: pd.DataFrame, data: dict[str, Any], draft: Draft, weight: str,
                keys: list[str], why: str) -> None:
    """The survey weight gives keys away (constant within strata of a key): that key is kept
    as is (partition ``as_is``: the weight says nothing about a moved record); if there is none
    or it did not suffice, the weight is dropped (it cannot be ``derived:``). A household
    file's weight constant within households is released recalibrated instead (docs/METHOD.md
    7.13; under protect unweighted: docs/HOUSEHOLDS.md "Near compositions"). Once per check."""
    hid = data["input"].get("household_id")
    if hid and data["input"].get("weight_release") != "recalibrated" and bool(
            (frame.groupby(hid, sort=False)[weight].nunique(dropna=False) <= 1).all()):
        data["input"]["weight_release"] = draft.input["weight_release"] = "recalibrated"
        draft.history.append(
            f"the weight {weight} {why}; it is one value per household: released "
            "recalibrated to the released household keys (input.weight_release)")
        if (data.get("risk") or {}).get("composition") == "protect":
            data["risk"].pop("weighted", None), draft.risk.pop("weighted", None)
        return
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


def _derived_level(frame: pd.DataFrame, column: str, cfg: Any,
                   household_column: bool) -> str | None:
    """Whether a column the dependence check flagged can be ``derived:`` (recomputed from the
    released keys), and at which level: a person file's column that is a function of the
    keys -> "person". A household file's (docs/HOUSEHOLDS.md, ``derived:``): "household" when
    it has one value per household and is a function of the household keys (it goes to
    ``input.household_columns``; not under ``risk.composition: protect``, which does not
    recompute them), "person" when it is a function of the person keys alone,
    else None (dropped). Before (issue 44) a household file's column was tested against all
    the keys together, and a second weight column equal to the weight (eusilc's rb050) was
    drafted ``derived:``, which the release then refused."""
    if cfg.input.household_id is None:
        return "person" if _is_function_of(frame, column, list(cfg.key_names)) else None
    hk, pk = list(cfg.household_keys), list(cfg.person_keys)
    if household_column:  # protect does not recompute household-level derived: columns
        ok = hk and cfg.risk.composition != "protect" and _is_function_of(frame, column, hk)
        return "household" if ok else None
    if pk and _is_function_of(frame, column, pk):
        return "person"
    return None


def _is_function_of(frame: pd.DataFrame, column: str, keys: list[str]) -> bool:
    """Whether ``column`` has one value per combination of ``keys`` (by value hash)."""
    h = pd.Series(value_hash(frame[column]).view(np.int64), index=frame.index, copy=False)
    grouped = h.groupby([frame[k] for k in keys], dropna=False, sort=False)
    return bool((grouped.nunique() <= 1).all())


def typed_keys(frame: pd.DataFrame, kds: dict[str, KeyDraft]) -> pd.DataFrame:
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
    try:
        return os.path.relpath(target, base)
    except ValueError:  # different drives (Windows)
        return str(target)


DESIGN_WHEN = 0.2
"""``sdc init`` searches recodings (``sdc design``) when the drafted release would change more
than this share of the records."""


def apply_design(draft: Draft, config_path: Path, *, budget: float = 30.0) -> bool:
    """When the draft written at ``config_path`` changes more than :data:`DESIGN_WHEN` of its
    records, search recodings (:func:`sdc.authoring.design.run_design`) and put the recommended
    design into ``draft`` (each key's ``recode:``, the partition it needs, and a note of the
    figures). With keys of differing ``importance`` (``--analysis-keys``) the search runs
    whatever the share; below :data:`DESIGN_WHEN` only the partition (and its merge order)
    of the draft's own recoding is chosen. Returns whether the draft changed."""
    c = draft.check
    # keys declared important (--analysis-keys): the design step runs whatever the share
    imp = len({kd.importance for kd in draft.keys.values()}) > 1
    if not c or c.get("records", 0) == 0 or (
            c["expected_changed"] / c["records"] <= DESIGN_WHEN and not imp):
        return False
    from sdc.authoring.design_values import with_value

    d = run_design(config_path, budget=budget, release_checks=False)
    r = d.result
    if r.recommended is None or r.current is None:
        return False
    rec, cur = r.nodes[r.recommended], r.nodes[r.current]
    if r.importance and c["expected_changed"] / c["records"] <= DESIGN_WHEN:
        # a draft the design step would not have run for keeps its recodings: the rule's
        # pick among the partitions of its own node (analysis keys held)
        from sdc.method.design.rule import rule_order

        order = rule_order(r.nodes, key_floor=r.keep, target=r.target, importance=True,
                           accept=lambda nd: nd.levels == cur.levels)
        if not order:
            return False
        rec = r.nodes[order[0]]
    if not r.importance and (rec.levels == cur.levels or not rec.changed < cur.changed):
        return False
    if r.importance and rec.levels == cur.levels and rec.partition == cur.partition:
        return False   # the rule, weighing the declared importance, keeps the draft
    for k, lev in zip(r.keys, rec.levels, strict=True):
        cand = r.cands[k][lev]
        if cand.rule is not None and k in draft.keys:
            # the number each class is released as: sdc.authoring.design_values
            draft.keys[k].recode = with_value(cand.rule, d.values(k, cand.rule))
            draft.keys[k].recode_note = cand.name
    if rec.partition and rec.partition != draft.partition:
        # the suggestion's steps ("age no longer partitions the file") and figures describe a
        # partition the draft no longer has: the design's replaces them (checked again after)
        draft.history = [h for h in draft.history if SUGGESTION_STEP not in h]
        draft.history.append("sdc design replaced the suggested partition (its recodings "
                             "make the released keys coarse enough to partition by them)")
        draft.partition = {v: rule for v, rule in rec.partition.items()}
        for stale in ("partition_sets", "small_prbs"):
            draft.check.pop(stale, None)
    if r.importance:   # the partition variant's merge order
        draft.risk.pop("merge_along", None)
        if rec.merge_along:
            draft.risk["merge_along"] = list(rec.merge_along)
    recoded = [k for k, kd in draft.keys.items() if kd.recode is not None]
    for col, why in list(draft.derived.items()) if recoded else []:
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


def _drop_household_derived(draft: Draft, *, always: bool = False) -> None:
    """``risk.composition: protect`` does not recompute household-level ``derived:`` columns
    (the release refuses them, exit 2): the draft drops them instead, saying why."""
    if draft.risk.get("composition") != "protect" and not always:
        return
    hcols = draft.input.get("household_columns") or []
    for col in [c for c in draft.derived if c in hcols]:
        why = draft.derived.pop(col)
        draft.dependent[col] = (f"{why}; risk.composition: protect does not recompute "
                                "household-level derived: columns")
        hcols.remove(col)
        draft.input["drop"].append(col)
    if not hcols:
        draft.input.pop("household_columns", None)


def judge_household_draft(frame: pd.DataFrame, draft: Draft, config_path: Path, *,
                          when: float, data_display: str | None = None) -> bool:
    """Judge the household draft as ``sdc release`` would and apply the household design when
    needed (:func:`apply_household_design`), from a private file next to ``config_path`` (the
    draft's relative paths hold there) removed after; then plan the result once more by the
    household pipeline (the dependence check of the final design: a column giving keys away
    is dropped or ``derived:``). Returns whether the design changed the draft."""
    import os
    import tempfile

    from sdc.authoring.draft_households import (
        apply_household_design,
        expected_of_plan,
        restored,
        retry_dependent,
        search_unweighted,
    )

    def final_plan() -> None:
        data = draft.as_dict()
        data["seed"] = 0
        expected_of_plan(checked_plan(typed_keys(frame, draft.keys), data,
                                      config_path.resolve().parent, draft), draft)

    config_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{config_path.stem}.", suffix=".judge.yaml",
                                dir=config_path.parent)
    trial = Path(name)
    # household-level derived: columns are judged dropped (the protect candidates cannot
    # recompute them, and they do not change the plan); kept unless protect is written
    saved = copy.deepcopy((draft.derived, draft.dependent, draft.input))
    _drop_household_derived(draft, always=True)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(draft_yaml(draft, data_display=data_display))
        designed = apply_household_design(draft, trial, when=when)
    finally:
        trial.unlink(missing_ok=True)  # the private file this step wrote
    if draft.risk.get("composition") != "protect" and "household_id" in draft.input:
        draft.derived, draft.dependent, draft.input = restored(draft, saved)
    if designed:
        searched_weighted = bool(draft.risk.get("weighted"))
        if draft.risk.get("composition") == "protect":
            retry_dependent(frame, draft)
        final_plan()
        if (searched_weighted and draft.risk.get("composition") == "protect"
                and not draft.risk.get("weighted")):
            # the final check released the weight recalibrated, so the design is unweighted:
            # the search's weighted candidates are not what is released (their weight groups
            # split the blocks; eusilc: a weighted candidate refused at the household keys x
            # size level is certified unweighted), so search once more as `sdc design` would
            # on the written draft, and keep its design when it changes fewer records
            search_unweighted(draft, config_path,
                              lambda d: draft_yaml(d, data_display=data_display), final_plan)
    return designed


