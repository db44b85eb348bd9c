"""What a runner that reads the input file in pieces knows of it from its metadata alone (the
columns, the public schema, the report's numeric columns, their value ranges from Parquet
statistics): shared by the streaming and Dask runners; the in-memory runner reads the frame."""

from __future__ import annotations

import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.io.batches import input_arrow_schema, input_value_ranges, public_schema

__all__ = ["FileFacts"]


class FileFacts:
    """The :class:`sdc.pipeline.passes.Runner` methods answered from the input's metadata."""

    config: ReleaseConfig

    def input_columns(self) -> list[str]:
        return list(input_arrow_schema(self.config).names)

    def public_schema(self) -> pa.Schema:
        return public_schema(self.config, input_arrow_schema(self.config))

    def numeric_columns(self) -> list[str]:
        from sdc.pipeline.report_parts import report_numeric_columns

        return report_numeric_columns(self.config)

    def value_ranges(self, columns: list[str]) -> dict[str, tuple[float, float, bool]]:
        return input_value_ranges(self.config, columns)

    def is_integer(self, column: str) -> bool:
        return pa.types.is_integer(input_arrow_schema(self.config).field(column).type)
