"""Which input formats each engine reads (no heavy imports: the pre-flight of ``sdc release``
and :func:`sdc.io.batches.check_streamable` share these messages). Why an engine cannot do
these is said once, in the executor registry (``limits`` of ``sdc.executors.registry``).

Every engine writes every output format (Parquet, CSV, SPSS, Stata) and reads CSV and
Parquet (the dask engine's client copies a CSV input to Parquet first); only the pandas engine
reads SPSS ``.sav`` / Stata ``.dta`` input."""

from __future__ import annotations

from sdc.config.model import ReleaseConfig

__all__ = ["engine_problems"]


def engine_problems(config: ReleaseConfig, engine: str) -> list[str]:
    """Why ``engine`` cannot run ``config`` (its input format), every reason; empty if it
    can. The messages are those of :func:`sdc.io.batches.check_streamable`."""
    if engine == "pandas":
        return []
    fmt = config.input.resolved_format
    if fmt not in ("csv", "parquet"):
        return [
            f"the {engine} engine reads Parquet (a file or a folder of parts) and CSV in record "
            f"batches; input.format {fmt!r} has no batch reader. Convert the file to Parquet "
            f"once, or release it with --engine pandas (it fits in memory if it is an SPSS/Stata "
            f"export)"]
    return []
