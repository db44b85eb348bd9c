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

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import Bands, ReleaseConfig, TopBottom
from sdc.io.stat_meta import NO_METADATA, StatMetadata, plain_value, read_stat_metadata
from sdc.io.write_stat import StatLayout, stat_bytes, stat_layout
from sdc.release.markdown import md_code, md_text

__all__ = ["input_metadata", "stat_codebook_lines", "stat_public_files", "variable_labels"]

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


def input_metadata(config: ReleaseConfig) -> StatMetadata:
    """The SPSS/Stata metadata of the input (:mod:`sdc.io.stat_meta`; empty for CSV/Parquet):
    read once per release from the file's header, never from the records."""
    fmt = config.input.resolved_format
    if fmt not in STAT_FORMATS:
        return NO_METADATA
    return read_stat_metadata(config.input_path, fmt, config.input.encoding)


def _released_labels(config: ReleaseConfig, meta: StatMetadata) -> dict[str, dict[Any, str]]:
    """Key variable -> {released value: label} where the config has none: the input file's
    label of the value (a key kept as declared), or for a recoded key what the released value
    stands for (the codebook's wording): the value itself for a band or top/bottom class whose
    members carry no label, else ``"<value> = <member>, <member>, ..."`` (members by their
    label where they have one, 8 at most, "and N more")."""
    out: dict[str, dict[Any, str]] = {}
    for k, kv in config.key_variables.items():
        file_labels = meta.value_labels.get(k, {})
        if k not in config.recoded_keys:
            if kv.range is not None:        # a range of up to 10^7 values: test the labels
                lo, hi = kv.range
                got = {v: t for v, t in file_labels.items()
                       if isinstance(v, int) and lo <= v <= hi}
            else:
                declared = set(kv.domain)
                got = {v: t for v, t in file_labels.items() if v in declared}
            if got:
                out[k] = got
            continue
        src = config.input_key_variables[k]
        code_map, _ = config.recode_map(k)
        dom = src.domain
        ranges = isinstance(src.recode, Bands | TopBottom)
        labels: dict[Any, str] = {}
        for g, value in enumerate(kv.domain):
            members = [dom[i] for i in np.flatnonzero(code_map[:len(dom)] == g)]
            named = {m: src.labels.get(m) or file_labels.get(m) for m in members}
            if len(members) == 1 and str(members[0]) == str(value):
                if named[members[0]]:
                    labels[value] = named[members[0]]
                continue
            name = kv.labels.get(value)                   # "20-29", "62+", a group's name
            if ranges and not any(named.values()):
                if name:
                    labels[value] = name
                continue
            shown = ", ".join(str(named[m] or m) for m in members[:8])
            more = f" and {len(members) - 8} more" if len(members) > 8 else ""
            labels[value] = f"{name or value} = {shown}{more}"
        if labels:
            out[k] = labels
    return out


def fractional_keys(config: ReleaseConfig, meta: StatMetadata) -> dict[str, str]:
    """Keys released at numbers that are not whole (``value: midpoint`` 12.5, a ``top_value``
    of 84.5) -> the Stata variable label that names their classes (``age: 2.5 = 0-4; 7.5 =
    5-9; ...``, cut to Stata's 80 characters): a ``.dta`` holds them as floats, and Stata
    attaches value labels to whole numbers only. The codebook lists every class in full."""
    out: dict[str, str] = {}
    released = _released_labels(config, meta)
    for k, kv in config.key_variables.items():
        frac = [v for v in kv.domain if isinstance(v, float) and not float(v).is_integer()]
        if not frac:
            continue
        head = kv.label or meta.variable_labels.get(k) or k
        names = released.get(k, {})
        classes = "; ".join(f"{plain_value(v)} = {_class_name(names.get(v, v))}"
                            for v in kv.domain)
        out[k] = f"{head}: {classes}"
    return out


def _class_name(label: Any) -> str:
    """``"20-29 = 20, 21, ..."`` -> ``"20-29"``: the class's name, without its members."""
    return str(label).split(" = ", 1)[0]


def _group_codes(config: ReleaseConfig) -> dict[str, dict[Any, int]]:
    """Recoded keys with integer declared values: each released class -> its smallest member
    (so that a group such as ``Basic = 1, 2`` is written as 1 in SPSS/Stata, next to 3, 4, 5
    kept as themselves)."""
    out: dict[str, dict[Any, int]] = {}
    for k in config.recoded_keys:
        src = config.input_key_variables[k]
        dom = src.domain
        if not all(isinstance(c, int | np.integer) and not isinstance(c, bool) for c in dom):
            continue
        code_map, _ = config.recode_map(k)
        codes = {}
        for g, value in enumerate(config.key_variables[k].domain):
            members = [int(dom[i]) for i in np.flatnonzero(code_map[:len(dom)] == g)]
            if members:  # a numeric key is released as numbers already (its class edges)
                codes[value] = value if isinstance(value, int) else min(members)
        out[k] = codes
    return out


