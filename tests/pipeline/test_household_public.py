"""The public file of a household release written in batches (sdc.pipeline.household_public)
against the pandas engine: the kernels of sdc.method.household_batches chained over
shuffled batches (households split over batches), the salt from the changed households' persons
kept in the identity pass (no extra read), whole households spilled to buckets by pseudonym:
microdata.parquet and microdata.csv byte for byte the pandas engine's, and the internal
records file too."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from household_helpers import GEN

import sdc
from sdc.io.batches import PublicWriter, public_schema
from sdc.io.spill import BucketSpill
from sdc.method.cell_passes import CellCounter, CellLocator, cell_codes, cell_table
from sdc.method.draws import cell_identity, record_identity, unique_identities
from sdc.method.household_batches import (
    HouseholdCounter,
    drawing_persons,
    extended_cells,
    household_identity,
    household_stage,
    lookup_households,
    person_draw_identities,
    person_stage,
    released_person_codes,
)
from sdc.method.households import person_config, pseudonyms, row_index
from sdc.pipeline.household_public import (
    ChangedHouseholdPersons,
    household_bucket_keys,
    household_cell_prb,
    household_public_batch,
    household_public_schema,
    write_household_buckets,
)
from sdc.pipeline.order import order_salt
from sdc.pipeline.records_file import RecordsSpill, write_records_from_buckets
from sdc.samples import generate_household_sample


def _stream_config(path, xi, policy, weight, out_dir):
    """GEN read from the Parquet file ``path`` (``weight``: the weight column or None), the
    public files in Parquet and CSV into ``out_dir``."""
    inp = {**GEN["input"], "path": str(path), "format": "parquet"}
    if weight:
        inp["weight"] = weight
    return sdc.parse_config({**GEN, "input": inp,
                             "risk": {"households": "warn", "xi": xi, "small_blocks": policy},
                             "output": {"dir": str(out_dir), "formats": ["parquet", "csv"]}})


@pytest.fixture(scope="module")
def gen6000(tmp_path_factory):
    """The 6,000-person file (seed 4, 40 regions) as a frame and as Parquet, and
    ``release(xi, policy, weight)``: its in-memory release with seed 21 (the pandas engine's
    reference the batch tests below compare with; files kept), made once per configuration
    for the tests that compare with the same one (read only)."""
    folder = tmp_path_factory.mktemp("gen6000")
    f = generate_household_sample(6000, seed=4, n_regions=40)
    path = folder / "hh.parquet"
    f.to_parquet(path, index=False)
    made: dict = {}

    def release(xi, policy, weight=None):
        if (xi, policy, weight) not in made:
            cfg = _stream_config(path, xi, policy, weight, folder / "rel")
            made[xi, policy, weight] = sdc.release_frame(
                f, cfg, 21, out_dir=folder / f"want{len(made)}")
        return made[xi, policy, weight]

    return SimpleNamespace(frame=f, path=path, release=release)


@pytest.fixture(scope="module")
def gen8000(tmp_path_factory):
    """The 8,000-person file (seed 9, 40 regions) and ``release(xi, policy)``: its in-memory
    release with seed 13 (public files in Parquet and CSV kept), made once per configuration
    for the public-file and partition-set tests that compare with the same one (read only)."""
    folder = tmp_path_factory.mktemp("gen8000")
    f = generate_household_sample(8000, seed=9, n_regions=40)
    made: dict = {}

    def release(xi, policy):
        if (xi, policy) not in made:
            cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi,
                                                    "small_blocks": policy},
                                    "output": {"dir": str(folder / "rel"),
                                               "formats": ["parquet", "csv"]}})
            made[xi, policy] = sdc.release_frame(f, cfg, 13, out_dir=folder / f"want{len(made)}")
        return made[xi, policy]

    return SimpleNamespace(frame=f, release=release)


def _batch_public_bytes(f, cfg, seed, n_batches, bits, tmp_path, shuffle):
    """The chain a batch executor runs, on ``f`` cut into batches: count, both stages,
    identity pass (keeping the changed households' persons), salt, apply + spill, write."""
    pcfg = person_config(cfg)
    rows = (np.random.default_rng(shuffle).permutation(len(f)) if shuffle is not None
            else np.arange(len(f)))
    batches = [f.iloc[p] for p in np.array_split(rows, n_batches)]
    # pass 1: count
    counter, households = CellCounter(), HouseholdCounter(cfg, merge_every=2)
    for b in batches:
        counter.add(cell_codes(b, pcfg))
        households.add(b)
    codes, counts = counter.result()
    cells = cell_table(codes, counts, pcfg)
    agg = households.result()
    hs, ps = household_stage(agg, cfg, seed), person_stage(cells, cfg)
    locate = CellLocator(codes, pcfg)
    # pass 2: identities of the drawing persons; the changed households' persons kept
    idents, ties, n_listed = [], [], 0
    changed = ChangedHouseholdPersons()
    for b in batches:
        c = locate(cell_codes(b, pcfg))
        hrow = lookup_households(agg.identity, household_identity(b, cfg))
        i, t = person_draw_identities(b, c, ps, cells, cfg)
        changed.add(c, hrow, drawing_persons(c, ps, cells, cfg), hs.changed, n_listed)
        n_listed += i.size
        idents.append(i)
        ties.append(t)
    ident = unique_identities(np.concatenate(idents), np.concatenate(ties))
    table, orig = extended_cells(cells, changed.released_codes(ident, cells, ps, hs, cfg, seed))
    salt = order_salt(table)
    pseudo = pseudonyms(agg.identity, seed, salt)
    schema = household_public_schema(
        public_schema(cfg, pa.Schema.from_pandas(f, preserve_index=False)), cfg)
    sizes = [int(x) + 1 for x in table.key_codes.max(axis=0)]
    # pass 3: apply, spill whole households by pseudonym
    spill = BucketSpill(tmp_path / "buckets", bits)
    records = RecordsSpill(tmp_path / "records", bits)
    pos = 0
    kept: dict = {"cell": [], "row": [], "released": [], "weight": []}
    for b, i in zip(batches, idents, strict=True):
        c = locate(cell_codes(b, pcfg))
        hrow = lookup_households(agg.identity, household_identity(b, cfg))
        out = released_person_codes(c, hrow, ident[pos:pos + i.size], cells, ps, hs, cfg, seed)
        pos += i.size
        rel = row_index(table.key_codes, out, sizes)
        assert (rel >= 0).all()
        t = household_public_batch(b, orig[c], rel, table, pseudo[hrow], cfg, seed, schema,
                                   salt)
        spill.add(t, household_bucket_keys(pseudo[hrow], agg.n_households))
        records.add(record_identity(b, cfg), orig[c], rel)
        for k, v in (("cell", c), ("row", hrow), ("released", rel)):
            kept[k].append(v)
        if cfg.input.weight:
            kept["weight"].append(b[cfg.input.weight].to_numpy(dtype=float))
    spill.close()
    records.close()
    rec_path = write_records_from_buckets(
        records.buckets(), tmp_path / "records.parquet", cell_identity(table.key_codes, cfg),
        household_cell_prb(ps, cells, table, orig, cfg))
    pq_buf, csv_buf = io.BytesIO(), io.BytesIO()
    w = PublicWriter(schema, parquet=pq_buf, csv=csv_buf)
    write_household_buckets(spill.buckets(), w, cfg.input.household_id)
    w.close()
    parts = {k: np.concatenate(v) if v else None for k, v in kept.items()}
    parts.update(agg=agg, hs=hs, ps=ps, cells=cells, orig=orig, ident=ident, table=table)
    return schema, pq_buf.getvalue(), csv_buf.getvalue(), rec_path.read_bytes(), parts


@pytest.mark.parametrize("xi,policy,n_batches,bits,shuffle", [
    (0.5, "merge", 5, 3, 1), (0.34, "calibrate", 7, 0, 2), (0.5, "merge", 1, 6, None)])
def test_batch_public_files_equal_the_pandas_engines(tmp_path, xi, policy, n_batches, bits,
                                                     shuffle, gen8000):
    cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy},
                            "output": {"dir": str(tmp_path / "rel"),
                                       "formats": ["parquet", "csv"]}})
    f = gen8000.frame
    seed = 13
    r = gen8000.release(xi, policy)
    assert r.households.changed.any() and r.n_changed > r.households.changed.sum()
    schema, got_pq, got_csv, got_rec, _ = _batch_public_bytes(f, cfg, seed, n_batches, bits,
                                                           tmp_path, shuffle)
    assert schema == r.schema
    assert got_pq == r.files["microdata.parquet"].read_bytes()
    assert got_csv == r.files["microdata.csv"].read_bytes()
    # the internal records file (series risk): the in-memory pipeline's bytes
    assert got_rec == r.records_file.read_bytes()


