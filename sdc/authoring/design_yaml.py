"""Edits of a config's YAML text that keep every line not edited (comments, layout, flow-style
lists): lines located with ruamel.yaml's round-trip loader (``.lc``), new values dumped one line
per flow collection (``sdc design`` writes a node's config with them)."""

from __future__ import annotations

import io
import re
from typing import Any

__all__ = ["ConfigPatch", "as_plain", "quote_ambiguous", "body_end", "dump_lines", "entry_end", "flow_style",
           "flow_text", "flow_valued", "indent_of", "replace_value", "set_entry", "wrap_flow"]


def flow_style(o: Any) -> Any:
    """``o`` as ruamel nodes in flow style (``{bands: [18, 20, 25]}``, one line)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(o, dict):
        m = CommentedMap((k, flow_style(v)) for k, v in o.items())
        m.fa.set_flow_style()
        return m
    if isinstance(o, list | tuple):
        seq = CommentedSeq(flow_style(v) for v in o)
        seq.fa.set_flow_style()
        return seq
    return o


def _reads_otherwise(s: str) -> bool:
    """True when ``s`` written plain would not be read back as this string by the config
    loader (PyYAML's YAML 1.1 resolver: yes/no/on/off are booleans, 2026-01-05 a date,
    1_000 and 1:20 numbers, ~ null) or by a YAML 1.2 reader."""
    import yaml

    try:
        return yaml.safe_load(s) != s
    except yaml.YAMLError:
        return True


def quote_ambiguous(o: Any) -> Any:
    """``o`` with every string value that YAML would read as another type (a boolean, a
    date, a number, null) made a single-quoted scalar, so that the config loader reads back
    the category ``'no'``, not ``False`` (issue 44). Mappings and lists are changed in place
    (ruamel round-trip nodes keep their comments and flow style) and returned; a string
    returns its quoted form. Mapping keys are left alone (config keys are names)."""
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    if isinstance(o, dict):
        for k in list(o.keys()):
            o[k] = quote_ambiguous(o[k])
        return o
    if isinstance(o, list):
        for i, v in enumerate(o):
            o[i] = quote_ambiguous(v)
        return o
    if isinstance(o, str) and not isinstance(o, SingleQuotedScalarString) \
            and _reads_otherwise(o):
        return SingleQuotedScalarString(o)
    return o


def as_plain(o: Any) -> Any:
    """ruamel's round-trip nodes as plain dicts and lists (for comparing rules)."""
    if isinstance(o, dict):
        return {str(k): as_plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [as_plain(v) for v in o]
    if isinstance(o, bool) or o is None:
        return o
    if isinstance(o, int):
        return int(o)
    if isinstance(o, float):
        return int(o) if o.is_integer() else float(o)
    return str(o) if not isinstance(o, str) else str(o)


def dump_lines(o: dict[str, Any], indent: int = 0) -> list[str]:
    """``o`` as YAML lines (ruamel, one line per flow collection), indented by ``indent``."""
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    o = quote_ambiguous(o)
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    y.dump(o, buf)
    pad = " " * indent
    out: list[str] = []
    for line in buf.getvalue().splitlines(True):
        out += wrap_flow(pad + line if line.strip() else line)
    return out


def wrap_flow(line: str, width: int = 96) -> list[str]:
    """A long ``key: {bands: [0, 2, 4, ...]}`` line broken after commas, the continuation
    lines aligned after the opening bracket (valid YAML: flow collections may span lines)."""
    if len(line.rstrip("\n")) <= width or "[" not in line:
        return [line]
    col = line.index("[") + 1
    parts = line.rstrip("\n").split(", ")
    out, cur = [], parts[0]
    for piece in parts[1:]:
        if len(cur) + 2 + len(piece) > width:
            out.append(cur + ",\n")
            cur = " " * col + piece
        else:
            cur += ", " + piece
    out.append(cur + "\n")
    return out


def indent_of(line: str) -> int:
    """The number of spaces ``line`` starts with."""
    return len(line) - len(line.lstrip(" "))


def entry_end(lines: list[str], i: int) -> int:
    """The end (exclusive) of the entry starting at line ``i``: the lines after it indented
    deeper (its value's continuation, its comments), up to a blank or shallower line."""
    ind = indent_of(lines[i])
    j = i + 1
    while j < len(lines) and lines[j].strip() and indent_of(lines[j]) > ind:
        j += 1
    return j


def flow_valued(line: str) -> bool:
    """Whether a ``key: value`` line holds its value in flow style on the line."""
    rest = line.split(":", 1)[1].split(" #", 1)[0].strip() if ":" in line else ""
    return rest.startswith(("{", "["))


class ConfigPatch:
    """Edits of the input config's text at lines located by ruamel (``.lc``): every line not
    edited is kept byte for byte (comments, layout, flow lists); edits are applied bottom up."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
        self.edits: list[tuple[int, int, list[str]]] = []

    def replace(self, start: int, end: int, new: list[str]) -> None:
        self.edits.append((start, end, new))

    def text(self) -> str:
        lines = list(self.lines)
        # bottom up; insertions at one place in the order they were made
        order = sorted(range(len(self.edits)),
                       key=lambda i: (self.edits[i][0], self.edits[i][1], i), reverse=True)
        for i in order:
            start, end, new = self.edits[i]
            lines[start:end] = new
        return "".join(lines)


def set_entry(patch: ConfigPatch, parent: Any, key: str, value: Any, indent: int,
               last_line: int) -> None:
    """Set ``key`` of the block mapping ``parent`` (entries at ``indent``) to ``value`` (None:
    remove it): its own lines replaced, or a new line after ``last_line``."""
    new = [] if value is None else dump_lines({key: flow_style(value) if not isinstance(value, str)
                                          else value}, indent)
    if key in parent:
        i = parent.lc.key(key)[0]
        patch.replace(i, entry_end(patch.lines, i), new)
    elif new:
        patch.replace(last_line + 1, last_line + 1, new)


def body_end(patch: ConfigPatch, i: int) -> int:
    """The last line of the block entry starting at line ``i`` that is not a comment."""
    j = entry_end(patch.lines, i) - 1
    while j > i and patch.lines[j].lstrip().startswith("#"):
        j -= 1
    return j


def replace_value(patch: ConfigPatch, start: int, end: int, old: str, new: str) -> None:
    """Replace the scalar text ``old`` by ``new`` in lines start..end (its first occurrence as
    a whole value: after ``:``, a quote, a bracket, a comma or a space and before the value's
    end; never inside a key or another word: ``dir: out`` below ``output:``)."""
    token = re.compile(r"(?<=[\s:'\"\[{,])" + re.escape(old) + r"(?=[\s'\",}\]#]|$)")
    for i in range(start, end):
        line = patch.lines[i]
        m = token.search(line)
        if m:
            patch.replace(i, i + 1, [line[:m.start()] + new + line[m.end():]])
            return


def flow_text(rule: Any) -> str:
    """A rule as one line of flow-style text (``{bands: [18, 25]}``), for messages."""
    if isinstance(rule, dict):
        return "{" + ", ".join(f"{k}: {flow_text(v)}" for k, v in rule.items()) + "}"
    if isinstance(rule, list):
        return "[" + ", ".join(flow_text(v) for v in rule) + "]"
    return str(rule)