def _measures(config: ReleaseConfig, meta: StatMetadata) -> dict[str, str]:
    """SPSS measurement level per column: the input file's; a recoded key's follows its
    recoding (bands, top/bottom: ordinal; groups, hierarchy levels: nominal); a key with text
    categories without one in the input: nominal."""
    out = dict(meta.measure)
    for k, kv in config.key_variables.items():
        if k in config.recoded_keys:
            rule = config.input_key_variables[k].recode
            out[k] = "ordinal" if isinstance(rule, Bands | TopBottom) else "nominal"
        elif k not in out and any(isinstance(c, str) for c in kv.domain):
            out[k] = "nominal"
    return out


def stat_public_files(pub: pd.DataFrame, config: ReleaseConfig,
                      meta: StatMetadata | None = None
                      ) -> tuple[dict[str, bytes], StatLayout | None]:
    """``{"microdata.sav": ..., "microdata.dta": ...}`` per ``output.formats`` and the layout
    of the last one written (the same names and codes for both formats). ``meta``: the input's
    metadata (:func:`input_metadata`, read here when not given)."""
    formats = config.output.formats if config.output is not None else ["parquet"]
    files: dict[str, bytes] = {}
    layout = None
    if not any(f in formats for f in STAT_FORMATS):
        return files, layout
    meta = input_metadata(config) if meta is None else meta
    cats = {k: kv.domain for k, kv in config.key_variables.items()}
    # a recoded key's labels say what each released number stands for (_released_labels)
    vlabels = {k: kv.labels for k, kv in config.key_variables.items()
               if kv.labels and k not in config.recoded_keys}
    keys = set(config.key_variables)
    from_file = {c: v for c, v in meta.value_labels.items() if c not in keys}
    from_file.update(_released_labels(config, meta))
    # the file's integer columns, display formats and widths, for columns released as read
    # (keys are re-coded or re-typed by the release: their formats are the writer's)
    integer = [c for c in meta.integer if c not in keys]
    integer += [k for k, kv in config.key_variables.items()      # keys with missing values
                if kv.range is not None or all(isinstance(c, int | np.integer)
                                               and not isinstance(c, bool)
                                               for c in kv.categories or [])]
    for fmt in STAT_FORMATS:
        if fmt not in formats:
            continue
        same = meta.fmt == fmt
        var_labels, in_labels = variable_labels(config), dict(meta.variable_labels)
        if fmt == "dta":   # Stata labels whole numbers only: midpoints say their classes here
            for k, text in fractional_keys(config, meta).items():
                in_labels[k] = text
                var_labels.pop(k, None)
        layout = stat_layout(
            pub, fmt, categories=cats, value_labels=vlabels,
            variable_labels=var_labels, input_value_labels=from_file,
            input_variable_labels=in_labels, integer_columns=integer,
            measure=_measures(config, meta),
            formats={c: f for c, f in meta.formats.items() if c not in keys} if same else None,
            widths={c: w for c, w in meta.widths.items() if c not in keys} if same else None,
            key_codes=_group_codes(config))
        files[f"microdata.{fmt}"] = stat_bytes(layout, fmt, file_label=config.name,
                                               missing_ranges=user_missing(config, pub, meta))
    return files, layout


def user_missing(config: ReleaseConfig, pub: pd.DataFrame,
                 meta: StatMetadata | None = None) -> dict[str, list]:
    """The SPSS user-missing declarations of the input's non-key columns in ``pub`` (an SPSS
    input only; their values are released as they are, and ``microdata.sav`` declares them
    again)."""
    if config.input.resolved_format != "sav":
        return {}
    from sdc.io.batches import value_columns

    meta = input_metadata(config) if meta is None else meta
    keep = set(value_columns(config, list(pub.columns)))
    return {c: r for c, r in meta.missing_ranges.items() if c in keep}


def _value_list(labels: dict[Any, str], limit: int = 60) -> str:
    items = [f"{md_text(v)} = {md_text(t)}" for v, t in list(labels.items())[:limit]]
    more = f"; and {len(labels) - limit} more" if len(labels) > limit else ""
    return "; ".join(items) + more


