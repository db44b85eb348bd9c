"""Geometry of the report's SVG charts: numbers only (coordinates, ticks, labels), no markup.

Each ``*_chart`` function turns the figures of ``risk.json`` / ``utility.json`` into a
:class:`Chart`-like dataclass that ``templates/charts.html.j2`` draws. The split keeps the
arithmetic testable without parsing SVG and keeps every piece of HTML in a template (Jinja2
with autoescaping), so a label can never inject markup.

Coordinates are SVG user units. A vertical axis maps a value ``v`` in ``[0, vmax]`` to
``y = y0 - v / vmax * plot_height`` (``y0`` is the baseline); bars of category ``i`` of ``n``
start at ``x = left + i * step + pad * step`` with ``step = plot_width / n``. Axis maxima are
"nice" numbers (1, 2, 2.5 or 5 times a power of 10, see :func:`axis`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "AFTER", "BEFORE", "NEG", "OK_COLOR", "POS", "XI_COLOR",
    "BeforeAfterChart", "HistogramChart", "IntruderChart", "PrbRiskChart",
    "axis", "before_after_chart", "fmt_tick", "histogram_chart", "intruder_chart", "nice_max",
    "prb_risk_chart",
]

BEFORE, AFTER = "#94a3b8", "#2563eb"
POS, NEG, XI_COLOR, OK_COLOR = "#0f766e", "#b45309", "#dc2626", "#15803d"
CALIBRATED, MERGED, EXACT = "#7c3aed", "#0891b2", "#111827"


# --------------------------------------------------------------------------------------------
# axes and tick labels
# --------------------------------------------------------------------------------------------
def axis(x: float, n_target: int = 5) -> tuple[float, list[float]]:
    """A 'nice' axis maximum >= ``x`` and its ticks.

    The step is the smallest of 1, 2, 2.5, 5, 10 times 10^floor(log10(x / n_target)) that is
    >= x / n_target; the maximum is ceil(x / step) steps.

    Parameters
    ----------
    x : float
        Largest value to show (<= 0 is treated as 1).
    n_target : int
        Wanted number of steps (the result has about that many).

    Returns
    -------
    tuple
        ``(vmax, ticks)`` with ``ticks = [0, step, ..., vmax]``.
    """
    if x <= 0:
        x = 1.0
    raw = x / n_target
    e = 10 ** math.floor(math.log10(raw))
    step = next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= raw)
    n = max(1, math.ceil(x / step - 1e-9))
    return n * step, [i * step for i in range(n + 1)]


def nice_max(x: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of 10 that is >= ``x`` (1 for x <= 0)."""
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= x * (1 - 1e-12))


def fmt_tick(v: float) -> str:
    """A short tick label: thousands separators from 1000, no trailing zeros below 10."""
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) >= 0.01 else f"{v:.3g}"


# --------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LegendItem:
    """A colour swatch at (x, y - 9), 11 units square, and its name at (x + 16, y)."""

    name: str
    color: str
    x: float
    y: float


def legend(items: Sequence[tuple[str, str]], x: float, y: float) -> list[LegendItem]:
    """Legend entries in a row; each advances by 22 + 7.2 units per character of its name."""
    out = []
    for name, color in items:
        out.append(LegendItem(name, color, x, y))
        x += 22 + 7.2 * len(name)
    return out


@dataclass(frozen=True)
class Tick:
    """A horizontal grid line at height ``y`` and its label (drawn at x = left - 6)."""

    y: float
    label: str
    cls: str = "grid"


@dataclass(frozen=True)
class Bar:
    """A rectangle with its fill and tooltip."""

    x: float
    y: float
    width: float
    height: float
    color: str
    tip: str = ""


@dataclass(frozen=True)
class XLabel:
    """A category label below the baseline; a ``rotate`` label is turned by ``-angle``
    degrees about its end (text-anchor end), others are centred on ``x``."""

    x: float
    y: float
    text: str
    rotate: bool = False
    angle: int = 0


