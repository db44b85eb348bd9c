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

__all__ = ["format_validation_error", "load_config", "load_yaml", "parse_config", "read_hierarchy"]

#: How many values aliases (``*name``, ``<<: *name``) may add to a config when expanded: a
#: config that reuses a list of categories a few times stays far below; an "alias bomb" (each
#: level repeating the one before) expands to billions of values and is refused before any of
#: them is built.
MAX_ALIAS_EXPANSION = 100_000
#: How deeply mappings and lists may nest (a release config needs about 5 levels).
MAX_NESTING = 100


class ConfigYAMLError(yaml.YAMLError):
    """A YAML document that parses but cannot be a release config: a key given twice in one
    mapping, aliases that expand too far, nesting too deep. ``message`` says which and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses what would make a config silently wrong or slow.

    - a key given twice in one mapping (YAML keeps the last one: ``xi: 0.395`` ... ``xi: 0.9``
      ran at 0.9; a second ``key_variables:`` replaced the first): refused with both lines;
    - aliases expanding to more than :data:`MAX_ALIAS_EXPANSION` values (an alias bomb), or an
      alias inside its own anchor: refused before anything is built (the check walks each
      distinct node once, so it takes time linear in the file);
    - nesting deeper than :data:`MAX_NESTING` (the composer recurses): refused;
    - a key that two mappings of one merge sequence give (``<<: [{xi: 0.9}, {xi: 0.5}]``):
      refused with both lines. The YAML merge spec lets the first win, PyYAML (what ``sdc``
      and most Python tools read with) the last: the release ran at 0.5 where the spec says
      0.9, and an auditor's tool may read the other. Nothing is guessed.
    Keys coming in through a merge (``<<: *base``) may be overridden by a key written in the
    mapping itself, as YAML defines (every implementation agrees on that).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        #: node id -> its keys (merged ones too) -> (line, value node)
        self._merged: dict[int, dict[Any, tuple[int, Any]]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                mark = self.peek_event().start_mark
                raise ConfigYAMLError(f"mappings and lists are nested more than {MAX_NESTING} "
                                      f"levels deep (line {mark.line + 1}); a release config "
                                      "needs a handful")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: Any) -> Any:
        self._check_graph(node)
        return super().construct_document(node)

    def _check_graph(self, root: Any) -> None:
        """Alias expansion, alias cycles and duplicate keys, one visit per distinct node."""
        size: dict[int, int] = {}          # expanded number of values under a node
        visiting: set[int] = set()
        path: dict[int, str] = {id(root): ""}
        dupes: list[tuple[int, int, Any, str]] = []
        merged: list[tuple[int, int, Any, str]] = []
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, finished = stack.pop()
            nid = id(node)
            kids = _children(node)
            if finished:
                visiting.discard(nid)
                size[nid] = 1 + sum(size[id(k)] for k in kids)
                continue
            if nid in size:
                continue
            if nid in visiting:
                raise ConfigYAMLError(f"an alias refers to the anchor it is inside (line "
                                      f"{node.start_mark.line + 1}): the value would be "
                                      "infinite; write it out")
            visiting.add(nid)
            stack.append((node, True))
            if isinstance(node, yaml.MappingNode):
                dupes += self._duplicates(node, path.get(nid, ""))
                merged += self._merge_overlaps(node, path.get(nid, ""))
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and id(v) not in path:
                        path[id(v)] = f"{path.get(nid, '')}.{k.value}".lstrip(".")
            stack += [(k, False) for k in reversed(kids) if id(k) not in size]
        distinct = len(size)
        if size[id(root)] - distinct > MAX_ALIAS_EXPANSION:
            raise ConfigYAMLError(
                f"its aliases (*name) expand to {size[id(root)]:,} values from {distinct:,} "
                f"written ones (more than {MAX_ALIAS_EXPANSION:,} added): this looks like an "
                "alias bomb. Write the values out, or reuse anchors a few times only")
        if dupes:
            first, second, key, where = min(dupes, key=lambda d: (d[1], d[0]))
            under = f" under {where!r}" if where else " at the top level"
            raise ConfigYAMLError(
                f"key {key!r} is given twice{under} (lines {first} and {second}); YAML would "
                "silently keep the last one. Remove or merge one of them")
        if merged:
            first, second, key, where = min(merged, key=lambda d: (d[1], d[0]))
            under = f" under {where!r}" if where else " at the top level"
            raise ConfigYAMLError(
                f"key {key!r} is given by two mappings of one merge (<<: [...]){under} (lines "
                f"{first} and {second}); YAML tools disagree which one wins (the YAML merge "
                "spec: the first; PyYAML: the last), so nothing is guessed. Give the key in one "
                "of them only, or write it in the mapping itself (a key written there overrides "
                "every merged one)")

    def _duplicates(self, node: Any, where: str) -> list[tuple[int, int, Any, str]]:
        seen: dict[Any, int] = {}
        out = []
        for k, _ in node.value:
            if not isinstance(k, yaml.ScalarNode) or k.tag in (
                    "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"):
                continue
            key = self.construct_object(k)
            line = k.start_mark.line + 1
            try:
                if key in seen:
                    out.append((seen[key], line, key, where))
                else:
                    seen[key] = line
            except TypeError:  # unhashable: the constructor reports it
                continue
        return out


    def _keys(self, node: Any) -> dict[Any, tuple[int, Any]]:
        """The keys of a mapping node -> their line, those it merges (``<<``) included; each
        node computed once (aliases share it)."""
        nid = id(node)
        if nid in self._merged:
            return self._merged[nid]
        self._merged[nid] = {}                 # an alias cycle stops here (refused elsewhere)
        keys: dict[Any, tuple[int, Any]] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                continue
            if k.tag == "tag:yaml.org,2002:merge":
                subs = v.value if isinstance(v, yaml.SequenceNode) else [v]
                for sub in subs:
                    if isinstance(sub, yaml.MappingNode):
                        for key, got in self._keys(sub).items():
                            keys.setdefault(key, got)
                continue
            try:
                keys[self.construct_object(k)] = (k.start_mark.line + 1, v)
            except TypeError:  # unhashable: the constructor reports it
                continue
        self._merged[nid] = keys
        return keys

    def _merge_overlaps(self, node: Any, where: str) -> list[tuple[int, int, Any, str]]:
        """Keys given by two mappings of one merge sequence (``<<: [*a, *b]``) of ``node``."""
        out: list[tuple[int, int, Any, str]] = []
        own = set()
        for k, _ in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                try:
                    own.add(self.construct_object(k))
                except TypeError:  # unhashable: the constructor reports it
                    continue
        for k, v in node.value:
            if not (isinstance(k, yaml.ScalarNode) and k.tag == "tag:yaml.org,2002:merge"
                    and isinstance(v, yaml.SequenceNode)):
                continue
            seen: dict[Any, tuple[int, Any]] = {}
            for sub in v.value:
                if not isinstance(sub, yaml.MappingNode):
                    continue                       # the constructor reports it
                for key, (line, value) in self._keys(sub).items():
                    if key in own:                 # written in the mapping itself: it wins
                        continue
                    if key not in seen:
                        seen[key] = (line, value)
                    elif not _same_value(seen[key][1], value):
                        out.append((seen[key][0], line, key, where))
        return out


def _same_value(a: Any, b: Any) -> bool:
    """The same node (one anchor merged twice) or the same scalar: no order can differ."""
    return a is b or (isinstance(a, yaml.ScalarNode) and isinstance(b, yaml.ScalarNode)
                      and (a.tag, a.value) == (b.tag, b.value))


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def load_yaml(text: str) -> Any:
    """Parse a config's YAML text with :class:`_StrictLoader` (safe tags only; duplicate keys,
    alias bombs and absurd nesting refused with :class:`ConfigYAMLError`)."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


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


