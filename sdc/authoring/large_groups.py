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

__all__ = ["LARGE_GROUP", "THRESHOLD", "large_groups_candidate", "large_groups_data"]

THRESHOLD = 9
"""``risk.large_groups`` of the candidate: groups of more than 9 members are not households
(hardly any household survey has larger ones) and nobody outside such a group is assumed to
know every member's keys; the composition intruder still applies to the smaller ones."""

LARGE_GROUP = 40
"""The candidate is tried when the file has a group of more than this many members (the
largest group whose exact person level under ``protect`` is computed:
:data:`~sdc.authoring.household_design.MAX_EXACT_SIZE`)."""


def large_groups_data(base: dict[str, Any], threshold: int = THRESHOLD) -> dict[str, Any]:
    """``base`` as the two-stage release with ``risk.large_groups: threshold``, the weight
    released recalibrated, ``theta: calibrated``, the default ``risk.households: fail``."""
    data = copy.deepcopy(base)
    risk = dict(data.get("risk") or {})
    for k in ("composition", "destinations", "near", "weighted", "households"):
        risk.pop(k, None)
    risk["large_groups"] = int(threshold)
    risk["theta"] = "calibrated"
    data["risk"] = risk
    if (data.get("input") or {}).get("weight"):
        data["input"]["weight_release"] = "recalibrated"
    return data


def large_groups_candidate(frame: pd.DataFrame, config: ReleaseConfig, base: dict[str, Any],
                           base_dir: Path, candidate: Any, release: Any) -> Any:
    """The evaluated candidate (``candidate``: the search's candidate class; ``release``:
    its in-memory release of a frame and a config). Certified when the release is accepted
    (its three certificates <= xi); refused with the release's reason otherwise."""
    from sdc.config.load import parse_config
    from sdc.io.recode import recode_frame
    from sdc.method.dependence.verdict import DependenceError

    cand = candidate(large_groups_data(base), {}, n_records=len(frame))
    cand.large_groups = THRESHOLD
    for _ in range(3):  # drop what the dependence check refuses (named), then judge
        try:
            cfg = parse_config(copy.deepcopy(cand.data), base_dir, source="household design")
            res = release(recode_frame(frame, cfg), cfg)
            break
        except DependenceError as e:
            bad = sorted({f.column for f in e.figures if f.flagged})
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
