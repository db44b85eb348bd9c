"""Composition protection of a household file (``risk.composition: protect``,
docs/HOUSEHOLDS.md "Protecting household composition").

The composition intruder knows a household's household-level keys (HK) and the multiset of
its members' person-level keys, and picks uniformly among the released households with
exactly these values. With the composition as a key of the household stage, this intruder is
NZY's intruder of the household table, and its risk is certified exactly:

- every person's **class** c(i) is its combination of person-key values (mixed-radix code of
  the released, e.g. recoded, person keys; at most :data:`MAX_CLASSES` classes);
- the **composition** of household h is the vector n_h = (n_{h,c})_c of its members per class
  (size |h| = sum_c n_{h,c}); compositions are numbered in lexicographic order of n;
- the **household stage** runs the unchanged NZY engine on the household table with keys
  HK x composition: cells (a, n) counted in households, partition sets = the HK partition x
  the household size (a PRB never mixes sizes: households keep their size), small PRBs merged
  along the HK partition variables only. Its certificate bounds
  R_(a,n) = E[1{h released as (a, n)} / #{released households in (a, n)}] <= xi
  for every household: the composition intruder's risk;
- a household released with composition n' != n is **realized** on its members: per class c
  the min(n_c, n'_c) members of smallest identity keep their class, the others (in class,
  identity order) take the missing classes (in class order). Every member keeps the
  household's released HK; the person stage does not run (person keys move only with their
  household's composition, so the released compositions are exactly the stage's).

A household whose size has fewer than kmin sensitive (HK, composition) cells over all HK
values cannot be certified without changing its size: the release stops (exit 2) naming the
sizes and the fixes (coarser person keys, fewer household keys, a larger xi, or withhold
``household_id``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import Groups, KeyVariable, ReleaseConfig
from sdc.errors import InputError
from sdc.method.cells import combine_codes, encode_key, split_codes
from sdc.method.unique_rows import unique_rows

__all__ = ["COMPOSITION", "MAX_CLASSES", "CompositionStage", "CompositionTable",
           "CompositionPlan", "class_codes", "composition_config", "composition_plan", "composition_stage", "plan_composition_stage",
           "singular_draw",
           "table_of_counts",
           "composition_table", "expected_persons_changed", "person_classes", "realize_compositions"]

COMPOSITION = "household_composition"
"""Name of the composition key of the household stage (never in the public file)."""

MAX_CLASSES = 64
"""Largest number of person classes (combinations of person-key values) a composition counts."""


def person_classes(frame: pd.DataFrame, config: ReleaseConfig) -> tuple[np.ndarray, int]:
    """(class of every person (n,) int64, number of classes P): the mixed-radix code of its
    person-level keys' codes. Raises :class:`InputError` when P > :data:`MAX_CLASSES`."""
    pk = config.person_keys
    sizes = [int(config.key_variables[k].size) for k in pk]
    n_cls = int(np.prod(sizes)) if sizes else 1
    if n_cls > MAX_CLASSES:
        raise InputError(
            f"risk.composition: protect counts household members per combination of the "
            f"person keys {pk}: {n_cls:,} combinations (sizes {sizes}), more than "
            f"{MAX_CLASSES}. Recode the person keys for a household file (e.g. age: {{recode: "
            "{bands: [0, 15, 30, 45, 65]}}), or make fewer of them keys")
    codes = [encode_key(frame[k], k, config.key_variables[k]).astype(np.int64) for k in pk]
    return combine_codes(codes, sizes, len(frame)), n_cls


