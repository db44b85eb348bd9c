"""The "Release series" section of report.html and risk.json's ``series`` object, from a
hand-made series object (the flow test tests/flows/test_release_series_report.py makes a real
one)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sdc.reports.build import series_section
from sdc.reports.html import render_html
from sdc.reports.schema import ReportSchemaError, validate

GOLDEN = Path(__file__).resolve().parent / "golden"


def _docs() -> tuple[dict, dict]:
    return (json.loads((GOLDEN / "tiny.risk.json").read_text()),
            json.loads((GOLDEN / "tiny.utility.json").read_text()))


# what sdc.series.risk.risk_vs_previous returns (audit.json's series.risk_vs_previous)
RVP = {
    "previous": "/srv/releases/lfs-<2026-01>", "n_common": 12_345, "n_changed": 121,
    "changed_share": 121 / 12_345, "rate_one_match_series": 0.3071, "rate_one_match_single": 0.29,
    "xi": 0.395,
    "intruder": [
        {"t": 1, "a": 1, "n_series": 40, "series_rate": 0.275, "n_single": 38, "single_rate": 0.25},
        {"t": 2, "a": 1, "n_series": 10, "series_rate": 0.45, "n_single": 9, "single_rate": 0.3333},
        {"t": 2, "a": 3, "n_series": 0, "series_rate": float("nan"), "n_single": 2,
         "single_rate": 0.5},
    ],
}


def test_series_section_keeps_the_figures_and_names_the_previous_folder_only():
    s = series_section(RVP)
    assert s["previous"] == "lfs-<2026-01>"
    assert {k: s[k] for k in ("n_common", "n_changed", "changed_share", "xi")} == {
        k: RVP[k] for k in ("n_common", "n_changed", "changed_share", "xi")}
    assert s["intruder"][0] == RVP["intruder"][0] and len(s["intruder"]) == 3
    assert series_section({"previous": "/a/b/lfs-1", "error": "no records file"}) == {
        "previous": "lfs-1", "error": "no records file"}


def test_page_has_the_release_series_section_with_the_numbers():
    risk, utility = _docs()
    risk["series"] = json.loads(json.dumps(series_section(RVP)).replace("NaN", "null"))
    validate(risk, utility)
    page = render_html(risk, utility)
    sec = page[page.index(". Release series</h2>"):page.index("<footer>")]
    assert "<code>lfs-&lt;2026-01&gt;</code>" in sec          # escaped, folder name only
    assert "/srv/releases" not in page
    assert "12,345 records are in both releases; 121 of them (0.98%)" in sec
    assert "<b>0.3071</b> over the series, 0.2900 on this release alone" in sec
    assert '<span class="ok-cell">≤</span> ξ = 0.395' in sec
    rows = sec[sec.index("<tbody>"):sec.index("</tbody>")].count("<tr>")
    assert rows == 3
    assert sec.count('<span class="fail-cell">&gt; ξ</span>') == 1      # t=2, a=1: 0.45 > xi
    assert sec.count('<span class="ok-cell">≤ ξ</span>') == 1
    assert "Certified exactly" in sec and "Only measured" in sec

    over = copy.deepcopy(risk)
    over["series"]["rate_one_match_series"] = 0.5
    assert '<span class="fail-cell">&gt;</span> ξ = 0.395' in render_html(over, utility)


def test_page_without_series_has_no_section_and_an_error_is_shown():
    risk, utility = _docs()
    assert "Release series" not in render_html(risk, utility)
    risk["series"] = series_section({"previous": "/x/lfs-1", "error": "records file missing"})
    validate(risk, utility)
    page = render_html(risk, utility)
    assert "<code>lfs-1</code>" in page and "could not be measured: records file missing" in page


def test_schema_rejects_a_series_object_with_unknown_or_missing_fields():
    risk, utility = _docs()
    risk["series"] = json.loads(json.dumps(series_section(RVP)).replace("NaN", "null"))
    bad = copy.deepcopy(risk)
    bad["series"]["seed"] = 123                              # nothing else may ride along
    with pytest.raises(ReportSchemaError, match="series"):
        validate(bad, utility)
    bad = copy.deepcopy(risk)
    del bad["series"]["n_common"]
    with pytest.raises(ReportSchemaError, match="series"):
        validate(bad, utility)
