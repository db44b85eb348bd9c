"""Post-randomization blocks: one per partition set with sensitive cells, the small ones handled
by the ``risk.small_blocks`` policy (``fail``, ``merge`` along ``merge_along``, ``calibrate``).

Inputs are per partition set (generalized codes and frequency profile), never records. A block
is covered by the theorem when k >= kmin = ceil(1/(1 - theta)) *and* its mechanism-aware max
risk (:mod:`sdc.method.risk`) is <= xi at the theorem's theta; every block returned has its
exact max risk <= xi for the theta it uses. The policies and the merge order: docs/METHOD.md
section 7.2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdc.errors import CertificationError, SmallBlockError
from sdc.method.cells import combine_codes, fits_one_code
from sdc.method.risk import BlockRisk, calibrate_theta, max_risk

__all__ = ["Block", "BlockPlan", "ProfileCertifier", "plan_blocks"]


@dataclass
class Block:
    """A post-randomization block: one partition set's sensitive cells, or several merged."""

    members: list[int]                 # partition-set indices, sorted
    profile: np.ndarray                # profile[t] = number of sensitive cells with frequency t
    theta: float = float("nan")
    risk: BlockRisk | None = None
    action: str = ""
    merged: bool = False
    _k: int = field(default=-1, init=False, repr=False, compare=False)

    @property
    def k(self) -> int:
        if self._k < 0:  # the profile is never changed after construction
            self._k = int(self.profile.sum())
        return self._k

    @property
    def n_records(self) -> int:
        return int((self.profile * np.arange(self.profile.size)).sum())

    def profile_dict(self) -> dict[int, int]:
        return {int(t): int(m) for t, m in enumerate(self.profile) if m > 0}


@dataclass
class BlockPlan:
    blocks: list[Block]
    block_of_partition_set: np.ndarray   # -1 where a partition set has no sensitive cell
    merges: list[str] = field(default_factory=list)


