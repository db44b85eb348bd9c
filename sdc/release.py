"""``release_frame``: the whole NZY engine on one DataFrame (METHOD.md sections 2-6).

1. encode key variables, find the non-empty cells and their frequencies t_j;
2. generalize the partition variables and assign every cell to its partition set;
3. flag sensitive cells (t_j < 1/xi); the sensitive cells of a partition set form its PRB;
4. solve h(theta) = xi, apply the small-block policy (merge / calibrate / fail);
5. post-randomize every sensitive record inside its PRB with the NZY probabilities, one random
   stream per PRB derived from the seed and the PRB's partition key;
6. certify: the exact max of R_j(a, t) per PRB, and overall with 1/t_j of non-sensitive cells.

Everything works on whole columns; the only Python loops run over variables and PRBs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.blocks import Block, BlockPlan, plan_blocks
from sdc.cells import CellTable, encode_cells, encode_key
from sdc.config import AsIs, Bands, Groups, Hierarchy, ReleaseConfig
from sdc.errors import InputError
from sdc.hierarchies import Generalization, generalize_domain
from sdc.perturb import apply_perturbations
from sdc.pram import post_randomize
from sdc.streams import stream
from sdc.theta import kmin as kmin_of
from sdc.theta import solve_theta

__all__ = ["Partitioned", "partition_units", "ReleaseResult", "default_merge_order", "partition_frame", "release_frame"]


@dataclass
class ReleaseResult:
    """What the engine returns. Only ``frame`` is meant for the public; the rest is internal.

    Attributes
    ----------
    frame : DataFrame
        Released records in the input's row order and index, input columns minus the dropped
        identifiers (the original id column is kept here; the writer replaces it).
    blocks : DataFrame
        One row per PRB: ``prb``, ``partition_key``, ``n_partition_sets``, ``k``,
        ``n_records``, ``profile`` (e.g. ``"1:200, 2:80"``), ``cells_t1``, ``cells_t2``, ...,
        ``theta``, ``kmin``, ``max_risk``, ``max_risk_t``, ``max_risk_a``, ``action``,
        ``expected_changed`` (theta * k) and ``changed``.
    dp_perturbations : list of :class:`sdc.perturb.DPPerturbation`
        The eps-DP PRAM applied to the config's ``perturb:`` variables (non-key), if any.
    certificate : float
        max over PRBs of their exact max risk and over non-sensitive cells of 1/t_j.
    certificate_at : dict
        Where the certificate is attained: ``{"source": "prb", "prb", "partition_key", "t",
        "a"}`` or ``{"source": "non_sensitive", "t", "a"}``.
    """

    frame: pd.DataFrame
    blocks: pd.DataFrame
    certificate: float
    certificate_at: dict[str, Any]
    xi: float
    theta: float
    kmin: int
    partition_sets: pd.DataFrame
    cells: CellTable
    cell_partition_set: np.ndarray
    cell_prb: np.ndarray
    released_cell: np.ndarray
    merges: list[str] = field(default_factory=list)
    dp_perturbations: list = field(default_factory=list)

    @property
    def changed(self) -> np.ndarray:
        """Per record: did its key values change?"""
        return self.released_cell != self.cells.record_cell

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.cells.record_cell]

    @property
    def record_prb(self) -> np.ndarray:
        return self.cell_prb[self.cells.record_cell]

    @property
    def sensitive_cell(self) -> np.ndarray:
        return self.cell_prb >= 0

    @property
    def n_changed(self) -> int:
        return int(self.changed.sum())


def partition_units(partition_keys: list[str], blocks: pd.DataFrame) -> dict[str, str]:
    """Map every partition key to the unit whose record count the release preserves exactly.

    PRAM never moves a record out of its PRB, so the record count of every partition set is
    preserved, except when small PRBs were merged: then records may move between the merged
    partition sets, and the preserved count is the merged group's total. The unit of a merged
    partition set is the merged block's key (its members joined by " + "); every other partition
    set is its own unit.
    """
    units = {k: k for k in partition_keys}
    for key, n in zip(blocks["partition_key"], blocks["n_partition_sets"], strict=True):
        if n > 1:
            for member in key.split(" + "):
                units[member] = key
    return units


def default_merge_order(config: ReleaseConfig) -> list[str]:
    """Banded variables first, then hierarchies, groups and as-is variables (config order)."""
    if config.risk.merge_along is not None:
        return list(config.risk.merge_along)
    rank = {Bands: 0, Hierarchy: 1, Groups: 2, AsIs: 3, str: 3}
    items = list(config.partition.items())
    return [v for v, r in sorted(items, key=lambda vr: rank.get(type(vr[1]), 3))]


def _check_columns(frame: pd.DataFrame, config: ReleaseConfig, identifiers: bool = True) -> None:
    need = {f"key_variables.{k}": k for k in config.key_names}
    if identifiers and config.input.id_column:
        need["input.id_column"] = config.input.id_column
    for d in (config.input.drop if identifiers else []):
        if d not in frame.columns:
            raise InputError(
                f"column {d!r} (named in input.drop) is not in the input; the input has "
                f"{list(frame.columns)[:20]}. Fix the column name in the config"
            )
    missing = {w: c for w, c in need.items() if c not in frame.columns}
    if missing:
        w, c = next(iter(missing.items()))
        raise InputError(
            f"column {c!r} (named in {w}) is not in the input, which has columns "
            f"{list(frame.columns)[:20]}; fix the name in the config or the input header"
        )
    dup = frame.columns[frame.columns.duplicated()].tolist()
    if dup:
        raise InputError(f"the input has duplicated column names {dup}; make them unique")


def _decode_values(kv, codes: np.ndarray) -> np.ndarray:
    dom = kv.domain + ([None] if kv.missing == "category" else [])
    return np.asarray(dom, dtype=object)[codes]


def _tiebreak(frame: pd.DataFrame, rows: np.ndarray, id_column: str | None) -> np.ndarray:
    """A canonical order among records of the same cell that does not depend on row order."""
    sub = frame.iloc[rows]
    if id_column is not None:
        return pd.factorize(sub[id_column], sort=True)[0]
    return pd.util.hash_pandas_object(sub, index=False).to_numpy()


@dataclass(frozen=True)
class Partitioned:
    """Cells, partition sets and sensitive cells of a file: everything before randomness.

    ``cell_partition_set[j]`` is the partition set of cell j; ``partition_keys[s]`` its label
    (e.g. ``"sex=Male | age=18-24 | race=white"``); ``ps_codes[s]`` its generalized codes;
    ``sensitive[j]`` is ``t_j < 1/xi``.
    """

    cells: CellTable
    cell_partition_set: np.ndarray
    ps_codes: np.ndarray
    partition_keys: list[str]
    generalizations: list[Generalization]
    sensitive: np.ndarray
    xi: float
    theta: float
    kmin: int

    @property
    def record_partition_set(self) -> np.ndarray:
        return self.cell_partition_set[self.cells.record_cell]


def partition_frame(frame: pd.DataFrame, config: ReleaseConfig) -> Partitioned:
    """Encode the keys of ``frame``, find its non-empty cells, partition sets and sensitive cells.

    Pure and deterministic; used by :func:`release_frame`, by the audit (on the original and on
    the released file) and by the reports.
    """
    _check_columns(frame, config, identifiers=False)
    if len(frame) == 0:
        raise InputError("the input has no records; nothing to release")
    xi = config.risk.xi
    theta = solve_theta(xi)
    km = kmin_of(theta)
    keys = config.key_names
    kvs = config.key_variables
    codes = [encode_key(frame[v], v, kvs[v]) for v in keys]
    cells = encode_cells(codes, [kvs[v].size for v in keys], keys)
    pvars = config.partition_variables
    gens = [generalize_domain(v, kvs[v], config.partition[v]) for v in pvars]
    if pvars:
        g_codes = [g.code_map[cells.key_codes[:, keys.index(v)]]
                   for v, g in zip(pvars, gens, strict=True)]
        ps = encode_cells(g_codes, [len(g.labels) for g in gens], pvars)
        cell_ps, ps_codes = ps.record_cell, ps.key_codes
    else:
        cell_ps = np.zeros(cells.n_cells, dtype=np.int64)
        ps_codes = np.zeros((1, 0), dtype=np.int64)
    labels = [
        " | ".join(f"{v}={g.labels[ps_codes[s, i]]}"
                   for i, (v, g) in enumerate(zip(pvars, gens, strict=True))) or "all records"
        for s in range(ps_codes.shape[0])
    ]
    sensitive = cells.frequency * xi < 1.0
    return Partitioned(cells, cell_ps, ps_codes, labels, gens, sensitive, xi, theta, km)


def release_frame(frame: pd.DataFrame, config: ReleaseConfig, seed: int) -> ReleaseResult:
    """Post-randomize the risky records of ``frame`` with NZY PRAM and certify the result.

    Parameters
    ----------
    frame : DataFrame
        The microdata (any column order and row order).
    config : ReleaseConfig
        Its ``key_variables``, ``partition``, ``risk`` and ``input`` (id and dropped columns)
        sections are used. Hierarchy files must already be loaded (``sdc.load_config`` does it).
    seed : int
        The release seed. The outcome of a record depends only on the seed, its PRB and its
        place in the PRB's canonical order (cell, then id or row content).

    Returns
    -------
    ReleaseResult

    Raises
    ------
    InputError
        A key column is missing or holds a value outside its declared domain.
    SmallBlockError
        A PRB is too small under ``small_blocks: fail``, or cannot be certified after merging.
    """
    _check_columns(frame, config)
    part = partition_frame(frame, config)
    xi, theta, km = part.xi, part.theta, part.kmin
    keys = config.key_names
    kvs = config.key_variables
    cells, t, cell_ps, ps_codes = part.cells, part.cells.frequency, part.cell_partition_set, part.ps_codes
    pvars, gens, ps_labels, sensitive = config.partition_variables, part.generalizations, part.partition_keys, part.sensitive
    n_ps = len(ps_labels)
    t_max = max(1, math.ceil(1.0 / xi) - 1)
    profiles = np.zeros((n_ps, t_max + 1), dtype=np.int64)
    np.add.at(profiles, (cell_ps[sensitive], t[sensitive]), 1)

    def describe(b: Block) -> str:
        names = [ps_labels[m] for m in b.members]
        return "partition set " + names[0] if len(names) == 1 else "merged block [" + " + ".join(names) + "]"

    order = [pvars.index(v) for v in default_merge_order(config)]
    plan: BlockPlan = plan_blocks(ps_codes, profiles, xi=xi, theta=theta, kmin=km,
                                  theta_mode=config.risk.theta, policy=config.risk.small_blocks,
                                  merge_along=order, describe=describe)

    cell_prb = np.where(sensitive, plan.block_of_partition_set[cell_ps], -1)
    # local index of each sensitive cell inside its PRB (cells sorted by global index)
    sens_cells = np.flatnonzero(cell_prb >= 0)
    sens_cells = sens_cells[np.argsort(cell_prb[sens_cells], kind="stable")]
    prb_of_sens = cell_prb[sens_cells]
    starts = np.searchsorted(prb_of_sens, np.arange(len(plan.blocks)))
    cell_local = np.full(cells.n_cells, -1, dtype=np.int64)
    cell_local[sens_cells] = np.arange(sens_cells.size) - starts[prb_of_sens]

    # records of the PRBs in canonical order: (PRB, cell, tiebreak)
    rec_cell = cells.record_cell
    rec_prb = cell_prb[rec_cell]
    rows = np.flatnonzero(rec_prb >= 0)
    tb = _tiebreak(frame, rows, config.input.id_column)
    rows = rows[np.lexsort((tb, rec_cell[rows], rec_prb[rows]))]
    row_prb = rec_prb[rows]
    bounds = np.searchsorted(row_prb, np.arange(len(plan.blocks) + 1))

    released_cell = rec_cell.copy()
    changed_per_block = np.zeros(len(plan.blocks), dtype=np.int64)
    for b, blk in enumerate(plan.blocks):
        seg = rows[bounds[b]:bounds[b + 1]]
        c = rec_cell[seg]
        rng = stream(seed, "prb:" + " + ".join(ps_labels[m] for m in blk.members))
        dest_local = post_randomize(cell_local[c], t[c], blk.k, blk.theta, rng)
        block_cells = sens_cells[starts[b]:starts[b] + blk.k]
        released_cell[seg] = block_cells[dest_local]
        changed_per_block[b] = int((block_cells[dest_local] != c).sum())

    # the released frame: every moved record takes all key values of its destination cell
    out = frame.drop(columns=list(config.input.drop))
    moved = np.flatnonzero(released_cell != rec_cell)
    if moved.size:
        for j, v in enumerate(keys):
            new_codes = cells.key_codes[released_cell[moved], j]
            diff = new_codes != cells.key_codes[rec_cell[moved], j]
            if not diff.any():
                continue
            pos = moved[diff]
            col = out[v].to_numpy(copy=True)
            if col.dtype != object and kvs[v].missing == "category":
                col = col.astype(object)
            col[pos] = _decode_values(kvs[v], new_codes[diff])
            out[v] = pd.Series(col, index=out.index, name=v).astype(frame[v].dtype)

    # eps-DP PRAM of the perturb: variables (non-key), after NZY
    out, dp_done = apply_perturbations(frame, out, config, seed)

    # certificate
    blocks_df = _blocks_frame(plan, ps_labels, km, changed_per_block, t_max)
    cert, cert_at = 0.0, {}
    if len(plan.blocks):
        i = int(np.argmax(blocks_df["max_risk"].to_numpy()))
        cert = float(blocks_df["max_risk"].iat[i])
        cert_at = {"source": "prb", "prb": i, "partition_key": blocks_df["partition_key"].iat[i],
                   "t": int(blocks_df["max_risk_t"].iat[i]), "a": int(blocks_df["max_risk_a"].iat[i])}
    if (~sensitive).any():
        t_ns = int(t[~sensitive].min())
        if 1.0 / t_ns > cert:
            cert, cert_at = 1.0 / t_ns, {"source": "non_sensitive", "t": t_ns, "a": t_ns}

    ps_frame = _partition_sets_frame(ps_labels, pvars, gens, ps_codes, cell_ps, t, sensitive,
                                     plan.block_of_partition_set)
    return ReleaseResult(out, blocks_df, cert, cert_at, xi, theta, km, ps_frame, cells, cell_ps,
                         cell_prb, released_cell, plan.merges, dp_done)


def _blocks_frame(plan: BlockPlan, ps_labels: list[str], km: int, changed: np.ndarray,
                  t_max: int) -> pd.DataFrame:
    rows = []
    for i, b in enumerate(plan.blocks):
        prof = b.profile_dict()
        row = {
            "prb": i,
            "partition_key": " + ".join(ps_labels[m] for m in b.members),
            "n_partition_sets": len(b.members),
            "k": b.k,
            "n_records": b.n_records,
            "profile": ", ".join(f"{t}:{m}" for t, m in prof.items()),
        }
        for tt in range(1, t_max + 1):
            row[f"cells_t{tt}"] = int(b.profile[tt]) if tt < b.profile.size else 0
        row.update({
            "theta": float(b.theta),
            "kmin": km,
            "max_risk": float(b.risk.max_risk),
            "max_risk_t": int(b.risk.t),
            "max_risk_a": int(b.risk.a),
            "action": b.action,
            "expected_changed": float(b.theta * b.k),
            "changed": int(changed[i]),
        })
        rows.append(row)
    cols = ["prb", "partition_key", "n_partition_sets", "k", "n_records", "profile",
            *[f"cells_t{tt}" for tt in range(1, t_max + 1)], "theta", "kmin", "max_risk",
            "max_risk_t", "max_risk_a", "action", "expected_changed", "changed"]
    return pd.DataFrame(rows, columns=cols)


def _partition_sets_frame(ps_labels, pvars, gens, ps_codes, cell_ps, t, sensitive,
                          block_of_ps) -> pd.DataFrame:
    n_ps = len(ps_labels)
    data: dict[str, Any] = {"partition_set": np.arange(n_ps), "partition_key": ps_labels}
    for i, (v, g) in enumerate(zip(pvars, gens, strict=True)):
        data[v] = [g.labels[c] for c in ps_codes[:, i]]
    data["n_records"] = np.bincount(cell_ps, weights=t, minlength=n_ps).astype(np.int64)
    data["n_cells"] = np.bincount(cell_ps, minlength=n_ps)
    data["n_sensitive_cells"] = np.bincount(cell_ps[sensitive], minlength=n_ps)
    data["n_sensitive_records"] = np.bincount(cell_ps[sensitive], weights=t[sensitive],
                                              minlength=n_ps).astype(np.int64)
    data["prb"] = block_of_ps
    return pd.DataFrame(data)
