"""The project's own census-like demo microdata (``data_samples/census_sample.csv``).

The file mirrors the example data set of Nayak, Zhang & You (2018), as reviewed in
Nayak (2020), section 5: 59,033 persons and the five key variables

====================  =========================================================
``sex``               1 = male, 2 = female
``age``               integer years 0..91 (91 means "91 or older")
``race``              codes 1..9 in the order of the review's Table 2
``marital``           codes 1..5 in the order of the review's Table 1
``puma``              Public Use Microdata Area, 44 codes 101..144
====================  =========================================================

whose cross-classification has 2 * 92 * 9 * 5 * 44 = 364,320 possible cells. It is
synthetic: no record describes a real person (the names are built from short generic
lists), but its joint structure is realistic enough that the cell profile over the keys is
close to the paper's (25,406 non-empty cells, 13,662 singletons, 4,777 doubletons).

What the structure models
-------------------------
* **Marital status and race** are allocated with the *exact* counts of Tables 1 and 2
  (59,033 records in total for both), then paired at random.
* **Age given marital status** follows a population pyramid times an age profile for each
  status: children (< 15) are always never married, married people are mostly 25-70,
  widowed people are mostly over 65, divorced and separated people are middle-aged. So age
  and marital status are strongly dependent, as in a census.
* **Sex given marital status and age**: about even, with more women at old ages and among
  the widowed, divorced and separated.
* **PUMA given race**: PUMA sizes are skewed (log-normal), and each race group has its
  own geographic affinity (residential concentration): the White and Black populations
  are spread unevenly over the areas, and the small groups are concentrated in a few
  areas. This concentration is what keeps the number of non-empty cells near the paper's.
* **Non-key columns**: ``person_id`` (unique, ``P0000001``...), ``full_name`` (a direct
  identifier, which is never released), ``hours_worked`` (0..99, depends on age),
  ``income`` (whole dollars, non-negative, right-skewed, depends on age, sex and hours),
  ``weight`` (integer survey weight 50..300).

Everything is vectorized (loops run over categories only) and driven by one
``numpy.random.default_rng(seed)`` stream in a fixed order, so the output is a pure
function of ``(n, seed)`` and the CSV written by :func:`write_census_sample` is
byte-identical across runs and platforms.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "AGES",
    "DEFAULT_N",
    "DEFAULT_SEED",
    "KEY_VARIABLES",
    "MARITAL_COUNTS",
    "MARITAL_LABELS",
    "PAPER_PROFILE",
    "PUMAS",
    "RACE_COUNTS",
    "RACE_LABELS",
    "SAMPLE_FILENAME",
    "HOUSEHOLD_KEYS",
    "PERSON_KEYS",
    "cell_profile",
    "generate_census_sample",
    "generate_household_sample",
    "write_census_sample",
]

DEFAULT_N: int = 59_033
DEFAULT_SEED: int = 20180601
SAMPLE_FILENAME: str = "census_sample.csv"

#: Key variables of the NZY example, in the order used for the cross-classification.
KEY_VARIABLES: tuple[str, ...] = ("sex", "age", "race", "marital", "puma")

#: Table 1 of the review (original data), codes 1..5 in this order.
MARITAL_LABELS: tuple[str, ...] = (
    "Married",
    "Widowed",
    "Divorced",
    "Separated",
    "Never married",
)
MARITAL_COUNTS: tuple[int, ...] = (24688, 3156, 4742, 1040, 25407)

#: Table 2 of the review (original data), codes 1..9 in this order.
RACE_LABELS: tuple[str, ...] = (
    "White",
    "Black",
    "American Indian alone",
    "Alaska Native alone",
    "American Indian & Alaska Native",
    "Asian",
    "Native Hawaiian & other Pacific Islander",
    "Some other race alone",
    "Two or more races",
)
RACE_COUNTS: tuple[int, ...] = (37201, 15239, 97, 1, 42, 3461, 20, 1349, 1623)

AGES: np.ndarray = np.arange(92)  # 0..91, 91 = "91 or older"
PUMAS: np.ndarray = np.arange(101, 145)  # 44 areas

#: Cell profile over the five keys reported by NZY for their 59,033-person file.
PAPER_PROFILE: dict[str, int] = {
    "n": 59_033,
    "non_empty_cells": 25_406,
    "singletons": 13_662,
    "doubletons": 4_777,
    "possible_cells": 364_320,
}

COLUMNS: tuple[str, ...] = (
    "person_id",
    "full_name",
    "sex",
    "age",
    "race",
    "marital",
    "puma",
    "income",
    "hours_worked",
    "weight",
)

_FIRST_MALE = np.array(
    ["James", "John", "Robert", "Michael", "William", "David", "Richard", "Joseph",
     "Thomas", "Charles", "Daniel", "Matthew", "Anthony", "Mark", "Steven", "Paul",
     "Andrew", "Kevin", "Brian", "George", "Luis", "Carlos", "Wei", "Jamal"]
)  # fmt: skip
_FIRST_FEMALE = np.array(
    ["Mary", "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan", "Jessica",
     "Sarah", "Karen", "Nancy", "Lisa", "Betty", "Sandra", "Ashley", "Emily", "Donna",
     "Michelle", "Carol", "Amanda", "Maria", "Rosa", "Mei", "Aisha"]
)  # fmt: skip
_LAST = np.array(
    ["Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis",
     "Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson",
     "Thomas", "Taylor", "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson",
     "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson", "Walker",
     "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores"]
)  # fmt: skip

# --- structure parameters (tuned so the cell profile is close to the paper's) ----------
# Log-normal spread of the PUMA sizes.
_PUMA_SIZE_SIGMA = 0.35
# Log-normal spread of each race group's affinity to the PUMAs (race codes 1..9): White
# people are spread fairly evenly, Black people less so, the smaller groups are
# concentrated in a few areas. (Race 4 has a single person, so its value is irrelevant.)
_RACE_AFFINITY_SIGMA = (0.3, 0.6, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5)


def _age_pyramid() -> np.ndarray:
    """Unnormalized population by single year of age 0..91 (91 = 91+)."""
    a = AGES.astype(float)
    base = 1.35 - 0.0025 * a  # gently declining cohort sizes
    survival = 1.0 / (1.0 + np.exp((a - 80.0) / 6.0))  # mortality at old ages
    pyramid = base * survival
    pyramid[91] += pyramid[91] * 4.0  # open-ended top class
    return pyramid


def _logistic(a: np.ndarray, centre: float, scale: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(a - centre) / scale))


def _age_weights_by_marital() -> list[np.ndarray]:
    """Age distribution (probabilities over 0..91) for each marital code 1..5."""
    a = AGES.astype(float)
    pyramid = _age_pyramid()
    adult = (a >= 15).astype(float)
    ever = _logistic(a, 27.0, 4.0) * 0.92 * adult  # ever married by age
    widow = _logistic(a, 76.0, 7.0)  # widowed share among the ever married
    div = np.exp(-0.5 * ((a - 52.0) / 14.0) ** 2)  # divorced share profile
    sep = np.exp(-0.5 * ((a - 40.0) / 11.0) ** 2)  # separated share profile
    married_share = ever * (1.0 - 0.85 * widow) * (1.0 - 0.18 * div - 0.05 * sep)
    profiles = [
        married_share,
        ever * widow * 0.85,
        ever * div * 0.18 * (1.0 - widow),
        ever * sep * 0.05 * (1.0 - widow),
        1.0 - ever,
    ]
    weights = []
    for prof in profiles:
        w = np.clip(prof, 0.0, None) * pyramid
        weights.append(w / w.sum())
    return weights


def _exact_codes(counts: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Codes 1..len(counts) repeated with exactly the given counts, in random order."""
    codes = np.repeat(np.arange(1, len(counts) + 1), counts)
    return rng.permutation(codes)


