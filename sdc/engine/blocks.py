"""Post-randomization blocks: one per partition set with sensitive cells, small ones handled by
the configured policy (METHOD.md sections 3, 4 and 7).

Inputs are per partition set: its generalized codes (one column per partition variable) and its
frequency profile (how many sensitive cells have t = 1, 2, ...). Nothing here sees records.

Small-block policies (``risk.small_blocks``), with kmin = ceil(1/(1 - theta)):

Every risk here is mechanism-aware (:mod:`sdc.engine.risk`): the max over the target's cell j,
the cell z of the PRB the intruder picks from (its own or another) and a >= 1. NZY's theorem
covers the own-cell intruder only, so a block "covered by the theorem" needs k >= kmin *and* a
mechanism-aware max risk <= xi at the theorem's theta (the second always held in our checks of
every profile with k >= kmin, but it is checked, not assumed).

``fail``
    any PRB not covered by the theorem is an error naming the partition set, k and kmin.
``merge``
    deterministic coarsening. The partition variables are taken in ``merge_along`` order
    v1, v2, ... At level L, blocks that agree on every partition variable other than
    v1..vL form a *line*, ordered by (vL, ..., v1) codes of their first partition set. Within a
    line, while a deficient block (not covered by the theorem) exists and the line has more than one block, the
    deficient block with the smallest k (first in line order on ties) joins its adjacent
    neighbour with the smaller k (the next one on ties). Partition sets without sensitive cells
    take no part (they have nothing to perturb). If deficient blocks remain after the last
    level, the release stops with an error naming them.
``calibrate``
    a PRB not covered by the theorem gets the smallest theta whose exact mechanism-aware max
    risk is <= xi (:func:`sdc.engine.risk.calibrate_theta`); one that no theta in (0, 1]
    certifies (k = 1; two singletons when xi < 1/2: below theta = 1 their own-cell risk at
    a = 2 is 1/2, at theta = 1 they swap with certainty) is merged as above, and the merged
    block is calibrated again.

With ``risk.theta: calibrated`` every block gets its calibrated theta (never above the
theorem's when the theorem applies). Every block's exact max risk is computed for the theta it
uses; a block above xi is never returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sdc.engine.risk import BlockRisk, calibrate_theta, max_risk
from sdc.errors import CertificationError, SmallBlockError

__all__ = ["Block", "BlockPlan", "plan_blocks"]


@dataclass
class Block:
    """A post-randomization block: one partition set's sensitive cells, or several merged."""

    members: list[int]                 # partition-set indices, sorted
    profile: np.ndarray                # profile[t] = number of sensitive cells with frequency t
    theta: float = float("nan")
    risk: BlockRisk | None = None
    action: str = ""
    merged: bool = False

    @property
    def k(self) -> int:
        return int(self.profile.sum())

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


def _merge_lines(blocks: list[Block], ps_codes: np.ndarray, merge_along: list[int],
                 deficient, describe) -> tuple[list[Block], list[str]]:
    n_vars = ps_codes.shape[1]
    log: list[str] = []
    for level in range(1, len(merge_along) + 1):
        if not any(deficient(b) for b in blocks):
            break
        merged_vars = merge_along[:level]
        fixed = [v for v in range(n_vars) if v not in merged_vars]
        order_vars = list(reversed(merged_vars))

        def line_key(b: Block, fixed=fixed) -> tuple[int, ...]:
            return tuple(int(ps_codes[b.members[0], v]) for v in fixed)

        def order_key(b: Block, order_vars=order_vars) -> tuple[int, ...]:
            return min(tuple(int(ps_codes[m, v]) for v in order_vars) for m in b.members)

        lines: dict[tuple[int, ...], list[Block]] = {}
        for b in blocks:
            lines.setdefault(line_key(b), []).append(b)
        out: list[Block] = []
        for lk in sorted(lines):
            seg = sorted(lines[lk], key=order_key)
            while len(seg) > 1:
                bad = [i for i, b in enumerate(seg) if deficient(b)]
                if not bad:
                    break
                i = min(bad, key=lambda j: (seg[j].k, j))
                if i == 0:
                    j = 1
                elif i == len(seg) - 1:
                    j = i - 1
                else:
                    j = i + 1 if seg[i + 1].k <= seg[i - 1].k else i - 1
                a, b = sorted((i, j))
                new = Block(sorted(seg[a].members + seg[b].members),
                            seg[a].profile + seg[b].profile, merged=True)
                log.append(f"{describe(seg[i])} (k={seg[i].k}) joined {describe(seg[j])} "
                           f"(k={seg[j].k}) along level {level}")
                seg[a:b + 1] = [new]
            out.extend(seg)
        blocks = out
    return blocks, log


