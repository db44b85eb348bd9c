"""``risk.exposed_sizes`` of a household file (:mod:`sdc.method.household_exposed`,
docs/HOUSEHOLDS.md "Exposed sizes"): ``drop`` leaves the households of the exposed sizes out
before the count pass, so every pass, certificate and figure sees the released households
only; ``refuse`` (the default) stops a release that has them, after the count pass (the
household table holds every size: no extra read).

:func:`without_exposed` reads the household id column once (the members per household) and,
when there are households to leave out, their rows once more (row numbers, household keys,
weight); it returns the runner wrapped in :class:`LeftOutRunner`, which hands every pass its
batches without those rows, renumbered as if the file never held them (rows keep their
order: the same files on every executor)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.method.cells import encode_key
from sdc.method.designs.households import household_design_of
from sdc.method.household_batches import household_identity
from sdc.method.household_exposed import (
    LeftOut,
    applies,
    exposed_of,
    exposed_refusal,
    size_cap,
)

__all__ = ["LeftOutRunner", "refuse_exposed", "without_exposed"]


def refuse_exposed(size: np.ndarray, config: ReleaseConfig) -> None:
    """Raise :class:`InputError` (exit 2) when the households whose member counts are
    ``size`` hold an exposed size and the rule applies (``risk.exposed_sizes: refuse``; after
    ``drop`` there is none left)."""
    if not applies(config):
        return
    xi = float(config.risk.xi)
    exposed = exposed_of(size, xi, size_cap(config))
    if exposed:
        raise InputError(exposed_refusal(exposed, xi, str(config.input.household_id)))


def without_exposed(runner: Any, config: ReleaseConfig) -> Any:
    """``runner`` with the exposed households left out (:class:`LeftOutRunner`) under
    ``risk.exposed_sizes: drop``; else ``runner`` itself."""
    if (household_design_of(config).exposed_sizes != "drop" or not applies(config)
            or isinstance(runner, LeftOutRunner)):
        return runner
    hid, w = str(config.input.household_id), config.input.weight
    ids, counts, total = [], [], 0.0
    for f in runner.frames(columns=[hid, *([w] if w else [])]):
        f = f[f[hid].notna()]
        u, c = np.unique(household_identity(f, config), return_counts=True)
        ids.append(u)
        counts.append(c)
        if w:
            total += float(pd.to_numeric(f[w], errors="coerce").sum())
    if not ids:
        return runner
    u, inv = np.unique(np.concatenate(ids), return_inverse=True)
    size = np.bincount(inv.reshape(-1), weights=np.concatenate(counts)).astype(np.int64)
    exposed = exposed_of(size, float(config.risk.xi), size_cap(config))
    if not exposed:
        return runner
    return LeftOutRunner(runner, config, _left_out(runner, config, u[np.isin(size, list(exposed))],
                                                   exposed, total if w else None))


def _left_out(runner: Any, config: ReleaseConfig, drop: np.ndarray, exposed: dict[int, int],
              total: float | None) -> LeftOut:
    """The left-out households' rows read once (their row numbers, household keys and
    weight)."""
    hid, w = str(config.input.household_id), config.input.weight
    keys = list(config.household_keys)
    kvs = config.key_variables
    cols = list(dict.fromkeys([hid, *keys, *([w] if w else [])]))
    rows, ident, codes, weight = [], [], [], []
    for f in runner.frames(columns=cols):
        f = f[f[hid].notna()]
        i = household_identity(f, config)
        m = np.isin(i, drop)
        if not m.any():
            continue
        g = f[m]
        rows.append(g.index.to_numpy(np.int64))
        ident.append(i[m])
        codes.append(np.column_stack([encode_key(g[k], k, kvs[k]) for k in keys]).astype(np.int64)
                     if keys else np.zeros((len(g), 0), np.int64))
        if w:
            weight.append(pd.to_numeric(g[w], errors="coerce").to_numpy(np.float64))
    r, i_all, c_all = np.concatenate(rows), np.concatenate(ident), np.concatenate(codes)
    u, first, inv = np.unique(i_all, return_index=True, return_inverse=True)
    w_all = np.concatenate(weight) if w else None
    return LeftOut(u, np.sort(r), c_all[first],
                   np.bincount(inv.reshape(-1), minlength=u.size).astype(np.int64),
                   None if w_all is None else w_all[first], dict(exposed), int(r.size),
                   None if w_all is None else float(np.nansum(w_all)), total)


def _kept(frame: pd.DataFrame, rows: np.ndarray, hid: str, columns: list[str] | None
          ) -> pd.DataFrame:
    """``frame`` without the left-out ``rows`` (global row numbers, sorted), renumbered as
    if the file never held them; ``columns``: what the caller asked for (the household id
    was read to filter: dropped again unless the runner gives every column anyway)."""
    idx = frame.index.to_numpy(np.int64)
    keep = ~np.isin(idx, rows)
    out = frame[keep]
    if columns is not None and hid not in columns and set(out.columns) <= {*columns, hid}:
        out = out.drop(columns=[hid])  # a runner that reads the columns asked: as it would
    kept = idx[keep]
    return out.set_axis(pd.Index(kept - np.searchsorted(rows, kept), dtype=np.int64), axis=0)


def _kept_batch(frame: pd.DataFrame, index: int, fn: Callable[..., Any], rows: np.ndarray,
                hid: str, columns: list[str] | None, *rest: Any) -> Any:
    """A pass's per-batch ``fn`` on the batch without the left-out rows."""
    return fn(_kept(frame, rows, hid, columns), index, *rest)


class LeftOutRunner:
    """A runner (:class:`sdc.pipeline.passes.Runner`) whose batches hold no member of the
    left-out households (``left_out``: :class:`~sdc.method.household_exposed.LeftOut`)."""

    def __init__(self, inner: Any, config: ReleaseConfig, left_out: LeftOut) -> None:
        self.inner, self.left_out = inner, left_out
        self._hid = str(config.input.household_id)
        for a in ("checked", "where", "scratch", "whole"):
            if hasattr(inner, a):
                setattr(self, a, getattr(inner, a))

    def _columns(self, columns: list[str] | None) -> list[str] | None:
        return columns if columns is None or self._hid in columns else [*columns, self._hid]

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None,
            columns: list[str] | None = None) -> Iterator[Any]:
        return self.inner.map(_kept_batch, (fn, self.left_out.rows, self._hid, columns,
                                            *shared), per_piece, self._columns(columns))

    def frames(self, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
        for f in self.inner.frames(self._columns(columns)):
            yield _kept(f, self.left_out.rows, self._hid, columns)

    def row_count(self) -> int | None:
        n = self.inner.row_count()
        return None if n is None else int(n) - self.left_out.persons

    def __getattr__(self, name: str) -> Any:  # the file's facts: schema, columns, ranges
        return getattr(self.inner, name)