#: control characters no label of the config may hold: C0 but the tab, DEL, C1, and the Unicode
#: line and paragraph separators
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _char_name(ch: str) -> str:
    names = {"\x00": "NUL", "\x1b": "ESC", "\n": "line feed", "\r": "carriage return",
             "\x07": "BEL", "\x7f": "DEL"}
    return f"U+{ord(ch):04X}" + (f" ({names[ch]})" if ch in names else "")


def control_characters(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every (dotted key path, text, first control character) of the config's labels holding
    a :data:`CONTROL_CHARACTERS` character: value labels (``labels``), variable labels
    (``label``, ``input.labels``) and group names (``groups`` of a partition rule or a
    recoding). Categories are data values: they may hold anything (the codebook shows their
    control characters as visible pictures, :func:`sdc.release.markdown.md_text`)."""
    texts: list[tuple[str, Any]] = []

    def group_names(rule: Any, where: str) -> None:
        if isinstance(rule, dict) and isinstance(rule.get("groups"), dict):
            texts.extend((f"{where}.groups", g) for g in rule["groups"])

    keys = data.get("key_variables")
    for var, kv in (keys.items() if isinstance(keys, dict) else ()):
        if not isinstance(kv, dict):
            continue
        texts.append((f"key_variables.{var}.label", kv.get("label")))
        if isinstance(kv.get("labels"), dict):
            texts.extend((f"key_variables.{var}.labels.{c}", t) for c, t in kv["labels"].items())
        group_names(kv.get("recode"), f"key_variables.{var}.recode")
    part = data.get("partition")
    for var, rule in (part.items() if isinstance(part, dict) else ()):
        group_names(rule, f"partition.{var}")
    inp = data.get("input")
    if isinstance(inp, dict) and isinstance(inp.get("labels"), dict):
        texts.extend((f"input.labels.{c}", t) for c, t in inp["labels"].items())
    found: dict[str, str | None] = {}   # each distinct text searched once: an anchor aliased
    out = []                            # 50,000 times is one search, not 50,000
    for where, t in texts:
        if not isinstance(t, str):
            continue
        if t not in found:
            m = CONTROL_CHARACTERS.search(t)
            found[t] = m.group() if m else None
        if found[t] is not None:
            out.append((where, t, found[t]))
    return out


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
            msg = "unknown key (check the spelling; see docs/CONFIG.md)"
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
    control = control_characters(data)
    if control:
        lines = [f"  {where}: {text!r} holds the control character {_char_name(ch)}"
                 for where, text, ch in control[:10]]
        raise ConfigError(
            f"invalid {source}:\n" + "\n".join(lines) + "\n  labels reach the public "
            "codebook and the SPSS/Stata labels (a NUL cuts a label short there, ESC and line "
            "breaks garble them): remove the control characters from the labels (a tab is allowed)")
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
        data = load_yaml(text)
    except ConfigYAMLError as e:
        raise ConfigError(f"config file {str(p)!r}: {e.message}") from None
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
