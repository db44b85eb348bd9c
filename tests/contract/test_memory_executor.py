"""The in-memory executor (``get_executor("pandas").release``, the file read by the executor)
and the library's call on a frame (:func:`sdc.release_frame`: the same pipeline on the frame
read by ``sdc.read_input`` and validated) give every file byte for byte alike (public files,
the records file, reports, codebook, audit record), for the contract matrix, SPSS/Stata in and
out, and a household file. (The other executors are held to the in-memory one's bytes by
``test_executors.py``, and those to the golden digests.)

For the contract matrix the in-memory executor's release is the contract's reference (the
release ``sdc release`` made with ``engine: pandas``, once per case and worker, in the case's
``xdist_group``): the library's release of the same job is written and compared with it file
for file as the other executors' are (run fields aside), instead of releasing the case with
the executor a second time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

import sdc

from .test_executors import _base, _cases, _differences, _files, _input

_RUN = {"created", "created_at", "engine", "timings", "started", "finished"}


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if k not in _RUN}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _bytes(v: Path | bytes, name: str) -> Any:
    b = v.read_bytes() if isinstance(v, Path) else bytes(v)
    return _clean(json.loads(b)) if name == "audit.json" else b


def _both(cfg_dict: dict[str, Any], tmp_path: Path) -> None:
    from sdc.executors.registry import get_executor
    from sdc.io.schemas import validate_input
    from sdc.pipeline.report_parts import batch_reports
    from sdc.release.assemble import assemble_batch_release
    from sdc.release.job import load_job
    from sdc.series.seeds import load_seed

    cfg_dict["output"] = dict(cfg_dict.get("output", {}), dir=str(tmp_path / "rel"))
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg_dict, sort_keys=False))
    job = load_job(path)
    cfg = job.config
    seed = load_seed(cfg, create=True)
    frame = validate_input(job.frame, cfg)
    res = sdc.release_frame(frame, cfg, seed.value, out_dir=tmp_path / "library")
    want = assemble_batch_release(cfg, res, seed, input_sha256=job.input_sha256,
                                  config_text=job.config_text, engine=None,
                                  reports=batch_reports(res, cfg, seed=seed.value).files())
    stage = tmp_path / "stage"
    (stage / "internal").mkdir(parents=True)
    got_res = get_executor("pandas").release(cfg, seed.value, stage / "public", cfg.engine,
                                             records_path=stage / "internal" / "records.parquet")
    got = assemble_batch_release(cfg, got_res, seed, input_sha256=job.input_sha256,
                                 config_text=job.config_text, engine="pandas",
                                 reports=batch_reports(got_res, cfg, seed=seed.value).files())
    for w, g in zip(want, got, strict=True):
        assert set(w) == set(g)
        for name in w:
            assert _bytes(g[name], name) == _bytes(w[name], name), name


@pytest.mark.parametrize("case", _cases())
def test_the_pandas_executor_gives_the_in_memory_release(case, reference, tmp_path):
    """``sdc.release_frame`` on the reference's own job (its config file, input and seed),
    assembled and written as ``sdc release`` does, equals the reference (the in-memory
    executor's release through the CLI) in every file."""
    from sdc.io.schemas import validate_input
    from sdc.pipeline.report_parts import batch_reports
    from sdc.publish.folder import write_release
    from sdc.release.assemble import assemble_batch_release
    from sdc.release.job import load_job
    from sdc.series.seeds import load_seed

    inp, expected = reference[case]
    job = load_job(inp.parent / "pandas" / "job.yaml")  # the reference's job (tests.contract)
    cfg = job.config
    seed = load_seed(cfg)
    res = sdc.release_frame(validate_input(job.frame, cfg), cfg, seed.value,
                            out_dir=tmp_path / "library")
    public, internal = assemble_batch_release(
        cfg, res, seed, input_sha256=job.input_sha256, config_text=job.config_text,
        engine=None, reports=batch_reports(res, cfg, seed=seed.value).files())
    got = _files(write_release(tmp_path / "release", public, internal))
    # the series entry of the audit record is the flow's (its place among earlier releases
    # of the output folder: series_for), not the pipeline's: compared on every executor by
    # test_executors.py, and for a second release by its series test
    expected = dict(expected, **{"internal/audit.json": {
        k: v for k, v in expected["internal/audit.json"].items() if k != "series"}})
    assert "series" not in got["internal/audit.json"]
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == expected[name], (f"the library differs from the executor in {name} "
                                             f"({case}): {_differences(got[name], expected[name])}")


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_the_pandas_executor_reads_and_writes_spss_and_stata(fmt, tmp_path):
    pyreadstat = pytest.importorskip("pyreadstat")
    rng = np.random.default_rng(3)
    n = 1500
    frame = pd.DataFrame({"pid": np.arange(n, dtype=np.int64) + 1,
                          "sex": rng.integers(1, 3, n), "age": rng.integers(0, 92, n),
                          "region": rng.integers(1, 5, n).astype(float),
                          "income": rng.lognormal(8, 1, n).round(2)})
    inp = tmp_path / f"in.{fmt}"
    write = pyreadstat.write_sav if fmt == "sav" else pyreadstat.write_dta
    write(frame, str(inp), column_labels={"income": "yearly income"},
          **({"variable_value_labels": {"region": {1.0: "north", 2.0: "south"}}}
             if fmt == "sav" else {}))
    cfg = {"name": "stat", "input": {"path": str(inp), "format": fmt, "id_column": "pid"},
           "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 91]}},
           "partition": {"age": {"bands": [0, 35, 65]}},
           "risk": {"xi": 0.5, "small_blocks": "merge", "households": "warn"}, "seed": 7,
           "output": {"formats": ["parquet", "csv", "sav", "dta"]}}
    _both(cfg, tmp_path)


def test_the_pandas_executor_releases_a_household_file(tmp_path):
    rng = np.random.default_rng(9)
    h = 600
    size = rng.integers(1, 5, h)
    hid = np.repeat(np.arange(h) + 1000, size)
    n = hid.size
    region = rng.integers(1, 4, h)
    frame = pd.DataFrame({"pid": np.arange(n, dtype=np.int64) + 1, "hid": hid,
                          "region": np.repeat(region, size), "sex": rng.integers(1, 3, n),
                          "age": rng.integers(0, 92, n), "income": rng.lognormal(8, 1, n)})
    inp = tmp_path / "hh.parquet"
    frame.to_parquet(inp, index=False)
    cfg = {"name": "hh", "input": {"path": str(inp), "id_column": "pid", "household_id": "hid"},
           "key_variables": {"region": {"categories": [1, 2, 3], "level": "household"},
                             "sex": {"categories": [1, 2]}, "age": {"range": [0, 91]}},
           "partition": {"sex": "as_is", "age": {"bands": [0, 18, 35, 55, 65]}},
           "risk": {"xi": 0.5, "households": "warn"}, "seed": 11,
           "output": {"formats": ["parquet", "csv"]}}
    _both(cfg, tmp_path)


def test_every_batch_is_checked_against_the_output_schema(tmp_path, monkeypatch):
    """The pipeline validates each batch's released records with the output schema before a
    byte is spilled (every executor: the in-memory one here): a released key value outside its
    domain (a bug, forced by a patched decoder) stops the release with OutputSchemaError naming
    the column and the value, and nothing is written into the stage folder."""
    import sdc.pipeline.kernels as kernels
    from sdc.executors.registry import get_executor
    from sdc.io.schemas import OutputSchemaError
    from sdc.release.job import load_job
    from sdc.series.seeds import load_seed

    cfg_dict = _base(_input(tmp_path, "plain"))
    cfg_dict["output"] = dict(cfg_dict.get("output", {}), dir=str(tmp_path / "rel"))
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg_dict, sort_keys=False))
    cfg = load_job(path).config
    seed = load_seed(cfg, create=True)
    decode = kernels.decode_released

    def broken(*args, **kwargs):
        out = decode(*args, **kwargs)
        out.loc[out.index[0], "sex"] = 7  # sex has the domain 0..1
        return out

    monkeypatch.setattr(kernels, "decode_released", broken)
    stage = tmp_path / "stage"
    (stage / "internal").mkdir(parents=True)
    with pytest.raises(OutputSchemaError, match=r"(?s)sex.*7"):
        get_executor("pandas").release(cfg, seed.value, stage / "public", cfg.engine,
                                       records_path=stage / "internal" / "records.parquet")
    assert not (stage / "public").exists() or not any((stage / "public").iterdir())
