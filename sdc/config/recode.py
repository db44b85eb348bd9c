"""Recoding of released key values (``key_variables.X.recode``): global recoding before PRAM.

A recoding maps every declared value of a key to a released value (bands, top/bottom coding,
groups, a level of an ARX hierarchy), computed once per declared value. :func:`apply_recodings`
rewrites a loaded config so that everything after reading sees released values only: the key's
released domain, partition rules over it, and the code map the readers apply to every batch
(:func:`sdc.io.recode.recode_frame`); a config without ``recode:`` is untouched. README.md,
"Release config (YAML)"; docs/DESIGN.md, "Recoding".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.config.model import (
    AsIs,
    Bands,
    ConfigError,
    Groups,
    Hierarchy,
    KeyVariable,
    ReleaseConfig,
    TopBottom,
)

__all__ = ["apply_recodings", "open_classes", "recode_classes", "released_classes",
           "released_values", "span_label"]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def span_label(lo: float, hi: float, open_top: bool = False) -> str:
    """The label of the whole numbers lo..hi: "18-19", "7", "62+" (open top), and "-4 to 9"
    (a negative start never reads as a range from minus four)."""
    if open_top:
        return f"{_fmt(lo)}+"
    if lo == hi:
        return _fmt(lo)
    return f"{_fmt(lo)} to {_fmt(hi)}" if lo < 0 or hi < 0 else f"{_fmt(lo)}-{_fmt(hi)}"


def _value_str(v: Any) -> str:
    return _fmt(v) if isinstance(v, float) else str(v)


def _numeric(var: str, kv: KeyVariable, where: str) -> np.ndarray:
    dom = kv.domain
    bad = [c for c in dom if not isinstance(c, int | float) or isinstance(c, bool)]
    if bad:
        raise ConfigError(f"{where}: bands and top/bottom coding need numeric values, but {var} "
                          f"has {bad[:3]}; use groups for text categories")
    return np.asarray(dom, dtype=float)


def recode_classes(var: str, kv: KeyVariable, rule: Any, *, where: str | None = None
                   ) -> tuple[np.ndarray, list[str]]:
    """``(code_map, labels)``: ``code_map[c]`` is the class of declared value ``c`` (domain
    order, the ``missing`` category excluded); ``labels`` name the classes in their natural
    order (bands ascending, top/bottom and kept values in domain order, groups in declared
    order, hierarchy values in file order). Values whose labels coincide form one class."""
    where = where or f"key_variables.{var}.recode"
    if rule == "as_is" or isinstance(rule, AsIs):
        names = [_value_str(c) for c in kv.domain]
    elif isinstance(rule, Bands):
        names = _band_names(var, kv, rule, where)
    elif isinstance(rule, TopBottom):
        names = _top_bottom_names(var, kv, rule, where)
    elif isinstance(rule, Groups):
        names = _group_names(var, kv, rule, where)
    elif isinstance(rule, Hierarchy):
        names = _hierarchy_names(var, kv, rule, where)
    else:  # pragma: no cover - the model admits nothing else
        raise ConfigError(f"{where}: unknown recoding {rule!r}")
    labels = _ordered_labels(var, kv, rule, where, names)
    index = {lab: i for i, lab in enumerate(labels)}
    return np.array([index[n] for n in names], dtype=np.int64), labels


def _band_names(var: str, kv: KeyVariable, rule: Bands, where: str) -> list[str]:
    """Each declared value's band label: what the band holds (``"18-19"`` for integers, the
    last band ``"65+"``), or ``[lo, hi)`` edges for non-integer values."""
    vals = _numeric(var, kv, where)
    edges = np.asarray(rule.bands, dtype=float)
    idx = np.searchsorted(edges, vals, side="right") - 1
    if (idx < 0).any():
        raise ConfigError(f"{where}.bands: {var} value {_fmt(vals[idx < 0][0])} is below the "
                          f"first band edge {_fmt(edges[0])}; lower the first edge")
    integer = bool(np.all(np.mod(vals, 1) == 0))
    band_names = {}
    for i in np.unique(idx):
        inside = vals[idx == i]
        lo, hi = float(inside.min()), float(inside.max())
        last = i + 1 == len(rule.bands)
        if integer:  # what is in the band: "18-19" for ages 18, 19 under the edge 15
            band_names[i] = span_label(lo, hi, last)
        else:
            band_names[i] = (f"{_fmt(rule.bands[i])}+" if last else
                             f"[{_fmt(rule.bands[i])}, {_fmt(rule.bands[i + 1])})")
    return [band_names[i] for i in idx]


def _top_bottom_names(var: str, kv: KeyVariable, rule: TopBottom, where: str) -> list[str]:
    """``"lo+"`` above the top code, ``"hi or less"`` below the bottom code, else the value."""
    vals = _numeric(var, kv, where)
    top = vals[vals >= rule.top] if rule.top is not None else vals[:0]
    bottom = vals[vals <= rule.bottom] if rule.bottom is not None else vals[:0]
    names = []
    for c, v in zip(kv.domain, vals, strict=True):
        if rule.top is not None and v >= rule.top:
            names.append(f"{_fmt(top.min())}+")
        elif rule.bottom is not None and v <= rule.bottom:
            names.append(f"{_fmt(bottom.max())} or less")
        else:
            names.append(_value_str(c))
    return names


def _group_names(var: str, kv: KeyVariable, rule: Groups, where: str) -> list[str]:
    """The group of each declared value (its own label when in no group); a member that is
    not declared or is in two groups is a config error."""
    dom = kv.domain
    pos = {c: i for i, c in enumerate(dom)}
    names = [_value_str(c) for c in dom]
    seen: dict[Any, str] = {}
    for g, members in rule.groups.items():
        for m in members:
            if m not in pos:
                raise ConfigError(f"{where}.groups.{g}: {m!r} is not a declared category of "
                                  f"{var}")
            if m in seen:
                raise ConfigError(f"{where}.groups: {m!r} is in both {seen[m]!r} and {g!r}")
            seen[m] = g
            names[pos[m]] = str(g)
    return names


def _hierarchy_names(var: str, kv: KeyVariable, rule: Hierarchy, where: str) -> list[str]:
    """Each declared value's label at the hierarchy's ``level`` (every value must be in it)."""
    table = rule.table
    if table is None:
        raise ConfigError(f"{where}: hierarchy {str(rule.hierarchy)!r} was not loaded; build "
                          "the config with sdc.load_config or sdc.parse_config")
    if rule.level >= len(table[0]):
        raise ConfigError(f"{where}.level: level {rule.level} does not exist in "
                          f"{str(rule.hierarchy)!r}, which has levels 0..{len(table[0]) - 1}")
    by_value = {row[0]: row[rule.level] for row in table}
    missing = [c for c in kv.domain if str(c) not in by_value]
    if missing:
        raise ConfigError(f"{where}: {len(missing)} declared value(s) of {var} are not in "
                          f"hierarchy file {str(rule.hierarchy)!r}, e.g. {missing[:5]}")
    return [by_value[str(c)] for c in kv.domain]


def _ordered_labels(var: str, kv: KeyVariable, rule: Any, where: str,
                    names: list[str]) -> list[str]:
    """The distinct labels in their natural order (see :func:`recode_classes`)."""
    labels = list(dict.fromkeys(names))
    if isinstance(rule, Bands):  # ascending bands, whatever the declared order
        first = {lab: float(v) for v, lab in sorted(zip(_numeric(var, kv, where), names,
                                                        strict=True), reverse=True)}
        return sorted(labels, key=lambda lab: first[lab])
    if isinstance(rule, Groups):  # declared group order, then the kept values (domain order)
        order = [str(g) for g in rule.groups]
        return [g for g in order if g in set(labels)] + [x for x in labels if x not in order]
    if isinstance(rule, Hierarchy):
        return list(dict.fromkeys(row[rule.level] for row in rule.table if row[rule.level] in
                                  set(names)))
    return labels


def _is_number(c: Any) -> bool:
    return isinstance(c, int | float) and not isinstance(c, bool)


def _class_value(members: list[Any], how: str, top: bool, bottom: bool, rule: Any) -> Any:
    """The released number of one class of declared values ``members`` (see
    :func:`released_values`)."""
    lo, hi = min(members), max(members)
    if bottom:
        declared = getattr(rule, "bottom_value", None)
        return hi if declared is None else _number(declared)
    if top:
        declared = getattr(rule, "top_value", None)
        return lo if declared is None else _number(declared)
    if how == "midpoint" and lo != hi:
        return _number((lo + hi) / 2)
    return lo


def _number(x: float) -> int | float:
    """A whole number as an int (12, not 12.0), else the float (12.5)."""
    return int(x) if float(x).is_integer() else float(x)


def open_classes(dom: list[Any], rule: Any, code_map: np.ndarray, n: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Which classes are open: the top class (a top code, the last band) and the bottom code."""
    top = np.zeros(n, dtype=bool)
    bottom = np.zeros(n, dtype=bool)
    vals = np.asarray([float(c) for c in dom])
    cm = code_map[:len(dom)]
    if isinstance(rule, Bands):
        top[np.unique(cm[vals >= float(rule.bands[-1])])] = True
    elif isinstance(rule, TopBottom):
        if rule.top is not None:
            top[np.unique(cm[vals >= rule.top])] = True
        if rule.bottom is not None:
            bottom[np.unique(cm[vals <= rule.bottom])] = True
    return top, bottom