def _row_rank(rows: np.ndarray) -> np.ndarray:
    """Rank of every row of an (n, p) non-negative int array in the lexicographic order of the
    distinct rows (equal rows, equal rank): comparing ranks compares the rows as tuples. One
    mixed-radix code per row when the codes fit in 62 bits, else a row-wise unique."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.shape[1] == 0 or rows.shape[0] == 0:
        return np.zeros(rows.shape[0], dtype=np.int64)
    radix = [int(c.max()) + 1 for c in rows.T]
    if fits_one_code(radix):
        code = combine_codes(rows.T, radix, rows.shape[0])
        return np.unique(code, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _flags(blocks: list[Block], deficient, by_profile: bool = True) -> np.ndarray:
    """``deficient(b)`` of every block, computed once per distinct profile (``by_profile``)
    or once per block."""
    if not blocks:
        return np.zeros(0, dtype=bool)
    if not by_profile:
        return np.array([bool(deficient(b)) for b in blocks], dtype=bool)
    rank = _row_rank(np.stack([b.profile for b in blocks]))
    _, first, inv = np.unique(rank, return_index=True, return_inverse=True)
    per = np.array([bool(deficient(blocks[i])) for i in first], dtype=bool)
    return per[inv.reshape(-1)]


def _merge_lines(blocks: list[Block], ps_codes: np.ndarray, merge_along: list[int],
                 deficient, describe, by_profile: bool = True) -> tuple[list[Block], list[str]]:
    """The merge rule of the module docstring. Lines are found and ordered with array
    operations over all blocks at once (line = rank of the first member's fixed codes, order
    = the smallest rank of a member's merged codes, ties in the previous level's order); only
    lines holding a deficient block and another block are merged, sequentially as the rule
    says, in line order (so the merges and their log are those of a line-by-line loop)."""
    n_vars = ps_codes.shape[1]
    ps_codes = np.asarray(ps_codes)
    log: list[str] = []
    for level in range(1, len(merge_along) + 1):
        flags = _flags(blocks, deficient, by_profile)
        if not flags.any():
            break
        merged_vars = merge_along[:level]
        fixed = [v for v in range(n_vars) if v not in merged_vars]
        order_vars = list(reversed(merged_vars))
        nb = len(blocks)
        sizes = np.fromiter((len(b.members) for b in blocks), dtype=np.int64, count=nb)
        members = np.fromiter((m for b in blocks for m in b.members), dtype=np.int64,
                              count=int(sizes.sum()))
        first = members[np.r_[0, np.cumsum(sizes)[:-1]]] if nb else members
        line = _row_rank(ps_codes[first][:, fixed])
        ps_rank = _row_rank(ps_codes[:, order_vars])
        okey = np.full(nb, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(okey, np.repeat(np.arange(nb), sizes), ps_rank[members])
        order = np.lexsort((np.arange(nb), okey, line))
        sl = line[order]
        starts = np.flatnonzero(np.r_[True, sl[1:] != sl[:-1]]) if nb else np.zeros(0, int)
        ends = np.r_[starts[1:], nb].astype(np.int64)
        n_bad = np.add.reduceat(flags[order].astype(np.int64), starts) if nb else starts
        work = np.flatnonzero((ends - starts > 1) & (n_bad > 0))
        in_order = [blocks[i] for i in order]
        flags_in_order = flags[order].tolist()
        out: list[Block] = []
        prev = 0
        for w in work:
            s, e = int(starts[w]), int(ends[w])
            out.extend(in_order[prev:s])
            prev = e
            seg = in_order[s:e]
            ks = [b.k for b in seg]
            bad_flags = flags_in_order[s:e]
            while len(seg) > 1:
                bad = [i for i, d in enumerate(bad_flags) if d]
                if not bad:
                    break
                i = min(bad, key=lambda j: (ks[j], j))
                if i == 0:
                    j = 1
                elif i == len(seg) - 1:
                    j = i - 1
                else:
                    j = i + 1 if ks[i + 1] <= ks[i - 1] else i - 1
                a, b = sorted((i, j))
                new = Block(sorted(seg[a].members + seg[b].members),
                            seg[a].profile + seg[b].profile, merged=True)
                log.append(f"{describe(seg[i])} (k={ks[i]}) joined {describe(seg[j])} "
                           f"(k={ks[j]}) along level {level}")
                seg[a:b + 1] = [new]
                ks[a:b + 1] = [new.k]
                bad_flags[a:b + 1] = [deficient(new)]
            out.extend(seg)
        out.extend(in_order[prev:])
        blocks = out
    return blocks, log


class ProfileCertifier:
    """How a block is certified: by its frequency profile (the uniform W of NZY), so every
    figure is computed once per distinct profile. Another design (``destinations: near``,
    :class:`sdc.method.destinations.NearCertifier`) depends on the block's cells and keys
    its cache by the block's members instead."""

    by_profile = True

    def key(self, b: Block) -> Any:
        return b.profile.tobytes()

    def risk(self, b: Block, theta: float) -> BlockRisk:
        return max_risk(b.profile_dict(), theta)

    def calibrate(self, b: Block, xi: float, upper: float = 1.0) -> float | None:
        return calibrate_theta(b.profile_dict(), xi, upper=upper)