@dataclass
class CompositionTable:
    """``counts`` (C, P) members per class of every composition (lexicographic order),
    ``size`` (C,) its household size, ``household`` (H,) the composition of every household."""

    counts: np.ndarray
    size: np.ndarray
    household: np.ndarray
    #: (P,) the missingness group of every person class
    #: (:mod:`sdc.method.household_missing`), None: one group
    group: np.ndarray | None = None
    #: the relations behind the groups (``py010n missing <=> age in {0-15}``)
    relations: tuple[str, ...] = ()
    #: (P,) the ``risk.member_bands`` band of every person class
    #: (:func:`sdc.method.household_missing.member_bands`), None without
    band: np.ndarray | None = None
    #: (C,) bool: compositions whose partition set ignores the bands (their banded set had
    #: one sensitive cell, too few for a PRB: :func:`sdc.method.household_missing.constrain`)
    unbanded: np.ndarray | None = None

    def constraint_note(self) -> str:
        """What a refusal says when the missingness groups constrain the stage, else ""."""
        if self.group is None:
            return ""
        return (" The person classes are split into missingness groups, and a member never "
                "leaves its group (a moved member would keep its missing values and show an "
                "impossible pattern): " + "; ".join(self.relations or ("a person column is "
                "missing for some classes only",)) + ". The partition sets are household size x "
                "members per group, which may leave too few households to protect. Fixes: "
                "coarser person keys within each group (fewer compositions), `risk."
                "small_blocks: calibrate`, a larger xi, or drop the column(s) named "
                "(`input.drop`): the constraint then goes with them.")

    @property
    def n_compositions(self) -> int:
        return int(self.size.size)

    def group_counts(self) -> np.ndarray:
        """(C, G) members per missingness group of every composition (G = 1 without
        groups)."""
        if self.group is None:
            return self.size[:, None]
        _, g = np.unique(np.asarray(self.group, np.int64), return_inverse=True)
        onehot = np.zeros((g.size, int(g.max()) + 1 if g.size else 0), np.int64)
        onehot[np.arange(g.size), g.reshape(-1)] = 1
        return self.counts @ onehot

    def band_counts(self) -> np.ndarray:
        """(C, B) members per (missingness group, member band) of every composition (B = 0
        without ``risk.member_bands``); -1 in the rows of the :attr:`unbanded` compositions."""
        if self.band is None:
            return np.zeros((self.size.size, 0), np.int64)
        grp = (np.zeros(self.band.size, np.int64) if self.group is None
               else np.asarray(self.group, np.int64))
        _, g = np.unique(grp * (int(self.band.max(initial=0)) + 1) + self.band,
                         return_inverse=True)
        onehot = np.zeros((g.size, int(g.max()) + 1 if g.size else 0), np.int64)
        onehot[np.arange(g.size), g.reshape(-1)] = 1
        out = self.counts @ onehot
        if self.unbanded is not None:
            out[np.asarray(self.unbanded, bool)] = -1
        return out

    def banded_households(self) -> np.ndarray | None:
        """(H,) bool: the households whose members keep their band (None without bands)."""
        if self.band is None:
            return None
        if self.unbanded is None:
            return np.ones(self.household.size, bool)
        return ~np.asarray(self.unbanded, bool)[self.household]

    def partition_set(self) -> np.ndarray:
        """(C,) the composition stage's partition set of every composition: its household
        size, and with missingness groups its members per group, with ``risk.member_bands``
        its members per group and band (the set's number: the size when there are no groups,
        so the released bytes do not change)."""
        gc = self.group_counts()
        bc = self.band_counts()
        if gc.shape[1] <= 1 and bc.shape[1] == 0:
            return self.size.astype(np.int64)
        _, inv = np.unique(np.column_stack([self.size, gc, bc]), axis=0, return_inverse=True)
        return inv.reshape(-1).astype(np.int64)

    def set_names(self) -> dict[int, str]:
        """Name of every partition set: ``size 4`` or ``size 4, groups 2+2`` (members of
        each missingness group, in group order)."""
        sets = self.partition_set()
        gc = self.group_counts()
        out = {}
        for s in np.unique(sets):
            c = int(np.flatnonzero(sets == s)[0])
            name = f"size {int(self.size[c])}"
            if gc.shape[1] > 1:
                name += ", groups " + "+".join(str(int(x)) for x in gc[c])
            bc = self.band_counts()
            if bc.shape[1] and bc[c, 0] >= 0:
                name += ", bands " + "+".join(str(int(x)) for x in bc[c])
            out[int(s)] = name
        return out


