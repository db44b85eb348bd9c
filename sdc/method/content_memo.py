"""Figures remembered by the content of a transition design, for the process.

A design search plans many candidates whose blocks (and weight groups) are the same cells, and
each calibration asks the same thetas again: ses's ``sdc init`` computed 31,844 near
certificates of 259 distinct designs, eusilc's weighted fits 4,770 calibrations of 1,291
distinct groups. The certificate and the calibrations are pure functions of the arrays keyed
here, so a remembered figure is the same float. :mod:`sdc.method.destinations` (the near
certificate, the calibrated theta) and :mod:`sdc.method.weighted` (a weight group's c) use it;
``sdc audit`` in its own process starts from an empty memo, and its near certificate calls
:func:`sdc.method.transition_risk.design_risk` itself (sdc.audit.block_checks); an audit in
the releasing process may take a weighted fit or a theta from the memo (the same floats).
The composition stage's PRB plan (:func:`memo_plan`, by its cells, x_h, config and design) and
the exact composition-level risks (:data:`LEVEL_RISKS`) are remembered too: a household design
search plans a candidate in its count pass, for its figures and when it releases it in memory
(eusilc's ``sdc init``). A test that changes a planning rule by monkeypatch gives these memos
fresh instances.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from sdc.method.transition import Transition

__all__ = ["COMPOSITION_PLANS", "LEVEL_RISKS", "WEIGHT_FITS", "ContentMemo", "array_key", "design_key",
           "fit_key", "memo_plan"]


def array_key(*arrays: np.ndarray | None) -> bytes:
    """SHA-256 of the arrays' dtypes, shapes and bytes (None counted as such)."""
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"-")
        else:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    return h.digest()


def design_key(tr: Transition) -> bytes:
    """The key of everything a certificate reads of ``tr``: t, m, W (CSR), the groups, theta
    and kind."""
    return array_key(tr.frequency, tr.move, tr.indptr, tr.indices, tr.weights, tr.group,
                     np.frombuffer(repr((tr.theta, tr.kind)).encode(), dtype=np.uint8))


class ContentMemo:
    """A bounded, thread-safe LRU map: :meth:`get` computes a missing key's value once."""

    def __init__(self, maxsize: int = 65536) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``key``, ``compute()`` when it is not remembered."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = compute()
        with self._lock:
            self._items[key] = value
            if len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value


def fit_key(base: Transition, weights: np.ndarray, c0: float, xi: float) -> tuple:
    """The key of a weight group's fit (sdc.method.weighted ``_RunFit.fit``): its W (with
    m = 0), its cells' weight totals, the starting c and xi."""
    return design_key(base), array_key(weights), float(c0), float(xi)


#: a weight group's (c, certificate) by :func:`fit_key`
WEIGHT_FITS = ContentMemo()


PLAN_CELLS = 100_000
"""Largest cell table whose plan is remembered (a plan holds per-cell arrays: a large
table's are not kept)."""


#: the exact person-, household- and size-level risks of a composition plan's source cells
#: (sdc.method.household_person_risk ``_remembered_level_risk``)
LEVEL_RISKS = ContentMemo(maxsize=256)

#: the composition stage's PRB plan by its cells, x_h, config and design
#: (:func:`memo_plan`, sdc.method.household_composition ``composition_plan``)
COMPOSITION_PLANS = ContentMemo(maxsize=256)


def memo_plan(cells: Any, config: Any, weight_total: np.ndarray | None, design: Any,
              plan: Callable[[], Any]) -> Any:
    """``plan()``, the composition stage's PRB plan of ``cells`` (a CellTable) under
    ``config`` and ``design`` with the cells' weight totals, remembered by content for the
    process (:data:`COMPOSITION_PLANS`): a design search plans a candidate in its count pass
    (the dependence check of the per-PRB weights), again for its figures and again when it
    releases it in memory; households read in another order give the same cells. Callers
    read the plan and never write it."""
    if cells.n_cells > PLAN_CELLS:
        return plan()
    key = (array_key(cells.key_codes, cells.frequency, weight_total), repr(cells.names),
           repr(cells.derived), repr(config), repr(design))
    return COMPOSITION_PLANS.get(key, plan)