def plan_blocks(ps_codes: np.ndarray, profiles: np.ndarray, *, xi: float, theta: float,
                kmin: int, theta_mode: str, policy: str, merge_along: list[int],
                describe, certifier: Any = None) -> BlockPlan:
    """Form, merge and certify the PRBs of a release.

    Parameters
    ----------
    ps_codes : (P, V) int array
        Generalized codes of each partition set (canonical order).
    profiles : (P, T+1) int array
        ``profiles[s, t]`` = number of sensitive cells with frequency t in partition set s.
    xi, theta, kmin : the risk target, the theorem's theta and kmin = ceil(1/(1-theta)).
    theta_mode : ``"theorem"`` or ``"calibrated"``.
    policy : ``"merge"``, ``"calibrate"`` or ``"fail"``.
    merge_along : partition-variable column indices in merge order.
    describe : callable(Block) -> str naming a block's partition sets for messages.
    certifier : how a block's exact max risk and calibrated theta are computed
        (:class:`ProfileCertifier`, the default, for NZY's uniform W).
    """
    tests = _BlockTests(certifier if certifier is not None else ProfileCertifier(),
                        xi, theta, kmin)
    n_ps = profiles.shape[0]
    profiles = np.asarray(profiles, dtype=np.int64)
    k_ps = profiles.sum(axis=1)
    blocks = [Block([s], profiles[s].copy()) for s in np.flatnonzero(k_ps > 0).tolist()]
    for b in blocks:
        b._k = int(k_ps[b.members[0]])
    merges: list[str] = []
    if policy == "fail":
        _refuse_uncovered(blocks, tests, describe)
    elif policy in ("merge", "calibrate"):
        blocks, merges = _merge_small(blocks, ps_codes, merge_along, policy, tests, describe)
    else:  # pragma: no cover - validated by the config model
        raise ValueError(f"unknown small_blocks policy {policy!r}")
    for b in blocks:
        _certify(b, tests, theta_mode, describe)
    blocks.sort(key=lambda b: b.members[0])
    return BlockPlan(blocks, _block_of_ps(blocks, n_ps), merges)


class _BlockTests:
    """The tests :func:`plan_blocks` runs on a block, each computed once per distinct
    profile (``certifier.key``: a household file's person stage has ~10^5 blocks and few
    distinct profiles)."""

    def __init__(self, cert: Any, xi: float, theta: float, kmin: int) -> None:
        self.cert, self.xi, self.theta, self.kmin = cert, xi, theta, kmin
        self.cache: dict[tuple[str, bytes], Any] = {}

    def cached(self, what: str, b: Block, compute: Callable[[], Any]) -> Any:
        """``compute()`` for the test ``what`` of ``b``'s key, once per key."""
        key = (what, self.cert.key(b))
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    def uncertifiable(self, b: Block) -> bool:
        """No theta in (0, 1] certifies ``b``: calibration scans a grid ending at theta = 1, so
        a block certified at theta = 1 is certifiable (one risk evaluation, not a calibration)."""
        return self.cached("uncertifiable", b, lambda: b.k < 2 or (
            self.cert.risk(b, 1.0).max_risk > self.xi
            and self.cert.calibrate(b, self.xi) is None))

    def covered(self, b: Block) -> bool:
        """The theorem's theta applies (k >= kmin) and certifies the block against the
        mechanism-aware intruder (NZY's theorem covers the own-cell intruder only)."""
        return self.cached("covered", b, lambda: b.k >= self.kmin
                           and self.cert.risk(b, self.theta).max_risk <= self.xi)

    def why_not(self, b: Block) -> str:
        """Why ``b`` is not covered, for messages."""
        if b.k < self.kmin:
            return f"k={b.k}"
        r = self.cert.risk(b, self.theta)
        return (f"k={b.k}, but its mechanism-aware max risk at theta = {self.theta:.4f} is "
                f"{r.max_risk:.4f} ({r.z} cell, t={r.t}, a={r.a})")


def _refuse_uncovered(blocks: list[Block], tests: _BlockTests, describe) -> None:
    """``small_blocks: fail``: raise :class:`SmallBlockError` naming the blocks the theorem
    does not cover."""
    bad = [b for b in blocks if not tests.covered(b)]
    if bad:
        listed = "; ".join(f"{describe(b)}: {tests.why_not(b)}" for b in bad[:20])
        more = f" (and {len(bad) - 20} more)" if len(bad) > 20 else ""
        raise SmallBlockError(
            f"{len(bad)} post-randomization block(s) have fewer than kmin = {tests.kmin} "
            f"sensitive cells or are not certified at the theorem's theta = "
            f"{tests.theta:.4f}, and risk.small_blocks is 'fail': {listed}{more}. Use a "
            "coarser partition, or set risk.small_blocks to 'merge' or 'calibrate'"
        )


