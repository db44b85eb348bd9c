"""Red-team run, the cases left open by the first round: each a test that fails on
the code before its fix. Listed in docs/RELIABILITY.md, section "Identifiers, labels,
missing codes, Prefect homes and Dask".

The releases run through the CLI (``cli`` fixture: typer's CliRunner, in-process) on the small
job of ``conftest.JobBuilder`` unless a case needs a subprocess.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import SDC_BIN, JobBuilder, contains

USER = 2


def _refused(job: JobBuilder, res, *fragments: str) -> None:
    assert res.exit_code == USER, res.output
    assert "Traceback" not in res.output
    missing = [f for f in fragments if not contains(res.output, f)]
    assert not missing, f"missing {missing} in:\n{res.output}"
    assert not job.leftovers(), job.leftovers()


# -- variable labels ---------------------------------------------------------------------------
def test_variable_label_of_an_absent_column_is_refused(job: JobBuilder, cli) -> None:
    """Old code: ``input.labels: {incme: ...}`` (a typo) was accepted silently (exit 0) and the
    label reached the codebook. Now validate and release refuse it (exit 2), naming it."""
    job.config["input"]["labels"] = {"income": "Yearly income", "incme": "Typo of income"}
    path = job.write()
    for cmd in ("validate", "release"):
        res = cli(cmd, path)
        _refused(job, res, "incme", "column present", "input.labels")


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_variable_label_of_a_dropped_column_is_not_published(job: JobBuilder, cli,
                                                             engine: str) -> None:
    """Old code: the label of ``name`` (under ``input.drop``) and of the input's id were
    listed in the public codebook. Now only labels of published columns appear."""
    job.config["input"]["labels"] = {"income": "Yearly income", "name": "Full name (secret)",
                                     "id": "Register number"}
    if engine == "pandas":
        job.config["output"]["formats"] = ["parquet", "csv", "sav"]
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    codebook = (job.out_dir / "public" / "codebook.md").read_text(encoding="utf-8")
    assert "Yearly income" in codebook
    assert "Full name" not in codebook and "Register number" not in codebook
    if engine == "pandas":
        _check_sav_labels(job)
    assert cli("audit", job.out_dir).exit_code == 0


def _check_sav_labels(job: JobBuilder) -> None:
    import pyreadstat

    _, meta = pyreadstat.read_sav(str(job.out_dir / "public" / "microdata.sav"),
                                  metadataonly=True)
    labels = dict(zip(meta.column_names, meta.column_labels, strict=True))
    assert labels["income"] == "Yearly income"
    assert "Full name (secret)" not in [t for t in labels.values() if t]


# -- integers beyond int64 ---------------------------------------------------------------------
BIG = "99999999999999999999"  # 1e20: beyond int64 and uint64


def _big_parquet(job: JobBuilder, column: str) -> None:
    """The job as Parquet with ``column`` uint64 and 2^63 + 5 in data row 4."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    job.config["input"]["path"] = "data/input.parquet"
    job.config["input"]["format"] = "parquet"
    job.write()
    t = pq.read_table(job.data_path)
    arr = np.asarray(t.column(column).to_numpy(), dtype=np.uint64)
    arr[3] = 2 ** 63 + 5
    t = t.set_column(t.schema.get_field_index(column), column, pa.array(arr, pa.uint64()))
    pq.write_table(t, job.data_path)


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
@pytest.mark.parametrize("column", ["age", "region"])
def test_key_beyond_int64_is_refused_clearly(job: JobBuilder, cli, engine: str,
                                             column: str) -> None:
    """Old code: a CSV key value 99999999999999999999 was shown as -9223372036854775808
    (pandas: the int64 cast wrapped) or 1e+20 with "widen the range" as the fix. Now: exit 2,
    the column, the value as a number beyond int64, its row and count, and the fix."""
    job.frame[column] = job.frame[column].astype(object)
    job.frame.loc[3, column] = BIG
    res = cli("release", job.write(), "--engine", engine)
    _refused(job, res, column, "| 1 | 4 |", "beyond 64-bit integers", "fix it in the file")
    assert "-9223372036854775808 |" not in res.text
    assert (BIG in res.text) if engine == "pandas" else ("1e+20" in res.text)


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_parquet_uint64_key_beyond_int64_is_refused_clearly(job: JobBuilder, cli,
                                                            engine: str) -> None:
    _big_parquet(job, "age")
    res = cli("release", job.config_path, "--engine", engine)
    _refused(job, res, "age", str(2 ** 63 + 5), "| 1 | 4 |", "beyond 64-bit integers")