def composition_table(household: np.ndarray, person_class: np.ndarray, n_households: int,
                      n_classes: int) -> CompositionTable:
    """The compositions of ``n_households`` households from every person's household (0..H-1)
    and class (0..P-1): a (H, P) bincount, its distinct rows in lexicographic order (the
    missingness groups: :func:`sdc.method.household_missing.constrain`)."""
    hh = np.asarray(household, dtype=np.int64)
    counts = np.bincount(hh * n_classes + np.asarray(person_class, dtype=np.int64),
                         minlength=n_households * n_classes).reshape(n_households, n_classes)
    rows, inv = unique_rows(counts)
    return CompositionTable(rows.astype(np.int64), rows.sum(axis=1).astype(np.int64),
                            inv.reshape(-1).astype(np.int64))


def table_of_counts(counts: np.ndarray) -> CompositionTable:
    """The :class:`CompositionTable` of households given as (H, P) members per class (the
    batch engines' aggregate, :class:`sdc.method.household_batches.HouseholdAggregate`)."""
    counts = np.asarray(counts, dtype=np.int64)
    rows, inv = unique_rows(counts)
    return CompositionTable(rows, rows.sum(axis=1).astype(np.int64),
                            inv.reshape(-1).astype(np.int64))


def ordered_class_codes(config: ReleaseConfig) -> np.ndarray | None:
    """(P, q) codes of every person class in the ordered person keys (a ``range`` key or one
    recoded into bands / top-bottom classes: age), None without one."""
    from sdc.config.model import Bands, TopBottom

    pk = list(config.person_keys)
    ordered = []
    for v, k in enumerate(pk):
        kv = config.key_variables[k]
        recode = getattr(config.input_key_variables.get(k, kv), "recode", None)
        if kv.range is not None or isinstance(recode, Bands | TopBottom):
            ordered.append(v)
    if not ordered:
        return None
    sizes = [int(config.key_variables[k].size) for k in pk]
    return class_codes(np.arange(int(np.prod(sizes)), dtype=np.int64), config)[:, ordered]


def composition_config(hcfg: ReleaseConfig, table: CompositionTable,
                       classes: np.ndarray | None = None) -> ReleaseConfig:
    """The household stage's config (``hcfg``, :func:`sdc.method.households.household_config`)
    with the composition as one more key: categories 0..C-1, partitioned by household size x
    members per missingness group (:meth:`CompositionTable.partition_set`: a PRB never mixes
    sizes, a member never leaves its group), merges along the household keys' partition
    variables only. ``classes``: :func:`ordered_class_codes` (the matching kernel's cost)."""
    from sdc.method.plan import default_merge_order

    hk = list(hcfg.key_names)
    along = hcfg.risk.merge_along
    if along is None:
        along = [v for v in default_merge_order(hcfg) if v in hk]
    kvs = dict(hcfg.key_variables)
    kvs[COMPOSITION] = KeyVariable(categories=list(range(table.n_compositions)),
                                   level="household").with_composition_counts(table.counts,
                                                                               classes)
    sets = table.partition_set()
    groups = {name: [int(c) for c in np.flatnonzero(sets == s)]
              for s, name in table.set_names().items()}
    part = dict(hcfg.partition)
    part[COMPOSITION] = Groups(groups=groups)
    risk = hcfg.risk.model_copy(update={"merge_along": along})
    return hcfg.model_copy(update={"key_variables": kvs, "partition": part, "risk": risk})


