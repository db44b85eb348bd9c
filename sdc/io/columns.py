"""Which columns of an input are values (typed without loss) and the Arrow types the batch
readers normalize to; shared by the CSV/Parquet view (:mod:`sdc.io.arrow_input`) and the
SPSS/Stata reader (:mod:`sdc.io.stat_input`)."""

from __future__ import annotations

import pyarrow as pa

from sdc.config.model import ReleaseConfig

__all__ = ["normalize_schema", "value_columns"]


def value_columns(config: ReleaseConfig, names: list[str]) -> list[str]:
    """The columns of a CSV input read as text and typed without loss
    (:mod:`sdc.io.values`): every column but the key variables, the DP-PRAM variables, the
    weight and the id column."""
    inp = config.input
    skip = set(config.key_variables) | set(config.perturb) | {inp.weight, inp.id_column}
    return [n for n in names if n not in skip]


def _normalize_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_null(t):
        return pa.string()
    return t


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _normalize_type(f.type)) for f in schema])
