"""The HTML page of the risk and utility reports: a pure function of risk.json and utility.json."""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

__all__ = ["render_html"]


# --------------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------------
E = html.escape

BEFORE, AFTER = "#94a3b8", "#2563eb"
POS, NEG, XI_COLOR, OK_COLOR = "#0f766e", "#b45309", "#dc2626", "#15803d"


def _int(x: Any) -> str:
    return "&ndash;" if x is None else f"{int(x):,}"


def _num(x: Any, d: int = 4) -> str:
    return "&ndash;" if x is None else f"{float(x):,.{d}f}"


def _pct(x: Any, d: int = 2) -> str:
    return "&ndash;" if x is None else f"{100.0 * float(x):.{d}f}%"


def _signed(x: Any, d: int = 0) -> str:
    if x is None:
        return "&ndash;"
    v = float(x)
    s = f"{v:+,.{d}f}" if d else f"{int(round(v)):+,}"
    if (d and abs(v) < 0.5 * 10**-d) or (not d and round(v) == 0):
        return '<span class="zero">0</span>'
    return s.replace("-", "&minus;")


def _pp(x: Any, d: int = 3) -> str:
    """A share difference in percentage points."""
    if x is None:
        return "&ndash;"
    v = 100.0 * float(x)
    if abs(v) < 0.5 * 10**-d:
        return '<span class="zero">0</span>'
    return f"{v:+.{d}f}".replace("-", "&minus;")


def _table(head: list[str], rows: list[list[str]], num_cols: set[int] | None = None,
           cls: str = "") -> str:
    num_cols = num_cols if num_cols is not None else set(range(1, len(head)))
    th = "".join(f'<th class="{"num" if i in num_cols else ""}">{h}</th>'
                 for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"num" if i in num_cols else ""}">{c}</td>'
                         for i, c in enumerate(r)) + "</tr>"
        for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


# --------------------------------------------------------------------------------------------
# SVG charts (hand-written, no library)
# --------------------------------------------------------------------------------------------
def _axis(x: float, n_target: int = 5) -> tuple[float, list[float]]:
    """A 'nice' axis maximum >= x and its ticks (steps of 1, 2, 2.5 or 5 times a power of 10)."""
    if x <= 0:
        x = 1.0
    raw = x / n_target
    e = 10 ** math.floor(math.log10(raw))
    step = next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= raw)
    n = max(1, math.ceil(x / step - 1e-9))
    return n * step, [i * step for i in range(n + 1)]


