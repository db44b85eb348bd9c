"""An input file as the batch readers see it in Arrow: the CSV read options (text keys and
value columns read as text, missing markers applied per column, values typed without loss,
:mod:`sdc.io.values`), the Parquet dataset, and the input's Arrow schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.columns import normalize_schema, value_columns
from sdc.io.values import WHOLE_AS_INT, lossless_kind, missing_markers, to_lossless

__all__ = ["NA_STRINGS", "csv_missing", "csv_options", "csv_value_types", "csv_whole_as_int",
           "input_arrow_schema",
           "normalize_schema", "parquet_dataset", "value_columns"]

NA_STRINGS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
               "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


def _text_keys(config: ReleaseConfig) -> list[str]:
    return [k for k, kv in config.input_key_variables.items()
            if kv.categories is not None and any(isinstance(c, str) for c in kv.categories)]


def _csv_read_parse(config: ReleaseConfig, block_size: int = 1 << 24):
    inp = config.input
    enc = inp.encoding.lower().replace("_", "-")
    read = pacsv.ReadOptions(block_size=block_size,
                             encoding="utf8" if enc in ("utf-8", "utf8", "utf-8-sig") else inp.encoding)
    return read, pacsv.ParseOptions(delimiter=inp.delimiter)


def _csv_header(config: ReleaseConfig) -> list[str]:
    read, parse = _csv_read_parse(config)
    convert = pacsv.ConvertOptions(null_values=NA_STRINGS, strings_can_be_null=False,
                                   timestamp_parsers=[])
    with pacsv.open_csv(str(config.input_path), read_options=read, parse_options=parse,
                        convert_options=convert) as reader:
        return list(reader.schema.names)


def csv_options(config: ReleaseConfig, block_size: int = 1 << 24,
                 names: list[str] | None = None):
    read, parse = _csv_read_parse(config, block_size)
    # text keys stay text ("01" is not 1); the other non-key columns are read as text and
    # typed without loss (sdc.io.values); strings are never turned into nulls by pyarrow: the
    # missing markers are applied per column below
    if names is None:
        names = _csv_header(config)
    types = {k: pa.string() for k in _text_keys(config)}
    types.update({c: pa.string() for c in value_columns(config, names)})
    convert = pacsv.ConvertOptions(column_types=types,
                                   null_values=NA_STRINGS, strings_can_be_null=False,
                                   timestamp_parsers=[])
    return read, parse, convert


def csv_value_types(config: ReleaseConfig) -> dict[str, pa.DataType]:
    """The type of every text-read column of a CSV input (:func:`value_columns`), decided
    from the file's first block by :func:`sdc.io.values.lossless_type`."""
    return dict(_value_types(config)[0])


def _value_types(config: ReleaseConfig) -> tuple[dict[str, pa.DataType], set[str]]:
    return _remembered(_VALUE_TYPES, _csv_key(config), lambda: _first_block_types(config))


#: how many CSV inputs' types and schemas are kept (a design search plans candidates whose key
#: variables differ, each a key of its own: ses's `sdc init` asked 13 times for 3 keys)
_REMEMBERED = 8


def _remembered(memo: dict, key: tuple, make: Any) -> Any:
    """``memo[key]``, made by ``make()`` when missing; the ``_REMEMBERED`` latest kept."""
    if key in memo:
        memo[key] = memo.pop(key)  # the latest last
        return memo[key]
    value = make()
    memo[key] = value
    while len(memo) > _REMEMBERED:
        del memo[next(iter(memo))]
    return value


def _csv_key(config: ReleaseConfig) -> tuple:
    """What a CSV input's types depend on: the file (its size and mtime) and the config's
    reading options and column roles."""
    path = config.input_path
    st = path.stat()
    inp = config.input
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, inp.delimiter, inp.encoding,
            tuple(inp.na_values), tuple(sorted(config.key_variables)),
            tuple(sorted(config.perturb)), inp.weight, inp.id_column, tuple(inp.drop),
            tuple(_text_keys(config)))


def csv_whole_as_int(config: ReleaseConfig) -> set[str]:
    """The text-read float64 columns whose whole values are written as integers
    (:data:`sdc.io.values.WHOLE_AS_INT`), decided with :func:`csv_value_types`."""
    return set(_value_types(config)[1])


