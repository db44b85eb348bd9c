"""The number each recoded class of an ordered numeric key is released as, chosen and measured
for ``sdc design`` and ``sdc init`` (docs/DESIGN.md, "Released values").

A band released as its lower edge moves the key's mean down by about half a class width: an
analyst's regression sees it. For every ordered numeric key a design recodes by bands or
top/bottom codes, :func:`value_figures` computes, from the key's declared-value counts, the
mean and standard deviation of the key before and after the recoding under ``value: lower``
and ``value: midpoint`` (mean shift in standard errors of the mean, sd/sqrt(n); sd shift in
standard errors of the sd, sd/sqrt(2(n-1))), picks the one whose mean moves less (the written
config's ``value:``; a fractional midpoint only when no Stata file is written) and, for each
open class (top code, last band, bottom code) holding several values, the class's mean in the
file (one decimal): the ``top_value`` / ``bottom_value`` the written config declares (issue 49:
printed and written, visibly, in the config's text and comment; the figures then describe the
release with it; not written when a Stata file is written and the mean is fractional, nor
when the config declares its own).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.config.model import KeyVariable

__all__ = ["value_figures", "with_value", "value_lines"]


def _rule_object(rule: dict[str, Any], value: str | None, **declared: float) -> Any:
    from sdc.config.keys import RecodeBands, TopBottom

    if "bands" in rule:
        return RecodeBands(bands=rule["bands"], value=value, **declared)
    return TopBottom(**{k: v for k, v in rule.items() if k in ("top", "bottom")}, value=value,
                     **declared)


def _moments(vals: np.ndarray, c: np.ndarray) -> tuple[float, float]:
    n = c.sum()
    m = float((c * vals).sum() / n)
    sd = float(np.sqrt((c * (vals - m) ** 2).sum() / max(n - 1, 1)))
    return m, sd


def _released(key: str, kv: KeyVariable, obj: Any) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """(released number of every declared value, class of every declared value, values)."""
    from sdc.config.recode import released_classes, released_values

    cmap, labels = released_classes(key, kv, obj)
    values = released_values(kv, obj, cmap, labels, key)
    return np.asarray(values, dtype=float)[cmap], cmap, values


def value_figures(key: str, kv: KeyVariable, rule: dict[str, Any] | None,
                  counts: np.ndarray, formats: list[str] | tuple[str, ...] = ()
                  ) -> dict[str, Any] | None:
    """The released-value figures of one recoded key (module docstring), or None when the key
    is not an ordered numeric key recoded by bands or top/bottom codes. ``counts``: records
    per declared value (domain order). When open classes get their file mean
    (``open_classes``), the figures are those of the rule with them declared, and
    ``write_declared`` holds what :func:`with_value` writes (``top_value: 52.5``)."""
    fig = _value_figures(key, kv, rule, counts, formats)
    oc = fig.get("open_classes") if fig else None
    if not oc or rule is None:
        return fig
    dta = "dta" in formats
    declared = {d["field"]: d["class_mean"] for d in oc["declare"]
                if not (dta and not float(d["class_mean"]).is_integer())}
    if not declared:
        return fig
    out = _value_figures(key, kv, {**rule, **declared}, counts, formats)
    assert out is not None
    out["open_classes"], out["write_declared"] = oc, declared
    return out


def _value_figures(key: str, kv: KeyVariable, rule: dict[str, Any] | None,
                   counts: np.ndarray, formats: list[str] | tuple[str, ...] = ()
                   ) -> dict[str, Any] | None:
    from sdc.method.design import key_kind

    if rule is None or not ("bands" in rule or "top" in rule or "bottom" in rule):
        return None
    if key_kind(kv) != "numeric" or not kv.domain:
        return None
    vals = np.asarray([float(v) for v in kv.domain])
    c = np.asarray(counts[:vals.size], dtype=float)
    n = c.sum()
    if n < 2:
        return None
    m0, sd0 = _moments(vals, c)
    se_m, se_sd = sd0 / np.sqrt(n), sd0 / np.sqrt(2 * (n - 1))
    out: dict[str, Any] = {"n": int(n), "mean": m0, "sd": sd0, "values": {}}
    fractional = False
    declared = {k: rule[k] for k in ("top_value", "bottom_value") if k in rule}
    for how in ("lower", "midpoint"):
        rv, cmap, values = _released(key, kv, _rule_object(rule, how, **declared))
        m1, sd1 = _moments(rv, c)
        out["values"][how] = {"mean": m1, "sd": sd1,
                              "mean_shift_se": (m1 - m0) / se_m if se_m > 0 else 0.0,
                              "sd_shift_se": (sd1 - sd0) / se_sd if se_sd > 0 else 0.0}
        if how == "midpoint":
            fractional = any(isinstance(v, float) for v in values)
    lo, mid = out["values"]["lower"], out["values"]["midpoint"]
    if rule.get("value") is not None:
        chosen, why = rule["value"], "as the config says"
    elif mid == lo:
        chosen, why = None, "no closed class holds several values"
    elif fractional and "dta" in formats:
        chosen, why = "lower", "Stata (output.formats: dta) labels whole numbers only"
    elif abs(mid["mean_shift_se"]) <= abs(lo["mean_shift_se"]):
        chosen, why = "midpoint", "the mean moves less than at lower edges"
    else:
        chosen, why = "lower", "the mean moves less than at class midpoints"
    out["value"], out["why"] = chosen or "lower", why
    out["write_value"] = chosen if rule.get("value") is None else None
    out["open_classes"] = _open_class_means(key, kv, rule, chosen, c, vals, m0, se_m)
    out["heap"] = _heap(key, kv, rule, chosen, declared, c, vals, se_m)
    return out


def _heap(key: str, kv: KeyVariable, rule: dict[str, Any], chosen: str | None,
          declared: dict[str, float], c: np.ndarray, vals: np.ndarray, se_m: float
          ) -> dict[str, Any] | None:
    """When the released values still move the key's mean by >= 2 SE, the closed class that
    contributes most (>= 1 SE) and the value its records crowd on (its mode): ``breaks:`` that
    would keep that value in a class of its own (the declared breaks, the mode and the next
    declared value), a way out no released value can offer."""
    from sdc.config.recode import open_classes

    obj = _rule_object(rule, chosen, **declared)
    rv, cmap, values = _released(key, kv, obj)
    n = c.sum()
    contrib = np.bincount(cmap, weights=c * (rv - vals), minlength=len(values)) / n / se_m
    top, bottom = open_classes(list(kv.domain), obj, cmap, len(values))
    contrib[top | bottom] = 0.0
    if se_m <= 0 or abs(contrib.sum()) < 2 or abs(contrib).max() < 1:
        return None
    g = int(np.argmax(np.abs(contrib)))
    inside = np.flatnonzero(cmap == g)
    if inside.size < 2:
        return None
    mode = inside[np.argmax(c[inside])]
    above = vals[vals > vals[mode]]
    cuts = {float(vals[mode])} | ({float(above.min())} if above.size else set())
    breaks = sorted({float(b) for b in (kv.breaks or [])} | cuts)
    num = [int(b) if b.is_integer() else b for b in breaks]
    return {"class_value": values[g], "mode": kv.domain[mode],
            "share": float(c[mode] / c[inside].sum()), "mean_shift_se": float(contrib[g]),
            "breaks": num}


def _open_class_means(key: str, kv: KeyVariable, rule: dict[str, Any], chosen: str | None,
                      c: np.ndarray, vals: np.ndarray, m0: float, se_m: float
                      ) -> dict[str, Any] | None:
    """The open classes holding several declared values whose edge is off their mean in the
    file by enough to move the key's mean by >= 0.1 SE: each one's edge, records and mean (one
    decimal), and the key's mean and sd shifts (SE) were all of them declared at their means."""
    from sdc.config.recode import open_classes

    obj = _rule_object(rule, chosen)
    rv, cmap, values = _released(key, kv, obj)
    top, bottom = open_classes(list(kv.domain), obj, cmap, len(values))
    n, alt, found = c.sum(), rv.copy(), []
    for flags, field in ((top, "top_value"), (bottom, "bottom_value")):
        for g in np.flatnonzero(flags):
            inside = cmap == g
            if vals[inside].size < 2 or c[inside].sum() == 0 or field in rule:
                continue
            mean = round(float((c[inside] * vals[inside]).sum() / c[inside].sum()), 1)
            mean = min(max(mean, float(vals[inside].min())), float(vals[inside].max()))
            if se_m <= 0 or abs(values[g] - mean) * c[inside].sum() / n < 0.1 * se_m:
                continue
            alt[inside] = mean
            found.append({"field": field, "edge": values[g], "records": int(c[inside].sum()),
                          "class_mean": mean})
    if not found:
        return None
    m1, sd1 = _moments(alt, c)
    _, sd0 = _moments(vals, c)
    return {"declare": found, "mean_shift_se": (m1 - m0) / se_m,
            "sd_shift_se": (sd1 - sd0) / (sd0 / np.sqrt(2 * (n - 1)))}


