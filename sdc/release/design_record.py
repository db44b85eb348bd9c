"""``audit.json``'s ``designs``: every PRB's transition design as data, enough for an
independent program to rebuild every m_j and W and re-derive the certificate from the release
folder alone (docs/METHOD.md 7.10 "Verifiability", 7.11, 7.12; docs/RELEASE_FOLDER.md).

Written when a plan has per-PRB designs (``destinations: near`` and/or
``risk.weighted: true``); NZY's uniform design needs only ``prb_structure``'s profiles.
Per PRB (``prb``, ``theta`` its theta_b, ``t``: t_j of its cells in the PRB's local order, the
cells ascending by cell index, ``max_risk``) its **groups** (one group, the whole PRB, without
``risk.weighted``), each with:

- ``group`` (the weighted mode's global group number, or null), ``cells`` (local indices);
- ``design``: ``weighted`` (m_j = min(c / W_j, 1) with ``c`` = c_g and ``weight_total`` the W_j
  of its cells), ``nzy`` (m_j = theta / t_j with the group's ``theta``) or ``prb`` (m_j =
  theta_b / t_j: the PRB's own design without weights);
- ``w``: ``uniform`` (1/(k_g - 1) to every other cell of the group) or ``near``, with ``s`` (2s
  destinations per row) and ``tour`` (the group's local cells in tour order: W = sum_i a_i
  (P^i + P^-i) / 2 along it, a_i from ``near.bandwidth`` and ``near.max_weight``, METHOD.md
  7.12); ``matching`` (the matching kernel, ``near: {kernel: matching}``), with ``s`` and
  ``destinations`` (every row's 2s local destination cells, each of weight 1/(2s));
- ``max_risk``: the group's exact certificate as the release computed it (a weighted group's;
  for ``prb`` the PRB's, with the neighbourhood intruder under ``near``).

Cell-level aggregates only (t_j, W_j, local indices; no key value, no record): internal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DESIGNS_FORMAT", "design_record"]

DESIGNS_FORMAT = "sdc-designs/1"


def _near_group(tr: Any, members: np.ndarray, codes: np.ndarray, metrics: list,
                matching: bool = False) -> dict[str, Any]:
    """``w``, ``s`` and ``tour`` of a group (``members``: PRB-local cells ascending) from the
    PRB's transition ``tr`` (rows of a near group hold 2s entries); under the matching kernel
    ``w`` ``matching`` and every row's ``destinations`` instead of the tour."""
    from sdc.method.near import tour_of

    if tr.indptr is None:
        return {"w": "uniform"}
    length = int(tr.indptr[members[0] + 1] - tr.indptr[members[0]])
    if length == 0:
        return {"w": "uniform"}
    if matching:  # W = (1/2s) sum of permutations: every row's destinations (local cells)
        out = {"w": "matching", "s": length // 2,
               "destinations": [tr.indices[tr.indptr[j]:tr.indptr[j + 1]].tolist()
                                for j in members]}
        w = [tr.weights[tr.indptr[j]:tr.indptr[j + 1]].tolist() for j in members]
        if any(x != 1.0 / len(r) for r in w for x in r):  # near.weights: each row's weights
            out["weights"] = w
        return out
    return {"w": "near", "s": length // 2,
            "tour": members[tour_of(codes, metrics)].tolist()}


def design_record(plan: Any, config: Any) -> dict[str, Any] | None:
    """The ``designs`` entry of ``audit.json`` for ``plan`` (a :class:`ReleasePlan` with
    ``transitions``), or None for NZY's uniform design."""
    if plan is None or plan.transitions is None:
        return None
    from sdc.method.near import key_metrics

    part = plan.partitioned
    t_all = np.asarray(part.cells.frequency, dtype=np.int64)
    codes = np.asarray(part.cells.key_codes, dtype=np.int64)
    near = bool(plan.design.near) if plan.design is not None else False
    metrics = key_metrics(config) if near else []
    matching = near and config.risk.near_options.kernel == "matching"
    wd = getattr(plan, "weighted", None)
    w_all = None if wd is None else getattr(wd, "weight_total", None)
    prbs = []
    if wd is not None:  # the group table's rows as plain Python values, by group number
        gt = wd.groups
        table = [{"design": str(d), "max_risk": float(x), "c": float(c), "theta": float(th),
                  "w": str(w)} for d, x, c, th, w in zip(
                      gt["design"].tolist(), gt["max_risk"].to_numpy(np.float64).tolist(),
                      gt["c"].to_numpy(np.float64).tolist(),
                      gt["theta"].to_numpy(np.float64).tolist(), gt["w"].tolist(), strict=True)]
        row_of = {int(g): i for i, g in enumerate(gt["group"].tolist())}
    for b, blk in enumerate(plan.block_plan.blocks):
        start = int(plan.prb_start[b])
        k = int(blk.k) if hasattr(blk, "k") else int(plan.transitions[b].frequency.size)
        cells = np.asarray(plan.prb_cells[start:start + k], dtype=np.int64)
        tr = plan.transitions[b]
        groups = []
        if wd is None:
            members = np.arange(cells.size)
            g = {"group": None, "cells": members.tolist(), "design": "prb",
                 "max_risk": float(plan.blocks["max_risk"].iat[b])}
            g.update(_near_group(tr, members, codes[cells], metrics, matching) if near
                     else {"w": "uniform"})
            groups.append(g)
        else:
            gcell = np.asarray(wd.design.group, dtype=np.int64)[cells]
            order = np.argsort(gcell, kind="stable")
            gids, bounds = np.unique(gcell[order], return_index=True)
            for gid, members in zip(gids.tolist(), np.split(order, bounds[1:]), strict=True):
                r = table[row_of[gid]]
                g = {"group": gid, "cells": members.tolist(), "design": r["design"],
                     "max_risk": r["max_risk"]}
                if r["design"] == "weighted":
                    g["c"] = r["c"]
                    g["weight_total"] = np.asarray(w_all, np.float64)[cells[members]].tolist()
                else:
                    g["theta"] = r["theta"]
                g.update(_near_group(tr, members, codes[cells[members]], metrics, matching)
                         if near and r["w"] == "near" else {"w": "uniform"})
                groups.append(g)
        prbs.append({"prb": b, "theta": float(blk.theta), "t": t_all[cells].tolist(),
                     "max_risk": float(plan.blocks["max_risk"].iat[b]) if wd is None else
                     max(g["max_risk"] for g in groups), "groups": groups})
    o = config.risk.near_options
    return {"format": DESIGNS_FORMAT,
            "weighted": wd is not None, "destinations": "near" if near else "uniform",
            "near": {"bandwidth": float(o.bandwidth), "max_weight": float(o.max_weight)}
            if near else None,
            "prbs": prbs}
