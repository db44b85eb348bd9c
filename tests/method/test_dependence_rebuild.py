"""Columns not released as they are, rebuilt from released ones (issue 44; docs/METHOD.md,
"Columns rebuilt from released ones"): a dropped household column that gives a household key
away, and that a ratio, product or sum of released columns (members' sums included) gives
back, is measured as if released and refused, naming the column, the relation and the fix;
without the relation (or when the rebuilt column is harmless) the release is not refused; a
merely correlated or noisy column is not taken for a relation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from household_helpers import GEN

import sdc
from sdc.executors.memory import InMemory
from sdc.method.dependence import DependenceError
from sdc.method.dependence.rebuild import HouseholdRelations, find_rebuilt
from sdc.method.household_batches import household_identity
from sdc.pipeline.households import plan_households
from sdc.samples import generate_household_sample


def _planted(seed: int = 5, n: int = 6000, n_regions: int = 40) -> pd.DataFrame:
    """The generated household sample with per household: ``code`` (a function of region:
    gives it away), ``spend`` (random), ``share`` = spend / code, ``noise`` (random) and
    ``scaled`` = spend * noise; per person ``inc_a`` (random) and per household ``tot`` = the
    members' summed inc_a + code."""
    f = generate_household_sample(n, seed=seed, n_regions=n_regions)
    rng = np.random.default_rng(seed)
    hh, inv = np.unique(f["hh_id"], return_inverse=True)
    code = (f["region"].to_numpy() * 7 + 3).astype(np.float64)
    spend = np.round(rng.lognormal(8, 1, hh.size), 2)[inv]
    noise = np.round(rng.uniform(1, 50, hh.size), 3)[inv]
    inc_a = np.round(rng.lognormal(9, 1, len(f)), 2)
    return f.assign(code=code, spend=spend, share=spend / code, noise=noise,
                    scaled=spend * noise, inc_a=inc_a,
                    tot=np.bincount(inv, weights=inc_a)[inv] + code)


def _figures(tmp_path, frame: pd.DataFrame, household_columns: list[str], drop: list[str]):
    path = tmp_path / "hh.csv"
    frame.to_csv(path, index=False)
    cfg = sdc.parse_config({**GEN, "input": {**GEN["input"], "path": str(path),
                                             "household_columns": household_columns,
                                             "drop": drop}})
    try:
        p = plan_households(cfg, runner=InMemory(cfg, pd.read_csv(path)))
    except DependenceError as e:
        return {f.column: f for f in e.figures}, str(e)
    return {f.column: f for f in p.hs.plan.dependence}, None


def test_a_dropped_column_a_ratio_gives_back_is_refused_naming_both(tmp_path):
    figs, msg = _figures(tmp_path, _planted(), ["water", "hh_weight", "spend", "share"],
                         ["income", "code", "inc_a", "noise", "scaled", "tot"])
    assert msg is not None, "code = spend / share gives region away: must be refused"
    f = figs["code"]
    assert f.flagged and f.via == "rebuilt" and f.of == ("code", "share")
    assert "code = (spend) / share" in f.relation
    assert "'code' is not released as it is" in msg and "input.drop: [share]" in msg
    assert f.figure > 0.5 > f.baseline  # xi = 0.5


def test_a_sum_over_members_gives_back_a_dropped_column(tmp_path):
    figs, msg = _figures(tmp_path, _planted(), ["water", "hh_weight", "tot"],
                         ["income", "code", "spend", "share", "noise", "scaled"])
    assert msg is not None
    assert figs["code"].via == "rebuilt" and "tot - sum(inc_a)" in figs["code"].relation


def test_without_the_relation_or_when_harmless_nothing_is_refused(tmp_path):
    # share dropped too: nothing rebuilds code
    figs, msg = _figures(tmp_path, _planted(), ["water", "hh_weight", "spend"],
                         ["income", "code", "share", "inc_a", "noise", "scaled", "tot"])
    assert msg is None and "code" not in figs
    # noise = scaled / spend is rebuilt, measured, and tells nothing about the keys
    figs, msg = _figures(tmp_path, _planted(), ["water", "hh_weight", "spend", "scaled"],
                         ["income", "code", "share", "inc_a", "noise", "tot"])
    assert msg is None
    assert figs["noise"].via == "rebuilt" and not figs["noise"].flagged
    assert figs["noise"].of == ("noise", "spend")


def _table(frame: pd.DataFrame, cfg, parts: int) -> pd.DataFrame:
    ident = household_identity(frame, cfg)
    r = HouseholdRelations(merge_every=2)
    pieces = []
    for rows in np.array_split(np.random.default_rng(1).permutation(len(frame)), parts):
        p = HouseholdRelations()
        p.add(frame.iloc[np.sort(rows)], ident[np.sort(rows)], cfg)
        pieces.append(p)
    for p in pieces:
        r.merge(p)
    return r.table(np.unique(ident))


def test_the_relations_table_is_the_same_whatever_the_batches():
    f = _planted(n=1500)
    cfg = sdc.parse_config({**GEN, "input": {**GEN["input"],
                                             "household_columns": ["water", "spend", "share"],
                                             "drop": ["code", "inc_a"]}})
    one, many = _table(f, cfg, 1), _table(f, cfg, 7)
    targets, hcols, sums = one.attrs["relations"]
    assert (targets, hcols) == (["code", "inc_a"], ["water", "spend", "share", "members"])
    assert "sum(noise)" in sums and "sum(age)" not in sums  # keys are not released as they are
    pd.testing.assert_frame_equal(one, many, rtol=1e-12)
    assert [r.target for r in find_rebuilt(many)] == ["code"]