@pytest.mark.parametrize("fmt,engine", [("csv", "pandas"), ("csv", "streaming"),
                                        ("parquet", "pandas"), ("parquet", "streaming"),
                                        ("parquet", "dask")])
def test_non_key_beyond_int64_is_released_exactly(job: JobBuilder, cli, fmt: str,
                                                  engine: str) -> None:
    """A non-key value beyond int64 (CSV text 99999999999999999999; Parquet uint64 2^63 + 5)
    comes out exactly as it went in, in the CSV and the Parquet file (control: held before)."""
    import pandas as pd
    import pyarrow.parquet as pq

    if engine == "dask":
        job.config["engine"] = {"kind": "dask", "workers": 1}
    if fmt == "csv":
        job.frame["income"] = job.frame["income"].astype(object)
        job.frame.loc[3, "income"] = BIG
        job.write()
        want = BIG
    else:
        _big_parquet(job, "income")
        want = str(2 ** 63 + 5)
    res = cli("release", job.config_path, "--engine", engine)
    assert res.exit_code == 0, res.output
    pub = job.out_dir / "public"
    csv = pd.read_csv(pub / "microdata.csv", dtype=str, keep_default_na=False)
    assert (csv["income"] == want).sum() == 1
    col = pq.read_table(pub / "microdata.parquet").column("income")
    assert [str(v) for v in col.to_pylist()].count(want) == 1


# -- sdc approve over an existing release --------------------------------------------------------
def test_approve_over_a_release_with_staff_files_refuses(job: JobBuilder, cli) -> None:
    """Old code: ``sdc approve`` of a release staged with ``--force`` replaced the existing
    release without the staff-files check ``--force`` does: an ``APPROVAL.txt`` and a
    signature put into it during the review were deleted (exit 0). Now: exit 2 listing them,
    both releases untouched; ``--discard-extra-files`` deletes them on request."""
    job.config["review"] = {"required": True, "approvers": ["alice"]}
    path = job.write()
    staged = job.out_dir.with_name(job.out_dir.name + ".staged")
    assert cli("release", path).exit_code == 0
    assert cli("approve", staged, "--as", "alice").exit_code == 0
    res = cli("release", path, "--force")          # staged again, to replace the release
    assert res.exit_code == 0, res.output
    assert staged.is_dir()
    (job.out_dir / "APPROVAL.txt").write_text("approved by J. Doe\n")
    (job.out_dir / "public" / "microdata.csv.asc").write_text("-----BEGIN PGP SIGNATURE-----\n")
    before = {p.relative_to(job.out_dir): p.read_bytes() for p in job.out_dir.rglob("*")
              if p.is_file()}
    res = cli("approve", staged, "--as", "alice")
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert contains(res.output, "holds 2 file(s) the release did not write: APPROVAL.txt, "
                                "public/microdata.csv.asc")
    assert contains(res.output, "--discard-extra-files")
    after = {p.relative_to(job.out_dir): p.read_bytes() for p in job.out_dir.rglob("*")
             if p.is_file()}
    assert after == before and staged.is_dir()
    res = cli("approve", staged, "--as", "alice", "--discard-extra-files")
    assert res.exit_code == 0, res.output
    assert not (job.out_dir / "APPROVAL.txt").exists() and not staged.exists()
    assert cli("audit", job.out_dir).exit_code == 0


# -- the DP-domain label on the report page ------------------------------------------------------
def _with_job_title(job: JobBuilder) -> None:
    titles = ["clerk", "teacher", "nurse"] * 200
    titles[17] = "astronaut"
    job.frame["job_title"] = titles


def _report(job: JobBuilder) -> str:
    import html
    import re

    page = next(job.out_dir.rglob("report.html")).read_text(encoding="utf-8")
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_report_states_a_domain_taken_from_the_data(job: JobBuilder, cli, engine: str) -> None:
    """Old code: ``domain_from_data: true`` was labelled "not differentially private" in the
    codebook only; report.html (the reviewer's page) did not mention DP-PRAM at all. Now the
    page's verdict box states it, from risk.json's ``release.perturb``."""
    import json

    _with_job_title(job)
    job.config["perturb"] = {"job_title": {"epsilon": 1.0, "domain_from_data": True}}
    res = cli("release", job.write(), "--engine", engine)
    assert res.exit_code == 0, res.output
    text = _report(job)
    assert ("Warning: job_title (PRAM, ε = 1) is NOT differentially private: domain taken "
            "from the data") in text, text[:3000]
    risk = json.loads((job.out_dir / "internal" / "risk.json").read_text(encoding="utf-8"))
    assert risk["release"]["perturb"] == [{
        "variable": "job_title", "epsilon": 1.0, "differentially_private": False,
        "domain": "not differentially private: domain taken from the data"}]
    assert cli("audit", job.out_dir).exit_code == 0