@pytest.mark.parametrize("xi,policy,coarse", [(0.5, "merge", False), (0.34, "calibrate", False),
                                               (0.5, "merge", True)])
def test_partition_sets_from_the_batches_equal_the_pandas_engines(tmp_path, xi, policy, coarse,
                                                                  gen8000):
    """internal/partition_sets.parquet's table and every cell's partition set (the extended
    cell table: released combinations of changed households included; ``coarse``: one
    household key, no small class)."""
    from sdc.method.household_batches import household_partition_sets

    raw = {**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy}}
    if coarse:
        raw["key_variables"] = {k: v for k, v in GEN["key_variables"].items()
                                if k not in ("region", "dwelling")}
        raw["input"] = {**GEN["input"], "drop": ["income", "region", "dwelling"]}
    cfg = sdc.parse_config(raw)
    f = gen8000.frame
    r = sdc.release_frame(f, cfg, 13) if coarse else gen8000.release(xi, policy)
    *_, p = _batch_public_bytes(f, cfg, 13, 3, 1, tmp_path, 5)
    table = p["table"]
    assert (table.n_cells > p["cells"].n_cells) == (p["ps"].small_classes > 0) == (not coarse)
    cell_ps, frame = household_partition_sets(p["cells"], p["ps"], table, p["orig"], cfg)
    np.testing.assert_array_equal(cell_ps, r.cell_partition_set)
    pd.testing.assert_frame_equal(frame, r.partition_sets)


