"""The three engines give the same release: pandas (in memory), streaming (batches), dask.

Same input, config and seed -> byte-identical public files, the same cell table, PRBs,
certificate and released counts. The streaming engine runs with tiny batches and buckets, so
batching and bucketing are exercised on small files; the Dask engine on a real 2-worker
LocalCluster.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.config.load import parse_config
from sdc.executors.streaming import count_cells, stream_release
from sdc.io import spill
from sdc.io.batches import input_arrow_schema, public_bytes, public_schema
from tests.release_helpers import public_frame

KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 44}


def make_frame(n: int, seed: int = 3, with_missing: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {"pid": rng.permutation(n).astype(np.int64) * 11 + 5}
    for name, levels in KEYS.items():
        w = rng.pareto(1.2, levels) + 0.05
        cols[name] = rng.choice(levels, size=n, p=w / w.sum()).astype(np.int64)
    cols["income"] = rng.lognormal(8, 1, n).round(2)
    hours = rng.integers(0, 80, n).astype(float)
    if with_missing:
        hours[rng.random(n) < 0.01] = np.nan  # an integer column with a few missing values
    cols["hours"] = hours
    cols["region"] = rng.choice(["north", "south", "east", "west"], size=n)
    cols["name"] = [f"person {i}" for i in range(n)]
    return pd.DataFrame(cols)


def config_for(path: Path, out: Path, fmt: str, id_column: str | None = "pid",
               formats=("parquet", "csv"), perturb: dict | None = None) -> sdc.ReleaseConfig:
    inp = {"path": str(path), "format": fmt, "drop": ["name"]}
    if id_column:
        inp["id_column"] = id_column
    return parse_config({
        "name": "engines",
        "input": inp,
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 25, 35, 45, 55, 65]},
                      "race": {"groups": {"white": [0], "black": [1],
                                          "other": list(range(2, 9))}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 11,
        "output": {"dir": str(out), "formats": list(formats)},
        **({"perturb": perturb} if perturb else {}),
    })


def pandas_public(config, seed: int) -> dict[str, bytes]:
    from sdc.io.read import read_input

    frame = read_input(config)
    out = Path(config.output.dir)
    result = sdc.release_frame(frame, config, seed, out_dir=out.with_name(out.name + "-library"))
    pub = public_frame(result)
    schema = public_schema(config, input_arrow_schema(config))
    return public_bytes(pub, schema, list(config.output.formats)), result


def pandas_records(result) -> bytes:
    """The in-memory release's internal/records.parquet bytes."""
    return result.records_file.read_bytes()


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(params=["parquet", "csv"])
def small_input(request, tmp_path):
    frame = make_frame(3_000)
    path = tmp_path / f"in.{request.param}"
    if request.param == "parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    else:
        frame.to_csv(path, index=False)
    return path, request.param


@pytest.mark.parametrize("id_column", ["pid", None])
def test_streaming_equals_pandas(small_input, tmp_path, monkeypatch, id_column):
    path, fmt = small_input
    cfg = config_for(path, tmp_path / "rel", fmt, id_column=id_column)
    expected, result = pandas_public(cfg, 11)
    monkeypatch.setattr(spill, "BUCKET_ROWS", 200)  # 16 buckets for 3,000 records
    got = stream_release(cfg, 11, tmp_path / "stream", batch_rows=413,
                         records_path=tmp_path / "int" / "records.parquet")
    for name, data in expected.items():
        assert sha((tmp_path / "stream" / name).read_bytes()) == sha(data), name
    assert got.records_file.read_bytes() == pandas_records(result)
    assert got.records_file.stat().st_mode & 0o777 == 0o600
    assert got.n_records == len(result.frame)
    assert got.plan.certificate == result.certificate
    assert got.n_changed == result.n_changed
    pd.testing.assert_frame_equal(got.plan.blocks.drop(columns=["changed"], errors="ignore"),
                                  result.blocks.drop(columns=["changed"]))
    assert np.array_equal(got.released_frequency,
                          np.bincount(result.released_cell, minlength=result.cells.n_cells))
    # the public file is a permutation of the released records, numbered 1..n
    pub = pq.read_table(tmp_path / "stream" / "microdata.parquet").to_pandas()
    assert pub["record_id"].tolist() == list(range(1, len(pub) + 1))
    assert "name" not in pub and (id_column is None or id_column not in pub)


def test_public_order_does_not_depend_on_row_order_or_batching(tmp_path, monkeypatch):
    frame = make_frame(2_000)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    frame.to_parquet(a, index=False)
    frame.sample(frac=1.0, random_state=5).to_parquet(b, index=False)
    monkeypatch.setattr(spill, "BUCKET_ROWS", 128)
    stream_release(config_for(a, tmp_path / "ra", "parquet"), 11, tmp_path / "oa", batch_rows=300)
    stream_release(config_for(b, tmp_path / "rb", "parquet"), 11, tmp_path / "ob", batch_rows=999)
    assert (tmp_path / "oa" / "microdata.parquet").read_bytes() == \
        (tmp_path / "ob" / "microdata.parquet").read_bytes()


