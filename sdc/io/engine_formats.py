"""The refusal of an input format an executor does not read (no heavy imports: the
pre-flight of ``sdc release`` and :func:`sdc.io.batches.check_streamable` share it). Which
formats each executor reads, and why, is declared once, in the executor registry
(``input_formats`` and ``limits`` of ``sdc.executors.registry``); the batch reader's formats
are :data:`BATCH_INPUT_FORMATS`."""

from __future__ import annotations

from sdc.config.model import ReleaseConfig

__all__ = ["ALL_INPUT_FORMATS", "BATCH_INPUT_FORMATS", "engine_problems"]

#: what :func:`sdc.io.read.read_input` reads whole
ALL_INPUT_FORMATS = ("parquet", "csv", "sav", "dta")
#: what the batch reader (:func:`sdc.io.batches.input_batches`) reads in record batches
BATCH_INPUT_FORMATS = ("parquet", "csv", "sav", "dta")


def engine_problems(config: ReleaseConfig, engine: str, formats: tuple[str, ...],
                    others: tuple[str, ...] = ()) -> list[str]:
    """Why ``engine``, which reads ``formats``, cannot run ``config`` (its input format);
    empty if it can. ``others``: the engines that read the format (the way out)."""
    fmt = config.input.resolved_format
    if fmt in formats:
        return []
    way = (f", or release it with --engine {' | '.join(others)} (it fits in memory if it is "
           "an SPSS/Stata export)" if others else "")
    names = " and ".join(_NAMES.get(f, f) for f in formats)
    return [f"the {engine} engine reads {names} in record batches; input.format {fmt!r} has "
            f"no batch reader. Convert the file to Parquet once{way}"]


_NAMES = {"parquet": "Parquet (a file or a folder of parts)", "csv": "CSV", "sav": "SPSS",
          "dta": "Stata"}
