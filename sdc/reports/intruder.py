"""Monte Carlo intruder: replay the release's perturbation many times and attack every replica.

Replica i draws from its own stream ``stream(seed, "intruder:<i>")`` (never the release's) and
post-randomizes every PRB with the plan's own transition design (``plan.design``: NZY's uniform
design, or the near, weighted or any registered design's (m, W) per PRB, ``transitions``)
through the one replay kernel (:mod:`sdc.method.pram`); the exact pooled values of a design
are :mod:`sdc.reports.intruder_exact`'s. The intruder
of docs/METHOD.md section 6 picks one of the S_j = a released records of the target's cell (and,
knowing the mechanism, of another cell z of its PRB); the pick is integrated out
(Rao-Blackwellized: Y = 1{B kept its cell} / a), pooled per class (t, t_z, a) and compared with
the exact pooled value; the SE is the ratio-estimator SE over replicas. Sums are exact integer
counts per cell, so no figure depends on summation order. docs/REPORTS.md, "intruder".
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from sdc.method.draws import stream
from sdc.method.pram import (
    DesignKernel,
    post_randomize_design,
    post_randomize_prepared,
    prepare_design,
    prepare_records,
)
from sdc.method.transition import Transition, cell_design
from sdc.reports.intruder_exact import (
    Exact,
    exact_of_design,
    exact_other,
    exact_own,
    exact_s_distribution,
)

__all__ = ["A_MAX", "exact_s_distribution", "intruder", "plan_design", "simulate_intruder",
           "start_intruder"]

#: Largest S_j = a reported per class (larger a are pooled in the overall figures only).
A_MAX = 4


def plan_design(plan: Any, cell_prb: np.ndarray) -> dict[str, Any]:
    """The intruder's ``transitions`` and ``design`` of a plan (``transitions=None``: NZY's
    uniform design at the blocks' theta): the plan's own design when it materialises one
    (near, weighted, any registered design) over exactly the sensitive cells of ``cell_prb``."""
    trs = getattr(plan, "transitions", None)
    prb = np.asarray(cell_prb)
    if trs is None or len(trs) != int(prb.max(initial=-1)) + 1 \
            or sum(tr.k for tr in trs) != int((prb >= 0).sum()):
        return {"transitions": None, "design": None}
    return {"transitions": list(trs), "design": getattr(plan.design, "name", None)}


def _ratio(col_n: np.ndarray, col_c: np.ndarray, n_sim: int) -> dict[str, Any]:
    """Pooled ratio estimate sum(num) / sum(cnt) over replicas, its delta-method SE and n_eff."""
    n_obs = float(col_c.sum())
    if n_obs <= 0:
        return {"estimate": None, "se": None, "n_obs": 0, "n_eff": None}
    est = float(col_n.sum() / n_obs)
    resid = col_n - est * col_c
    se = float(np.sqrt((resid**2).sum() / (n_sim * (n_sim - 1))) / col_c.mean())
    return {"estimate": est, "se": se, "n_obs": int(round(n_obs)),
            "n_eff": float(n_obs**2 / (col_c**2).sum())}


class _Slots(NamedTuple):
    """One slot per target record of a sensitive cell, grouped by cell (records of a cell are
    exchangeable); sensitive cells ordered by (PRB, cell)."""

    n_sc: int                # sensitive cells
    t_sc: np.ndarray         # t_z of every sensitive cell
    t_max: int
    slot_sc: np.ndarray      # sensitive-cell index of every slot
    slot_t: np.ndarray       # t_j of every slot
    slot_local: np.ndarray   # the slot's cell inside its PRB
    slot_base: np.ndarray    # first sensitive cell of the slot's PRB
    kernel: Any              # prepare_records of the slots (the same every replica)
    pairs_t: np.ndarray      # (t_max + 1, n_sc): targets of frequency t outside cell z


class _Tally(NamedTuple):
    """Per replica (rows) and class (columns): sum of Y and number of targets, own-cell picks
    (num, cnt) and other-cell picks (num_o, cnt_o); total_y: sum of Y over all targets."""

    num: np.ndarray
    cnt: np.ndarray
    num_o: np.ndarray
    cnt_o: np.ndarray
    total_y: np.ndarray


def _target_slots(t_cell: np.ndarray, prb: np.ndarray, blocks: pd.DataFrame,
                  transitions: list[Transition] | None = None) -> _Slots:
    """The target slots of the sensitive cells (``prb >= 0``, at least one) and, per sensitive
    cell z and frequency t, the number of targets of frequency t in z's PRB outside z.
    ``transitions``: every PRB's (m, W) (cells ascending), None for NZY's uniform design."""
    n_blocks = len(blocks)
    sens = np.flatnonzero(prb >= 0)
    sens = sens[np.argsort(prb[sens], kind="stable")]
    sprb = prb[sens]
    starts = np.searchsorted(sprb, np.arange(n_blocks + 1))
    local = np.arange(sens.size) - starts[sprb]
    t_sc = t_cell[sens]
    slot_sc = np.repeat(np.arange(sens.size), t_sc)
    slot_t = t_sc[slot_sc]
    t_max = int(slot_t.max())
    m_prb = np.zeros((n_blocks, t_max + 1))
    np.add.at(m_prb, (sprb[slot_sc], slot_t), 1.0)       # records of frequency t per PRB
    pairs_zt = m_prb[sprb].copy()                          # targets of frequency t_j outside z
    pairs_zt[np.arange(sens.size), t_sc] -= t_sc
    # per slot, the parameters of its PRB: one post-randomization of all PRBs per replica.
    # Every PRB draws its records' uniform pairs in PRB order from the replica's stream, so
    # one draw of all pairs is the same sequence as one post_randomize call per PRB.
    slot_prb = sprb[slot_sc]
    if transitions is None:
        kernel = prepare_records(slot_t, blocks["k"].to_numpy(dtype=np.int64)[slot_prb],
                                 blocks["theta"].to_numpy(dtype=float)[slot_prb])
    else:   # the design laid out over the sensitive cells (PRB order, cells ascending)
        d = cell_design(transitions, np.arange(sens.size), starts[:-1], sens.size)
        kernel = prepare_design(slot_sc, d.move, d.group, d.indptr, d.dest, d.weight)
    return _Slots(n_sc=int(sens.size), t_sc=t_sc, t_max=t_max, slot_sc=slot_sc, slot_t=slot_t,
                  slot_local=local[slot_sc], slot_base=starts[slot_prb], kernel=kernel,
                  pairs_t=np.ascontiguousarray(np.maximum(pairs_zt, 0.0).T))


#: Replicas are replayed in chunks of at most this many target-replicas (chunk * slots): the
#: per-call overhead of ~20 numpy calls is paid once per chunk; chunks that stay in the CPU
#: caches (2^14: ~1.5 MB of temporaries) beat larger ones, and memory stays bounded.
CHUNK_SLOTS = 1 << 14


def _tiled(kernel: DesignKernel, reps: int) -> DesignKernel:
    """``kernel``'s per-record constants repeated ``reps`` times (records of replica 0, 1, ...);
    the design's tables (cum, dest, members) shared."""
    per_record = {f: np.tile(getattr(kernel, f), reps) for f in DesignKernel._fields
                  if f not in ("cum", "dest", "members")}
    return kernel._replace(**per_record)