def test_records_file_equal_across_engines_with_shared_identities(tmp_path, monkeypatch):
    """Without an id column and with one non-key column, thousands of records share a raw
    identity: the per-bucket unique_identities must equal the pandas engine's global one, and
    the file's order must not follow the input's row order."""
    frame = make_frame(3_000, with_missing=False)[[*KEYS, "region", "name"]]
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet", id_column=None, formats=("parquet",))
    _, result = pandas_public(cfg, 11)
    expected = pandas_records(result)
    monkeypatch.setattr(spill, "BUCKET_ROWS", 100)
    got = stream_release(cfg, 11, tmp_path / "stream", batch_rows=257,
                         records_path=tmp_path / "records.parquet")
    assert got.records_file.read_bytes() == expected
    rec = pq.read_table(got.records_file).to_pandas()
    assert rec.columns.tolist() == ["identity", "cell", "released"]
    assert rec["identity"].is_unique and len(rec) == len(frame)
    # the input's row order is not the file's
    assert not np.array_equal(rec["identity"].to_numpy(),
                              result.records_table()["identity"].to_numpy())
    # and a shuffled input gives the same bytes
    shuffled = tmp_path / "shuffled.parquet"
    frame.sample(frac=1.0, random_state=2).to_parquet(shuffled, index=False)
    cfg2 = config_for(shuffled, tmp_path / "rel2", "parquet", id_column=None,
                      formats=("parquet",))
    got2 = stream_release(cfg2, 11, tmp_path / "stream2", batch_rows=999,
                          records_path=tmp_path / "records2.parquet")
    assert got2.records_file.read_bytes() == expected


def test_written_files_have_their_digests_without_a_second_read(tmp_path, monkeypatch):
    """The public files (Parquet and CSV) and the records file are hashed while they are
    written (sdc.io.write.HashingFile): the audit record's digests need no second read, and
    they are the files' bytes."""
    import sdc.io.write as write_mod

    path = tmp_path / "in.parquet"
    make_frame(1_500).to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet", formats=("parquet", "csv"))
    got = stream_release(cfg, 11, tmp_path / "o", batch_rows=400,
                         records_path=tmp_path / "records.parquet")
    files = [*got.files.values(), got.records_file]
    want = [hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files]
    monkeypatch.setattr(write_mod, "sha256_file", lambda p: pytest.fail(f"{p} read again"))
    assert [write_mod.written_sha256(f) for f in files] == want


PERTURB = {"region": {"epsilon": 0.8, "domain_from_data": True}}


@pytest.mark.parametrize("id_column", ["pid", None])
def test_streaming_perturb_equals_pandas(tmp_path, monkeypatch, id_column):
    """perturb: per batch (designs from the count pass's value counts, record-keyed draws):
    public files and records file byte-identical to the pandas engine's; without an id column
    the identities are made distinct over all records first (pass 2)."""
    frame = make_frame(3_000, with_missing=False)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    cfg = config_for(path, tmp_path / "rel", "parquet", id_column=id_column, perturb=PERTURB)
    expected, result = pandas_public(cfg, 11)
    monkeypatch.setattr(spill, "BUCKET_ROWS", 200)
    got = stream_release(cfg, 11, tmp_path / "stream", batch_rows=413,
                         records_path=tmp_path / "records.parquet")
    for name, data in expected.items():
        assert sha((tmp_path / "stream" / name).read_bytes()) == sha(data), name
    assert got.records_file.read_bytes() == pandas_records(result)
    (want,), (have,) = result.dp_perturbations, got.dp_perturbations
    assert have == want and have.changed > 0


def test_streaming_perturb_reports_a_missing_value_with_its_global_row(tmp_path):
    frame = make_frame(1_000, with_missing=False)
    frame.loc[777, "region"] = None
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet", perturb=PERTURB)
    with pytest.raises(sdc.InputError, match="region.*rows 778"):
        stream_release(cfg, 11, tmp_path / "o", batch_rows=300)


@pytest.mark.parametrize("problem", ["missing", "outside"])
def test_perturb_problems_of_every_batch_are_counted_as_the_pandas_engine_does(tmp_path,
                                                                               problem):
    """Problems of a perturb: variable in several batches (streaming) and pieces (Dask): one
    error with the whole file's count and first rows, the pandas engine's message exactly."""
    from sdc.executors.dask import DaskSpec, dask_release
    from sdc.io.read import read_input

    frame = make_frame(1_000, with_missing=False)
    bad = {"missing": {100: None, 777: None, 950: None},
           "outside": {200: "up", 650: "down", 900: "up"}}[problem]
    for row, value in bad.items():
        frame.loc[row, "region"] = value
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=300)
    perturb = {"region": {"epsilon": 0.8, "categories": ["north", "south", "east", "west"]}}
    cfg = config_for(path, tmp_path / "rel", "parquet", perturb=perturb)
    with pytest.raises(sdc.InputError) as pandas_err:
        sdc.release_frame(read_input(cfg), cfg, 11)
    expected = str(pandas_err.value)
    assert "3 row(s)" in expected and {"missing": "rows 101, 778, 951",
                                       "outside": "e.g. ['up', 'down'] (rows 201, 651, 901)"
                                       }[problem] in expected
    with pytest.raises(sdc.InputError) as err:
        stream_release(cfg, 11, tmp_path / "o", batch_rows=300)
    assert str(err.value) == expected
    with pytest.raises(sdc.InputError) as err:
        dask_release(cfg, 11, tmp_path / "d", DaskSpec(workers=1))
    assert str(err.value) == expected


