"""``sdc rr``: randomized-response tools for survey designers (docs/MECHANISMS.md).

Commands
--------
``design``    the minimax t-subset design for ``k`` categories at privacy level
              ``gamma = e^epsilon`` (Chai 2019 Theorem 6.4, Table 1), next to the max-trace
              design (Theorem 6.1) for comparison.
``simulate``  draw randomized responses from a given true distribution (seeded) into a CSV.
``estimate``  estimate the true distribution and standard errors from a response CSV.

CSV formats written by ``simulate`` and read by ``estimate``:

* minimax design: one 0/1 column per category, ``z1 .. zk``; each row has exactly ``q`` ones
  (the respondent's reported subset);
* max-trace design: one column ``response`` with the reported category code ``0 .. k-1``.

Mounted in the main CLI as ``app.add_typer(rr_app, name="rr")``.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sdc.cli.ranges import in_range


class _Lazy:
    """A module imported on first use: ``sdc --help`` and ``sdc release`` do not pay for
    numpy, pandas and scipy (the mechanisms) that only the ``rr`` commands need."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):  # type: ignore[no-untyped-def]
        import importlib

        return getattr(importlib.import_module(self._name), attr)


np = _Lazy("numpy")
pd = _Lazy("pandas")
_mech = _Lazy("sdc.mechanisms")


rr_app = typer.Typer(
    help="Randomized-response survey design: minimax designs, simulation, estimation.",
    no_args_is_help=True,
    add_completion=False,
)


class DesignName(StrEnum):
    minimax = "minimax"
    max_trace = "max-trace"


class _UserError(Exception):
    """A problem with the user's input: printed as one line, exit code 2."""


def _fail(msg: str) -> typer.Exit:
    typer.echo(f"Error: {msg}", err=True)
    return typer.Exit(code=2)


def _gamma_from(epsilon: float | None, gamma: float | None) -> float:
    if (epsilon is None) == (gamma is None):
        raise _UserError("give exactly one of --epsilon and --gamma (gamma = e^epsilon)")
    if gamma is not None:
        if not gamma > 1:
            raise _UserError(f"--gamma must be > 1 (got {gamma})")
        return float(gamma)
    assert epsilon is not None
    if not epsilon > 0:
        raise _UserError(f"--epsilon must be > 0 (got {epsilon})")
    return math.exp(epsilon)


