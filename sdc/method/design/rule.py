"""The figures of a design node and the rule that recommends one (docs/DESIGN.md, "The rule"):
the Pareto frontier, the displacement of moved records, the recommendation and what getting
under the target would cost."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdc.method.design.candidates import Candidate
from sdc.method.design.importance import prefer

__all__ = ["KEY_FLOOR", "TARGET_CHANGED", "WARN_CHANGED", "DesignResult", "Node",
           "changes_of_key", "displacement", "pareto_front", "recommend", "rule_order"]

KEY_FLOOR = 0.7            # the rule: no key keeps less than this share of its own entropy
TARGET_CHANGED = 0.08      # the rule aims at this share of records changed, or less
WARN_CHANGED = 0.20        # ... and stays under the release's own warning threshold


@dataclass
class Node:
    """One lattice node: a candidate per key and a partition variant, its figures and status.

    ``variant``: ``config`` (the config's partition; a rule finer than the node's recoding
    becomes ``as_is``), ``fine`` or ``finest`` (:func:`partition_variant`), each also with
    small PRBs merged across nominal keys first (``merge_along``: nominal, then ordered)."""

    levels: tuple[int, ...]
    variant: str = "config"
    entropy_kept: float = math.nan
    changed: float = math.nan           # expected records changed (count)
    changed_share: float = math.nan
    loss: float = math.nan
    tvd: float = math.nan
    tvd_recode: float = math.nan
    certificate: float = math.nan
    n_cells: int = 0
    n_sensitive: int = 0
    n_prbs: int = 0
    partition: dict[str, Any] = field(default_factory=dict)
    merge_along: list[str] | None = None   # risk.merge_along of the variant (None: default)
    key_kept: dict[str, float] = field(default_factory=dict)
    key_tvd: dict[str, float] = field(default_factory=dict)
    min_key_kept: float = math.nan
    displacement: dict[str, float] = field(default_factory=dict)
    #: the distortion of a move, per moved record: sum over ordered keys of E|delta| / sd
    #: plus, over nominal keys, the chance the key changes (scale-free; minimised)
    displacement_sd: float = math.nan
    key_change: dict[str, float] = field(default_factory=dict)  # P(key changes | moved)
    keys_changed: float = math.nan      # expected keys changed per moved record
    #: per key, the largest expected shift of the outcome's mean over its categories, in SE
    #: (:mod:`sdc.method.design.shifts`; empty without an outcome)
    key_shift: dict[str, float] = field(default_factory=dict)
    meaningful: bool = True             # every recoding respects declared breaks and orders
    status: str = "not evaluated"       # certified | refused | pruned | not evaluated
    note: str = ""
    #: a weighted job's node planned with the config's own design (weighted groups, near W):
    #: weighted_bias, weighted_beyond, weighted_fallback, certificate, changed, ... or a
    #: ``note`` (:mod:`sdc.method.design.balance`); None: not planned so
    configured: dict[str, Any] | None = None
    nzy_changed: float = math.nan       # ``changed`` under NZY's uniform design (the lattice's)
    #: a weighted job: share of the weight in PRBs of fewer than 2 s cells (one weight group)
    small_prb_weight: float = math.nan

    @property
    def balanced(self) -> bool | None:
        """Whether the configured design keeps weighted totals balanced (bias <= BIAS_MAX of
        the total weight, beyond <= BEYOND_MAX); None: not planned with it."""
        from sdc.method.design.balance import BEYOND_MAX, BIAS_MAX

        c = self.configured
        if c is None:
            return None
        return ("weighted_bias" in c and c["certificate"] <= c.get("xi", 1.0) + 1e-12
                and c["weighted_bias"] <= BIAS_MAX + 1e-12
                and c["weighted_beyond"] <= BEYOND_MAX + 1e-12)

    def take_configured(self, conf: dict[str, Any], xi: float) -> None:
        """Record the configured design's figures; a certified one's expected changes and
        certificate replace NZY's (the rule then ranks by what the release does)."""
        self.configured = {**conf, "xi": xi}
        if "weighted_bias" in conf:
            if self.nzy_changed != self.nzy_changed:
                self.nzy_changed = self.changed
            self.changed = conf["changed"]
            self.changed_share = conf["changed"] / max(conf["n_records"], 1)
            self.certificate = conf["certificate"]


@dataclass
class DesignResult:
    """All nodes, the frontier (indices into ``nodes``), the recommended node, the figures
    the rule used and, when the rule could not meet its aims, what must be given up."""

    keys: list[str]
    cands: dict[str, list[Candidate]]
    nodes: list[Node]
    frontier: list[int]
    recommended: int | None
    current: int | None
    fine_entropy: float
    n_records: int
    seconds: float
    keep: float
    complete: bool
    target: float = TARGET_CHANGED
    warn: float = WARN_CHANGED
    verdict: str = ""
    given_up: list[str] = field(default_factory=list)
    #: a weighted job: nodes ranked and recommended by the configured (weighted) design
    weighted: bool = False
    #: each key's importance weight over the mean when the config's importances differ
    #: (move distortion weighted, the rule's preference; empty: none declared)
    importance: dict[str, float] = field(default_factory=dict)
    #: the search's :class:`~sdc.method.design.evaluate.Context` (the declared cell table,
    #: every candidate's codes): a node's cell table again without the records
    context: Any = field(default=None, repr=False, compare=False)


