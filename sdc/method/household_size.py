"""Household keys the file itself determines: the number of members (issue 44).

A household-level key whose value is every household's member count (household size, or
household size top-coded: ``min(size, top)``) is **not** a free key: a household released with
another value of it has a household size that disagrees with the number of its released
members, which is wrong data and shows which households moved. Such a key must never be moved
to another value. It is detected from the data (the count pass's household aggregate: key
codes and member counts), never from its name, and the household stages refuse (exit 2,
:class:`~sdc.errors.SmallBlockError`) a plan that would move it:

- the household stage (no ``protect``): a PRB whose cells hold two values of the key (its
  partition groups the values, or small PRBs were merged along it);
- ``risk.composition: protect``: PRBs never mix sizes (the partition is by household size), but
  households of a *singular* size draw their household keys among all of the file's
  household-key combinations, which moves the key.

The messages name the key, the values, the number of households and the fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from sdc.errors import SmallBlockError

__all__ = ["SizeKeyError", "refuse_moved_size_keys", "size_key_small_block", "refuse_singular_size_keys", "size_keys"]


class SizeKeyError(SmallBlockError):
    """A household stage would move a household key that is the member count (exit 2)."""


def _numbers(domain: Sequence[Any]) -> np.ndarray | None:
    try:
        vals = np.asarray([float(v) for v in domain], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return vals if np.isfinite(vals).all() else None


def size_keys(key_codes: np.ndarray, size: np.ndarray, names: Sequence[str],
              config: Any) -> dict[str, np.ndarray]:
    """The household keys (``names``, columns of ``key_codes`` (H, p)) whose value is every
    household's member count ``size`` (H,), possibly top-coded (the largest value observed
    standing for it and every larger size): name -> the numeric value of every code. Keys with
    one value only are left out (nothing can move them)."""
    codes = np.asarray(key_codes, np.int64).reshape(np.asarray(size).size, -1)
    size = np.asarray(size, np.float64)
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(names):
        vals = _numbers(config.key_variables[name].domain)
        if vals is None or size.size == 0:
            continue
        v = vals[codes[:, j]]
        top = float(v.max())
        if np.unique(v).size > 1 and bool(((v == size) | ((v == top) & (size >= top))).all()):
            out[name] = vals
    return out


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def refuse_moved_size_keys(plan: Any, households: np.ndarray, names: Sequence[str],
                           found: dict[str, np.ndarray]) -> None:
    """Raise :class:`SizeKeyError` when a PRB of the household stage's ``plan`` (cells
    counted in households, ``households`` (n_cells,) their counts, key columns ``names``)
    holds two values of a key of ``found`` (:func:`size_keys`)."""
    cells = plan.partitioned.cells
    prb = np.asarray(plan.cell_prb, np.int64)
    t = np.asarray(households, np.int64)
    for name, vals in found.items():
        j = list(names).index(name)
        v = vals[np.asarray(cells.key_codes, np.int64)[:, j]]
        for b in np.unique(prb[prb >= 0]):
            inb = prb == b
            u = np.unique(v[inb])
            if u.size > 1:
                raise SizeKeyError(
                    f"household key {name} is every household's number of members (detected "
                    f"from the data), and a post-randomization block of the household stage "
                    f"mixes its values {', '.join(_fmt(x) for x in u)} ({int(t[inb].sum()):,} "
                    f"households): they would be released with a {name} that disagrees with "
                    f"their members. Partition it by its own values and do not merge along it "
                    f"(partition: {{{name}: as_is}}, risk.merge_along without {name}), or "
                    f"top-code it (key_variables.{name}.recode: {{top: {_fmt(u[0])}}})")


def refuse_singular_size_keys(singular_sizes: Sequence[int], singular_codes: np.ndarray,
                              names: Sequence[str], n_hk: int, found: dict[str, np.ndarray],
                              small_blocks: str) -> None:
    """Raise :class:`SizeKeyError` under ``risk.composition: protect`` when households of
    a singular size (``singular_codes`` (m, p): their household-key codes, columns ``names``)
    would draw their household keys among the ``n_hk`` combinations of the file while a key of
    ``found`` (:func:`size_keys`) is their member count: the draw would move it."""
    codes = np.asarray(singular_codes, np.int64).reshape(-1, len(names))
    if not found or not codes.shape[0]:
        return
    name, vals = next(iter(found.items()))
    held = np.unique(vals[codes[:, list(names).index(name)]])
    calib = "" if small_blocks == "calibrate" else ", or risk.small_blocks: calibrate"
    raise SizeKeyError(
        f"household key {name} is every household's number of members (detected from the "
        f"data); the {codes.shape[0]:,} household(s) of size {list(singular_sizes)} ({name} = "
        f"{', '.join(_fmt(x) for x in held)}) have too few rare compositions for a PRB of "
        f"their size and would draw their household keys among all {n_hk} combinations of "
        f"the file, so they would be released with a {name} that disagrees with their "
        f"members. Under risk.composition: protect every household keeps its members: remove "
        f"{name} from key_variables and list it in input.household_columns (released "
        f"unchanged, always the member count), or make the person keys finer (more rare "
        f"compositions of that size){calib}")


def size_key_small_block(e: SmallBlockError, key_codes: np.ndarray, names: Sequence[str],
                         found: dict[str, np.ndarray]) -> SmallBlockError:
    """The household stage's small-block refusal ``e`` when a key of ``found``
    (:func:`size_keys`) is among the blocks it names: the fix is not a coarser partition or a
    merge along the key (that would move households to another member count) but a top code
    of the key, named with the values and their households."""
    codes = np.asarray(key_codes, np.int64).reshape(-1, len(names))
    for name, vals in found.items():
        named = sorted({float(x) for x in re.findall(rf"\b{re.escape(name)}=([0-9.]+)", str(e))})
        if not named:
            continue
        held = vals[codes[:, list(names).index(name)]]
        n = int(np.isin(held, named).sum())
        lower = np.unique(held[held < named[0]])
        fix = (f"top-code it (key_variables.{name}.recode: {{top: {_fmt(lower[-1])}}})"
               if lower.size > 1 else f"withhold {name} from the keys")
        return SizeKeyError(
            f"{e}. Household key {name} is every household's number of members (detected from "
            f"the data): blocks are never merged across its values, which would release "
            f"households with a {name} that disagrees with their members; its value(s) "
            f"{', '.join(_fmt(x) for x in named)} ({n:,} households) cannot be protected "
            f"within their value: {fix}")
    return e