def stat_codebook_lines(config: ReleaseConfig, layout: StatLayout | None,
                        meta: StatMetadata | None = None,
                        columns: list[str] | None = None) -> list[str]:
    """Codebook section on variable labels and the SPSS/Stata coding (empty if neither).

    ``meta``: the input's metadata (its variable labels are listed for the public
    ``columns`` the config gives no label; the value labels the files carry from it are
    listed when ``layout`` is given)."""
    meta = NO_METADATA if meta is None else meta
    labels = variable_labels(config)
    public = set(columns if columns is not None else (layout.names if layout else []))
    from_file = {c: t for c, t in meta.variable_labels.items()
                 if c in public and c not in labels}
    lines: list[str] = []
    if labels or from_file:
        lines += ["## Variable labels", "", "| variable | label |", "|---|---|"]
        lines += [f"| {md_code(c)} | {md_text(t)} |" for c, t in labels.items()]
        lines += [f"| {md_code(c)} | {md_text(t)} (from the input file) |"
                  for c, t in from_file.items()]
        lines.append("")
    if layout is None:
        return lines
    lines += ["## SPSS and Stata files", "",
              "`microdata.sav` and `microdata.dta` hold the same records in the same order as "
              "the other files, with the variable labels above and value labels (the key "
              "variables' below, and those the input file gives other variables). Integer "
              "columns are written as integers (Stata `long`, SPSS without decimals) when "
              "every value fits in 32 bits. A missing text value is an empty string; a "
              "missing number is a system-missing value."]
    if meta.fmt is not None:
        lines += ["", f"From the input file ({'SPSS' if meta.fmt == 'sav' else 'Stata'}) the "
                  "files also keep the value labels of every variable"
                  + (", the measurement levels (nominal, ordinal, scale), display formats and "
                     "widths" if meta.fmt == "sav" else ", the display formats")
                  + " (Stata labels whole numbers only: labels of text or fractional values "
                  "are in `microdata.sav` and listed here, not in `microdata.dta`)."]
        keys = set(config.key_variables)
        carried = {c: v for c, v in meta.value_labels.items()
                   if c in layout.names and c not in keys}
        if carried:
            lines += ["", "Value labels of the input file:", ""]
            lines += [f"- {md_code(c)}: {_value_list(v)}" for c, v in carried.items()]
    declared = user_missing(config, pd.DataFrame(columns=list(layout.names)), meta)
    if declared:
        lines += ["", "User-missing values of the SPSS input, released as values in every "
                  "file and declared again in `microdata.sav`:", ""]
        lines += [f"- {md_code(c)}: " + ", ".join(
            md_text(plain_value(r["lo"])) if r["lo"] == r["hi"]
            else f"{md_text(plain_value(r['lo']))} to {md_text(plain_value(r['hi']))}"
            for r in rs) for c, rs in declared.items()]
    if layout.renamed:
        lines += ["", "Renamed (SPSS and Stata accept letters, digits and `_`, 32 characters):",
                  ""]
        lines += [f"- {md_code(a)} -> {md_code(b)}" for a, b in layout.renamed.items()]
    if "dta" in (config.output.formats if config.output is not None else []):
        for k in fractional_keys(config, meta):
            lines += ["", f"{md_code(k)} is released at numbers that are not whole (class "
                      "midpoints or a top/bottom value): `microdata.dta` holds them as "
                      "floating-point numbers without value labels (Stata attaches value labels "
                      "to whole numbers only); its variable label names the classes, and "
                      "this codebook lists each class in full."]
    for col, codes in layout.codes.items():
        lines += ["", f"{md_code(col)} has text categories; in these two files it holds integer "
                  "codes (Stata attaches value labels to integers only):", "",
                  "| code | category | label |", "|---|---|---|"]
        written = layout.value_labels.get(layout.names[col], {})
        lines += [f"| {i} | {md_text(c)} | {md_text(written.get(i, c))} |"
                  for c, i in codes.items()]
    released = {k: v for k, v in _released_labels(config, meta).items()
                if k in layout.names and k not in layout.codes}
    for k, v in released.items():
        if k in config.recoded_keys:
            lines += ["", f"Value labels of {md_code(k)} (recoded: the class each released "
                      f"number stands for): {_value_list(v)}."]
            continue
        given = config.key_variables[k].labels
        v = {x: t for x, t in v.items() if x not in given}
        if v:
            lines += ["", f"Value labels of {md_code(k)} from the input file: {_value_list(v)}."]
    lines.append("")
    return lines
