"""Generalization of key variables for partitioning (docs/METHOD.md section 2).

A generalization maps every declared category of a key variable (and the ``missing``
category, if declared) to a generalized value: an age band, a race group, a level of an ARX
hierarchy. It is computed once per *domain value*, never per record: the engine applies it to
cell key codes with one gather.

ARX hierarchy files are read as they are: one row per value, ``value;level1;level2;...;*``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdc.config.model import AsIs, Bands, ConfigError, Groups, Hierarchy, KeyVariable

__all__ = ["Generalization", "generalize_domain"]

MISSING_LABEL = "<missing>"


@dataclass(frozen=True)
class Generalization:
    """``code_map[c]`` is the generalized code of domain code ``c``; ``labels[g]`` names code g.

    Generalized codes are in the rule's natural order (bands ascending, groups and hierarchy
    values in the order declared), which is also the order neighbours are merged in.
    """

    variable: str
    code_map: np.ndarray
    labels: list[str]


def _fmt_edge(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _band_labels(edges: list[float], integer_domain: bool) -> list[str]:
    labels = []
    for i, lo in enumerate(edges):
        if i + 1 < len(edges):
            hi = edges[i + 1]
            if integer_domain and float(lo).is_integer() and float(hi).is_integer():
                labels.append(f"{_fmt_edge(lo)}-{_fmt_edge(hi - 1)}")
            else:
                labels.append(f"[{_fmt_edge(lo)}, {_fmt_edge(hi)})")
        else:
            labels.append(f"{_fmt_edge(lo)}+")
    return labels


def generalize_domain(variable: str, kv: KeyVariable, rule: object) -> Generalization:
    """Generalization of every domain code of ``variable`` under a partition ``rule``.

    The ``missing`` category (when declared) always forms its own generalized value.
    Raises :class:`~sdc.config.ConfigError` when a declared value has no generalized value.
    """
    ints = kv.range_values()  # a range's integers: bands need no list of them
    domain = kv.domain if ints is None or not isinstance(rule, Bands) else None
    n = kv.size - (kv.missing == "category")
    where = f"partition.{variable}"
    if rule == "as_is" or isinstance(rule, AsIs):
        code_map = np.arange(n, dtype=np.int64)
        labels = [kv.labels.get(c, str(c)) for c in domain]
    elif isinstance(rule, Bands):
        vals = np.asarray(domain, dtype=float) if ints is None else ints.astype(float)
        edges = np.asarray(rule.bands, dtype=float)
        code_map = np.searchsorted(edges, vals, side="right").astype(np.int64) - 1
        below = vals[code_map < 0]
        if below.size:
            raise ConfigError(
                f"{where}.bands: {variable} value {_fmt_edge(below[0])} (and {below.size - 1} "
                f"more) is below the first band edge {_fmt_edge(edges[0])}; lower the first edge"
            )
        integer_domain = bool(np.all(np.mod(vals, 1) == 0))
        labels = _band_labels(list(rule.bands), integer_domain)
    elif isinstance(rule, Groups):
        pos = {c: i for i, c in enumerate(domain)}
        code_map = np.full(n, -1, dtype=np.int64)
        for g, members in enumerate(rule.groups.values()):
            for m in members:
                code_map[pos[m]] = g
        labels = list(rule.groups)
    elif isinstance(rule, Hierarchy):
        table = rule.table
        if table is None:
            raise ConfigError(f"{where}: hierarchy {str(rule.hierarchy)!r} was not loaded; "
                              "build the config with sdc.load_config or sdc.parse_config")
        width = len(table[0])
        if rule.level >= width:
            raise ConfigError(
                f"{where}.level: level {rule.level} does not exist in {str(rule.hierarchy)!r}, "
                f"which has levels 0..{width - 1}; choose one of those"
            )
        by_value = {row[0]: row[rule.level] for row in table}
        missing = [c for c in domain if str(c) not in by_value]
        if missing:
            raise ConfigError(
                f"{where}: {len(missing)} declared value(s) of {variable} are not in hierarchy "
                f"file {str(rule.hierarchy)!r}, e.g. {missing[:5]}; add a row for each"
            )
        labels = list(dict.fromkeys(row[rule.level] for row in table
                                    if row[0] in {str(c) for c in domain}))
        index = {lab: i for i, lab in enumerate(labels)}
        code_map = np.array([index[by_value[str(c)]] for c in domain], dtype=np.int64)
    else:  # pragma: no cover - the config model admits nothing else
        raise ConfigError(f"{where}: unknown partition rule {rule!r}")
    if kv.missing == "category":
        code_map = np.append(code_map, len(labels))
        labels = [*labels, MISSING_LABEL]
    # drop generalized values no declared category reaches (e.g. empty bands), keep order
    used = np.unique(code_map)
    if used.size != len(labels):
        remap = np.full(len(labels), -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        code_map = remap[code_map]
        labels = [labels[i] for i in used]
    return Generalization(variable, code_map, labels)