def test_bucket_keys_keep_households_whole_and_in_pseudonym_order():
    from sdc.io.spill import bucket_of

    for n_h in (1, 2, 3, 1000, 1025):
        p = np.arange(1, n_h + 1)
        for bits in (0, 1, 4, 12):
            b = bucket_of(household_bucket_keys(p, n_h), bits).astype(np.int64)
            assert (np.diff(b) >= 0).all()
            assert b.max() < 1 << bits


@pytest.mark.parametrize("xi,policy,weight", [(0.5, "merge", None), (0.34, "calibrate", "hh_weight")])
def test_household_risk_section_from_the_batches_equals_the_pandas_engines(tmp_path, xi, policy,
                                                                           weight, gen6000):
    """risk.json's ``households`` (hierarchical risk before and after, the composition intruder
    replayed from both stages' draws) from what the batches keep: every person's cell,
    household row, released cell and weight, the drawing identities: the pandas engine's."""
    from sdc.method.household_batches import person_draw_plan
    from sdc.method.households import household_config
    from sdc.method.plan import draw_plan
    from sdc.reports.households import StageDraws, composition_risk_of, household_section_of

    raw = {**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy}}
    if weight:
        raw["input"] = {**GEN["input"], "weight": weight}
    cfg = sdc.parse_config(raw)
    f = gen6000.frame
    seed = 21
    want = gen6000.release(xi, policy, weight).household_report["risk"]
    *_, p = _batch_public_bytes(f, cfg, seed, 4, 2, tmp_path, 3)
    hs, ps, agg, cells = p["hs"], p["ps"], p["agg"], p["cells"]
    households = StageDraws(draw_plan(hs.plan, household_config(cfg)),
                            hs.plan.partitioned.cells.key_codes, hs.cell, hs.identity)
    persons = StageDraws(person_draw_plan(ps, cells, cfg), cells.key_codes, p["cell"],
                         p["ident"])
    comp = composition_risk_of(households, persons, p["row"], agg.n_households, cfg, seed)
    got = household_section_of(
        cfg, p["orig"][p["cell"]], p["released"], p["row"], agg.n_households, p["weight"], comp,
        households_changed=int(hs.changed.sum()),
        household_certificate=float(hs.plan.certificate),
        household_certificate_at=hs.plan.certificate_at,
        household_prbs=len(hs.plan.block_plan.blocks),
        person_certificate=float(ps.plan.certificate), small_classes=ps.small_classes,
        small_class_persons=ps.small_class_persons)
    assert got == want


