"""The SPSS (``microdata.sav``) and Stata (``microdata.dta``) public files of a release, and
the codebook lines that explain their coding (:mod:`sdc.io.write_stat` does the writing).

Both files are made from the same public frame as ``microdata.parquet`` / ``.csv``, so every
file of a release holds the same records in the same order. Key variables carry their
``labels`` as value labels; variable labels come from ``key_variables.<k>.label`` and
``input.labels``; key variables with text categories are coded 1..K in the order of their
declared categories (Stata has value labels for integers only), and renamed variables
(names SPSS/Stata do not accept) are listed.
"""

from __future__ import annotations

import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.write_stat import StatLayout, stat_bytes, stat_layout
from sdc.release.markdown import md_code, md_text

__all__ = ["stat_codebook_lines", "stat_public_files", "variable_labels"]

STAT_FORMATS = ("sav", "dta")


def variable_labels(config: ReleaseConfig) -> dict[str, str]:
    """Column -> variable label, from ``key_variables.<k>.label`` and ``input.labels``; never
    a label of a column the public files do not hold (``input.drop``, the input's id)."""
    out = {k: kv.label for k, kv in config.key_variables.items() if kv.label}
    gone = set(config.input.drop)
    if config.input.id_column is not None:
        gone.add(config.input.id_column)
    out.update({c: t for c, t in config.input.labels.items() if t and c not in gone})
    return out


def stat_public_files(pub: pd.DataFrame, config: ReleaseConfig
                      ) -> tuple[dict[str, bytes], StatLayout | None]:
    """``{"microdata.sav": ..., "microdata.dta": ...}`` per ``output.formats`` and the layout
    of the last one written (the same names and codes for both formats)."""
    formats = config.output.formats if config.output is not None else ["parquet"]
    files: dict[str, bytes] = {}
    layout = None
    cats = {k: kv.domain for k, kv in config.key_variables.items()}
    vlabels = {k: kv.labels for k, kv in config.key_variables.items() if kv.labels}
    for fmt in STAT_FORMATS:
        if fmt not in formats:
            continue
        layout = stat_layout(pub, fmt, categories=cats, value_labels=vlabels,
                             variable_labels=variable_labels(config))
        files[f"microdata.{fmt}"] = stat_bytes(layout, fmt, file_label=config.name,
                                               missing_ranges=user_missing(config, pub))
    return files, layout


def user_missing(config: ReleaseConfig, pub: pd.DataFrame) -> dict[str, list]:
    """The SPSS user-missing declarations of the input's non-key columns in ``pub`` (an SPSS
    input only; their values are released as they are, and ``microdata.sav`` declares them
    again)."""
    if config.input.resolved_format != "sav":
        return {}
    import pyreadstat

    from sdc.io.batches import value_columns
    from sdc.io.read import sav_missing_ranges

    kwargs = {} if config.input.encoding.lower().replace("_", "-") in ("utf-8", "utf8") \
        else {"encoding": config.input.encoding}
    _, meta = pyreadstat.read_sav(str(config.input_path), metadataonly=True, user_missing=True,
                                  **kwargs)
    keep = set(value_columns(config, list(pub.columns)))
    return {c: r for c, r in sav_missing_ranges(meta).items() if c in keep}


def stat_codebook_lines(config: ReleaseConfig, layout: StatLayout | None) -> list[str]:
    """Codebook section on variable labels and the SPSS/Stata coding (empty if neither)."""
    labels = variable_labels(config)
    lines: list[str] = []
    if labels:
        lines += ["## Variable labels", "", "| variable | label |", "|---|---|"]
        lines += [f"| {md_code(c)} | {md_text(t)} |" for c, t in labels.items()]
        lines.append("")
    if layout is None:
        return lines
    lines += ["## SPSS and Stata files", "",
              "`microdata.sav` and `microdata.dta` hold the same records in the same order as "
              "the other files, with value labels for the key variables and the variable "
              "labels above. A missing text value is an empty string; a missing number is a "
              "system-missing value."]
    declared = user_missing(config, pd.DataFrame(columns=list(layout.names)))
    if declared:
        lines += ["", "User-missing values of the SPSS input, released as values in every "
                  "file and declared again in `microdata.sav`:", ""]
        lines += [f"- {md_code(c)}: " + ", ".join(
            md_text(r["lo"]) if r["lo"] == r["hi"]
            else f"{md_text(r['lo'])} to {md_text(r['hi'])}"
            for r in rs) for c, rs in declared.items()]
    if layout.renamed:
        lines += ["", "Renamed (SPSS and Stata accept letters, digits and `_`, 32 characters):",
                  ""]
        lines += [f"- {md_code(a)} -> {md_code(b)}" for a, b in layout.renamed.items()]
    for col, codes in layout.codes.items():
        lines += ["", f"{md_code(col)} has text categories; in these two files it holds integer "
                  "codes (Stata attaches value labels to integers only):", "",
                  "| code | category | label |", "|---|---|---|"]
        kv = config.key_variables[col]
        lines += [f"| {i} | {md_text(c)} | {md_text(kv.labels.get(c, c))} |" for c, i in codes.items()]
    lines.append("")
    return lines
