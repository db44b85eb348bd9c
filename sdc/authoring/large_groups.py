"""The large-groups candidate of the household design search (``sdc design`` of a grouped
file: employees in enterprises; docs/HOUSEHOLDS.md "Large groups", docs/METHOD.md 7.15).

Under ``risk.composition: protect`` every composition of a 200-employee enterprise is unique
(most of the file would change) and its exact person level is not computable; the release
without the group id needs a weight that no longer singles groups out. The threat model that
fits large groups is the two-stage release with ``risk.large_groups``: the group-level
intruder certified by the household stage (counted in groups), the person intruder given the
group keys by the person stage, and the composition intruder of the groups of at most
:data:`THRESHOLD` members certified exactly. The candidate is released once in memory (the
figures ``sdc release`` prints: the exact expectation of records changed and the three
certificates), with the weight released recalibrated to the released group keys and
``theta: calibrated``; a non-key column the dependence check refuses is dropped and named
(its cost), as ``sdc init`` does.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError

__all__ = ["LARGE_GROUP", "MAX_CANDIDATES", "THRESHOLD", "design_certs", "design_head", "large_groups_candidate",
           "large_groups_candidates", "large_groups_data", "sampled"]

THRESHOLD = 9
"""``risk.large_groups`` of the candidate: groups of more than 9 members are not households
(hardly any household survey has larger ones) and nobody outside such a group is assumed to
know every member's keys; the composition intruder still applies to the smaller ones."""

LARGE_GROUP = 40
"""The candidate is tried when the file has a group of more than this many members (the
largest group whose exact person level under ``protect`` is computed:
:data:`~sdc.authoring.household_design.MAX_EXACT_SIZE`)."""


def sampled(base: dict[str, Any]) -> bool:
    """Whether the config mapping declares ``input.members: sampled`` (the composition
    intruder outside the threat model of every group: docs/HOUSEHOLDS.md "Sampled members")."""
    return (base.get("input") or {}).get("members") == "sampled"