def _nice_max(x: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of 10 that is >= x."""
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= x * (1 - 1e-12))


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) >= 0.01 else f"{v:.3g}"


def _svg_open(w: int, h: int, title: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{E(title)}</title>')


def _legend(items: list[tuple[str, str]], x: float, y: float) -> str:
    out = []
    for name, color in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="11" height="11" rx="2" '
                   f'fill="{color}"/><text x="{x + 16:.1f}" y="{y:.1f}" class="lg">{E(name)}</text>')
        x += 22 + 7.2 * len(name)
    return "".join(out)


def svg_before_after(labels: list[str], before: list[float], after: list[float], title: str,
                     width: int = 1060) -> str:
    """Grouped bars (original vs released counts) and, below, the differences."""
    n = max(len(labels), 1)
    left, right, top = 64, 16, 30
    h_bars, gap, h_diff = 190, 34, 90
    step = min((width - left - right) / n, 120.0)
    width = max(int(left + right + n * step), 460)
    pw = width - left - right
    step = pw / n
    many = n > 24
    flat = many or max((len(x) for x in labels), default=0) * 6.6 < step
    lab_h = 16 if flat else 56
    height = top + h_bars + lab_h + gap + h_diff + 24
    vmax, ticks = _axis(max([*before, *after, 1]), 4)
    out = [_svg_open(width, height, title)]
    out.append(_legend([("original", BEFORE), ("released", AFTER)], left, 16))
    y0 = top + h_bars
    for tv in ticks:
        y = y0 - tv / vmax * h_bars
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ax" text-anchor="end">'
                   f'{_fmt_tick(tv)}</text>')
    bw = max(step * 0.38, 0.6)
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        x = left + i * step + step * 0.1
        hb, ha = b / vmax * h_bars, a / vmax * h_bars
        tip = f"{labels[i]}: original {int(b):,}, released {int(a):,}"
        out.append(f'<g><title>{E(tip)}</title>'
                   f'<rect x="{x:.2f}" y="{y0 - hb:.2f}" width="{bw:.2f}" height="{hb:.2f}" fill="{BEFORE}"/>'
                   f'<rect x="{x + bw:.2f}" y="{y0 - ha:.2f}" width="{bw:.2f}" height="{ha:.2f}" fill="{AFTER}"/></g>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y0}" y2="{y0}" class="axis"/>')
    every = max(1, math.ceil(n / 23)) if many else 1
    for i, lab in enumerate(labels):
        if i % every:
            continue
        cx = left + (i + 0.5) * step
        if flat:
            out.append(f'<text x="{cx:.1f}" y="{y0 + 13}" class="ax" text-anchor="middle">{E(lab)}</text>')
        else:
            short = lab if len(lab) <= 22 else lab[:20] + "…"
            out.append(f'<text x="{cx:.1f}" y="{y0 + 14}" class="ax" text-anchor="end" '
                       f'transform="rotate(-28 {cx:.1f} {y0 + 14})">{E(short)}</text>')
    # difference panel
    dtop = y0 + lab_h + gap
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    dmax = _nice_max(max([abs(d) for d in diffs] + [1]))
    mid = dtop + h_diff / 2
    out.append(f'<text x="{left}" y="{dtop - 8}" class="lg">released − original</text>')
    if not any(diffs):
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{mid}" y2="{mid}" class="axis"/>'
                   f'<text x="{left + pw / 2:.1f}" y="{mid - 8:.1f}" class="lg" '
                   f'text-anchor="middle">no difference in any category</text></svg>')
        return "".join(out)
    for tv in (-dmax, 0, dmax):
        y = mid - tv / dmax * (h_diff / 2)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'class="{"axis" if tv == 0 else "grid"}"/><text x="{left - 6}" y="{y + 4:.1f}" '
                   f'class="ax" text-anchor="end">{_fmt_tick(tv).replace("-", "−") if tv <= 0 else "+" + _fmt_tick(tv)}</text>')
    for i, d in enumerate(diffs):
        if d == 0:
            continue
        x = left + i * step + step * 0.15
        hh = abs(d) / dmax * (h_diff / 2)
        y = mid - hh if d > 0 else mid
        out.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(step * 0.7, 0.8):.2f}" '
                   f'height="{hh:.2f}" fill="{POS if d > 0 else NEG}"><title>'
                   f'{E(labels[i])}: {int(d):+,}</title></rect>')
    out.append("</svg>")
    return "".join(out)


def svg_prb_risk(prbs: list[dict[str, Any]], xi: float, width: int = 1060) -> str:
    """Exact max R per PRB as bars, with the xi line."""
    n = max(len(prbs), 1)
    left, right, top, ph = 64, 16, 30, 220
    height = top + ph + 44
    pw = width - left - right
    step = pw / n
    vmax, ticks = _axis(max([p["max_risk"] for p in prbs] + [xi * 1.12]), 5)
    out = [_svg_open(width, height, "Exact maximum correct-match risk per PRB")]
    kinds = [("theorem θ", AFTER, lambda a: "merged" not in a and "calibrated" not in a),
             ("calibrated θ", "#7c3aed", lambda a: "merged" not in a and "calibrated" in a),
             ("merged PRB", "#0891b2", lambda a: "merged" in a)]
    out.append(_legend([(k, c) for k, c, f in kinds if any(f(p["action"]) for p in prbs)], left, 16))
    if prbs:
        rs = [p["max_risk"] for p in prbs]
        out.append(f'<text x="{width - right}" y="16" class="lg" text-anchor="end">max R per PRB '
                   f'from {min(rs):.5f} to {max(rs):.5f}; smallest margin to ξ '
                   f'{xi - max(rs):.5f}</text>')
    y0 = top + ph
    for tv in ticks:
        y = y0 - tv / vmax * ph
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ax" text-anchor="end">{tv:.2f}</text>')
    for i, p in enumerate(prbs):
        color = "#0891b2" if "merged" in p["action"] else ("#7c3aed" if "calibrated" in p["action"] else AFTER)
        h = p["max_risk"] / vmax * ph
        x = left + i * step + step * 0.15
        tip = (f"PRB {p['prb']}: {p['partition_key']} - k={p['k']}, theta={p['theta']:.4f}, "
               f"max R={p['max_risk']:.4f} at t={p['max_risk_t']}, a={p['max_risk_a']}")
        out.append(f'<rect x="{x:.2f}" y="{y0 - h:.2f}" width="{step * 0.7:.2f}" height="{h:.2f}" '
                   f'fill="{color}"><title>{E(tip)}</title></rect>')
    every = max(1, math.ceil(n / 40))
    for i, p in enumerate(prbs):
        if i % every == 0:
            out.append(f'<text x="{left + (i + 0.5) * step:.1f}" y="{y0 + 14}" class="ax" '
                       f'text-anchor="middle">{p["prb"]}</text>')
    yx = y0 - xi / vmax * ph
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{yx:.1f}" y2="{yx:.1f}" '
               f'stroke="{XI_COLOR}" stroke-width="2" stroke-dasharray="6 4"/>'
               f'<text x="{width - right}" y="{yx - 6:.1f}" class="xi" text-anchor="end">ξ = {xi:g}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y0}" y2="{y0}" class="axis"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" class="ax" text-anchor="middle">'
               f'post-randomization block (PRB number)</text>')
    out.append("</svg>")
    return "".join(out)


def svg_histogram(values: list[int], title: str, xlabel: str, marker: float | None = None,
                  marker_label: str = "", width: int = 520) -> str:
    """Histogram of integer values (e.g. PRB sizes k) with up to ~14 bins."""
    left, right, top, ph = 48, 16, 18, 170
    height = top + ph + 46
    pw = width - left - right
    vals = np.asarray(values, dtype=float)
    out = [_svg_open(width, height, title)]
    if vals.size == 0:
        out.append(f'<text x="{width / 2}" y="{height / 2}" class="ax" text-anchor="middle">no PRBs</text></svg>')
        return "".join(out)
    lo, hi = float(vals.min()), float(vals.max())
    if marker is not None:
        lo = min(lo, marker)
    span = max(hi - lo, 1.0)
    bw = _nice_max(span / 12)
    start = math.floor(lo / bw) * bw
    nb = max(1, math.ceil((hi - start) / bw + 1e-9))
    if start + nb * bw <= hi:
        nb += 1
    counts = np.histogram(vals, bins=nb, range=(start, start + nb * bw))[0]
    cmax, cticks = _axis(float(counts.max()), 4)
    cticks = [c for c in cticks if float(c).is_integer()]
    y0 = top + ph
    for tv in cticks:
        y = y0 - tv / cmax * ph
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ax" text-anchor="end">{_fmt_tick(tv)}</text>')
    step = pw / nb
    for i, c in enumerate(counts):
        h = c / cmax * ph
        a, b = start + i * bw, start + (i + 1) * bw
        out.append(f'<rect x="{left + i * step + 1:.1f}" y="{y0 - h:.1f}" width="{step - 2:.1f}" '
                   f'height="{h:.1f}" fill="{AFTER}"><title>{_fmt_tick(a)}–{_fmt_tick(b)}: {int(c)}'
                   f'</title></rect>')
    for i in range(nb + 1):
        if nb > 8 and i % 2:
            continue
        out.append(f'<text x="{left + i * step:.1f}" y="{y0 + 14}" class="ax" text-anchor="middle">'
                   f'{_fmt_tick(start + i * bw)}</text>')
    if marker is not None:
        xm = left + (marker - start) / (nb * bw) * pw
        out.append(f'<line x1="{xm:.1f}" x2="{xm:.1f}" y1="{top}" y2="{y0}" stroke="{XI_COLOR}" '
                   f'stroke-width="2" stroke-dasharray="5 4"/><text x="{xm + 4:.1f}" y="{top + 10}" '
                   f'class="xi">{E(marker_label)}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y0}" y2="{y0}" class="axis"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" class="ax" text-anchor="middle">{E(xlabel)}</text>')
    out.append("</svg>")
    return "".join(out)


def svg_intruder(classes: list[dict[str, Any]], xi: float | None, width: int = 520) -> str:
    """Monte Carlo estimate (dot, ±2 SE) next to the exact pooled R (diamond) per (t, a)."""
    cl = [c for c in classes if c["estimate"] is not None]
    left, right, top, ph = 48, 16, 30, 170
    height = top + ph + 46
    pw = width - left - right
    out = [_svg_open(width, height, "Monte Carlo intruder vs exact risk")]
    out.append(_legend([("Monte Carlo (±2 SE)", AFTER), ("exact", "#111827")], left, 16))
    if not cl:
        out.append("</svg>")
        return "".join(out)
    vmax, ticks = _axis(max([c["estimate"] + 2 * (c["se"] or 0) for c in cl]
                            + [(xi or 0) * 1.1, 0.1]), 5)
    y0 = top + ph
    for tv in ticks:
        y = y0 - tv / vmax * ph
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ax" text-anchor="end">{tv:.2f}</text>')
    step = pw / len(cl)

    def yv(v: float) -> float:
        return y0 - v / vmax * ph

    for i, c in enumerate(cl):
        cx = left + (i + 0.5) * step
        se = c["se"] or 0.0
        out.append(f'<line x1="{cx - 5:.1f}" x2="{cx - 5:.1f}" y1="{yv(c["estimate"] - 2 * se):.1f}" '
                   f'y2="{yv(c["estimate"] + 2 * se):.1f}" stroke="{AFTER}" stroke-width="2"/>'
                   f'<circle cx="{cx - 5:.1f}" cy="{yv(c["estimate"]):.1f}" r="4" fill="{AFTER}">'
                   f'<title>t={c["t"]}, a={c["a"]}: estimate {c["estimate"]:.4f} ± {se:.4f}</title></circle>')
        if c["exact_pooled"] is not None:
            ex, ey = cx + 6, yv(c["exact_pooled"])
            out.append(f'<path d="M{ex:.1f} {ey - 5:.1f} L{ex + 5:.1f} {ey:.1f} L{ex:.1f} {ey + 5:.1f} '
                       f'L{ex - 5:.1f} {ey:.1f} Z" fill="#111827"><title>exact {c["exact_pooled"]:.4f}'
                       f'</title></path>')
        out.append(f'<text x="{cx:.1f}" y="{y0 + 14}" class="ax" text-anchor="middle">'
                   f't={c["t"]}, a={c["a"]}</text>')
    if xi is not None:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{yv(xi):.1f}" y2="{yv(xi):.1f}" '
                   f'stroke="{XI_COLOR}" stroke-width="2" stroke-dasharray="6 4"/>'
                   f'<text x="{width - right}" y="{yv(xi) - 6:.1f}" class="xi" text-anchor="end">ξ = {xi:g}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y0}" y2="{y0}" class="axis"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" class="ax" text-anchor="middle">'
               f'original cell frequency t, released count a = S<tspan baseline-shift="sub" font-size="9">j</tspan></text>')
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------
CSS = """
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#fff;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",
Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans",sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 28px 60px}
header h1{font-size:26px;margin:0 0 4px;letter-spacing:-.01em}
header .sub{color:var(--muted);margin:0 0 18px}
h2{font-size:19px;margin:36px 0 10px;padding-bottom:6px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:22px 0 8px}
p.note{color:var(--muted);margin:6px 0 12px;max-width:900px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:12px 0}
.verdict{display:flex;gap:22px;align-items:center;border-left:8px solid var(--ok)}
.verdict.pass{--ok:#15803d}.verdict.fail{--ok:#dc2626}
.badge{font-weight:700;font-size:22px;color:#fff;background:var(--ok);border-radius:8px;padding:10px 18px;letter-spacing:.04em}
.verdict .big{font-size:17px}
.kpis{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;margin:12px 0}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.kpi .v{font-size:20px;font-weight:650;font-variant-numeric:tabular-nums}
.kpi .l{color:var(--muted);font-size:12.5px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:14px}
table{border-collapse:collapse;width:100%;background:var(--card);font-size:13px;margin:6px 0 10px}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f1f5f9;font-weight:600;color:#374151;white-space:nowrap}
th.grp{text-align:center;border-bottom:1px solid #d1d5db}
td.cat{min-width:120px}.code{white-space:nowrap}td.key{white-space:nowrap}
.scroll{overflow-x:auto}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even){background:#fafbfc}
tr.sub td{color:var(--muted)}
.zero{color:#9ca3af}
.fail-cell{color:#dc2626;font-weight:600}.ok-cell{color:#15803d;font-weight:600}
details{margin:6px 0 12px}summary{cursor:pointer;color:var(--accent);font-weight:550}
svg.chart{max-width:100%;height:auto;display:block}
svg .grid{stroke:#eef0f3;stroke-width:1}svg .axis{stroke:#9ca3af;stroke-width:1}
svg text{font-family:inherit}svg .ax{font-size:11px;fill:#4b5563}svg .lg{font-size:12px;fill:#374151}
svg .xi{font-size:12px;fill:#dc2626;font-weight:600}
.pill{display:inline-block;border-radius:999px;padding:1px 9px;font-size:12px;background:#eef2ff;color:#3730a3;margin-right:6px}
.heat{font-variant-numeric:tabular-nums;text-align:right}
footer{color:var(--muted);font-size:12.5px;margin-top:40px;border-top:1px solid var(--line);padding-top:12px}
@media print{main{max-width:none}.card,.kpi{break-inside:avoid}}
"""


def _risk_rows(b: dict[str, Any], a: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def add(label: str, x: Any, y: Any, fmt=_int, diff: bool = True, sub: bool = False,
            dd: int = 4) -> None:
        d = ""
        if diff and x is not None and y is not None:
            d = _signed(y - x) if fmt is _int else _signed(y - x, dd)
        rows.append([("&nbsp;&nbsp;&nbsp;" if sub else "") + label, fmt(x), fmt(y), d])

    add("Records", b["n_records"], a["n_records"])
    add("Non-empty key cells", b["n_cells"], a["n_cells"])
    for cb, ca in zip(b["frequency_classes"], a["frequency_classes"], strict=True):
        add(f"cells of frequency {cb['class']}", cb["cells"], ca["cells"], sub=True)
    for cb, ca in zip(b["frequency_classes"], a["frequency_classes"], strict=True):
        add(f"records in cells of frequency {cb['class']}", cb["records"], ca["records"], sub=True)
    add(f"Sensitive cells (t &lt; 1/ξ = {b['sensitive']['threshold']:.3f})",
        b["sensitive"]["cells"], a["sensitive"]["cells"])
    add("Records in sensitive cells", b["sensitive"]["records"], a["sensitive"]["records"])
    for kb, ka in zip(b["k_anonymity"], a["k_anonymity"], strict=True):
        add(f"Records violating {kb['k']}-anonymity (f<sub>k</sub> &lt; {kb['k']})",
            kb["records_violating"], ka["records_violating"])
    sb, sa = b["sdcmicro"], a["sdcmicro"]
    add("Expected re-identifications ER = Σ r<sub>i</sub>", sb["expected_reidentifications"],
        sa["expected_reidentifications"], fmt=lambda v: _num(v, 2), dd=2)
    add("Global risk ER / n", sb["global_risk"], sa["global_risk"], fmt=lambda v: _pct(v, 3), diff=False)
    add("Largest individual risk", sb["max_individual_risk"], sa["max_individual_risk"],
        fmt=lambda v: _num(v, 4))
    add("Records with higher risk than the main part (sdcMicro)", sb["high_risk_records"],
        sa["high_risk_records"])
    for tb, ta in zip(sb["records_risk_above"], sa["records_risk_above"], strict=True):
        add(f"records with individual risk &gt; {tb['threshold']:g}", tb["records"], ta["records"], sub=True)
    return rows


_RULE_TEXT = {
    "as_is": "partition variable (as is): counts preserved unless PRBs were merged",
    "bands": "partition variable (bands): band totals preserved unless PRBs were merged",
    "groups": "partition variable (groups): group totals preserved unless PRBs were merged",
    "hierarchy": "partition variable (hierarchy): generalized totals preserved unless PRBs were merged",
}


def _key_section(e: dict[str, Any], weighted: bool) -> str:
    labels = [str(c["label"]) for c in e["categories"]]
    ob = [c["original"] for c in e["categories"]]
    rb = [c["released"] for c in e["categories"]]
    rule = e.get("partition_rule")
    tag = f'<span class="pill">{E(_RULE_TEXT.get(rule, str(rule)))}</span>' if rule else ""
    parts = [f'<h3>{E(e["name"])} {tag}</h3>',
             f'<p class="note">TVD {_num(e["tvd"], 5)} · Hellinger {_num(e["hellinger"], 5)} · '
             f'{_int(e["n_changed"])} records ({_pct(e["share_changed"])}) changed their {E(e["name"])}'
             f' value · largest count difference {_int(e["max_abs_difference"])}'
             + (f' · weighted TVD {_num(e["weighted"]["tvd"], 5)}' if weighted and e.get("weighted") else "")
             + "</p>",
             svg_before_after(labels, ob, rb, f"{e['name']}: original vs released counts")]
    if e.get("generalized_totals"):
        g = e["generalized_totals"]
        parts.append('<p class="note">Totals of the generalized values: '
                     + " · ".join(f'{E(x["label"])} {_int(x["original"])} → {_int(x["released"])} '
                                  f'({_signed(x["difference"])})' for x in g) + "</p>")
    top = ('<tr><th rowspan="2">Category</th><th colspan="2" class="grp">Original</th>'
           '<th colspan="2" class="grp">Released</th><th rowspan="2" class="num">Difference</th>')
    sub = ('<tr><th class="num">n</th><th class="num">%</th><th class="num">n</th>'
           '<th class="num">%</th>')
    if weighted:
        top += '<th colspan="4" class="grp">Weighted (sum of weights)</th>'
        sub += ('<th class="num">original</th><th class="num">released</th>'
                '<th class="num">difference</th><th class="num">share Δ (pp)</th>')
    head = top + "</tr>" + sub + "</tr>"
    rows = []
    for c in e["categories"]:
        if c["original"] == 0 and c["released"] == 0:
            continue
        label = E(str(c["label"]))
        if str(c["label"]) != str(c["value"]) and c["value"] is not None:
            label = f'{label} <span class="zero code">({E(str(c["value"]))})</span>'
        r = [label, _int(c["original"]), _pct(c["original_share"]), _int(c["released"]),
             _pct(c["released_share"]), _signed(c["difference"])]
        if weighted and c.get("weighted_suppressed"):
            r += ['<span class="zero" title="fewer than numeric_min_group records">s</span>'] * 4
        elif weighted:
            r += [_num(c.get("weighted_original"), 0), _num(c.get("weighted_released"), 0),
                  _signed(c.get("weighted_difference")), _pp(c.get("weighted_share_difference"))]
        rows.append('<tr><td class="cat">' + r[0] + "</td>"
                    + "".join(f'<td class="num">{x}</td>' for x in r[1:]) + "</tr>")
    table = (f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(rows)}'
             f"</tbody></table></div>")
    if len(rows) > 25:
        table = f"<details><summary>Table: {len(rows)} categories</summary>{table}</details>"
    parts.append(table)
    return "".join(parts)


def _numeric_section(utility: dict[str, Any]) -> str:
    blocks = utility.get("numeric", [])
    if not blocks:
        return '<p class="note">No numeric non-key variables.</p>'
    ming = utility["release"].get("numeric_min_group")
    out = [f'<p class="note">Mean and quartiles of every numeric non-key variable within each '
           f'category of each key variable, grouped by the original key value (before) and the '
           f'released key value (after). Groups of fewer than {ming} records are suppressed '
           f'(“s”), so no figure is one respondent\'s value.</p>']
    for blk in blocks:
        rows = []
        max_shift = 0.0
        for r in blk["rows"]:
            b, a = r["before"], r["after"]

            def f(s: dict[str, Any], k: str) -> str:
                if s["suppressed"]:
                    return '<span class="zero">s</span>'
                return _num(s[k], 1)

            shift = (a["mean"] - b["mean"]) if (a["mean"] is not None and b["mean"] is not None) else None
            if shift is not None:
                max_shift = max(max_shift, abs(shift))
            rows.append([E(str(r["label"])), _int(b["n"]), f(b, "mean"), f(a, "mean"),
                         _signed(shift, 1) if shift is not None else "&ndash;",
                         f(b, "q1"), f(a, "q1"), f(b, "median"), f(a, "median"), f(b, "q3"), f(a, "q3")])
        head = ["Category", "n (orig.)", "Mean before", "Mean after", "Δ mean", "Q1 before",
                "Q1 after", "Median before", "Median after", "Q3 before", "Q3 after"]
        out.append(f'<details><summary>{E(blk["variable"])} by {E(blk["by"])} '
                   f'<span class="zero">({len(rows)} categories, largest |Δ mean| '
                   f'{max_shift:,.1f})</span></summary>{_table(head, rows)}</details>')
    return "".join(out)


def _heat(v: float | None, vmax: float) -> str:
    if v is None:
        return "<td></td>"
    a = 0 if vmax <= 0 else min(v / vmax, 1.0)
    return (f'<td class="heat" style="background:rgba(37,99,235,{0.08 + 0.45 * a:.3f})">'
            f'{v:.4f}</td>')


def render_html(risk: dict[str, Any], utility: dict[str, Any]) -> str:
    """The reviewer's page, from the two JSON documents only. Self-contained (inline CSS/SVG)."""
    rel = risk["release"]
    v = risk["verdict"]
    b, a = risk["before"], risk["after"]
    xi = v["xi"]
    passed = v["pass"]
    weighted = rel.get("weight") is not None
    at = v.get("at") or {}
    where = ""
    if at.get("source") == "prb":
        where = (f'attained in PRB {at.get("prb")} ({E(str(at.get("partition_key")))}) at '
                 f't = {at.get("t")}, a = {at.get("a")}')
    elif at.get("source") == "non_sensitive":
        where = f'attained by a non-sensitive cell of frequency t = {at.get("t")} (R = 1/t)'
    title = f"Disclosure review: {rel['name']}"
    s = []
    s.append(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
             f"<title>{E(title)}</title><style>{CSS}</style></head><body><main>")
    s.append(f"<header><h1>{E(title)}</h1><p class=\"sub\">{_int(rel['n_records'])} records · "
             f"key variables {E(', '.join(rel['key_variables']))} · partition by "
             f"{E(', '.join(rel['partition_variables']) or 'nothing')} · weight "
             f"{E(rel['weight'] or 'none')} · ξ = {xi:g}, θ = {rel['theta']:.4f} "
             f"({E(rel['theta_mode'])}), k<sub>min</sub> = {rel['kmin']}, small blocks: "
             f"{E(rel['small_blocks'])}</p></header>")

    # verdict
    s.append(f'<div class="card verdict {"pass" if passed else "fail"}"><div class="badge">'
             f'{"PASS" if passed else "FAIL"}</div><div><div class="big">Certified maximum '
             f'correct-match probability <b>{v["certificate"]:.5f}</b> '
             f'{"≤" if passed else "&gt;"} ξ = <b>{xi:g}</b></div><div class="note">{where}. '
             f'Exact over every cell j and every released count a (NZY, METHOD.md §6); '
             f'{_int(v["n_prb"])} post-randomization blocks in {_int(v["n_partition_sets"])} '
             f'partition sets; {_int(v["n_changed"])} records ({_pct(v["share_changed"])}) had '
             f'their key values changed.</div></div></div>')
    if v.get("merges"):
        s.append("<details><summary>Small-block merges "
                 f"({len(v['merges'])})</summary><ul>"
                 + "".join(f"<li>{E(m)}</li>" for m in v["merges"]) + "</ul></details>")
    intr = risk["intruder"]
    ov = intr.get("overall", {})
    sb, sa = b["sdcmicro"], a["sdcmicro"]
    kv = utility.get("key_variables", [])
    worst = max(kv, key=lambda e: e["tvd"]) if kv else None
    s.append('<div class="kpis">'
             f'<div class="kpi"><div class="v">{_int(b["k_anonymity"][0]["records_violating"])} → '
             f'{_int(a["k_anonymity"][0]["records_violating"])}</div><div class="l">records in '
             f'unique cells (f<sub>k</sub> = 1), original → released file</div></div>'
             f'<div class="kpi"><div class="v">{_num(sb["expected_reidentifications"], 1)} → '
             f'{_num(sa["expected_reidentifications"], 1)}</div><div class="l">sdcMicro expected '
             f're-identifications (released values taken at face value)</div></div>'
             f'<div class="kpi"><div class="v">{_num(ov.get("expected_correct_exact"), 1)}</div>'
             f'<div class="l">expected correct matches if an intruder attacks all '
             f'{_int(intr.get("n_targets"))} sensitive records (exact; Monte Carlo '
             f'{_num(ov.get("expected_correct_estimate"), 1)} ± {_num(ov.get("se"), 1)})</div></div>'
             f'<div class="kpi"><div class="v">{_num(worst["tvd"] if worst else None, 5)}</div>'
             f'<div class="l">largest marginal TVD'
             f'{(" (" + E(worst["name"]) + ")") if worst else ""}</div></div></div>')

    # 1. risk before / after
    s.append("<h2>1. Disclosure risk before and after perturbation</h2>")
    s.append('<p class="note">sdcMicro\'s definitions (<code>freqCalc</code>, '
             '<code>indivRisk</code>, <code>measure_risk</code>): f<sub>k</sub> = records in the '
             'key cell, F<sub>k</sub> = sum of their weights, individual risk by the '
             'Benedetti–Franconi approximation (1/f<sub>k</sub> without weights). “After” is '
             'computed on the released file as if its key values were true; a released record '
             'in a small cell is the right person only with the probability certified in '
             'section 2, so these figures overstate the real risk of the release.</p>')
    s.append(_table(["Measure", "Original file", "Released file", "Change"], _risk_rows(b, a)))

    # 2. certificate
    prbs = risk.get("prbs", [])
    s.append("<h2>2. NZY certificate per post-randomization block</h2>")
    s.append('<p class="note">For every PRB, the exact maximum over its cells j and released counts '
             'a of R<sub>j</sub>(a, t) = P(correct match | S<sub>j</sub> = a, T = t), against ξ '
             '(dashed line). Hover a bar for its partition set, k and θ.</p>')
    s.append(f'<div class="card">{svg_prb_risk(prbs, xi)}</div>')
    s.append('<div class="grid2">'
             f'<div class="card"><h3 style="margin-top:0">PRB size (k sensitive cells)</h3>'
             f'{svg_histogram([p["k"] for p in prbs], "PRB size histogram", "cells per PRB (k)", rel["kmin"], "kmin = " + str(rel["kmin"]))}</div>'
             f'<div class="card"><h3 style="margin-top:0">Monte Carlo intruder</h3>'
             f'{svg_intruder(intr.get("classes", []), xi)}</div></div>')
    rows = []
    for p in prbs:
        prof = ", ".join(f"{t}:{m}" for t, m in sorted(p["profile"].items(), key=lambda x: int(x[0])))
        rows.append([str(p["prb"]), E(p["partition_key"]), _int(p["k"]), _int(p["n_records"]),
                     E(prof), _num(p["theta"], 4), _num(p["max_risk"], 5),
                     f'({p["max_risk_t"]}, {p["max_risk_a"]})', E(p["action"]),
                     _num(p["expected_changed"], 1), _int(p["changed"]),
                     f'<span class="{"ok-cell" if p["pass"] else "fail-cell"}">'
                     f'{"pass" if p["pass"] else "FAIL"}</span>'])
    s.append("<details open><summary>PRB table</summary>"
             + _table(["PRB", "Partition set(s)", "k", "Records", "Profile t:cells", "θ", "max R",
                       "(t, a)", "θ from", "E[changed]", "Changed", "vs ξ"], rows,
                      num_cols={0, 2, 3, 5, 6, 10, 9}) + "</details>")

    # 3. intruder table
    s.append("<h3>Monte Carlo intruder (METHOD.md §6)</h3>")
    s.append(f'<p class="note">The perturbation was replayed {intr.get("n_sim")} times on fresh '
             f'internal streams (not the release\'s); in each replay the intruder targets every '
             f'sensitive record, picks one of the S<sub>j</sub> released records of its cell at '
             f'random, and is right with probability 1/S<sub>j</sub> if the target kept its cell. '
             f'Estimates per (t, a) pool all PRBs; “exact” is the same pooled quantity computed '
             f'from the NZY formula, with the range of the exact R over PRBs.</p>')
    rows = [[str(c["t"]), str(c["a"]), _num(c["estimate"], 4), _num(c["se"], 4),
             _num(c["exact_pooled"], 4),
             f'{_num(c["exact_min"], 4)} – {_num(c["exact_max"], 4)}',
             _pct(c["p_s_equals_a"]), _int(c["n_obs"])] for c in intr.get("classes", [])]
    s.append(_table(["t", "a = S<sub>j</sub>", "Estimate", "SE", "Exact (pooled)",
                     "Exact range over PRBs", "P(S<sub>j</sub> = a)", "Target-replays"], rows))

    # 4. utility: key variables
    s.append("<h2>3. Key variables: original and released frequencies</h2>")
    s.append('<p class="note">Counts and shares before and after, their difference (the style of '
             'Tables 1–2 of the NZY review), total variation distance and Hellinger distance. '
             'PRAM never moves a record out of its partition set, so partition variables that '
             'are not generalized keep every count.'
             + (' Weighted columns sum the weight column: unbiased (unweighted) PRAM can bias '
                'weighted totals, and this is where it shows.' if weighted else "") + "</p>")
    for e in kv:
        s.append(f'<div class="card">{_key_section(e, weighted)}</div>')

    # 5. pairs
    pairs = utility.get("pairs", [])
    if pairs:
        s.append("<h2>4. Two-way tables of key variables</h2>")
        s.append('<p class="note">Total variation distance between the original and released '
                 'two-way table of every pair of key variables'
                 + (" (weighted in the lower triangle)" if weighted else "") + ".</p>")
        names = rel["key_variables"]
        m = {(p["a"], p["b"]): p for p in pairs}
        vmax = max([p["tvd"] for p in pairs] + [p["weighted_tvd"] or 0 for p in pairs])
        head = "<tr><th></th>" + "".join(f'<th class="num">{E(n)}</th>' for n in names) + "</tr>"
        body = []
        for i, r in enumerate(names):
            cells = [f"<th>{E(r)}</th>"]
            for j, c in enumerate(names):
                if i == j:
                    cells.append('<td class="heat zero">—</td>')
                elif i < j:
                    cells.append(_heat(m[(r, c)]["tvd"], vmax))
                else:
                    p = m[(c, r)]
                    cells.append(_heat(p["weighted_tvd"], vmax) if weighted else "<td></td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        s.append(f'<table style="width:auto"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>')

    # 6. numeric
    s.append("<h2>5. Numeric variables by key-variable category</h2>")
    s.append(_numeric_section(utility))

    # 7. changes per partition set
    ch = utility.get("changed", {})
    s.append("<h2>6. Records changed, and sensitive cells per partition set</h2>")
    ov = ch.get("overall", {})
    rows = [[E(x["name"]), _int(x["n_changed"]), _pct(x["share"])] for x in ch.get("by_key_variable", [])]
    s.append(f'<p class="note">{_int(ov.get("n_changed"))} records ({_pct(ov.get("share"))}) '
             f'changed at least one key value. Per key variable:</p>')
    s.append(_table(["Key variable", "Records changed", "Share"], rows) .replace('<table class="">', '<table class="" style="width:auto;min-width:420px">'))
    chg = {x["partition_key"]: x for x in ch.get("by_partition_set", [])}
    rows = []
    for p in risk.get("partition_sets", []):
        c = chg.get(p["partition_key"], {})
        cells = [_int(p["n_records"]), _int(p["cells_before"]),
                 _int(p["sensitive_cells_before"]), _int(p["sensitive_records_before"]),
                 _int(p["sensitive_cells_after"]), _int(p["sensitive_records_after"]),
                 "&ndash;" if p["prb"] is None else str(p["prb"]), _int(c.get("n_changed")),
                 _pct(c.get("share"))]
        rows.append(f'<tr><td class="key">{E(p["partition_key"])}</td>'
                    + "".join(f'<td class="num">{x}</td>' for x in cells) + "</tr>")
    head = ('<tr><th rowspan="2">Partition set</th><th rowspan="2" class="num">Records</th>'
            '<th rowspan="2" class="num">Cells</th><th colspan="2" class="grp">Sensitive, original</th>'
            '<th colspan="2" class="grp">Sensitive, released</th><th rowspan="2" class="num">PRB</th>'
            '<th colspan="2" class="grp">Records changed</th></tr><tr>'
            + "".join(f'<th class="num">{h}</th>' for h in
                      ("cells", "records", "cells", "records", "n", "share")) + "</tr>")
    s.append('<p class="note">Sensitive cells have t &lt; 1/ξ. “Released” counts the cells of the '
             'released file with fewer than 1/ξ records, taking its key values at face value.</p>'
             f'<details open><summary>Partition sets ({len(rows)})</summary><div class="scroll">'
             f'<table><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div></details>')
    s.append('<footer>Generated by <b>sdc</b> from <code>internal/risk.json</code> and '
             '<code>internal/utility.json</code> (re-render with <code>sdc report RELEASE_DIR</code>). '
             'Aggregates only: no record-level value, id or identifier appears on this page. '
             'Definitions: docs/REPORTS.md. References: Nayak, Zhang &amp; You (2018), ISR 86, '
             '300–321; Templ, Kowarik &amp; Meindl (2015), JSS 67(4); Franconi &amp; Polettini '
             '(2004), PSD, LNCS 3050, 262–272.</footer>')
    s.append("</main></body></html>\n")
    return "".join(s)