def test_report_states_dp_with_a_public_domain(job: JobBuilder, cli) -> None:
    _with_job_title(job)
    job.config["perturb"] = {"job_title": {"epsilon": 1.0, "categories": [
        "astronaut", "clerk", "nurse", "teacher"]}}
    res = cli("release", job.write())
    assert res.exit_code == 0, res.output
    text = _report(job)
    assert ("job_title: eps-differentially private PRAM, ε = 1 (public: 4 declared "
            "categories)") in text
    assert "NOT differentially private" not in text


# -- Stata extended missing values ---------------------------------------------------------------
def _dta_with_extended_missing(job: JobBuilder, column: str) -> None:
    """The job as a Stata file written by pyreadstat, with .a in data rows 4 and 8 and .z
    in row 10 of ``column``."""
    import pyreadstat

    job.config["input"]["path"] = "data/input.dta"
    job.config["input"]["format"] = "dta"
    job.config["output"]["formats"] = ["parquet", "csv", "dta"]
    f = job.frame.copy()
    f[column] = f[column].astype(object)
    f.loc[[3, 7], column] = "a"
    f.loc[9, column] = "z"
    job.skip_data = True
    job.write()
    job.data_path.parent.mkdir(parents=True, exist_ok=True)
    pyreadstat.write_dta(f, str(job.data_path), missing_user_values={column: ["a", "z"]})
    raw, _ = pyreadstat.read_dta(str(job.data_path), user_missing=True)
    assert raw[column].tolist()[3] == "a" and raw[column].tolist()[9] == "z"  # really .a/.z