def test_cell_table_merged_from_batches_equals_whole_file(tmp_path):
    frame = make_frame(5_000, with_missing=False)
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    count = count_cells(cfg, batch_rows=333)
    part = sdc.partition_frame(frame, cfg)
    assert np.array_equal(count.cells.key_codes, part.cells.key_codes)
    assert np.array_equal(count.cells.frequency, part.cells.frequency)
    assert count.n_records == len(frame)


def test_batch_validation_reports_global_rows(tmp_path):
    frame = make_frame(1_000, with_missing=False)
    frame.loc[[10, 640, 999], "age"] = 500  # outside 0..91, in three different batches
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    with pytest.raises(sdc.InputError) as e:
        count_cells(cfg, batch_rows=300)
    msg = str(e.value)
    assert "age" in msg and "11, 641, 1000" in msg and "500" in msg


def test_streaming_names_a_missing_stata_input(tmp_path):
    cfg = config_for(tmp_path / "x.dta", tmp_path / "rel", "dta")
    with pytest.raises(sdc.InputError, match="does not exist"):
        stream_release(cfg, 1, tmp_path / "o")


@pytest.mark.slow
def test_dask_equals_pandas_on_a_two_worker_local_cluster(tmp_path):
    from sdc.executors.dask import DaskSpec, dask_release

    frame = make_frame(20_000)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):  # a folder of parts
        pq.write_table(pa.Table.from_pandas(frame.iloc[part], preserve_index=False),
                       folder / f"part-{i}.parquet", row_group_size=4_000)
    whole = tmp_path / "whole.parquet"
    frame.to_parquet(whole, index=False)
    expected, result = pandas_public(config_for(whole, tmp_path / "r0", "parquet"), 11)
    got = dask_release(config_for(folder, tmp_path / "r1", "parquet"), 11, tmp_path / "dask",
                       DaskSpec(workers=2, scratch=str(tmp_path)),
                       records_path=tmp_path / "records.parquet")
    for name, data in expected.items():
        assert sha((tmp_path / "dask" / name).read_bytes()) == sha(data), name
    assert got.records_file.read_bytes() == pandas_records(result)
    assert got.plan.certificate == result.certificate
    assert got.n_changed == result.n_changed
    # perturb: (domain_from_data) on the cluster: the contract's "perturb-data" case
    # (tests/contract/test_executors.py: every file, the records file and the reports)


@pytest.mark.parametrize("records", [False, True])
def test_duplicate_ids_across_batches_are_reported_with_global_rows(tmp_path, records):
    """Also with a records file: the count pass then finds the duplicates in the argsort of
    the kept identities (the records file's order) instead of a sorted copy."""
    frame = make_frame(1_000, with_missing=False)
    frame.loc[900, "pid"] = frame.loc[5, "pid"]  # rows 6 and 901: different batches of 300
    path = tmp_path / "dup.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    with pytest.raises(sdc.InputError) as e:
        stream_release(cfg, 1, tmp_path / "o", batch_rows=300,
                       records_path=tmp_path / "records.parquet" if records else None)
    assert "'pid'" in str(e.value) and "rows 6, 901" in str(e.value)
    assert not (tmp_path / "o").exists()
    assert not (tmp_path / "records.parquet").exists()