def move_abs(theta: np.ndarray) -> np.ndarray:
    """E|A - L| for independent A, L ~ Poisson(theta) (theta <= 1: 30 terms are exact to 1e-15),
    computed once per distinct theta."""
    k = np.arange(30)
    logf = np.cumsum(np.log(np.maximum(k, 1)))
    dist = np.abs(k[:, None] - k[None, :])
    uniq, inv = np.unique(np.asarray(theta, dtype=float), return_inverse=True)
    vals = np.empty(uniq.size)
    for i, th in enumerate(uniq):
        p = np.exp(k * math.log(max(th, 1e-300)) - th - logf)
        vals[i] = float((dist * np.outer(p, p)).sum())
    return vals[inv]


def displacement(x: np.ndarray, block: np.ndarray, theta_of_block: np.ndarray,
                 k_of_block: np.ndarray) -> tuple[float, float]:
    """(expected sum of |delta| over moved records, expected number of moved records) for one
    ordered key under uniform moves within a PRB: each sensitive cell j of PRB b loses
    theta_b records in expectation (t_j * theta_b / t_j), each to another cell of b chosen
    uniformly, so E sum |delta| = sum_b theta_b / (k_b - 1) * sum_{j != l in b} |x_j - x_l|.
    ``x``: each sensitive cell's position (declared units; NaN cells are left out),
    ``block``: its PRB. Pairwise sums per PRB from the sorted positions,
    sum_{i<l} (x_(l) - x_(i)) = sum_i x_(i) (2 i - k + 1): O(cells log cells)."""
    ok = np.isfinite(x)
    x, block = x[ok], block[ok]
    if not x.size:
        return 0.0, 0.0
    order = np.lexsort((x, block))
    xs, bs = x[order], block[order]
    start = np.r_[0, np.flatnonzero(np.diff(bs)) + 1]
    size = np.diff(np.r_[start, bs.size])
    rank = np.arange(bs.size) - np.repeat(start, size)
    k = np.repeat(size, size)
    pair = np.bincount(bs, weights=xs * (2 * rank - k + 1), minlength=theta_of_block.size)
    kb = k_of_block.astype(float)
    w = np.where(kb > 1, theta_of_block / np.maximum(kb - 1, 1), 0.0)
    return float((2 * pair * w).sum()), float((theta_of_block * kb).sum())


def changes_of_key(codes: np.ndarray, block: np.ndarray, theta_of_block: np.ndarray,
                   k_of_block: np.ndarray) -> float:
    """Expected number of moved records whose value of one key changes, under uniform moves
    within a PRB: sum_b theta_b / (k_b - 1) * #{ordered pairs j != l of b with different
    values} = sum_b theta_b / (k_b - 1) * (k_b^2 - sum_v n_bv^2), n_bv the cells of b with
    value v. ``codes``: each sensitive cell's released code of the key."""
    if not codes.size:
        return 0.0
    nb = theta_of_block.size
    width = int(codes.max()) + 1
    pair = np.bincount(block * width + codes, minlength=nb * width).astype(float)
    same = np.bincount(np.repeat(np.arange(nb), width), weights=pair ** 2, minlength=nb)
    kb = k_of_block.astype(float)
    w = np.where(kb > 1, theta_of_block / np.maximum(kb - 1, 1), 0.0)
    return float((w * (kb ** 2 - same)).sum())


def pareto_front(points: np.ndarray) -> list[int]:
    """Indices of the rows of ``points`` (minimised objectives) no other row dominates; equal
    rows are kept once (the first)."""
    idx = []
    for i in range(points.shape[0]):
        le = np.all(points <= points[i], axis=1)
        lt = np.any(points < points[i], axis=1)
        dominated = np.any(le & lt)
        dup = np.any(np.all(points[:i] == points[i], axis=1)) if i else False
        if not dominated and not dup:
            idx.append(i)
    return idx


def _cost(nodes: list[Node], ok: list[int], share: float, key_floor: float) -> list[str]:
    """What getting to at most ``share`` changed would cost: the keys whose own-entropy floor
    the best such evaluated design (the highest lowest per-key share) breaks."""
    reach = [i for i in ok if nodes[i].changed_share <= share + 1e-12]
    if not reach:
        return [f"no evaluated design changes <= {share:.0%} of the records: the keys are too "
                "fine for this file (drop a key, or declare coarser public domains)"]
    alt = max(reach, key=lambda i: (nodes[i].min_key_kept, nodes[i].entropy_kept))
    lost = sorted(((k, v) for k, v in nodes[alt].key_kept.items() if v < key_floor),
                  key=lambda kv: kv[1])
    return [f"to change <= {share:.0%} (node {alt}: {nodes[alt].changed_share:.1%}): "
            + "; ".join(f"{k} would keep only {v:.0%} of its own entropy" for k, v in lost)]


