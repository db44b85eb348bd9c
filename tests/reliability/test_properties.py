"""Property-based tests of the engine.

Hypothesis draws small microdata files and release configs: 1-4 key variables (integer or
string categories, or an integer range) with small domains and either missing policy, a random
partition rule per variable (none, ``as_is``, bands, groups, an ARX hierarchy level), xi in
(1/3, 1), a random theta mode and small-block policy, an id column or none, a dropped
identifier, non-key columns, and occasionally a bad value (outside the domain, or empty under
``missing: error``).

``sdc.release_frame`` must then either return a release whose invariants hold
(``_invariants.check_release``) or raise a clear ``ValueError`` subclass: ``InputError`` exactly
when a bad value was planted, ``SmallBlockError`` exactly when the small-block policy says so
(computed here independently from the partition sets), never anything in between (no other
exception type, no partial result).
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
import websockets.asyncio.connection as ws_connection  # (imported: its keepalive uses random)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import sdc
from sdc.config.model import Hierarchy
from sdc.method.risk import calibrate_theta

from ._invariants import check_release

#: CI runs the same 200 examples every time (derandomized: failures are reproducible).
#: ``SDC_HYPOTHESIS_EXAMPLES=5000`` runs a longer random hunt locally.
_HUNT = int(os.environ.get("SDC_HYPOTHESIS_EXAMPLES", "0"))
PROPERTY_SETTINGS = settings(
    max_examples=_HUNT or 200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
    derandomize=not _HUNT,
)

#: 1/3 + 2 ulp: the smallest xi the strategy draws (theta < 1, kmin ~ 3e15).
# sdc.method.theta.check_xi refuses xi within 1e-9 of 1/3 (theta would round to 1); draw above that
XI_LOW = 1 / 3 + 2e-9

LABELS = ["a", "b", "Ñandú", "東京", "Zürich", "x y", "0", "-", "Ωmega", "ß"]


@dataclass
class Case:
    config: sdc.ReleaseConfig
    frame: pd.DataFrame
    bad_value: bool          # a value outside the domain / empty under missing: error
    seed: int


@st.composite
def key_variable(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], Any, list]:
    kind = draw(st.sampled_from(["int", "str", "range"]))
    size = draw(st.integers(2, 5))
    if kind == "int":
        cats = draw(st.lists(st.integers(-3, 30), min_size=size, max_size=size, unique=True))
        spec: dict[str, Any] = {"categories": cats}
        domain = list(cats)
    elif kind == "str":
        cats = draw(st.lists(st.sampled_from(LABELS), min_size=size, max_size=size, unique=True))
        spec = {"categories": cats}
        domain = list(cats)
    else:
        lo = draw(st.integers(0, 20))
        spec = {"range": [lo, lo + size - 1]}
        domain = list(range(lo, lo + size))
    missing = draw(st.sampled_from(["error", "category"]))
    spec["missing"] = missing
    # partition rule
    choices = ["none", "as_is", "groups", "hierarchy"] + (["bands"] if kind != "str" else [])
    rule_kind = draw(st.sampled_from(choices))
    rule: Any = None
    if rule_kind == "as_is":
        rule = "as_is"
    elif rule_kind == "bands":
        vals = sorted(domain)
        inner = draw(st.lists(st.sampled_from(vals[1:]), unique=True, max_size=len(vals) - 1))
        first = vals[0] - draw(st.integers(0, 2))
        rule = {"bands": [first, *sorted(inner)]}
    elif rule_kind in ("groups", "hierarchy"):
        n_groups = draw(st.integers(1, len(domain)))
        assign = draw(st.lists(st.integers(0, n_groups - 1), min_size=len(domain),
                               max_size=len(domain)))
        used = sorted(set(assign))
        if rule_kind == "groups":
            rule = {"groups": {f"g{g}": [c for c, a in zip(domain, assign, strict=True) if a == g]
                               for g in used}}
        else:
            level = draw(st.integers(0, 2))
            table = [[str(c), f"h{a}", "*"] for c, a in zip(domain, assign, strict=True)]
            rule = ("hierarchy", level, table)
    return spec, rule, domain


@st.composite
def cases(draw: st.DrawFn, allow_bad: bool = True) -> Case:
    n_keys = draw(st.integers(1, 4))
    names = [f"k{i}" for i in range(n_keys)]
    specs, rules, domains = {}, {}, {}
    for nm in names:
        spec, rule, dom = draw(key_variable(nm))
        specs[nm], domains[nm] = spec, dom
        if rule is not None:
            rules[nm] = rule
    # xi next to 1/3 is covered by test_xi_next_to_one_third
    xi = draw(st.one_of(st.floats(XI_LOW, 1, exclude_max=True, allow_nan=False),
                        st.floats(0.45, 0.95), st.sampled_from([0.395, 3 / 7, 0.5])))
    theta_mode = draw(st.sampled_from(["theorem", "calibrated"]))
    policy = draw(st.sampled_from(["merge", "calibrate", "merge", "calibrate", "fail"]))
    with_id = draw(st.booleans())
    cfg_dict: dict[str, Any] = {
        "name": "prop",
        "input": {"path": "x.csv", "drop": ["name"], **({"id_column": "rid"} if with_id else {})},
        "key_variables": specs,
        "partition": {v: (r if not isinstance(r, tuple) else {"hierarchy": f"{v}.csv",
                                                               "level": r[1]})
                      for v, r in rules.items()},
        "risk": {"xi": xi, "theta": theta_mode, "small_blocks": policy},
    }
    cfg = sdc.parse_config(cfg_dict, load_hierarchies=False)
    for v, r in rules.items():
        if isinstance(r, tuple):
            rule = cfg.partition[v]
            assert isinstance(rule, Hierarchy)
            rule.with_table(r[2])

    n = draw(st.one_of(st.integers(1, 5), st.integers(6, 80)))
    # a few "popular" combinations plus noise, so both sensitive and non-sensitive cells occur
    data: dict[str, Any] = {}
    if with_id:
        ids = draw(st.permutations(list(range(1000, 1000 + n))))
        data["rid"] = ids
    bad = False
    for nm in names:
        dom = domains[nm]
        idx = draw(st.lists(st.integers(0, len(dom) - 1), min_size=n, max_size=n))
        vals: list[Any] = [dom[i] for i in idx]
        if specs[nm]["missing"] == "category":
            holes = draw(st.lists(st.integers(0, n - 1), max_size=2))
            for h in holes:
                vals[h] = None
        data[nm] = vals
    if allow_bad and draw(st.integers(0, 7)) == 3:  # ~1 in 8: one bad value
        nm = draw(st.sampled_from(names))
        row = draw(st.integers(0, n - 1))
        dom = domains[nm]
        choices = ["outside"] + (["empty"] if specs[nm]["missing"] == "error" else [])
        how = draw(st.sampled_from(choices))
        if how == "empty":
            data[nm][row] = None
        elif isinstance(dom[0], str):
            data[nm][row] = "??not-a-category"
        else:
            data[nm][row] = max(dom) + 1 if draw(st.booleans()) else min(dom) - 1
        bad = True
    data["name"] = [f"Person {i}" for i in range(n)]
    data["income"] = draw(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)),
                                   min_size=n, max_size=n))
    nullable = draw(st.booleans())  # integer columns with empties: Int64 or float64
    frame = pd.DataFrame({c: _column(v, nullable) for c, v in data.items()})
    seed = draw(st.integers(0, 2**63 - 1))
    return Case(cfg, frame, bad, seed)


def _column(values: list[Any], nullable: bool = False) -> pd.Series:
    """What a reader would produce: ints (Int64 or float64 if any empty), strings, floats."""
    non_null = [v for v in values if v is not None]
    if non_null and all(isinstance(v, str) for v in non_null):
        return pd.Series(values, dtype="str")
    if non_null and all(isinstance(v, int) for v in non_null):
        if len(non_null) == len(values):
            return pd.Series(values, dtype="int64")
        if nullable:
            return pd.Series(values, dtype="Int64")
    return pd.Series([np.nan if v is None else v for v in values], dtype="float64")


def expected_small_block_error(case: Case) -> bool:
    """The small-block outcome predicted from the partition sets alone (see sdc.method.blocks).

    ``fail``: any partition set with 0 < k < kmin. ``merge`` / ``calibrate`` along every
    partition variable (the default merge order): merging goes on until no block is deficient
    or everything is one block, so the release fails iff the union of all PRBs is deficient
    (k < kmin for merge; no theta certifies it for calibrate). Under the default missing policy
    (docs/METHOD.md 7.9) cells missing different keys are never merged: the rule applies to each
    missing-value pattern's union separately.
    """
    part = sdc.partition_frame(case.frame, case.config)
    sens = part.sensitive
    if not sens.any():
        return False
    policy = case.config.risk.small_blocks
    k_per_ps = np.bincount(part.cell_partition_set[sens], minlength=len(part.partition_keys))
    if policy == "fail":
        return bool(((k_per_ps > 0) & (k_per_ps < part.kmin)).any())
    pattern = np.zeros(part.cells.n_cells, dtype=np.int64)
    for i, kv in enumerate(case.config.key_variables.values()):
        if kv.missing == "category" and not kv.missing_moves:
            pattern |= (part.cells.key_codes[:, i] == kv.size - 1).astype(np.int64) << i
    for p in np.unique(pattern[sens]):
        group = sens & (pattern == p)
        if policy == "merge":
            if int(group.sum()) < part.kmin:
                return True
            continue
        t = part.cells.frequency[group]
        profile = {int(v): int(c) for v, c in zip(*np.unique(t, return_counts=True), strict=True)}
        if calibrate_theta(profile, case.config.risk.xi) is None:
            return True
    return False


def _message_is_clear(err: Exception) -> None:
    msg = str(err)
    assert len(msg) > 40, msg
    assert "Traceback" not in msg


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@PROPERTY_SETTINGS
@given(cases())
def test_release_or_clear_refusal(case: Case) -> None:
    try:
        result = sdc.release_frame(case.frame, case.config, seed=case.seed)
    except sdc.InputError as err:
        event("InputError")
        assert case.bad_value, f"InputError on valid data: {err}"
        _message_is_clear(err)
        assert "column" in str(err) and "row" in str(err)
        return
    except sdc.SmallBlockError as err:
        event("SmallBlockError")
        assert not case.bad_value
        assert expected_small_block_error(case), f"unexpected SmallBlockError: {err}"
        _message_is_clear(err)
        msg = str(err)
        assert "k=" in msg and ("partition set" in msg or "merged block" in msg), msg
        assert "Partition more coarsely" in msg or "small_blocks" in msg, msg
        return
    # any other exception type propagates and fails the test: "never anything in between"
    event("released")
    assert not case.bad_value, "a planted bad value was released"
    assert not expected_small_block_error(case), "the small-block policy should have refused"
    check_release(case.frame, case.config, result)
    event(f"changed>0: {result.n_changed > 0}")


def in_group_order(frame: pd.DataFrame, config: sdc.ReleaseConfig,
                   perm: np.ndarray) -> np.ndarray:
    """The record of ``frame`` whose draws row j of ``frame.iloc[perm]`` takes: ``perm[j]``,
    except that records equal in every released column (same identity and same cell, hence
    interchangeable: sdc.method.draws.identity.unique_identities ranks them by row order)
    keep their original relative order. With an id column every record is its own group and
    this is ``perm``."""
    cols = [c for c in frame.columns if c not in set(config.input.drop)]
    group = frame[cols].groupby(cols, dropna=False, sort=False).ngroup().to_numpy()
    rows = np.arange(len(frame))
    canon = np.empty(len(frame), dtype=np.int64)
    canon[np.lexsort((rows, group[perm]))] = np.lexsort((rows, group))
    return canon


@PROPERTY_SETTINGS
@given(cases(allow_bad=False), st.randoms(use_true_random=False))
def test_same_seed_same_release_and_row_order_does_not_matter(case: Case, rnd: Any) -> None:
    """A shuffled copy of the file released with the same seed gives every record the same
    released values, record by record (the same row of the same input always gives the same
    release, whatever the row order and the run).

    Records are matched through :func:`in_group_order`: with an id column by id; without one,
    records equal in every released column (interchangeable) are matched in their relative
    order, every other record individually. The comparison covers every key and non-key
    value (dtype included), ``released_cell``, ``changed``, the certificate and the blocks.

    Cost (issue 30) without losing power:

    - Cases the small-block policy refuses are skipped *before* any release, by
      :func:`expected_small_block_error` (one partition of the frame, ~3 ms): about two in
      three drawn cases are refused, and a refused release cost ~20 ms. The cases tested are
      the same ones as when the refusal was caught (that prediction is exact:
      test_release_or_clear_refusal asserts it on every one of its 200 cases; the
      ``SmallBlockError`` is still caught, should the two ever disagree).
    - One release of the shuffled file per case, no second release of an identical copy:
      a release that differed between two runs of the same input would fail the
      record-by-record comparison as it failed the identical-copy one. Without an id column
      that comparison used to be of multisets of released rows (one more release of a copy
      was then needed for "same input, same release" row by row); matching interchangeable
      records in their relative order makes it record by record there too, which implies
      the multiset equality.
    """
    assume(not expected_small_block_error(case))
    try:
        first = sdc.release_frame(case.frame, case.config, seed=case.seed)
    except sdc.SmallBlockError:
        assume(False)
        return
    perm = list(range(len(case.frame)))
    rnd.shuffle(perm)
    shuffled = case.frame.iloc[perm].reset_index(drop=True)
    second = sdc.release_frame(shuffled, case.config, seed=case.seed)
    check_release(shuffled, case.config, second)
    # record j of the shuffled file takes the draws of record canon[j] of the original
    canon = in_group_order(case.frame, case.config, np.asarray(perm))
    np.testing.assert_array_equal(second.released_cell, np.asarray(first.released_cell)[canon])
    np.testing.assert_array_equal(second.changed, np.asarray(first.changed)[canon])
    pd.testing.assert_frame_equal(first.frame.iloc[canon].reset_index(drop=True),
                                  second.frame.reset_index(drop=True), check_exact=True)
    assert first.certificate == second.certificate
    pd.testing.assert_frame_equal(first.blocks, second.blocks, check_exact=True)


def test_xi_bounds_are_config_errors() -> None:
    """The property strategy draws xi strictly inside (1/3, 1); the edges are refused."""
    base = {"name": "x", "input": {"path": "x.csv"}, "key_variables": {"a": {"range": [0, 3]}}}
    for xi in (1 / 3, 1.0, 0.2, math.nan, "high", True):
        with pytest.raises(sdc.ConfigError, match="xi"):
            sdc.parse_config({**base, "risk": {"xi": xi}})


def test_xi_next_to_one_third() -> None:
    """check_xi refuses xi within 1e-9 of 1/3 (theta would round to 1), naming risk.xi. Just
    above that band the theorem needs kmin = ceil(1/(1 - theta)) = 333,334 cells: the default
    policy refuses a small PRB naming kmin, and ``calibrate`` certifies it at xi."""
    xi = float(np.nextafter(1 / 3, 1))
    base = {"name": "x", "input": {"path": "x.csv"}, "key_variables": {"a": {"range": [0, 99]}},
            "risk": {"xi": xi}}
    with pytest.raises(sdc.ConfigError, match=r"risk\.xi"):
        sdc.parse_config(base)
    xi = 1 / 3 + 1e-6
    frame = pd.DataFrame({"a": [0, 1, 2, 3, 4, 5] + [50] * 5})  # six singletons, one cell of 5
    with pytest.raises(sdc.SmallBlockError, match="kmin = 333334"):
        sdc.release_frame(frame, sdc.parse_config(dict(base, risk={"xi": xi})), seed=1)
    cfg = sdc.parse_config(dict(base, risk={"xi": xi, "small_blocks": "calibrate"}))
    result = sdc.release_frame(frame, cfg, seed=1)
    assert result.blocks["k"].tolist() == [6]
    assert result.blocks["action"].tolist() == ["calibrated"]
    assert 0 < result.blocks["theta"].iloc[0] < 1
    assert xi - 1e-4 < result.certificate <= xi
    assert (result.frame["a"] == 50).sum() == 5  # the non-sensitive cell never changes


# =============================================================================================
# Through the CLI (issue 34): column types, delimiters and encodings, category lists, key
# ranges. Every generated case exits 0 with the right result or 2 with a clear message, never 1.
# Few examples (derandomized, deadline None): the whole section runs in well under a minute.
# =============================================================================================
import datetime as dt  # noqa: E402
import decimal  # noqa: E402
import io  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from .conftest import JobBuilder  # noqa: E402

CLI_SETTINGS = settings(
    max_examples=int(os.environ.get("SDC_HYPOTHESIS_CLI_EXAMPLES", "0")) or 4,
    deadline=None, derandomize=not _HUNT,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large])

_N = 300


def _arrow_column(kind: str, rng: np.random.Generator) -> pa.Array:
    """A column of ``kind`` with nulls, as any Parquet writer may give it."""
    i = np.arange(_N)
    null = (i % 11) == 0
    ints = rng.integers(-1000, 1000, _N)
    vals: list[Any]
    if kind == "binary":
        return pa.array([None if z else bytes([0xFF, int(v) & 255]) for v, z in
                         zip(ints, null, strict=True)], pa.binary())
    if kind == "large_binary":
        return pa.array([None if z else b"\x00" + bytes(str(v), "ascii") for v, z in
                         zip(ints, null, strict=True)], pa.large_binary())
    if kind == "fixed_binary":
        return pa.array([None if z else int(v % 256).to_bytes(1, "big") * 3 for v, z in
                         zip(ints, null, strict=True)], pa.binary(3))
    if kind in ("string", "large_string", "dictionary"):
        vals = [None if z else f"v{v % 7}é" for v, z in zip(ints, null, strict=True)]
        arr = pa.array(vals, pa.large_string() if kind == "large_string" else pa.string())
        return arr.dictionary_encode() if kind == "dictionary" else arr
    if kind in ("decimal128", "decimal256"):
        t = pa.decimal128(9, 2) if kind == "decimal128" else pa.decimal256(40, 3)
        return pa.array([None if z else decimal.Decimal(int(v)) / 100 for v, z in
                         zip(ints, null, strict=True)], t)
    if kind in ("date32", "date64"):
        return pa.array([None if z else dt.date(2000, 1, 1) + dt.timedelta(days=int(v)) for v, z
                         in zip(ints, null, strict=True)], getattr(pa, kind)())
    if kind.startswith("timestamp"):
        unit, tz = kind.split(":")[1], (kind.split(":")[2] or None)
        return pa.array(np.where(null, None, 1_600_000_000 + ints * 3600).tolist(),
                        pa.int64()).cast(pa.timestamp("s")).cast(pa.timestamp(unit, tz))
    if kind == "time64":
        return pa.array([None if z else dt.time(int(v) % 24, int(v) % 60) for v, z in
                         zip(ints, null, strict=True)], pa.time64("us"))
    if kind == "duration":
        return pa.array(np.where(null, None, ints).tolist(), pa.duration("ms"))
    if kind == "bool":
        return pa.array(np.where(null, None, ints % 2 == 0).tolist(), pa.bool_())
    if kind in ("int8", "uint16", "int32", "uint64", "float32", "float64"):
        t = getattr(pa, kind)()
        v = np.abs(ints) % 100 if kind.startswith(("uint", "int8")) else ints
        return pa.array(np.where(null, None, v).tolist(), pa.int64()).cast(t)
    if kind == "list":
        return pa.array([None if z else [int(v)] * int(v % 3) for v, z in
                         zip(ints, null, strict=True)], pa.list_(pa.int64()))
    if kind == "struct":
        return pa.array([None if z else {"a": int(v), "b": f"x{v % 3}"} for v, z in
                         zip(ints, null, strict=True)])
    raise AssertionError(kind)


ARROW_KINDS = ["binary", "large_binary", "fixed_binary", "string", "large_string", "dictionary",
               "decimal128", "decimal256", "date32", "date64", "timestamp:s:",
               "timestamp:ns:UTC", "timestamp:ms:Europe/Berlin", "time64", "duration", "bool",
               "int8", "uint16", "int32", "uint64", "float32", "float64", "list", "struct"]


def _clear_refusal(res, *names: str) -> None:
    assert res.exit_code == 2, res.output
    assert "not expected" not in res.output and "Traceback" not in res.output, res.output
    assert any(n in res.output for n in names), res.output


@CLI_SETTINGS
@given(kinds=st.lists(st.sampled_from(ARROW_KINDS), min_size=2, max_size=4, unique=True),
       csv_too=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_cli_any_arrow_column_type(cli, tmp_path_factory, kinds: list[str], csv_too: bool,
                                   seed: int) -> None:
    """Parquet input with non-key columns of any Arrow type: released unchanged in Parquet
    (the same values, type kept) or refused with exit 2 naming the column (a format that
    cannot hold it)."""
    job = JobBuilder(tmp_path_factory.mktemp("types"))
    job.frame = job.frame.head(_N)
    job.config["input"]["path"] = "data/input.parquet"
    job.config["input"]["format"] = "parquet"
    job.config["output"]["formats"] = ["parquet", "csv"] if csv_too else ["parquet"]
    rng = np.random.default_rng(seed)
    t = pa.Table.from_pandas(job.frame, preserve_index=False)
    for k in kinds:
        t = t.append_column(f"c_{k.replace(':', '_').replace('/', '_')}", _arrow_column(k, rng))
    job.data_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, job.data_path)
    job.skip_data = True
    res = cli("release", job.write())
    cols = [f"c_{k.replace(':', '_').replace('/', '_')}" for k in kinds]
    if res.exit_code != 0:
        _clear_refusal(res, *cols)
        return
    pub = pq.read_table(job.out_dir / "public" / "microdata.parquet")
    for c in cols:
        src = t.column(c)
        got = pub.column(c)
        key = str
        assert sorted(map(key, got.to_pylist())) == sorted(map(key, src.to_pylist())), c


_DELIMITERS = [",", ";", "\t", "|", " ", ":", "^", "~", "#", "€", "§", "\x1f"]
_ENCODINGS = ["utf-8", "latin-1", "cp1252", "utf-16"]


@CLI_SETTINGS
@given(delimiter=st.sampled_from(_DELIMITERS), encoding=st.sampled_from(_ENCODINGS),
       engine=st.sampled_from(["pandas", "streaming"]))
def test_cli_delimiters_and_encodings(cli, tmp_path_factory, delimiter: str, encoding: str,
                                      engine: str) -> None:
    """A CSV file in any of these delimiters and encodings, with accented text: released with
    every non-key value as written, or refused with exit 2 naming the delimiter/encoding."""
    job = JobBuilder(tmp_path_factory.mktemp("csv"))
    job.frame = job.frame.head(_N).copy()
    job.frame["town"] = np.array(["Zürich", "Łódź", "Québec", "Sevilla"], dtype=object)[
        np.arange(_N) % 4]
    job.config["input"]["delimiter"] = delimiter
    job.config["input"]["encoding"] = encoding
    try:
        job.data_bytes = job.frame.to_csv(index=False, sep=delimiter).encode(encoding)
    except UnicodeEncodeError:  # the text cannot be written in that encoding (Łódź in latin-1)
        job.data_bytes = job.frame.assign(town="Zurich").to_csv(
            index=False, sep=delimiter).encode(encoding)
    res = cli("release", job.write(), "--engine", engine)
    if res.exit_code != 0:
        _clear_refusal(res, "delimiter", "encoding", "UTF", "utf")
        return
    pub = pd.read_csv(job.out_dir / "public" / "microdata.csv", dtype=str,
                      keep_default_na=False)
    src = pd.read_csv(io.BytesIO(job.data_bytes), sep=delimiter, encoding=encoding, dtype=str,
                      keep_default_na=False)
    assert sorted(pub["town"]) == sorted(src["town"])
    assert sorted(pub["income"]) == sorted(src["income"])


@CLI_SETTINGS
@given(cats=st.lists(st.one_of(st.integers(0, 12), st.sampled_from(
    ["0", "01", "007", "+3", " 4", "x", "A1", "10"])), min_size=2, max_size=6, unique=True),
    seed=st.integers(0, 1000))
def test_cli_category_lists_mixing_types_and_leading_zeros(cli, tmp_path_factory, cats: list,
                                                           seed: int) -> None:
    """Categories mixing integers and texts with leading zeros or signs, the column holding
    them as written: released (every released value a declared category, "01" never turned
    into 1) or refused by the config check with exit 2."""
    assume(len({str(c) for c in cats}) == len(cats))  # 1 and "1" twins: covered elsewhere
    job = JobBuilder(tmp_path_factory.mktemp("cats"))
    job.frame = job.frame.head(_N).copy()
    rng = np.random.default_rng(seed)
    job.frame["region"] = np.array([str(c) for c in cats], dtype=object)[
        rng.integers(0, len(cats), _N)]
    job.config["key_variables"]["region"] = {"categories": cats}
    res = cli("release", job.write())
    if res.exit_code != 0:
        _clear_refusal(res, "region")
        return
    pub = pd.read_csv(job.out_dir / "public" / "microdata.csv", dtype=str,
                      keep_default_na=False)
    assert set(pub["region"]) <= {str(c) for c in cats}


@CLI_SETTINGS
@given(size=st.one_of(st.integers(2, 200), st.integers(10 ** 5, 10 ** 6),
                      st.integers(10 ** 7 - 5, 10 ** 7 + 5), st.integers(10 ** 8, 2 ** 63)),
       lo=st.integers(-10 ** 6, 10 ** 6))
def test_cli_key_ranges_up_to_the_limit(cli, tmp_path_factory, size: int, lo: int) -> None:
    """A range key of any size: up to 10^7 values validated (and up to 10^6 released: the
    5-million case is test_red_team_second's slow test), beyond it refused with the limit."""
    job = JobBuilder(tmp_path_factory.mktemp("range"))
    job.frame = job.frame.head(_N).copy()
    rng = np.random.default_rng(size % 1000)
    hi = lo + size - 1
    job.config["key_variables"]["age"] = {"range": [lo, hi]}
    job.config["partition"]["age"] = "as_is" if size < 50 else {"bands": [lo, lo + size // 2]}
    job.frame["age"] = rng.integers(lo, min(hi, lo + 10 ** 6) + 1, _N)
    cmd = "release" if size <= 10 ** 6 else "validate"
    res = cli(cmd, job.write())
    if size > 10 ** 7:
        _clear_refusal(res, "at most 10,000,000", "64-bit")
        return
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 2:  # a partition the small-block policy cannot certify, say
        _clear_refusal(res, "age", "xi", "PRB")


@given(st.integers(0, 3))
@settings(max_examples=3, deadline=None)
def test_library_threads_draw_from_their_own_random(_: int) -> None:
    """During a Hypothesis test the websockets keepalive (Prefect's events client pings with
    ``random.getrandbits``) does not touch the global random state a strategy's draw is
    checked against (tests/conftest.py, section 7): HypothesisDeprecationWarning in 1 of ~5
    full runs before."""
    assert ws_connection.random is not random
    assert hasattr(ws_connection.random, "getrandbits")
