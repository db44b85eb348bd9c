"""Expected number of changed records, and its variance, under a release's plan (seed-free):
what ``sdc init``, ``sdc design``, ``sdc plan`` and ``sdc release`` print as "expected" (issue 44:
the same figure everywhere, a release's one draw beside it).

Every sensitive record moves independently (its draw is keyed by its own identity) with its
cell's move probability m_j (NZY: theta_b / t_j; the near and weighted designs: their m_j), and
a record that moves lands in another cell of its PRB, so its keys change.

- **person file**: changed = sum of independent Bernoulli(m_j): E = sum_j t_j m_j,
  Var = sum_j t_j m_j (1 - m_j) (:func:`person_changes`);
- **household file, two stages**: a household moves with its household cell's m_h (all its s
  members change: they take the released household keys); else each member changes when the
  person stage moves it (m_i of its person cell, independently). Per household
  C_h = s I_h + (1 - I_h) sum_i J_i, so with S1 = sum_i m_i and S2 = sum_i m_i^2:
  E[C_h] = s m_h + (1 - m_h) S1 and
  E[C_h^2] = s^2 m_h + (1 - m_h) (S1 - S2 + S1^2); households draw independently
  (:func:`two_stage_changes`);
- **household file under ``risk.composition: protect``**: the composition stage's exact figure
  (:func:`sdc.method.household_composition.expected_persons_changed`).

Whole arrays, no loop over records.
"""

from __future__ import annotations

import math

import numpy as np

from sdc.method.draws.rendezvous import DrawPlan

__all__ = ["cell_move_probability", "changes_text", "person_changes", "two_stage_changes"]


def cell_move_probability(plan: DrawPlan) -> np.ndarray:
    """(C,) m_j of every cell of ``plan`` (0 outside the PRBs)."""
    m = np.zeros(plan.cell_prb.size, dtype=np.float64)
    sens = np.flatnonzero(plan.cell_prb >= 0)
    if sens.size:
        m[sens] = plan.move_probability(sens)
    return m


def person_changes(plan: DrawPlan) -> tuple[float, float]:
    """(E, Var) of the records changed by ``plan``'s independent per-record moves."""
    m = cell_move_probability(plan)
    t = np.asarray(plan.cell_frequency, np.float64)
    return float((t * m).sum()), float((t * m * (1.0 - m)).sum())


def two_stage_changes(household_move: np.ndarray, person_move: np.ndarray,
                      household_row: np.ndarray) -> tuple[float, float]:
    """(E, Var) of the persons changed by a household file's two stages (module docstring):
    ``household_move`` (H,) the move probability of every household, ``person_move`` (n,) of
    every person in the person stage, ``household_row`` (n,) each person's household."""
    mh = np.asarray(household_move, np.float64)
    h = mh.size
    row = np.asarray(household_row, np.int64)
    mp = np.asarray(person_move, np.float64)
    s = np.bincount(row, minlength=h).astype(np.float64)
    s1 = np.bincount(row, weights=mp, minlength=h)
    s2 = np.bincount(row, weights=mp * mp, minlength=h)
    e = s * mh + (1.0 - mh) * s1
    e2 = s * s * mh + (1.0 - mh) * (s1 - s2 + s1 * s1)
    return float(e.sum()), float(np.maximum(e2 - e * e, 0.0).sum())


def changes_text(expected: float, var: float, n: int) -> str:
    """``about 1,205 records (8.1%) expected to change (SD 41)``: the one wording of init,
    design and release."""
    share = expected / n if n else 0.0
    return (f"{expected:,.0f} records ({share:.1%}) expected to change "
            f"(SD {math.sqrt(max(var, 0.0)):,.0f})")