#: Advance widths (em) of DejaVu Sans, the font headless Chromium falls back to on Linux and
#: among the widest UI fonts (most others are narrower, so a label estimated to fit does fit).
_EM = {**dict.fromkeys("0123456789", 0.636), " ": 0.318, "!": 0.400, ",": 0.318, ".": 0.318,
       ":": 0.337, ";": 0.337, "'": 0.275, '"': 0.460, "(": 0.390, ")": 0.390, "[": 0.390,
       "]": 0.390, "-": 0.361, "=": 0.838, "+": 0.838, "<": 0.838, ">": 0.838, "&": 0.780,
       "/": 0.337, "_": 0.500, "%": 0.950, "…": 1.000, "a": 0.613, "b": 0.635, "c": 0.550,
       "d": 0.635, "e": 0.615, "f": 0.352, "g": 0.635, "h": 0.634, "i": 0.278, "j": 0.278,
       "k": 0.579, "l": 0.278, "m": 0.974, "n": 0.634, "o": 0.612, "p": 0.635, "q": 0.635,
       "r": 0.411, "s": 0.521, "t": 0.392, "u": 0.634, "v": 0.592, "w": 0.818, "x": 0.592,
       "y": 0.592, "z": 0.525, "A": 0.684, "B": 0.686, "C": 0.698, "D": 0.770, "E": 0.632,
       "F": 0.575, "G": 0.775, "H": 0.752, "I": 0.295, "J": 0.295, "K": 0.656, "L": 0.557,
       "M": 0.863, "N": 0.748, "O": 0.787, "P": 0.603, "Q": 0.787, "R": 0.695, "S": 0.635,
       "T": 0.611, "U": 0.732, "V": 0.684, "W": 0.989, "X": 0.685, "Y": 0.611, "Z": 0.685}
_EM_OTHER = 1.0        # any other character (accented, CJK, symbols): a full em, to be safe
#: The least distance between the baselines of two neighbouring turned labels.
LABEL_PITCH = 15.0
MAX_LABEL_CHARS = 22


def text_width(text: str, size: float = 11.0) -> float:
    """Estimated width of ``text`` at font size ``size`` (user units): DejaVu Sans advance
    widths, a full em for characters it does not list; bold text is about 10% wider."""
    return size * sum(_EM.get(ch, _EM_OTHER) for ch in text)


def short_label(text: str) -> str:
    """A category label cut to :data:`MAX_LABEL_CHARS` characters ("…" at the end)."""
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS - 2] + "…"


@dataclass(frozen=True)
class LabelPlan:
    """How a row of category labels is laid out under a plot (see :func:`plan_labels`)."""

    every: int          # every ``every``-th label is drawn (the first one always)
    angle: int          # 0: flat and centred; else turned by -angle degrees
    height: float       # room they need below the baseline
    left: float         # the plot's left edge that keeps the first labels inside the canvas


def plan_labels(texts: Sequence[str], left: float, plot_right: float, *,
                min_every: int = 1) -> LabelPlan:
    """Lay out ``texts`` (one per category, centred on equal steps between ``left`` and
    ``plot_right``) so that no two labels overlap and none leaves the canvas:

    - flat and centred when every drawn label is narrower than the room between two drawn
      labels (``min_every``-th labels, e.g. thinned to about 23);
    - else turned by the flattest of -28, -45 and -60 degrees at which neighbouring baselines
      are :data:`LABEL_PITCH` apart (vertical and thinned when none is); the plot's left edge
      moves right when the first labels (which reach to the lower left) would leave the
      canvas.
    """
    n = max(len(texts), 1)
    widths = [text_width(t) for t in texts]

    def step_of(lft: float) -> float:
        return (plot_right - lft) / n

    step = step_of(left)
    shown = [w for i, w in enumerate(widths) if i % min_every == 0]
    if max(shown, default=0.0) <= step * min_every - 6:
        return LabelPlan(min_every, 0, 16.0, left)
    # the flattest angle at which neighbouring labels are LABEL_PITCH apart; else vertical,
    # thinned
    angle = next((a for a in (28, 45, 60) if step * math.sin(math.radians(a)) >= LABEL_PITCH),
                 90)
    sin, cos = math.sin(math.radians(angle)), math.cos(math.radians(angle))
    new_left = left
    for _ in range(3):                      # the step shrinks as the left edge moves right
        step = step_of(new_left)
        every = max(1, math.ceil(LABEL_PITCH / (step * sin) - 1e-9))
        need = max((widths[i] * cos + 9 * sin - (i + 0.5) * step + 2
                    for i in range(0, len(widths), every)), default=0.0)
        new_left = max(left, math.ceil(need))
    height = max((widths[i] * sin for i in range(0, len(widths), every)), default=0.0)
    return LabelPlan(every, angle, math.ceil(height + 11 * cos + 16), new_left)


