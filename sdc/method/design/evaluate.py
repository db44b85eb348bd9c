"""Evaluating one node of the design lattice on the cell table: its cell table aggregated from
the declared one, its release config (recodings, partition variants), its NZY certificate
through the release's own planning code, and its figures (docs/DESIGN.md, "The search")."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.load import parse_config
from sdc.config.model import ConfigError, Hierarchy, KeyVariable, ReleaseConfig
from sdc.config.recode import recode_classes
from sdc.errors import CertificationError, SmallBlockError
from sdc.method.blocks import plan_blocks
from sdc.method.cells import CellTable, encode_cells
from sdc.method.design.candidates import NICE_WIDTHS, Candidate, as_number, entropy, key_kind
from sdc.method.design.importance import IMPORTANT_VARIANTS, important_partition
from sdc.method.design.importance import weights as importance_weights
from sdc.method.design.rule import changes_of_key, displacement, move_abs
from sdc.method.partition import partition_cells
from sdc.method.plan import certificate, default_merge_order, sensitive_profiles

__all__ = ["NOMINAL_FIRST", "VARIANTS", "WEIGHTED_VARIANTS", "Context", "certify", "node_data",
           "partition_variant"]

_DENSE_MAX = 1 << 24
_EMPTY = np.zeros(0, dtype=np.int64)


def certify(part: Any, config: ReleaseConfig) -> tuple[Any, float]:
    """The block plan and the certificate of a partitioned cell table: the first half of
    :func:`sdc.method.plan.plan_prbs` (profiles, :func:`sdc.method.blocks.plan_blocks` in the
    config's merge order, max over PRBs of their exact risk and over non-sensitive cells of
    1/t), without its report tables. Raises what ``plan_blocks`` raises."""
    pvars = config.partition_variables
    order = [pvars.index(v) for v in default_merge_order(config)]
    labels = part.partition_keys
    bplan = plan_blocks(part.ps_codes, sensitive_profiles(part), xi=part.xi, theta=part.theta,
                        kmin=part.kmin, theta_mode=config.risk.theta,
                        policy=config.risk.small_blocks, merge_along=order,
                        describe=lambda b: " + ".join(labels[m] for m in b.members))
    cert = certificate([b.risk.max_risk for b in bplan.blocks], part.cells.frequency,
                       part.sensitive)[0]
    return bplan, float(cert)


def node_data(base: dict[str, Any], cands: dict[str, list[Candidate]], levels: tuple[int, ...],
              keys: list[str]) -> dict[str, Any]:
    """The YAML data of a node's release config: ``base`` (the config as written) with each
    key's ``recode`` set to the node's candidate (removed for the declared values)."""
    data = copy.deepcopy(base)
    for key, lev in zip(keys, levels, strict=True):
        kv = data["key_variables"][key]
        rule = cands[key][lev].rule
        if rule is None:
            kv.pop("recode", None)
        else:
            kv["recode"] = copy.deepcopy(rule)
    return data


NOMINAL_FIRST = ", nominal keys merged first"
VARIANTS = ("fine", "finest", "fine" + NOMINAL_FIRST, "finest" + NOMINAL_FIRST)
FINE_AS_IS = 12     # an ordered key with at most this many released values: as_is (fine)
FINE_BANDS = 8      # ... else at most about this many bands (breaks or round numbers)
NOMINAL_AS_IS = 5   # a nominal key with at most this many released values: as_is
#: a weighted job's further variants: ``coarse`` (large PRBs: weight groups certify) and none
WEIGHTED_VARIANTS = ("coarse", "none")
COARSE_BANDS = 4    # coarse: an ordered numeric key in at most about this many bands
COARSE_NOMINAL = 2  # coarse: a nominal key with at most this many released values as_is


def partition_variant(config: ReleaseConfig, cands: dict[str, list[Candidate]],
                      levels: tuple[int, ...], variant: str) -> dict[str, Any] | None:
    """A partition (YAML data over the declared values) finer than the config's, confining
    PRAM's moves: ``fine``: an ordered key as_is when it has at most ``FINE_AS_IS`` released
    values, else in bands cut at its declared ``breaks`` or at round numbers (at most about
    ``FINE_BANDS``), moved to released class edges; ``finest``: every
    ordered key as_is; both: a nominal key with at most ``NOMINAL_AS_IS`` released values
    as_is, else its config rule (or none: it moves freely). A weighted job also tries
    ``coarse`` (a numeric key in bands at its breaks or round numbers, at most about
    ``COARSE_BANDS``; a nominal key with at most ``COARSE_NOMINAL`` values as_is; other keys
    move freely) and ``none`` (no partition): large PRBs, whose weight groups certify. Small
    PRBs are merged as usual (``small_blocks``), so a finer partition is certified like any
    other."""
    if variant == "none":
        return None
    coarse = variant == "coarse"
    src = config.input_key_variables
    out: dict[str, Any] = {}
    for key, lev in zip(config.key_names, levels, strict=True):
        kv, c = src[key], cands[key][lev]
        n_rel = c.n_released - (1 if kv.missing == "category" else 0)
        kind = key_kind(kv)
        user = config._user_partition.get(key, config.partition.get(key))
        if coarse and kind != "numeric":
            if kind == "nominal" and n_rel <= COARSE_NOMINAL:
                out[key] = "as_is"
            continue
        if kind in ("numeric", "numeric_text", "ordinal"):
            if not coarse and (variant == "finest" or n_rel <= FINE_AS_IS
                               or kind != "numeric"):
                out[key] = "as_is"
                continue
            dom = np.asarray([float(v) for v in kv.domain])
            cm = c.code_map[:len(dom)]
            first = np.full(n_rel, np.inf)
            np.minimum.at(first, cm, dom)
            starts = set(first[np.isfinite(first)].tolist())
            lo, hi = float(dom.min()), float(dom.max())
            if kv.breaks:        # the declared breaks, where they start a released class
                cuts = [float(b) for b in kv.breaks]
            else:                # round numbers: the smallest nice width giving <= FINE_BANDS
                most = COARSE_BANDS if coarse else FINE_BANDS
                w = next((w for w in NICE_WIDTHS if (hi - lo) / w <= most), NICE_WIDTHS[-1])
                cuts = [float(x) for x in range(math.floor(lo / w) * w + w, int(hi) + 1, w)]
            edges = [lo]
            for cut in cuts:     # moved up to the start of the released class holding it
                up = [x for x in starts if x >= cut]
                if up and min(up) > edges[-1] and min(up) <= hi:
                    edges.append(min(up))
            integral = bool(np.all(dom == np.floor(dom)))
            out[key] = {"bands": [as_number(e, integral) for e in edges]}
        elif n_rel <= NOMINAL_AS_IS:
            out[key] = "as_is"
        elif user is not None:
            out[key] = (user if isinstance(user, str)
                        else user.model_dump(mode="json", exclude_none=True))
    return out or None


def _snap(edges: list[float], kv: KeyVariable) -> list[Any]:
    """Partition band edges moved down to the start of the recoding's class holding them (the
    first edge kept), so the partition is as coarse as the recoding."""

    cmap, _ = recode_classes("key", kv, kv.recode)
    dom = np.asarray([float(v) for v in kv.domain])
    start = np.full(cmap.max() + 1, np.inf)
    np.minimum.at(start, cmap, dom)
    integral = bool(np.all(dom == np.floor(dom)))
    out = [edges[0]]
    for e in edges[1:]:
        inside = np.flatnonzero(dom >= e)
        if not inside.size:
            continue
        s = float(start[cmap[inside[0]]])
        if s > float(out[-1]):
            out.append(as_number(s, integral))
    return out


def _node_config(data: dict[str, Any], base_dir: Path,
                 tables: dict[str, list[list[str]]]) -> tuple[ReleaseConfig, dict[str, Any]]:
    """Parse a node's config; a partition rule finer than the node's recoding becomes
    ``as_is`` (partition on the released values). Hierarchy tables come from ``tables``."""
    from sdc.config.recode import apply_recodings

    snapped: set[str] = set()
    for _ in range(2 * len(data.get("partition") or {}) + 1):
        cfg = parse_config(data, base_dir, source="design node", load_hierarchies=False,
                           recode=False)
        for rule in [*cfg.partition.values(), *(kv.recode for kv in cfg.key_variables.values())]:
            if isinstance(rule, Hierarchy):
                rule.with_table(tables[str(rule.hierarchy)])
        declared = dict(cfg.key_variables)
        try:
            apply_recodings(cfg)
        except ConfigError as e:
            bad = [v for v in (data.get("partition") or {}) if f"partition.{v}:" in str(e)]
            if not bad:
                raise
            v = bad[0]
            rule = data["partition"][v]
            kv = declared[v]
            if isinstance(rule, dict) and "bands" in rule and v not in snapped \
                    and kv.recode is not None:
                # bands of the partition moved down to the recoding's class edges (coarser)
                snapped.add(v)
                data["partition"][v] = {"bands": _snap(rule["bands"], kv)}
                continue
            data["partition"][v] = "as_is"
            continue
        return cfg, data
    raise ConfigError("design node: no partition compatible with the recoding")


class Context:
    """What evaluating a node needs (inherited by forked workers)."""

    def __init__(self, fine: CellTable, config: ReleaseConfig, base: dict[str, Any],
                 cands: dict[str, list[Candidate]], keys: list[str],
                 tables: dict[str, list[list[str]]], min_entropy: float,
                 weights: tuple[np.ndarray, np.ndarray] | None = None,
                 outcome: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.fine, self.config, self.base, self.cands, self.keys = fine, config, base, cands, keys
        self.tables, self.min_entropy = tables, min_entropy
        #: (W_j, Q_j) per declared cell: sum of the weights and of the squared weights
        self.weights = weights
        #: (n_j, S_j, Q_j) per declared cell: an outcome's non-missing values, sum, squares
        self.outcome = outcome
        self.n = int(fine.frequency.sum())
        #: each key's analytic importance (weight over the mean; all 1.0 when none differs)
        self.importance = importance_weights(config)
        self.p_fine = fine.frequency / self.n
        self.h_fine = entropy(fine.frequency)
        # every candidate's released code of every fine cell, gathered once
        self.cols = {k: [c.code_map[fine.key_codes[:, i]] for c in cands[k]]
                     for i, k in enumerate(keys)}
        self.inv_members = {k: [1.0 / np.bincount(c.code_map, minlength=c.n_released)
                                for c in cands[k]] for k in keys}
        # the spread of every ordered key (declared values, weighted by records): E|delta| / sd
        # adds ordered keys on one scale
        self.sd: dict[str, float] = {}
        for i, k in enumerate(keys):
            pos = cands[k][0].position
            if pos is None:
                continue
            x = pos[fine.key_codes[:, i]]
            ok = np.isfinite(x)
            w = fine.frequency[ok].astype(float)
            if w.sum() > 0:
                m = float((x[ok] * w).sum() / w.sum())
                self.sd[k] = float(np.sqrt((w * (x[ok] - m) ** 2).sum() / w.sum())) or 1.0

    def aggregate(self, levels: tuple[int, ...]) -> tuple[CellTable, np.ndarray]:
        """The node's cell table from the fine one: codes mapped, equal cells added up (a
        dense count when the node's cross-product has at most 2**24 cells, else a sort)."""
        keys, fine = self.keys, self.fine
        sizes = [self.cands[k][lev].n_released for k, lev in zip(keys, levels, strict=True)]
        cols = [self.cols[k][lev] for k, lev in zip(keys, levels, strict=True)]
        if math.prod(sizes) > _DENSE_MAX:
            ct = encode_cells(cols, sizes, keys)
            freq = np.bincount(ct.record_cell, weights=fine.frequency,
                               minlength=ct.n_cells).astype(np.int64)
            return CellTable(_EMPTY, ct.key_codes, freq, keys), ct.record_cell
        code = cols[0].copy()
        for c, sz in zip(cols[1:], sizes[1:], strict=True):
            code *= sz
            code += c
        dense = np.bincount(code, weights=fine.frequency, minlength=math.prod(sizes))
        present = np.flatnonzero(dense)
        index = np.full(dense.size, -1, dtype=np.int64)
        index[present] = np.arange(present.size)
        key_codes = np.empty((present.size, len(sizes)), dtype=np.int64)
        rest = present.copy()
        for j in range(len(sizes) - 1, -1, -1):
            rest, key_codes[:, j] = np.divmod(rest, sizes[j])
        return (CellTable(_EMPTY, key_codes, dense[present].astype(np.int64), keys),
                index[code])

    def _node_part(self, cells: CellTable, levels: tuple[int, ...], variant: str,
                   out: dict[str, Any]) -> tuple[ReleaseConfig, Any]:
        """A node's release config (``out`` gets its ``partition`` and ``merge_along``) and
        its partitioned cell table. Raises ConfigError."""
        data = node_data(self.base, self.cands, levels, self.keys)
        if variant != "config":
            merge = None
            if variant in IMPORTANT_VARIANTS:   # important keys held, least important move
                part_data, merge = important_partition(self.config, self.cands, levels,
                                                       variant)
            else:
                part_data = partition_variant(self.config, self.cands, levels,
                                              variant.split(",")[0])
            if part_data is None:
                data.pop("partition", None)
            else:
                data["partition"] = part_data
            data.setdefault("risk", {}).pop("merge_along", None)
            if merge:
                data["risk"]["merge_along"] = list(merge)
                out["merge_along"] = list(merge)
            if variant.endswith(NOMINAL_FIRST) and part_data:
                # small PRBs merged across nominal keys first, ordered keys last
                src = self.config.input_key_variables
                ordered = [v for v in part_data if key_kind(src[v]) != "nominal"]
                data["risk"]["merge_along"] = [v for v in part_data if v not in ordered] \
                    + ordered
                out["merge_along"] = list(data["risk"]["merge_along"])
        cfg, data = _node_config(data, self.config.base_dir, self.tables)
        out["partition"] = copy.deepcopy(data.get("partition") or {})
        return cfg, partition_cells(cells, cfg)

    def weighted(self, levels: tuple[int, ...], variant: str = "config") -> dict[str, Any]:
        """A weighted job's node planned as ``sdc release`` plans it, on the node's cell
        totals of the weights (:func:`sdc.method.design.balance.weighted_node`): its
        ``configured`` figures (bias, fallback, beyond, changed, certificate), or a note."""
        from sdc.method.design.balance import weighted_node

        assert self.weights is not None
        cells, fine_to_node = self.aggregate(levels)
        w = np.bincount(fine_to_node, weights=self.weights[0], minlength=cells.n_cells)
        q = np.bincount(fine_to_node, weights=self.weights[1], minlength=cells.n_cells)
        try:
            cfg, part = self._node_part(cells, levels, variant, {})
            return {"configured": weighted_node(part, cfg, w, q)}
        except (SmallBlockError, CertificationError, ConfigError) as e:
            return {"configured": {"note": str(e)[:300]}}

    def evaluate(self, levels: tuple[int, ...], floor: bool = True,
                 variant: str = "config") -> dict[str, Any]:
        """A node's figures (the :class:`Node` fields) and status."""
        n, keys = self.n, self.keys
        cells, fine_to_node = self.aggregate(levels)
        h = entropy(cells.frequency)
        kept = h / self.h_fine if self.h_fine > 0 else 1.0
        cand = {k: self.cands[k][lev] for k, lev in zip(keys, levels, strict=True)}
        out: dict[str, Any] = {"entropy_kept": kept, "loss": 1.0 - kept,
                               "meaningful": all(c.meaningful for c in cand.values()),
                               "n_cells": cells.n_cells, "variant": variant,
                               "key_kept": {k: c.kept for k, c in cand.items()},
                               "key_tvd": {k: c.tvd for k, c in cand.items()},
                               "min_key_kept": min(c.kept for c in cand.values())}
        if floor and kept < self.min_entropy:
            return {**out, "status": "pruned",
                    "note": f"keeps {kept:.1%} of the entropy (floor {self.min_entropy:.0%})"}
        # recoding part of the tvd: uniform spread of each released cell over its declared cells
        q = cells.frequency[fine_to_node] / n
        for k, lev in zip(keys, levels, strict=True):
            q = q * self.inv_members[k][lev][self.cols[k][lev]]
        out["tvd_recode"] = 0.5 * (np.abs(self.p_fine - q).sum() + max(1.0 - q.sum(), 0.0))
        try:
            cfg, part = self._node_part(cells, levels, variant, out)
            bplan, cert = certify(part, cfg)
        except (SmallBlockError, CertificationError, ConfigError) as e:
            return {**out, "status": "refused", "note": str(e)[:300]}
        blocks = bplan.blocks
        thetas = np.array([b.theta for b in blocks])
        ks = np.array([b.k for b in blocks])
        changed = float((thetas * ks).sum())
        pram = float((ks * move_abs(thetas)).sum()) / (2 * n) if thetas.size else 0.0
        # displacement of moved records per ordered key (declared units)
        sens = np.flatnonzero(part.sensitive)
        cell_block = bplan.block_of_partition_set[part.cell_partition_set[sens]]
        inb = cell_block >= 0
        disp: dict[str, float] = {}
        key_change: dict[str, float] = {}
        score = 0.0
        moved = float((thetas * ks).sum())
        for j, k in enumerate(keys):
            if not thetas.size or moved <= 0:
                break
            codes = cells.key_codes[sens[inb], j]
            key_change[k] = changes_of_key(codes, cell_block[inb], thetas, ks) / moved
            pos = cand[k].position
            if pos is None or k not in self.sd:
                # a nominal key: the chance it changes (times its importance weight)
                score += self.importance[k] * key_change[k]
                continue
            total, _ = displacement(pos[codes], cell_block[inb], thetas, ks)
            disp[k] = total / moved
            # an ordered key: E|delta| in standard deviations (times its importance weight)
            score += self.importance[k] * (disp[k] / self.sd[k])
        if self.outcome is not None and thetas.size:
            from sdc.method.design.shifts import key_mean_shifts

            mom = tuple(np.bincount(fine_to_node, weights=m, minlength=cells.n_cells)
                        for m in self.outcome)
            se = key_mean_shifts(cells.key_codes, cells.frequency, mom, sens[inb],
                                 cell_block[inb], thetas, ks)
            out["key_shift"] = {k: v for k, v in zip(keys, se, strict=True) if v is not None}
        if self.weights is not None:
            # the weight in PRBs too small to be cut into weight groups (k_b < 2 s): where
            # a weighted design falls back to NZY most (phase 3 plans such nodes last)
            from sdc.method.weighted import group_size

            w = np.bincount(fine_to_node, weights=self.weights[0], minlength=cells.n_cells)
            small = inb & (ks[np.maximum(cell_block, 0)] < 2 * group_size(part.kmin))
            out["small_prb_weight"] = float(w[sens[small]].sum() / max(w.sum(), 1e-300))
        return {**out, "changed": changed, "changed_share": changed / n,
                "tvd": out["tvd_recode"] + pram, "certificate": cert,
                "n_sensitive": int(part.sensitive.sum()), "n_prbs": len(blocks),
                "displacement": disp, "displacement_sd": score, "key_change": key_change,
                "keys_changed": float(sum(key_change.values())),
                "status": "certified" if cert <= self.config.risk.xi + 1e-12 else "refused"}


_CTX: Context | None = None