def realize_compositions(household: np.ndarray, person_class: np.ndarray,
                         identity: np.ndarray, counts_before: np.ndarray,
                         counts_after: np.ndarray, group: np.ndarray | None = None,
                         band: np.ndarray | None = None, banded: np.ndarray | None = None
                         ) -> np.ndarray:
    """Released class of every person, given its household's composition before and after
    (``counts_before`` / ``counts_after``: (H, P) members per class).

    Per household and class c, the min(n_c, n'_c) members of smallest ``identity`` keep c; the
    other members (ordered by missingness group, class, then identity) take the classes
    n'_c - min(n_c, n'_c) (in group, then class order). ``group`` (P,): the classes'
    missingness groups (:mod:`sdc.method.household_missing`); the stage keeps every
    household's members per group, so a moved member takes a class of its own group. A
    household whose composition did not change keeps every class. ``band`` (P,) and
    ``banded`` (H,) bool (``risk.member_bands``, :meth:`CompositionTable.banded_households`):
    in a banded household the movers and the missing classes are ordered by group, band, then
    class, so a mover takes a class of its own band (the stage keeps the members per band).
    Whole arrays: one lexsort of the persons, one repeat of the missing classes."""
    hh = np.asarray(household, dtype=np.int64)
    cls = np.asarray(person_class, dtype=np.int64)
    ident = np.asarray(identity, dtype=np.uint64)
    out = cls.copy()
    before = np.asarray(counts_before, dtype=np.int64)
    after = np.asarray(counts_after, dtype=np.int64)
    changed_h = np.flatnonzero((before != after).any(axis=1))
    if changed_h.size == 0:
        return out
    is_changed = np.zeros(before.shape[0], dtype=bool)
    is_changed[changed_h] = True
    n_cls = before.shape[1]
    grp = (np.zeros(n_cls, np.int64) if group is None else np.asarray(group, np.int64))
    rows = np.flatnonzero(is_changed[hh])
    order = rows[np.lexsort((ident[rows], cls[rows], hh[rows]))]
    h_o, c_o = hh[order], cls[order]
    # occurrence of every person within its (household, class), 0-based
    new_grp = np.r_[True, (h_o[1:] != h_o[:-1]) | (c_o[1:] != c_o[:-1])]
    grp_start = np.flatnonzero(new_grp)
    occ = np.arange(order.size) - np.repeat(grp_start, np.diff(np.r_[grp_start, order.size]))
    keep = occ < after[h_o, c_o]
    movers = order[~keep]  # ordered by household, class, identity
    bnd = np.zeros(n_cls, np.int64) if band is None else np.asarray(band, np.int64)
    in_band = (np.zeros(before.shape[0], bool) if band is None else
               np.ones(before.shape[0], bool) if banded is None else np.asarray(banded, bool))

    def band_key(h: np.ndarray, c: np.ndarray) -> np.ndarray:
        return np.where(in_band[h], bnd[c], 0)

    movers = movers[np.argsort(band_key(hh[movers], cls[movers]), kind="stable")]
    movers = movers[np.argsort(grp[cls[movers]], kind="stable")]
    movers = movers[np.argsort(hh[movers], kind="stable")]  # household, group, band, class, id
    deficit = np.maximum(after[changed_h] - before[changed_h], 0)  # (m, P)
    by_group = np.lexsort((np.arange(n_cls), grp))  # the classes in group, class order
    deficit = deficit[:, by_group]
    h_rep = np.repeat(changed_h, deficit.sum(axis=1))
    c_rep = np.repeat(np.tile(by_group.astype(np.int64), changed_h.size),
                      deficit.reshape(-1))
    if band is not None:  # household, group, band, class
        o = np.lexsort((c_rep, band_key(h_rep, c_rep), grp[c_rep], h_rep))
        h_rep, c_rep = h_rep[o], c_rep[o]
    # both lists are ordered by household (and group); equal lengths per household (sizes
    # are kept) and per group (members per group are kept)
    if not np.array_equal(hh[movers], h_rep):
        raise AssertionError("released compositions must keep every household's size")
    if group is not None and not np.array_equal(grp[cls[movers]], grp[c_rep]):
        raise AssertionError("released compositions must keep every household's members "
                             "per missingness group")
    if band is not None and not np.array_equal(band_key(hh[movers], cls[movers]),
                                               band_key(h_rep, c_rep)):
        raise AssertionError("released compositions must keep every banded household's "
                             "members per band (risk.member_bands)")
    out[movers] = c_rep
    return out