def _scaled_counts(counts: Sequence[int], n: int) -> np.ndarray:
    """Integer counts summing to ``n`` proportional to ``counts`` (largest remainder)."""
    c = np.asarray(counts, dtype=np.int64)
    total = int(c.sum())
    if n == total:
        return c.copy()
    quota = c * n / total
    out = np.floor(quota).astype(np.int64)
    short = n - int(out.sum())
    order = np.argsort(-(quota - out), kind="stable")
    out[order[:short]] += 1
    return out


def _marital_and_age(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Marital status 1..5 with exact (scaled) counts, in code order, and age given marital
    status (draws: one ``choice`` per status)."""
    marital_counts = _scaled_counts(MARITAL_COUNTS, n)
    marital = np.repeat(np.arange(1, 6), marital_counts)
    age = np.empty(n, dtype=np.int64)
    start = 0
    for count, w in zip(marital_counts, _age_weights_by_marital(), strict=True):
        age[start : start + count] = rng.choice(AGES, size=count, p=w)
        start += count
    return marital, age


def _sex(a: np.ndarray, marital: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sex (1 male, 2 female) given age and marital status: P(female) = 0.49 + 0.17
    logistic((a - 78) / 6) + a shift for widowed, divorced, separated, at most 0.95."""
    p_female = 0.49 + 0.17 * _logistic(a, 78.0, 6.0)
    p_female = p_female + np.select(
        [marital == 2, marital == 3, marital == 4], [0.27, 0.07, 0.08], 0.0
    )
    return np.where(rng.random(a.size) < np.clip(p_female, 0.0, 0.95), 2, 1)


def _puma(race: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """PUMA given race: skewed sizes (lognormal) times a per-race geographic affinity."""
    size = rng.lognormal(0.0, _PUMA_SIZE_SIGMA, size=PUMAS.size)
    puma = np.empty(race.size, dtype=np.int64)
    for code, sigma in enumerate(_RACE_AFFINITY_SIGMA, start=1):
        affinity = rng.lognormal(0.0, sigma, size=PUMAS.size)
        w = size * affinity
        members = np.flatnonzero(race == code)
        puma[members] = rng.choice(PUMAS, size=members.size, p=w / w.sum())
    return puma


def _hours_worked(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Weekly hours given age: works with P = 0.78 logistic((a - 19) / 2) (1 - logistic((a -
    64) / 3.5)) + 0.04 from 16 on; part-time N(20, 7), else N(42, 8), rounded into 1..99."""
    n = a.size
    p_work = 0.78 * _logistic(a, 19.0, 2.0) * (1.0 - _logistic(a, 64.0, 3.5)) + 0.04
    works = (a >= 16) & (rng.random(n) < p_work)
    part_time = rng.random(n) < 0.12 + 0.35 * ((a < 23) | (a >= 65))
    hours = np.where(part_time, rng.normal(20.0, 7.0, size=n), rng.normal(42.0, 8.0, size=n))
    hours = np.clip(np.rint(hours), 1, 99).astype(np.int64)
    return np.where(works, hours, 0)


def _income(a: np.ndarray, sex: np.ndarray, hours_worked: np.ndarray,
            rng: np.random.Generator) -> np.ndarray:
    """Income given age, sex and hours (whole dollars, right-skewed): lognormal earnings times
    (hours / 40)^0.8, plus pensions from 62 and other income of 10% of adults; 0 below 15."""
    n = a.size
    log_mu = 10.1 + 0.9 * np.exp(-0.5 * ((a - 50.0) / 15.0) ** 2) - 0.25 * (sex == 2)
    earned = np.exp(rng.normal(log_mu, 0.75)) * (hours_worked / 40.0) ** 0.8
    other = np.where(a >= 62, np.exp(rng.normal(9.6, 0.6, size=n)), 0.0)
    other = np.where((a >= 18) & (rng.random(n) < 0.10), other + rng.exponential(3000.0, n), other)
    income = np.where(a < 15, 0.0, earned + other)
    return np.minimum(np.rint(income), 999_999).astype(np.int64)


def _full_names(sex: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(first name by sex, last name at random): the direct identifier."""
    first_idx = rng.integers(0, _FIRST_MALE.size, size=sex.size)
    first = np.where(sex == 1, _FIRST_MALE[first_idx], _FIRST_FEMALE[first_idx])
    return first, _LAST[rng.integers(0, _LAST.size, size=sex.size)]


def generate_census_sample(n: int = DEFAULT_N, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Generate the census-like demo microdata (see the module docstring).

    With the default ``n`` the race and marital-status counts equal Tables 1 and 2 of the
    review exactly; for another ``n`` they are scaled by largest-remainder allocation.
    The result is a pure function of ``(n, seed)``.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    rng = np.random.default_rng(seed)
    # the variables in this order: each draws from rng in turn
    marital, age = _marital_and_age(n, rng)
    race = _exact_codes(_scaled_counts(RACE_COUNTS, n), rng)  # exact counts, paired at random
    a = age.astype(float)
    sex = _sex(a, marital, rng)
    puma = _puma(race, rng)
    hours_worked = _hours_worked(a, rng)
    income = _income(a, sex, hours_worked, rng)
    weight = np.clip(np.rint(rng.lognormal(np.log(110.0), 0.35, size=n)), 50, 300)  # survey
    weight = weight.astype(np.int64)
    first, last = _full_names(sex, rng)

    # random record order, then ids in file order
    order = rng.permutation(n)
    frame = pd.DataFrame(
        {
            "full_name": pd.Series(first[order]) + " " + pd.Series(last[order]),
            "sex": sex[order],
            "age": age[order],
            "race": race[order],
            "marital": marital[order],
            "puma": puma[order],
            "income": income[order],
            "hours_worked": hours_worked[order],
            "weight": weight[order],
        }
    )
    frame.insert(0, "person_id", "P" + pd.Series(np.arange(1, n + 1)).astype(str).str.zfill(7))
    for col in ("sex", "age", "race", "marital", "puma", "income", "hours_worked", "weight"):
        frame[col] = frame[col].astype(np.int64)
    return frame[list(COLUMNS)]


def write_census_sample(dir: Path, *, force: bool = False) -> Path:
    """Write the default sample to ``dir / census_sample.csv`` and return the path.

    Comma-separated, UTF-8, header row, no index, ``\\n`` line endings. The directory is
    created if needed. The bytes depend only on the generator's defaults. A file there with
    other bytes is replaced only with ``force`` (``OverwriteError`` otherwise); the file is
    written by temp file + rename.
    """
    from sdc.io.guard import refuse_overwrite, write_atomic

    path = Path(dir).expanduser() / SAMPLE_FILENAME
    data = generate_census_sample().to_csv(index=False, lineterminator="\n").encode("utf-8")
    if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
        return path  # the same bytes: nothing to overwrite
    refuse_overwrite(path, force=force, option="--out")
    write_atomic(path, data)
    return path


def cell_profile(frame: pd.DataFrame, keys: Sequence[str]) -> dict[str, int]:
    """Cell profile of ``frame`` over the cross-classification of ``keys``.

    Returns ``n`` (records), ``non_empty_cells``, ``singletons`` (cells with frequency 1),
    ``doubletons`` (frequency 2) and ``possible_cells``: the product over the keys of the
    number of distinct values observed (for the demo file 2 * 92 * 9 * 5 * 44 = 364,320).
    Missing key values count as a category of their own.
    """
    keys = list(keys)
    if not keys:
        raise ValueError("keys must name at least one column")
    counts = frame.groupby(keys, dropna=False, sort=False).size()
    possible = 1
    for key in keys:
        possible *= int(frame[key].nunique(dropna=False))
    return {
        "n": int(len(frame)),
        "non_empty_cells": int(counts.size),
        "singletons": int((counts == 1).sum()),
        "doubletons": int((counts == 2).sum()),
        "possible_cells": possible,
    }


# -- a household file -------------------------------------------------------------------------
#: Household-level keys of :func:`generate_household_sample` (constant within a household).
HOUSEHOLD_KEYS: tuple[str, ...] = ("region", "urbrur", "dwelling")
#: Person-level keys of :func:`generate_household_sample`.
PERSON_KEYS: tuple[str, ...] = ("sex", "age", "relation")
_HH_SIZE_P = np.array([0.28, 0.34, 0.15, 0.13, 0.06, 0.025, 0.01, 0.005])  # sizes 1..8


def generate_household_sample(n: int = 100_000, seed: int = DEFAULT_SEED,
                              n_regions: int = 40) -> pd.DataFrame:
    """A census-like household file of about ``n`` persons (households kept whole).

    Columns: ``hh_id`` (``H0000001``...), ``person_id``, household-level ``region``
    (1..n_regions, skewed sizes), ``urbrur`` (1 urban, 2 rural; depends on the region),
    ``dwelling`` (1..6: house, flat, ..., rarer types), ``water`` (1..5, a non-key household
    column), ``hh_weight`` (household weight, a non-key household column); person-level
    ``relation`` (1 head, 2 spouse, 3 child, 4 other relative, 5 non-relative), ``sex`` (1, 2),
    ``age`` (0..95: heads 18+, spouses near the head's age, children younger than the head),
    ``income`` (persons 15+). Household sizes 1..8 with a census-like distribution.

    Vectorized (loops over household sizes only) and a pure function of ``(n, seed,
    n_regions)``; the persons of a household are consecutive rows.
    """
    rng = np.random.default_rng(seed)
    n_h = max(1, int(round(n / float((_HH_SIZE_P * np.arange(1, 9)).sum()))))
    size = rng.choice(np.arange(1, 9), size=n_h, p=_HH_SIZE_P / _HH_SIZE_P.sum())
    reg_p = rng.lognormal(0.0, 0.8, n_regions)
    region = rng.choice(np.arange(1, n_regions + 1), size=n_h, p=reg_p / reg_p.sum())
    rural_share = rng.uniform(0.1, 0.7, n_regions)
    urbrur = np.where(rng.random(n_h) < rural_share[region - 1], 2, 1)
    dwelling = rng.choice(np.arange(1, 7), size=n_h, p=[0.45, 0.35, 0.1, 0.06, 0.03, 0.01])
    water = np.where(urbrur == 1, rng.choice([1, 2], n_h, p=[0.85, 0.15]),
                     rng.choice(np.arange(1, 6), n_h, p=[0.3, 0.2, 0.2, 0.2, 0.1]))
    hh_weight = np.round(rng.uniform(50, 400, n_h), 1)
    head_age = np.clip(np.round(rng.normal(47, 15, n_h)), 18, 95).astype(np.int64)

    hh = np.repeat(np.arange(n_h), size)
    pos = np.arange(hh.size) - np.repeat(np.cumsum(size) - size, size)  # 0 = head
    m = hh.size
    couple = rng.random(n_h) < np.where(size >= 2, 0.75, 0.0)
    relation = np.where(pos == 0, 1, 3)
    relation = np.where((pos == 1) & couple[hh], 2, relation)
    other = (pos >= 1) & (relation == 3) & (rng.random(m) < 0.12)
    relation = np.where(other, np.where(rng.random(m) < 0.7, 4, 5), relation)
    head_sex = rng.choice([1, 2], n_h, p=[0.62, 0.38])
    sex = np.where(pos == 0, head_sex[hh], rng.choice([1, 2], m))
    sex = np.where(relation == 2, 3 - head_sex[hh], sex)
    ha = head_age[hh]
    age = np.where(relation == 1, ha, 0)
    age = np.where(relation == 2, np.clip(ha + np.round(rng.normal(-2, 4, m)), 16, 95), age)
    child_gap = np.round(rng.uniform(18, 40, m))
    age = np.where(relation == 3, np.clip(ha - child_gap, 0, 95), age)
    age = np.where(relation >= 4, rng.integers(0, 90, m), age).astype(np.int64)
    income = np.where(age >= 15, np.round(rng.lognormal(9.8, 0.9, m)), 0).astype(np.int64)
    return pd.DataFrame({
        "hh_id": np.char.add("H", np.char.zfill((hh + 1).astype(str), 7)),
        "person_id": np.char.add("P", np.char.zfill(np.arange(1, m + 1).astype(str), 8)),
        "region": region[hh], "urbrur": urbrur[hh], "dwelling": dwelling[hh],
        "water": water[hh], "hh_weight": hh_weight[hh],
        "relation": relation, "sex": sex, "age": age, "income": income,
    })
