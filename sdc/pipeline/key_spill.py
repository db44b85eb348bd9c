"""Integer key columns spilled as the released cell: a batch runner's public buckets hold each
record's released cell (4 bytes) instead of its released key values (8 bytes a key), and the
key columns are rebuilt from the cell table when a sorted bucket is written.

A key qualifies when its value is a function of the released cell for every record: an integer
column of a ``range:`` key or of integer ``categories:`` without a missing category (a moved
record takes the cell's domain value, :func:`sdc.method.cell_passes.released_column`; an unmoved
one keeps its input value, which the key's code maps one to one:
:func:`sdc.method.cells.encode_key`), and not a ``derived:`` or ``perturb:`` column. The
public bytes are the same (docs/PERFORMANCE.md, "Keys as cells in the spill")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.io.public_files import PUBLIC_ID
from sdc.method.cells import CellTable

__all__ = ["CELL_COLUMN", "KeySpill", "key_spill"]

CELL_COLUMN = "__sdc_released_cell"


@dataclass(frozen=True)
class KeySpill:
    """The keys spilled as the released cell: ``names``, each one's value per cell (cell
    order, the public type) in ``values``, and ``body`` (the released table's schema: the
    public schema without ``record_id``) to put the columns back in place."""

    names: tuple[str, ...]
    values: tuple[pa.Array, ...]
    body: pa.Schema

    def slim(self, table: pa.Table, released: np.ndarray) -> pa.Table:
        """``table`` without the keys, with every record's released cell."""
        cell = np.asarray(released, dtype=np.int32 if len(self.values[0]) < 2**31
                          else np.int64)
        return table.drop_columns(list(self.names)).append_column(CELL_COLUMN, pa.array(cell))

    def rebuild(self, table: pa.Table) -> pa.Table:
        """The keys back (each cell's value gathered by the released cell), in ``body``'s
        order, the cell column dropped; other columns (``record_id``, the order key) kept
        where they are not in ``body``."""
        cell = table.column(CELL_COLUMN)
        cols = {name: table.column(name) for name in table.column_names if name != CELL_COLUMN}
        for name, values in zip(self.names, self.values, strict=True):
            cols[name] = values.take(cell)
        rest = [n for n in cols if n not in self.body.names]
        names = [n for n in table.column_names if n in rest] + list(self.body.names)
        return pa.table([cols[n] for n in names],
                        schema=pa.schema([table.schema.field(n) if n in rest
                                          else self.body.field(n) for n in names]))


def key_spill(cells: CellTable, config: ReleaseConfig, schema: pa.Schema) -> KeySpill | None:
    """The keys of ``config`` that a batch runner spills as the released cell (module
    docstring); None when no key qualifies."""
    fixed = set(config.derived) | set(config.perturb or {})
    names, values = [], []
    for j, name in enumerate(config.key_names):
        kv = config.key_variables[name]
        if name in fixed or name not in schema.names or kv.missing == "category":
            continue
        field = schema.field(name)
        if not pa.types.is_integer(field.type):
            continue
        domain = kv.range_values()
        if domain is None:
            if not all(isinstance(c, int) and not isinstance(c, bool) for c in kv.categories):
                continue
            domain = np.asarray(kv.categories, dtype=np.int64)
        names.append(name)
        values.append(pa.array(domain[cells.key_codes[:, j]], type=field.type))
    if not names:
        return None
    body = pa.schema([f for f in schema if f.name != PUBLIC_ID])
    return KeySpill(tuple(names), tuple(values), body)