def test_the_member_count_divides_and_multiplies():
    """The household's member count is shown by every household release (the pseudonyms): a
    dropped household mean of a released person column is rebuilt as sum / members."""
    f = _planted(n=1500)
    hh, inv, n = np.unique(f["hh_id"], return_inverse=True, return_counts=True)
    f["mean_a"] = (np.bincount(inv, weights=f["inc_a"]) / n)[inv]
    cfg = sdc.parse_config({**GEN, "input": {**GEN["input"], "household_columns": ["water"],
                                             "drop": ["mean_a", "code", "spend", "share",
                                                      "noise", "scaled", "tot"]}})
    got = {r.target: r for r in find_rebuilt(_table(f, cfg, 3))}
    assert set(got) == {"mean_a"}
    assert (got["mean_a"].form, got["mean_a"].by) == ("ratio", "members")
    assert got["mean_a"].pair == ("mean_a", "inc_a")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_correlated_noisy_or_imbalanced_columns_are_not_relations(seed):
    """No false relation: a column correlated 0.99 with a ratio, the ratio with 10% noise
    (beyond half the grain: the rounding no longer recovers the value), a 0/1 flag that is 1 in
    95% of the households, and a random column, over three seeded files of 3,000 households."""
    rng = np.random.default_rng(seed)
    n = 3000
    a, b = rng.lognormal(8, 1, n), rng.lognormal(2, 0.5, n)
    code = rng.integers(1, 40, n) * 7.0
    table = pd.DataFrame({
        "corr": a / b + rng.normal(0, 0.15 * np.std(a / b), n),
        "noisy": np.round(a / (a / code) * rng.uniform(0.9, 1.1, n), 1),
        "flag": (rng.random(n) < 0.95).astype(float),
        "random": rng.normal(size=n),
        "a": a, "b": b, "c": a / code * rng.uniform(0.9, 1.1, n)})
    table.attrs["relations"] = (["corr", "noisy", "flag", "random"], ["a", "b", "c"], [])
    assert find_rebuilt(table) == []
    exact = table.assign(corr=a / b)
    (r,) = find_rebuilt(exact)
    assert (r.target, r.form, r.by) == ("corr", "ratio", "b")
    assert r.text().startswith("corr = (a) / b (for 100.0% of the households")


def test_init_drafts_the_fix_of_a_rebuilt_column(tmp_path):
    """`sdc init --drop code` of a file whose released `tot` and members' `inc_a` give code
    (and so region) back: the draft drops a column of the relation too, with the reason, once."""
    import yaml

    from tests.cli.test_cli import run

    f = _planted(n=3000).drop(columns=["noise", "scaled", "spend", "share", "income"])
    f.to_csv(tmp_path / "pl.csv", index=False)
    out = tmp_path / "pl.yaml"
    r = run("init", tmp_path / "pl.csv", "--household-id", "hh_id", "--id", "person_id",
            "--keys", "region,sex,age", "--drop", "code", "-o", out)
    assert r.exit_code == 0, r.output
    drop = yaml.safe_load(out.read_text())["input"]["drop"]
    assert drop[0] == "code" and len(drop) == len(set(drop)) == 2
    assert drop[1] in ("tot", "inc_a")
    assert f"dropped by sdc init: {drop[1]} gives region away" in out.read_text()
    r = run("plan", out)
    assert r.exit_code == 0, r.output


def test_audit_rederives_a_rebuilt_column_on_every_executor(tmp_path):
    """A harmless rebuilt column (noise = scaled / spend, noise dropped) is measured in the
    release (audit.json households.dependence, via rebuilt) and `sdc audit` re-derives it:
    the in-memory and streaming releases' audits pass with the same figure."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from household_helpers import household_job, release_folder

    from sdc.audit.verify import verify_release

    f = _planted(n=2500, n_regions=12).drop(columns=["code", "share", "inc_a", "tot"])
    inp = tmp_path / "hh.parquet"
    pq.write_table(pa.Table.from_pandas(f, preserve_index=False), inp, row_group_size=450)
    got = {}
    for name, spec in {"pandas": "pandas",
                       "streaming": {"kind": "streaming", "batch_rows": 300}}.items():
        job = household_job(tmp_path, inp, spec, name=name)
        data = yaml_load(job)
        data["input"]["drop"] = ["income", "noise"]
        data["input"]["household_columns"] = [*data["input"].get("household_columns", []),
                                              "spend", "scaled"]
        job.write_text(yaml_dump(data))
        rel = release_folder(job)
        rep = verify_release(rel)
        assert rep.ok, [(c.name, c.detail) for c in rep.failed]
        audit = json.loads((rel / "internal" / "audit.json").read_text())
        (fig,) = [d for d in audit["households"]["dependence"] if d["column"] == "noise"]
        assert fig["via"] == "rebuilt" and not fig["flagged"]
        got[name] = fig
    assert got["pandas"] == got["streaming"]


def yaml_load(path):
    import yaml

    return yaml.safe_load(path.read_text())


def yaml_dump(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def test_every_column_not_released_as_it_is_is_a_target():
    """Dropped, derived and perturbed numeric columns are targets (their original values must
    not come back); keys, ids and text are not; a recalibrated weight is no regressor."""
    from types import SimpleNamespace as N

    from sdc.method.dependence.rebuild import relation_columns

    frame = pd.DataFrame({"hid": [1], "pid": [1], "k": [1], "a": [1.0], "b": [2], "c": [3.0],
                          "t": ["x"], "w": [1.0], "h": [4.0], "p": [5.0]})
    cfg = N(input=N(household_id="hid", id_column="pid", drop=["a", "t", "k"],
                    household_columns=["h", "b"], weight="w", weight_release="recalibrated"),
            key_names=["k"], derived=["b"], perturb={"c": {}})
    assert relation_columns(frame, cfg) == (["a", "b", "c"], ["h"], ["p"])