def class_codes(person_class: np.ndarray, config: ReleaseConfig) -> np.ndarray:
    """(n, q) codes of the person keys (config order of ``config.person_keys``) of classes."""
    sizes = [int(config.key_variables[k].size) for k in config.person_keys]
    return split_codes(np.asarray(person_class, dtype=np.int64), sizes)


def composition_summary(table: CompositionTable, before: np.ndarray,
                        after: np.ndarray, moved_persons: int) -> dict[str, Any]:
    """The audit/report figures of the composition stage."""
    return {"n_compositions": table.n_compositions, "n_classes": int(table.counts.shape[1]),
            "households_changed_composition": int((before != after).sum()),
            "persons_changed": int(moved_persons)}


@dataclass
class CompositionStage:
    """The household stage keyed on HK x composition (see the module docstring).

    ``plan`` the NZY plan of the (HK, composition) cells of the non-singular households (None
    when every household is singular); ``cell`` / ``released_cell`` every household's cell in
    ``cells_key_codes`` (its rows: HK codes then the composition); ``singular`` the households
    whose size cannot hold a PRB, released by :func:`singular_draw` (HK uniform over the
    ``n_hk`` household-key combinations of the file, composition kept: risk 1 / n_hk);
    ``certificate`` the larger of the plan's and 1 / n_hk (when there are singular households)."""

    plan: Any
    config: ReleaseConfig
    key_codes: np.ndarray
    released_codes: np.ndarray
    changed: np.ndarray
    singular: np.ndarray
    singular_sizes: list[int]
    n_hk: int
    certificate: float
    certificate_at: dict[str, Any]
    identity: np.ndarray
    singular_sets: list[int] = field(default_factory=list)

    @property
    def released_composition(self) -> np.ndarray:
        return self.released_codes[:, -1]


def singular_draw(identity: np.ndarray, hk_table: np.ndarray, seed: int) -> np.ndarray:
    """Released HK row (index into ``hk_table``, the distinct HK code rows of the file) of the
    singular households: uniform over the rows, keyed by the household's identity, so a
    household stays with probability exactly 1 / len(hk_table) (up to 2^-64)."""
    from sdc.method.draws import keyed_hash

    h = keyed_hash(seed, "household-composition-singular", np.asarray(identity, np.uint64))
    return (h % np.uint64(hk_table.shape[0])).astype(np.int64)


@dataclass
class CompositionPlan:
    """The plan of the composition stage (no draws: the audit recomputes it): ``plan`` over the
    cells of the non-singular households (``cells_of``: their cell rows in
    ``plan.partitioned.cells``), the singular sizes and households, the number of HK
    combinations and the certificate."""

    plan: Any
    config: ReleaseConfig
    codes: np.ndarray
    rows: np.ndarray
    cell: np.ndarray
    singular: np.ndarray
    singular_sizes: list[int]
    hk_table: np.ndarray
    certificate: float
    certificate_at: dict[str, Any]
    #: the partition sets (:meth:`CompositionTable.partition_set`) of the singular
    #: households (their sizes when there are no missingness groups)
    singular_sets: list[int] = field(default_factory=list)


