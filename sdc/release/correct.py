"""A data user's correction for the perturbation, from the public folder alone: MC-SIMEX
(Küchenhoff, Mwalili & Lesaffre 2006, Biometrics 62, 85-96) for a least-squares regression of
an outcome on the dummies of one key, with the key's misclassification matrix P that the
codebook publishes (section *Misclassification by key*, docs/METHOD.md 7.14).

The released key is the original one misclassified by P. MC-SIMEX adds further
misclassification P^lambda (lambda = 0.5, 1, 1.5, 2; P^lambda = V D^lambda V^-1 from P's
eigendecomposition, negative entries clipped and rows renormalized), refits B times per
lambda, fits a quadratic in lambda to the mean coefficients (lambda = 0: the naive fit) and
extrapolates to lambda = -1, where the added misclassification would cancel the release's.

Limits (say them to the user): one key at a time (a moved record changes several keys
together; the others' attenuation stays); the quadratic extrapolant is an approximation
(the original coefficients are recovered in expectation only when it is right); P must have
positive eigenvalues (true for a P close to the identity, as NZY's are: most records keep
their values); the published P is rounded to 3 decimals and misses values of fewer than 10
records (their rows are taken as "kept"). Measured: docs/DATA_USERS.md section 3.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["codebook_matrix", "correct_public", "matrix_power", "mc_simex"]

LAMBDAS = (0.5, 1.0, 1.5, 2.0)


def codebook_matrix(codebook: str, key: str) -> tuple[list[str], np.ndarray]:
    """``(values, P)`` of ``key`` from the codebook's *Misclassification by key* section (the
    full matrix, published for keys of at most 12 values). Raises ``ValueError`` when the
    codebook has no full matrix for the key."""
    at = codebook.find("## Misclassification by key")
    head = f"### `{key}`"
    start = codebook.find(head, at) if at >= 0 else -1
    if start < 0:
        raise ValueError(f"the codebook has no misclassification table of {key!r} (a key "
                         "the release never changes, or not a person file)")
    block = codebook[start + len(head):].split("\n### ", 1)[0].split("\n## ", 1)[0]
    lines = [x for x in block.splitlines() if x.startswith("|")]
    if not lines or not lines[0].startswith("| original \\ released"):
        raise ValueError(f"the codebook publishes no full matrix of {key!r} (only keys of at "
                         "most 12 values get one)")

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    values = [re.sub(r"\\(.)", r"\1", c) for c in cells(lines[0])[1:]]
    rows = [cells(x)[1:] for x in lines[2:]]
    p = np.array([[0.0 if c == "<0.001" else float(c) for c in r] for r in rows])
    return values, p / p.sum(axis=1, keepdims=True)


def matrix_power(p: np.ndarray, lam: float) -> np.ndarray:
    """P^lambda from P's eigendecomposition, negative entries clipped, rows renormalized."""
    w, v = np.linalg.eig(np.asarray(p, dtype=np.float64))
    if np.any(np.real(w) <= 0):
        raise ValueError("the misclassification matrix has an eigenvalue <= 0: MC-SIMEX needs "
                         "a matrix close to the identity")
    out = np.real(v @ np.diag(w.astype(complex) ** lam) @ np.linalg.inv(v))
    out = np.clip(out, 0.0, None)
    return out / out.sum(axis=1, keepdims=True)


def _ols(codes: np.ndarray, y: np.ndarray, k: int, ref: int) -> np.ndarray:
    """OLS of ``y`` on an intercept and the dummies of every code but ``ref``. With every code
    present the fit is closed-form: the intercept is the mean of y over ``ref``'s records and
    each dummy's coefficient its code's mean minus that (one pass over the records instead of
    a least-squares solve of an n x k matrix, ~40 ms at 32,561 records: MC-SIMEX fits
    1 + 4 x b of them; the same coefficients up to rounding). A code with no record (a
    rank-deficient design): the least-squares solution, as before."""
    n = np.bincount(codes, minlength=k) if codes.size and codes.min() >= 0 else np.zeros(0)
    if n.size == k and (n > 0).all():
        mean = np.bincount(codes, weights=y, minlength=k) / n
        return np.concatenate([[mean[ref]], np.delete(mean, ref) - mean[ref]])
    x = np.column_stack([np.ones(y.size)] + [(codes == i).astype(np.float64)
                                             for i in range(k) if i != ref])
    return np.linalg.lstsq(x, y, rcond=None)[0]


