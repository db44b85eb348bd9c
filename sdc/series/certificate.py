"""The series certificate: the linking intruder's correct-match rate as a maximum over (t, a)
classes, like the release's certificate, and the test that decides whether a class exceeds xi.

The release's certificate (docs/METHOD.md 7.1) is a maximum over cells and a >= 1 of an exact
probability. Over a series the linking intruder (:mod:`sdc.series.risk`: records linked by
identity, each record's modal released cell, one of the a records whose modal cell is the
target's true cell picked at random) is measured on the releases as they are, one class of
targets at a time: class (t, a) holds the targets of the last release whose true cell has t_j =
t and whose true cell is the modal cell of a records. A class's rate r is the mean of the
targets' scores 1{picked right} / a.

**Which class exceeds xi** (the test). If the class's probability of success were xi, a
target's score would be 1/a with probability a xi and 0 otherwise, with variance
xi (1 - a xi) / a; the class's mean over n targets then has the standard error

    se0(a, n) = sqrt(xi (1 - a xi) / (a n)),

and the class **exceeds xi** when r > xi + z se0 (z = :data:`Z` = 2: a class whose real rate
is xi is flagged with probability about 2.3%; a class at xi + 3 se0 is missed with probability
about 16%). A class with a xi >= 1 cannot exceed xi (its score is at most 1/a <= xi). The
maximum is taken over **every** class (a class of few targets needs a large rate to exceed:
n = 10 targets with a = 1 are flagged from 7 right picks on); the **series certificate** is the
largest rate over the classes with at least :data:`N_MIN` targets, with the class where it is
attained. Pooling the classes (the a = 1 rate over all t, used before issue 46) hides a class
above xi behind the t = 1 class, which is far below it.

``sdc audit --series`` exits 1 when a class exceeds xi and names it; ``sdc release`` refuses
(exit 2, nothing written) a member whose series would (docs/SERIES.md).

**Two releases are not tested.** With two releases the linking intruder's modal cell is every
record's cell in the last release (:func:`sdc.series.risk.series_risk_of_files`: equal cells
count twice, a tie goes to the latest release), so its classes are the last release's own
intruder, whose expected rate the release's exact certificate bounds by xi. Testing them flagged
a certified release for its realized fluctuation (a class at xi, about 2.3% per class): an
unchanged re-release was refused now and then. The classes are reported, ``tested`` is False
and no class exceeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["N_MIN", "Z", "SeriesCertificate", "series_certificate"]

#: Standard errors above xi (under a class rate of exactly xi) from which a class exceeds xi.
Z = 2.0
#: Targets a class needs to count for the reported maximum (the test covers every class).
N_MIN = 200


@dataclass
class SeriesCertificate:
    """The series certificate (module docstring).

    Attributes
    ----------
    xi, z : float
    n_releases : int
    classes : DataFrame
        One row per (t, a) class: ``t``, ``a``, ``n`` (targets), ``rate``, ``se0`` (the standard
        error of the rate if the class's success probability were xi; NaN when a xi >= 1),
        ``bound`` = xi + z se0 (inf when a xi >= 1) and ``exceeds`` (rate > bound).
    """

    xi: float
    z: float
    n_releases: int
    classes: pd.DataFrame
    #: False with two releases or fewer (module docstring): the classes are not tested
    tested: bool = True

    @property
    def exceeding(self) -> pd.DataFrame:
        """The classes above their bound, the largest excess (in se0) first."""
        c = self.classes[self.classes["exceeds"]]
        return c.assign(excess=(c["rate"] - self.xi) / c["se0"]).sort_values(
            ["excess", "n"], ascending=False)

    @property
    def passed(self) -> bool:
        return not bool(self.classes["exceeds"].any())

    @property
    def max_rate(self) -> float:
        """The largest class rate over the classes with at least :data:`N_MIN` targets."""
        big = self.classes[self.classes["n"] >= N_MIN]
        return float(big["rate"].max()) if len(big) else 0.0

    @property
    def at(self) -> dict[str, int] | None:
        """Where :attr:`max_rate` is attained: ``{"t", "a", "n"}``."""
        big = self.classes[self.classes["n"] >= N_MIN]
        if not len(big):
            return None
        r = big.loc[big["rate"].idxmax()]
        return {"t": int(r["t"]), "a": int(r["a"]), "n": int(r["n"])}

    def describe(self, row: Any) -> str:
        """One class in words (for messages)."""
        return (f"class t_j = {int(row['t'])}, a = {int(row['a'])}: rate {row['rate']:.4f} over "
                f"{int(row['n']):,} targets, above xi {self.xi} by more than {self.z:g} standard "
                f"errors (bound {row['bound']:.4f})")

    def to_dict(self) -> dict[str, Any]:
        ex = self.exceeding
        return {"n_releases": self.n_releases, "xi": self.xi, "z": self.z, "n_min": N_MIN,
                "max_rate": self.max_rate, "at": self.at, "passed": self.passed,
                "tested": self.tested,
                "exceeding": [{"t": int(r.t), "a": int(r.a), "n": int(r.n),
                               "rate": float(r.rate), "bound": float(r.bound)}
                              for r in ex.itertuples()]}


def series_certificate(intruder: pd.DataFrame, xi: float, n_releases: int, *,
                       z: float = Z) -> SeriesCertificate:
    """The series certificate from :attr:`sdc.series.risk.SeriesRisk.intruder` (its
    ``n_series`` and ``series_rate`` per (t, a) class); with ``n_releases`` <= 2 no class is
    tested (module docstring)."""
    v = intruder[(intruder["n_series"] > 0) & intruder["series_rate"].notna()]
    t = v["t"].to_numpy(np.int64)
    a = v["a"].to_numpy(np.int64)
    n = v["n_series"].to_numpy(np.int64)
    rate = v["series_rate"].to_numpy(np.float64)
    p = a * float(xi)
    testable = p < 1.0
    se0 = np.full(t.size, np.nan)
    se0[testable] = np.sqrt(xi * (1.0 - p[testable]) / (a[testable] * n[testable]))
    bound = np.full(t.size, math.inf)
    bound[testable] = xi + z * se0[testable]
    tested = int(n_releases) > 2
    classes = pd.DataFrame({"t": t, "a": a, "n": n, "rate": rate, "se0": se0, "bound": bound,
                            "exceeds": (rate > bound) & tested})
    return SeriesCertificate(float(xi), float(z), int(n_releases), classes, tested)
