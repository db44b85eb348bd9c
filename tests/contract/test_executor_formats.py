"""The executor contract for file formats: what one executor reads and writes, all do
(issue 19), byte for byte.

- ``output.formats`` sav and dta on every executor: the batch executors write the SPSS/Stata
  files from the public records as written (held in memory once), with the in-memory
  release's function: the same labels, formats and bytes;
- CSV input on the dask executor: the client copies the CSV to Parquet with the streaming
  reader, the tasks read the copy; the files are the pandas and streaming executors', and a
  problem of the CSV is reported with its rows, naming the CSV (never the copy);
- SPSS/Stata *input* on every executor (read in chunks; Dask reads the Parquet copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from .test_executors import (
    EXECUTORS,
    _base,
    _differences,
    _files,
    _frame,
    app,
    runner,
)

pytestmark = pytest.mark.e2e

_ENGINE = {"pandas": "pandas", "streaming": {"kind": "streaming", "batch_rows": 700},
           "dask": {"kind": "dask", "workers": 2, "batch_rows": 700}}


def _run(cfg: dict[str, Any], root: Path, executor: str, expect: int = 0,
         engine: Any = None) -> tuple[Path, str]:
    cfg = dict(cfg, engine=engine or _ENGINE[executor])
    out = root / executor / "release"
    cfg["output"] = dict(cfg["output"], dir=str(out))
    path = root / executor / "job.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    r = runner.invoke(app, ["release", str(path)], env={"COLUMNS": "200"})
    text = r.stdout + (r.stderr or "")
    assert r.exit_code == expect, f"{executor}: exit {r.exit_code}\n{text}"
    return out, text


def _same_everywhere(cfg: dict[str, Any], root: Path,
                     executors: tuple[str, ...] = EXECUTORS,
                     engines: dict[str, Any] | None = None,
                     audited: tuple[str, ...] = EXECUTORS) -> dict[str, dict[str, Any]]:
    """Every executor's release of ``cfg`` (``engines``: an executor's engine section instead
    of ``_ENGINE``'s), those in ``audited`` audited; the files of all equal the first's.
    (A Dask release is audited by the streaming executor, the registry's ``audited_by``, and
    is the streaming release's bytes: its audit repeats the streaming one's; one test here
    audits it.)"""
    files = {}
    for executor in executors:
        if executor == "dask":
            pytest.importorskip("distributed")
        rel, _ = _run(cfg, root, executor, engine=(engines or {}).get(executor))
        files[executor] = _files(rel)
        if executor in audited:
            a = runner.invoke(app, ["audit", str(rel)])
            assert a.exit_code == 0, a.stdout + a.stderr
    for executor in executors[1:]:
        assert set(files[executor]) == set(files[executors[0]])
        for name, want in files[executors[0]].items():
            assert files[executor][name] == want, (
                f"{executor} differs in {name}: {_differences(files[executor][name], want)}")
    return files


def _parquet_input(tmp_path: Path) -> Path:
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(_frame(), preserve_index=False), inp,
                   row_group_size=500)
    return inp


def test_spss_and_stata_files_on_every_executor(prefect_harness, tmp_path):
    """``output.formats [parquet, csv, sav, dta]`` with labelled keys, weights and missing
    key values: microdata.sav and .dta (and the codebook that describes them) are the same
    bytes on the three executors; ``sdc audit`` passes on each (the contract's one audit of
    a Dask person release)."""
    cfg = _base(_parquet_input(tmp_path))
    cfg["input"]["weight"] = "w"
    cfg["key_variables"]["sex"]["labels"] = {0: "male", 1: "female"}
    cfg["output"]["formats"] = ["parquet", "csv", "sav", "dta"]
    files = _same_everywhere(cfg, tmp_path)
    assert {"public/microdata.sav", "public/microdata.dta"} <= set(files["pandas"])


def _csv_input(tmp_path: Path) -> Path:
    frame = _frame()
    frame.loc[frame.index[::41], "income"] = float("nan")  # empty fields in a value column
    inp = tmp_path / "in.csv"
    frame.to_csv(inp, index=False)
    return inp


def test_csv_input_on_every_executor(prefect_harness, tmp_path):
    """A CSV input released by the dask executor (the client's Parquet copy, 700-record row
    groups, in its own ``engine.scratch`` folder) gives the pandas and streaming executors'
    files, and the copy is gone after. (One dask release: the run with a scratch folder is
    the one compared, instead of a second release.)"""
    cfg = _base(_csv_input(tmp_path))
    cfg["input"]["format"] = "csv"
    cfg["input"]["weight"] = "w"
    cfg["output"]["formats"] = ["parquet", "csv", "dta"]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    files = _same_everywhere(cfg, tmp_path,
                             engines={"dask": dict(_ENGINE["dask"], scratch=str(scratch))},
                             audited=("pandas", "streaming"))
    assert "public/microdata.parquet" in files["dask"]
    assert not list(scratch.iterdir())  # the copy (and the spills) removed


def test_csv_problems_on_dask_name_the_csv_and_its_rows(prefect_harness, tmp_path):
    """Input problems found by the tasks on the copy are the streaming executor's: the same
    rows of the user's CSV, whose path (not the copy's) the messages name."""
    pytest.importorskip("distributed")
    frame = _frame()
    frame.loc[2345, "age"] = 140  # outside the key's range, in a later piece
    frame.loc[[10, 2999], "pid"] = 77777  # a duplicated id, first and last piece
    inp = tmp_path / "bad.csv"
    frame.to_csv(inp, index=False)
    cfg = _base(inp)
    cfg["input"]["format"] = "csv"
    texts = {e: _run(cfg, tmp_path, e, expect=2)[1] for e in ("streaming", "dask")}
    for executor, text in texts.items():
        flat = " ".join(text.split())
        assert "2346" in flat and "140" in flat, (executor, text)
        assert "77777" in flat and "11" in flat and "3000" in flat, (executor, text)
        assert "sdc-input-" not in text and "input.parquet" not in text, (executor, text)


def _stat_input(tmp_path: Path, fmt: str) -> Path:
    """The contract frame as an SPSS/Stata file with what such files carry: value labels, a
    text column with empty strings (missing), a non-key integer column stored as doubles with
    an integer format (SPSS: read back as int64), one with a fraction (stays float64), a
    non-key column whose SPSS user-missing code stays a value, and a key whose user-missing
    code is read as missing."""
    pyreadstat = pytest.importorskip("pyreadstat")
    frame = _frame()
    frame["region"] = frame["region"].where(frame.index % 97 != 3, "")
    frame["children"] = (frame.index % 4).astype(np.int64)
    frame["answer"] = np.where(frame.index % 53 == 0, 9, frame.index % 3).astype(np.int64)
    if fmt == "sav":  # Stata has no user-missing codes
        frame["marital"] = np.where(frame.index % 211 == 7, 9, frame["marital"])
    inp = tmp_path / f"in.{fmt}"
    labels = {"sex": {0: "male", 1: "female"}}
    if fmt == "sav":
        pyreadstat.write_sav(frame, str(inp), variable_value_labels=labels,
                             missing_ranges={"answer": [9], "marital": [9]},
                             variable_format={"children": "F2.0", "answer": "F1.0"})
    else:
        pyreadstat.write_dta(frame, str(inp), variable_value_labels=labels)
    return inp


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_spss_and_stata_input_on_every_executor(prefect_harness, tmp_path, fmt):
    """SPSS/Stata *input* on every executor: the streaming executor reads it in chunks
    (sdc.io.stat_input: a first pass decides the whole-column types), Dask tasks read the
    client's Parquet copy of those chunks; every file is the in-memory release's byte for
    byte, in small batches that cut the file into many chunks."""
    inp = _stat_input(tmp_path, fmt)
    cfg = _base(inp)
    cfg["input"]["format"] = fmt
    cfg["key_variables"]["marital"]["missing"] = "category"
    cfg["output"]["formats"] = ["parquet", "csv", fmt]
    files = _same_everywhere(cfg, tmp_path, audited=("pandas", "streaming"))
    assert f"public/microdata.{fmt}" in files["pandas"]
    pub = pq.read_table(tmp_path / "pandas" / "release" / "public" / "microdata.parquet")
    types = {f.name: f.type for f in pub.schema}
    if fmt == "sav":  # F2.0 with whole numbers: int64 on every executor, as from CSV
        assert types["children"] == pa.int64()
    from sdc.executors.registry import get_executor

    assert not any("input" in lim and "Stata" in lim and "convert" in lim
                   for e in ("streaming", "dask") for lim in get_executor(e).limits)
