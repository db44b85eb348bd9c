"""The audit's checks of a household release (docs/HOUSEHOLDS.md): households consistent and
intact, the household (or composition) stage and the person stage recounted and certified.

Out of core on every executor: the source is counted and both stages planned by the
pipeline's count pass (:class:`~sdc.pipeline.household_result.HouseholdPlan`: the person cell
table, the household table as an aggregate, both stages' plans with their dependence figures),
the public file by the same count pass in batches
(:func:`~sdc.pipeline.household_count.count_households`); memory is bounded by a batch, the
cell tables and the household tables (O(households))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.audit.block_checks import (
    count_checks,
    dependence_checks,
    merge_groups,
    prb_checks,
    ps_counts,
    weighted_checks,
)
from sdc.audit.report import AuditReport
from sdc.config.model import ReleaseConfig
from sdc.method.cell_passes import cell_table
from sdc.method.cells import CellTable, combine_codes, radix_sizes
from sdc.method.designs import design_of
from sdc.method.household_batches import HouseholdAggregate
from sdc.method.households import (
    household_config,
    larger_certificate,
    person_config,
    row_index,
)
from sdc.method.partition import Partitioned, partition_cells

__all__ = ["PublicHouseholds", "composition_checks", "household_cells", "household_checks",
           "person_group_counts"]


@dataclass
class PublicHouseholds:
    """The public file of a household release as the audit counted it: its person cells
    (``cells``, under the person stage's keys) and its household table (``agg``)."""

    cells: CellTable
    agg: HouseholdAggregate


def household_cells(key_codes: np.ndarray, config: ReleaseConfig) -> tuple[Partitioned,
                                                                           np.ndarray]:
    """The cells of a household table counted in households (``key_codes``: (H, p) codes of
    ``config``'s keys, one row per household) partitioned under ``config``, and every
    household's cell."""
    code = combine_codes(np.asarray(key_codes, np.int64).T, radix_sizes(config),
                         key_codes.shape[0])
    u, cell, t = np.unique(code, return_inverse=True, return_counts=True)
    return (partition_cells(cell_table(u, t.astype(np.int64), config), config),
            cell.reshape(-1).astype(np.int64))


def household_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                     source: Any, public: PublicHouseholds,
                     prb_of_label: dict[str, int], xi: float) -> tuple[float, str]:
    """The checks of a household release (docs/HOUSEHOLDS.md) from the source's count
    (``source``: :class:`~sdc.pipeline.household_result.HouseholdPlan`) and the public
    file's (``public``): households intact; the household stage's invariants on the household
    tables (counted in households) and its PRBs; the person stage's PRBs (the source counted
    under the person stage's partition) and its counts per person partition group. Returns
    the certificate: the larger of the two stages'."""
    agg_o, agg_p = source.agg, public.agg
    size_o, size_p = np.sort(agg_o.size), np.sort(agg_p.size)
    same = size_o.size == size_p.size and bool((size_o == size_p).all())
    rep.add("households: intact", same,
            f"{agg_o.n_households} households, the same household sizes" if same else
            f"{agg_o.n_households} households in the source, {agg_p.n_households} in the "
            "public file, or their sizes differ")
    design = source.hs.design  # the household design the plan carries
    exposed_checks(rep, design, audit, agg_o, agg_p, xi)
    if design.protect:
        return composition_checks(rep, cfg, audit, source, agg_p, xi)
    # household stage: the household tables, counted in households
    hh = audit.get("households") or {}
    hcfg = household_config(cfg)
    hs = source.hs
    # risk.weighted: balanced on x_h = the members' summed person weights
    h_cert, h_where = _stage_checks(rep, cfg, hcfg, hs.plan, agg_p.key_codes, hh, xi,
                                    "household stage: ")

    # person stage: PRBs inside the household keys' values; counts per person partition group
    pcfg = person_config(cfg)
    ps = source.ps
    po_all = partition_cells(source.cells, pcfg)
    rec_n = int(hh.get("small_classes", 0))
    rep.add("person stage: small household-key classes", ps.small_classes == rec_n,
            f"{ps.small_classes} household-key classes ({ps.small_class_persons} persons) have "
            "fewer than kmin sensitive person cells and are left to the household stage "
            f"(audit.json: {rec_n})")
    po = ps.plan.partitioned  # the cells outside the left-out classes
    p_cert, p_where = prb_checks(rep, po, audit.get("blocks") or [], prb_of_label, xi,
                                 what="person stage: ")
    if (ps.plan.design or design_of(pcfg)).needs_weights:  # the person weights in the classes
        p_cert, p_where = weighted_checks(rep, po, None, pcfg, xi, what="person stage: ",
                                          plan=ps.plan)
    # the dependence check of each stage, as the count pass measured it: household columns
    # on the household table against the household keys, person-level columns against the
    # person PRBs
    rep.dependence = list(hs.plan.dependence)
    dependence_checks(rep, {"dependence": {"columns": hh.get("dependence")}},
                      what="household stage: ")
    rep.dependence = list(ps.plan.dependence)
    dependence_checks(rep, audit, what="person stage: ")
    # every person counts below (the left-out classes' persons do not move)
    person_group_counts(rep, po_all, partition_cells(public.cells, pcfg), pcfg, cfg,
                        prb_of_label)
    return larger_certificate((p_cert, f"person stage: {p_where}"),
                              (h_cert, f"household stage: {h_where}"))