def mc_simex(y: np.ndarray, codes: np.ndarray, p: np.ndarray, *, reference: int = 0,
             b: int = 50, seed: int = 0, lambdas: Sequence[float] = LAMBDAS
             ) -> dict[str, np.ndarray]:
    """MC-SIMEX coefficients of ``y ~ dummies(codes)`` (intercept first, then every code but
    ``reference``) with misclassification matrix ``p`` (rows: original code, columns:
    released code). Returns ``naive`` (the fit on the public file), ``corrected`` (the
    extrapolation to lambda = -1), ``lambdas`` and ``means`` (the mean coefficients per
    lambda, 0 first). ``seed`` makes the added misclassification reproducible."""
    y = np.asarray(y, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    k = p.shape[0]
    rng = np.random.default_rng(seed)
    naive = _ols(codes, y, k, reference)
    means = [naive]
    for lam in lambdas:
        cum = np.cumsum(matrix_power(p, lam), axis=1)
        fits = []
        for _ in range(b):
            u = rng.random(codes.size)
            new = np.minimum((u[:, None] > cum[codes]).sum(axis=1), k - 1)
            fits.append(_ols(new, y, k, reference))
        means.append(np.mean(fits, axis=0))
    lam_all = np.array([0.0, *lambdas])
    m = np.array(means)
    corrected = np.array([np.polyval(np.polyfit(lam_all, m[:, i], 2), -1.0)
                          for i in range(m.shape[1])])
    return {"naive": naive, "corrected": corrected, "lambdas": lam_all, "means": m}


def correct_public(folder: Path | str, key: str, outcome: str, *,
                   outcome_value: str | None = None, reference: str | None = None,
                   b: int = 50, seed: int = 0) -> dict[str, Any]:
    """MC-SIMEX of ``outcome ~ key`` from a release's public folder alone (its
    ``codebook.md`` and ``microdata.parquet`` or ``.csv``). ``outcome_value``: regress the
    indicator outcome == that value (a text outcome). ``reference``: the key's reference
    value (default: its most frequent). Returns ``terms``, ``naive``, ``corrected``, ``n``.
    Raises :class:`sdc.errors.InputError` naming what is missing."""
    import pandas as pd

    from sdc.errors import InputError

    folder = Path(folder).expanduser()
    book = folder / "codebook.md"
    if not book.is_file():
        raise InputError(f"{book} not found: give a release's public folder (it holds "
                         "codebook.md and microdata.parquet or microdata.csv)")
    try:
        values, p = codebook_matrix(book.read_text(encoding="utf-8"), key)
    except ValueError as e:
        raise InputError(str(e)) from None
    data = folder / "microdata.parquet"
    if data.is_file():
        frame = pd.read_parquet(data, columns=[key, outcome])
    elif (folder / "microdata.csv").is_file():
        frame = pd.read_csv(folder / "microdata.csv", usecols=[key, outcome], dtype=str)
    else:
        raise InputError(f"no microdata.parquet or microdata.csv in {folder}")
    col = frame[outcome]
    if outcome_value is not None:
        y = (col.astype(str) == outcome_value).to_numpy(np.float64)
    else:
        y = pd.to_numeric(col, errors="coerce").to_numpy(np.float64)
        if np.isnan(y).all():
            raise InputError(f"{outcome!r} is not numeric: give --outcome-value VALUE to "
                             "regress the indicator outcome == VALUE")
    released = frame[key].astype(str).to_numpy()
    code = np.full(released.size, -1, dtype=np.int64)
    for i, v in enumerate(values):   # the codebook names a value "v" or "v (label)"
        name = v.split(" (", 1)[0]
        code[released == name] = i
    keep = (code >= 0) & np.isfinite(y)
    if not keep.any():
        raise InputError(f"no record's {key!r} matches the codebook's values {values[:5]}")
    counts = np.bincount(code[keep], minlength=len(values))
    ref = int(np.argmax(counts)) if reference is None else next(
        (i for i, v in enumerate(values) if v.split(" (", 1)[0] == reference), -1)
    if ref < 0:
        raise InputError(f"reference {reference!r} is not a value of {key!r}: {values}")
    got = mc_simex(y[keep], code[keep], p, reference=ref, b=b, seed=seed)
    terms = ["(intercept)"] + [v for i, v in enumerate(values) if i != ref]
    return {"terms": terms, "naive": got["naive"], "corrected": got["corrected"],
            "n": int(keep.sum()), "reference": values[ref]}
