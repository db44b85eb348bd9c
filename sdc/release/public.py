"""The public frame and the public codebook of a release.

Nothing in ``public/`` depends on the input's row order or reveals the seed, theta per block,
PRB contents or a link to the original records: the original id column is removed, records are
put in a canonical order (sorted by all released values) and then shuffled with the release's
own random stream ``stream(seed, "public-row-order")``, and numbered 1..n afresh
(:data:`PUBLIC_ID`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import AsIs, Bands, Groups, Hierarchy, ReleaseConfig
from sdc.io.batches import (
    public_schema_for,
)
from sdc.io.schemas import PUBLIC_ID
from sdc.method.designs import release_design
from sdc.method.generalize import generalize_domain
from sdc.method.outcome import ReleaseOutcome
from sdc.method.perturb import NOT_DP
from sdc.release.markdown import md_code, md_text

__all__ = ["PUBLIC_ID", "codebook_markdown", "public_schema_for"]

_MAX_LISTED = 10_000  # categories listed one by one in the codebook


# -- codebook ---------------------------------------------------------------------------------
def _type_name(dtype: Any) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "date/time"
    return "text"


def _rule_text(var: str, config: ReleaseConfig) -> str:
    """The partition rule of ``var`` as Markdown (group names, members, hierarchy file and
    labels escaped: they come from the config and its files)."""
    rule = config.partition[var]
    kv = config.key_variables[var]
    labels = generalize_domain(var, kv, rule).labels
    shown = ", ".join(labels[:15]) + (", ..." if len(labels) > 15 else "")
    if isinstance(rule, Bands):
        return f"bands {shown}"  # made of numbers by sdc
    if isinstance(rule, Groups):
        return "groups " + "; ".join(f"{md_text(g)}: {', '.join(md_text(x) for x in m)}"
                                     for g, m in rule.groups.items())
    if isinstance(rule, Hierarchy):
        shown = ", ".join(md_text(x) for x in labels[:15]) + (", ..." if len(labels) > 15 else "")
        return f"hierarchy {md_text(Path(rule.hierarchy).name)} level {rule.level}: {shown}"
    return "as is"


def _merged_variables(result: ReleaseOutcome, config: ReleaseConfig) -> tuple[int, list[str]]:
    """(number of PRBs made of several partition sets, partition variables whose generalized
    value differs inside at least one of them)."""
    ps = result.partition_sets
    pvars = [v for v in config.partition_variables if v in ps.columns]
    ps = ps[ps["prb"] >= 0]
    if ps.empty or not pvars:
        return 0, []
    sizes = ps.groupby("prb").size()
    multi = ps[ps["prb"].isin(sizes.index[sizes > 1])]
    if multi.empty:
        return 0, []
    nunique = multi.groupby("prb")[pvars].nunique()
    return int((sizes > 1).sum()), [v for v in pvars if (nunique[v] > 1).any()]


def _perturbation(var: str, config: ReleaseConfig, merged_vars: list[str] = (),
                  design: Any = None) -> str:
    if var == config.input.household_id:
        return ("household pseudonym 1..H (keyed): the members of a household share it and are "
                "contiguous; no link to the original household ids")
    if var in config.key_variables and config.key_variables[var].level == "household":
        return ("may have been changed (household-level key: post-randomized once per "
                "household; every member carries the same value)")
    if var in config.input.household_columns:
        if var in config.perturb:
            spec = config.perturb[var]
            dp = (f"PRAM, eps = {spec.epsilon:g}; {NOT_DP}" if spec.domain_from_data else
                  f"eps-differentially private PRAM, eps = {spec.epsilon:g}")
            return (f"may have been changed ({dp}; household column: drawn once per household, "
                    "every member carries the same value)")
        return "unchanged (household column: one value per household)"
    if var in config.key_variables:
        rule = config.partition.get(var)
        if rule is None:
            return ("may have been changed (key variable; post-randomized in records of rare "
                    "key combinations)")
        across = (" and, in merged partition sets, to a neighbouring generalized value"
                  if var in merged_vars else "")
        if rule == "as_is" or isinstance(rule, AsIs):
            if var in merged_vars:
                return "may have been changed, only in merged partition sets (see Partition)"
            return "never changed (partition variable, kept as is)"
        exact = "" if across else "; the generalized value is exact"
        return (f"may have been changed only within its generalized value ({_rule_text(var, config)})"
                f"{across}{exact}")
    if var in config.perturb:
        spec = config.perturb[var]
        if spec.domain_from_data:
            return (f"may have been changed (PRAM, eps = {spec.epsilon:g}; {NOT_DP})")
        return (f"may have been changed (eps-differentially private PRAM, "
                f"eps = {spec.epsilon:g})")
    if var == PUBLIC_ID:
        return "new sequential number 1..n in random order; no link to the original file"
    if var == config.input.weight and design is not None and design.weighted:
        return ("unchanged (survey weight; weighted mode: the key variables were "
                "post-randomized so that weighted totals of key combinations are unbiased, "
                "as stated under Disclosure control)")
    if var == config.input.weight:
        return ("unchanged (survey weight; what the design keeps of weighted totals: see "
                "Disclosure control)")
    return "unchanged"


def _arrow_type_name(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_temporal(t):
        return "date/time"
    return "text"


def _columns(config: ReleaseConfig, result: Any, schema: pa.Schema | None,
             n_records: int | None) -> tuple[list[str], dict[str, str], int]:
    """(public columns, PUBLIC_ID first; their type names; number of records) from ``schema``
    when given, else from ``result.frame`` (the original id column left out)."""
    if schema is not None:
        cols = [PUBLIC_ID] + [c for c in schema.names if c != PUBLIC_ID]
        types = {f.name: _arrow_type_name(f.type) for f in schema}
        return cols, types, int(n_records if n_records is not None else len(result.frame))
    id_col = config.input.id_column
    cols = [PUBLIC_ID] + [c for c in result.frame.columns if c != id_col]
    types = {c: _type_name(result.frame[c].dtype) for c in cols if c != PUBLIC_ID}
    return cols, types, len(result.frame)


def _kept_line(config: ReleaseConfig, expected: dict[str, Any] | None,
               design: Any = None) -> str:
    """What the design keeps in expectation, one statement for the whole codebook: counts
    (the unweighted designs), or weighted totals (weighted mode), with utility.json's exact
    figures (``expected``, its ``expected_totals``) for a file with a survey weight."""
    from sdc.reports.expected import weighted_totals_words

    weight = config.input.weight
    words = weighted_totals_words(expected, weight, public=True)
    words = md_text(words) if words else None   # the weight column is user text
    if design is not None and design.weighted:
        return ("Combinations absent from the original never appear. " + (words or (
            "Released in weighted mode: the expected survey-weighted total of every "
            "combination of key values equals its weighted total in the original file, "
            "except in blocks whose weights no group could balance (they keep the unweighted "
            "design); unweighted counts may drift slightly.")))
    return ("The expected count of every combination of key values equals its count in the "
            "original file, and combinations absent from the original never appear."
            + (f" {words}" if words else
               f" This file carries a survey weight ({md_code(weight)}): the design keeps "
               "unweighted counts unbiased, not weighted totals." if weight else ""))


def _disclosure_lines(config: ReleaseConfig, n: int, n_cols: int,
                      expected: dict[str, Any] | None = None, design: Any = None) -> list[str]:
    """The title, the file and the "Disclosure control" section: the bound xi and what
    post-randomization keeps (a combination shared by at least ceil(1/xi) is unchanged)."""
    xi = config.risk.xi
    formats = config.output.formats if config.output else ["parquet"]
    return [
        f"# Codebook: {config.name}",
        "",
        f"Public-use microdata: {n} records, {n_cols} variables "
        f"({', '.join(f'`microdata.{f}`' for f in formats)}).",
        "",
        "## Disclosure control",
        "",
        "The file was protected with the Nayak-Zhang-You unbiased post-randomization method "
        "(PRAM). An intruder who knows a respondent's values of the key variables "
        f"({', '.join(md_code(k) for k in config.key_names)}) and that the respondent is in the "
        f"file picks the right record with probability at most **xi = {xi:g}**, for every "
        "respondent and every number of matching records.",
        "",
        f"- Records in combinations of key values shared by at least {math.ceil(1 / xi)} "
        "respondents are unchanged. Records in rarer combinations may have had their key "
        "values replaced, all together, by those of another rare combination of the same "
        "partition set (below). " + _kept_line(config, expected, design).rstrip(),
        *(design.codebook if design is not None else ()),
        "- Variables that are not key variables are released as collected"
        + (" (except the DP-PRAM variables below)." if config.perturb else "."),
        "- Direct identifiers and the original record identifier are removed; the records are in "
        f"random order and `{PUBLIC_ID}` is a new number with no link to the original file.",
    ]


def _partition_lines(config: ReleaseConfig, n_merged: int, merged_vars: list[str]) -> list[str]:
    """The "Partition" section: the generalized values kept exactly, and the merged partition
    sets where they are exact for the merged group only ([] without a partition)."""
    if not config.partition:
        return []
    lines = [
        "",
        "### Partition",
        "",
        "Post-randomization never moves a record out of its partition set, so these "
        "generalized values are exact for every record"
        + (" (except as noted below for merged partition sets):" if n_merged else ":"),
        "",
    ]
    lines += [f"- {md_code(v)}: {_rule_text(v, config)}" for v in config.partition]
    if n_merged:
        lines += [
            "",
            f"In {n_merged} place(s), small partition sets had too few rare combinations "
            "to be protected on their own and were merged with neighbouring partition sets. "
            "Inside such a merged group a record may have moved between its partition sets, "
            f"so the generalized values of {', '.join(md_code(v) for v in merged_vars)} are "
            "exact for the merged group, not for each partition set in it.",
        ]
    return lines


def _household_lines(config: ReleaseConfig, result: Any) -> list[str]:
    """The "Households" section: what the bound covers for household- and person-level keys,
    and a warning when the household composition exceeds xi ([] without households)."""
    hid = config.input.household_id
    if hid is None:
        return []
    hk = ", ".join(md_code(k) for k in config.household_keys)
    pk = ", ".join(md_code(k) for k in config.person_keys)
    lines = [
        "", "### Households", "",
        f"Persons are grouped in households ({md_code(hid)}: a keyed pseudonym 1..H, the "
        "members of a household are contiguous). The household-level keys "
        f"({hk}) were post-randomized once per household, among rare households, so every "
        "member carries the same values; the bound xi holds for an intruder who knows a "
        "household's household-level keys. The person-level keys "
        f"({pk}) were post-randomized per person among persons with the same household-level "
        "values; the bound xi holds for an intruder who knows a person's keys"
        + (f" (except {small} person(s) in household-value classes too small for it, "
           "protected by the household randomization only)"
           if (small := getattr(getattr(result, "households", None),
                                "small_class_persons", 0)) else "")
        + ". A released "
        "combination of household and person values may be absent from the original file. "
        "An intruder who knows the keys of every member of a household is not covered by "
        "the bound: the data producer's report measures that risk.",
    ]
    comp = _household_composition(result)
    if comp is not None and (comp.get("large_groups") or {}).get("members") == "sampled":
        from sdc.method.group_composition import SAMPLED_MEMBERS

        lg = comp["large_groups"]
        lines += ["", f"**Sampled members** (`input.members: sampled`): {SAMPLED_MEMBERS}. The "
                  "employees (members) in this file are a sample of each group's members; "
                  "which of them were sampled is known only to the group itself and the "
                  "agency, so a group that recognises itself learns nothing it did not know. "
                  f"All {lg['large_groups']:,} groups ({lg['large_persons']:,} persons) are "
                  "covered by the bound for an intruder who knows a group's group-level keys "
                  "and for one who knows a person's keys and its group's keys; an intruder "
                  "who knows which members were sampled (an insider) is not covered "
                  "(docs/HOUSEHOLDS.md, \"Sampled members\")."]
    elif comp is not None and comp.get("mode") == "large_groups":
        lg = comp["large_groups"]
        lines += ["", f"**Large groups** (`risk.large_groups: {lg['threshold']}`): an intruder "
                  "who knows the keys of every member of a group is covered for the "
                  f"{lg['small_groups']:,} groups of at most {lg['threshold']} members "
                  f"(exact certificate {lg['certificate']:.4f}"
                  + (f", above the bound xi = {lg['xi']}" if lg["exceeds_xi"] else "")
                  + f"); for the {lg['large_groups']:,} larger groups "
                  f"({lg['large_persons']:,} persons) nobody outside a group is assumed to "
                  "know every member's keys: they are covered by the bound for an intruder "
                  "who knows a group's group-level keys and for one who knows a person's keys "
                  "and its group's keys (docs/HOUSEHOLDS.md, \"Large groups\")."]
    elif comp is not None and comp.get("exceeds_xi"):
        lines += ["", "**Household composition not protected** (`risk.households: warn`): "
                  "an intruder who knows a household's household-level keys and its "
                  "members' person-level keys finds it with a probability above the bound "
                  f"xi = {comp['xi']} (measured: {comp['max_class_estimate']:.4f} in the "
                  "riskiest class of households)."]
    if comp is not None and comp.get("missingness_groups"):  # (issue 44)
        lines += ["", "**Missing values**: person columns are missing for some classes of the "
                  "person-level keys only (" + "; ".join(comp["missingness_groups"]) + "). "
                  "A member whose person-level keys changed with its household's composition "
                  "keeps its other values, and took only a class where its pattern of "
                  "missing values occurs in the original, so these relations hold in this "
                  "file exactly; values that depend on the class (an income by age) still "
                  "move with the members who changed class."]
    report = getattr(result, "household_report", None)
    left = ((report or {}).get("risk") or {}).get("left_out")
    if left:
        sizes = ", ".join(f"{e['size']} ({e['households']})" for e in left["sizes"])
        share = (f", {100 * left['weighted_share']:.2f}% of the weighted persons"
                 if left.get("weighted_share") is not None else "")
        lines += ["", "**Households left out (exposed sizes)**: the households of size "
                  f"(households in the file) {sizes}, {left['households']:,} households and "
                  f"{left['persons']:,} persons ({100 * left['persons'] / max(left['of_persons'], 1):.2f}% "
                  f"of {left['of_persons']:,}{share}), are not in this file: fewer than 1/xi "
                  "households of the file had those sizes, and the members sharing a "
                  "pseudonym show every household's size, so no release could protect them "
                  "(risk.exposed_sizes: drop). "
                  + ("The weight is recalibrated to the whole file's totals (household-key "
                     "totals kept; their size's total carried by the nearest released size), "
                     "so weighted totals still estimate the whole population"
                     if config.input.weight_release == "recalibrated" else
                     "The weight is released as it is: weighted totals miss their share")
                  + "; estimates for households of those sizes cannot be made."]
    sl = (comp or {}).get("size_level") or {}
    if sl.get("exposed_sizes"):
        sizes = ", ".join(f"{e['size']} ({e['households']})" for e in sl["exposed_sizes"])
        lines += ["", "**Household sizes not protected**: households of size (households in "
                  f"the file) {sizes} are fewer than 1/xi; the members sharing a pseudonym "
                  "show every household's size, so an intruder who knows such a household's "
                  "size finds it with a probability above xi (at most "
                  f"{sl['certificate']:.4f}). Every other size is within xi for an intruder "
                  "who knows a household's household-level keys and size."]
    return lines


def _dp_pram_lines(config: ReleaseConfig) -> list[str]:
    """The "Differentially private PRAM" section: eps of every ``config.perturb`` variable,
    marked where its domain was read from the input ([] without such variables)."""
    if not config.perturb:
        return []
    lines = ["", "### Differentially private PRAM", "",
             "These non-key variables were randomized with eps-differentially private PRAM "
             "(smaller eps = more protection, more noise)"
             + ("; the guarantee does not hold where marked below:"
                if any(p.domain_from_data for p in config.perturb.values()) else ":"), ""]
    lines += [f"- {md_code(v)}: eps = {p.epsilon:g}"
              + (f" (**{NOT_DP}**: its list of values was read from the input, so every "
                 "value that occurs in the input, however rare, appears in this file)"
                 if p.domain_from_data else "")
              for v, p in config.perturb.items()]
    return lines


def _shows_moved(result: Any) -> dict[str, list[str]]:
    """``{column: keys}`` of the released columns that show which records moved (the
    dependence check's ``visible``: a copy or a finer grain of a recoded key)."""
    figures = list(getattr(result, "dependence", None) or [])
    return {f.column: sorted(f.visible) for f in figures
            if getattr(f, "visible", None) and not f.flagged}


def _moved_note(keys: list[str]) -> str:
    names = ", ".join(md_code(k) for k in keys)
    return (f"unchanged; **shows moved records**: its value fixes the original {names}, so a "
            f"record whose released {names} disagrees with it was post-randomized (the "
            "identification risk stays <= xi; `risk.dependence: strict` refuses such a "
            "column)")


def _variable_table(config: ReleaseConfig, cols: list[str], types: dict[str, str],
                    merged_vars: list[str], shown: dict[str, list[str]] | None = None,
                    design: Any = None) -> list[str]:
    """The "Variables" table: number, name, type, role and perturbation of every column
    (``shown``: the columns that show moved records, and the keys they fix)."""
    shown = shown or {}
    lines = ["", "## Variables", "", "| # | variable | type | role | perturbation |",
             "|---|---|---|---|---|"]
    for i, c in enumerate(cols, start=1):
        typ = "integer" if c == PUBLIC_ID else types[c]
        role = ("record id" if c == PUBLIC_ID else "key" if c in config.key_variables
                else "weight" if c == config.input.weight else "")
        what = _perturbation(c, config, merged_vars, design)  # Markdown, user text escaped
        if c in shown and what == "unchanged":
            what = _moved_note(shown[c])
        lines.append(f"| {i} | {md_code(c)} | {typ} | {role} | {what} |")
    return lines


def _key_categories(config: ReleaseConfig, k: str) -> list[str]:
    """Key variable k's categories (a range, a list, or a value/label table), what an empty
    value means, and its recoding."""
    kv = config.key_variables[k]
    lines = [f"### {md_code(k)}", ""]
    if kv.range is not None and not kv.labels:
        lines.append(f"Whole numbers {kv.range[0]} to {kv.range[1]}.")
    elif not kv.labels and len(kv.domain) > _MAX_LISTED:
        shown = ", ".join(md_code(v) for v in kv.domain[:100])
        lines.append(f"{len(kv.domain)} categories (the full list is in the release "
                     f"config); the first 100: {shown}, ...")
    elif not kv.labels:
        lines.append("Categories: " + ", ".join(md_code(v) for v in kv.domain) + ".")
    else:
        lines += ["| value | label |", "|---|---|"]
        lines += [f"| {md_text(v)} | {md_text(kv.labels.get(v, ''))} |" for v in kv.domain]
    if kv.missing == "category" and not kv.missing_moves:
        lines.append("")
        lines.append("An empty value means *missing* (a category of its own). A blank is "
                     "always a real blank: records with a missing value were "
                     "post-randomized only among records missing the same key(s), so no "
                     "value was made missing and no missing value was replaced.")
    elif kv.missing == "category":
        lines.append("")
        lines.append("An empty value means *missing* (a category of its own). Missing "
                     "values were post-randomized like any other value (missing_moves): a "
                     "blank may stand for a real value, and a value for a real blank.")
    if k in config.recoded_keys:
        lines += ["", _recoding_note(k, config)]
    lines.append("")
    return lines


def codebook_markdown(config: ReleaseConfig, result: Any, schema: pa.Schema | None = None,
                      n_records: int | None = None,
                      expected: dict[str, Any] | None = None) -> str:
    """The public codebook (Markdown).

    Lists every public variable with its type and whether it may have been perturbed, the
    categories and labels of every key variable, the partition (generalized values preserved
    exactly), xi, the number of records and the DP-PRAM variables of ``config.perturb``. It
    states nothing record-level and nothing from which PRAM could be undone: no seed, no theta
    per block, no PRB contents, no counts of changed records per block.

    With ``schema`` (the public Arrow schema, as every engine writes it) the variables and their
    types come from it and ``result`` only needs ``partition_sets``; ``n_records`` then gives n.
    ``expected``: utility.json's ``expected_totals`` (a file with a survey weight), whose
    summed shares the codebook states (:func:`sdc.reports.expected.weighted_totals_words`).
    """
    cols, types, n = _columns(config, result, schema, n_records)
    n_merged, merged_vars = _merged_variables(result, config)
    design = release_design(config, result)
    lines = _disclosure_lines(config, n, len(cols), expected, design)
    lines += _partition_lines(config, n_merged, merged_vars)
    lines += _household_lines(config, result)
    lines += _dp_pram_lines(config)
    lines += _variable_table(config, cols, types, merged_vars, _shows_moved(result), design)
    lines += ["", "## Categories of the key variables", ""]
    for k in config.key_names:
        lines += _key_categories(config, k)
    return "\n".join(lines).rstrip() + "\n"


def _household_composition(result: Any) -> dict[str, Any] | None:
    """The composition intruder's figures of a household release (risk.json's
    ``households.composition``), if measured."""
    report = getattr(result, "household_report", None)
    if report is not None:
        return report.get("risk", {}).get("composition")
    return getattr(getattr(result, "households", None), "composition", None)


def _recoding_note(key: str, config: ReleaseConfig) -> str:
    """The codebook's sentence on a recoded key: which declared values each coarser released
    value stands for (at most 8 listed per value)."""
    src = config.input_key_variables[key]
    code_map, _ = config.recode_map(key)
    dom = src.domain
    parts = []
    released = config.key_variables[key]
    for g, lab in enumerate(released.domain):
        members = [dom[i] for i in np.flatnonzero(code_map[:len(dom)] == g)]
        if len(members) > 1:
            shown = ", ".join(md_code(m) for m in members[:8])
            more = f" and {len(members) - 8} more" if len(members) > 8 else ""
            name = released.labels.get(lab)      # a number stands for its class: 18 = "18-19"
            named = f" ({md_text(name)})" if name and name != str(lab) else ""
            parts.append(f"{md_code(lab)}{named} = {shown}{more}")
    kind = type(src.recode).__name__.lower().replace("recodebands", "bands")
    text = (f"Recoded before release (`{kind}`): the file's "
            f"{len(dom)} declared values are released as {len(config.key_variables[key].domain)}")
    return text + (": " + "; ".join(parts) + "." if parts else ".")


