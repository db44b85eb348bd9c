"""The household keys x size intruder under ``risk.composition: protect`` (issue 44,
docs/HOUSEHOLDS.md "Risk"): every household release shows a household's size (its members
share a pseudonym), so an intruder who knows a household's region and size matches on them.

Checked: the exact figure (:func:`sdc.method.household_person_risk.size_sources` through
``level_risk``) against an intruder simulated apart from the project (pandas: the released
households' region and member count, a uniform pick among those matching the target, 120
seeds); the exposed sizes (fewer than 1/xi households: no release protects them); the
matching kernel's fragile household-size column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from sdc.config.load import load_config
from sdc.io.recode import recode_frame
from sdc.method.cells import encode_key
from sdc.method.household_batches import household_identity
from sdc.method.household_composition import (
    composition_stage,
    composition_table,
    person_classes,
    plan_composition_stage,
)
from sdc.method.household_person_risk import (
    composition_level_risks,
    composition_sources,
    exposed_sizes,
    level_risk,
    size_sources,
)
from sdc.method.households import household_codes
from sdc.method.near import KeyMetric, _keeps, fragile_classes, matching_destinations, record_cost


def _stage(tmp_path, n=3000, regions=12, xi=0.395, bands=(0, 15, 65), theta="calibrated"):
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(n, seed=4, n_regions=regions)
    raw = {"name": "g", "input": {"path": "x.csv", "household_id": "hh_id",
                                  "id_column": "person_id"},
           "key_variables": {"region": {"range": [1, regions], "level": "household"},
                             "sex": {"categories": [1, 2]},
                             "age": {"range": [0, 95], "recode": {"bands": list(bands)}}},
           "risk": {"xi": xi, "composition": "protect", "destinations": "near",
                    "theta": theta, "near": {"neighbours": 4, "kernel": "matching"}},
           "seed": 1}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    cfg = load_config(p)
    f = recode_frame(frame, cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = composition_table(code, pc, first.size, n_cls)
    hk = np.column_stack([encode_key(f[k].iloc[first], k, cfg.key_variables[k])
                          for k in cfg.household_keys])
    return cfg, f, code, first, tab, hk


def test_size_level_agrees_with_an_intruder_simulated_apart(tmp_path):
    """Per household, the intruder's success E[1{released in (region, size)} / (released
    households with the target's region and size)], 120 seeds of the composition stage, the
    released file read with pandas (region per household, size = members per household), equals
    the exact unconditional figure of its cell within 4.5 SE (SE: the SD over seeds of the
    cell's mean hit / sqrt(120); 4.5 because ~200 cells are compared: P(|z| > 4.5) = 7e-6
    each); the riskiest household's mean stays below the exact certificate + 3 SE; the
    protectable sizes' certificate is <= xi."""
    cfg, f, code, first, tab, hk = _stage(tmp_path)
    planned = plan_composition_stage(hk, tab, cfg)
    cp = planned[0]
    assert cp.singular.size == 0  # every household goes through a PRB (the trace covers it)
    trace: dict = {}
    exact = level_risk(size_sources(composition_sources(cp, tab)), trace=trace)
    ident = household_identity(f.iloc[first], cfg)
    # apart from the project: the public households' region and member count
    persons = pd.DataFrame({"household": code})
    size = persons.groupby("household").size().to_numpy()
    true = pd.DataFrame({"region": hk[:, 0], "size": size})
    seeds = range(120)
    hits = np.zeros((len(seeds), size.size))
    seen = np.zeros((len(seeds), size.size))
    for i, s in enumerate(seeds):
        st = composition_stage(ident, hk, tab, cfg, 7000 + s, planned=planned)
        pub = pd.DataFrame({"region": st.released_codes[:, 0], "size": size})
        count = pub.groupby(["region", "size"]).size()
        n_match = count.reindex(pd.MultiIndex.from_frame(true)).fillna(0).to_numpy()
        stayed = pub["region"].to_numpy() == true["region"].to_numpy()
        hits[i] = np.where(stayed, 1.0 / np.maximum(n_match, 1), 0.0)
        seen[i] = n_match
    source = np.full(size.size, -1)
    source[cp.rows] = cp.cell
    compared = 0
    for (cell, cls), (counts, _, unc) in trace.items():
        members = np.flatnonzero(source == cell)
        assert members.size and int(size[members[0]]) == cls
        per_seed = hits[:, members].mean(axis=1)
        se = per_seed.std(ddof=1) / np.sqrt(len(seeds))
        diff = per_seed.mean() - unc
        assert diff <= 4.5 * se + 1e-9, (cell, per_seed.mean(), unc, se)
        if seen[:, members].max() <= counts.max():  # the counts inside the exact scan:
            # exact (beyond it an upper bound: LevelRisk.unconditional)
            assert abs(diff) <= 4.5 * se + 1e-9, (cell, per_seed.mean(), unc, se)
            compared += 1
    assert compared > 50
    worst = hits.mean(axis=0)
    top = int(np.argmax(worst))
    assert worst[top] <= exact.max_risk + 3 * hits[:, top].std(ddof=1) / np.sqrt(len(seeds))
    levels = composition_level_risks(cp, tab)
    assert levels["size"].max_risk == pytest.approx(exact.max_risk)
    assert levels["size_protectable"].max_risk <= 0.395 + 1e-9
    assert not exposed_sizes(tab, 0.395)


