"""The page a review board decides from in one screen (issue 49), rendered by headless Chromium
at 1280 x 900: the first screen holds the certificate, the share of records changed and the
three largest analyst-facing shifts with their SE; the whole page, details collapsed, is
under 10 screens; the design is named in its own words. Four releases of the census demo's
design: as configured (uniform NZY on a weighted file), weighted mode, near-cell, and a
household file. The page before this change was over 60,000 px long with the PRB and
partition-set tables open, and showed no analyst loss on the first screen."""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import sdc
from tests.release_helpers import reports_of

ROOT = Path(__file__).resolve().parents[2]
SCREEN_W, SCREEN_H = 1280, 900

MEASURE_JS = """
window.addEventListener("load", () => {
  const box = (s) => { const e = document.querySelector(s);
    if (!e) return null; const b = e.getBoundingClientRect(); return [b.top, b.bottom]; };
  // every text node laid out within the first screen (a closed <details> lays out nothing)
  const first = [];
  const walk = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const r = document.createRange(); r.selectNodeContents(n);
    const b = r.getBoundingClientRect();
    if (b.height > 0 && b.bottom <= SCREEN_H) first.push(n.textContent);
  }
  const pre = document.createElement("pre");
  pre.id = "sdc-measure";
  pre.textContent = JSON.stringify({height: document.documentElement.scrollHeight,
    verdict: box(".verdict"), losses: box(".losses"), first: first.join(" ")});
  document.body.appendChild(pre);
});
""".replace("SCREEN_H", str(SCREEN_H))


def _measure(page: str, tmp: Path) -> dict[str, Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (make chromium); the page cannot be measured")
    path = tmp / "page.html"
    path.write_text(page.replace("</body>", f"<script>{MEASURE_JS}</script></body>"),
                    encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={SCREEN_W},{SCREEN_H}", "--dump-dom", path.as_uri()],
            capture_output=True, text=True, timeout=180, check=True).stdout
    m = re.search(r'<pre id="sdc-measure">(.*?)</pre>', dom, re.S)
    assert m is not None, "the measuring script did not run"
    return json.loads(html.unescape(m.group(1)))


def _census(**risk: Any) -> tuple[str, dict, dict]:
    c = yaml.safe_load((ROOT / "configs" / "census_demo_design.yaml").read_text())
    c["input"]["path"] = str(ROOT / "data_samples" / "census_sample.csv")
    c.pop("seed", None)
    c["risk"].update(risk)
    cfg = sdc.parse_config(c, base_dir=ROOT)
    rep = reports_of(sdc.release_frame(sdc.read_input(cfg), cfg, seed=7), cfg, seed=7, n_sim=20)
    return rep.html, rep.risk, rep.utility


def _household() -> tuple[str, dict, dict]:
    from sdc.samples import generate_household_sample
    from tests.household_helpers import GEN

    c = copy.deepcopy(GEN)
    c.pop("seed", None)
    cfg = sdc.parse_config(c, base_dir=ROOT)
    frame = generate_household_sample(3000, seed=8, n_regions=40)
    rep = reports_of(sdc.release_frame(frame, cfg, seed=7), cfg, seed=7, n_sim=20)
    return rep.html, rep.risk, rep.utility


CASES = {"uniform": lambda: _census(), "weighted": lambda: _census(weighted=True),
         "near": lambda: _census(destinations="near"), "household": _household}
DESIGN = {"uniform": "uniform NZY", "weighted": "weighted", "near": "near-cell",
          "household": "household measure, uniform NZY"}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_first_screen_decides_and_the_page_is_short(case: str, tmp_path: Path) -> None:
    page, risk, utility = CASES[case]()
    assert risk["release"]["design"]["name"] == DESIGN[case]
    got = _measure(page, tmp_path)
    first = " ".join(got["first"].split())
    # the certificate and the share changed, on the first screen
    assert got["verdict"][1] <= SCREEN_H and "Largest correct-match probability" in first
    share = f"{100 * risk['verdict']['share_changed']:.1f}%"
    assert share in first and f"Design: {DESIGN[case]}" in first
    # the three largest analyst-facing losses with their SE
    assert got["losses"][1] <= SCREEN_H
    assert len(re.findall(r"[+−]\d+\.\d SE", first)) >= 3 and "(SE " in first
    # before -> after beside the expected correct matches
    assert f"{risk['before']['sensitive']['cells']:,} → " in first
    # the full page with its details collapsed: under 10 screens
    assert got["height"] < 10 * SCREEN_H, got["height"]
    # every PRB table row is behind a closed <details>, riskiest first
    prbs = re.findall(r'<tr><td class="num">(\d+)</td><td>', page.split("PRB table")[1]
                      .split("</table>")[0]) if "PRB table" in page else []
    if prbs:
        risks = {p["prb"]: p["max_risk"] for p in risk["prbs"]}
        ordered = [risks[int(p)] for p in prbs]
        assert ordered == sorted(ordered, reverse=True)


def test_household_values_sort_numerically() -> None:
    from sdc.reports.overview import numeric_first

    vals = [{"value": v} for v in ["1", "10", "11", "2", "3"]]
    assert [x["value"] for x in numeric_first(vals)] == ["1", "2", "3", "10", "11"]
    assert [x["value"] for x in numeric_first([{"value": "b"}, {"value": "a"}])] == ["a", "b"]


def test_merge_counts_are_named_once() -> None:
    from sdc.reports.overview import merge_counts

    prbs = [{"n_partition_sets": 1}, {"n_partition_sets": 3}, {"n_partition_sets": 2}]
    got = merge_counts({"merges": ["a", "b", "c", "d"]}, prbs)
    assert got == {"steps": 4, "merged_prbs": 2, "merged_sets": 5}
