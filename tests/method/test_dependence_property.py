"""Property-based search for relations the dependence check misses (issue 46 item 1;
docs/METHOD.md, "Relations an intruder computes"): hypothesis generates a non-key column (or two)
related to age (monotone transforms, running totals in any order, ratios and products of two
columns, birth dates in common text forms) with or without noise; each is either refused by the
check or, released, gives an intruder written here at most xi.

The intruder knows the relation (``decode``: the generator's own inverse, e.g. the differences of
the public file sorted by a running total) and a target's key values; among the records released
in the target's cell it keeps those whose decoded age (rounded) is the target's and picks one.
Its success, given that it finds a record, averaged over the targets of sensitive cells, must be
at most xi + 3 standard errors of that mean (the SE from the targets' own spread: a bound from
the variance, so a fair release fails this with probability about 0.1% per example).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sdc
from sdc.config.load import parse_config
from sdc.method import dependence as D
from sdc.method.designs import plan_release
from sdc.method.partition import partition_frame

XI = 0.395
N = 2000
REF = np.datetime64("2025-01-01")
FORMATS = ["%d.%m.%Y", "%m/%d/%Y", "%b %d %Y", "%d %B %Y", "%Y-%m-%d", "%Y/%m/%d", "%d-%b-%Y"]


def base(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": np.arange(N) * 7 + 3, "sex": rng.integers(1, 3, N),
                         "age": rng.integers(16, 86, N), "region": rng.integers(1, 9, N),
                         "hours": rng.integers(1, 80, N)})


def config() -> object:
    return parse_config({
        "name": "prop", "input": {"path": "x.parquet", "format": "parquet", "id_column": "id"},
        "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [16, 85]},
                          "region": {"range": [1, 8]}},
        "partition": {"sex": "as_is", "age": {"bands": [16, 30, 45, 60, 75]}},
        "risk": {"xi": XI, "theta": "theorem", "small_blocks": "merge"}, "seed": 1,
        "output": {"dir": "rel", "formats": ["parquet"]}})


def _sorted_diff(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="stable")
    s = v[order]
    out = np.empty(len(s))
    out[order] = np.r_[np.nan, np.diff(s)]
    return out


@st.composite
def relations(draw):
    """(name, make(ages, rng) -> {column: values}, decode(public) -> ages)."""
    kind = draw(st.sampled_from(["monotone", "cumsum", "ratio", "product", "date"]))
    noise = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3, 3.0]))
    a = draw(st.floats(0.5, 50.0))
    b = draw(st.floats(-1000.0, 1000.0))
    if kind == "monotone":
        form = draw(st.sampled_from(["affine", "cube", "exp", "log", "neg"]))
        f, inv = {"affine": (lambda x: a * x + b, lambda y: (y - b) / a),
                  "cube": (lambda x: x ** 3, np.cbrt),
                  "exp": (lambda x: np.exp(x / 8.0), lambda y: 8.0 * np.log(y)),
                  "log": (lambda x: a * np.log(x), lambda y: np.exp(y / a)),
                  "neg": (lambda x: -x, lambda y: -y)}[form]

        def make(age, rng):
            return {"c": f(age.astype(float)) * (1 + noise * 0.01 * rng.standard_normal(age.size))}

        return f"{form} noise={noise}", make, lambda p: inv(p["c"].to_numpy())
    if kind == "cumsum":
        def make(age, rng):
            perm = rng.permutation(age.size)
            inc = a * age + abs(b) + noise * rng.standard_normal(age.size)
            out = np.empty(age.size)
            out[perm] = np.cumsum(inc[perm])
            return {"c": out}

        return (f"cumsum a={a:.2f} noise={noise}", make,
                lambda p: (_sorted_diff(p["c"].to_numpy()) - abs(b)) / a)
    if kind in ("ratio", "product"):
        integer = draw(st.booleans())

        def make(age, rng):
            x = (rng.integers(1000, 10 ** 6, age.size) if integer
                 else rng.uniform(1.0, 1000.0, age.size))
            g = (age + 0.5) * (1 + noise * 0.01 * rng.standard_normal(age.size))
            return {"x": x, "y": x * g if kind == "ratio" else g / x}

        def decode(p):
            x, y = p["x"].to_numpy(float), p["y"].to_numpy(float)
            return (y / x if kind == "ratio" else x * y) - 0.5

        return f"{kind} integer={integer} noise={noise}", make, decode
    fmt = draw(st.sampled_from(FORMATS))
    jitter = int(noise * 300)

    def make(age, rng):
        days = (age * 365.25 + rng.integers(0, 365 + jitter, age.size)).astype("timedelta64[D]")
        return {"c": pd.to_datetime(REF - days).strftime(fmt).to_numpy()}

    def decode(p):
        d = pd.to_datetime(p["c"], format=fmt).to_numpy().astype("datetime64[D]")
        return np.floor((REF - d).astype(np.int64) / 365.25)

    return f"date {fmt!r} jitter={jitter}", make, decode


def intruder(res, decode, age: np.ndarray) -> tuple[float, float]:
    """The filter intruder's success on the released file (see the module docstring)."""
    rel = res.released.released_cell
    orig = res.released.record_cell
    public = res.frame.reset_index(drop=True)
    with np.errstate(all="ignore"):
        got = np.asarray(decode(public), dtype=np.float64)
    known = np.isfinite(got)
    d = np.where(known, np.clip(np.round(got), -1, 200), -1).astype(np.int64)
    span = 202
    n_cells = res.cells.n_cells
    cand = np.bincount(rel * span + d + 1, minlength=n_cells * span)
    wild = np.bincount(rel[~known], minlength=n_cells)
    n_comp = cand[orig * span + age + 1] + wild[orig]
    own = (rel == orig) & (~known | (d == age))
    target = (res.cells.frequency[orig] * XI < 1) & (n_comp > 0)
    s = np.where(own, 1.0 / np.maximum(n_comp, 1), 0.0)[target]
    return float(s.mean()), float(s.std(ddof=1) / math.sqrt(s.size))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(relations(), st.integers(0, 1000))