def _stage_checks(rep: AuditReport, cfg: ReleaseConfig, stage_cfg: ReleaseConfig, plan: Any,
                  codes: np.ndarray, hh: dict[str, Any], xi: float,
                  what: str) -> tuple[float, Any]:
    """A stage counted in households (the household or the composition stage): the public
    households' cells (``codes``) against the source's plan (count checks per partition
    group, PRB checks against audit.json's ``hh``; ``risk.weighted``: the weighted ones);
    returns the stage's certificate and where it is attained."""
    ho = plan.partitioned
    hp, _ = household_cells(codes, stage_cfg)
    h_prb = {str(k): int(v) for k, v in (hh.get("partition_sets") or {}).items()}
    group, note = merge_groups(h_prb)
    count_checks(rep, ho, hp, group, xi, stage_cfg, note, what=what, unit=" (in households)")
    near = None
    if (plan.design or design_of(stage_cfg)).near:  # the composition stage's W, re-derived
        from sdc.method.designs import rungs_of
        from sdc.method.destinations import NearCertifier

        # each PRB's weights as the source's plan chose them (the dependence check re-run
        # on the source's aggregate: sdc.method.household_rungs)
        near = (NearCertifier(ho, stage_cfg, rungs_of(plan.design)),
                (hh.get("near") or {}).get("prbs") or [])
    h_cert, h_where = prb_checks(rep, ho, hh.get("blocks") or [], h_prb, xi, what=what,
                                 near=near)
    if (plan.design or design_of(stage_cfg)).needs_weights:  # the near W of the weight groups
        # (the digests audit.json records)
        h_cert, h_where = weighted_checks(rep, ho, None, stage_cfg, xi,
                                          (hh.get("near") or {}).get("weighted_w_sha256"),
                                          what=what, plan=plan)
    return h_cert, h_where