@dataclass(frozen=True)
class Frame:
    """What every chart has: the canvas, the plot's left/right edges and its baseline."""

    width: int
    height: int
    title: str
    left: int
    right: int
    y0: float

    @property
    def x_end(self) -> int:
        """Right end of grid lines and axes."""
        return self.width - self.right


# --------------------------------------------------------------------------------------------
# 1. original vs released counts of a key variable
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BeforeAfterPair:
    """The two bars of a category (original, released), grouped under one tooltip."""

    tip: str
    before: Bar
    after: Bar


@dataclass(frozen=True)
class BeforeAfterChart(Frame):
    """Grouped bars (original vs released counts) and, below, a panel of differences."""

    legend: list[LegendItem] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    pairs: list[BeforeAfterPair] = field(default_factory=list)
    labels: list[XLabel] = field(default_factory=list)
    diff_top: float = 0.0
    diff_mid: float = 0.0
    plot_center: float = 0.0
    diff_ticks: list[Tick] = field(default_factory=list)
    diff_bars: list[Bar] = field(default_factory=list)
    no_difference: bool = False


def before_after_chart(labels: Sequence[str], before: Sequence[float], after: Sequence[float],
                       title: str, width: int = 1060) -> BeforeAfterChart:
    """Geometry of the counts chart of one key variable.

    Bars: count / vmax * 190 units high, two per category (width 0.38 step each). Difference
    panel: (released - original) / dmax * 45 units above (positive) or below the middle line,
    dmax = :func:`nice_max` of the largest |difference|. Labels longer than 22 characters are
    cut; they are laid out by :func:`plan_labels` (flat, or turned and thinned; more than 24
    categories: at most about 23 flat labels).
    """
    n = max(len(labels), 1)
    left, right, top = 64, 16, 30
    h_bars, gap, h_diff = 190, 34, 90
    step = min((width - left - right) / n, 120.0)
    width = max(int(left + right + n * step), 460)
    texts = [short_label(x) for x in labels]
    many = n > 24
    plan = plan_labels(texts, left, width - right,
                       min_every=max(1, math.ceil(n / 23)) if many else 1)
    left = int(plan.left)
    pw = width - left - right
    step = pw / n
    lab_h = plan.height
    height = int(math.ceil(top + h_bars + lab_h + gap + h_diff + 24))
    vmax, ticks = axis(max([*before, *after, 1]), 4)
    y0 = top + h_bars
    grid = [Tick(y0 - tv / vmax * h_bars, fmt_tick(tv)) for tv in ticks]
    bw = max(step * 0.38, 0.6)
    pairs = []
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        x = left + i * step + step * 0.1
        hb, ha = b / vmax * h_bars, a / vmax * h_bars
        pairs.append(BeforeAfterPair(
            f"{labels[i]}: original {int(b):,}, released {int(a):,}",
            Bar(x, y0 - hb, bw, hb, BEFORE), Bar(x + bw, y0 - ha, bw, ha, AFTER)))
    xlabels = []
    for i, lab in enumerate(texts):
        if i % plan.every:
            continue
        cx = left + (i + 0.5) * step
        if not plan.angle:
            xlabels.append(XLabel(cx, y0 + 13, lab))
        else:
            xlabels.append(XLabel(cx, y0 + 14, lab, True, plan.angle))
    dtop = y0 + lab_h + gap
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    dmax = nice_max(max([abs(d) for d in diffs] + [1]))
    mid = dtop + h_diff / 2
    diff_ticks, diff_bars = [], []
    if any(diffs):
        for tv in (-dmax, 0, dmax):
            label = fmt_tick(tv).replace("-", "−") if tv <= 0 else "+" + fmt_tick(tv)
            diff_ticks.append(Tick(mid - tv / dmax * (h_diff / 2), label,
                                   "axis" if tv == 0 else "grid"))
        for i, d in enumerate(diffs):
            if d == 0:
                continue
            hh = abs(d) / dmax * (h_diff / 2)
            diff_bars.append(Bar(left + i * step + step * 0.15, mid - hh if d > 0 else mid,
                                 max(step * 0.7, 0.8), hh, POS if d > 0 else NEG,
                                 f"{labels[i]}: {int(d):+,}"))
    return BeforeAfterChart(
        width=width, height=height, title=title, left=left, right=right, y0=y0,
        legend=legend([("original", BEFORE), ("released", AFTER)], left, 16), ticks=grid,
        pairs=pairs, labels=xlabels, diff_top=dtop, diff_mid=mid, plot_center=left + pw / 2,
        diff_ticks=diff_ticks, diff_bars=diff_bars, no_difference=not any(diffs))