_VALUE_TYPES: dict[tuple, tuple[dict[str, pa.DataType], set[str]]] = {}


def _first_block_types(config: ReleaseConfig) -> tuple[dict[str, pa.DataType], set[str]]:
    names = _csv_header(config)
    cols = value_columns(config, names)
    if not cols:
        return {}, set()
    read, parse, convert = csv_options(config, names=names)
    convert.include_columns = cols
    with pacsv.open_csv(str(config.input_path), read_options=read, parse_options=parse,
                        convert_options=convert) as reader:
        try:
            first = reader.read_next_batch()
        except StopIteration:
            return {c: pa.string() for c in cols}, set()
    table = csv_missing(pa.Table.from_batches([first]), config, {})
    kinds = {c: lossless_kind(table.column(c)) for c in cols}
    return {c: k[0] for c, k in kinds.items()}, {c for c, k in kinds.items() if k[1]}


def parquet_dataset(path: Path) -> pads.Dataset:
    try:
        return pads.dataset(str(path), format="parquet")
    except (pa.ArrowException, OSError) as e:
        raise InputError(
            f"input {str(path)!r} is not a readable Parquet file or folder of Parquet parts "
            f"({e}). Check input.path and input.format"
        ) from None


def input_arrow_schema(config: ReleaseConfig) -> pa.Schema | None:
    """The Arrow schema the batch readers produce for the input.

    CSV: pyarrow's types inferred from the first block (text keys forced to string);
    SPSS/Stata: the types of the whole-file read (:func:`sdc.io.stat_input.stat_schema`).
    """
    fmt = config.input.resolved_format
    path = config.input_path
    if fmt == "parquet":
        return normalize_schema(parquet_dataset(path).schema)
    if fmt == "csv":
        return _remembered(_CSV_SCHEMAS, _csv_key(config), lambda: _csv_schema(config))
    if fmt in ("sav", "dta"):
        from sdc.io.stat_input import stat_schema

        return stat_schema(config)
    return None


#: a CSV input's schema by what it depends on (:func:`_csv_key`: the file's size and mtime, the
#: config's reading options and column roles); the executor, the reports and the file facts of
#: one release ask for it, each time a parse of the first block and the lossless typing of its
#: text columns (~0.1 CPU s for the demo, ~0.3 s for ses: each in-memory candidate of a design
#: search asked again); sdc release makes it while Prefect starts the run
#: (flows.release.prefetch_job)
_CSV_SCHEMAS: dict[tuple, pa.Schema] = {}


def _csv_schema(config: ReleaseConfig) -> pa.Schema:
    read, parse, convert = csv_options(config)
    with pacsv.open_csv(str(config.input_path), read_options=read, parse_options=parse,
                        convert_options=convert) as reader:
        schema = normalize_schema(reader.schema)
    types = csv_value_types(config)
    whole = csv_whole_as_int(config)
    return pa.schema([pa.field(f.name, types.get(f.name, f.type),
                               metadata=WHOLE_AS_INT if f.name in whole else None)
                      for f in schema])


def csv_missing(table: pa.Table, config: ReleaseConfig,
                 types: dict[str, pa.DataType] | None, offset: int = 0) -> pa.Table:
    """pandas' CSV rules for the keys: in text keys only an empty field is missing, in the
    other string columns every pandas missing marker is; the text-read columns
    (:func:`value_columns`): the empty field and ``input.na_values`` are missing, then each is
    converted to its type in ``types`` (None: left as text) without loss, or refused."""
    text = set(_text_keys(config))
    values = set(value_columns(config, table.column_names))
    whole = csv_whole_as_int(config) if types else set()
    value_markers = missing_markers(config.input.na_values)
    cols = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            found = ([""] if name in text else value_markers if name in values
                     else NA_STRINGS)
            markers = pa.array(found, type=col.type)
            col = pc.if_else(pc.is_in(col, value_set=markers), pa.scalar(None, col.type), col)
            if types and name in types:
                col = to_lossless(col, types[name], name=name, first_row=offset,
                                  whole_as_int=name in whole)
        cols.append(col)
    return pa.table(cols, names=table.column_names)
