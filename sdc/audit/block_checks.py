"""The audit's checks on the cell table: counts per partition set (merged groups as one),
non-sensitive cells unchanged, no new cells; PRB profiles recounted and their exact max risk
recomputed (uniform, near or weighted design); theta and kmin from xi; the dependence check."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from sdc.audit.report import REL, TOL, AuditReport
from sdc.config.model import ReleaseConfig
from sdc.method.blocks import Block
from sdc.method.designs import plan_release
from sdc.method.destinations import NearCertifier, design_risk
from sdc.method.partition import Partitioned
from sdc.method.plan import ReleasePlan, certificate
from sdc.method.risk import BlockRisk, max_risk
from sdc.method.theta import kmin as kmin_of
from sdc.method.theta import solve_theta

#: the near-cell check's inputs: the certifier on the source's cells and audit.json's
#: ``near.prbs`` records
NearDesigns = tuple[NearCertifier, list[dict[str, Any]]]

__all__ = ["NearDesigns", "cell_examples", "cell_frame", "count_checks", "dependence_checks", "fmt_profile", "merge_groups", "near_risk", "parse_profile", "prb_checks", "ps_counts", "theta_check", "weighted_checks"]


def cell_frame(part: Partitioned) -> pd.DataFrame:
    df = pd.DataFrame(part.cells.key_codes, columns=part.cells.names)
    df["t"] = part.cells.frequency
    return df


def ps_counts(part: Partitioned) -> pd.Series:
    # records per partition set from the cells (t_j summed): also for a batch-counted table
    counts = np.bincount(part.cell_partition_set, weights=part.cells.frequency,
                         minlength=len(part.partition_keys)).astype(np.int64)
    return pd.Series(counts, index=pd.Index(part.partition_keys, name="partition_key"))


def parse_profile(s: str) -> dict[int, int]:
    out = {}
    for item in str(s).split(","):
        if item.strip():
            t, m = item.split(":")
            out[int(t)] = int(m)
    return out


def fmt_profile(p: dict[int, int]) -> str:
    return ", ".join(f"{t}:{m}" for t, m in sorted(p.items()))


def weighted_checks(rep: AuditReport, po: Partitioned, weight_total: np.ndarray | None,
                    cfg: ReleaseConfig, xi: float,
                    recorded_w: list[str] | None = None, what: str = "",
                    plan: ReleasePlan | None = None) -> tuple[float, str]:
    """The weighted mode (docs/METHOD.md 7.11): its design re-derived from the source's cell
    table and weight totals (or ``plan``: the weighted plan the pipeline's count pass made of
    the source's counts), every weight group's exact certificate recomputed; the
    certificate is the design's. Under the near W (``plan.design.near``) every PRB's W (block-diagonal
    over its weight groups) is compared with the digest audit.json records. ``what`` prefixes
    the check names (a household file's stages)."""
    if plan is None:
        if weight_total is None:
            rep.add(what + "weighted design", False,
                    "the source's weight totals were not counted")
            return math.inf, "weighted design"
        plan = plan_release(po, cfg, weight_total)
    g = plan.weighted.groups
    n_w = int((g["design"] == "weighted").sum()) if len(g) else 0
    rep.add(what + "weighted design <= xi", plan.certificate <= xi + TOL,
            f"{len(g)} weight groups ({n_w} weight-balanced, {len(g) - n_w} NZY), max risk "
            f"{plan.certificate:.6f}")
    if plan.design.near:
        got = [tr.digest() for tr in plan.weighted.transitions]
        rep.add(what + "weighted near W re-derived = recorded", got == list(recorded_w or []),
                f"{len(got)} PRBs' W (near inside the weight groups) re-derived from the source")
    return plan.certificate, f"weighted design, {plan.certificate_at.get('source')}"


def theta_check(rep: AuditReport, risk: dict[str, Any], xi: float) -> None:
    theta, km = solve_theta(xi), kmin_of(solve_theta(xi))
    ok = (math.isclose(float(risk.get("xi", math.nan)), xi, rel_tol=0, abs_tol=1e-15)
          and math.isclose(float(risk.get("theta", math.nan)), theta, rel_tol=REL)
          and int(risk.get("kmin", -1)) == km)
    rep.add("theta and kmin", ok,
            f"xi = {xi}, theta = {theta:.6f}, kmin = {km} (audit.json: xi = {risk.get('xi')}, "
            f"theta = {risk.get('theta')}, kmin = {risk.get('kmin')})")


def merge_groups(prb_of_label: dict[str, int]) -> tuple[Callable[[str], str], str]:
    """Partition sets merged into one PRB form one comparison group (records may move inside
    it): (label -> group, a note for the detail)."""
    members = pd.Series(list(prb_of_label.values())).value_counts()
    merged = set(members.index[members > 1].tolist())

    def group(label: str) -> str:
        b = prb_of_label.get(label, -1)
        return f"merged PRB {b}" if b in merged else label

    return group, (f" ({len(merged)} merged groups compared as one)" if merged else "")


def count_checks(rep: AuditReport, po: Partitioned, pr: Partitioned,
                 group: Callable[[str], str], xi: float,
                 cfg: ReleaseConfig, note: str = "", what: str = "", unit: str = "") -> None:
    """Counts per partition set (``group`` maps a label to its comparison group), non-sensitive
    cells unchanged, no released cell empty in the original. ``what`` prefixes the check names,
    ``unit`` names what is counted in the details, ``note`` the merged groups."""
    co, cr = ps_counts(po), ps_counts(pr)
    co = co.groupby(co.index.map(group)).sum()
    cr = cr.groupby(cr.index.map(group)).sum()
    both = pd.concat([co.rename("original"), cr.rename("released")], axis=1).fillna(0)
    diff = both[both["original"] != both["released"]]
    rep.add(what + "partition sets: counts equal", diff.empty,
            f"{len(co)} partition sets, all counts equal{unit}{note}" if diff.empty else
            f"{len(diff)} partition set(s) differ{note}, e.g. " + "; ".join(
                f"{k}: {int(r.original)} -> {int(r.released)}" for k, r in diff.head(3).iterrows()))

    names = po.cells.names
    cells = cell_frame(po).merge(cell_frame(pr), on=names, how="outer",
                                  suffixes=("_orig", "_rel"), indicator=True)
    sens_t = 1.0 / xi
    t_o = cells["t_orig"].fillna(0).to_numpy()
    t_r = cells["t_rel"].fillna(0).to_numpy()
    nonsens = (t_o > 0) & (t_o >= sens_t)
    changed = nonsens & (t_o != t_r)
    rep.add(what + "non-sensitive cells unchanged", not changed.any(),
            f"{int(nonsens.sum())} non-sensitive cells, all counts unchanged" if not changed.any()
            else f"{int(changed.sum())} non-sensitive cell(s) changed count, e.g. "
            + cell_examples(cells[changed], cfg))
    new = (t_o == 0) & (t_r > 0)
    rep.add(what + "no new cells", not new.any(),
            "every released cell exists in the original" if not new.any() else
            f"{int(new.sum())} released cell(s) ({int(t_r[new].sum())} records) were empty in "
            "the original, e.g. " + cell_examples(cells[new], cfg))


def prb_checks(rep: AuditReport, po: Partitioned, blocks: list[dict[str, Any]],
               prb_of_label: dict[str, int], xi: float, what: str = "",
               near: NearDesigns | None = None) -> tuple[float, str]:
    """Sensitive cells in PRBs, PRB profiles recounted, exact max risks recomputed, and the
    certificate of ``po`` (max over PRBs and non-sensitive cells): returns (certificate, where).
    ``what`` prefixes the check names (``"household "`` for the household stage). ``near``:
    ``(NearCertifier on po, audit.json's near.prbs)``: every PRB's W is re-derived from its
    cells (its SHA-256 compared with the recorded one) and certified under it."""
    sens = po.sensitive
    cell_label = np.asarray(po.partition_keys, dtype=object)[po.cell_partition_set]
    cell_prb = np.array([prb_of_label.get(lab, -1) for lab in po.partition_keys],
                        dtype=np.int64)[po.cell_partition_set]
    orphan = sens & (cell_prb < 0)
    rep.add(what + "sensitive cells all in a PRB", not orphan.any(),
            f"{int(sens.sum())} sensitive cells in {len(blocks)} PRBs" if not orphan.any() else
            f"{int(orphan.sum())} sensitive cell(s) in partition sets without a PRB, e.g. "
            f"{sorted(set(cell_label[orphan]))[:3]}")
    recount = pd.DataFrame({"prb": cell_prb[sens], "t": po.cells.frequency[sens]})
    recount = recount.groupby(["prb", "t"]).size()
    risks, bad_profile, bad_risk, over, bad_w = [], [], [], [], []
    for b in blocks:
        i = int(b["prb"])
        prof = (recount.loc[i].to_dict() if i in recount.index.get_level_values(0) else {})
        prof = {int(t): int(m) for t, m in prof.items()}
        stored = parse_profile(b.get("profile", ""))
        if prof != stored:
            bad_profile.append(f"PRB {i} ({b.get('partition_key')}): recorded "
                               f"{fmt_profile(stored)}, recounted {fmt_profile(prof)}")
        if not prof:
            continue
        if near is None:
            r = max_risk(prof, float(b["theta"]))  # mechanism-aware: own and other picked cells
        else:
            r = near_risk(near, po, prb_of_label, i, prof, float(b["theta"]), bad_w)
        risks.append((r.max_risk, i, r.t, r.a, r.z, r.t_z))
        if not math.isclose(r.max_risk, float(b.get("max_risk", math.nan)), rel_tol=REL):
            bad_risk.append(f"PRB {i}: recorded {b.get('max_risk')}, recomputed {r.max_risk:.10f}")
        if r.max_risk > xi + TOL:
            over.append(f"PRB {i} ({b.get('partition_key')}): {r.max_risk:.6f} at t={r.t}, "
                        f"a={r.a}, {r.z} cell (t_z={r.t_z}) with theta={float(b['theta']):.6f}")
    extra_prbs = sorted(set(recount.index.get_level_values(0)) - {int(b["prb"]) for b in blocks})
    if extra_prbs:
        bad_profile.append(f"PRBs {extra_prbs[:5]} hold sensitive cells but are not in audit.json")
    rep.add(what + "PRB profiles match the source", not bad_profile,
            f"{len(blocks)} PRB profiles recounted" if not bad_profile else "; ".join(bad_profile[:3])
            + (f" (and {len(bad_profile) - 3} more)" if len(bad_profile) > 3 else ""))
    if near is not None:
        relaxed = sum(1 for x in near[1] if x.get("weights"))
        rep.add(what + "near-cell W re-derived = recorded", not bad_w,
                f"{len(blocks)} PRBs' W re-derived from their cells, SHA-256 as recorded"
                + (f" ({relaxed} on a flatter rung of near.fallback_weights, as the dependence "
                   "check re-run on the source gives it)" if relaxed else "")
                if not bad_w else "; ".join(bad_w[:3]))
    rep.add(what + "PRB max risk recomputed = recorded", not bad_risk,
            "every PRB's exact max risk matches" if not bad_risk else "; ".join(bad_risk[:3]))
    rep.add(what + "PRB max risk <= xi", not over,
            f"every PRB's exact max risk <= xi = {xi}" if not over else
            f"{len(over)} PRB(s) above xi = {xi}: " + "; ".join(over[:3]))

    cert, k, t_ns = certificate([r[0] for r in risks], po.cells.frequency, sens)
    where = "no cell"
    if k is not None:
        m = risks[k]
        where = f"PRB {m[1]} at t={m[2]}, a={m[3]}, {m[4]} cell (t_z={m[5]})"
    elif t_ns is not None:
        where = f"a non-sensitive cell with t={t_ns}"
    return cert, where


def near_risk(near: NearDesigns, po: Partitioned, prb_of_label: dict[str, int], i: int,
              prof: dict[int, int], theta: float, bad_w: list[str]) -> BlockRisk:
    """PRB i's certificate under its near design, re-derived from the source's cells."""
    certifier, recorded = near
    members = sorted(s for s, lab in enumerate(po.partition_keys) if prb_of_label.get(lab) == i)
    t_max = max(prof) if prof else 1
    b = Block(members, np.array([prof.get(t, 0) for t in range(t_max + 1)], dtype=np.int64))
    rec = next((x for x in recorded if int(x.get("prb", -1)) == i), None)
    got = certifier.design(b)[0].digest()
    if rec is None or rec.get("w_sha256") != got:
        bad_w.append(f"PRB {i}: W re-derived {got[:12]}..., audit.json records "
                     f"{(rec or {}).get('w_sha256', 'nothing')}")
    rung = certifier.rung(b)  # near.fallback_weights: the rung the source's check gives it
    want = [float(x) for x in certifier.ladder[rung]] if rung else None
    if rec is not None and rec.get("weights") != want:
        bad_w.append(f"PRB {i}: weights re-derived {want or 'near.weights'}, audit.json "
                     f"records {rec.get('weights') or 'near.weights'}")
    return design_risk(certifier.transition(b, theta))


def dependence_checks(rep: AuditReport, audit: dict[str, Any], what: str = "") -> None:
    """The dependence check recomputed from the source: its figures equal the recorded ones
    and no released non-key column fails (METHOD.md, "Dependence of non-key columns").
    ``what`` prefixes the check names (the stages of a household release)."""
    if rep.dependence is None:
        return
    recorded = (audit.get("dependence") or {}).get("columns")
    got = [f.as_dict() for f in rep.dependence]
    if recorded is None:
        rep.add(f"{what}dependence check: recorded", False, "audit.json has no dependence figures (a "
                "release made before the check existed); recomputed: " + ", ".join(
                    f"{f.column} {f.figure:.3f}{' FAILS' if f.flagged else ''}"
                    for f in rep.dependence))
    else:
        same = json.dumps(got, sort_keys=True) == json.dumps(recorded, sort_keys=True)
        rep.add(f"{what}dependence check: recomputed = recorded", same,
                f"{len(got)} released non-key column(s) re-measured" if same else
                f"recomputed {got[:3]}, audit.json records {recorded[:3]}")
    bad = [f for f in rep.dependence if f.flagged]
    rep.add(f"{what}dependence check: no non-key column gives keys away", not bad,
            "every released non-key column passes" if not bad else "; ".join(
                f"{f.column!r}: {f.figure:.3f} > xi (revealing {sorted(f.revealed)})"
                for f in bad[:3]))


def cell_examples(rows: pd.DataFrame, cfg, k: int = 3) -> str:
    def value(n: str, code: int) -> str:
        dom = cfg.key_variables[n].domain
        return repr(dom[code]) if code < len(dom) else "<missing>"

    names = cfg.key_names
    return "; ".join(
        "(" + ", ".join(f"{n}={value(n, int(r[n]))}" for n in names) + f"): "
        f"{int(np.nan_to_num(r['t_orig']))} -> {int(np.nan_to_num(r['t_rel']))}"
        for _, r in rows.head(k).iterrows()
    )