def _collide_two_ids(frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count pass's identities of ``frame``'s records 3 and 400 (different ids) made
    equal: a 64-bit collision, which the id check must confirm on the values."""
    from sdc.pipeline import count_parts

    real = count_parts.record_identity

    def colliding(batch, config):
        h = np.asarray(real(batch, config), np.uint64).copy()
        ids = batch["pid"].to_numpy()
        h[(ids == frame.loc[3, "pid"]) | (ids == frame.loc[400, "pid"])] = np.uint64(42)
        return h

    monkeypatch.setattr(count_parts, "record_identity", colliding)


@pytest.mark.slow
def test_dask_reports_duplicate_ids_in_different_partitions_with_global_rows(tmp_path):
    from sdc.executors.dask import DaskSpec, dask_release

    frame = make_frame(1_000, with_missing=False)
    frame.loc[900, "pid"] = frame.loc[5, "pid"]  # rows 6 and 901: different row groups of 300
    frame.loc[901, "pid"] = frame.loc[600, "pid"]  # rows 601 and 902: a third partition
    path = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=300)
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    cfg = config_for(path, tmp_path / "rel", "parquet")
    with pytest.raises(sdc.InputError) as e:
        dask_release(cfg, 1, tmp_path / "o", DaskSpec(workers=2))
    msg = str(e.value)
    assert "'pid'" in msg and "4 rows share an id" in msg and "rows 6, 601, 901, 902" in msg
    assert not (tmp_path / "o").exists()


def test_a_64_bit_identity_collision_is_not_reported_as_a_duplicate_id(tmp_path, monkeypatch):
    """Two different ids whose identity hashes are made equal: the check confirms on the
    actual values, finds no duplicate and only asks for the global identity step (False)."""
    frame = make_frame(600, with_missing=False)
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    _collide_two_ids(frame, monkeypatch)
    count = count_cells(cfg, batch_rows=200)
    assert count.identities_unique is False and count.n_records == 600


@pytest.mark.slow
def test_dask_uses_an_existing_cluster_by_its_scheduler_address(tmp_path, dask_cluster):
    """``engine.scheduler``: the release runs on a running cluster (the session's
    LocalCluster, tests/conftest.py, reached by its address like any other) and leaves it up."""
    from sdc.executors.dask import DaskSpec, dask_release

    cluster = dask_cluster
    frame = make_frame(5_000)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=1_500)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    expected, _ = pandas_public(cfg, 11)
    got = dask_release(cfg, 11, tmp_path / "dask",
                       DaskSpec(scheduler=cluster.scheduler_address, scratch=str(tmp_path)))
    from distributed import Client

    with Client(cluster.scheduler_address) as client:  # still up: the release did not own it
        assert len(client.scheduler_info()["workers"]) == 2
    for name, data in expected.items():
        assert sha((tmp_path / "dask" / name).read_bytes()) == sha(data), name
    assert got.n_records == 5_000


@pytest.mark.waits
def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    from sdc.executors.dask import DaskSpec, dask_release

    path = tmp_path / "in.parquet"
    make_frame(100).to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    with pytest.raises(sdc.InputError, match="cannot reach the Dask scheduler"):
        dask_release(cfg, 1, tmp_path / "o", DaskSpec(scheduler="tcp://127.0.0.1:9"))


# -- reports: risk.json, utility.json and report.html from every engine --------------------------
def report_frame(n: int, seed: int = 8, with_missing: bool = True) -> pd.DataFrame:
    """Weights, NaN in a numeric column, heavy ties (60 % zeros, some -0.0), a skewed
    (Pareto) and a negative column: every case of the out-of-core quartile select."""
    frame = make_frame(n, seed, with_missing=with_missing)
    rng = np.random.default_rng(seed + 1)
    frame["w"] = rng.uniform(0.5, 400.0, n)
    zeros = rng.lognormal(5, 2, n)
    zeros[rng.random(n) < 0.6] = 0.0
    zeros[rng.random(n) < 0.05] = -0.0
    frame["zeros"] = zeros
    frame["skew"] = rng.pareto(0.8, n) * 1e3
    frame["neg"] = -rng.exponential(3.0, n).round(1)
    frame["kids"] = rng.integers(-1, 9, n)  # integer-typed: resolved in the apply pass
    return frame


def report_config(path: Path, out: Path, fmt: str,
                  perturb: dict | None = None) -> sdc.ReleaseConfig:
    raw = {
        "name": "engines",
        "input": {"path": str(path), "format": fmt, "drop": ["name"], "id_column": "pid",
                  "weight": "w"},
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 25, 35, 45, 55, 65]}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 11,
        "output": {"dir": str(out), "formats": ["parquet"]},
        **({"perturb": perturb} if perturb else {}),
    }
    return parse_config(raw)


def pandas_reports(config, seed: int) -> dict[str, bytes]:
    from sdc.io.read import read_input
    from tests.release_helpers import reports_of

    frame = read_input(config)
    result = sdc.release_frame(frame, config, seed)
    return reports_of(result, config, seed=seed, n_sim=20).files()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_streaming_reports_equal_pandas(tmp_path, monkeypatch, fmt):
    """risk.json, utility.json and report.html byte-identical, with many small batches, and
    with a quartile select forced through several digit rounds and a collect round."""
    from sdc.pipeline.report_parts import batch_reports
    from sdc.reports import accumulate, quantiles

    frame = report_frame(4_000)
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                       row_group_size=900)
    else:
        frame.to_csv(path, index=False)
    cfg = report_config(path, tmp_path / "rel", fmt)
    expected = pandas_reports(cfg, 11)
    got = stream_release(cfg, 11, tmp_path / "s", batch_rows=333)
    # the numeric ranges come from the Parquet statistics, or (CSV) from the count pass: the
    # apply pass sums every numeric column, and the integer column is exact after it
    acc = got.accumulator
    assert not acc.sums_pending and not any(m.identity for m in acc.maps.values())
    assert acc.select["kids"].done
    # exact ranges: no refinement pass, the integer column resolved as integers (was the
    # "parquet" case of test_streaming_reports_do_not_depend_on_the_statistics, the same
    # question on the same kind of file: a release and a pandas reference more)
    assert acc.select["kids"].round == 2
    assert acc.maps["kids"].kind == "int" and not acc.maps["income"].identity
    files = batch_reports(got, cfg, seed=11, n_sim=20).files()
    assert set(files) == {"risk.json", "utility.json", "report.html"}
    for name, data in expected.items():
        assert files[name] == data, name
    # tiny histograms and collect budget: several radix rounds, same bytes
    monkeypatch.setattr(accumulate, "HIST_BINS", 1 << 9)
    monkeypatch.setattr(quantiles, "COLLECT_VALUES", 50)
    got = stream_release(cfg, 11, tmp_path / "s2", batch_rows=1000)
    assert got.accumulator.refine_pass > 1
    files = batch_reports(got, cfg, seed=11, n_sim=20).files()
    for name, data in expected.items():
        assert files[name] == data, name


@pytest.fixture(scope="module")
def statistics_input(tmp_path_factory) -> tuple[sdc.ReleaseConfig, dict[str, bytes]]:
    """The Parquet input of the statistics cases (written once, read only) and the pandas
    engine's reports of it, made once for the five cases that compare with them."""
    folder = tmp_path_factory.mktemp("statistics")
    path = folder / "in.parquet"
    pq.write_table(pa.Table.from_pandas(report_frame(3_000), preserve_index=False), path,
                   row_group_size=800)
    cfg = report_config(path, folder / "rel", "parquet")
    return cfg, pandas_reports(cfg, 11)


@pytest.mark.parametrize("stats", ["loose", "narrow", "shifted", "none"])
def test_streaming_reports_do_not_depend_on_the_statistics(tmp_path, monkeypatch, stats,
                                                           statistics_input):
    """The Parquet statistics only steer the quartile select: exact ones let the apply pass
    sum the values and resolve the integer column (test_streaming_reports_equal_pandas
    [parquet]); ranges wider than the data (the sums' parameters would differ), narrower
    (values outside) or shifted are detected and those columns start over with the plain
    image; without statistics the count pass measures the ranges. The reports are the pandas
    engine's, byte for byte, in every case."""
    from sdc.executors import file_facts
    from sdc.pipeline import report_parts as br

    cfg, expected = statistics_input
    real = br.input_value_ranges

    def ranges(config, columns):
        r = real(config, columns)
        assert set(r) == set(columns)  # pyarrow writes statistics for every numeric column
        change = {"loose": lambda lo, hi: (lo - 1, hi),
                  "narrow": lambda lo, hi: (lo, (lo + hi) / 2),
                  "shifted": lambda lo, hi: (lo + 0.5, hi + 0.5)}
        if stats == "none":
            return {}
        return {c: (*change[stats](lo, hi), i) for c, (lo, hi, i) in r.items()}

    monkeypatch.setattr(file_facts, "input_value_ranges", ranges)
    got = stream_release(cfg, 11, tmp_path / "s", batch_rows=500)
    acc = got.accumulator
    if stats == "none":  # measured by the count pass
        assert not acc.sums_pending and acc.select["kids"].round == 2  # no refinement
        assert acc.maps["kids"].kind == "int" and not acc.maps["income"].identity
    else:  # every column started over (or started) with the plain image
        assert acc.sums_pending == set(acc.numeric)
        assert all(m.identity for m in acc.maps.values())
    files = br.batch_reports(got, cfg, seed=11, n_sim=20).files()
    for name, data in expected.items():
        assert files[name] == data, name


def test_background_refinement_errors_reach_the_caller_and_a_failed_write_stops_it(
        tmp_path, monkeypatch):
    """The report refinement passes run in a thread alongside the writing: an error of the
    passes is raised by stream_release, and a failed write stops the passes (no thread is
    left reading the input)."""
    import threading

    from sdc.pipeline import kernels, passes
    from sdc.pipeline import release as pipeline
    from sdc.pipeline import report_parts as br

    frame = report_frame(2_000)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    cfg = report_config(path, tmp_path / "rel", "parquet")
    # no ranges: the sums and the quartiles need refinement passes
    monkeypatch.setattr(pipeline, "new_accumulator",
                        lambda cells, config, wmax, ranges=None, numeric=None:
                        br.new_accumulator(cells, config, wmax, {}, numeric))

    def broken_pass(*args, **kwargs):
        raise RuntimeError("refinement failed")

    with monkeypatch.context() as m:
        m.setattr(passes, "add_refine_batch", broken_pass)
        with pytest.raises(RuntimeError, match="refinement failed"):
            stream_release(cfg, 11, tmp_path / "a", batch_rows=400)

    started = threading.Event()
    real = br.add_refine_batch

    def slow_pass(*args, **kwargs):
        started.set()
        real(*args, **kwargs)

    def broken_write(bucket_files, writer, keys=None):
        assert started.wait(30)  # the passes are running
        raise OSError("disk full")

    monkeypatch.setattr(passes, "add_refine_batch", slow_pass)
    monkeypatch.setattr(kernels, "write_buckets_in_order", broken_write)
    with pytest.raises(OSError, match="disk full"):
        stream_release(cfg, 11, tmp_path / "b", batch_rows=400)
    assert not [t for t in threading.enumerate() if t.name == "sdc-report-refinement"]


def test_streaming_reports_equal_pandas_with_perturb(tmp_path):
    """A categorical perturb: variable (DP-PRAM, not a key) changes no report figure's
    source: the reports of the streaming engine are still the pandas engine's, byte for byte."""
    from sdc.pipeline.report_parts import batch_reports

    frame = report_frame(3_000, with_missing=False)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    cfg = report_config(path, tmp_path / "rel", "parquet", perturb=PERTURB)
    expected = pandas_reports(cfg, 11)
    got = stream_release(cfg, 11, tmp_path / "s", batch_rows=511)
    assert got.dp_perturbations and got.dp_perturbations[0].changed > 0
    files = batch_reports(got, cfg, seed=11, n_sim=20).files()
    for name, data in expected.items():
        assert files[name] == data, name


@pytest.mark.slow
def test_dask_reports_equal_pandas(tmp_path, statistics_input):
    """The Dask executor's reports of the statistics cases' file cut into three Parquet
    pieces are the pandas engine's of the whole file (the module's one pandas reference of
    it), byte for byte."""
    from sdc.executors.dask import DaskSpec, dask_release
    from sdc.pipeline.report_parts import batch_reports

    whole, expected = statistics_input
    frame = pd.read_parquet(whole.input_path)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, idx in enumerate(np.array_split(np.arange(len(frame)), 3)):
        pq.write_table(pa.Table.from_pandas(frame.iloc[idx], preserve_index=False),
                       folder / f"part-{i}.parquet", row_group_size=700)
    cfg = report_config(folder, tmp_path / "r1", "parquet")
    got = dask_release(cfg, 11, tmp_path / "dask", DaskSpec(workers=2))
    files = batch_reports(got, cfg, seed=11, n_sim=20).files()
    for name, data in expected.items():
        assert files[name] == data, name


def _dups_and_bad_ages(tmp_path: Path) -> Path:
    frame = make_frame(1_000, with_missing=False)
    frame.loc[20, "pid"] = frame.loc[10, "pid"]    # rows 11 and 21: within one batch of 300
    frame.loc[950, "pid"] = frame.loc[400, "pid"]  # rows 401 and 951: across batches
    frame.loc[[12, 700], "age"] = 500              # another problem in the same file
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=300)
    return path