def test_exposed_sizes_are_named_and_left_out_of_the_protectable_figure(tmp_path):
    """A size of fewer than 1/xi households of the file is exposed: the exact figure over
    every household is at least 1/n there (here 1/2: the two 8-person households of the
    1,000-person sample), the protectable figure leaves it out."""
    cfg, f, code, first, tab, hk = _stage(tmp_path, n=1000, regions=4)
    cp, _ = plan_composition_stage(hk, tab, cfg)
    exposed = exposed_sizes(tab, 0.395)
    assert exposed == {8: 2}
    levels = composition_level_risks(cp, tab)
    assert levels["size"].max_risk >= 0.5 - 1e-9
    assert levels["size"].at["own_cell"]["target_class"] == 8
    assert levels["size_protectable"].max_risk < levels["size"].max_risk


def test_a_rare_household_keys_x_size_combination_gets_a_destination_elsewhere():
    """Cells 0 and 1 are the only households of size 3 in region 0, none in a non-sensitive
    cell (fewer than 1/xi - 1: the size column is fragile); with one matched destination the
    plain least-cost matching swaps them (both stay in region 0 and size 3: the count is
    always 2 there), the fragile size column sends each to region 1."""
    counts = np.array([[3, 0], [2, 1], [1, 2], [0, 3]])
    codes = np.array([[0, 0], [0, 1], [1, 2], [1, 3]])
    metrics = [KeyMetric("region", "nominal", scale=4.0, size=2),
               KeyMetric("household_composition", "composition", counts=counts)]
    fragile = fragile_classes(codes, np.ones(4, np.int64), np.ones(4, bool), metrics, 0.395)
    assert fragile[:, -1].tolist() == [True, True, True, True]
    plain = matching_destinations(record_cost(codes, metrics), 1)
    assert plain[:, 0].tolist() == [1, 0, 3, 2]
    dest = matching_destinations(record_cost(codes, metrics), 1, _keeps(codes, metrics, fragile))
    assert all(codes[d, 0] != codes[j, 0] for j, d in enumerate(dest[:, 0]))


def test_the_fragile_size_column_keeps_a_household_from_being_surely_kept(tmp_path,
                                                                          monkeypatch):
    """The generated sample (1,500 persons, 12 regions, age in the standard bands, xi 0.395,
    theta by the theorem, the matching kernel): without the size column a household whose
    four destinations all keep its region and size is surely released there, and a count of
    1 names it (1.0); with it every protectable size is within xi (0.343)."""
    import sdc.method.content_memo as content_memo
    import sdc.method.destinations as destinations

    cfg, f, code, first, tab, hk = _stage(tmp_path, n=1500, regions=12, xi=0.395,
                                          bands=(0, 16, 25, 50, 65), theta="theorem")
    with_rule = composition_level_risks(plan_composition_stage(hk, tab, cfg)[0], tab)
    assert with_rule["size_protectable"].max_risk <= 0.395 + 1e-9

    def without(*a, **k):
        out = fragile_classes(*a, **k)
        out[:, -1] = False
        return out

    monkeypatch.setattr(destinations, "fragile_classes", without)
    # the plan and its risks are remembered by content: the changed rule needs a fresh memo
    monkeypatch.setattr(content_memo, "COMPOSITION_PLANS", content_memo.ContentMemo())
    monkeypatch.setattr(content_memo, "LEVEL_RISKS", content_memo.ContentMemo())
    plain = composition_level_risks(plan_composition_stage(hk, tab, cfg)[0], tab)
    assert plain["size_protectable"].max_risk == pytest.approx(1.0)