def _merge_small(blocks: list[Block], ps_codes: np.ndarray, merge_along: list[int],
                 policy: str, tests: _BlockTests, describe) -> tuple[list[Block], list[str]]:
    """``small_blocks: merge`` (blocks the theorem does not cover) or ``calibrate`` (blocks no
    theta certifies): merge them along ``merge_along`` (:func:`_merge_lines`); raise
    :class:`SmallBlockError` when some are left. Returns (blocks, merge log)."""
    deficient = (lambda b: not tests.covered(b)) if policy == "merge" else tests.uncertifiable
    blocks, merges = _merge_lines(blocks, ps_codes, merge_along, deficient, describe,
                                  by_profile=tests.cert.by_profile)
    left = [b for b in blocks if deficient(b)]
    if left:
        why = (f"fewer than kmin = {tests.kmin} cells (or no certificate at the theorem's theta)"
               if policy == "merge" else
               "no theta in (0, 1] certifying them against an intruder who knows the "
               "mechanism")
        listed = "; ".join(f"{describe(b)}: k={b.k}" for b in left[:20])
        err = SmallBlockError(
            f"{len(left)} post-randomization block(s) still have {why} after merging along "
            f"every allowed partition variable: {listed}. Partition more coarsely (or add "
            "variables to risk.merge_along)"
            + (", or use risk.small_blocks: calibrate"
               if policy == "merge" and any(tests.cert.calibrate(b, tests.xi) is not None
                                            for b in left) else "")
        )
        err.partition_sets = sorted({m for b in left for m in b.members})  # type: ignore[attr-defined]
        raise err
    return blocks, merges


def _certify(b: Block, tests: _BlockTests, theta_mode: str, describe) -> None:
    """Set ``b``'s theta (the theorem's where it certifies and ``theta_mode`` is
    ``theorem``, else the calibrated one, never above the theorem's where that certifies),
    its exact risk (<= xi) and its action."""
    cert, xi, theta = tests.cert, tests.xi, tests.theta
    theorem_ok = tests.covered(b)
    if theta_mode == "theorem" and theorem_ok:
        b.theta, kind = theta, "theorem"
    else:
        cal = tests.cached(f"calibrate:{theorem_ok}", b, lambda: cert.calibrate(
            b, xi, upper=theta if theorem_ok else 1.0))
        if cal is None:  # pragma: no cover - excluded above
            raise CertificationError(f"{describe(b)} cannot be certified")
        b.theta, kind = cal, "calibrated"
    b.risk = tests.cached(f"risk:{b.theta!r}", b, lambda: cert.risk(b, b.theta))
    if b.risk.max_risk > xi + 1e-12:  # pragma: no cover - every theta above is certified
        raise CertificationError(
            f"{describe(b)}: exact max risk {b.risk.max_risk:.6f} exceeds xi = {xi} at "
            f"theta = {b.theta:.6f}; nothing was released (this is a bug: please report it)"
        )
    b.action = ("merged+" if b.merged else "") + kind


def _block_of_ps(blocks: list[Block], n_ps: int) -> np.ndarray:
    """(P,) the block of every partition set (blocks in order), -1 for none."""
    block_of_ps = np.full(n_ps, -1, dtype=np.int64)
    if blocks:
        sizes = np.fromiter((len(b.members) for b in blocks), dtype=np.int64, count=len(blocks))
        members = np.fromiter((m for b in blocks for m in b.members), dtype=np.int64,
                              count=int(sizes.sum()))
        block_of_ps[members] = np.repeat(np.arange(len(blocks), dtype=np.int64), sizes)
    return block_of_ps