def plan_blocks(ps_codes: np.ndarray, profiles: np.ndarray, *, xi: float, theta: float,
                kmin: int, theta_mode: str, policy: str, merge_along: list[int],
                describe) -> BlockPlan:
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
    """
    n_ps = profiles.shape[0]
    blocks = [Block([s], profiles[s].copy()) for s in range(n_ps) if profiles[s].sum() > 0]

    def uncertifiable(b: Block) -> bool:
        return calibrate_theta(b.profile_dict(), xi) is None

    def covered(b: Block) -> bool:
        """The theorem's theta applies (k >= kmin) and certifies the block against the
        mechanism-aware intruder (NZY's theorem covers the own-cell intruder only)."""
        return b.k >= kmin and max_risk(b.profile_dict(), theta).max_risk <= xi

    def why_not(b: Block) -> str:
        if b.k < kmin:
            return f"k={b.k}"
        r = max_risk(b.profile_dict(), theta)
        return (f"k={b.k}, but its mechanism-aware max risk at theta = {theta:.4f} is "
                f"{r.max_risk:.4f} ({r.z} cell, t={r.t}, a={r.a})")

    merges: list[str] = []
    if policy == "fail":
        bad = [b for b in blocks if not covered(b)]
        if bad:
            listed = "; ".join(f"{describe(b)}: {why_not(b)}" for b in bad[:20])
            more = f" (and {len(bad) - 20} more)" if len(bad) > 20 else ""
            raise SmallBlockError(
                f"{len(bad)} post-randomization block(s) have fewer than kmin = {kmin} sensitive "
                f"cells or are not certified at the theorem's theta = {theta:.4f}, and "
                f"risk.small_blocks is 'fail': {listed}{more}. Use a coarser partition, or set "
                "risk.small_blocks to 'merge' or 'calibrate'"
            )
    elif policy in ("merge", "calibrate"):
        deficient = (lambda b: not covered(b)) if policy == "merge" else uncertifiable
        blocks, merges = _merge_lines(blocks, ps_codes, merge_along, deficient, describe)
        left = [b for b in blocks if deficient(b)]
        if left:
            why = (f"fewer than kmin = {kmin} cells (or no certificate at the theorem's theta)"
                   if policy == "merge" else
                   "no theta in (0, 1] certifying them against an intruder who knows the "
                   "mechanism")
            listed = "; ".join(f"{describe(b)}: k={b.k}" for b in left[:20])
            raise SmallBlockError(
                f"{len(left)} post-randomization block(s) still have {why} after merging along "
                f"every allowed partition variable: {listed}. Partition more coarsely (or add "
                "variables to risk.merge_along)"
                + (", or use risk.small_blocks: calibrate"
                   if policy == "merge" and any(calibrate_theta(b.profile_dict(), xi) is not None
                                                for b in left) else "")
            )
    else:  # pragma: no cover - validated by the config model
        raise ValueError(f"unknown small_blocks policy {policy!r}")

    for b in blocks:
        theorem_ok = covered(b)
        if theta_mode == "theorem" and theorem_ok:
            b.theta, kind = theta, "theorem"
        else:
            # calibrated mode: never above the theorem's theta where that one certifies
            cal = calibrate_theta(b.profile_dict(), xi, upper=theta if theorem_ok else 1.0)
            if cal is None:  # pragma: no cover - excluded above
                raise CertificationError(f"{describe(b)} cannot be certified")
            b.theta, kind = cal, "calibrated"
        b.risk = max_risk(b.profile_dict(), b.theta)
        if b.risk.max_risk > xi + 1e-12:  # pragma: no cover - every theta above is certified
            raise CertificationError(
                f"{describe(b)}: exact max risk {b.risk.max_risk:.6f} exceeds xi = {xi} at "
                f"theta = {b.theta:.6f}; nothing was released (this is a bug: please report it)"
            )
        b.action = ("merged+" if b.merged else "") + kind

    blocks.sort(key=lambda b: b.members[0])
    block_of_ps = np.full(n_ps, -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        block_of_ps[b.members] = i
    return BlockPlan(blocks, block_of_ps, merges)
