"""The report page's charts stay readable with long labels and large numbers: a
key with 50 categories of 20-character labels (US states), PRB sizes up to 15,900
(the histogram's last label is "16,000") and the kmin marker.

1. Geometry (always runs): the label layout of :mod:`sdc.reports.charts` keeps every
   estimated label box inside the canvas and apart from its neighbours.
2. Rendering (slow; needs chromium): the page is rendered by headless Chromium at 1400 and
   800 pixels wide; a script measures every SVG text's box (its four corners after the
   rotation) and every bar in the DOM. No text may leave its chart (clipping), no two texts of
   a chart may overlap, and the kmin label may not touch a bar. The page before this change
   failed all three ("16,000" cut, "kmin = 5" on the first bar, 17 overlapping state labels).
"""

from __future__ import annotations

import copy
import html
import json
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from sdc.reports import charts
from sdc.reports.html import render_html

GOLDEN = Path(__file__).resolve().parent / "golden"
STATES = ["Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
          "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa",
          "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan",
          "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada",
          "New Hampshire", "New Jersey", "New Mexico", "New York", "North Carolina",
          "North Dakota", "Ohio", "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island",
          "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah", "Vermont", "Virginia",
          "Washington", "West Virginia", "Wisconsin", "Wyoming"]
LABELS = [f"{s} (state)".ljust(20, ".")[:20] for s in STATES]   # 50 labels of 20 characters


def stress_documents() -> tuple[dict, dict]:
    """The golden 'weighted' documents plus a 50-category key and PRB sizes to 15,900."""
    risk = json.loads((GOLDEN / "weighted.risk.json").read_text(encoding="utf-8"))
    util = json.loads((GOLDEN / "weighted.utility.json").read_text(encoding="utf-8"))
    template = util["key_variables"][0]["categories"][0]
    cats = []
    for i, lab in enumerate(LABELS):
        c = copy.deepcopy(template)
        o = 1000 + 37 * ((i * 7) % 50)
        c.update(value=i + 1, label=lab, original=o, released=o + i % 5 - 2,
                 difference=i % 5 - 2)
        cats.append(c)
    kv = copy.deepcopy(util["key_variables"][0])
    kv.update(name="state", categories=cats, n_categories=50, partition_rule=None,
              partition_variable=False)
    util["key_variables"].append(kv)
    for i, p in enumerate(risk["prbs"]):
        p["k"] = [5, 6, 9, 40, 300, 1200, 15900, 15800][i % 8]
    return risk, util


# ---------------------------------------------------------------------------------------------
# 1. geometry
# ---------------------------------------------------------------------------------------------
def _label_boxes(chart) -> list[list[tuple[float, float]]]:
    """Estimated corners of every x label (charts.text_width, 11-unit font)."""
    out = []
    for lab in chart.labels:
        w, h = charts.text_width(lab.text), 11.0
        if lab.rotate:
            a = math.radians(-lab.angle)
            pts = [(-w, -h * 0.8), (0, -h * 0.8), (0, h * 0.2), (-w, h * 0.2)]
        else:
            a = 0.0
            pts = [(-w / 2, -h * 0.8), (w / 2, -h * 0.8), (w / 2, h * 0.2), (-w / 2, h * 0.2)]
        out.append([(lab.x + x * math.cos(a) - y * math.sin(a),
                     lab.y + x * math.sin(a) + y * math.cos(a)) for x, y in pts])
    return out


