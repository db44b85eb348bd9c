"""The audit's checks of a household release (docs/HOUSEHOLDS.md): households consistent and
intact, the household (or composition) stage and the person stage recounted and certified."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.audit.block_checks import (
    count_checks,
    dependence_checks,
    merge_groups,
    prb_checks,
    weighted_checks,
)
from sdc.audit.report import AuditReport
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.io.batches import public_schema_for
from sdc.method.cells import encode_key
from sdc.method.dependence import (
    frame_dependence,
    member_columns,
    member_rows,
    person_level,
    schema_kinds,
)
from sdc.method.household_batches import household_identity
from sdc.method.household_composition import (
    COMPOSITION,
    composition_plan,
    composition_table,
    person_classes,
)
from sdc.method.household_weights import (
    cell_weights_of,
    household_weight_totals,
    household_weights_of,
)
from sdc.method.households import (
    check_households,
    household_codes,
    household_config,
    household_table,
    person_config,
    row_index,
    small_classes,
)
from sdc.method.partition import Partitioned, partition_frame
from sdc.method.plan import plan_release

__all__ = ["composition_checks", "household_checks", "person_group_counts"]


def household_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                     original: pd.DataFrame, public: pd.DataFrame,
                     prb_of_label: dict[str, int], xi: float) -> tuple[float, str]:
    """The checks of a household release (docs/HOUSEHOLDS.md): households consistent and
    intact in the public file; the household stage's invariants on the household tables
    (counted in households) and its PRBs; the person stage's PRBs (recounted from the source
    under the person stage's partition) and its counts per person partition group. Returns
    the certificate: the larger of the two stages'."""
    try:
        check_households(public, cfg)
        rep.add("households: consistent", True, "every public household has one value of each "
                "household-level key and household column")
    except InputError as e:
        rep.add("households: consistent", False, str(e))
    code_o, first_o = household_codes(original, cfg)
    code_p, first_p = household_codes(public, cfg)
    size_o, size_p = np.sort(np.bincount(code_o)), np.sort(np.bincount(code_p))
    same = size_o.size == size_p.size and bool((size_o == size_p).all())
    rep.add("households: intact", same,
            f"{first_o.size} households, the same household sizes" if same else
            f"{first_o.size} households in the source, {first_p.size} in the public file, or "
            "their sizes differ")
    if cfg.risk.composition == "protect":
        return composition_checks(rep, cfg, audit, original, public, code_o, first_o,
                                  code_p, first_p, xi)
    # household stage: the household tables, counted in households
    hh = audit.get("households") or {}
    hcfg = household_config(cfg)
    ho = partition_frame(household_table(original, cfg, code_o, first_o), hcfg)
    hp = partition_frame(household_table(public, cfg, code_p, first_p), hcfg)
    h_prb = {str(k): int(v) for k, v in (hh.get("partition_sets") or {}).items()}
    group, note = merge_groups(h_prb)
    count_checks(rep, ho, hp, group, xi, hcfg, note, what="household stage: ",
                 unit=" (in households)")
    h_cert, h_where = prb_checks(rep, ho, hh.get("blocks") or [], h_prb, xi,
                                 what="household stage: ")
    x_h = None
    if cfg.risk.weighted:  # balanced on x_h = the members' summed person weights
        x_h = household_weights_of(original[cfg.input.weight], code_o, first_o.size)
        h_cert, h_where = weighted_checks(
            rep, ho, household_weight_totals(x_h, ho.cells.record_cell, ho.cells.n_cells),
            hcfg, xi, what="household stage: ")
    hh_cols = [c for c in cfg.input.household_columns if c in original.columns]

    # person stage: PRBs inside the household keys' values; counts per person partition group
    pcfg = person_config(cfg)
    po = partition_frame(original, pcfg)
    n_small, rec_small = small_classes(po, cfg)
    rec_n = int(hh.get("small_classes", 0))
    rep.add("person stage: small household-key classes", n_small == rec_n,
            f"{n_small} household-key classes ({int(rec_small.sum())} persons) have fewer than "
            f"kmin sensitive person cells and are left to the household stage (audit.json: "
            f"{rec_n})")
    po_all = po
    if n_small and cfg.risk.small_blocks != "fail":
        po = partition_frame(original.iloc[np.flatnonzero(~rec_small)], pcfg)
    p_cert, p_where = prb_checks(rep, po, audit.get("blocks") or [], prb_of_label, xi,
                                 what="person stage: ")
    if cfg.risk.weighted:  # the person weights inside the household-key classes
        w = original[cfg.input.weight].to_numpy(np.float64)
        w = w if po is po_all else w[np.flatnonzero(~rec_small)]
        p_cert, p_where = weighted_checks(
            rep, po, cell_weights_of(w, po.cells.record_cell, po.cells.n_cells), pcfg, xi,
            what="person stage: ")
    # the dependence check of each stage, recomputed: household columns on the household
    # table against the household keys, person-level columns against the person PRBs
    try:
        htable = household_dependence_table(original, cfg, code_o, first_o)
        kinds = {c: k for c, k in schema_kinds(public_schema_for(cfg, original)).items()
                 if c != cfg.input.weight}
        rep.dependence = person_level(frame_dependence(htable, plan_release(ho, hcfg), hcfg,
                                                       kinds), member_columns(
            list(original.columns), cfg))
        dependence_checks(rep, {"dependence": {"columns": hh.get("dependence")}},
                          what="household stage: ")
        persons = original if po is po_all else original.iloc[np.flatnonzero(~rec_small)]
        persons = persons.drop(columns=[c for c in (cfg.input.household_id, *hh_cols,
                                                    *(cfg.perturb or {}))
                                        if c in persons.columns])
        rep.dependence = frame_dependence(persons, plan_release(po, pcfg), pcfg,
                                          schema_kinds(public_schema_for(cfg, original)))
        dependence_checks(rep, audit, what="person stage: ")
    except (InputError, ConfigError, SmallBlockError) as e:
        rep.add("dependence check: recomputed", False, f"cannot recompute: {e}")
    # every person counts below (the left-out classes' persons do not move)
    person_group_counts(rep, po_all, public, pcfg, cfg, prb_of_label)
    if p_cert >= h_cert:
        return p_cert, f"person stage: {p_where}"
    return h_cert, f"household stage: {h_where}"