def composition_plan(hk_codes: np.ndarray, table: CompositionTable,
                     config: ReleaseConfig, weight: np.ndarray | None = None,
                     rungs: dict[str, int] | None = None) -> CompositionPlan:
    """The composition stage's plan: cells (HK, composition) counted in households,
    partitioned by the HK partition x household size, :func:`~sdc.method.designs.plan_release`;
    a size whose sensitive cells cannot form a PRB (fewer than 2 with ``small_blocks:
    calibrate``, else fewer than kmin) is *singular*: its households are left out of the plan
    and released by :func:`singular_draw` (risk 1 / #HK combinations, which must be <= xi).
    ``weight`` (``risk.weighted``): x_h of every household (its members' summed weights): the
    plan then gets the weighted design (docs/HOUSEHOLDS.md, "Survey weights") and its
    certificate. ``rungs`` (partition key -> rung of ``near.weights``' ladder): the PRBs the
    dependence check flagged take lighter weights (:func:`sdc.method.designs.with_rungs`).
    Raises :class:`~sdc.errors.SmallBlockError` when neither certifies."""
    from sdc.errors import SmallBlockError
    from sdc.method.cell_passes import cell_table
    from sdc.method.cells import radix_sizes
    from sdc.method.content_memo import memo_plan
    from sdc.method.designs import design_of, plan_release, with_rungs
    from sdc.method.households import household_config, larger_certificate
    from sdc.method.partition import partition_cells

    hk_codes = np.asarray(hk_codes, np.int64).reshape(table.household.size, -1)
    n_h = table.household.size
    ccfg = composition_config(household_config(config), table, ordered_class_codes(config))
    codes = np.column_stack([hk_codes, table.household]).astype(np.int64)
    sizes = radix_sizes(ccfg)
    xi = float(config.risk.xi)

    def cells_of(rows: np.ndarray):
        code = combine_codes(codes[rows].T, sizes, rows.size)
        u, cell, t = np.unique(code, return_inverse=True, return_counts=True)
        return cell_table(u, t.astype(np.int64), ccfg), cell.reshape(-1).astype(np.int64)

    cells, _ = cells_of(np.arange(n_h, dtype=np.int64))
    part = partition_cells(cells, ccfg)
    cset = table.partition_set()  # the size (and members per missingness group)
    cell_set = cset[cells.key_codes[:, -1]]
    sens = np.bincount(cell_set[part.sensitive], minlength=int(cset.max()) + 1)
    limit = 2 if config.risk.small_blocks == "calibrate" else part.kmin
    singular_sets = [int(x) for x in np.flatnonzero((sens > 0) & (sens < limit))]
    plan, cell = None, np.zeros(0, np.int64)
    attempts = 2 + int(sens.size)
    for attempt in range(attempts):
        is_singular = np.isin(cset[table.household], singular_sets)
        rows = np.flatnonzero(~is_singular)
        if rows.size == 0:
            break
        cells, cell = cells_of(rows)
        try:
            x_h = None
            if weight is not None:
                from sdc.method.household_weights import household_weight_totals

                x_h = household_weight_totals(np.asarray(weight)[rows], cell, cells.n_cells)
            pc = partition_cells(cells, ccfg)
            design = with_rungs(design_of(ccfg), rungs or {})
            plan = memo_plan(cells, ccfg, x_h, design,  # the same cells: the same plan
                             lambda p=pc, x=x_h, d=design: plan_release(p, ccfg, x, design=d))
            break
        except SmallBlockError as e:
            failed = getattr(e, "partition_sets", None)
            if failed and part.kmin > limit:
                # the sets of the blocks no theta certifies (a PRB of 2 cells of one
                # household each) become singular, and only they (issue 44: before, every
                # set with fewer than kmin sensitive cells did, and all their households
                # drew their household keys)
                bad = np.isin(np.asarray(pc.cell_partition_set, np.int64), failed)
                new = set(int(x) for x in cset[cells.key_codes[bad, -1]]) - set(singular_sets)
                if new:
                    singular_sets = sorted(set(singular_sets) | new)
                    continue
            if attempt >= 1 or part.kmin <= limit:
                if table.group is not None:
                    raise SmallBlockError(str(e) + table.constraint_note()) from None
                raise
            singular_sets = [int(x) for x in np.flatnonzero((sens > 0) & (sens < part.kmin))]
    singular_sizes = sorted({int(x) for x in table.size[np.isin(cset, singular_sets)]})
    cert, cert_at = (0.0, {}) if plan is None else (float(plan.certificate),
                                                    dict(plan.certificate_at))
    hk_table = np.unique(hk_codes, axis=0)
    sing = np.flatnonzero(is_singular)
    if sing.size:  # the uniform HK draw must not move the member count (issue 44)
        from sdc.method.household_size import refuse_singular_size_keys, size_keys

        hk_names = list(config.household_keys)
        refuse_singular_size_keys(singular_sizes, hk_codes[sing], hk_names,
                                  int(hk_table.shape[0]),
                                  size_keys(hk_codes, table.size[table.household], hk_names,
                                            config), config.risk.small_blocks)
        q = 1.0 / hk_table.shape[0]
        if q > xi:
            raise SmallBlockError(
                f"households of size {singular_sizes} have too few rare compositions for a "
                f"PRB of their size, and the file has only {hk_table.shape[0]} combination(s) "
                f"of the household keys to move them among (risk 1/{hk_table.shape[0]} > xi "
                f"= {xi}). Coarsen the person keys, add a household key, or withhold the "
                "household id (a person file)." + table.constraint_note())
        cert, cert_at = larger_certificate((cert, cert_at), (q, {
            "source": "singular households", "singular_household_sizes": singular_sizes,
            "household_key_combinations": int(hk_table.shape[0])}))
    return CompositionPlan(plan, ccfg, codes, rows, cell, sing, singular_sizes, hk_table,
                           cert, cert_at, singular_sets)