def test_no_generated_relation_the_check_passes_gives_more_than_xi(rel, file_seed):
    name, make, decode = rel
    f = base(file_seed)
    rng = np.random.default_rng(file_seed + 1)
    age = f["age"].to_numpy()
    for c, v in make(age, rng).items():
        f[c] = v
    cfg = config()
    plan = plan_release(partition_frame(f, cfg), cfg)
    figures = D.frame_dependence(f, plan, cfg)
    if D.dependence_error(figures, plan, cfg) is not None:
        event(f"refused: {name.split()[0]}")
        return  # refused: nothing is released
    event(f"released: {name.split()[0]}")
    res = sdc.release_frame(f, cfg, seed=file_seed + 7)
    mean, se = intruder(res, decode, age)
    assert mean <= XI + 3 * se, (name, mean, se, [g.as_dict() for g in figures])


def _refused_or_harmless(f: pd.DataFrame, decode) -> None:
    """The check refuses ``f`` (keys of :func:`config`), or the intruder reading age through
    ``decode`` on its release succeeds at most xi + 3 SE."""
    cfg = config()
    plan = plan_release(partition_frame(f, cfg), cfg)
    figures = D.frame_dependence(f, plan, cfg)
    if D.dependence_error(figures, plan, cfg) is not None:
        return  # refused: nothing is released
    res = sdc.release_frame(f, cfg, seed=7)
    mean, se = intruder(res, decode, f["age"].to_numpy())
    assert mean <= XI + 3 * se, (mean, se, [g.as_dict() for g in figures])


def test_a_running_total_of_half_the_age_is_refused_or_harmless() -> None:
    """The example the property test above failed on, fixed: cumsum a = 0.5, noise 0.3 (the
    sorted differences are age give or take a year: no run of one age, runs of a band of ages;
    the intruder 0.51 > xi, the check's figure 0.58, refused)."""
    f = base(0)
    rng = np.random.default_rng(1)
    age = f["age"].to_numpy()
    perm = rng.permutation(age.size)
    inc = 0.5 * age + 0.3 * rng.standard_normal(age.size)
    c = np.empty(age.size)
    c[perm] = np.cumsum(inc[perm])
    f["c"] = c
    _refused_or_harmless(f, lambda p: _sorted_diff(p["c"].to_numpy()) / 0.5)


@pytest.mark.parametrize("sd", [0.6])
def test_a_noisy_copy_of_age_is_refused_or_harmless(sd) -> None:
    """c = age + N(0, sd): released before the check looked for runs of a band of ages, with
    the intruder that rounds c to an age at 0.50 (SE 0.023) for sd 0.6, above xi + 3 SE (this
    test failed then); now refused (figure 0.56; docs/METHOD.md, "Runs of a band")."""
    f = base(0)
    age = f["age"].to_numpy()
    f["c"] = age + sd * np.random.default_rng(1).standard_normal(age.size)
    _refused_or_harmless(f, lambda p: p["c"].to_numpy())
