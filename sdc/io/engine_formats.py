"""Which input and output formats each engine handles (no heavy imports: the pre-flight of
``sdc release`` and :func:`sdc.io.batches.check_streamable` share these messages). Why an
engine cannot do these is said once, in the executor registry (``limits`` of
``sdc.executors.registry``)."""

from __future__ import annotations

from sdc.config.model import ReleaseConfig

__all__ = ["engine_problems"]


def engine_problems(config: ReleaseConfig, engine: str) -> list[str]:
    """Why ``engine`` cannot run ``config`` (input and output formats), every reason; empty if
    it can. The messages are those of :func:`sdc.io.batches.check_streamable`."""
    if engine == "pandas":
        return []
    out: list[str] = []
    formats = config.output.formats if config.output is not None else ["parquet"]
    stat = [f for f in formats if f in ("sav", "dta")]
    if stat:
        out.append(
            f"the {engine} engine writes the public file batch by batch (Parquet, CSV); "
            f"output.formats {stat} are written by pyreadstat from one in-memory frame and "
            "cannot be streamed. Remove them from output.formats (convert the released Parquet "
            "later if needed), or release with --engine pandas")
    fmt = config.input.resolved_format
    if engine == "dask" and fmt != "parquet":
        out.append(
            f"the dask engine reads Parquet (a file or a folder of parts), not {fmt!r}: convert "
            "the input to Parquet once, or use --engine streaming (which also reads CSV)")
    elif fmt not in ("csv", "parquet"):
        out.append(
            f"the {engine} engine reads Parquet (a file or a folder of parts) and CSV in record "
            f"batches; input.format {fmt!r} has no batch reader. Convert the file to Parquet "
            f"once, or release it with --engine pandas (it fits in memory if it is an SPSS/Stata "
            f"export)")
    return out
