"""Chart geometry (sdc.reports.charts): the numbers the SVG templates draw."""

from __future__ import annotations

import pytest

from sdc.reports import charts


@pytest.mark.parametrize(("x", "n", "vmax", "step"), [
    (0.395 * 1.12, 5, 0.5, 0.1), (1478, 4, 1500, 500), (7, 4, 8, 2), (0, 4, 1, 0.25),
    (0.9, 5, 1.0, 0.2), (23, 4, 30, 10),
])
def test_axis_is_nice_and_covers_the_data(x: float, n: int, vmax: float, step: float) -> None:
    top, ticks = charts.axis(x, n)
    assert top == pytest.approx(vmax) and top >= x
    assert ticks[0] == 0 and ticks[-1] == pytest.approx(top)
    assert all(b - a == pytest.approx(step) for a, b in zip(ticks, ticks[1:], strict=False))


def test_nice_max_and_ticks() -> None:
    assert [charts.nice_max(x) for x in (0, 0.7, 1, 3, 4.1, 240, 2500)] == \
        [1.0, 1, 1, 5, 5, 250, 2500]
    assert [charts.fmt_tick(v) for v in (0, 0.25, 1.5, 2.0, 25.0, 12500.0, 0.004)] == \
        ["0", "0.25", "1.5", "2", "25", "12,500", "0.004"]


def test_before_after_bars_are_proportional() -> None:
    c = charts.before_after_chart(["a", "b", "c"], [100, 50, 0], [80, 70, 0], "t")
    # axis to 100 over 190 units: a count of 50 is 95 units high, drawn up from the baseline
    b = c.pairs[1].before
    assert b.height == pytest.approx(95) and b.y + b.height == pytest.approx(c.y0)
    assert [p.after.height for p in c.pairs] == pytest.approx([152, 133, 0])
    # differences +-20 on a +-20 panel of 45 units, zero differences get no bar
    assert [r.color for r in c.diff_bars] == [charts.NEG, charts.POS]
    assert [r.height for r in c.diff_bars] == pytest.approx([45, 45])
    assert c.diff_bars[0].y == c.diff_mid and c.diff_bars[1].y == pytest.approx(c.diff_mid - 45)
    assert [t.label for t in c.diff_ticks] == ["−20", "0", "+20"]
    assert not c.no_difference and all(not lab.rotate for lab in c.labels)


def test_before_after_many_and_long_labels() -> None:
    many = charts.before_after_chart([str(i) for i in range(60)], [1] * 60, [1] * 60, "t")
    assert len(many.labels) == 20 and many.no_difference and not many.diff_bars
    long = charts.before_after_chart(["x" * 30, "y", "z", "w"], [1, 2, 3, 4], [1, 2, 3, 4], "t",
                                     width=300)
    assert long.labels[0].rotate and long.labels[0].text == "x" * 20 + "…"
    assert long.labels[0].angle == 28
    assert long.width == 460   # never narrower
    # a label that fits the widened chart flat stays flat
    fits = charts.before_after_chart(["x" * 30, "y"], [1, 2], [1, 2], "t", width=300)
    assert not fits.labels[0].rotate


def test_prb_risk_colours_and_xi_line() -> None:
    prbs = [{"prb": i, "partition_key": "s", "k": 5, "theta": 0.8, "max_risk": r,
             "max_risk_t": 2, "max_risk_a": 1, "action": act}
            for i, (r, act) in enumerate([(0.39, "theorem"), (0.2, "calibrated"),
                                          (0.3, "merged+theorem")])]
    c = charts.prb_risk_chart(prbs, 0.395)
    assert [b.color for b in c.bars] == [charts.AFTER, charts.CALIBRATED, charts.MERGED]
    assert [it.name for it in c.legend] == ["theorem θ", "calibrated θ", "merged PRB"]
    # axis to 0.5 over 220 units
    assert c.y0 - c.y_xi == pytest.approx(0.395 / 0.5 * 220)
    assert c.bars[0].height == pytest.approx(0.39 / 0.5 * 220)
    assert c.summary.endswith("smallest margin to ξ 0.00500")
    # a margin of 4e-6 is not shown as "0.00000", nor the maximum as xi
    prbs[0]["max_risk"] = 0.394996
    c = charts.prb_risk_chart(prbs, 0.395)
    assert c.summary.endswith("to 0.394996; smallest margin to ξ 4.0e-06"), c.summary


def test_histogram_counts_every_value() -> None:
    values = [5, 5, 6, 9, 12, 30]
    c = charts.histogram_chart(values, "t", "k", marker=5, marker_label="kmin = 5")
    # bins of width nice_max(25 / 12) = 2.5 from 5: the counts add up to the values
    assert c.labels[0].text == "5" and c.labels[1].text == "10"   # every other edge (> 8 bins)
    counts = [int(b.tip.rsplit(": ", 1)[1]) for b in c.bars]
    assert sum(counts) == len(values) and counts[0] == 3
    assert c.marker_x == pytest.approx(c.left)
    assert charts.histogram_chart([], "t", "k").empty


def test_intruder_points() -> None:
    classes = [{"t": 1, "a": 1, "estimate": 0.3, "se": 0.01, "exact_pooled": 0.31},
               {"t": 2, "a": 1, "estimate": None, "se": None, "exact_pooled": None},
               {"t": 2, "a": 2, "estimate": 0.2, "se": None, "exact_pooled": None}]
    c = charts.intruder_chart(classes, 0.395)
    assert [(p.t, p.a) for p in c.points] == [(1, 1), (2, 2)]
    p = c.points[0]
    assert p.y_low - p.y == pytest.approx(p.y - p.y_high)   # symmetric +-2 SE whisker
    assert c.points[1].y_exact is None and c.points[1].se == 0
    assert charts.intruder_chart([], None).empty