def test_duplicate_ids_are_reported_with_the_other_problems(tmp_path):
    """The batches are validated without the id's uniqueness (checked once over the whole
    file): duplicates within one batch and across batches still appear, with their global
    rows and values, in the same problems table as the batch checks' problems."""
    path = _dups_and_bad_ages(tmp_path)
    frame = pd.read_parquet(path)
    with pytest.raises(sdc.InputError) as e:
        stream_release(config_for(path, tmp_path / "rel", "parquet"), 1, tmp_path / "o",
                       batch_rows=300)
    msg = str(e.value)
    assert "2 problems" in msg and "checked in batches" in msg
    pid_line = next(line for line in msg.splitlines() if line.strip().startswith("pid"))
    assert "unique" in pid_line and "11, 21, 401, 951" in pid_line
    assert str(frame.loc[10, "pid"]) in pid_line and "| 4 " in pid_line
    age_line = next(line for line in msg.splitlines() if line.strip().startswith("age"))
    assert "13, 701" in age_line and "500" in age_line
    assert not (tmp_path / "o").exists()
    # alone, a duplicate within one batch is the whole-file check's error
    frame = make_frame(600, with_missing=False)
    frame.loc[8, "pid"] = frame.loc[7, "pid"]
    frame.to_parquet(path, index=False)
    with pytest.raises(sdc.InputError, match=r"2 rows share an id .*rows 8, 9"):
        count_cells(config_for(path, tmp_path / "rel", "parquet"), batch_rows=300)