# --------------------------------------------------------------------------------------------
# 2. exact max R per PRB
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrbRiskChart(Frame):
    """Bars of the exact max R_j(a, t) per PRB with the dashed xi line."""

    legend: list[LegendItem] = field(default_factory=list)
    summary: str | None = None
    ticks: list[Tick] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    labels: list[XLabel] = field(default_factory=list)
    xi: float = 0.0
    y_xi: float = 0.0
    plot_center: float = 0.0


def _prb_kind(action: str) -> str:
    if "merged" in action:
        return "merged"
    return "calibrated" if "calibrated" in action else "theorem"


_PRB_KINDS: list[tuple[str, str, str]] = [("theorem", "theorem θ", AFTER),
                                          ("calibrated", "calibrated θ", CALIBRATED),
                                          ("merged", "merged PRB", MERGED)]


def prb_risk_chart(prbs: Sequence[dict[str, Any]], xi: float, width: int = 1060) -> PrbRiskChart:
    """Geometry of the certificate chart: bar i is max_risk / vmax * 220 units high, with
    vmax the nice maximum of the largest max R and 1.12 xi; colour by how θ was set."""
    n = max(len(prbs), 1)
    left, right, top, ph = 64, 16, 30, 220
    height = top + ph + 44
    pw = width - left - right
    step = pw / n
    vmax, ticks = axis(max([p["max_risk"] for p in prbs] + [xi * 1.12]), 5)
    kinds = {_prb_kind(p["action"]) for p in prbs}
    summary = None
    if prbs:
        rs = [p["max_risk"] for p in prbs]
        top_r, margin = max(rs), xi - max(rs)
        digits = 5                      # enough digits that a maximum below xi reads below it
        while 0 < margin and float(f"{top_r:.{digits}f}") >= xi and digits < 12:
            digits += 1
        shown = f"{margin:.5f}" if margin >= 1e-4 or margin <= 0 else f"{margin:.1e}"
        summary = (f"max R per PRB from {min(rs):.5f} to {top_r:.{digits}f}; smallest margin "
                   f"to ξ {shown}")
    y0 = top + ph
    colors = {k: c for k, _, c in _PRB_KINDS}
    bars = []
    for i, p in enumerate(prbs):
        h = p["max_risk"] / vmax * ph
        tip = (f"PRB {p['prb']}: {p['partition_key']} - k={p['k']}, theta={p['theta']:.4f}, "
               f"max R={p['max_risk']:.4f} at t={p['max_risk_t']}, a={p['max_risk_a']}")
        bars.append(Bar(left + i * step + step * 0.15, y0 - h, step * 0.7, h,
                        colors[_prb_kind(p["action"])], tip))
    widest = max((text_width(str(p["prb"])) for p in prbs), default=0.0)
    every = max(1, math.ceil(n / 40), math.ceil((widest + 6) / step))
    labels = [XLabel(left + (i + 0.5) * step, y0 + 14, str(p["prb"]))
              for i, p in enumerate(prbs) if i % every == 0]
    return PrbRiskChart(
        width=width, height=height, title="Exact maximum correct-match risk per PRB", left=left,
        right=right, y0=y0,
        legend=legend([(name, c) for k, name, c in _PRB_KINDS if k in kinds], left, 16),
        summary=summary, ticks=[Tick(y0 - tv / vmax * ph, f"{tv:.2f}") for tv in ticks],
        bars=bars, labels=labels, xi=xi, y_xi=y0 - xi / vmax * ph, plot_center=left + pw / 2)