@pytest.mark.parametrize("xi,policy", [(0.5, "merge"), (0.34, "calibrate")])
def test_household_audit_from_the_batches_equals_the_pandas_engines(tmp_path, xi, policy,
                                                                    gen6000):
    """audit.json's ``households`` (household PRBs with their changed households, partition
    sets, the household columns' dependence figures, both certificates, the composition
    intruder) from the batch parts: the pandas engine's."""
    import dataclasses

    from sdc.method.household_batches import (
        household_blocks,
        household_dependence,
        person_draw_plan,
    )
    from sdc.method.households import household_config
    from sdc.method.plan import draw_plan
    from sdc.release.record import household_audit, household_audit_of
    from sdc.reports.households import StageDraws, composition_risk_of

    cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy}})
    f = gen6000.frame
    seed = 21
    want = household_audit(gen6000.release(xi, policy))
    *_, p = _batch_public_bytes(f, cfg, seed, 4, 2, tmp_path, 3)
    hs, ps, agg, cells = p["hs"], p["ps"], p["agg"], p["cells"]
    hs.plan = dataclasses.replace(hs.plan, dependence=household_dependence(agg, hs, cfg))
    comp = composition_risk_of(
        StageDraws(draw_plan(hs.plan, household_config(cfg)),
                   hs.plan.partitioned.cells.key_codes, hs.cell, hs.identity),
        StageDraws(person_draw_plan(ps, cells, cfg), cells.key_codes, p["cell"], p["ident"]),
        p["row"], agg.n_households, cfg, seed)
    got = household_audit_of(
        cfg.input.household_id, list(cfg.household_keys), n_households=agg.n_households,
        households_changed=int(hs.changed.sum()), certificate=float(hs.plan.certificate),
        certificate_at=hs.plan.certificate_at, person_certificate=float(ps.plan.certificate),
        person_certificate_at=ps.plan.certificate_at, small_classes=ps.small_classes,
        small_class_persons=ps.small_class_persons, merges=list(hs.plan.merges),
        dependence=list(hs.plan.dependence), blocks=household_blocks(hs, cfg),
        partition_sets=hs.plan.partition_sets, composition=comp)
    assert got["blocks"] and any(b["changed"] for b in got["blocks"])
    assert got["dependence"]
    assert got == want


