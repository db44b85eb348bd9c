"""Text from configs and data made inert in the public Markdown files (``codebook.md``).

Variable names, value and variable labels, categories, group names and hierarchy labels come
from the agency's config and files, and from the input's column names: none of them may bring
HTML or Markdown into a public file (``<script>alert(1)</script>`` as a value label ran when
the codebook was rendered; ``![](https://tracker/x.png)`` would load an image). Every such text
goes through :func:`md_text` (escaped plain text) or :func:`md_code` (a code span when that is
safe). Plain words, numbers and spaces come out unchanged, so codebooks without markup are
byte-identical to the earlier ones.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md_code", "md_text"]

# "_" only where it could open or close emphasis (intra-word "_" is text in CommonMark)
_PUNCT = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_LINE_BREAK = re.compile(r"\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]")
_CODE_UNSAFE = re.compile(r"[`|<>\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# control characters other than the tab and the line breaks above
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
# "&lt;" would render as "<": an "&" that starts a character reference becomes "&amp;";
# "A & B" and "Trinadad&Tobago" are text and stay as they are
_ENTITY_START = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _control_picture(m: re.Match[str]) -> str:
    c = ord(m.group())
    return chr(0x2400 + c) if c < 0x20 else "\u2421" if c == 0x7F else "\ufffd"


def md_text(value: Any) -> str:
    """``value`` as Markdown that renders as exactly its text: line breaks become spaces,
    other control characters their visible picture (ESC -> U+241B, NUL -> U+2400; C1 ->
    U+FFFD: a terminal showing the codebook obeys none), Markdown punctuation
    (\\ ` * [ ] | ~, and ``_`` at a word boundary) is backslash-escaped, ``< >`` and an ``&``
    that starts a character reference become HTML entities, so no tag, entity, link, image,
    emphasis or table cell break survives."""
    text = _LINE_BREAK.sub(" ", str(value))
    text = _CONTROL.sub(_control_picture, text)
    text = _PUNCT.sub(r"\\\1", text)
    text = _ENTITY_START.sub("&amp;", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def md_code(value: Any) -> str:
    """``value`` as an inline code span (a variable name, a category), or as :func:`md_text`
    when it holds a backtick, ``|``, ``< >``, a line break or another control character (a
    backtick would end the span and let the rest through as Markdown; a pipe would split a
    table cell; inside a span ``&`` is literal)."""
    text = str(value)
    if _CODE_UNSAFE.search(text):
        return md_text(text)
    return f"`{text}`"
