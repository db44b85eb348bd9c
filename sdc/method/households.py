"""Household files: persons grouped by ``input.household_id`` (docs/HOUSEHOLDS.md).

Household-level keys (``level: household``) and declared ``input.household_columns`` belong to
the household: :func:`check_households` refuses a file in which one of them differs between
the members of a household (every violating household counted, the first listed by id), so the
release can post-randomize them once per household and give every member the same values.

Like :mod:`sdc.method.partition` this module touches records, on whole columns only: the
household of every person is one ``pandas.factorize`` of the id column, and a column is
constant within households iff its per-household minimum and maximum code agree
(``numpy.minimum.reduceat`` over the persons sorted by household).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.method.cells import combine_codes, fits_one_code
from sdc.method.derived import DerivedCollector, DerivedError
from sdc.method.designs import design_of, household_design_of
from sdc.method.draws import keyed_hash
from sdc.method.generalize import generalize_domain
from sdc.method.plan import default_merge_order

__all__ = ["MAX_LISTED", "check_households", "weight_per_household", "extended_partition_sets", "household_codes",
           "household_config",
           "household_classes", "household_derived", "household_perturb", "household_table",
           "person_config", "person_derived", "person_derived_values", "person_key_code",
           "larger_certificate", "pseudonyms", "row_index", "small_classes"]

T = TypeVar("T")

MAX_LISTED = 20
"""Violating households listed by id per column (the message gives the full count)."""


def household_codes(frame: pd.DataFrame, config: ReleaseConfig) -> tuple[np.ndarray, np.ndarray]:
    """(code, first): every person's household 0..H-1 (in order of first appearance) and the
    row of every household's first member. Raises :class:`InputError` for persons without a
    household id or a missing household id column."""
    hid = config.input.household_id
    if hid is None:
        raise ValueError("not a household file: input.household_id is not set")
    if hid not in frame.columns:
        raise InputError(f"column {hid!r} (named in input.household_id) is not in the input, "
                         f"which has columns {list(frame.columns)[:20]}; fix the name in the "
                         "config or the input header")
    col = frame[hid]
    isna = col.isna().to_numpy()
    if isna.any():
        rows = ", ".join(str(r) for r in np.flatnonzero(isna)[:5] + 1)
        raise InputError(f"column {hid!r} (input.household_id): {int(isna.sum())} row(s) have no "
                         f"household id (rows {rows}); every person needs a household: fill "
                         "them in (a one-person household gets an id of its own)")
    code, _ = pd.factorize(col, sort=False)
    code = code.astype(np.int64, copy=False)
    n_h = int(code.max()) + 1 if code.size else 0
    first = np.full(n_h, code.size, dtype=np.int64)
    np.minimum.at(first, code, np.arange(code.size, dtype=np.int64))
    return code, first


def check_households(frame: pd.DataFrame, config: ReleaseConfig) -> None:
    """Refuse a household file whose household-level columns vary within a household.

    Checks the household-level keys and ``input.household_columns``; a missing value counts as
    a value (two members, one empty, differ). Raises :class:`InputError` naming, per column,
    how many households violate it and the first :data:`MAX_LISTED` of their ids (in id order)
    with the values found, and the fix.
    """
    if config.input.household_id is None:
        return
    cols = config.household_keys + list(config.input.household_columns)
    cols += [w for w in [weight_per_household(config)] if w and w not in cols]
    missing = [c for c in config.input.household_columns if c not in frame.columns]
    if missing:
        raise InputError(f"column(s) {missing} (named in input.household_columns) are not in the "
                         f"input, which has columns {list(frame.columns)[:20]}; fix the names")
    code, first = household_codes(frame, config)
    if code.size == 0:
        return
    order = np.argsort(code, kind="stable")
    sc = code[order]
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
    hh_of_start = sc[starts]
    problems = []
    hid = config.input.household_id
    for c in cols:
        if c not in frame.columns:
            continue  # a missing key column is reported by the key checks
        v, uniques = pd.factorize(frame[c], use_na_sentinel=False)
        vs = v[order]
        bad = np.minimum.reduceat(vs, starts) != np.maximum.reduceat(vs, starts)
        if not bad.any():
            continue
        bad_h = hh_of_start[bad]
        ids = frame[hid].to_numpy()[first[bad_h]]
        listed = np.sort(ids)[:MAX_LISTED] if ids.dtype != object else sorted(ids, key=str)[:MAX_LISTED]
        examples = []
        for h_id in listed[:3]:
            members = frame[c][frame[hid] == h_id]
            vals = sorted({str(x) for x in members.tolist()})
            examples.append(f"{h_id}: {', '.join(vals[:5])}")
        n_bad = int(bad.sum())
        more = f" (first {MAX_LISTED} of {n_bad} listed)" if n_bad > MAX_LISTED else ""
        why = ("" if c != weight_per_household(config) else
               " (input.weight under risk.composition: protect with risk.weighted: a household "
               "released with another composition hands its members' weights to other person "
               "classes, so the person-weighted totals stay exact only when the members share "
               "one weight; use a household-level weight column as input.weight, or "
               "risk.composition: measure, or risk.weighted: false)")
        problems.append(
            f"column {c!r} differs within {n_bad} household(s){more}{why}: "
            f"{', '.join(str(x) for x in listed)}; values found e.g. {'; '.join(examples)}")
        del uniques
    if problems:
        raise InputError(
            "household-level columns must have one value per household (input.household_id "
            f"{hid!r}):\n  " + "\n  ".join(problems) + "\nFix the input (give every member the "
            "household's value), or declare the variable level: person / remove it from "
            "input.household_columns if it really belongs to the person")


def weight_per_household(config: ReleaseConfig) -> str | None:
    """``input.weight`` when it must be constant within households (``risk.composition:
    protect`` with ``risk.weighted``: docs/HOUSEHOLDS.md, "Survey weights"; ``input.
    weight_release: recalibrated``), else None."""
    if design_of(config).weighted and household_design_of(config).protect:
        return config.input.weight
    if config.input.weight_release == "recalibrated":  # a household weight, post-stratified
        return config.input.weight
    return None


# -- the two stages of a household release -------------------------------------------------------
def larger_certificate(first: tuple[float, T], second: tuple[float, T]) -> tuple[float, T]:
    """A household file's certificate from two of its parts, each ``(certificate, where)``:
    max_j,a R_j(a, t) over both (the person stage's and the household stage's; the
    composition stage's plan and its singular households' 1 / #HK); a tie is ``first``'s."""
    return second if second[0] > first[0] else first


def household_config(config: ReleaseConfig) -> ReleaseConfig:
    """The config of the household stage: the household table (one unit per household, id
    ``input.household_id``), the household-level keys, their partition rules and merge order.

    Draw identities are then the household ids (:func:`sdc.method.draws.record_identity` of the
    id column), so a household's released values are stable over reruns and series."""
    hk = config.household_keys
    inp = config.input.model_copy(update={
        "id_column": config.input.household_id, "drop": [], "weight": None, "labels": {},
        "household_id": None, "household_columns": []})
    along = config.risk.merge_along
    risk = config.risk.model_copy(update={
        "merge_along": None if along is None else [v for v in along if v in hk]})
    return config.model_copy(update={
        "input": inp, "key_variables": {k: config.key_variables[k] for k in hk},
        "partition": {k: r for k, r in config.partition.items() if k in hk},
        "risk": risk, "perturb": household_perturb(config),
        "derived": household_derived(config)})


def household_perturb(config: ReleaseConfig) -> dict:
    """The ``perturb:`` variables of the household level (listed in
    ``input.household_columns``): DP-PRAM once per household (on the household table, drawn
    with the household's identity), every member taking the household's value. The others are
    perturbed per person."""
    cols = set(config.input.household_columns)
    return {v: spec for v, spec in (config.perturb or {}).items() if v in cols}


def household_derived(config: ReleaseConfig) -> list[str]:
    """The ``derived:`` columns of the household level (listed in
    ``input.household_columns``): a function of the household-level keys, recomputed by the
    household stage from each household's released household keys; every member takes its
    household's value."""
    cols = set(config.input.household_columns)
    return [c for c in config.derived if c in cols]


def person_derived(config: ReleaseConfig) -> list[str]:
    """The other ``derived:`` columns of a household file: functions of the person-level keys
    alone (:func:`person_derived_values`), recomputed from every person's released person keys
    (the household stage never changes them; a column that depends on a household key belongs
    in ``input.household_columns``)."""
    cols = set(config.input.household_columns)
    return [c for c in config.derived if c not in cols]


def person_key_code(key_codes: np.ndarray, config: ReleaseConfig) -> np.ndarray:
    """(n,) int64 mixed-radix code of the person-level keys of ``key_codes`` ((n, p) codes of
    every key, config order): the cell id of :func:`person_derived_values`' mapping, the same
    in every batch."""
    names, pk = config.key_names, config.person_keys
    key_codes = np.asarray(key_codes, dtype=np.int64).reshape(-1, len(names))
    return combine_codes((key_codes[:, names.index(k)] for k in pk),
                         [int(config.key_variables[k].size) for k in pk], key_codes.shape[0])


def person_derived_values(collector: DerivedCollector, codes: np.ndarray,
                          config: ReleaseConfig) -> dict[str, pd.Series]:
    """The value of every person-level ``derived:`` column per person-key combination
    (``codes``: the sorted :func:`person_key_code` of the cell table's cells; ``collector``:
    the persons' values added with their :func:`person_key_code`). Raises
    :class:`~sdc.method.derived.DerivedError` when a combination of the person keys holds two
    values (the column depends on something else: a household key, or nothing at all)."""
    pk = config.person_keys
    sizes = [int(config.key_variables[k].size) for k in pk]

    def describe(j: int) -> str:
        code, parts = int(codes[j]), []
        for k, s in zip(reversed(pk), reversed(sizes), strict=True):
            code, c = divmod(code, s)
            dom = config.key_variables[k].domain
            parts.append(f"{k}={dom[c]!r}" if c < len(dom) else f"{k}=<missing>")
        return ", ".join(reversed(parts))

    out = {}
    for c in collector.columns:
        try:
            out[c] = collector.values(c, codes, describe)
        except DerivedError as e:
            raise DerivedError(
                f"{e}. In a household file a derived column is recomputed from the person "
                f"keys {pk} (the cells above are theirs); one that is a function of the "
                f"household keys {config.household_keys} goes in input.household_columns"
            ) from None
    return out


def person_config(config: ReleaseConfig) -> ReleaseConfig:
    """The config of the person stage: every key, partition sets made of the household-level
    keys' own values (``as_is``: a person's PRB never mixes household-key values, so PRAM of
    the person keys leaves the household keys alone) and the person keys' rules; small PRBs
    are merged along the person-level partition variables only."""
    hk = config.household_keys
    part: dict = {k: "as_is" for k in hk}
    part.update({k: r for k, r in config.partition.items() if k not in hk})
    along = [v for v in default_merge_order(config) if v not in hk]
    risk = config.risk.model_copy(update={"merge_along": along})
    inp = config.input.model_copy(update={"household_id": None})
    # DP-PRAM of the person-level perturb: variables runs after both stages, over every person
    # (the household pipeline, sdc.pipeline.households); the person stage itself perturbs nothing
    return config.model_copy(update={"input": inp, "partition": part, "risk": risk,
                                     "perturb": {}})


def household_table(frame: pd.DataFrame, config: ReleaseConfig,
                    code: np.ndarray, first: np.ndarray) -> pd.DataFrame:
    """One row per household (its first member's household id, household-level keys and the
    ``input.household_columns`` the frame has), households in order of first appearance."""
    cols = [config.input.household_id, *config.household_keys,
            *[c for c in config.input.household_columns if c in frame.columns]]
    return frame[cols].iloc[first].reset_index(drop=True)


def pseudonyms(identity: np.ndarray, seed: int, salt: int) -> np.ndarray:
    """Public household ids 1..H: the rank of every household's keyed hash
    ``keyed_hash(seed, "household-pseudonym:<salt>", identity)`` (``identity`` the distinct draw
    identities of the households, from their ids). A keyed permutation: neither the original
    ids nor the input order can be read off it without the seed; ``salt`` (the release's cell
    table digest, as the public row order) makes two releases of a series number differently."""
    h = keyed_hash(seed, f"household-pseudonym:{int(salt)}", np.asarray(identity, np.uint64))
    order = np.lexsort((np.asarray(identity, np.uint64), h))
    out = np.empty(h.size, dtype=np.int64)
    out[order] = np.arange(1, h.size + 1, dtype=np.int64)
    return out


def row_index(table: np.ndarray, rows: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Index of every row of ``rows`` in ``table`` (both (m, p) int64 code arrays, ``table``
    in lexicographic order and duplicate-free; -1 where absent): one mixed-radix code per row
    and a binary search when the cross-product fits in 62 bits, else a pandas MultiIndex."""
    table = np.asarray(table, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    if fits_one_code(sizes):
        t = combine_codes(table.T, sizes, table.shape[0])
        r = combine_codes(rows.T, sizes, rows.shape[0])
        pos = np.searchsorted(t, r)
        pos = np.minimum(pos, max(t.size - 1, 0))
        hit = (t[pos] == r) if t.size else np.zeros(r.size, dtype=bool)
        return np.where(hit, pos, -1).astype(np.int64)
    mi = pd.MultiIndex.from_arrays(list(table.T))
    return mi.get_indexer(pd.MultiIndex.from_arrays(list(rows.T))).astype(np.int64)


def small_classes(part, config: ReleaseConfig) -> tuple[int, np.ndarray]:
    """(number of classes, per-person flag) of the household-key classes with fewer than kmin
    sensitive person cells (``part``: the person stage's :class:`Partitioned`): no person PRB
    inside such a class can be certified, so the person stage leaves it out."""
    cell_class, n_cls = household_classes(part.cells.key_codes, part.cells.names, config)
    k_class = np.bincount(cell_class[part.sensitive], minlength=n_cls)
    small = (k_class > 0) & (k_class < part.kmin)
    return int(small.sum()), small[cell_class[part.cells.record_cell]]


def household_classes(key_codes: np.ndarray, names: list[str],
                      config: ReleaseConfig) -> tuple[np.ndarray, int]:
    """(class of every cell, number of classes): the household-key class of every cell of a
    cell table over all keys (its household-level keys' codes), classes numbered in
    lexicographic order (one mixed-radix code per cell, no row-wise sort)."""
    hk = config.household_keys
    sizes = [config.key_variables[k].size for k in hk]
    sub = np.asarray(key_codes, dtype=np.int64)[:, [names.index(k) for k in hk]]
    if fits_one_code(sizes):
        u, inv = np.unique(combine_codes(sub.T, sizes, sub.shape[0]), return_inverse=True)
    else:
        u, inv = np.unique(sub, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(u.shape[0])


def extended_partition_sets(ps: pd.DataFrame, cell_partition_set: np.ndarray,
                            pcfg: ReleaseConfig, table: np.ndarray,
                            orig_map: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """Partition set of every cell of the extended table ``table`` (the person stage's
    partition sets ``ps`` with the set of every counted cell, ``cell_partition_set``, at rows
    ``orig_map``; plus empty sets for released combinations whose partition set was empty)."""
    n_u = table.shape[0]
    cell_ps = np.full(n_u, -1, dtype=np.int64)
    cell_ps[orig_map] = cell_partition_set
    if n_u == orig_map.size:
        return cell_ps, ps
    keys = pcfg.key_names
    pvars = pcfg.partition_variables
    kvs = pcfg.key_variables
    gens = [generalize_domain(v, kvs[v], pcfg.partition[v]) for v in pvars]
    g_sizes = [len(g.labels) for g in gens]
    g_all = np.column_stack([g.code_map[table[:, keys.index(v)]]
                             for v, g in zip(pvars, gens, strict=True)]).astype(np.int64)
    ps_codes = g_all[orig_map]
    # the person stage's partition sets: codes of their cells (lexicographic, as encode_cells)
    known = np.zeros((len(ps), len(pvars)), dtype=np.int64)
    known[cell_partition_set] = ps_codes
    new_rows = np.flatnonzero(cell_ps < 0)
    extra = np.unique(g_all[new_rows], axis=0)
    idx = row_index(known, extra, g_sizes)
    extra = extra[idx < 0]
    both = np.vstack([known, extra])
    order = np.lexsort(both.T[::-1])
    both_sorted = both[order]
    pos = row_index(both_sorted, g_all[new_rows], g_sizes)
    # partition sets keep their numbers, the new ones are numbered after them: ``order[p]``
    # is the number of the partition set at sorted position p
    cell_ps[new_rows] = order[pos]
    if extra.shape[0]:
        rows = []
        for i, codes in enumerate(extra):
            row = {"partition_set": len(ps) + i,
                   "partition_key": " | ".join(f"{v}={g.labels[c]}" for v, g, c
                                               in zip(pvars, gens, codes, strict=True))}
            for v, g, c in zip(pvars, gens, codes, strict=True):
                row[v] = g.labels[c]
            row.update({"n_records": 0, "n_cells": 0, "n_sensitive_cells": 0,
                        "n_sensitive_records": 0, "prb": -1})
            rows.append(row)
        ps = pd.concat([ps, pd.DataFrame(rows, columns=ps.columns)], ignore_index=True)
    return cell_ps, ps