def _replay(s: _Slots, *, seed: int, n_sim: int, a_max: int,
            chunk_slots: int = CHUNK_SLOTS) -> _Tally:
    """Post-randomize every PRB ``n_sim`` times (replica i from ``stream(seed, "intruder:<i>")``)
    and tally the Rao-Blackwellized Y = 1{B in z} / S_z per class and replica.

    Own cell: summed over the targets of cell j, Y is K_j / S_j with K_j the records of j that
    kept their cell (integer counts: exact, no order dependence). Other cell z: (records of
    frequency t_j moved into z) / S_z per class (t_j, t_z, S_z); a record moved into z implies
    a target of frequency t_j outside z, so every arrival falls in a valid pair class.

    Replicas are processed ``c`` at a time (c * slots <= ``chunk_slots``): each draws its own
    uniforms from its own stream, then one post-randomization and one ``bincount`` per tally
    for the chunk, replica r's bins shifted by r * bins. Every bin sums integer counts, so the
    figures are those of one replica at a time; the one non-integer sum (total_y) stays a
    1-D sum per replica.
    """
    t1, w_a = s.t_max + 1, a_max + 2     # class bins of a cell z by (t_z, S_z): S_z = 0 and
    n_bins = t1 * w_a                    # S_z > a_max go to dump bins
    n_cls = t1 * (a_max + 1)
    n_slots, n_sc = int(s.slot_sc.size), s.n_sc
    own_cls = s.t_sc * w_a                                # + min(S_z, a_max + 1)
    div = np.maximum(np.arange(a_max + 1), 1).astype(float)
    pairs_used = [t for t in range(t1) if s.pairs_t[t].any()]
    tally = _Tally(num=np.zeros((n_sim, n_cls)), cnt=np.zeros((n_sim, n_cls)),
                   num_o=np.zeros((n_sim, t1 * n_cls)), cnt_o=np.zeros((n_sim, t1 * n_cls)),
                   total_y=np.zeros(n_sim))
    chunk = max(1, min(n_sim, chunk_slots // max(n_slots, 1)))
    design = isinstance(s.kernel, DesignKernel)
    kernel = _tiled(s.kernel, chunk) if design else s.kernel
    cells = np.tile(s.slot_sc, chunk) if design else s.slot_sc
    # replica r of a chunk: its cells z at r * n_sc + z, its class bins at r * n_bins + bin and
    # its other-cell bins at r * t1 * n_bins + bin (zc_flat brings r * n_bins of that)
    rep = np.arange(chunk)[:, None]
    base_rep = s.slot_base + rep * n_sc
    sc_rep = s.slot_sc + rep * n_sc
    t_o_rep = s.slot_t * n_bins + rep * ((t1 - 1) * n_bins)
    cls_rep = own_cls + rep * n_bins
    t_rep = np.tile(s.t_sc.astype(float), chunk)
    pairs_rep = {t: np.tile(s.pairs_t[t], chunk) for t in pairs_used}
    div_rep = np.tile(div, t1)

    def by_class(zc: np.ndarray, weights: np.ndarray, c: int) -> np.ndarray:
        """(c, t1 * (a_max + 1)): per replica, the weights summed per class bin of zc."""
        return (np.bincount(zc, weights=weights, minlength=c * n_bins)
                .reshape(c, t1, w_a)[:, :, :a_max + 1].reshape(c, n_cls))

    for i0 in range(0, n_sim, chunk):
        c = min(chunk, n_sim - i0)
        rows = slice(i0, i0 + c)
        u = np.empty((c, n_slots, 2))
        for r in range(c):
            stream(seed, f"intruder:{i0 + r}").random(out=u[r])
        if design:
            n_rec = c * n_slots
            k = kernel if c == chunk else _tiled(s.kernel, c)
            dest = post_randomize_design(cells[:n_rec], k, u.reshape(n_rec, 2))
            dest = dest.reshape(c, n_slots)
            move = dest != s.slot_sc
            if c > 1:
                dest += rep[:c] * n_sc
        else:   # NZY's uniform design
            dest = post_randomize_prepared(s.slot_local, kernel, u)
            move = dest != s.slot_local
            dest += base_rep[:c]
        del u
        dest = dest.ravel()
        movers = np.flatnonzero(move.ravel())   # located once (a few of the records)
        s_count = np.bincount(dest, minlength=c * n_sc).reshape(c, n_sc)
        kept_cnt = (s.t_sc - np.bincount(sc_rep.ravel()[movers], minlength=c * n_sc)
                    .reshape(c, n_sc)).astype(float)
        # sum of K_j per S_j value, per replica (width: the largest S_j of the chunk)
        width = int(s_count.max()) + 1
        key = s_count if c == 1 else s_count + rep[:c] * width
        by_s = np.bincount(key.ravel(), weights=kept_cnt.ravel(),
                           minlength=c * width).reshape(c, width)
        y = by_s[:, 1:] / np.arange(1, width)
        top = s_count.max(axis=1) if c > 1 else [width - 1]
        for r in range(c):       # the replica's own 1-D sum over S_j = 1 .. max S_j
            tally.total_y[i0 + r] = float(y[r, :top[r]].sum())
        zc_flat = (cls_rep[:c] + np.minimum(s_count, a_max + 1)).ravel()  # class bin of z
        tally.num[rows] = by_class(zc_flat, kept_cnt.ravel(), c) / div_rep
        tally.cnt[rows] = by_class(zc_flat, t_rep[:c * n_sc], c)
        idx_m = t_o_rep.ravel()[movers] + zc_flat[dest[movers]]
        tally.num_o[rows] = (np.bincount(idx_m, minlength=c * t1 * n_bins)
                             .reshape(c, t1 * t1, w_a)[:, :, :a_max + 1]
                             / div).reshape(c, t1 * n_cls)
        for t in pairs_used:     # pairs (target of frequency t_j outside z, z) per class of z
            tally.cnt_o[rows, t * n_cls:(t + 1) * n_cls] = \
                by_class(zc_flat, pairs_rep[t][:c * n_sc], c)
    tally.cnt[:, ::a_max + 1] = 0.0    # a = 0 (the S_z = 0 bins): no class
    tally.cnt_o[:, ::a_max + 1] = 0.0
    return tally


def _class_entry(pick: str, t: int, t_z: int, a: int, c: int, num: np.ndarray, cnt: np.ndarray,
                 ex: Exact, n_sim: int, n_targets: float) -> dict[str, Any]:
    """One class: the simulated ratio (column c of num / cnt) beside the exact pooled value
    ex.num / ex.den, the exact range and P(S = a) = ex.den / n_targets."""
    return {"pick": pick, "t": int(t), "t_z": int(t_z), "a": int(a),
            **_ratio(num[:, c], cnt[:, c], n_sim),
            "exact_pooled": float(ex.num[c] / ex.den[c]) if ex.den[c] > 0 else None,
            "exact_min": float(ex.r_min[c]) if np.isfinite(ex.r_min[c]) else None,
            "exact_max": float(ex.r_max[c]) if np.isfinite(ex.r_max[c]) else None,
            "p_s_equals_a": float(ex.den[c] / n_targets)}


def simulate_intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                      *, seed: int, n_sim: int = 200, xi: float | None = None,
                      a_max: int = A_MAX, transitions: list[Transition] | None = None,
                      design: str | None = None) -> dict[str, Any]:
    """Play the METHOD.md section 6 intruder on ``n_sim`` fresh replays of the perturbation.

    Parameters
    ----------
    cell_frequency : (C,) int
        t_j of every non-empty cell of the original file.
    cell_prb : (C,) int
        PRB of every cell, -1 for non-sensitive cells.
    blocks : DataFrame
        ``ReleaseOutcome.blocks`` (uses ``prb``, ``k``, ``theta``, ``profile``).
    seed : int
        The release seed; replication i uses ``stream(seed, f"intruder:{i}")``.
    n_sim : int
        Number of replications (>= 2 for a standard error).
    transitions : list of Transition, optional
        Every PRB's (m, W) of the plan's design (``plan.transitions``, cells ascending); None:
        NZY's uniform design at the blocks' theta.
    design : str, optional
        The design's name, reported (``design``) when it is not NZY's uniform one.

    Returns
    -------
    dict with ``classes`` (one entry per own-cell (t, a) and per other-cell (t, t_z, a),
    a = 1..a_max, with ``pick``, ``t``, ``t_z``, ``a``, ``estimate``, ``se``,
    ``n_obs``, ``n_eff``, ``exact_pooled``, ``exact_min``, ``exact_max``, ``p_s_equals_a``) and
    ``overall`` (expected number of correct matches if the intruder attacks every sensitive
    record: exact and estimated, with SE).
    """
    if n_sim < 2:
        raise ValueError(f"n_sim must be at least 2 for a standard error, got {n_sim}")
    t_cell = np.asarray(cell_frequency, dtype=np.int64)
    prb = np.asarray(cell_prb, dtype=np.int64)
    base = {"n_sim": int(n_sim), "a_max": int(a_max), "stream": "intruder:{i}",
            "estimator": "rao-blackwellized: 1{B in z} / S_z per (target, picked cell) and "
                         "replica; z = the target's own cell or another cell of its PRB",
            "xi": xi, **({"design": design} if transitions is not None and design else {})}
    if len(blocks) == 0 or not (prb >= 0).any():
        return {**base, "classes": [], "n_targets": 0,
                "overall": {"expected_correct_exact": 0.0, "expected_correct_estimate": 0.0,
                            "se": 0.0}}
    s = _target_slots(t_cell, prb, blocks, transitions)
    tally = _replay(s, seed=seed, n_sim=n_sim, a_max=a_max)
    if transitions is None:
        own, expected_correct = exact_own(blocks, s.t_max, a_max)
        other, pairs_total = exact_other(blocks, s.t_max, a_max)
    else:
        own, expected_correct, other, pairs_total = exact_of_design(
            transitions, blocks, s.t_max, a_max)
    n_targets = int(s.slot_sc.size)
    classes = [_class_entry("own", t, t, a, t * (a_max + 1) + a, tally.num, tally.cnt, own,
                            n_sim, n_targets)
               for t in sorted(set(s.slot_t.tolist())) for a in range(1, a_max + 1)]
    classes += [_class_entry("other", t, t_z, a, (t * (s.t_max + 1) + t_z) * (a_max + 1) + a,
                             tally.num_o, tally.cnt_o, other, n_sim, n_pairs)
                for (t, t_z), n_pairs in sorted(pairs_total.items())
                for a in range(1, a_max + 1)]
    ests = [c["estimate"] for c in classes if c["estimate"] is not None]
    return {**base, "classes": classes, "n_targets": n_targets,
            "max_estimate": max(ests) if ests else None,
            "overall": {"expected_correct_exact": expected_correct,
                        "expected_correct_estimate": float(tally.total_y.mean()),
                        "se": float(tally.total_y.std(ddof=1) / np.sqrt(n_sim))}}


# -- started early ------------------------------------------------------------------------------
# The intruder needs the cell table and the PRBs only, known once the release is planned: the
# pipeline starts it then in a background thread (start_intruder), so that it runs while the
# records are released and written; risk.json's builder takes the result (intruder). Keyed by
# a digest of every input, so a result is only ever used for exactly the inputs it was
# computed from (anything else is computed afresh).
class _Pending:
    """The result (or error) of one simulate_intruder run in a daemon thread."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        import threading

        self._out: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(kwargs,),
                                        name="sdc-intruder", daemon=True)
        self._thread.start()

    def _run(self, kwargs: dict[str, Any]) -> None:
        try:
            self._out = simulate_intruder(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            self._error = exc

    def result(self) -> dict[str, Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


_pending: dict[str, _Pending] = {}


def _intruder_key(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                  seed: int, n_sim: int, xi: float | None, a_max: int,
                  transitions: list[Transition] | None = None, design: str | None = None) -> str:
    import hashlib

    h = hashlib.sha256(repr((int(seed), int(n_sim), xi, int(a_max), len(blocks), design,
                             transitions is None)).encode())
    for tr in transitions or []:
        h.update(tr.digest().encode())
        h.update(np.ascontiguousarray(tr.move, np.float64).tobytes())
    for a in (np.asarray(cell_frequency, np.int64), np.asarray(cell_prb, np.int64),
              blocks["k"].to_numpy(np.int64), blocks["theta"].to_numpy(np.float64)):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update("\x00".join(str(p) for p in blocks["profile"]).encode())
    return h.hexdigest()


def start_intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame,
                   *, seed: int, n_sim: int = 200, xi: float | None = None,
                   a_max: int = A_MAX, transitions: list[Transition] | None = None,
                   design: str | None = None) -> None:
    """Start :func:`simulate_intruder` of these inputs in a background thread (the one
    started before is dropped); :func:`intruder` with the same inputs takes its result."""
    kwargs = {"cell_frequency": np.array(cell_frequency, np.int64),
              "cell_prb": np.array(cell_prb, np.int64),
              "blocks": blocks[["k", "theta", "profile"]].copy(), "seed": seed, "n_sim": n_sim,
              "xi": xi, "a_max": a_max, "transitions": transitions, "design": design}
    key = _intruder_key(kwargs["cell_frequency"], kwargs["cell_prb"], kwargs["blocks"], seed,
                        n_sim, xi, a_max, transitions, design)
    _pending.clear()
    _pending[key] = _Pending(kwargs)


def intruder(cell_frequency: np.ndarray, cell_prb: np.ndarray, blocks: pd.DataFrame, *,
             seed: int, n_sim: int = 200, xi: float | None = None,
             a_max: int = A_MAX, transitions: list[Transition] | None = None,
             design: str | None = None) -> dict[str, Any]:
    """:func:`simulate_intruder`: the result :func:`start_intruder` computed for exactly these
    inputs if there is one (waiting for it), else computed now."""
    pending = _pending.pop(_intruder_key(cell_frequency, cell_prb, blocks, seed, n_sim, xi,
                                         a_max, transitions, design), None) if _pending else None
    if pending is not None:
        return pending.result()
    return simulate_intruder(cell_frequency, cell_prb, blocks, seed=seed, n_sim=n_sim, xi=xi,
                             a_max=a_max, transitions=transitions, design=design)