def test_report_aggregates_over_the_extended_cells_equal_the_pandas_reports(tmp_path, gen6000):
    """The batch report accumulator fed with every person's counted and released row of the
    extended cell table (and the refinement passes) gives the pandas engine's risk.json and
    utility.json, the households sections aside (built from parts, tested above)."""
    from types import SimpleNamespace

    from sdc.method.household_batches import household_partition_sets, person_draw_plan
    from sdc.pipeline.household_public import household_cell_prb
    from sdc.pipeline.report_parts import add_apply_batch, batch_reports, new_accumulator
    from sdc.reports.build import reports_from_aggregates

    f = gen6000.frame
    raw = {**GEN, "input": {**GEN["input"], "path": str(gen6000.path), "format": "parquet",
                            "weight": "hh_weight"},
           "risk": {"households": "warn", "xi": 0.34, "small_blocks": "calibrate"}}
    cfg = sdc.parse_config(raw)
    seed = 21
    r = gen6000.release(0.34, "calibrate", "hh_weight")
    want = batch_reports(r, cfg, seed=seed)
    *_, p = _batch_public_bytes(f, cfg, seed, 1, 1, tmp_path, None)
    cells, ps, table, orig = p["cells"], p["ps"], p["table"], p["orig"]
    acc = new_accumulator(table, cfg, float(f["hh_weight"].abs().max()))
    add_apply_batch(acc, f, orig[p["cell"]], p["released"], cfg)
    more = acc.start_refinement()
    while more:
        acc.add_refine_batch(f.index.to_numpy(), orig[p["cell"]],
                             {c: f[c].to_numpy(dtype=float) for c in acc.refining})
        more = acc.end_refine_pass()
    # the combined figures of the release (sdc.pipeline.household_result)
    pk = [cfg.key_names.index(k) for k in cfg.person_keys]
    moved = (table.key_codes[p["released"]][:, pk] != cells.key_codes[p["cell"]][:, pk]).any(1)
    full_prb = person_draw_plan(ps, cells, cfg).cell_prb
    blocks = ps.plan.blocks.copy()
    blocks["changed"] = np.bincount(full_prb[p["cell"][moved]],
                                    minlength=len(blocks)).astype(np.int64)
    cell_ps, ps_frame = household_partition_sets(cells, ps, table, orig, cfg)
    hs = p["hs"]
    cert, cert_at = ps.plan.certificate, ps.plan.certificate_at
    if hs.plan.certificate > cert:
        cert, cert_at = hs.plan.certificate, hs.plan.certificate_at
    part = ps.plan.partitioned
    result = SimpleNamespace(
        blocks=blocks, cells=table, cell_prb=household_cell_prb(ps, cells, table, orig, cfg),
        cell_partition_set=cell_ps, partition_sets=ps_frame, certificate=cert,
        certificate_at=cert_at, xi=part.xi, theta=part.theta, kmin=part.kmin,
        merges=list(ps.plan.merges) + [f"household stage: {m}" for m in hs.plan.merges],
        households=None, n_records=len(f), dp_perturbations=[],
        dependence=list(ps.plan.dependence))
    got = reports_from_aggregates(None, result, cfg, acc.aggregates(), seed=seed,
                                  summaries=acc.group_summaries(), moments=acc.cell_moments())
    assert "households" in want.risk and acc.numeric  # a household file, numeric summaries
    assert table.n_cells > cells.n_cells and ps.small_classes > 0
    want_risk = {k: v for k, v in want.risk.items() if k != "households"}
    # the household stage's dependence figures (household and member columns against the
    # household keys) come from that stage's plan, which this rebuild leaves out
    dep = dict(want_risk["dependence"])
    hh_dep = dep.pop("households")  # checked in tests/method/test_dependence_households.py
    assert hh_dep and all(d["figure"] <= cfg.risk.xi for d in hh_dep)
    want_risk["dependence"] = dep
    want_util = {k: v for k, v in want.utility.items() if k != "households"}
    assert got.risk == want_risk
    assert got.utility == want_util


@pytest.mark.parametrize("xi,policy,weight,batch_rows", [
    (0.5, "merge", None, 1000), (0.34, "calibrate", "hh_weight", 777)])
def test_stream_household_release_equals_the_pandas_engine(tmp_path, xi, policy, weight,
                                                           batch_rows, gen6000):
    """The household release in batches from a Parquet file (the streaming executor's reader,
    ``LocalBatches``, driven directly): its public files, records file, reports and audit
    sections are the pandas engine's."""
    from sdc.executors.streaming import LocalBatches
    from sdc.pipeline.households import stream_household_release
    from sdc.pipeline.report_parts import batch_reports
    from sdc.release.record import household_audit

    cfg = _stream_config(gen6000.path, xi, policy, weight, tmp_path / "rel")
    seed = 21
    r = gen6000.release(xi, policy, weight)  # one batch, in memory
    want_files = {name: path.read_bytes() for name, path in r.files.items()}
    assert set(want_files) == {"microdata.parquet", "microdata.csv"}
    want = batch_reports(r, cfg, seed=seed)
    res = stream_household_release(cfg, seed, tmp_path / "out",
                                   records_path=tmp_path / "records.parquet",
                                   runner=LocalBatches(cfg, batch_rows))
    for name, data in want_files.items():
        assert res.files[name].read_bytes() == data, name
    assert res.records_file.read_bytes() == r.records_file.read_bytes()
    got = batch_reports(res, cfg, seed=seed)
    assert got.risk == want.risk
    assert got.utility == want.utility
    assert household_audit(res) == household_audit(r)
    pd.testing.assert_frame_equal(res.blocks, r.blocks)
    pd.testing.assert_frame_equal(res.partition_sets, r.partition_sets)
    assert (res.certificate, res.merges, res.n_changed) == (r.certificate, r.merges, r.n_changed)