def test_the_records_files_sort_finds_the_duplicate_ids(tmp_path, monkeypatch):
    """With a records file the count pass sorts the identities once (argsort_u64, the records
    file's order) and takes the repeated ones from that sort: a duplicated id is refused with
    its rows, and two different ids whose 64-bit identities collide are released."""
    frame = make_frame(600, with_missing=False)
    frame.loc[8, "pid"] = frame.loc[7, "pid"]
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    with pytest.raises(sdc.InputError, match=r"2 rows share an id .*rows 8, 9"):
        stream_release(cfg, 1, tmp_path / "o", batch_rows=300,
                       records_path=tmp_path / "records.parquet")
    frame = make_frame(600, with_missing=False)
    frame.to_parquet(path, index=False)
    _collide_two_ids(frame, monkeypatch)
    res = stream_release(cfg, 1, tmp_path / "o2", batch_rows=300,
                         records_path=tmp_path / "records2.parquet")
    assert res.n_records == 600


@pytest.mark.slow
def test_dask_reports_duplicate_ids_with_the_other_problems(tmp_path):
    from sdc.executors.dask import DaskSpec, dask_release

    path = _dups_and_bad_ages(tmp_path)
    with pytest.raises(sdc.InputError) as e:
        dask_release(config_for(path, tmp_path / "rel", "parquet"), 1, tmp_path / "o",
                     DaskSpec(workers=2))
    msg = str(e.value)
    pid_line = next(line for line in msg.splitlines() if line.strip().startswith("pid"))
    assert "unique" in pid_line and "11, 21, 401, 951" in pid_line
    assert "13, 701" in msg and "checked per partition" in msg


