"""JSON Schemas (draft 2020-12) of ``internal/risk.json`` and ``internal/utility.json``.

The schemas here are the source of truth; ``docs/report_schema/risk.schema.json`` and
``utility.schema.json`` are written from them by ``python -m sdc.reports.schema docs/report_schema``
(a test checks they are current). Every field carries a description; ``docs/REPORTS.md`` explains
the numbers in prose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sdc.errors import InputError

__all__ = ["RISK_SCHEMA", "UTILITY_SCHEMA", "ReportSchemaError", "validate", "write_schemas"]

_NUM = {"type": "number"}
_INT = {"type": "integer", "minimum": 0}
_SHARE = {"type": "number", "minimum": 0, "maximum": 1}
_NNUM = {"type": ["number", "null"]}
_NINT = {"type": ["integer", "null"]}


def _obj(props: dict[str, Any], desc: str = "", required: list[str] | None = None,
         extra: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": sorted(props) if required is None else required,
                           "additionalProperties": extra}
    if desc:
        out["description"] = desc
    return out


def _d(schema: dict[str, Any], desc: str) -> dict[str, Any]:
    return {**schema, "description": desc}


def _arr(items: dict[str, Any], desc: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items}
    if desc:
        out["description"] = desc
    return out


_RELEASE_COMMON = {
    "name": _d({"type": "string"}, "Release job name (config 'name')."),
    "n_records": _d(_INT, "Records in the input (and in the release)."),
    "key_variables": _arr({"type": "string"}, "Key variables, config order."),
    "partition_variables": _arr({"type": "string"}, "Partition variables, config order."),
    "weight": _d({"type": ["string", "null"]}, "Weight column (input.weight) or null."),
}

_FREQ_CLASS = _obj({
    "class": _d({"type": "string", "enum": ["1", "2", "3-4", "5+"]}, "Cell-frequency class."),
    "min": _d(_INT, "Smallest t in the class."),
    "max": _d(_NINT, "Largest t in the class (null: unbounded)."),
    "cells": _d(_INT, "Non-empty cells with t in the class."),
    "records": _d(_INT, "Records in those cells (sum of t)."),
    "share_records": _d(_SHARE, "records / n."),
})

_RISK_SUMMARY = _obj({
    "n_records": _INT,
    "n_cells": _d(_INT, "Non-empty cells of the key variables' cross-classification."),
    "frequency_classes": _arr(_FREQ_CLASS, "Cells and records by cell frequency 1, 2, 3-4, 5+."),
    "sensitive": _obj({
        "threshold": _d(_NUM, "1/xi: a cell is sensitive iff 0 < t < 1/xi."),
        "cells": _INT, "records": _INT}, "Sensitive cells and the records in them."),
    "k_anonymity": _arr(_obj({
        "k": _d(_INT, "k of k-anonymity."),
        "records_violating": _d(_INT, "Records with fk < k (sdcMicro print(type='kAnon'))."),
        "share": _SHARE,
        "weighted_violating": _d(_NNUM, "Sum of the weights of those records (null: no weight).")})),
    "sdcmicro": _obj({
        "weighted": _d({"type": "boolean"}, "Whether Fk used a weight column."),
        "expected_reidentifications": _d(_NUM, "ER = sum of individual risks (global_risk_ER)."),
        "global_risk": _d(_NUM, "ER / n (sdcMicro global_risk)."),
        "global_risk_pct": _d(_NUM, "100 ER / n."),
        "max_individual_risk": _NUM,
        "quantiles": _obj({"p50": _NUM, "p90": _NUM, "p99": _NUM},
                          "Quantiles of the individual risk over records."),
        "records_risk_above": _arr(_obj({"threshold": _NUM, "records": _INT})),
        "high_risk_records": _d(_INT, "r > median + 2 mad and r > 0.1 (sdcMicro print(type='risk'))."),
        "by_fk_class": _arr(_obj({"class": {"type": "string"}, "records": _INT,
                                  "sum_risk": _NUM, "mean_risk": _NNUM})),
    }, "sdcMicro measure_risk / indivRisk figures (see sdc.reports.disclosure)."),
}, "Risk figures of one file.")

_PRB = _obj({
    "prb": _INT, "partition_key": {"type": "string"},
    "n_partition_sets": _d(_INT, "Partition sets in the PRB (> 1 after merging)."),
    "k": _d(_INT, "Sensitive cells in the PRB."),
    "n_records": _d(_INT, "Records in those cells."),
    "profile": _d({"type": "object", "additionalProperties": _INT},
                  "Frequency profile: t (as a string) -> number of cells with that t."),
    "theta": _d(_NUM, "theta used for the PRB."), "kmin": _INT,
    "max_risk": _d(_NUM, "Exact mechanism-aware max over target cells j, picked cells z (own "
                         "or another of the PRB) and a >= 1 of R_{j->z}(a, t)."),
    "max_risk_t": _d(_INT, "t_j of the target's cell where the max is attained."),
    "max_risk_a": _d(_INT, "Released count S_z = a where the max is attained."),
    "max_risk_pick": _d({"enum": ["own", "other"]},
                        "The intruder's pick where the max is attained: own cell (NZY) or other."),
    "max_risk_t_z": _d(_INT, "Frequency of the picked cell."),
    "own_max_risk": _d(_NUM, "Max over own-cell picks only (NZY's R_j(a, t))."),
    "other_max_risk": _d(_NUM, "Max over other-cell picks only."),
    "action": _d({"type": "string"}, "theorem | calibrated, prefixed 'merged+' after merging."),
    "expected_changed": _d(_NUM, "theta * k: expected number of records moved."),
    "changed": _d(_INT, "Records actually moved in the release."),
    "pass": _d({"type": "boolean"}, "max_risk <= xi."),
})

_INTRUDER_CLASS = _obj({
    "pick": _d({"enum": ["own", "other"]},
               "The intruder picks from the target's own cell (NZY) or another cell z of the PRB."),
    "t": _d(_INT, "Original frequency of the target's cell."),
    "t_z": _d(_INT, "Original frequency of the picked cell (= t for own)."),
    "a": _d(_INT, "Released count S_z of the picked cell."),
    "estimate": _d(_NNUM, "Monte Carlo P(correct | t, t_z, S_z = a), all PRBs pooled."),
    "se": _d(_NNUM, "Its standard error (ratio estimator over replications)."),
    "n_obs": _d(_INT, "(replication, target) pairs in the class."),
    "n_eff": _d(_NNUM, "Conservative effective sample size (sum m_r)^2 / sum m_r^2."),
    "exact_pooled": _d(_NNUM, "The same pooled probability computed exactly."),
    "exact_min": _d(_NNUM, "Smallest exact R_b(a, t) over PRBs b."),
    "exact_max": _d(_NNUM, "Largest exact R_b(a, t) over PRBs b."),
    "p_s_equals_a": _d(_NNUM, "Exact P(S_z = a) averaged over sensitive records (own) or over "
                              "the class's (target, other cell) pairs (other)."),
})

_SERIES_CLASS = _obj({
    "t": _d(_INT, "The target's cell frequency t_j in this release."),
    "a": _d(_INT, "Records whose modal released cell (series) or released cell (single) is the "
                  "target's true cell."),
    "n_series": _d(_INT, "Targets of this release in the class, linking intruder."),
    "series_rate": _d(_NNUM, "Correct-match rate of the linking intruder (modal released cell "
                             "over both releases); null: no target."),
    "n_single": _d(_INT, "Targets in the class for the same intruder on this release alone."),
    "single_rate": _d(_NNUM, "Its correct-match rate on this release alone; null: no target."),
})

_SERIES = {"description": (
    "Present when the release series (docs/SERIES.md) has a previous release: the comparison "
    "with it, the same figures as internal/audit.json's series.risk_vs_previous. Measured, "
    "not certified (the certificate covers one release)."),
    "oneOf": [
        _obj({
            "previous": _d({"type": "string"}, "Folder name of the previous release."),
            "n_common": _d(_INT, "Records (by identity) in both releases."),
            "n_changed": _d(_INT, "Of those, records whose released key values changed."),
            "changed_share": _d(_SHARE, "n_changed / n_common."),
            "rate_one_match_series": _d(_SHARE, "Linking intruder's correct-match rate over "
                                                "targets with a = 1 matching record."),
            "rate_one_match_single": _d(_SHARE, "The same on this release alone."),
            "xi": _d(_NUM, "Risk target."),
            "intruder": _arr(_SERIES_CLASS, "Per (t, a) class, 1 <= a <= 5."),
        }),
        _obj({"previous": _d({"type": "string"}, "Folder name of the previous release."),
              "error": _d({"type": "string"}, "Why the series risk could not be measured.")}),
    ]}

RISK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://sdc.example/report_schema/risk.schema.json",
    "title": "sdc risk report (internal/risk.json)",
    **_obj({
        "schema_version": {"const": "sdc-risk/1"},
        "release": _obj({**_RELEASE_COMMON,
                         "xi": _d(_NUM, "Risk target."), "theta": _d(_NUM, "Theorem theta, h(theta) = xi."),
                         "kmin": _d(_INT, "ceil(1/(1 - theta))."),
                         "theta_mode": {"enum": ["theorem", "calibrated"]},
                         "small_blocks": {"enum": ["merge", "calibrate", "fail"]},
                         "design": _d(_obj({"name": {"type": "string"},
                                            "description": {"type": "string"}}),
                                      "The design in its own words: uniform NZY, near-cell, "
                                      "weighted (near-cell), household protect/measure "
                                      "(absent in documents of older releases)."),
                         "perturb": _arr(_obj({
                             "variable": _d({"type": "string"}, "A perturb: variable."),
                             "epsilon": _d(_NUM, "Its eps."),
                             "differentially_private": _d(
                                 {"type": "boolean"}, "false when its domain was taken from "
                                 "the data (domain_from_data: true)."),
                             "domain": _d({"type": "string"}, "Where its domain came from."),
                         }), "Present with perturb: variables (DP-PRAM).")},
                        "The release job.",
                        required=sorted([*_RELEASE_COMMON, "xi", "theta", "kmin", "theta_mode",
                                         "small_blocks"])),
        "verdict": _obj({
            "certificate": _d(_NUM, "Max over PRBs of max R and over non-sensitive cells of 1/t."),
            "xi": _NUM, "pass": _d({"type": "boolean"}, "certificate <= xi."),
            "at": _d({"type": "object"},
                     "Where the certificate is attained (source, prb, t, a, pick, t_z)."),
            "n_prb": _INT, "n_changed": _INT, "share_changed": _SHARE, "n_partition_sets": _INT,
            "merges": _arr({"type": "string"}, "Small-block merges, in order."),
        }, "Certificate against xi."),
        "before": {**_RISK_SUMMARY, "description": "Risk of the original file."},
        "after": {**_RISK_SUMMARY, "description": "Risk of the released file, its key values taken as true."},
        "partition_sets": _arr(_obj({
            "partition_set": _INT, "partition_key": {"type": "string"}, "prb": _NINT,
            "n_records": _INT, "n_records_after": _INT, "cells_before": _INT, "cells_after": _INT,
            "sensitive_cells_before": _INT, "sensitive_records_before": _INT,
            "sensitive_cells_after": _INT, "sensitive_records_after": _INT,
        }), "Per partition set: cells and sensitive cells/records before and after."),
        "prbs": _arr(_PRB, "The NZY certificate per PRB."),
        "intruder": _obj({
            "n_sim": _d(_INT, "Replications."), "a_max": _INT,
            "stream": _d({"type": "string"}, "Stream key template of replication i."),
            "estimator": {"type": "string"}, "xi": _NNUM,
            "design": _d({"type": "string"}, "The transition design replayed (plan.design), "
                         "present when it is not NZY's uniform one: near, weighted, ..."),
            "n_targets": _d(_INT, "Sensitive records attacked per replication."),
            "max_estimate": _NNUM,
            "classes": _arr(_INTRUDER_CLASS),
            "overall": _obj({
                "expected_correct_exact": _d(_NUM, "E[correct matches] attacking every sensitive record."),
                "expected_correct_estimate": _NUM, "se": _NUM}),
        }, "Monte Carlo intruder (sdc.reports.intruder).", required=[
            "n_sim", "a_max", "stream", "estimator", "xi", "n_targets", "classes", "overall"]),
        "series": _SERIES,
    }, required=["after", "before", "intruder", "partition_sets", "prbs", "release",
                 "schema_version", "verdict"]),
}

_STATS = {"type": "object", "properties": {
    "n": _INT, "suppressed": {"type": "boolean"},
    "mean": _NNUM, "q1": _NNUM, "median": _NNUM, "q3": _NNUM},
    "required": ["n", "suppressed", "mean", "q1", "median", "q3"], "additionalProperties": False}

_CATEGORY = _obj({
    "value": _d({"type": ["number", "string", "null"]},
                "Released category (null: missing; a fraction: a class midpoint)."),
    "label": {"type": "string"},
    "original": _INT, "original_share": _SHARE, "released": _INT, "released_share": _SHARE,
    "difference": _d({"type": "integer"}, "released - original."),
    "share_difference": _NUM,
    "weighted_original": _NNUM, "weighted_released": _NNUM, "weighted_difference": _NNUM,
    "weighted_original_share": _NNUM, "weighted_released_share": _NNUM,
    "weighted_share_difference": _NNUM,
    "weighted_suppressed": _d({"type": "boolean"}, "Weighted totals withheld: fewer than "
                              "numeric_min_group records on one side."),
}, required=["value", "label", "original", "original_share", "released", "released_share",
             "difference", "share_difference"])

UTILITY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://sdc.example/report_schema/utility.schema.json",
    "title": "sdc utility report (internal/utility.json)",
    **_obj({
        "schema_version": {"const": "sdc-utility/1"},
        "release": _obj({**_RELEASE_COMMON, "numeric_min_group": _d(
            _INT, "Smallest group whose numeric summaries are shown.")}),
        "key_variables": _arr(_obj({
            "name": {"type": "string"}, "partition_variable": {"type": "boolean"},
            "partition_rule": _d({"enum": ["as_is", "bands", "groups", "hierarchy", None]},
                                 "How the variable partitions the file (null: not a partition variable)."),
            "generalized_totals": {"oneOf": [{"type": "null"}, _arr(_obj({
                "label": {"type": "string"}, "original": _INT, "released": _INT,
                "difference": {"type": "integer"}}))],
                "description": "Counts per generalized value (band, group, hierarchy level) of a "
                               "generalized partition variable: preserved unless PRBs were merged."},
            "n_categories": _INT,
            "tvd": _d(_SHARE, "1/2 sum |p - q| over categories."),
            "hellinger": _d(_SHARE, "sqrt(1/2 sum (sqrt p - sqrt q)^2)."),
            "n_changed": _INT, "share_changed": _SHARE,
            "max_abs_difference": _INT,
            "weighted": {"oneOf": [{"type": "null"}, _obj({
                "tvd": _SHARE, "hellinger": _SHARE, "max_abs_difference": _NUM,
                "max_abs_share_difference": _NUM})]},
            "categories": _arr(_CATEGORY, "Tables 1-2 of the NZY review, one row per category."),
        }), "Per key variable: marginal before/after."),
        "pairs": _arr(_obj({
            "a": {"type": "string"}, "b": {"type": "string"},
            "tvd": _d(_SHARE, "TVD of the two-way table."),
            "cells_original": _INT, "cells_released": _INT, "weighted_tvd": _NNUM})),
        "numeric": _arr(_obj({
            "variable": {"type": "string"}, "by": {"type": "string"},
            "rows": _arr(_obj({"value": {"type": ["number", "string", "null"]},
                               "label": {"type": "string"}, "before": _STATS, "after": _STATS})),
        }), "Numeric non-key variables by key-variable category."),
        "changed": _obj({
            "overall": _obj({"n_changed": _INT, "share": _SHARE}),
            "by_key_variable": _arr(_obj({"name": {"type": "string"}, "n_changed": _INT,
                                          "share": _SHARE})),
            "by_partition_set": _arr(_obj({"partition_key": {"type": "string"},
                                           "n_records": _INT, "n_changed": _INT,
                                           "share": _SHARE})),
        }),
    }),
}


UTILITY_SCHEMA["properties"]["recoding"] = _d(_obj({
    "keys": _arr(_obj({
        "name": {"type": "string"}, "rule": {"type": "string"},
        "declared_values": _INT, "released_values": _INT,
        "records_coarsened": _d(_INT, "Records whose released value stands for more than one "
                                      "declared value."),
        "share_coarsened": _SHARE,
        "entropy_before": _d(_NUM, "Shannon entropy (bits) of the declared values."),
        "entropy_after": _d(_NUM, "Shannon entropy (bits) of the released values."),
        "entropy_lost": _NUM, "entropy_kept": _NUM})),
    "records_coarsened": _d(_INT, "Records with at least one coarsened key."),
    "share_coarsened": _SHARE,
    "joint_entropy_after": _d(_NUM, "Entropy (bits) of the released joint key table."),
}), "Recoding loss (key_variables.X.recode); present only when a key is recoded.")


_CI_OVERLAP = _d(_NNUM, "Karr et al. (2006) overlap of the 95% confidence intervals of the "
                "original and the released estimate: 1 identical, 0 touching, negative apart "
                "(in half-widths); null without both SEs.")
_SHIFT_ROW = _obj({
    "value": {"type": ["integer", "number", "string", "null"]}, "label": {"type": "string"},
    "n_before": _INT, "n_after": _INT,
    "suppressed": _d({"type": "boolean"}, "Fewer than numeric_min_group values on one side: "
                     "means and shifts withheld."),
    "mean_before": _NNUM, "mean_after": _NNUM,
    "se_before": _d(_NNUM, "Standard error of the original mean, s / sqrt(n)."),
    "se_after": _d(_NNUM, "Standard error of the released mean, s / sqrt(n), released groups."),
    "ci_overlap": _CI_OVERLAP,
    "shift": _d(_NNUM, "Released mean - original mean (the variable's unit)."),
    "shift_points": _d(_NNUM, "The shift in percentage points (0/1 variables; else null)."),
    "shift_se": _d(_NNUM, "shift / se_before."),
    "digits": _d(_INT, "Decimals the shift needs for two significant digits (in points for a "
                       "0/1 variable)."),
})
_TERM = _obj({
    "term": {"type": "string"}, "key": {"type": ["string", "null"]},
    "value": {"type": ["integer", "number", "string", "null"]},
    "before": _NNUM, "after": _NNUM, "se_before": _NNUM, "se_after": _NNUM,
    "shift_se": _d(_NNUM, "(after - before) / se_before."),
    "ci_overlap": _CI_OVERLAP,
})
_DISPLACEMENT_KEY = _obj({
    "name": {"type": "string"},
    "scale": _d({"enum": ["value", "class"]}, "value: |delta| in the key's unit; class: in "
                "ordered classes of a recoded key."),
    "n_moved": _d(_INT, "Moved records with a non-missing value on both sides."),
    "n_changed": _d(_INT, "Of those, records whose value of this key changed."),
    "mean": _NNUM, "median": _NNUM, "p90": _NNUM, "max": _NNUM,
    "mean_changed": _NNUM, "median_changed": _NNUM, "p90_changed": _NNUM,
})
UTILITY_SCHEMA["properties"]["analysis"] = _d(_obj({
    "method": {"type": "string"},
    "displacement": _d(_obj({
        "n_moved": _d(_INT, "Records whose cell changed."),
        "mean_keys_changed": _d(_NUM, "Mean number of keys a moved record changes."),
        "keys": _arr(_DISPLACEMENT_KEY, "Per ordered key: |original - released value| over "
                     "the moved records (and over those whose value changed).")}),
        "Displacement of moved records."),
    "mean_shifts": _arr(_obj({
        "variable": {"type": "string"}, "by": {"type": "string"},
        "binary": _d({"type": "boolean"}, "Every value is 0 or 1."),
        "max_abs_shift_se": _NNUM, "at": {"type": ["string", "null"]},
        "rows": _arr(_SHIFT_ROW)}), "Per numeric non-key variable and key: the shift of its "
        "mean in each key category, in standard errors."),
    "regressions": _arr(_obj({
        "variable": {"type": "string"}, "skipped": {"type": ["string", "null"]},
        "binary": {"type": "boolean"},
        "n_before": _NINT, "n_after": _NINT, "rank": _INT,
        "r2_before": _NNUM, "r2_after": _NNUM, "r2_change": _NNUM,
        "max_abs_shift_se": _NNUM, "terms": _arr(_TERM)},
        required=["variable", "skipped", "binary", "n_before", "n_after", "r2_before",
                  "r2_after", "r2_change", "max_abs_shift_se", "terms"]),
        "Per numeric non-key variable: OLS on the keys before and after."),
    "analyses": _arr(_obj({
        "name": {"type": "string"}, "formula": {"type": "string"},
        "error": _d({"type": ["string", "null"]}, "Why the analysis was not computed."),
        "method": {"type": "string"},
        "n_before": _NINT, "n_after": _NINT, "r2_before": _NNUM, "r2_after": _NNUM,
        "r2_change": _NNUM, "max_abs_shift_se": _NNUM,
        "terms": _arr(_obj({"term": {"type": "string"}, "before": _NNUM, "after": _NNUM,
                            "se_before": _NNUM, "se_after": _NNUM, "shift_se": _NNUM,
                            "ci_overlap": _CI_OVERLAP,
                            "digits": _d(_INT, "Decimals that show the SE with two "
                                               "significant digits, plus one.")}))}),
        "utility.analyses: the agency's formulas, OLS on the original and the public file."),
    "pmse": _d(_obj({
        "pmse": _d(_NNUM, "sum_l (t_l + S_l)(p_l - c)^2 / N, p_l = S_l / (t_l + S_l), "
                          "c = n_released / N, N = both files' records."),
        "null_expected": _d(_NNUM, "(K - 1)(1 - c)^2 c / N: its expectation when both files "
                                   "are samples of one distribution."),
        "ratio": _d(_NNUM, "pmse / null_expected (about 1: indistinguishable)."),
        "standardized": _d(_NNUM, "(pmse - null_expected) / (sqrt(2(K - 1))(1 - c)^2 c / N)."),
        "n_cells": _d(_INT, "K: key cells non-empty in either file (the model's parameters)."),
        "model": {"type": "string"}}),
        "Propensity-score pMSE of original vs released over the keys (Snoke et al. 2018), "
        "saturated model on the key cells, from the two cell tables."),
}, required=["method", "displacement", "mean_shifts", "regressions"], extra=False),
    "Utility measured on what analysts compute (docs/REPORTS.md).")


_DEPENDENCE_COLUMN = {
        "column": {"type": "string"},
        "figure": _d(_NUM, "Filter intruder's success with the column, max over PRBs."),
        "baseline": _d(_NUM, "That PRB's success without the column."),
        "prb": _d({"type": "integer"}, "Where the figure is attained (-1: no PRB)."),
        "mean_figure": _NUM, "mean_baseline": _NUM,
        "revealed": _d({"type": "object", "additionalProperties": _NUM},
                       "Per key: share of sensitive records whose value informs on it."),
        "flagged": {"type": "boolean"},
        "via": _d({"enum": ["values", "order", "relation"]},
                  "How the figure was found: the column's values one by one, runs of its "
                  "values in order (docs/METHOD.md, 'The check in order'), or a relation an "
                  "intruder computes from it ('Relations an intruder computes')."),
        "relation": _d({"type": "string"}, "The relation (via: relation)."),
        "visible": _d({"type": "object", "additionalProperties": _NUM},
                      "Per key: share of sensitive records, in PRBs where the key moves, "
                      "whose value pins it to one value: the column shows moved records "
                      "(docs/METHOD.md, 'Columns that show moved records').")}
_DEPENDENCE_REQUIRED = sorted(set(_DEPENDENCE_COLUMN) - {"relation", "visible"})
RISK_SCHEMA["properties"]["dependence"] = _d(_obj({
    "columns": _arr(_obj(_DEPENDENCE_COLUMN, required=_DEPENDENCE_REQUIRED)),
    "derived": _arr({"type": "string"}, "Columns released as functions of the released keys."),
    "households": _d(_arr(_obj({**_DEPENDENCE_COLUMN, "level": _d(
        {"enum": ["person"]}, "A person column, measured one member per household.")},
        required=_DEPENDENCE_REQUIRED)),
        "Household files: the household stage's check (audit.json households.dependence): "
        "household columns and the person columns of one member per household against the "
        "household keys, one unit per household (docs/METHOD.md, 'Person columns against "
        "household keys')."),
}, required=["columns", "derived"]),
    "The dependence check of non-key columns (audit.json dependence; docs/METHOD.md).")


_EXP = _obj({"total": _NUM, "sum_abs_difference": _NUM, "share": _NUM,
             "max_abs_difference": _NUM, "cells_changed_in_expectation": _INT})
UTILITY_SCHEMA["properties"]["expected_totals"] = _d(_obj({
    "mode": {"enum": ["nzy", "weighted"]},
    "destinations": _d({"enum": ["near"]}, "Present under destinations: near: the "
                       "expectations are those of the near design W (docs/METHOD.md 7.12)."),
    "counts": _d(_EXP, "Exact expected released counts E[S_l] = sum_j t_j p_jl against t_l, "
                       "summed over cells (share of n)."),
    "weighted": _d({"anyOf": [_EXP, {"type": "null"}]},
                   "Exact expected weighted totals E[W*_l] = sum_j W_j p_jl against W_l "
                   "(share of the total weight)."),
    "by_key_variable": _arr(_obj({"name": {"type": "string"}, "categories": _arr(_obj({
        "value": {}, "original": _INT, "expected": _NUM, "weighted_original": _NNUM,
        "weighted_expected": _NNUM}))})),
    "worst_prbs": _arr(_obj({"prb": _INT, "partition_key": {"type": "string"},
                             "n_records": _INT, "weighted_sum_abs_difference": _NNUM,
                             "weighted_share": _NNUM, "count_sum_abs_difference": _NUM})),
}), "Person files with input.weight: exact expected cell totals of the design used, weighted and "
    "unweighted (docs/METHOD.md 7.11), from the transition probabilities.")
UTILITY_SCHEMA["properties"]["expected_totals"]["required"].remove("destinations")


_CMP = _obj({"original": _NNUM, "released": _NNUM, "se": _NNUM, "z": _NNUM})
_HIER = _obj({"hier_risk_ER": _NUM, "hier_risk": _NUM, "hier_risk_pct": _NUM,
              "max_household_risk": _NUM, "person_risk_ER": _NUM})
RISK_SCHEMA["properties"]["households"] = _d(_obj({
    "household_id": {"type": "string"},
    "household_keys": _arr({"type": "string"}), "person_keys": _arr({"type": "string"}),
    "n_households": _INT, "households_changed": _INT,
    "household_certificate": _d(_NUM, "The household stage's certificate (units: households)."),
    "household_certificate_at": {"type": "object"}, "household_prbs": _INT,
    "person_certificate": _d(_NUM, "The person stage's certificate, conditional on the "
                                   "household keys."),
    "small_classes": _d(_INT, "Household-key classes too small for a person PRB."),
    "small_class_persons": _INT,
    "hierarchical": _d(_obj({"before": _HIER, "after": _HIER}),
                       "sdcMicro's hierarchical risk (measure_risk with hid, fast_hier)."),
    "composition": _d({"type": "object"}, "The composition intruder (Monte Carlo, SE)."),
    "policy": {"enum": ["fail", "warn"]}, "pass": {"type": "boolean"},
    "message": {"type": "string"}, "fixes": _arr({"type": "string"}),
    "left_out": _d(_obj({
        "rule": {"type": "string"},
        "sizes": _arr(_obj({"size": _INT, "households": _INT})),
        "households": _INT, "persons": _INT, "of_households": _INT, "of_persons": _INT,
        "weighted_share": {"type": ["number", "null"]}}),
        "risk.exposed_sizes: drop: the households of exposed sizes left out of the public file."),
}), "Household files only (docs/HOUSEHOLDS.md).")
RISK_SCHEMA["properties"]["households"]["required"].remove("left_out")
UTILITY_SCHEMA["properties"]["households"] = _d(_obj({
    "n_households": _INT, "households_changed": _INT, "share_changed": _SHARE,
    "keys": _arr(_obj({"name": {"type": "string"}, "tvd": _SHARE,
                       "values": _arr(_obj({"value": {"type": "string"}, "original": _INT,
                                            "released": _INT}))})),
    "size_distribution": _arr(_obj({"size": _INT, "households": _INT})),
    "size_distribution_unchanged": {"type": "boolean"},
    "expected_totals": _d(_obj({
        "mode": {"enum": ["nzy", "weighted"]},
        "household_keys": _obj({"persons_weighted": {"anyOf": [_EXP, {"type": "null"}]},
                                "households": _EXP, "persons": _EXP}),
        "person_keys": _obj({"persons_weighted": {"anyOf": [_EXP, {"type": "null"}]},
                             "persons": _EXP}),
        "by_key_variable": _arr(_obj({
            "name": {"type": "string"}, "level": {"enum": ["household", "person"]},
            "categories": _arr(_obj({"value": {}, "original": _NUM, "expected": _NUM,
                                     "weighted_original": _NNUM,
                                     "weighted_expected": _NNUM}))})),
    }), "Household files with input.weight: exact expected totals of the released "
        "household-key and person-key combinations (persons weighted, households, persons) "
        "under both stages' designs (docs/HOUSEHOLDS.md, 'Survey weights')."),
    "survey": _d(_obj({
        "income": {"type": "string"}, "method": {"type": "string"},
        "poverty_threshold": _obj({"original": _NNUM, "released": _NNUM}),
        "overall": _obj({"poverty_rate": _CMP, "mean_income": _CMP}),
        "by_household_key": _arr(_obj({"key": {"type": "string"}, "values": _arr(_obj({
            "value": {}, "poverty_rate": _CMP, "mean_income": _CMP}))})),
        "by_person_key": _arr(_obj({
            "key": {"type": "string"}, "bands": {"type": ["array", "null"]},
            "values": _arr(_obj({"value": {}, "persons_original": _INT,
                                 "persons_released": _INT, "poverty_rate": _CMP,
                                 "mean_income": _CMP}))})),
        "size_distribution": _arr(_obj({"size": {"type": "string"}, "households": _INT,
                                        "share": _CMP})),
        "gini": _obj({"original": _NNUM, "released": _NNUM}),
        "max_abs_z": _NNUM,
    }), "utility.household_income: the income survey's analyses, original and released, "
        "in standard errors (docs/HOUSEHOLDS.md, 'Utility')."),
}), "Household files only: households by household-level key and by size, before and after.")
UTILITY_SCHEMA["properties"]["households"]["required"].remove("expected_totals")
UTILITY_SCHEMA["properties"]["households"]["required"].remove("survey")


class ReportSchemaError(InputError):
    """A report document does not match its schema; the message names the file and field
    (an ``InputError``: the CLI exits 2, the user restores the file or re-runs the release)."""


def validate(risk: dict[str, Any], utility: dict[str, Any], where: str | None = None) -> None:
    """Validate both documents; raise :class:`ReportSchemaError` naming the field on failure."""
    import jsonschema

    for name, doc, schema in (("risk.json", risk, RISK_SCHEMA),
                              ("utility.json", utility, UTILITY_SCHEMA)):
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            path = "/".join(str(p) for p in e.absolute_path) or "(top level)"
            loc = f"{where}/{name}" if where else name
            raise ReportSchemaError(
                f"{loc}: field {path}: {e.message} ({len(errors)} schema error(s)); the file was "
                "not written by this version of sdc or was edited - re-run the release"
            )


def write_schemas(folder: Path) -> list[Path]:
    """Write ``risk.schema.json`` and ``utility.schema.json`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, schema in (("risk.schema.json", RISK_SCHEMA), ("utility.schema.json", UTILITY_SCHEMA)):
        p = folder / name
        p.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        out.append(p)
    return out


if __name__ == "__main__":  # pragma: no cover
    for p in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/report_schema")):
        print(p)