def household_dependence_table(original: pd.DataFrame, cfg: ReleaseConfig, code: np.ndarray,
                               first: np.ndarray) -> pd.DataFrame:
    """The household table the household stage's dependence check measures: the household
    columns and the person columns of one member per household
    (:func:`~sdc.method.dependence.member_rows`), as the release's count pass keeps them."""
    htable = household_table(original, cfg, code, first)
    members = member_rows(original, household_identity(original, cfg),
                          household_identity(htable, cfg), cfg)
    return htable if members is None else pd.concat([htable, members], axis=1)


def composition_checks(rep: AuditReport, cfg: ReleaseConfig, audit: dict[str, Any],
                       original: pd.DataFrame, public: pd.DataFrame, code_o: np.ndarray,
                       first_o: np.ndarray, code_p: np.ndarray, first_p: np.ndarray,
                       xi: float) -> tuple[float, str]:
    """The household checks of a ``risk.composition: protect`` release
    (docs/HOUSEHOLDS.md, "Protecting household composition"), recomputed from the source and
    the public file without the seed: the compositions (members per person class) of both;
    every public composition one of the source's; the composition stage's plan
    (:func:`~sdc.method.household_composition.composition_plan`) and its invariants on the
    household tables keyed on HK x composition (singular households aside: their sizes are
    kept, so the same households are set aside on both sides); its PRBs recounted, their
    exact max risk recomputed; the certificate = the plan's, or 1 / #HK combinations when
    there are singular households. Returns the certificate."""
    hh = audit.get("households") or {}
    pc_o, n_cls = person_classes(original, cfg)
    pc_p, _ = person_classes(public, cfg)
    tab = composition_table(code_o, pc_o, first_o.size, n_cls)
    counts_p = np.bincount(code_p * n_cls + pc_p,
                           minlength=first_p.size * n_cls).reshape(first_p.size, n_cls)
    comp_p = row_index(tab.counts, counts_p, [int(x) + 1 for x in
                                              np.vstack([tab.counts, counts_p]).max(axis=0)])
    rep.add("composition stage: released compositions exist in the source",
            bool((comp_p >= 0).all()),
            f"{tab.n_compositions} compositions over {n_cls} person classes; "
            f"{int((comp_p < 0).sum())} public household(s) with a composition the source "
            "does not have")
    if (comp_p < 0).any():
        return 1.0, "composition stage: a released composition is not in the source"
    hk_o = household_table(original, cfg, code_o, first_o)
    hk_codes = np.column_stack([encode_key(hk_o[k], k, cfg.key_variables[k])
                                for k in cfg.household_keys])
    x_h = (household_weights_of(original[cfg.input.weight], code_o, first_o.size)
           if cfg.risk.weighted else None)
    try:
        cp = composition_plan(hk_codes, tab, cfg, x_h)
    except SmallBlockError as e:
        rep.add("composition stage: plan", False, str(e))
        return 1.0, "composition stage: no plan"
    ccfg = cp.config
    sizes_o = tab.size[tab.household]
    sizes_p = tab.size[comp_p]
    keep_o = ~np.isin(sizes_o, cp.singular_sizes)
    keep_p = ~np.isin(sizes_p, cp.singular_sizes)
    rep.add("composition stage: singular households", int((~keep_o).sum()) == int(
        (~keep_p).sum()), f"{int((~keep_o).sum())} household(s) of size(s) "
        f"{cp.singular_sizes} released by the uniform household-key draw (risk 1/"
        f"{cp.hk_table.shape[0]})")
    ht_o = hk_o.assign(**{COMPOSITION: tab.household}).iloc[np.flatnonzero(keep_o)]
    ht_p = household_table(public, cfg, code_p, first_p).assign(
        **{COMPOSITION: comp_p}).iloc[np.flatnonzero(keep_p)]
    ho = partition_frame(ht_o.reset_index(drop=True), ccfg)
    hp = partition_frame(ht_p.reset_index(drop=True), ccfg)
    h_prb = {str(k): int(v) for k, v in (hh.get("partition_sets") or {}).items()}
    group, note = merge_groups(h_prb)
    count_checks(rep, ho, hp, group, xi, ccfg, note, what="composition stage: ",
                 unit=" (in households)")
    h_cert, h_where = prb_checks(rep, ho, hh.get("blocks") or [], h_prb, xi,
                                 what="composition stage: ")
    if cfg.risk.weighted:  # balanced on x_h, re-derived from the source
        h_cert, h_where = weighted_checks(
            rep, ho, household_weight_totals(x_h[keep_o], ho.cells.record_cell,
                                             ho.cells.n_cells), ccfg, xi,
            what="composition stage: ")
    rep.add("person stage: none", not (audit.get("blocks") or []),
            "risk.composition: protect: no person PRB; person keys move with their "
            "household's composition only")
    if cp.singular.size and 1.0 / cp.hk_table.shape[0] > h_cert:
        return (1.0 / cp.hk_table.shape[0],
                f"composition stage: singular households (1/{cp.hk_table.shape[0]})")
    return h_cert, f"composition stage: {h_where}"