def composition_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                       source: Any, agg_p: HouseholdAggregate, xi: float) -> tuple[float, str]:
    """The household checks of a ``risk.composition: protect`` release
    (docs/HOUSEHOLDS.md, "Protecting household composition"), from the source's count and
    the public file's, without the seed: the compositions (members per person class) of
    both; every public composition one of the source's; the composition stage's plan
    (:func:`~sdc.method.household_composition.composition_plan`, made by the count pass) and
    its invariants on the household tables keyed on HK x composition (singular households
    aside: their sizes are kept, so the same households are set aside on both sides); its
    PRBs recounted, their exact max risk recomputed; the certificate = the plan's, or
    1 / #HK combinations when there are singular households. Returns the certificate."""
    hh = audit.get("households") or {}
    hs = source.hs
    tab, cs = hs.composition_table, hs.composition
    n_cls = tab.counts.shape[1]
    counts_p = (agg_p.classes if agg_p.classes is not None
                else np.zeros((agg_p.n_households, n_cls), np.int64))
    comp_p = row_index(tab.counts, counts_p, [int(x) + 1 for x in
                                              np.vstack([tab.counts, counts_p]).max(axis=0)])
    rep.add("composition stage: released compositions exist in the source",
            bool((comp_p >= 0).all()),
            f"{tab.n_compositions} compositions over {n_cls} person classes; "
            f"{int((comp_p < 0).sum())} public household(s) with a composition the source "
            "does not have")
    if (comp_p < 0).any():
        return 1.0, "composition stage: a released composition is not in the source"
    if tab.group is not None:  # members never left their missingness group
        from sdc.method.household_missing import MissingGroups, foreign_patterns

        src, pub = source.agg.missing, agg_p.missing
        bad = (foreign_patterns(src, pub) if isinstance(src, MissingGroups)
               and isinstance(pub, MissingGroups) else -1)
        rep.add("composition stage: missingness groups", bad == 0,
                f"{'; '.join(tab.relations)}: {bad} public (class, missing columns) "
                "pattern(s) that no source person of the class's group has")
    ccfg = cs.config
    cset = tab.partition_set()  # sizes (x members per missingness group)
    keep_o = ~np.isin(cset[tab.household], cs.singular_sets)
    keep_p = ~np.isin(cset[comp_p], cs.singular_sets)
    rep.add("composition stage: singular households", int((~keep_o).sum()) == int(
        (~keep_p).sum()), f"{int((~keep_o).sum())} household(s) of size(s) "
        f"{cs.singular_sizes} released by the uniform household-key draw (risk 1/"
        f"{cs.n_hk})")
    codes_p = np.column_stack([agg_p.key_codes, comp_p]).astype(np.int64)[keep_p]
    if cs.plan is None:  # every household singular: nothing to count per cell
        h_cert, h_where = 0.0, "no cell"
    else:
        # risk.weighted: balanced on x_h, re-derived from the source
        h_cert, h_where = _stage_checks(rep, cfg, ccfg, cs.plan, codes_p, hh, xi,
                                        "composition stage: ")
    rep.add("person stage: none", not (audit.get("blocks") or []),
            "risk.composition: protect: no person PRB; person keys move with their "
            "household's composition only")
    _exact_level_checks(rep, cfg, hs, tab, hh, xi)
    cert = (h_cert, f"composition stage: {h_where}")
    if cs.singular.size:
        cert = larger_certificate(cert, (1.0 / cs.n_hk, "composition stage: singular "
                                         f"households (1/{cs.n_hk})"))
    return cert


def exposed_checks(rep: AuditReport, design: Any, audit: dict[str, Any], agg_o: Any,
                   agg_p: Any, xi: float) -> None:
    """``risk.exposed_sizes`` (:mod:`sdc.method.household_exposed`) of the household
    ``design``: no public household has a size held by fewer than 1/xi public households, and
    the households left out (``drop``: re-derived from the source) are the ones audit.json
    records."""
    from sdc.method.household_exposed import exposed_of

    if not design.holds_exposed_sizes:
        return
    pub = exposed_of(agg_p.size, xi, design.size_cap)
    rep.add("households: no exposed size in the public file", not pub,
            "every public household size is held by at least 1/xi public households" if not pub
            else "public household size(s) held by fewer than 1/xi households: " + ", ".join(
                f"{s} ({n})" for s, n in sorted(pub.items())))
    left = agg_o.left_out
    want = (audit.get("households") or {}).get("left_out")
    got = None if left is None else left.record(
        agg_o.n_households + left.households, int(np.sum(agg_o.size)) + left.persons)
    keys = ("sizes", "households", "persons", "of_households", "of_persons")
    same = (got is None and want is None) or (got is not None and want is not None and all(
        got[k] == want.get(k) for k in keys))
    rep.add("households left out: re-derived (risk.exposed_sizes)", same,
            ("none (no exposed size)" if got is None else
             f"{got['households']} households, {got['persons']} persons of size "
             + ", ".join(str(e["size"]) for e in got["sizes"]))
            + ("" if same else f" (audit.json: {want})"))