def _overlap(a, b, tol: float = 0.5) -> bool:
    """Separating-axis test of two convex quadrilaterals."""
    for q in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = q[i], q[(i + 1) % 4]
            ax, ay = y0 - y1, x1 - x0
            n = math.hypot(ax, ay) or 1.0
            pa = [(x * ax + y * ay) / n for x, y in a]
            pb = [(x * ax + y * ay) / n for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= tol:
                return False
    return True


@pytest.mark.parametrize("n", [3, 8, 24, 25, 50, 200])
def test_category_labels_fit_and_do_not_overlap(n: int) -> None:
    labels = [LABELS[i % 50] for i in range(n)]
    c = charts.before_after_chart(labels, [100] * n, [90] * n, "t")
    boxes = _label_boxes(c)
    for box in boxes:
        assert all(0 <= x <= c.width and 0 <= y <= c.diff_top - 20 for x, y in box), box
    assert not any(_overlap(a, b) for a, b in zip(boxes, boxes[1:], strict=False))
    assert len(c.labels) >= min(n, 40)            # thinned only when they cannot all fit


def test_histogram_last_label_and_marker_stay_clear() -> None:
    c = charts.histogram_chart([5, 6, 9, 40, 300, 1200, 15900, 15800], "t", "k", marker=5,
                               marker_label="kmin = 5")
    last = c.labels[-1]
    assert last.text == "16,000"
    assert last.x + charts.text_width(last.text) / 2 <= c.width
    # the marker's label stands above the plot (bars start at c.top at the highest)
    assert c.marker_x is not None and c.top >= 14 and min(b.y for b in c.bars) >= c.top


# ---------------------------------------------------------------------------------------------
# 2. rendering
# ---------------------------------------------------------------------------------------------
MEASURE_JS = """
window.addEventListener("load", () => {
  const X = window.scrollX, Y = window.scrollY, out = [];
  const quad = (el) => {
    const b = el.getBBox(), m = el.getScreenCTM(), svg = el.ownerSVGElement;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
            [b.x, b.y + b.height]].map(([x, y]) => {
      const p = svg.createSVGPoint(); p.x = x; p.y = y;
      const q = p.matrixTransform(m); return [q.x + X, q.y + Y]; });
  };
  document.querySelectorAll("svg.chart").forEach((svg) => {
    const r = svg.getBoundingClientRect();
    out.push({title: svg.querySelector("title").textContent,
              box: [r.left + X, r.top + Y, r.right + X, r.bottom + Y],
              texts: [...svg.querySelectorAll("text")].map(
                t => ({text: t.textContent, cls: t.getAttribute("class"), quad: quad(t)})),
              bars: [...svg.querySelectorAll("rect")].filter(
                e => e.getBBox().height > 0.5).map(e => quad(e))});
  });
  const pre = document.createElement("pre");
  pre.id = "sdc-measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"""


def measure(page: str, width: int, tmp: Path) -> list[dict]:
    """Every chart's box, texts (4 corners each) and bars, as Chromium lays out ``page`` in a
    window ``width`` pixels wide."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (make chromium); the page cannot be measured")
    path = tmp / f"page-{width}.html"
    path.write_text(page.replace("</body>", f"<script>{MEASURE_JS}</script></body>"),
                    encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},2000",
             "--dump-dom", path.as_uri()],
            capture_output=True, text=True, timeout=180, check=True).stdout
    m = re.search(r'<pre id="sdc-measure">(.*?)</pre>', dom, re.S)
    assert m is not None, "the measuring script did not run"
    return json.loads(html.unescape(m.group(1)))


def layout_problems(charts_measured: list[dict]) -> list[str]:
    """Clipped texts, overlapping texts and marker labels on bars, one line each."""
    out = []
    for c in charts_measured:
        x0, y0, x1, y1 = c["box"]
        texts = c["texts"]
        for t in texts:
            if any(x < x0 - 0.5 or x > x1 + 0.5 or y < y0 - 0.5 or y > y1 + 0.5
                   for x, y in t["quad"]):
                out.append(f"{c['title']}: {t['text']!r} is cut at the chart's edge")
            if t["cls"] == "xi" and any(_overlap(t["quad"], b) for b in c["bars"]):
                out.append(f"{c['title']}: {t['text']!r} lies on a bar")
        for i, a in enumerate(texts):
            for b in texts[i + 1:]:
                if _overlap(a["quad"], b["quad"]):
                    out.append(f"{c['title']}: {a['text']!r} overlaps {b['text']!r}")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 800])
def test_report_charts_have_no_clipped_or_overlapping_labels(tmp_path: Path, width: int) -> None:
    page = render_html(*stress_documents())
    measured = measure(page, width, tmp_path)
    problems = layout_problems(measured)
    assert not problems, "\n".join(problems[:20])
    assert len(measured) >= 8 and any(c["title"].startswith("state") for c in measured)
    state = next(c for c in measured if c["title"].startswith("state"))
    assert set(LABELS) <= {t["text"] for t in state["texts"]}   # every state is named
    assert "16,000" in {t["text"] for c in measured for t in c["texts"]}