def with_value(rule: dict[str, Any] | None, fig: dict[str, Any] | None) -> dict[str, Any] | None:
    """``rule`` with the chosen ``value:`` and the open classes' file means (``top_value`` /
    ``bottom_value``) added (when the figures chose them to write)."""
    if rule is None or fig is None:
        return rule
    out = {**rule, **(fig.get("write_declared") or {})}
    if fig.get("write_value") is not None:
        out["value"] = fig["write_value"]
    return out


def _num(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:.0f}"


def value_lines(key: str, fig: dict[str, Any]) -> list[str]:
    """What the figures say, for a written config's comment and the terminal."""
    ch = fig["values"][fig["value"]]
    other = "midpoint" if fig["value"] == "lower" else "lower"
    o = fig["values"][other]
    what = {"lower": "class edges (value: lower)", "midpoint": "class midpoints (value: "
            "midpoint)"}[fig["value"]]
    line = (f"{key} released at {what}, {fig['why']}: mean {_num(fig['mean'])} -> "
            f"{_num(ch['mean'])} ({ch['mean_shift_se']:+.1f} SE of the mean), sd "
            f"{_num(fig['sd'])} -> {_num(ch['sd'])} ({ch['sd_shift_se']:+.1f} SE)")
    if o != ch:
        line += f"; at {'lower edges' if other == 'lower' else 'midpoints'} the mean would " \
                f"move {o['mean_shift_se']:+.1f} SE"
    lines = [line + "."]
    hp = fig.get("heap")
    if hp:
        lines.append(f"{key}: the class released as {_num(hp['class_value'])} moves the mean "
                     f"{hp['mean_shift_se']:+.1f} SE: {hp['share']:.0%} of its records are "
                     f"{hp['mode']}; declare `breaks:` that keep {hp['mode']} in a class of "
                     f"its own (at least {hp['breaks']}, with {key}'s own thresholds) and rerun "
                     "`sdc design`.")
    oc = fig.get("open_classes")
    if oc:
        what = "; ".join(f"the class at {_num(d['edge'])} ({d['records']:,} records) has mean "
                         f"{d['class_mean']:g}" for d in oc["declare"])
        decl = ", ".join(f"{d['field']}: {d['class_mean']:g}" for d in oc["declare"])
        if fig.get("write_declared"):
            lines.append(f"{key}: in this file {what}: written `{decl}` (a figure of the "
                         "file you publish; remove it to release the class at its edge).")
        else:
            lines.append(f"{key}: open classes are released at their edge; in this file "
                         f"{what}: declaring `{decl}` (a figure of the file you would "
                         f"publish) would leave the mean {oc['mean_shift_se']:+.1f} SE and "
                         f"the sd {oc['sd_shift_se']:+.1f} SE off.")
    return lines
