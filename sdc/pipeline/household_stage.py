"""The household stage of the one pipeline (docs/HOUSEHOLDS.md "Engines"): what the passes
(:mod:`sdc.pipeline.passes`) add to a batch of a household file, before and around its
person stage (:class:`HouseholdFileStage`): the person cells counted with the household table's
part, the group ids (each person's household row in the count's aggregate), the person
draws inside the household cells the household stage released, the changed households'
persons and compositions, the released household-level and person-level ``derived:`` and
``perturb:`` columns (:class:`ReleasedColumns`), the public table with household pseudonyms
spilled by pseudonym."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.method.cell_passes import CellLocator
from sdc.method.cells import CellTable, cell_codes, radix_sizes, split_codes
from sdc.method.derived import DerivedCollector, apply_derived
from sdc.method.draws import all_identities, record_identity
from sdc.method.household_batches import (
    HouseholdCounter,
    add_person_dependence,
    drawing_persons,
    household_identity,
    lookup_households,
    person_dependence_counter,
    person_draw_identities,
    person_draw_plan,
    released_person_codes,
)
from sdc.method.households import (
    household_perturb,
    person_config,
    person_derived,
    person_key_code,
)
from sdc.method.households import row_index as _row_index
from sdc.method.perturb import PerturbValues, perturb_batch
from sdc.pipeline.count_parts import CountPart
from sdc.pipeline.household_public import (
    ChangedHouseholdPersons,
    household_bucket_keys,
    household_public_batch,
)
from sdc.pipeline.passes import IdentityPart, Released

__all__ = ["HouseholdCountPart", "HouseholdFileStage", "ReleasedColumns", "person_perturb_config"]


@dataclass
class HouseholdCountPart(CountPart):
    """One batch's part of the household count pass: the shared part
    (:class:`sdc.pipeline.count_parts.CountPart`), the household table's part and the
    household keys' dtypes."""

    households: HouseholdCounter | None = None
    dtypes: dict[str, Any] = field(default_factory=dict)


def person_perturb_config(config: ReleaseConfig) -> ReleaseConfig | None:
    """The person stage's config with the person-level ``perturb:`` variables (their draws'
    identities, as the pandas engine's), None when there are none."""
    hh = household_perturb(config)
    person_vars = {v: sp for v, sp in config.perturb.items() if v not in hh}
    if not person_vars:
        return None
    return person_config(config).model_copy(update={"perturb": person_vars})