def plan_composition_stage(hk_codes: np.ndarray, table: CompositionTable, config: ReleaseConfig,
                           weight: np.ndarray | None = None,
                           rungs: dict[str, int] | None = None) -> tuple[CompositionPlan, Any]:
    """(:func:`composition_plan`, its draw plan or None): what every draw of the composition
    stage with the same households shares, whatever the seed."""
    from sdc.method.plan import draw_plan

    cp = composition_plan(hk_codes, table, config, weight, rungs)
    return cp, (draw_plan(cp.plan, cp.config) if cp.plan is not None else None)


def composition_stage(identity: np.ndarray, hk_codes: np.ndarray, table: CompositionTable,
                      config: ReleaseConfig, seed: int,
                      weight: np.ndarray | None = None, *,
                      planned: tuple[CompositionPlan, Any] | None = None) -> CompositionStage:
    """The household stage of ``risk.composition: protect`` on the household aggregate:
    ``identity`` (H,) the households' draw identities (distinct), ``hk_codes`` (H, p) their
    household-key codes, ``table`` their compositions; :func:`composition_plan`, then every
    drawing household's released cell drawn with its identity (NZY PRAM), every singular
    household's HK by :func:`singular_draw`. ``planned``: (:func:`composition_plan`, its
    ``draw_plan``) of the same arguments, for replays of the draw with other seeds (the plan
    does not depend on the seed: a weighted composition stage's calibration is the costly
    part)."""
    from sdc.method.draws import draw_tiebreak, unique_identities
    from sdc.method.postrandomize import released_cells

    ident = np.asarray(identity, np.uint64)
    cp, dplan = planned if planned is not None else plan_composition_stage(
        hk_codes, table, config, weight)
    codes, rows, cell, plan = cp.codes, cp.rows, cp.cell, cp.plan
    released = codes.copy()
    drawing_ident = np.zeros(0, np.uint64)
    if plan is not None:
        cells = plan.partitioned.cells
        rel = cell.copy()
        d = np.flatnonzero(dplan.cell_prb[cell] >= 0)
        if d.size:
            drawing_ident = unique_identities(ident[rows[d]],
                                              draw_tiebreak(dplan.cell_id[cell[d]], True))
            rel[d] = released_cells(dplan, cell[d], drawing_ident, seed)
        released[rows] = cells.key_codes[rel]
    if cp.singular.size:
        released[cp.singular, :-1] = cp.hk_table[singular_draw(ident[cp.singular], cp.hk_table,
                                                               seed)]
    changed = (released != codes).any(axis=1)
    return CompositionStage(plan, cp.config, codes, released, changed, cp.singular,
                            cp.singular_sizes, int(cp.hk_table.shape[0]), cp.certificate,
                            cp.certificate_at, drawing_ident, cp.singular_sets)