def large_groups_data(base: dict[str, Any], threshold: int = THRESHOLD,
                      recoding: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``base`` as the two-stage release with ``risk.large_groups: threshold`` (none written
    under ``input.members: sampled``, which sets 0), the group keys' ``recoding``, the weight
    released recalibrated, ``theta: calibrated``, the default ``risk.households: fail``."""
    data = copy.deepcopy(base)
    risk = dict(data.get("risk") or {})
    for k in ("composition", "destinations", "near", "weighted", "households", "large_groups"):
        risk.pop(k, None)
    for k, r in (recoding or {}).items():
        data["key_variables"][k] = {**data["key_variables"][k], "recode": r["recode"]}
        part = data.get("partition") or {}
        if k in part and part[k] not in ("as_is", {"as_is": True}):
            part.pop(k)  # a partition of the declared values: the recoded key's own as_is
    if recoding and data.get("derived"):  # functions of the declared keys, not of the recoded
        gone = [str(d) for d in data.pop("derived")]
        inp = data["input"]
        inp["drop"] = [*(inp.get("drop") or []), *gone]
        if inp.get("household_columns"):
            inp["household_columns"] = [c for c in inp["household_columns"] if c not in gone]
    if not sampled(base):
        risk["large_groups"] = int(threshold)
    risk["theta"] = "calibrated"
    data["risk"] = risk
    if (data.get("input") or {}).get("weight"):
        data["input"]["weight_release"] = "recalibrated"
    return data


MAX_CANDIDATES = 8
"""At most this many combinations of coarser group keys are released (each once in memory)."""


def large_groups_candidates(frame: pd.DataFrame, config: ReleaseConfig, base: dict[str, Any],
                            base_dir: Path, candidate: Any, release: Any) -> list[Any]:
    """The large-groups candidates of the search (arguments as
    :func:`large_groups_candidate`). Under ``input.members: sampled`` (threshold 0) the group
    keys as written and each combination of their coarser options
    (:func:`~sdc.authoring.household_options.group_key_options`: hierarchy levels, rare
    groups merged, size classes paired or top-coded), at most :data:`MAX_CANDIDATES`, the
    coarsest last; else the one candidate of :data:`THRESHOLD`."""
    if not sampled(base):
        return [large_groups_candidate(frame, config, base, base_dir, candidate, release)]
    import itertools

    from sdc.authoring.household_options import group_key_options

    coarser = group_key_options(frame, config)
    names = [k for k, _ in coarser]
    out = []
    combos = list(itertools.product(*(o for _, o in coarser)))[:MAX_CANDIDATES]
    for combo in combos:
        recoding = {k: {"name": name, "recode": rule, "released_values": n}
                    for k, (name, rule, n) in zip(names, combo, strict=True) if rule is not None}
        out.append(large_groups_candidate(frame, config, base, base_dir, candidate, release,
                                          recoding))
    return out


def large_groups_candidate(frame: pd.DataFrame, config: ReleaseConfig, base: dict[str, Any],
                           base_dir: Path, candidate: Any, release: Any,
                           recoding: dict[str, dict[str, Any]] | None = None) -> Any:
    """The evaluated candidate (``candidate``: the search's candidate class; ``release``:
    its in-memory release of a frame and a config; ``recoding``: the group keys'). Certified
    when the release is accepted (its certificates <= xi); refused with the release's reason
    otherwise."""
    from sdc.config.load import parse_config
    from sdc.io.recode import recode_frame
    from sdc.method.dependence.verdict import DependenceError

    recoding = recoding or {}
    cand = candidate(large_groups_data(base, recoding=recoding), recoding, n_records=len(frame))
    cand.large_groups = 0 if sampled(base) else THRESHOLD
    if recoding:  # the derived: columns the recoded group keys cannot recompute, named
        cand.dropped = [str(d) for d in base.get("derived") or []]
    for _ in range(3):  # drop what the dependence check refuses (named), then judge
        try:
            cfg = parse_config(copy.deepcopy(cand.data), base_dir, source="household design")
            res = release(recode_frame(frame, cfg), cfg)
            break
        except DependenceError as e:
            bad = sorted(e.to_drop(cand.data["input"].get("drop") or []))
            if not bad or config.input.weight in bad:
                cand.status, cand.note = "refused", str(e).splitlines()[0][:240]
                return cand
            cand.data["input"]["drop"] = [*(cand.data["input"].get("drop") or []), *bad]
            cand.dropped = [*cand.dropped, *bad]
        except (InputError, SmallBlockError, ValueError) as e:
            cand.status, cand.note = "refused", str(e).splitlines()[0][:300]
            return cand
    else:
        cand.status, cand.note = "refused", "columns keep giving keys away"
        return cand
    st = res.households
    comp = st.composition
    cand.certificate = float(res.certificate)
    cand.changed = int(res.n_changed)
    cand.expected_changed = float(st.expected_changed)
    cand.changed_var = float(st.expected_changed_var)
    cand.households_changed = int(st.changed.sum())
    cand.entropy_kept = 1.0
    lg = comp["large_groups"]
    cand.composition = {"large_groups": lg, "person_certificate": float(st.person_certificate),
                        "household_level_certificate": float(st.certificate)}
    section = res.household_report["risk"]
    cand.note = section["message"]
    if cand.dropped:
        cand.note += f"; not released (they give keys away): {', '.join(cand.dropped)}"
    cand.status = "refused" if comp["exceeds_xi"] else "certified"
    return cand


def design_head(c: Any) -> tuple[str, str]:
    """(how, what changed) of a large-groups candidate for the head ``sdc design -o`` writes."""
    changed = "; ".join(f"{k}: {r['name']}" for k, r in c.recoding.items()) or "none"
    if c.large_groups == 0:
        how = ("two stages, input.members: sampled (members are a sample of each group: the "
               "composition intruder is outside the threat model, declared by the config)")
    else:
        how = (f"two stages, risk.large_groups: {c.large_groups} (groups above it outside the "
               "composition intruder's threat model)")
    return how, (f"group keys recoded ({changed}); the weight released recalibrated to the "
                 "released group keys")


def design_certs(c: Any) -> str:
    """The certificates line of a large-groups candidate's ``sdc design -o`` head."""
    comp = c.composition
    lg = comp.get("large_groups") or {}
    small = ("composition intruder outside the threat model (input.members: sampled)"
             if lg.get("members") == "sampled" else
             f"composition of the groups of at most {c.large_groups} members "
             f"{lg.get('certificate', float('nan')):.4f}")
    return (f"Certificates (exact): group level {comp.get('household_level_certificate', 0):.4f}, "
            f"person given the group keys {comp.get('person_certificate', 0):.4f}; {small}.")