def test_stata_extended_missing_in_a_non_key_column_is_missing(job: JobBuilder, cli) -> None:
    """Stata's .a-.z are missing values: the three come out as missing (empty in the CSV,
    null in Parquet, missing in the .dta), never as numbers; every other value exact."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pyreadstat

    _dta_with_extended_missing(job, "income")
    res = cli("release", job.config_path)
    assert res.exit_code == 0, res.output
    pub = job.out_dir / "public"
    want = sorted(float(v) for i, v in enumerate(job.frame["income"]) if i not in (3, 7, 9))
    csv = pd.read_csv(pub / "microdata.csv", dtype=str, keep_default_na=False)["income"]
    assert (csv == "").sum() == 3 and sorted(float(v) for v in csv[csv != ""]) == want
    col = pq.read_table(pub / "microdata.parquet").column("income")
    assert col.type == pa.float64(), col.type        # a number, as Stata stores it
    assert col.null_count == 3
    assert sorted(v for v in col.to_pylist() if v is not None) == want
    out, _ = pyreadstat.read_dta(str(pub / "microdata.dta"))
    back = pd.to_numeric(out["income"], errors="raise")  # numbers (pyreadstat: object
    assert back.isna().sum() == 3                         # for an int column with missing)
    assert sorted(back.dropna()) == want
    assert cli("audit", job.out_dir).exit_code == 0


def test_stata_extended_missing_in_a_key_is_missing(job: JobBuilder, cli) -> None:
    """In a key they are missing values too: refused under ``missing: error`` with the rows,
    released as the missing category under ``missing: category``."""
    _dta_with_extended_missing(job, "region")
    res = cli("release", job.config_path)
    _refused(job, res, "region", "not empty", "| 3 | 4, 8, 10 |", "missing: category")
    job.config["key_variables"]["region"]["missing"] = "category"
    # 3 records with a missing region cannot be certified on their own (the default policy,
    # docs/METHOD.md 7.9): missing moves like a category here
    job.config["key_variables"]["region"]["missing_moves"] = True
    job.config_path.write_text(__import__("yaml").safe_dump(job.config, sort_keys=False))
    res = cli("release", job.config_path)
    assert res.exit_code == 0, res.output


# -- decimals with trailing zeros -----------------------------------------------------------------
@pytest.mark.parametrize("kind,engine", [("csv", "pandas"), ("csv", "streaming"),
                                         ("parquet_string", "pandas"),
                                         ("parquet_string", "streaming"),
                                         ("parquet_decimal", "pandas"),
                                         ("parquet_decimal", "streaming"),
                                         ("parquet_decimal", "dask")])
def test_decimal_text_with_trailing_zeros_is_exact(job: JobBuilder, cli, kind: str,
                                                   engine: str) -> None:
    """``12.30``, ``5.00``, ``0.10`` in a non-key column (CSV text, Parquet string, Parquet
    decimal128(9, 2) with a null) come out exactly so in the CSV and the Parquet file (text
    stays text, a decimal stays decimal128), never ``12.3`` (control: held before; the
    rule is sdc.io.values: a CSV column is float64 only if the writer gives its text back)."""
    import decimal

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = np.array(["12.30", "5.00", "0.10"])[np.arange(600) % 3]
    if engine == "dask":
        job.config["engine"] = {"kind": "dask", "workers": 1}
    if kind == "csv":
        job.frame["price"] = texts
        job.write()
    else:
        job.config["input"]["path"] = "data/input.parquet"
        job.config["input"]["format"] = "parquet"
        job.write()
        t = pq.read_table(job.data_path)
        if kind == "parquet_string":
            col = pa.array(texts, pa.string())
        else:
            texts = texts.astype(object)
            texts[5] = None
            col = pa.array([None if v is None else decimal.Decimal(v) for v in texts],
                           pa.decimal128(9, 2))
        pq.write_table(t.append_column("price", col), job.data_path)
    res = cli("release", job.config_path, "--engine", engine)
    assert res.exit_code == 0, res.output
    pub = job.out_dir / "public"
    want = sorted("" if v is None else v for v in texts)
    csv = pd.read_csv(pub / "microdata.csv", dtype=str, keep_default_na=False)["price"]
    assert sorted(csv) == want
    col = pq.read_table(pub / "microdata.parquet").column("price")
    assert col.type == (pa.decimal128(9, 2) if kind == "parquet_decimal" else pa.string())
    assert sorted("" if v is None else str(v) for v in col.to_pylist()) == want


# -- a full or unusable PREFECT_HOME ----------------------------------------------------------------
def _release_without_api(job: JobBuilder, home: Path) -> subprocess.CompletedProcess[str]:
    """``sdc release`` in a subprocess that would start its own temporary Prefect server
    (no PREFECT_API_URL) with ``PREFECT_HOME=home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", COLUMNS="200",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="40")
    return subprocess.run([str(SDC_BIN), "release", str(job.write())], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_prefect_home_on_a_full_disk_is_refused_in_the_preflight(job: JobBuilder,
                                                                 tmp_path: Path) -> None:
    """Old code: the temporary Prefect server could not create its database on the full disk;
    ``sdc release`` waited for it and ended with exit 1. Now the pre-flight refuses at once
    (exit 2), naming the folder, the free space and the fix; nothing is written."""
    mnt = tmp_path / "tinyhome"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()})")
    try:
        res = _release_without_api(job, mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == USER, out
    assert "Traceback" not in out
    for fragment in (str(mnt), "PREFECT_HOME", "is on a full disk", "KB free",
                     "needs at least 32.0 MB", "PREFECT_API_URL"):
        assert fragment in out, (fragment, out)
    assert not job.leftovers()


def test_prefect_home_that_cannot_be_created_is_refused(job: JobBuilder,
                                                        tmp_path: Path) -> None:
    """PREFECT_HOME below a regular file (it can never be created; also as root): exit 2
    from the pre-flight instead of the server's start-up failure (exit 1)."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    res = _release_without_api(job, afile / "prefect")
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == USER, out
    assert "Traceback" not in out
    assert f"'{afile}' is not a folder" in out and "PREFECT_HOME" in out
    assert not job.leftovers()


# -- ids written as NA / null ----------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["pandas", "streaming"])
def test_ids_na_and_null_are_named_in_the_refusal(job: JobBuilder, cli, engine: str) -> None:
    """Old code: ids written as ``NA`` and ``null`` were reported as "id | not empty |
    <empty> | fill in the values" although no field was empty. Now the fix says that such
    texts are read as missing and what to do."""
    job.frame["id"] = job.frame["id"].astype(object)
    job.frame.loc[3, "id"] = "NA"
    job.frame.loc[7, "id"] = "null"
    res = cli("release", job.write(), "--engine", engine)
    _refused(job, res, "id", "not empty", "| 2 | 4, 8 |", "written as NA, null",
             "give those records other ids")