def _run(fn):  # type: ignore[no-untyped-def]
    """Turn library/user errors into one readable line and exit code 2."""
    try:
        return fn()
    except (_UserError, ValueError, FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _fail(msg) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a full disk, a permission, a bug: one paragraph, never a traceback
        from sdc.cli.common import describe, state

        if state["debug"]:
            raise
        code, msg = describe(exc)
        typer.echo(f"Error: {msg}", err=True)
        raise typer.Exit(code=code) from None


#: the valid ranges (larger designs overflow the binomial counts or the float exponent)
MAX_K, MAX_EPSILON, MAX_N, MAX_SEED = 1000, 90.0, 10_000_000, 2**63 - 1
MAX_GAMMA = math.exp(MAX_EPSILON)
EpsOpt = Annotated[float | None, typer.Option(
    "--epsilon", "-e", help=f"LDP budget; gamma = e^epsilon; in (0, {MAX_EPSILON:g}].",
    callback=in_range(0, MAX_EPSILON, lo_open=True, what="gamma = e^epsilon"))]
GammaOpt = Annotated[float | None, typer.Option(
    "--gamma", "-g", help=f"Privacy level (parity bound); in (1, {MAX_GAMMA:.4g}].",
    callback=in_range(1, MAX_GAMMA, lo_open=True, what="gamma = e^epsilon"))]
KRange = in_range(2, MAX_K, integer=True, what="number of categories")


@rr_app.command()
def design(
    k: Annotated[int, typer.Option("--k", "-k", help=f"Number of categories, 2..{MAX_K}.",
                                   callback=KRange)],
    epsilon: EpsOpt = None,
    gamma: GammaOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Print the minimax design (Chai 2019 Thm 6.4) and the max-trace design for comparison."""

    def go() -> None:
        g = _gamma_from(epsilon, gamma)
        if k < 2:
            raise _UserError(f"--k must be >= 2 (got {k})")
        d = _mech.minimax_design(k, g)
        P1 = _mech.max_trace_design(k, g)
        out = {
            "k": k,
            "gamma": g,
            "epsilon": math.log(g),
            "minimax": {
                "q": d.q,
                "n_outputs": d.n_outputs,
                "keep_probability": d.keep_probability,
                "small_value": d.small_value,
                "large_value": d.large_value,
                "estimator_slope_c": d.slope,
                "estimator_intercept_d": d.intercept,
                "minimax_risk": d.risk,
            },
            "max_trace": {
                "p_keep": float(P1[0, 0]),
                "p_other": float(P1[1, 0]) if k > 1 else 0.0,
                "trace": float(np.trace(P1)),
                "trace_bound": _mech.max_trace_bound(k, g),
                "worst_case_risk": _mech.max_trace_risk(k, g),
            },
        }
        if as_json:
            typer.echo(json.dumps(out, indent=2))
            return
        console = Console()
        t = Table(title=f"Minimax design, k={k}, gamma={g:.6g} (epsilon={math.log(g):.6g})")
        t.add_column("quantity")
        t.add_column("value", justify="right")
        t.add_column("meaning")
        t.add_row("q", str(d.q), "ones in every reported vector (eq. 6.9)")
        t.add_row("outputs", f"{d.n_outputs:,}", "binom(k, q) possible responses")
        t.add_row("p", f"{d.keep_probability:.6g}", "P(report own category) = q g/(q g + k - q)")
        t.add_row("small / large", f"{d.small_value:.4g} / {d.large_value:.4g}", "transition probabilities s_q, g s_q (eq. 6.16)")
        t.add_row("c", f"{d.slope:.6g}", "estimator slope: pi_hat = c V/n + d (eq. 7.2)")
        t.add_row("d", f"{d.intercept:.6g}", "estimator intercept")
        t.add_row("minimax risk", f"{d.risk:.6g}", "n x max total variance, (k-1)^2/(f(q)-k)")
        console.print(t)
        m = Table(title="Max-trace design (for comparison, Thm 6.1)")
        m.add_column("quantity")
        m.add_column("value", justify="right")
        m.add_row("p_ii", f"{P1[0, 0]:.6g}")
        m.add_row("p_ij", f"{P1[1, 0]:.6g}")
        m.add_row("trace = bound g k/(g+k-1)", f"{_mech.max_trace_bound(k, g):.6g}")
        m.add_row("worst-case risk (P^-1 estimator)", f"{_mech.max_trace_risk(k, g):.6g}")
        console.print(m)

    _run(go)


def _parse_probs(probs: str) -> np.ndarray:
    try:
        p = np.array([float(x) for x in probs.split(",") if x.strip() != ""])
    except ValueError:
        raise _UserError(f"--probs must be comma-separated numbers (got {probs!r})") from None
    if p.size < 2 or np.any(p < 0) or abs(p.sum() - 1) > 1e-6:
        raise _UserError(f"--probs must have >= 2 non-negative entries summing to 1 (got {probs!r})")
    return p / p.sum()


@rr_app.command()
def simulate(
    probs: Annotated[str, typer.Option("--probs", "-p", help="True distribution, e.g. '0.5,0.3,0.2'.")],
    n: Annotated[int, typer.Option("--n", "-n", help=f"Number of respondents, 1..{MAX_N:,}.",
                                   callback=in_range(1, MAX_N, integer=True,
                                                     what="number of respondents"))],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write.")],
    epsilon: EpsOpt = None,
    gamma: GammaOpt = None,
    design_name: Annotated[DesignName, typer.Option("--design", help="minimax or max-trace.")] = DesignName.minimax,
    seed: Annotated[int, typer.Option("--seed", help="Seed of numpy's default_rng, 0..2^63-1.",
                                      callback=in_range(0, MAX_SEED, integer=True))] = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")]
    = False,
) -> None:
    """Draw n randomized responses from a true distribution (seeded) and write them as CSV."""

    def go() -> None:
        from sdc.io.guard import refuse_overwrite

        refuse_overwrite(out, force=force, option="--out")  # before any work
        g = _gamma_from(epsilon, gamma)
        p = _parse_probs(probs)
        if n < 1:
            raise _UserError(f"--n must be >= 1 (got {n})")
        k = p.size
        rng = np.random.default_rng(seed)
        x = rng.choice(k, size=n, p=p)
        if design_name is DesignName.minimax:
            q = _mech.minimax_q(k, g)
            Z = _mech.sample_tsubset(x, k, q, g, rng)
            df = pd.DataFrame(Z, columns=[f"z{j + 1}" for j in range(k)])
        else:
            df = pd.DataFrame({"response": _mech.sample_max_trace(x, k, g, rng)})
        from sdc.io.guard import refuse_overwrite, write_atomic

        refuse_overwrite(out, force=force, option="--out")
        write_atomic(out, df.to_csv(index=False, lineterminator="\n"))
        typer.echo(f"wrote {n} {design_name.value} responses (k={k}, gamma={g:.6g}, seed={seed}) to {out}")

    _run(go)


def _estimate(df: pd.DataFrame, g: float, k_opt: int | None) -> dict:
    if list(df.columns) == ["response"]:
        if k_opt is None:
            raise _UserError("--k is required for max-trace responses (column 'response')")
        z = df["response"].to_numpy()
        if not np.issubdtype(z.dtype, np.integer):
            raise _UserError("column 'response' must hold integer category codes")
        est, cov = _mech.estimate_max_trace(z, k_opt, g)
        return {"design": "max-trace", "k": k_opt, "n": int(z.size), "estimate": est, "se": np.sqrt(np.diag(cov))}
    Z = df.to_numpy()
    k = Z.shape[1]
    if k < 2 or not np.all((Z == 0) | (Z == 1)):
        raise _UserError("minimax responses must be k >= 2 columns of 0/1 (or one 'response' column)")
    if k_opt is not None and k_opt != k:
        raise _UserError(f"--k={k_opt} but the file has {k} response columns")
    t = Z.sum(axis=1)
    if not np.all(t == t[0]) or not 1 <= t[0] <= k - 1:
        raise _UserError("every response row must contain the same number q of ones, 1 <= q <= k-1")
    q = int(t[0])
    if q != _mech.minimax_q(k, g):
        raise _UserError(f"rows have {q} ones but the minimax design for k={k}, gamma={g:.6g} has q={_mech.minimax_q(k, g)}; check --epsilon/--gamma")
    c, d = _mech.tsubset_constants(k, q, g)
    nn = Z.shape[0]
    est = c * Z.mean(axis=0) + d
    # Var(pi_hat_j) = c^2 Var(Z_j)/n (section 7.1); Var(Z_j) by the unbiased sample variance
    var_z = Z.var(axis=0, ddof=1) if nn > 1 else np.full(k, np.nan)
    return {"design": "minimax", "k": k, "q": q, "n": int(nn), "estimate": est, "se": abs(c) * np.sqrt(var_z / nn)}


@rr_app.command()
def estimate(
    csv: Annotated[Path, typer.Argument(help="CSV of responses written by 'sdc rr simulate' (or collected).")],
    epsilon: EpsOpt = None,
    gamma: GammaOpt = None,
    k: Annotated[int | None, typer.Option("--k", "-k", help=f"Categories (needed for max-trace "
                                          f"CSVs), 2..{MAX_K}.", callback=KRange)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Estimate the true distribution and its standard errors from collected responses."""

    def go() -> None:
        g = _gamma_from(epsilon, gamma)
        if not csv.exists():
            raise _UserError(f"file not found: {csv}")
        df = pd.read_csv(csv)
        if df.shape[0] < 1:
            raise _UserError(f"{csv} has no responses")
        res = _estimate(df, g, k)
        if as_json:
            payload = {key: (val.tolist() if isinstance(val, np.ndarray) else val) for key, val in res.items()}
            payload["gamma"] = g
            typer.echo(json.dumps(payload, indent=2))
            return
        table = Table(title=f"{res['design']} estimate, n={res['n']}, k={res['k']}, gamma={g:.6g}")
        table.add_column("category", justify="right")
        table.add_column("estimate", justify="right")
        table.add_column("std. error", justify="right")
        for j, (e_, s_) in enumerate(zip(res["estimate"], res["se"], strict=True)):
            table.add_row(str(j), f"{e_:.4f}", f"{s_:.4f}")
        Console().print(table)

    _run(go)
