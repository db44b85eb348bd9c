"""Loading a release config: YAML, paths relative to the config file, hierarchy files.

The model (:mod:`sdc.config.model`) is pure validation; this module is the only part of the config
layer that touches the file system.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sdc.config.model import ConfigError, Hierarchy, ReleaseConfig
from sdc.config.recode import apply_recodings

__all__ = ["format_validation_error", "load_config", "parse_config", "read_hierarchy"]


def read_hierarchy(path: Path, delimiter: str = ";", *, where: str = "hierarchy") -> list[list[str]]:
    """Read an ARX hierarchy CSV into rows of strings, checking it is rectangular and complete.

    Raises :class:`~sdc.config.ConfigError` naming the file, the line and the fix.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{where}: hierarchy file {str(p)!r} does not exist (check the path; "
                          "it is relative to the config file)")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: hierarchy file {str(p)!r} is not UTF-8 ({e.reason})") from None
    rows: list[list[str]] = []
    width = None
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(delimiter)]
        if width is None:
            width = len(cells)
        if len(cells) != width:
            raise ConfigError(
                f"{where}: hierarchy file {str(p)!r} line {lineno} has {len(cells)} levels but "
                f"line 1 has {width}; every row must list the value and the same number of levels"
            )
        if any(c == "" for c in cells):
            raise ConfigError(
                f"{where}: hierarchy file {str(p)!r} line {lineno} has an empty level "
                f"({line!r}); fill in every level"
            )
        if cells[0] in first_line:
            raise ConfigError(
                f"{where}: hierarchy file {str(p)!r} lists value {cells[0]!r} twice "
                f"(lines {first_line[cells[0]]} and {lineno}); keep one row per value"
            )
        first_line[cells[0]] = lineno
        rows.append(cells)
    if not rows:
        raise ConfigError(f"{where}: hierarchy file {str(p)!r} is empty")
    return rows


def format_validation_error(err: ValidationError, source: str = "config") -> str:
    """One readable paragraph per problem: dotted key path, what was wrong, what was given."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]
                       if not str(p).startswith(("function-", "tagged-", "rule:")))
        # pydantic adds the union member name to the path; keep the user's keys only
        loc = re.sub(r"\.(AsIs|Bands|Groups|Hierarchy|TopBottom|SeedFile|literal\[[^\]]*\]|int|str)\b", "", loc)
        msg = e["msg"].removeprefix("Value error, ")
        given = e.get("input")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see the README's config reference)"
        elif e["type"] == "missing":
            msg = "required key is missing"
        shown = "" if isinstance(given, dict) or given is None else f" (got {given!r})"
        if shown and (f"got xi = {given!r}" in msg or msg.endswith(f"got {given!r}")):
            shown = ""  # the message already shows the value (e.g. check_xi's "got xi = 39.5")
        lines.append(f"  {loc}: {msg}{shown}" if loc else f"  {msg}{shown}")
    uniq = list(dict.fromkeys(lines))
    return f"invalid {source}:\n" + "\n".join(uniq)


def parse_config(data: dict[str, Any], base_dir: Path | None = None, *,
                 source: str = "config", load_hierarchies: bool = True,
                 recode: bool = True) -> ReleaseConfig:
    """Build a :class:`ReleaseConfig` from a dict (as read from YAML).

    ``recode=False`` leaves ``key_variables.X.recode`` unapplied (the design search applies
    it itself, :func:`sdc.config.recode.apply_recodings`). Raises :class:`ConfigError` with
    every problem listed by its dotted key path.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {source}: the top level must be a mapping of keys, "
                          f"got {type(data).__name__}")
    try:
        cfg = ReleaseConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source)) from None
    cfg._base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
    if load_hierarchies:
        for var, rule in cfg.partition.items():
            if isinstance(rule, Hierarchy) and rule.table is None:
                rule.with_table(read_hierarchy(cfg.resolve(rule.hierarchy), rule.delimiter,
                                               where=f"partition.{var}.hierarchy"))
        for var, kv in cfg.key_variables.items():
            if isinstance(kv.recode, Hierarchy) and kv.recode.table is None:
                kv.recode.with_table(read_hierarchy(
                    cfg.resolve(kv.recode.hierarchy), kv.recode.delimiter,
                    where=f"key_variables.{var}.recode.hierarchy"))
    if recode and (load_hierarchies or not any(isinstance(kv.recode, Hierarchy)
                                               for kv in cfg.key_variables.values())):
        apply_recodings(cfg)
    return cfg


def load_config(path: str | Path) -> ReleaseConfig:
    """Read and validate a YAML release config; relative paths are relative to its folder.

    Raises :class:`ConfigError` (a ``ValueError``) naming the file, the key and the fix.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist (check the path)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(f"config file {str(p)!r} is empty")
    cfg = parse_config(data, p.resolve().parent, source=f"config {str(p)!r}")
    cfg._source_path = p.resolve()
    return cfg
