"""``sdc init``, last step: the draft as commented YAML (:func:`draft_yaml`), every value on one
line, long lists wrapped; ``yaml.safe_load`` of the text equals :meth:`Draft.as_dict`."""

from __future__ import annotations

from typing import Any

import yaml

from sdc.authoring.observe import Draft, KeyDraft
from sdc.config.model import certificate_text

__all__ = ["draft_yaml"]


class _OneLineDumper(yaml.SafeDumper):
    """SafeDumper that writes a string holding a line break double-quoted (``"a\\nb"``): as a
    plain scalar it spans lines, and the draft puts every value on one line (a category with a
    newline made ``sdc init`` write an invalid YAML draft)."""


def _str_one_line(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if any(ch in data for ch in "\r\n\x85\u2028\u2029"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return dumper.represent_str(data)


_OneLineDumper.add_representer(str, _str_one_line)


def _flow(value: Any) -> str:
    """One YAML value in flow style on one line (strings quoted by YAML's own rules)."""
    text = yaml.dump(value, Dumper=_OneLineDumper, default_flow_style=True, allow_unicode=True,
                     width=10**9, sort_keys=False).strip()
    return text.removesuffix("...").strip()


def _wrap_list(prefix: str, items: list[Any], width: int = 96) -> list[str]:
    """``prefix: [a, b, ...]`` wrapped over several lines when long."""
    one = f"{prefix}{_flow(items)}"
    if len(one) <= width:
        return [one]
    lines, cur = [], prefix + "["
    # a comment's continuation lines must stay comments: "  # released: [a," -> "  #            b]"
    lead = prefix[: len(prefix) - len(prefix.lstrip())]
    if prefix.lstrip().startswith("#"):
        pad = lead + "#" + " " * (len(prefix) - len(lead))
    else:
        pad = " " * (len(prefix) + 1)
    for i, v in enumerate(items):
        piece = _flow([v])[1:-1] + ("," if i < len(items) - 1 else "]")
        if len(cur) + len(piece) + 1 > width and cur.strip() not in ("", prefix.strip() + "["):
            lines.append(cur.rstrip())
            cur = pad
        cur += piece + " "
    lines.append(cur.rstrip())
    return lines


def _merge_note(d: Any) -> str:
    """What ``merge_along`` says, true of the draft: small PRBs are merged across partition
    sets that differ in these keys, in this order (the design's order: nominal keys first,
    then ordered ones; importance is what the recodings weigh, not this order)."""
    high = [k for k in d.risk["merge_along"]
            if getattr(d.keys.get(k), "importance", None) == "high"]
    note = "small PRBs merged across these keys' partition sets, in this order"
    if high:
        note += f" (also {', '.join(high)}: importance high holds their recoding, not merges)"
    return note


def draft_yaml(draft: Draft, *, data_display: str | None = None) -> str:
    """The draft as commented YAML; ``yaml.safe_load`` of it equals :meth:`Draft.as_dict`."""
    d = draft
    L: list[str] = [
        f"# Release config drafted by `sdc init` from {data_display or d.input['path']}.",
        "# Review every line before a real release; `sdc plan` shows what a release would do.",
        "#",
        "# !! OBSERVED DOMAINS: the categories and ranges below were READ FROM THE DATA. Before a",
        "# !! real release replace each one by the variable's PUBLIC domain (all codes of the",
        "# !! questionnaire or classification), because a domain read from the data can reveal a",
        "# !! rare value: an age range ending at 104, or a category only one respondent has, tells",
        "# !! everyone that such a respondent is in the file.",
        "#",
        "# Direct identifiers (names, addresses, phone numbers, exact dates) must be listed under",
        "# input.drop: sdc does not detect them. Every column that is not a key, the id, the",
        "# weight or dropped is released unchanged.",
        f"name: {_flow(d.name)}",
        "input:",
    ]
    L += _input_lines(d)
    L += ["key_variables:                # what an intruder can match on (OBSERVED domains!)"]
    for k, kd in d.keys.items():
        L += _key_lines(k, kd)
    c = d.check
    L += [
        "partition:                    # generalized keys -> partition sets; PRAM never leaves one",
        f"  # suggested by sdc init and checked on the data: {c.get('partition_sets', '?')} "
        f"partition sets, {c.get('small_prbs', '?')} PRB(s) with k < kmin = {c.get('kmin', '?')}",
    ]
    L += [f"  # {h}" for h in d.history]
    L += [f"  # {h}" for h in d.design_notes]
    if not d.partition:
        L.append("  {}")
    for var, rule in d.partition.items():
        if rule == "as_is" or rule == {"as_is": True}:
            L.append(f"  {_flow(var)}: as_is")
        elif isinstance(rule, dict) and set(rule) == {"bands"}:
            L.append(f"  {_flow(var)}: {{bands: {_flow(rule['bands'])}}}   # left edges")
        else:
            L.append(f"  {_flow(var)}: {_flow(rule)}")
    L += [
        "risk:",
        f"  xi: {d.risk['xi']}                     # every correct-match probability <= xi (1/3 < xi < 1)",
        f"  theta: {d.risk['theta']}               # theorem | calibrated (changes fewer records)",
        f"  small_blocks: {d.risk['small_blocks']}          # merge | calibrate | fail: PRBs with k < kmin",
    ]
    if d.risk.get("weighted"):
        L.append("  weighted: true              # weighted cell totals unbiased too (the weight "
                 "decides who moves; false: NZY, counts only)")
    if d.risk.get("merge_along"):
        L.append(f"  merge_along: {_flow(d.risk['merge_along'])}   # {_merge_note(d)}")
    if d.risk.get("composition"):
        L.append(f"  composition: {d.risk['composition']}       # the household stage keyed on "
                 "household keys x composition (docs/HOUSEHOLDS.md)")
    if d.risk.get("large_groups"):
        L.append(f"  large_groups: {d.risk['large_groups']}       # groups of more members: "
                 "outside the composition intruder's model (docs/HOUSEHOLDS.md \"Large groups\")")
    if d.risk.get("destinations"):
        L.append(f"  destinations: {d.risk['destinations']}       # a moved household takes a "
                 "near composition (fewer members change)")
    if d.risk.get("near"):
        L.append(f"  near: {_flow(d.risk['near'])}")
    if d.risk.get("exposed_sizes"):
        L.append(f"  exposed_sizes: {d.risk['exposed_sizes']}      # households of a size held by "
                 "fewer than 1/xi households (their size shows) left out of the public file, "
                 "weight recalibrated (docs/HOUSEHOLDS.md \"Exposed sizes\")")
    if c.get("households"):
        L += _household_check_lines(c)
    elif c:
        L.append(f"  # checked: certificate {certificate_text(c['certificate'], c['xi'], 4)} xi "
                 f"on {c['records']} "
                 f"records, {c['prbs']} PRBs, {c['merges']} merge(s), about "
                 f"{c['expected_changed']:.0f} records changed")
    L += [
        "seed:",
        f"  file: {_flow(d.seed_file)}   # created (mode 0600) by the first release; back it up",
        "output:",
        f"  dir: {_flow(d.output['dir'])}",
        f"  formats: {_flow(d.output['formats'])}   # parquet, csv, sav, dta",
    ]
    return "\n".join(L) + "\n"


def _household_check_lines(c: dict[str, Any]) -> list[str]:
    """The check comment of a household draft (both stages and the composition intruder)."""
    if c.get("refused"):
        return [f"  # checked: refused as drafted: {c['refused']}"]
    if "changed" in c:
        from sdc.method.expected_changes import changes_text

        e, sd = c.get("expected_changed", float("nan")), c.get("sd_changed", float("nan"))
        changed = (f"about {c['changed']} records" if e != e else
                   changes_text(e, sd * sd, int(c["records"])) + f", {c['changed']} in one draw")
        return [f"  # checked (released once in memory, as sdc release judges it): certificate "
                f"{certificate_text(c['certificate'], c['xi'], 4)} xi on {c['records']} "
                f"records; {changed}; {c['households_changed']} households changed"]
    return [f"  # checked: certificate {certificate_text(c['certificate'], c['xi'], 4)} xi on "
            f"{c['records']} records, {c['prbs']} PRBs in both stages, {c['merges']} merge(s)"]


def _input_lines(d: Draft) -> list[str]:
    """The ``input:`` section's entries, the columns dropped or released unchanged, and
    ``derived:``."""
    L: list[str] = []
    for k, v in d.input.items():
        if k == "drop":
            L.append(f"  drop: {_flow(v)}" + ("" if v else
                     "                    # direct identifiers: never released"))
            for col, why in d.dependent.items():
                if why.startswith("(the survey weight)"):
                    L.append(f"  # dropped by sdc init: {col} {why}; a weight cannot be "
                             "derived: and keeping its key as_is did not suffice (small PRBs "
                             "merged across it)")
                    continue
                if "cannot be recomputed" in why:  # a function of the keys before recoding
                    L.append(f"  # dropped by sdc init: {col} {why}: to release it, keep its keys "
                             "unrecoded and list it under derived:")
                    continue
                L.append(f"  # dropped by sdc init: {col} {why}; it is not a function of the")
                L.append("  # keys (derived: would be refused): to release it, make it a key "
                         "variable")
        elif k == "weight_release":
            L.append(f"  weight_release: {_flow(v)}   # the weight gave household keys away: "
                     "post-stratified to the")
            L.append("  # released household keys (totals per released region x size = the "
                     "original ones; docs/METHOD.md 7.13)")
        elif k == "na_values":
            cols = d.na_columns
            shown = ", ".join(cols[:6]) + (f" (+{len(cols) - 6} more)" if len(cols) > 6 else "")
            L.append(f"  na_values: {_flow(v)}   # read as missing (an empty field in the public "
                     "CSV): without it")
            L.append(f"  # {shown} would be text; with it they are numbers")
        elif k == "household_id":
            L.append(f"  household_id: {_flow(v)}   # groups persons into households "
                     "(released as pseudonyms)")
        elif k == "members":
            L.append(f"  members: {_flow(v)}   # declared (sdc init --members-sampled): members "
                     "are a sample of each group,")
            L.append("  # the composition intruder is outside the threat model "
                     "(docs/HOUSEHOLDS.md \"Sampled members\")")
        elif k == "household_columns":
            L += _wrap_list("  household_columns: ", list(v))
            L.append("  # (non-key columns with one value per household: checked constant, "
                     "released unchanged)")
        else:
            L.append(f"  {k}: {_flow(v)}")
    if d.input_labels:
        L.append("  labels:                     # variable labels of non-key columns (SPSS/Stata)")
        L += [f"    {_flow(c)}: {_flow(t)}" for c, t in d.input_labels.items()]
    if d.released_unchanged:
        L += _wrap_list("  # released unchanged: ", [str(c) for c in d.released_unchanged])
    if d.derived:
        L.append(f"derived: {_flow(list(d.derived))}   # recomputed from the RELEASED key values")
        for col, why in d.derived.items():
            L.append(f"  # {col} {why}; it is a function of the keys, so sdc releases it "
                     "recomputed")
    return L


def _key_lines(k: str, kd: KeyDraft) -> list[str]:
    """One key variable's entry: label, observed domain, value labels, missing, recode."""
    L: list[str] = []
    L.append(f"  {_flow(k)}:")
    if kd.label:
        L.append(f"    label: {_flow(kd.label)}")
    if kd.level == "household":
        L.append("    level: household             # one value in every household (checked)")
    if kd.range is not None:
        L.append(f"    range: {_flow(list(kd.range))}"
                 f"           # observed min and max ({kd.n_observed} distinct values)")
    else:
        note = f"    # observed: {kd.n_observed} categories"
        if kd.unobserved_labelled:
            note += (f"; labelled in the file but absent from the data: "
                     f"{_flow(kd.unobserved_labelled)}")
        L.append(note)
        L += _wrap_list("    categories: ", list(kd.categories or []))
    if kd.labels:
        L.append("    labels:")
        L += [f"      {_flow(v)}: {_flow(t)}" for v, t in kd.labels.items()]
    if kd.dropped_labels:
        L.append(f"    # value labels outside this domain, not used: {_flow(kd.dropped_labels)}")
    if kd.missing:
        L.append("    missing: category          # the data have empty values")
        if kd.missing_moves:
            L.append("    # too few records miss it to certify them on their own: missing moves "
                     "like a category")
            L.append("    missing_moves: true        # (default false: a blank stays a real blank)")
        else:
            L.append("    # missing_moves: false (default): a blank is never a perturbed "
                     "real value")
    if kd.importance is not None:
        L.append(f"    importance: {kd.importance}          # sdc init --analysis-keys: `sdc "
                 "design` keeps its moves smallest")
    if kd.recode is not None:
        L.append(f"    # recoded by `sdc design` ({kd.recode_note}): released values are coarser")
        L.append(f"    recode: {_flow(kd.recode)}")
    return L