def expected_persons_changed(cp: CompositionPlan | CompositionStage, table: CompositionTable,
                             chunk: int = 1 << 18) -> tuple[float, float]:
    """(E, Var) of the persons whose released keys differ from their own under the composition
    stage's plan ``cp`` (or a drawn stage: its plan; the release's "records changed"), exact
    and seed-free.

    A household of cell j = (a, n) (size s) is released in cell j' = (a', n') with probability
    P_jj' = m_j w_jj' (the plan's design: NZY's uniform W, the near W or the weighted design,
    per PRB). It then changes c(j, j') persons: all s when a' != a (every member takes the
    released HK), else s - sum_c min(n_c, n'_c) (:func:`realize_compositions` keeps
    min(n_c, n'_c) members of class c). So E = sum_j t_j sum_j' P_jj' c(j, j'); the draws of
    the households are independent, so Var = sum_j t_j (sum_j' P_jj' c^2 - (sum_j' P_jj' c)^2).
    A singular household changes all s members unless its uniform HK draw returns its own HK
    (probability 1 / #HK): E = s p, Var = s^2 p (1 - p), p = 1 - 1 / #HK. Non-sensitive cells
    do not move. Loops over PRBs (and chunks of W's entries), not over households."""
    from sdc.method.transition import uniform_transition

    mean = var = 0.0
    if cp.singular.size:
        s = table.size[table.household[cp.singular]].astype(np.float64)
        n_hk = cp.n_hk if isinstance(cp, CompositionStage) else cp.hk_table.shape[0]
        p = 1.0 - 1.0 / n_hk
        mean += float(s.sum() * p)
        var += float((s * s).sum() * p * (1.0 - p))
    plan = cp.plan
    if plan is None:
        return mean, var
    codes = np.asarray(plan.partitioned.cells.key_codes, np.int64)
    t_all = np.asarray(plan.partitioned.cells.frequency, np.float64)
    hk, comp = codes[:, :-1], codes[:, -1]
    for b, blk in enumerate(plan.block_plan.blocks):
        start = int(plan.prb_start[b])
        tr = (plan.transitions[b] if plan.transitions is not None else None)
        k = tr.k if tr is not None else int(blk.k)
        cells = np.asarray(plan.prb_cells[start:start + k], np.int64)
        if tr is None:
            tr = uniform_transition(t_all[cells].astype(np.int64), float(blk.theta))
        indptr, indices, weights = tr.csr()
        rows = np.repeat(np.arange(k), np.diff(indptr))
        e1, e2 = np.zeros(k), np.zeros(k)
        for lo in range(0, rows.size, chunk):
            r, d = cells[rows[lo:lo + chunk]], cells[indices[lo:lo + chunk]]
            p = tr.move[rows[lo:lo + chunk]] * weights[lo:lo + chunk]
            kept = np.minimum(table.counts[comp[r]], table.counts[comp[d]]).sum(axis=1)
            s = table.size[comp[r]]
            c = np.where((hk[r] == hk[d]).all(axis=1), s - kept, s).astype(np.float64)
            e1 += np.bincount(rows[lo:lo + chunk], weights=p * c, minlength=k)
            e2 += np.bincount(rows[lo:lo + chunk], weights=p * c * c, minlength=k)
        t = t_all[cells]
        mean += float((t * e1).sum())
        var += float((t * (e2 - e1 * e1)).sum())
    return mean, var