def released_values(kv: KeyVariable, rule: Any, code_map: np.ndarray,
                    labels: list[str], var: str = "X") -> list[Any]:
    """The released value of each class (in ``labels`` order). A key whose declared values
    are all numbers stays numeric. Under ``value: lower`` (the default) each class is released
    as its edge, the smallest declared value it holds (a band "18-19" as 18, a top code "43+"
    as 43, a group as its smallest member), a bottom code ("-1 or less") as its largest. Under
    ``value: midpoint`` a closed class (a band below the last) is released as (lo + hi) / 2 of
    the declared values lo..hi it holds (ages 18, 19 as 18.5): a function of the class and
    the declared domain, never of the data. Open classes (the last band, a top code, a bottom
    code) keep their edge unless ``top_value`` / ``bottom_value`` declare their number, which
    must lie within the declared values the class holds. The class's name becomes the value's
    label. Text keys are released as the class names."""
    dom = kv.domain
    if not dom or not all(_is_number(c) for c in dom):
        return list(labels)
    how = getattr(rule, "value", None) or "lower"
    top, bottom = open_classes(dom, rule, code_map, len(labels))
    out: list[Any] = []
    for g, lab in enumerate(labels):
        members = [dom[i] for i in np.flatnonzero(code_map[:len(dom)] == g)]
        v = _class_value(members, how, bool(top[g]), bool(bottom[g]), rule)
        if not min(members) <= v <= max(members):
            which = "top_value" if top[g] else "bottom_value"
            raise ConfigError(
                f"key_variables.{var}.recode.{which}: {_fmt(v)} is outside the "
                f"class {lab!r} it stands for ({_fmt(min(members))}..{_fmt(max(members))}); "
                f"declare a number within the class, or drop {which} to release its edge")
        out.append(v)
    return out