# --------------------------------------------------------------------------------------------
# 3. histogram of PRB sizes
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HistogramChart(Frame):
    """Histogram of integer values with an optional marker line (e.g. kmin)."""

    xlabel: str = ""
    empty: bool = False
    ticks: list[Tick] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    labels: list[XLabel] = field(default_factory=list)
    top: int = 0
    marker_x: float | None = None
    marker_label: str = ""
    marker_anchor: str = "start"
    plot_center: float = 0.0


def histogram_chart(values: Sequence[float], title: str, xlabel: str,
                    marker: float | None = None, marker_label: str = "",
                    width: int = 520) -> HistogramChart:
    """Geometry of a histogram with up to about 14 bins of width :func:`nice_max`(span / 12),
    starting at a multiple of the bin width at or below min(values, marker).

    Bin edges are labelled (every other one above 8 bins); the right margin leaves room for
    half of the last label ("16,000" is not cut). The marker's label stands above the plot
    area, beside the top of its dashed line (never on a bar), turned to the line's left when
    it would leave the canvas."""
    left, right, top, ph = 48, 16, 26, 170
    height = top + ph + 46
    y0 = top + ph
    base = dict(width=width, height=height, title=title, xlabel=xlabel, top=top, y0=y0)
    vals = np.asarray(values, dtype=float)
    if vals.size == 0:
        return HistogramChart(**base, left=left, right=right,
                              plot_center=left + (width - left - right) / 2, empty=True)
    lo, hi = float(vals.min()), float(vals.max())
    if marker is not None:
        lo = min(lo, marker)
    span = max(hi - lo, 1.0)
    bw = nice_max(span / 12)
    start = math.floor(lo / bw) * bw
    nb = max(1, math.ceil((hi - start) / bw + 1e-9))
    if start + nb * bw <= hi:
        nb += 1
    shown = [i for i in range(nb + 1) if not (nb > 8 and i % 2)]
    right = max(right, math.ceil(text_width(fmt_tick(start + shown[-1] * bw)) / 2) + 4
                if shown[-1] == nb else right)
    pw = width - left - right
    counts = np.histogram(vals, bins=nb, range=(start, start + nb * bw))[0]
    cmax, cticks = axis(float(counts.max()), 4)
    ticks = [Tick(y0 - tv / cmax * ph, fmt_tick(tv)) for tv in cticks if float(tv).is_integer()]
    step = pw / nb
    bars = []
    for i, c in enumerate(counts):
        h = c / cmax * ph
        a, b = start + i * bw, start + (i + 1) * bw
        bars.append(Bar(left + i * step + 1, y0 - h, step - 2, h, AFTER,
                        f"{fmt_tick(a)}–{fmt_tick(b)}: {int(c)}"))
    labels = [XLabel(left + i * step, y0 + 14, fmt_tick(start + i * bw)) for i in shown]
    marker_x = None if marker is None else left + (marker - start) / (nb * bw) * pw
    anchor = "start"
    if marker_x is not None and marker_x + 4 + 1.1 * text_width(marker_label, 12) > width - 2:
        anchor = "end"
    return HistogramChart(**base, left=left, right=right, plot_center=left + pw / 2,
                          ticks=ticks, bars=bars, labels=labels, marker_x=marker_x,
                          marker_label=marker_label, marker_anchor=anchor)