def rule_order(nodes: list[Node], *, key_floor: float = KEY_FLOOR,
               target: float = TARGET_CHANGED, warn: float = WARN_CHANGED,
               accept: Callable[[Node], bool] | None = None,
               importance: bool = False) -> list[int]:
    """The nodes :func:`recommend` may pick (``accept``: a further filter), best first: the
    first is its recommendation."""
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful
          and (accept is None or accept(nd))]
    good = [i for i in ok if nodes[i].min_key_kept >= key_floor - 1e-12]

    def disp(i: int) -> float:
        d = nodes[i].displacement_sd
        return d if d == d else 0.0

    under = [i for i in good if nodes[i].changed_share <= target + 1e-12]
    below = [i for i in good if target + 1e-12 < nodes[i].changed_share <= warn + 1e-12]
    rest = [i for i in good if nodes[i].changed_share > warn + 1e-12]
    order = (sorted(under, key=lambda i: (-round(nodes[i].entropy_kept, 9), disp(i),
                                          nodes[i].changed, i))
             + sorted(below, key=lambda i: (round(nodes[i].changed, 6), -nodes[i].entropy_kept,
                                            disp(i), i))
             + sorted(rest, key=lambda i: (nodes[i].changed, -nodes[i].entropy_kept, disp(i),
                                           i)))
    if importance and order:   # the recommendation first (sdc.method.design.importance)
        first = prefer(nodes, good, order[0], target=target, warn=warn)
        order = [first, *(i for i in order if i != first)]
    return order


def recommend(nodes: list[Node], *, key_floor: float = KEY_FLOOR,
              target: float = TARGET_CHANGED, warn: float = WARN_CHANGED,
              accept: Callable[[Node], bool] | None = None, importance: bool = False
              ) -> tuple[int | None, str, list[str]]:
    """The rule: among certified nodes whose recodings respect the declared breaks and orders
    and where every key keeps at least ``key_floor`` of its own entropy, (1) those changing
    at most ``target`` of the records: the one keeping the most of the key table's entropy
    (ties: smaller displacement, fewer changed); else (2) those under ``warn`` (the release's own warning threshold): the fewest changed (ties:
    more entropy, smaller displacement); else (3) the fewest changed, and what must be given
    up to get under ``warn``: the keys whose floor the best such design breaks (or that no
    evaluated design gets there). ``accept``: only nodes it accepts (a weighted job's
    balanced ones). ``importance``: the keys' importances differ; then among the nodes close
    to the pick in changes, the smallest weighted move distortion
    (:func:`sdc.method.design.importance.prefer`). Returns (node, verdict, given up)."""
    best, verdict, given = _recommend(nodes, key_floor=key_floor, target=target, warn=warn,
                                      accept=accept)
    if importance and best is not None:
        ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful
              and (accept is None or accept(nd))]
        good = [i for i in ok if nodes[i].min_key_kept >= key_floor - 1e-12]
        alt = prefer(nodes, good, best, target=target, warn=warn)
        if alt != best:
            verdict += (f"; analytic importance declared: of the designs changing about as "
                        f"many records ({nodes[best].changed_share:.1%} -> "
                        f"{nodes[alt].changed_share:.1%}), the smallest weighted move "
                        f"distortion ({nodes[best].displacement_sd:.2f} -> "
                        f"{nodes[alt].displacement_sd:.2f})")
            best = alt
    return best, verdict, given


def _recommend(nodes: list[Node], *, key_floor: float, target: float, warn: float,
               accept: Callable[[Node], bool] | None) -> tuple[int | None, str, list[str]]:
    ok = [i for i, nd in enumerate(nodes) if nd.status == "certified" and nd.meaningful
          and (accept is None or accept(nd))]
    good = [i for i in ok if nodes[i].min_key_kept >= key_floor - 1e-12]

    def disp(i: int) -> float:
        d = nodes[i].displacement_sd
        return d if d == d else 0.0

    under = [i for i in good if nodes[i].changed_share <= target + 1e-12]
    if under:
        best = min(under, key=lambda i: (-round(nodes[i].entropy_kept, 9), disp(i),
                                         nodes[i].changed, i))
        return best, (f"changes at most {target:.0%} of the records with every key keeping >= "
                      f"{key_floor:.0%} of its own entropy; the most informative such design"), []
    below = [i for i in good if nodes[i].changed_share <= warn + 1e-12]
    if below:
        best = min(below, key=lambda i: (round(nodes[i].changed, 6), -nodes[i].entropy_kept,
                                         disp(i), i))
        return best, (f"no evaluated design with every key keeping >= {key_floor:.0%} of its "
                      f"own entropy changes <= {target:.0%}; the fewest changed under "
                      f"{warn:.0%}"), _cost(nodes, ok, target, key_floor)
    best = min(good, key=lambda i: (nodes[i].changed, -nodes[i].entropy_kept, disp(i), i),
               default=None)
    given = _cost(nodes, ok, warn, key_floor) + _cost(nodes, ok, target, key_floor)
    verdict = (f"no evaluated design keeps >= {key_floor:.0%} of every key's entropy and "
               f"changes <= {warn:.0%}")
    return best, verdict, given