def _exact_level_checks(rep: AuditReport, cfg: ReleaseConfig, hs: Any, tab: Any,
                        hh: dict[str, Any], xi: float) -> None:
    """The person-level and household-level (HK) certificates of a protect release
    recomputed exactly from the composition stage's plan re-derived from the source
    (:func:`sdc.method.household_person_risk.composition_level_risks`): each <= xi and equal
    to the figure audit.json records (issue 44)."""
    from sdc.method.household_person_risk import composition_level_risks, exposed_sizes

    levels = composition_level_risks(hs.composition_planned[0], tab, xi)
    rec = hh.get("composition") or {}
    for name, key, lv in (("person level", "person", levels["person"]),
                          ("household level", "household_level", levels["household"])):
        want = (rec.get(key) or {}).get("certificate")
        same = want is not None and abs(float(want) - lv.max_risk) <= 1e-9
        rep.add(f"{name}: exact certificate <= xi", same and lv.max_risk <= xi + 1e-9,
                f"recomputed {lv.max_risk:.6f} (audit.json: "
                f"{'absent' if want is None else f'{float(want):.6f}'}), xi {xi}")
    # the household keys x size intruder (issue 44): the whole figure and the protectable
    # sizes' as recorded; the one the policy holds to xi <= xi; the exposed sizes recounted
    got = rec.get("size_level") or {}
    full, prot = levels["size"].max_risk, levels["size_protectable"].max_risk
    held = full  # refuse stops a release with exposed sizes; drop leaves none
    exposed = [{"size": s, "households": n} for s, n in sorted(exposed_sizes(tab, xi).items())]
    same = (bool(got) and abs(float(got.get("certificate", -1)) - full) <= 1e-9
            and abs(float(got.get("protectable_certificate", -1)) - prot) <= 1e-9
            and got.get("exposed_sizes") == exposed)
    rep.add("household keys x size: exact certificate <= xi", same and held <= xi + 1e-9,
            f"recomputed {full:.6f}, protectable sizes {prot:.6f} (audit.json: "
            f"{got.get('certificate', 'absent')}, {got.get('protectable_certificate', 'absent')})"
            f", exposed sizes {exposed or 'none'}, risk.exposed_sizes "
            f"{hs.design.exposed_sizes}, xi {xi}")


def person_group_counts(rep: AuditReport, po: Partitioned, rel: Partitioned,
                        pcfg: ReleaseConfig, cfg: ReleaseConfig,
                        prb_of_label: dict[str, int]) -> None:
    """Person counts per person partition group (person parts of partition sets sharing a
    PRB, joined) equal in the source (``po``) and the public file (``rel``), both counted
    into cells under the person stage's partition (loops over partition sets, not persons)."""
    pvars = [v for v in pcfg.partition_variables if v not in cfg.household_keys]
    if not pvars:
        return
    pcols = [pcfg.partition_variables.index(v) for v in pvars]
    # person partition groups: person parts of partition sets sharing a PRB, joined
    parts = [tuple(r) for r in po.ps_codes[:, pcols].tolist()]
    parent = {p: p for p in parts}

    def find(p: tuple) -> tuple:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    by_prb: dict[int, tuple] = {}
    for s_idx, label in enumerate(po.partition_keys):
        b = prb_of_label.get(label, -1)
        if b < 0:
            continue
        if b in by_prb:
            parent[find(parts[s_idx])] = find(by_prb[b])
        else:
            by_prb[b] = parts[s_idx]
    comp = {p: find(p) for p in parts}
    rparts = [tuple(r) for r in rel.ps_codes[:, pcols].tolist()]
    known = [comp.get(p) for p in rparts]
    o_cnt: dict[tuple, int] = {}
    for s_idx, n in enumerate(ps_counts(po).to_numpy()):
        o_cnt[comp[parts[s_idx]]] = o_cnt.get(comp[parts[s_idx]], 0) + int(n)
    r_cnt: dict[Any, int] = {}
    for s_idx, n in enumerate(ps_counts(rel).to_numpy()):
        r_cnt[known[s_idx]] = r_cnt.get(known[s_idx], 0) + int(n)
    bad = [g for g in set(o_cnt) | set(r_cnt) if o_cnt.get(g, 0) != r_cnt.get(g, 0)]
    rep.add("person stage: counts per person partition group", not bad,
            f"{len(o_cnt)} groups of person partition sets, all person counts equal" if not bad
            else f"{len(bad)} group(s) of person partition sets changed their person count")
