"""Household risk and utility of a household release: sdcMicro's hierarchical risk
(:func:`hierarchical_risk`, ``1 - prod_i (1 - r_i)`` over a household's members, as ``measure_risk(..., hid=)``) and the
composition intruder (:func:`composition_risk_of`: he knows a household's household keys and the
multiset of its members' person keys and picks one released household with that composition;
measured by Monte Carlo over replays of both stages, by class of F). A composition is an
order-free wrapping sum of 64-bit mixes of its members' key codes. Utility: households by
household key and size, before and after. docs/HOUSEHOLDS.md, "Risk" and "Utility".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.method.designs.households import HouseholdDesign
from sdc.method.draws import DrawPlan, fmix64, stream
from sdc.method.postrandomize import released_cells
from sdc.reports.disclosure import frequencies, individual_risk
from sdc.reports.household_verdicts import (
    large_groups_verdict,
    protect_verdict,
    riskiest_class,
)

__all__ = ["StageDraws", "composition_risk_of", "hierarchical_risk", "household_section_of",
           "household_utility_of"]

_F_CLASSES = (("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5+", 5, None))
_MUL = np.uint64(0x9E3779B97F4A7C15)


def _household_risk_of(r: np.ndarray, code: np.ndarray, n_h: int) -> np.ndarray:
    """1 - prod over members of (1 - r_i), per household (logs: r_i = 1 gives 1). The logs
    are added up per household in ascending order, so the figure does not depend on the
    order of the members in the file (any engine, any row order: the same bits)."""
    with np.errstate(divide="ignore"):
        logs = np.log1p(-np.minimum(r, 1.0))
    return -np.expm1(_ordered_sums(code, logs, n_h))


def _ordered_sums(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group 0..n-1 the sum of its values added in ascending order (a canonical order:
    the result depends on the multiset of a group's values only, not on the row order)."""
    group = np.asarray(group, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros(n, dtype=np.float64)
    if group.size == 0:
        return out
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    out[g[starts]] = np.add.reduceat(v, starts)
    return out


def hierarchical_risk(record_cell: np.ndarray, code: np.ndarray, n_h: int,
                      weights: np.ndarray | None) -> dict[str, Any]:
    """sdcMicro's hierarchical risk (fast_hier) of a file whose persons are in ``record_cell``
    (cells over all key variables) and households ``code``.

    Returns ``hier_risk_ER`` (sum over persons of their household's risk), ``hier_risk``
    (ER / n), ``hier_risk_pct``, ``max_household_risk`` and ``households_above_xi`` is added
    by the caller. ``record_cell`` may have empty cells (released files)."""
    cell = np.asarray(record_cell, dtype=np.int64)
    _, inv = np.unique(cell, return_inverse=True)
    fk, big_f = frequencies(inv.reshape(-1), weights)
    r = individual_risk(fk, big_f if weights is not None else None)
    hh = _household_risk_of(r, code, n_h)
    per_person = hh[code]
    er = float(np.sort(per_person).sum())
    n = int(cell.size)
    return {"hier_risk_ER": er, "hier_risk": er / n if n else 0.0,
            "hier_risk_pct": 100.0 * er / n if n else 0.0,
            "max_household_risk": float(hh.max()) if n_h else 0.0,
            "person_risk_ER": float(np.sort(r).sum()), "household_risk": hh}


def _mix_codes(codes: np.ndarray, salt: int) -> np.ndarray:
    """A 64-bit mix of every row of an (m, p) code array."""
    acc = np.full(codes.shape[0], np.uint64(salt), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(codes.shape[1]):
            acc = fmix64(acc * _MUL + codes[:, j].astype(np.uint64))
    return acc


class _CompositionKeys:
    """The (H,) uint64 key of every household: its household-key codes and the multiset of its
    members' person-key codes (a wrapping sum over members: order-free). Both mixes are
    functions of a unit's cell, so they are computed once per cell of the two cell tables
    (``hh_key_codes``, ``person_key_codes``: the person keys' columns), and the members'
    grouping by household (``code``) once: a replay gathers and sums only."""

    def __init__(self, hh_key_codes: np.ndarray, person_key_codes: np.ndarray,
                 code: np.ndarray, n_h: int) -> None:
        self.hm = _mix_codes(hh_key_codes, 0x27D4EB2F)
        self.pm = _mix_codes(person_key_codes, 0x5BD1E995)
        self.order = np.argsort(code, kind="stable")
        c = code[self.order]
        self.starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        self.at = c[self.starts]
        self.n_h = n_h

    def __call__(self, hh_cell: np.ndarray, person_cell: np.ndarray) -> np.ndarray:
        """The keys of the households in cells ``hh_cell`` (H,) with members in cells
        ``person_cell`` (persons, in ``code``'s order)."""
        with np.errstate(over="ignore"):
            sums = (np.add.reduceat(self.pm[person_cell[self.order]], self.starts)
                    if self.order.size else np.zeros(0, np.uint64))
            key = np.empty(self.n_h, dtype=np.uint64)
            key[self.at] = sums
            return fmix64(key ^ self.hm[hh_cell])


def _hits(true_key: np.ndarray, released_key: np.ndarray,
          true_sorted: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Per household: 1{released with its own composition} / (released households with it).
    ``true_sorted``: (the order sorting ``true_key``, the sorted keys), made once for every
    replay: binary searches of sorted keys run ~10x faster than of keys in household order
    (400K households: 7 against 70 ms), and the positions are the same."""
    vals, counts = np.unique(released_key, return_counts=True)
    if true_sorted is None:
        found = np.searchsorted(vals, true_key)
    else:
        order, keys = true_sorted
        found = np.empty(true_key.size, dtype=np.int64)
        found[order] = np.searchsorted(vals, keys)
    pos = np.minimum(found, max(vals.size - 1, 0))
    s = np.where(vals[pos] == true_key, counts[pos], 0)
    own = released_key == true_key
    return np.where(own & (s > 0), 1.0 / np.maximum(s, 1), 0.0)


@dataclass
class StageDraws:
    """One stage of a household release as the composition intruder replays it: ``plan`` (its
    :class:`~sdc.method.draws.DrawPlan`), ``key_codes`` (its cell table's key codes),
    ``cell`` every unit's true cell (persons or households, any order) and ``identity`` the
    distinct identities of the drawing units (those in a PRB cell), in that order. Any engine
    builds it from its aggregates (:mod:`sdc.pipeline.household_result`)."""

    plan: DrawPlan
    key_codes: np.ndarray
    cell: np.ndarray
    identity: np.ndarray

    def replay(self, seed: int) -> np.ndarray:
        """Released cell of every unit under another seed (the same plan and identities):
        one more independent draw of the stage."""
        rec = np.asarray(self.cell, dtype=np.int64)
        out = rec.copy()
        rows = np.flatnonzero(self.plan.cell_prb[rec] >= 0)
        if rows.size and self.plan.prb_theta.size:
            out[rows] = released_cells(self.plan, rec[rows], self.identity, seed)
        return out


def _f_classes(true_key: np.ndarray, n_h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F of every household: households sharing its true key; its F class (``_F_CLASSES``);
    households per class)."""
    _, inv, f_counts = np.unique(true_key, return_inverse=True, return_counts=True)
    big_f = f_counts[inv.reshape(-1)]
    cls_of = np.zeros(n_h, dtype=np.int64)
    for c, (_, lo, hi) in enumerate(_F_CLASSES):
        cls_of[(big_f >= lo) & ((big_f <= hi) if hi is not None else True)] = c
    return big_f, cls_of, np.bincount(cls_of, minlength=len(_F_CLASSES))


def _se(a: np.ndarray) -> float:
    """Standard error of the mean of the replications ``a`` (0 for fewer than two)."""
    return float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0


def _class_rows(big_f: np.ndarray, cls_of: np.ndarray, n_f: np.ndarray,
                per_class: np.ndarray) -> list[dict[str, Any]]:
    """Per non-empty F class: households, the exact mean of 1/F before release (summed in
    ascending order) and the replications' mean risk with its standard error."""
    classes = []
    for c, (label, _, _) in enumerate(_F_CLASSES):
        if n_f[c] == 0:
            continue
        classes.append({"class": label, "households": int(n_f[c]),
                        "before": float(np.sort(1.0 / big_f[cls_of == c]).sum() / n_f[c]),
                        "estimate": float(per_class[:, c].mean()), "se": _se(per_class[:, c])})
    return classes


def _before(big_f: np.ndarray, n_h: int) -> dict[str, Any]:
    """Exact risk before release: mean and max of 1/F, households with a unique composition."""
    return {"mean": float(np.sort(1.0 / big_f).sum() / n_h) if n_h else 0.0,
            "max": float((1.0 / big_f).max()) if n_h else 0.0,
            "unique_households": int((big_f == 1).sum())}


def composition_risk_of(households: StageDraws, persons: StageDraws, code: np.ndarray,
                        n_h: int, config: ReleaseConfig, seed: int,
                        n_sim: int = 20) -> dict[str, Any]:
    """The composition intruder measured by Monte Carlo from the two stages' draws
    (``households.cell`` indexed by household 0..n_h-1, ``persons.cell`` and ``code``, every
    person's household, in one person order: the figures depend on neither order).

    Returns ``n_sim``, ``stream``, ``n_households``, ``before`` (exact: mean of 1/F, max 1/F,
    households with a unique composition), ``classes`` (per F class: households, mean risk
    estimate and its standard error over the replications), ``mean`` / ``mean_se`` over all
    households, ``max_class_estimate`` (the largest class mean) and ``exceeds_xi``.
    """
    code = np.asarray(code, dtype=np.int64)
    keys = config.key_names
    hk = config.household_keys
    pk_idx = [keys.index(k) for k in config.person_keys]
    keys_of = _CompositionKeys(households.key_codes, persons.key_codes[:, pk_idx], code, n_h)
    true_key = keys_of(np.asarray(households.cell, dtype=np.int64),
                       np.asarray(persons.cell, dtype=np.int64))
    big_f, cls_of, n_cls = _f_classes(true_key, n_h)
    true_order = np.argsort(true_key, kind="stable")
    true_sorted = (true_order, true_key[true_order])
    rng = stream(seed, "household-composition")
    seeds = rng.integers(0, 2**62, size=n_sim)
    per_class = np.zeros((n_sim, len(_F_CLASSES)))
    overall = np.zeros(n_sim)
    for i, s in enumerate(seeds):
        h_rel = households.replay(int(s))
        p_rel = persons.replay(int(s))
        key = keys_of(h_rel, p_rel)
        hit = _hits(true_key, key, true_sorted)
        # sums in a canonical order (ascending within each class): the figures do not
        # depend on the order of the households in the file
        overall[i] = float(np.sort(hit).sum()) / n_h if n_h else 0.0
        per_class[i] = _ordered_sums(cls_of, hit, len(_F_CLASSES)) / np.maximum(n_cls, 1)
    classes = _class_rows(big_f, cls_of, n_cls, per_class)
    max_est = max((c["estimate"] for c in classes), default=0.0)
    xi = float(config.risk.xi)
    return {
        "n_sim": int(n_sim), "stream": "household-composition", "n_households": int(n_h),
        "household_keys": list(hk), "person_keys": list(config.person_keys),
        "before": _before(big_f, n_h),
        "mean": float(overall.mean()), "mean_se": _se(overall),
        "classes": classes, "max_class_estimate": float(max_est), "xi": xi,
        "exceeds_xi": bool(max_est > xi),
    }


def with_large_groups(comp: dict[str, Any], households: StageDraws, persons: StageDraws,
                      code: np.ndarray, n_h: int, config: ReleaseConfig,
                      design: HouseholdDesign) -> dict[str, Any]:
    """``comp`` (the Monte Carlo figures over every group, kept as information) under
    ``risk.large_groups`` (the household ``design``'s ``large_groups``): the composition
    intruder certified exactly over the groups of at most that many members
    (:func:`~sdc.method.group_composition.small_group_composition`), which decides
    ``exceeds_xi``; the larger groups are covered by the household-level and
    person-level certificates (docs/METHOD.md 7.15)."""
    from sdc.method.group_composition import small_group_composition

    keys = config.key_names
    small = small_group_composition(households, persons, code, n_h,
                                    [keys.index(k) for k in config.person_keys],
                                    int(design.large_groups), float(config.risk.xi))
    if design.members_sampled:  # the declaration, stated wherever the figure is
        small["members"] = "sampled"
        small["declared_by"] = "input.members"
    return {**comp, "mode": "large_groups", "large_groups": small,
            "measured_exceeds_xi": comp["exceeds_xi"], "exceeds_xi": small["exceeds_xi"]}


def _person_cells(a: np.ndarray, n_cls: int) -> np.ndarray:
    """Flat index a * P + c of every household's person cells (a, c), (H * P,)."""
    return (a[:, None] * n_cls + np.arange(n_cls)).reshape(-1)


def _person_hits(hk_id: np.ndarray, rel_a: np.ndarray, counts: np.ndarray, after: np.ndarray,
                 n_a: int, n_cls: int) -> np.ndarray:
    """One replay's sum_h min(n_hc, n'_hc) 1{a' = a} / N'_(a,c) per person cell (a, c), with
    N'_(a,c) the released persons of the cell (sums in canonical order)."""
    big_n = np.zeros(n_a * n_cls)
    np.add.at(big_n, _person_cells(rel_a, n_cls), after.reshape(-1))
    kept = np.where((rel_a == hk_id)[:, None], np.minimum(counts, after), 0)
    cell_idx = _person_cells(hk_id, n_cls)
    contrib = kept.reshape(-1) / np.maximum(big_n[cell_idx], 1)
    return _ordered_sums(cell_idx, contrib, n_a * n_cls)


def _person_summary(person: np.ndarray, t_cell: np.ndarray, xi: float) -> dict[str, Any]:
    """The person-level intruder over the replays (rows of ``person``): risk per occupied
    cell sum / t_(a,c), its largest mean and SE, and the cells above xi (mean - 2 SE > xi:
    the largest of hundreds of noisy cell means is biased upwards; 1e-9: sums of exact
    fractions)."""
    n_sim = person.shape[0]
    occupied = np.flatnonzero(t_cell > 0)
    cell_risk = person[:, occupied] / t_cell[occupied]
    means = cell_risk.mean(axis=0) if occupied.size else np.zeros(0)
    ses = (cell_risk.std(axis=0, ddof=1) / np.sqrt(n_sim) if n_sim > 1
           else np.zeros_like(means))
    top = int(np.argmax(means)) if means.size else 0
    above = means - 2 * ses > xi + 1e-9
    return {"cells": int(occupied.size),
            "max_cell_estimate": float(means[top]) if means.size else 0.0,
            "max_cell_se": _se(cell_risk[:, top]) if means.size else 0.0,
            "cells_above_xi": int(above.sum()),
            "rule": "a cell is above xi when its mean - 2 SE > xi"}


def protected_composition_risk(identity: np.ndarray, hk_codes: np.ndarray, table: Any,
                               config: ReleaseConfig, seed: int, n_sim: int = 20, *,
                               certificate: tuple[float, dict[str, Any]],
                               weight: np.ndarray | None = None,
                               design: HouseholdDesign,
                               planned: Any = None) -> dict[str, Any]:
    """The composition intruder of a ``risk.composition: protect`` release: certified (the
    composition stage's certificate), and measured by Monte Carlo as a check: ``n_sim``
    replays of :func:`~sdc.method.household_composition.composition_stage` (seeds from
    ``stream(seed, "household-composition")``), the hit 1{released (HK, n) = true} / (released
    households with it) averaged per F class, as :func:`composition_risk_of`. The released
    compositions are the stage's (members are realized from them), so households suffice.

    ``person``: the person-level intruder (knows a person's household keys and person keys,
    picks among the released persons with them), per person cell (a, c) the mean over the
    replays of sum_h min(n_hc, n'_hc) 1{a' = a} / N'_(a,c) / t_(a,c); its largest cell mean is
    compared with xi too (``exceeds_xi``). ``weight`` (``risk.weighted``): every household's
    x_h, so the replays draw with the weighted design the release used. ``planned``: the
    release's (composition plan, draw plan) of these arguments, not planned again. ``design``:
    the release's household design (``hs.design``)."""
    from sdc.method.household_composition import composition_stage, plan_composition_stage

    ident = np.asarray(identity, np.uint64)
    hk = np.asarray(hk_codes, np.int64).reshape(ident.size, -1)
    if planned is None:  # the same for every replay
        planned = plan_composition_stage(hk, table, config, weight)
    n_h = ident.size
    n_cls = table.counts.shape[1]
    hk_u, hk_id = np.unique(hk, axis=0, return_inverse=True)
    hk_id = hk_id.reshape(-1)
    n_a = hk_u.shape[0]
    true_key = hk_id * table.n_compositions + table.household
    big_f, cls_of, n_f = _f_classes(true_key, n_h)
    counts = table.counts[table.household]  # (H, P)
    t_cell = np.zeros(n_a * n_cls)
    np.add.at(t_cell, _person_cells(hk_id, n_cls), counts.reshape(-1))
    seeds = stream(seed, "household-composition").integers(0, 2**62, size=n_sim)
    per_class = np.zeros((n_sim, len(_F_CLASSES)))
    overall = np.zeros(n_sim)
    person = np.zeros((n_sim, n_a * n_cls))
    for i, sd in enumerate(seeds):
        st = composition_stage(ident, hk, table, config, int(sd), weight, planned=planned)
        rel_a = row_lookup(hk_u, st.released_codes[:, :-1])
        rel_key = rel_a * table.n_compositions + st.released_composition
        hit = _hits(true_key.astype(np.uint64), rel_key.astype(np.uint64))
        overall[i] = float(np.sort(hit).sum()) / n_h if n_h else 0.0
        per_class[i] = _ordered_sums(cls_of, hit, len(_F_CLASSES)) / np.maximum(n_f, 1)
        person[i] = _person_hits(hk_id, rel_a, counts, table.counts[st.released_composition],
                                 n_a, n_cls)
    classes = _class_rows(big_f, cls_of, n_f, per_class)
    xi = float(config.risk.xi)
    person_out = _person_summary(person, t_cell, xi)
    max_est = max((c["estimate"] for c in classes), default=0.0)
    cert, cert_at = certificate
    levels = exact_levels(planned[0], table, hk_u, config, design)
    person_out = {**levels["person"], "monte_carlo": person_out,
                  # the Monte Carlo figures, as before (a check of the exact ones)
                  "max_cell_estimate": person_out["max_cell_estimate"],
                  "max_cell_se": person_out["max_cell_se"]}
    above = [name for name, lv in (("person", person_out),
                                   ("household keys", levels["household"]))
             if lv["certificate"] > xi + 1e-9]
    if levels["size"]["enforced"] > xi + 1e-9:
        above.append("household keys x size")
    return {
        "mode": "protect", "certificate": float(cert), "certificate_at": cert_at,
        "n_sim": int(n_sim), "stream": "household-composition", "n_households": int(n_h),
        "household_keys": list(config.household_keys), "person_keys": list(config.person_keys),
        "n_compositions": int(table.n_compositions), "n_classes": int(n_cls),
        "before": _before(big_f, n_h),
        "mean": float(overall.mean()), "mean_se": _se(overall),
        "classes": classes, "max_class_estimate": float(max_est), "xi": xi,
        "person": person_out, "household_level": levels["household"],
        "size_level": levels["size"],
        "levels_above_xi": above,
        "exceeds_xi": bool(cert > xi + 1e-9 or above),
        # the structural constraint of the stage (sdc.method.household_missing)
        **({"missingness_groups": list(table.relations) or ["(groups)"]}
           if getattr(table, "group", None) is not None else {}),
    }


def exact_levels(cp: Any, table: Any, hk_table: np.ndarray, config: ReleaseConfig,
                 design: HouseholdDesign) -> dict[str, dict[str, Any]]:
    """The exact person-level and household-level (HK) certificates of a protect release's
    composition plan ``cp`` (:func:`sdc.method.household_person_risk.composition_level_risks`),
    with the cells where they are attained decoded into key values. ``design``: the
    release's household design (``hs.design``; ``sdc design``: its candidate's)."""
    from sdc.method.household_person_risk import composition_level_risks, exposed_sizes

    out = {}
    risks = composition_level_risks(cp, table, float(config.risk.xi))
    for name in ("person", "household", "size"):
        lv = risks[name]
        at = {k: _decoded(v, hk_table, config, name) for k, v in lv.at.items()}
        out[name] = {
            "certificate": float(lv.max_risk), "exact": True,
            "certificate_at": at.get("own_cell", {}),
            "any_cell": float(lv.any_cell), "any_cell_at": at.get("any_cell", {}),
            "other_class_bound": float(lv.other), "unconditional": float(lv.unconditional),
            "rule": ("exact: the intruder knows the target's household keys"
                     + (" and person keys" if name == "person" else "")
                     + ", the mechanism, and picks one released unit of the target's own "
                     "cell after seeing its count (NZY's R_j(a)); any_cell: he may pick in "
                     "any cell (docs/METHOD.md 7.7)"),
        }
    out["size"] = size_level_of(out["size"], risks["size_protectable"], hk_table, config,
                                exposed_sizes(table, float(config.risk.xi)),
                                design.exposed_sizes)
    return out


def size_level_of(full: dict[str, Any], protectable: Any, hk_table: np.ndarray,
                  config: ReleaseConfig, exposed: dict[int, int],
                  policy: str) -> dict[str, Any]:
    """risk.json's ``size_level`` (the household keys x size intruder, exact): ``certificate``
    over every household, ``protectable_certificate`` over the sizes held by at least 1/xi
    households, ``exposed_sizes`` the others ({size, households}: shown by any release with
    household pseudonyms, risk >= 1/households), ``enforced`` the figure held to xi: the
    whole (``policy``, the design's ``exposed_sizes``: ``refuse`` stops a release with exposed sizes, ``drop``
    leaves their households out before this is computed, so none is left)."""
    p_at = {k: _decoded(v, hk_table, config, "size") for k, v in protectable.at.items()}
    return {
        **full,
        "rule": ("exact: the intruder knows the target household's household keys and its "
                 "number of members (every household release shows it: the members sharing a "
                 "pseudonym), the mechanism, and picks one released household with both "
                 "after seeing their count (docs/METHOD.md 7.7)"),
        "protectable_certificate": float(protectable.max_risk),
        "protectable_certificate_at": p_at.get("own_cell", {}),
        "exposed_sizes": [{"size": s, "households": n} for s, n in sorted(exposed.items())],
        "policy": policy,
        "enforced": float(full["certificate"]),
    }


def _decoded(at: dict[str, Any], hk_table: np.ndarray, config: ReleaseConfig,
             level: str) -> dict[str, Any]:
    """``at`` (:class:`~sdc.method.household_person_risk.LevelRisk`) with its household-key
    and class codes as the keys' values (released domains)."""
    kvs = config.key_variables
    hk = config.household_keys
    pk = config.person_keys
    sizes = [int(kvs[k].size) for k in pk]

    def hk_values(i: int) -> dict[str, Any]:
        return {k: _plain(kvs[k].domain[int(hk_table[i, j])]) for j, k in enumerate(hk)}

    def cls_values(c: int) -> dict[str, Any]:
        if level != "person" or c < 0:
            return {}
        codes = np.unravel_index(int(c), sizes) if sizes else ()
        return {k: _plain(kvs[k].domain[int(x)]) for k, x in zip(pk, codes, strict=True)}

    size = (int(at["target_class"]) if level == "size"  # one class per household size
            else int(sum(at["target_composition"])))
    return {"pick": at["pick"], "target": {**hk_values(at["target_household_keys"]),
                                          **cls_values(at["target_class"])},
            "target_household_size": size,
            "picked": {**hk_values(at["picked_household_keys"]),
                       **cls_values(at["picked_class"])},
            "released_count": at["released_count"]}


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def row_lookup(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index of every row of ``rows`` in the sorted distinct rows ``table`` (-1: absent)."""
    from sdc.method.households import row_index

    sizes = [int(x) + 1 for x in np.vstack([table, rows]).max(axis=0)] if table.size else []
    return row_index(table, rows, sizes)


def _tables(values: dict[str, pd.Series], size: np.ndarray) -> dict[str, Any]:
    """Households by household-level key (one table per key: value -> households) and the
    household size distribution, from one value per household and key and the households'
    sizes (persons)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        vc = v.value_counts(dropna=False).sort_index()
        out[k] = {str(x): int(c) for x, c in vc.items()}
    sizes = np.bincount(np.asarray(size, dtype=np.int64))
    out["size"] = {str(s): int(c) for s, c in enumerate(sizes) if c}
    return out


def household_utility_of(before_values: dict[str, pd.Series], after_values: dict[str, pd.Series],
                         size: np.ndarray, changed: np.ndarray) -> dict[str, Any]:
    """utility.json's ``households`` from aggregates (any executor): per household, its value of
    every household-level key before and after (Series in the input's dtype), its size and
    whether its household keys changed; households in any order."""
    before = _tables(before_values, size)
    after = _tables(after_values, size)
    keys = []
    for k in before_values:
        vals = sorted(set(before[k]) | set(after[k]))
        b = np.array([before[k].get(v, 0) for v in vals], dtype=float)
        a = np.array([after[k].get(v, 0) for v in vals], dtype=float)
        tvd = 0.5 * float(np.abs(b / max(b.sum(), 1) - a / max(a.sum(), 1)).sum())
        keys.append({"name": k, "tvd": tvd, "values": [
            {"value": v, "original": int(x), "released": int(y)}
            for v, x, y in zip(vals, b, a, strict=True)]})
    n_h = int(np.asarray(size).size)
    n_changed = int(np.asarray(changed).sum())
    return {"n_households": n_h, "households_changed": n_changed,
            "share_changed": n_changed / n_h if n_h else 0.0,
            "keys": keys,
            "size_distribution": [{"size": int(s), "households": int(c)}
                                  for s, c in before["size"].items()],
            "size_distribution_unchanged": before["size"] == after["size"]}


def household_section_of(config: ReleaseConfig, record_cell: np.ndarray,
                         released_cell: np.ndarray, code: np.ndarray, n_households: int,
                         weights: np.ndarray | None, composition: dict[str, Any], *,
                         households_changed: int, household_certificate: float,
                         household_certificate_at: Any, household_prbs: int,
                         person_certificate: float, small_classes: int,
                         small_class_persons: int) -> dict[str, Any]:
    """risk.json's ``households`` from its parts (any executor): every person's true and released
    cell (one cell table over all keys), household (0..n_households-1) and weight, in one
    person order (the figures do not depend on it), the composition intruder's figures
    (:func:`composition_risk_of`) and the stages' figures."""
    before = hierarchical_risk(record_cell, code, n_households, weights)
    after = hierarchical_risk(released_cell, code, n_households, weights)
    comp = composition
    xi = float(config.risk.xi)
    fixes = []
    message = (f"the composition intruder's risk ({comp['max_class_estimate']:.4f} in the "
               f"riskiest class of households, {riskiest_class(comp)}) exceeds xi = {xi}"
               if comp["exceeds_xi"] else f"the composition intruder's risk is within xi = {xi}")
    if comp.get("mode") == "protect":
        message, fixes = protect_verdict(comp, xi)
    elif comp.get("mode") == "large_groups":
        message, fixes = large_groups_verdict(comp, xi, household_certificate,
                                              person_certificate)
    elif comp["exceeds_xi"]:
        fixes = [
            "risk.composition: protect with person keys recoded for households (e.g. age: "
            "{recode: {bands: [0, 15, 65]}}): the household stage then post-randomizes rare "
            "compositions and certifies this intruder (docs/HOUSEHOLDS.md); `sdc design` "
            "proposes such a config",
            "fewer or coarser household-level keys",
            "withhold the household id (release a person file: input.drop it and remove "
            "input.household_id)",
        ]
    return {
        "household_id": config.input.household_id,
        "household_keys": list(config.household_keys),
        "person_keys": list(config.person_keys),
        "n_households": int(n_households),
        "households_changed": int(households_changed),
        "household_certificate": float(household_certificate),
        "household_certificate_at": household_certificate_at,
        "household_prbs": int(household_prbs),
        "person_certificate": float(person_certificate),
        "small_classes": int(small_classes),
        "small_class_persons": int(small_class_persons),
        "hierarchical": {
            "before": {k: v for k, v in before.items() if k != "household_risk"},
            "after": {k: v for k, v in after.items() if k != "household_risk"},
        },
        "composition": comp,
        "policy": config.risk.households,
        "pass": not comp["exceeds_xi"],
        "message": message,
        "fixes": fixes,
    }