@pytest.mark.parametrize("shared", [False, True])
def test_sorted_records_is_the_four_key_order(shared):
    """The records file's order is (raw identity, identity, cell, released): the argsort of
    distinct raw identities gives exactly it, and shared ones fall back to the lexsort."""
    from sdc.pipeline.records_file import sorted_records

    rng = np.random.default_rng(3)
    n = 5_000
    raw = rng.integers(0, 2**63, n, dtype=np.uint64)
    if shared:
        raw[::4] = raw[1::4][: raw[::4].size]  # a quarter of the records share a raw identity
    ident = rng.integers(0, 2**63, n, dtype=np.uint64)
    cell = rng.integers(0, 50, n).astype(np.uint64)
    rel = rng.integers(0, 50, n).astype(np.uint64)
    got = sorted_records(raw, ident, cell, rel)
    order = np.lexsort((rel, cell, ident, raw))
    for name, col in (("identity", ident), ("cell", cell), ("released", rel)):
        assert np.array_equal(got.column(name).to_numpy(), col[order])


def test_bucket_of_is_small_for_a_radix_sort():
    from sdc.io.spill import bucket_of

    keys = np.array([0, 2**63, 2**64 - 1], dtype=np.uint64)
    assert bucket_of(keys, 3).dtype == np.uint16
    assert bucket_of(keys, 3).tolist() == [0, 4, 7]
    assert bucket_of(keys, 0).tolist() == [0, 0, 0]
    assert bucket_of(keys, 20).tolist() == [0, 2**19, 2**20 - 1]


def test_the_order_key_determines_the_content_hash():
    """order = fmix64(fmix64(content ^ k0) + k1) is invertible, so sorting by the order key
    alone (what the engines carry) is sorting by (order, content): on a table with many
    duplicated records, equal order keys occur exactly for equal content hashes, and the
    positions equal the lexsort of both keys."""
    from sdc.pipeline.order import order_keys, sort_positions

    rng = np.random.default_rng(2)
    t = pa.table({"a": rng.integers(0, 4, 50_000), "b": rng.integers(0, 3, 50_000)})
    order, content = order_keys(t, seed=5, salt=9)
    pairs = np.unique(np.stack([order, content], axis=1), axis=0)
    assert np.unique(order).size == np.unique(content).size == pairs.shape[0] == 12
    assert np.array_equal(order[sort_positions(order)],
                          order[np.lexsort((content, order))])
    assert np.array_equal(content[sort_positions(order)],
                          content[np.lexsort((content, order))])


def test_every_executors_release_is_a_release_outcome(tmp_path):
    """One result type: the library's in-memory release and a batch executor's release are
    both a ReleaseOutcome (what the codebook, tables, audit and uncertainty steps take), with
    equal figures; only the library's keeps the released records."""
    from sdc.method.outcome import ReleaseOutcome

    frame = make_frame(1_500)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=400)
    cfg = config_for(path, tmp_path / "rel", "parquet")
    _, mem = pandas_public(cfg, 11)
    batch = stream_release(cfg, 11, tmp_path / "s", batch_rows=500)
    for name in ("cells", "cell_prb", "blocks", "partition_sets", "certificate", "merges",
                 "dp_perturbations", "dependence", "n_changed"):
        assert hasattr(mem, name) and hasattr(batch, name), name
    assert isinstance(mem, ReleaseOutcome) and isinstance(batch, ReleaseOutcome)
    assert mem.certificate == batch.certificate and mem.n_changed == batch.n_changed
    assert mem.blocks.equals(batch.blocks)
    assert type(mem) is type(batch) is ReleaseOutcome
    assert mem.released is not None and batch.released is None
    assert len(mem.frame) == len(frame) and mem.changed.sum() == mem.n_changed


