"""A memo of the release's planning, for tests that plan the same case several times in one
process (tests/contract: the in-memory reference, each executor's release, the audit's
re-derivation, the library's release). Not used by tests/e2e: a release and its audit plan
twice there, and since the key-range and quartile work of Nov 27 the memo's pickling cost
as much as the census plans it saved.

Planning (:func:`sdc.method.designs.plan_release`, the one planning call of every design) is a
pure function of the counted cells and the method's part of the config, and it dominates the
CPU of the near-destination, calibrated and weighted cases (0.2-0.3 s per PRB; docs/TESTING.md).
The memo returns, for inputs identical to an earlier call's, an unpickled copy of that call's
result: the first plan of a case is computed, every later identical one is reused, and every
executor still counts, draws, writes and reports its own release (the contract compares those
bytes). The key is the SHA-256 of the pickled arguments, the config without the fields that
name the run (``executor``, ``output``, ``schedule``, ``review``, the config file's folder):
an executor whose count pass gave other cells than the reference's misses the memo and plans
for itself. ``sdc/method`` reads none of those fields
(tests/contract/test_plan_memo.py checks it), so a plan cannot depend on them.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: the planning functions memoized: (module, name)
PLANNERS = (("sdc.method.designs.registry", "plan_release"),)
#: the config fields that name the run, not the method (left out of the key)
RUN_FIELDS = ("executor", "output", "schedule", "review")
#: at most this many plans, and this many bytes of pickled plans, kept (least recently used
#: dropped first; a contract case's plans are a few hundred kB)
LIMIT = 64
LIMIT_BYTES = 256 << 20

_MEMO: OrderedDict[bytes, bytes] = OrderedDict()
#: hits, misses and calls whose arguments or result could not be pickled (never memoized)
STATS = {"hit": 0, "miss": 0, "unkeyed": 0}


def _keyed(value: Any) -> Any:
    """``value`` as it enters the key: a release config without its run fields."""
    from sdc.config.model import ReleaseConfig

    if isinstance(value, ReleaseConfig):
        c = value.model_copy(update=dict.fromkeys(RUN_FIELDS))
        c._base_dir, c._source_path = Path("/"), None
        return c
    return value


def memoized(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with the memo: an identical call returns a copy of the first call's result (the
    first call a copy too)."""

    @functools.wraps(fn)
    def planner(*args: Any, **kwargs: Any) -> Any:
        try:
            key = hashlib.sha256(pickle.dumps(
                (fn.__module__, fn.__qualname__, [_keyed(a) for a in args],
                 {k: _keyed(v) for k, v in sorted(kwargs.items())}), protocol=5)).digest()
        except Exception:  # noqa: BLE001 - an argument that does not pickle: no memo
            STATS["unkeyed"] += 1
            return fn(*args, **kwargs)
        if key in _MEMO:
            STATS["hit"] += 1
            _MEMO.move_to_end(key)
            return pickle.loads(_MEMO[key])
        out = fn(*args, **kwargs)  # raises as before: a refusal is not memoized
        try:
            blob = pickle.dumps(out, protocol=5)
        except Exception:  # noqa: BLE001
            STATS["unkeyed"] += 1
            return out
        STATS["miss"] += 1
        _MEMO[key] = blob
        while len(_MEMO) > LIMIT or sum(map(len, _MEMO.values())) > LIMIT_BYTES:
            _MEMO.popitem(last=False)
        # the first caller gets a copy too: a plan pickles to other bytes than its unpickled
        # copy, so a later call that takes the plan would miss after a hit
        return pickle.loads(blob)

    planner.__wrapped_planner__ = fn  # type: ignore[attr-defined]
    return planner


def _install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace every module-level name bound to a planner (``from ... import plan_release``
    binds it in the importing module) by its memoized form."""
    import importlib

    originals = {}
    for module, name in PLANNERS:
        fn = getattr(importlib.import_module(module), name)
        fn = getattr(fn, "__wrapped_planner__", fn)
        originals[id(fn)] = memoized(fn)
    for mod_name, mod in list(sys.modules.items()):
        if not (mod_name == "sdc" or mod_name.startswith("sdc.")) or mod is None:
            continue
        for attr, value in list(vars(mod).items()):
            if id(value) in originals and callable(value):
                monkeypatch.setattr(mod, attr, originals[id(value)])


@pytest.fixture(autouse=True)
def plan_memo(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """The memo on for one test (autouse where a conftest imports this fixture)."""
    import sdc.audit.block_checks  # noqa: F401 - bind every planner before patching
    import sdc.method.household_batches  # noqa: F401
    import sdc.method.household_persons  # noqa: F401
    import sdc.pipeline.kernels  # noqa: F401

    _install(monkeypatch)
    yield STATS
