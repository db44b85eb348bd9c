"""What every section of the release config shares: the strict base model (unknown keys and wrong
types refused), the category type of key values, the config's error type."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StrictInt,
    StrictStr,
)

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_KEY_VALUES", "NUMBER_TEXT", "Category", "ConfigError",
           "StrictModel", "int_text"]


def _strict_category(v: Any) -> Any:
    # YAML `true`/`false` or 1.5 must not silently become the category 1 or 0
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise ValueError(f"a category must be an integer or a string, not a {type(v).__name__}; "
                         "quote it in the YAML to make it a string")
    return v


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_KEY_VALUES = 10_000_000
"""The most values one key variable may declare (a range is sized before anything is
allocated)."""


#: a text an integer column reader would take for a number ("01", "+3", " 7")
NUMBER_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


def int_text(c: str) -> int | None:
    """The integer a category text writes exactly as Python writes it (``"1"``, ``"-3"``;
    not ``"01"``), else None."""
    try:
        v = int(c)
    except ValueError:
        return None
    return v if str(v) == c else None


Category = Annotated[StrictInt | StrictStr, BeforeValidator(_strict_category)]


class ConfigError(ValueError):
    """A release config that cannot be used. The message names the key and the fix."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=True)