def person_group_counts(rep: AuditReport, po: Partitioned, public: pd.DataFrame,
                        pcfg: ReleaseConfig, cfg: ReleaseConfig,
                        prb_of_label: dict[str, int]) -> None:
    """Person counts per person partition group (person parts of partition sets sharing a
    PRB, joined) equal in the source and the public file."""
    pvars = [v for v in pcfg.partition_variables if v not in cfg.household_keys]
    if pvars:
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
        rel = partition_frame(public, pcfg)
        rparts = [tuple(r) for r in rel.ps_codes[:, pcols].tolist()]
        known = [comp.get(p) for p in rparts]
        o_cnt: dict[tuple, int] = {}
        for s_idx, n in enumerate(np.bincount(po.record_partition_set)):
            o_cnt[comp[parts[s_idx]]] = o_cnt.get(comp[parts[s_idx]], 0) + int(n)
        r_cnt: dict[Any, int] = {}
        for s_idx, n in enumerate(np.bincount(rel.record_partition_set,
                                              minlength=len(rparts))):
            r_cnt[known[s_idx]] = r_cnt.get(known[s_idx], 0) + int(n)
        bad = [g for g in set(o_cnt) | set(r_cnt) if o_cnt.get(g, 0) != r_cnt.get(g, 0)]
        rep.add("person stage: counts per person partition group", not bad,
                f"{len(o_cnt)} groups of person partition sets, all person counts equal" if not bad
                else f"{len(bad)} group(s) of person partition sets changed their person count")