# --------------------------------------------------------------------------------------------
# 4. Monte Carlo intruder vs exact risk
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IntruderPoint:
    """One (t, a) class: the estimate (dot at cx - 5, with a ±2 SE whisker) and the exact
    pooled R (diamond at cx + 6, absent when unknown)."""

    cx: float
    t: int
    a: int
    estimate: float
    se: float
    y: float
    y_low: float
    y_high: float
    exact: float | None
    y_exact: float | None


@dataclass(frozen=True)
class IntruderChart(Frame):
    """Monte Carlo estimate ± 2 SE next to the exact pooled R, per (t, a)."""

    legend: list[LegendItem] = field(default_factory=list)
    empty: bool = True
    ticks: list[Tick] = field(default_factory=list)
    points: list[IntruderPoint] = field(default_factory=list)
    labels: list[XLabel] = field(default_factory=list)
    xi: float | None = None
    y_xi: float | None = None
    plot_center: float = 0.0


def intruder_chart(classes: Sequence[dict[str, Any]], xi: float | None,
                   width: int = 520) -> IntruderChart:
    """Geometry of the intruder chart; values map to y = y0 - v / vmax * 170 with vmax the
    nice maximum of the largest estimate + 2 SE, 1.1 xi and 0.1."""
    cl = [c for c in classes if c["estimate"] is not None]
    left, right, top, ph = 48, 16, 30, 170
    texts = [f"t={c['t']}, a={c['a']}" for c in cl]
    plan = plan_labels(texts, left, width - right)
    left = int(plan.left)
    height = int(math.ceil(top + ph + plan.height + 36))     # room for the title's subscript
    pw = width - left - right
    y0 = top + ph
    base = dict(width=width, height=height, title="Monte Carlo intruder vs exact risk",
                left=left, right=right, y0=y0, plot_center=left + pw / 2,
                legend=legend([("Monte Carlo (±2 SE)", AFTER), ("exact", EXACT)], left, 16))
    if not cl:
        return IntruderChart(**base)
    vmax, ticks = axis(max([c["estimate"] + 2 * (c["se"] or 0) for c in cl]
                           + [(xi or 0) * 1.1, 0.1]), 5)
    yv: Callable[[float], float] = lambda v: y0 - v / vmax * ph  # noqa: E731
    step = pw / len(cl)
    points = []
    for i, c in enumerate(cl):
        se = c["se"] or 0.0
        ex = c["exact_pooled"]
        points.append(IntruderPoint(
            cx=left + (i + 0.5) * step, t=c["t"], a=c["a"], estimate=c["estimate"], se=se,
            y=yv(c["estimate"]), y_low=yv(c["estimate"] - 2 * se),
            y_high=yv(c["estimate"] + 2 * se), exact=ex, y_exact=None if ex is None else yv(ex)))
    labels = [XLabel(p.cx, y0 + 14, text, bool(plan.angle), plan.angle)
              for i, (p, text) in enumerate(zip(points, texts, strict=True)) if i % plan.every == 0]
    return IntruderChart(**base, empty=False,
                         ticks=[Tick(yv(tv), f"{tv:.2f}") for tv in ticks], points=points,
                         labels=labels, xi=xi, y_xi=None if xi is None else yv(xi))