@dataclass
class ReleasedColumns:
    """The released ``derived:`` and ``perturb:`` columns of a household file, for every
    batch: the household-level ones per household (:func:`household_values`: every member
    takes its household's), the person-level DP-PRAM designs and derived mapping (per
    :func:`person_key_code`, ``codes`` sorted)."""

    households: pd.DataFrame | None
    designs: list
    codes: np.ndarray | None
    derived: dict[str, pd.Series]

    def apply(self, frame: pd.DataFrame, household_row: np.ndarray, key_codes: np.ndarray,
              released_codes: np.ndarray, identity: np.ndarray | None, config: ReleaseConfig,
              seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        """``frame`` with the released columns (key values untouched) and the persons changed
        per person-level perturbed variable."""
        out = frame.copy(deep=False)
        if self.households is not None:
            for v in self.households.columns:
                col = self.households[v]
                out[v] = pd.Series(col.to_numpy()[household_row], index=out.index,
                                   name=v, copy=False).astype(col.dtype)
        changed = np.zeros(len(self.designs), dtype=np.int64)
        if self.designs:
            out, changed = perturb_batch(frame, out, self.designs, identity, seed)
        if self.derived:
            out = apply_derived(
                out, np.searchsorted(self.codes, person_key_code(key_codes, config)),
                np.searchsorted(self.codes, person_key_code(released_codes, config)),
                self.derived)
        return out, changed


@dataclass
class HouseholdFileStage:
    """A household file's stages as the passes see them: the count needs only ``config``;
    the identity pass the person cells (``locate``, ``cells``), the household table's
    identities, both stages' plans (``ps``, ``hs``) and the dependence columns; the apply pass
    the release's extended cell table (``table``, ``orig``: each counted cell's row in it),
    the pseudonyms, the public schema and salt, the released columns and compositions."""

    config: ReleaseConfig
    locate: CellLocator | None = None
    household_ids: np.ndarray | None = None  #: the household table's identities (sorted)
    cells: CellTable | None = None
    ps: Any = None  #: the person stage's plan
    hs: Any = None  #: the household stage's result
    dependence_columns: dict[str, str | None] | None = None  #: input name -> pairs' kind
    seed: int = 0
    n_households: int = 0
    table: CellTable | None = None
    orig: np.ndarray | None = None
    pseudo: np.ndarray | None = None
    schema: pa.Schema | None = None
    salt: Any = None
    columns: ReleasedColumns | None = None
    realized: Any = None  #: the composition stage's (rows, classes), or None
    kind: ClassVar[str] = "household"  #: the stage's name (the Dask crash-test hook's)
    part_type: ClassVar[type[CountPart]] = HouseholdCountPart

    def count(self, frame: pd.DataFrame, part: HouseholdCountPart) -> None:
        """Pass 1 on one batch without problems: its person cells, ``perturb:`` and
        ``derived:`` values, household table part and household keys' dtypes."""
        config = self.config
        codes = cell_codes(frame, person_config(config))
        part.codes, part.counts = np.unique(codes, return_counts=True)
        for v in config.perturb:  # every person's value (global rows for the messages)
            part.perturb[v] = PerturbValues(v, config)
            part.perturb[v].add(frame, frame.index.to_numpy())
        if person_derived(config):
            key_codes = split_codes(codes, radix_sizes(person_config(config)))
            part.derived = DerivedCollector(person_derived(config))
            part.derived.add(frame, person_key_code(key_codes, config))
        part.households = HouseholdCounter(config)
        part.households.add(frame, codes)
        part.dtypes = {k: frame[k].dtype for k in config.household_keys}

    def _rows(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """A batch's person cells (counted table) and household rows (the group ids)."""
        c = self.locate(cell_codes(frame, person_config(self.config)))
        return c, lookup_households(self.household_ids, household_identity(frame, self.config))

    def identities(self, frame: pd.DataFrame) -> IdentityPart:
        """Pass 2 on one batch: its drawing persons' identities and ties; ``extra``: its
        changed households' persons (listed from 0), its part of the person dependence check
        and the persons of the changed households for ``composition: protect``; with
        person-level ``perturb:`` variables, every person's identity and tie."""
        config, cells, ps = self.config, self.cells, self.ps
        c, hrow = self._rows(frame)
        i, t = person_draw_identities(frame, c, ps, cells, config)
        changed = ChangedHouseholdPersons()
        changed.add(c, hrow, drawing_persons(c, ps, cells, config), self.hs.changed, 0)
        pdep = person_dependence_counter(self.dependence_columns, config)
        add_person_dependence(pdep, frame, c, cells, ps)
        pp = person_perturb_config(config)
        every = (None if pp is None else
                 all_identities(frame, c, person_draw_plan(ps, cells, config), pp))
        comp = None
        if self.hs.design.protect:  # the persons of the changed households
            keep = np.asarray(self.hs.changed)[hrow]
            comp = (frame.index.to_numpy()[keep].astype(np.int64), c[keep], hrow[keep],
                    np.asarray(record_identity(frame[keep], person_config(config)), np.uint64))
        return IdentityPart(i, t, every, (changed, pdep, comp))

    def release(self, frame: pd.DataFrame, records: bool, identity: np.ndarray,
                every_identity: np.ndarray | None) -> Released:
        """Pass 3 on one batch: its persons' released values, spilled by household pseudonym;
        ``extra``: its person cells, household rows, released rows, weights and the persons changed per
        person-level ``perturb:`` variable. ``identity``: the batch's distinct drawing
        identities, ``every_identity``: every person's when person-level variables are
        perturbed."""
        config, seed, table, orig = self.config, self.seed, self.table, self.orig
        sizes = [int(x) + 1 for x in table.key_codes.max(axis=0)]
        c, hrow = self._rows(frame)
        out = released_person_codes(c, hrow, identity, self.cells, self.ps, self.hs, config,
                                    seed, frame.index.to_numpy(), self.realized)
        rel = _row_index(table.key_codes, out, sizes)
        released, changed = frame, None
        if self.columns is not None:
            released, changed = self.columns.apply(frame, hrow, self.cells.key_codes[c], out,
                                                   every_identity, config, seed)
        t = household_public_batch(released, orig[c], rel, table, self.pseudo[hrow], config,
                                   seed, self.schema, self.salt)
        weight = config.input.weight
        w = frame[weight].to_numpy(dtype=float) if weight else None
        return Released(t, orig[c], rel,
                        household_bucket_keys(self.pseudo[hrow], self.n_households),
                        record_identity(frame, config) if records else None,
                        (c, hrow, rel, w, changed))

    def report_cells(self, frame: pd.DataFrame) -> np.ndarray:
        """A batch's person cells in the release's extended cell table (refinement passes)."""
        return self.orig[self.locate(cell_codes(frame, person_config(self.config)))]