def test_dask_household_release_survives_a_killed_worker(tmp_path, monkeypatch):
    """A household file on Dask (three passes as tasks, docs/HOUSEHOLDS.md "Engines"): a worker
    SIGKILLed in its first household task (test hook ``SDC_DASK_KILL_AT=household``) is
    replaced and its task rerun; the public files and the records file are those of the
    streaming engine byte for byte."""
    from engine_configs import household_config

    from sdc.executors.dask import DaskSpec, dask_release
    from sdc.executors.streaming import LocalBatches
    from sdc.pipeline.households import stream_household_release
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(2000, seed=5, n_regions=12)
    inp = tmp_path / "households.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), inp, row_group_size=300)
    d = household_config()
    d["input"].update({"path": str(inp), "format": "parquet", "drop": ["income"]})
    d["output"] = {"dir": str(tmp_path / "unused"), "formats": ["parquet", "csv"]}
    cfg = parse_config(d)
    want = stream_household_release(cfg, 7, tmp_path / "s",
                                    records_path=tmp_path / "s-records.parquet",
                                    runner=LocalBatches(cfg, 500))
    marks = tmp_path / "marks"
    monkeypatch.setenv("SDC_CHECKPOINT_DIR", str(marks))
    monkeypatch.setenv("SDC_DASK_KILL_AT", "household")
    got = dask_release(cfg, 7, tmp_path / "d", DaskSpec(workers=2, scratch=str(tmp_path)),
                       records_path=tmp_path / "d-records.parquet")
    assert (marks / "dask-killed-household").is_file()  # a worker was really killed
    assert got.n_records == want.n_records == len(frame)
    for name in ("microdata.parquet", "microdata.csv"):
        assert sha((tmp_path / "d" / name).read_bytes()) == sha(
            (tmp_path / "s" / name).read_bytes()), name
    assert sha((tmp_path / "d-records.parquet").read_bytes()) == sha(
        (tmp_path / "s-records.parquet").read_bytes())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sdc-")]  # scratch removed


def test_the_registry_says_what_each_executor_cannot_do():
    """What one executor does, all do, except the ``limits`` the registry lists (the one
    place): the in-memory executor has none, every one reading in batches names each limit's reason."""
    from sdc.executors.registry import executor_names, get_executor

    for name in executor_names():
        ex = get_executor(name)
        assert bool(ex.limits) == (not ex.reads_whole_input), name
        assert all(":" in limit for limit in ex.limits), name  # what: why
    assert any("CSV" in limit for limit in get_executor("dask").limits)


def test_local_batches_run_every_batch_on_their_threads_in_input_order(tmp_path):
    """LocalBatches.map runs every batch in its worker threads, the first one too (the passes
    made their lazy imports before, in the caller's thread), and gives the parts in input
    order."""
    import threading

    from sdc.executors.streaming import LocalBatches

    frame = pd.DataFrame({"a": np.arange(2000) % 4})
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    cfg = parse_config({"name": "t", "input": {"path": str(path), "format": "parquet"},
                        "key_variables": {"a": {"range": [0, 3]}}, "risk": {"xi": 0.395}})

    def where(batch: pd.DataFrame, i: int) -> tuple[int, int, str]:
        return i, int(batch.index[0]), threading.current_thread().name

    parts = list(LocalBatches(cfg, 300).map(where, ()))
    assert [p[0] for p in parts] == list(range(7))
    assert [p[1] for p in parts] == list(range(0, 2000, 300))
    assert all(p[2].startswith("sdc-batch") for p in parts)


_FIRST_IMPORTS = """
import json, sys, threading
from pathlib import Path

class Record:  # every module imported for the first time on a batch thread
    seen = []
    def find_spec(self, fullname, path=None, target=None):
        if threading.current_thread().name.startswith("sdc-batch"):
            self.seen.append(fullname)
        return None

sys.meta_path.insert(0, Record())
import sdc
from sdc.executors.streaming import stream_release
from sdc.samples import generate_census_sample, generate_household_sample
from tests.household_helpers import GEN

out = Path(sys.argv[1])
generate_household_sample(2000, seed=3).to_csv(out / "hh.csv", index=False)
cfg = sdc.parse_config({**GEN, "input": {**GEN["input"], "path": str(out / "hh.csv")}})
stream_release(cfg, 1, out / "h", batch_rows=1500, tmp_dir=out, records_path=out / "h.parquet")
generate_census_sample(6000, seed=4).to_csv(out / "p.csv", index=False)
cfg = sdc.load_config("configs/census_demo.yaml").model_copy(deep=True)
cfg.input.path = out / "p.csv"
stream_release(cfg, 1, out / "p", batch_rows=1000, tmp_dir=out, records_path=out / "p.parquet")
print(json.dumps(Record.seen))
"""


def test_no_module_is_first_imported_on_a_batch_thread(tmp_path):
    """In a fresh process (nothing imported beyond sdc's modules) a streaming release of a
    household and then of a person file imports no module for the first time on the batch
    threads: the passes import pandera (the one lazy import) before they map. Two batch
    threads importing pandera at once raised _DeadlockError in a fresh ``sdc release``
    process (exit 1 on every streaming release from the command line); LocalBatches then ran
    the first batch alone, one core idle for ~0.5 s of every pass (issue 48)."""
    import json
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", _FIRST_IMPORTS, str(tmp_path)], cwd=repo,
                         capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