def released_classes(var: str, kv: KeyVariable, rule: Any) -> tuple[np.ndarray, list[str]]:
    """:func:`recode_classes` in the released domain's code order: the classes of a numeric
    key by their released value ascending (:func:`released_values`), others as they are."""
    code_map, labels = recode_classes(var, kv, rule)
    values = released_values(kv, rule, code_map, labels, var)
    if not all(_is_number(v) for v in values):
        return code_map, labels
    order = sorted(range(len(values)), key=lambda i: values[i])
    new = np.empty(len(order), dtype=np.int64)
    new[order] = np.arange(len(order))
    return new[code_map], [labels[i] for i in order]


def _released_key(kv: KeyVariable, rule: Any, code_map: np.ndarray,
                  labels: list[str]) -> KeyVariable:
    dom = kv.domain
    values = released_values(kv, rule, code_map, labels)
    value_labels: dict[Any, str] = {}
    for g, (lab, value) in enumerate(zip(labels, values, strict=True)):
        members = np.flatnonzero(code_map == g)
        if members.size == 1 and dom[members[0]] in kv.labels:
            value_labels[value] = kv.labels[dom[members[0]]]
        elif members.size == 1 and str(value) == lab:
            continue                           # kept as it is: the value says it
        elif str(value) != lab:
            value_labels[value] = lab          # "18-19", "43+", a group's name
    if all(_is_number(v) for v in values):     # numbers in ascending order
        order = sorted(range(len(values)), key=lambda i: values[i])
        values = [values[i] for i in order]
        value_labels = {v: value_labels[v] for v in values if v in value_labels}
    if any(isinstance(v, float) for v in values):  # midpoints (12.5): not a declarable domain
        return KeyVariable.model_construct(categories=values, labels=value_labels,
                                           missing=kv.missing, label=kv.label, level=kv.level)
    return KeyVariable(categories=values, labels=value_labels, missing=kv.missing,
                       label=kv.label, level=kv.level)


def _translate_partition(var: str, source: KeyVariable, rule: Any, code_map: np.ndarray,
                         labels: list[str]) -> Any:
    """A partition rule written over the declared values, as groups of released values."""
    if rule == "as_is" or isinstance(rule, AsIs):
        return rule
    where = f"partition.{var}"
    pmap, plabels = recode_classes(var, source, rule, where=where)
    groups: dict[str, list[Any]] = {p: [] for p in plabels}
    values = released_values(source, source.recode, code_map, labels, var)
    for g, (lab, value) in enumerate(zip(labels, values, strict=True)):
        parts = np.unique(pmap[code_map == g])
        if parts.size > 1:
            raise ConfigError(
                f"{where}: the released value {lab!r} of {var} (key_variables.{var}.recode) "
                f"spans the partition sets {[plabels[p] for p in parts[:3]]}; a partition must "
                f"be as coarse as the recoding: write 'partition.{var}: as_is' (partition on the "
                "released values) or a coarser rule")
        groups[plabels[int(parts[0])]].append(value)
    groups = {p: m for p, m in groups.items() if m}
    if any(isinstance(v, float) for m in groups.values() for v in m):  # midpoints (12.5)
        return Groups.model_construct(groups=groups)
    return Groups(groups=groups)


def apply_recodings(cfg: ReleaseConfig) -> ReleaseConfig:
    """Rewrite ``cfg`` in place so that its key variables are the released (recoded) domains
    (see the module docstring). A config without ``recode:`` is returned unchanged.

    Raises :class:`ConfigError` naming the key and the fix (a band edge above a value, a group
    member that is not declared, a partition finer than the recoding).
    """
    recoded = {k: kv for k, kv in cfg.key_variables.items() if kv.recode is not None}
    if not recoded:
        return cfg
    if cfg.risk.merge_along is None and cfg.partition:
        rank = {Bands: 0, Hierarchy: 1, Groups: 2, AsIs: 3, str: 3}
        items = list(cfg.partition.items())
        cfg.risk.merge_along = [v for v, r in sorted(items, key=lambda vr: rank.get(type(vr[1]), 3))]
        cfg._user_merge_along = False
    for var, kv in recoded.items():
        code_map, labels = released_classes(var, kv, kv.recode)
        released = _released_key(kv, kv.recode, code_map, labels)
        if kv.missing == "category":
            code_map = np.append(code_map, len(labels))
        if var in cfg.partition:
            cfg._user_partition[var] = cfg.partition[var]
            cfg.partition[var] = _translate_partition(var, kv, cfg.partition[var],
                                                      code_map[:len(kv.domain)], labels)
        cfg._source_keys[var] = kv
        cfg._recode_maps[var] = (code_map, released.size)
        cfg.key_variables[var] = released
    return cfg


def user_data(cfg: ReleaseConfig) -> dict[str, Any]:
    """The config as the user wrote it (recoded keys and their partition rules as declared),
    as plain data: what ``sdc audit`` re-parses when the config was not loaded from a file."""
    data = cfg.model_dump(mode="python", exclude_none=True)
    for var, kv in cfg._source_keys.items():
        data["key_variables"][var] = kv.model_dump(mode="python", exclude_none=True)
    for var, rule in cfg._user_partition.items():
        data["partition"][var] = (rule if isinstance(rule, str)
                                  else rule.model_dump(mode="python", exclude_none=True))
    if not cfg._user_merge_along:
        data["risk"].pop("merge_along", None)
    return data
