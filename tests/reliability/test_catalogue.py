"""The catalogue of bad (and odd) inputs, each driven through the CLI.

Every case builds a small release job in ``tmp_path`` (``conftest.JobBuilder``: 600 synthetic
records, 4 key variables, a seed file, output under ``releases/job``), breaks one thing, runs
``sdc release CONFIG`` (typer's CliRunner, in-process, against the session's Prefect API) and
checks:

- the exit code (0 accepted, 2 something the user fixes, 1 anything else);
- message fragments: the column or key, the bad value (or a sample), how many rows where it
  applies, and what to do;
- never a traceback;
- what is left on disk: for a refusal, no release folder and no ``.<name>.tmp-*`` /
  ``.<name>.old-*`` sibling; for an accepted case, a complete release that ``sdc audit``
  passes, and no temp sibling.

``docs/RELIABILITY.md`` has one table row per case id (checked by ``test_docs_list_every_case``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO, CliResult, JobBuilder, contains, run_sdc

OK, USER = 0, 2
#: The 10^6-category case (``huge_domain``) once took ~100 s because the utility report
#: tabulated every declared category (fixed in 0686bf8). It used to run as a subprocess with
#: a 30 s limit, which a loaded machine exceeded (46-49 s at load ~15, old and new code alike):
#: it now runs in-process like every case and checks the work instead of the time
#: (``check_huge_domain``: what the release writes grows with the records, not the domain).


@dataclass
class Case:
    id: str
    what: str                                  # the input, in words (for the docs table)
    setup: Callable[[JobBuilder], Any]
    exit_code: int
    fragments: list[str] = field(default_factory=list)
    check: Callable[[JobBuilder, CliResult], None] | None = None
    marks: tuple = ()
    timeout: float | None = None               # run in a subprocess with this time limit


# -- helpers to break a job ----------------------------------------------------------------
def cfg(path: str, value: Any) -> Callable[[JobBuilder], None]:
    """Set (or with ``value is DELETE`` remove) a dotted key of the config."""
    def setup(j: JobBuilder) -> None:
        node = j.config
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return setup


DELETE = object()


def both(*fns: Callable[[JobBuilder], Any]) -> Callable[[JobBuilder], None]:
    def setup(j: JobBuilder) -> None:
        for f in fns:
            f(j)
    return setup


def rows(col: str, values: list[Any], at: list[int]) -> Callable[[JobBuilder], None]:
    """Put ``values`` into column ``col`` at data rows ``at`` (0-based)."""
    def setup(j: JobBuilder) -> None:
        f = j.frame.astype({col: object})
        for r, v in zip(at, values, strict=True):
            f.loc[r, col] = v
        j.frame = f
    return setup


def csv_text(j: JobBuilder) -> str:
    return j.frame.to_csv(index=False)


def ragged(j: JobBuilder) -> bytes:
    lines = csv_text(j).splitlines(keepends=True)
    lines[7] = lines[7].rstrip("\n") + ",x,y\n"
    return "".join(lines).encode()


def raw(fn: Callable[[JobBuilder], bytes]) -> Callable[[JobBuilder], None]:
    def setup(j: JobBuilder) -> None:
        j.data_bytes = fn(j)
    return setup


def hierarchy(lines: list[str], level: int = 1) -> Callable[[JobBuilder], None]:
    def setup(j: JobBuilder) -> None:
        p = j.root / "hier" / "age.csv"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        j.config["partition"]["age"] = {"hierarchy": "hier/age.csv", "level": level}
    return setup


def age_hierarchy_lines() -> list[str]:
    return [f"{a};{(a // 10) * 10}-{(a // 10) * 10 + 9};{'<45' if a < 45 else '45+'};*"
            for a in range(0, 91)]


def few_cells(j: JobBuilder) -> None:
    """Every record in a cell of >= 3 records: no sensitive cell at all."""
    n = 600
    rng = np.random.default_rng(4)
    combos = [(s, a, r, g) for s in (1, 2) for a in (20, 40, 70) for r in (1, 2) for g in (1, 5)]
    pick = np.repeat(np.arange(len(combos)), n // len(combos))
    rng.shuffle(pick)
    arr = np.array(combos)[pick]
    j.frame = j.frame.iloc[:len(pick)].copy()
    j.frame[["sex", "age", "race", "region"]] = arr


def all_unique(j: JobBuilder) -> None:
    """Every record in a cell of its own (all records sensitive)."""
    cells = [(s, a, r, g) for s in (1, 2) for a in range(0, 91, 3) for r in (1, 2, 3)
             for g in (1, 3, 5)]
    rng = np.random.default_rng(5)
    pick = rng.choice(len(cells), 400, replace=False)
    j.frame = j.frame.iloc[:400].copy()
    j.frame[["sex", "age", "race", "region"]] = np.array(cells)[pick]


def lone_prb(j: JobBuilder) -> None:
    """Partition set sex=Female | age=60+ | race=other has exactly one sensitive cell (k = 1):
    a singleton there; the rest of the file is well populated."""
    f = j.frame
    lone = (f["sex"] == 2) & (f["age"] >= 60) & (f["race"] == 3)
    f = f[~lone].copy()
    one = f.iloc[[0]].copy()
    one[["sex", "age", "race", "region"]] = [2, 75, 3, 4]
    one["id"] = "R999999"
    j.frame = pd.concat([f, one], ignore_index=True)


def check_released(j: JobBuilder, res: CliResult) -> dict[str, Any]:
    audit = json.loads((j.out_dir / "internal" / "audit.json").read_text(encoding="utf-8"))
    assert (j.out_dir / "public" / "microdata.parquet").is_file()
    cert = _find(audit, "certificate")
    xi = _find(audit, "xi")
    assert cert is not None and xi is not None and cert <= xi + 1e-12
    return audit


def _find(obj: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a JSON document (layout-agnostic)."""
    if isinstance(obj, dict):
        if key in obj and not isinstance(obj[key], dict | list):
            return obj[key]
        for v in obj.values():
            r = _find(v, key)
            if r is not None:
                return r
    elif isinstance(obj, list):
        for v in obj:
            r = _find(v, key)
            if r is not None:
                return r
    return None


def public(j: JobBuilder) -> pd.DataFrame:
    return pd.read_parquet(j.out_dir / "public" / "microdata.parquet")


def check_no_sensitive(j: JobBuilder, res: CliResult) -> None:
    audit = check_released(j, res)
    t_min = int(j.frame.groupby(["sex", "age", "race", "region"]).size().min())
    assert math.isclose(_find(audit, "certificate"), 1.0 / t_min)
    pub = public(j)
    cols = ["sex", "age", "race", "region", "income", "weight"]
    a = pub[cols].sort_values(cols).reset_index(drop=True)
    b = j.frame[cols].sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)   # the input minus identifiers
    assert "name" not in pub.columns and "id" not in pub.columns


def check_merge_logged(j: JobBuilder, res: CliResult) -> None:
    audit = check_released(j, res)
    text = json.dumps(audit)
    assert "merged" in text, "the merge must be written to the audit record"


def check_missing_category(j: JobBuilder, res: CliResult) -> None:
    check_released(j, res)
    pub = public(j)
    assert pub["region"].isna().any()  # the missing category is released as empty


def check_name_gone(j: JobBuilder, res: CliResult) -> None:
    check_released(j, res)
    for f in ("microdata.csv", "codebook.md"):
        text = (j.out_dir / "public" / f).read_text(encoding="utf-8")
        assert "Break" not in text and "Person 1 " not in text


def check_weight_gone(j: JobBuilder, res: CliResult) -> None:
    check_released(j, res)
    assert "weight" not in public(j).columns


def check_bom(j: JobBuilder, res: CliResult) -> None:
    check_released(j, res)
    assert list(public(j).columns)[0] != "\ufeffid"


def check_huge_domain(j: JobBuilder, res: CliResult) -> None:
    """Work, not time: every table the release writes is sized by the 600 records, not by
    the 10^6 declared categories (the utility report once tabulated each of them)."""
    check_released(j, res)
    book = (j.out_dir / "public" / "codebook.md").stat().st_size
    assert book < 2_000_000, f"codebook of {book} bytes for a 10^6-category key"
    util = json.loads((j.out_dir / "internal" / "utility.json").read_text(encoding="utf-8"))
    region = next(e for e in util["key_variables"] if e["name"] == "region")
    assert region["n_categories"] == 1_000_000
    assert len(region["categories"]) <= 2 * len(j.frame), len(region["categories"])
    for name in ("risk.json", "utility.json", "report.html"):
        size = (j.out_dir / "internal" / name).stat().st_size
        assert size < 5_000_000, f"internal/{name} has {size} bytes for 600 records"


def make_release_at(rel: str) -> Callable[[JobBuilder], None]:
    """A (minimal) existing release at ``rel`` and this job's output inside its public/."""
    def setup(j: JobBuilder) -> None:
        other = j.root / rel
        (other / "public").mkdir(parents=True)
        (other / "internal").mkdir(parents=True)
        (other / "internal" / "audit.json").write_text("{}", encoding="utf-8")
        j.config["output"]["dir"] = f"{rel}/public/job"
    return setup


def seed_mode(mode: int) -> Callable[[JobBuilder], None]:
    def setup(j: JobBuilder) -> None:
        j.write_seed(mode)
    return setup


def seed_bytes(data: bytes) -> Callable[[JobBuilder], None]:
    def setup(j: JobBuilder) -> None:
        p = j.write_seed()
        p.write_bytes(data)
    return setup


def seed_is_dir(j: JobBuilder) -> None:
    j.seed_path.mkdir(parents=True)


def _unwritable(j: JobBuilder) -> None:
    """The release's parent folder cannot be written: chmod 0555, or (as root, who ignores
    modes) the immutable attribute; skipped when neither is possible."""
    parent = j.out_dir.parent
    parent.mkdir(parents=True)
    if os.geteuid() != 0:
        parent.chmod(0o555)
        return
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(parent)], capture_output=True).returncode != 0:
        pytest.skip("running as root without chattr: cannot make a folder unwritable")
    j.cleanup.append(lambda: subprocess.run(["chattr", "-i", str(parent)], check=False))


CASES: list[Case] = [
    # ---- the input file ---------------------------------------------------------------------
    Case("missing_file", "input.path names a file that does not exist",
         lambda j: setattr(j, "skip_data", True), USER,
         ["input.csv", "does not exist", "input.path"]),
    Case("input_is_folder", "input.path is a folder", lambda j: (
        setattr(j, "skip_data", True), j.data_path.mkdir(parents=True)), USER,
         ["is not a file", "input.path"]),
    Case("empty_file", "the input file has 0 bytes", raw(lambda j: b""), USER,
         ["is empty", "0 bytes", "Check that the export finished"]),
    Case("header_only", "a header line and no records",
         raw(lambda j: csv_text(j).splitlines(keepends=True)[0].encode()), USER,
         ["no records", "8 columns", "Check that the export finished"]),
    Case("wrong_delimiter", "the file is ';'-separated, the config says ','",
         raw(lambda j: j.frame.to_csv(index=False, sep=";").encode()), USER,
         ["single column", "';'", "input.delimiter"]),
    Case("non_utf8", "latin-1 bytes (a name with 'ü') in a UTF-8 file", both(
        rows("name", ["Jürgen Müller"], [41]),
        raw(lambda j: csv_text(j).encode("latin-1"))), USER,
         ["not valid utf-8", "byte offset", "line 43", "input.encoding", "latin-1"]),
    Case("unknown_encoding", "input.encoding names no known encoding",
         cfg("input.encoding", "klingon-8"), USER, ["input.encoding", "'klingon-8'", "utf-8"]),
    Case("bom", "a UTF-8 byte-order mark before the header (accepted and stripped)",
         raw(lambda j: b"\xef\xbb\xbf" + csv_text(j).encode()), OK, check=check_bom),
    Case("duplicated_columns", "two columns named 'age'", raw(
        lambda j: csv_text(j).replace("id,name,sex,age,race", "id,name,sex,age,age", 1).encode()),
         USER, ["duplicated column names", "'age'", "columns [4, 5]", "rename or remove"]),
    Case("ragged_row", "data line 7 has two extra fields", raw(ragged), USER,
         ["cannot be parsed", "line 8", "fields", "check quoting and the delimiter"]),
    Case("not_parquet", "input.format parquet on a CSV file",
         both(raw(lambda j: csv_text(j).encode()), cfg("input.format", "parquet")), USER,
         ["not a readable Parquet file", "input.format"]),
    # ---- columns and values -------------------------------------------------------------------
    Case("missing_key_column", "key variable 'region' is not in the file",
         lambda j: setattr(j, "frame", j.frame.drop(columns=["region"])), USER,
         ["region", "column present", "add the column to the file, or fix its name"]),
    Case("missing_drop_column", "input.drop names a column that is not in the file",
         cfg("input.drop", ["name", "phone"]), USER,
         ["phone", "column present", "add the column to the file, or fix its name"]),
    Case("key_outside_categories", "race = 7 and 9 in 3 rows (declared 1, 2, 3)",
         rows("race", [7, 9, 7], [4, 10, 99]), USER,
         ["race", "in categories [1, 2, 3]", "7, 9", "| 3 |", "5, 11, 100",
          "add them to key_variables.race.categories"]),
    Case("age_outside_range", "age 130 and -1 (declared range 0..90)",
         rows("age", [130, -1], [0, 599]), USER,
         ["age", "in range 0..90", "130", "-1", "| 2 |", "1, 600",
          "widen key_variables.age.range"]),
    Case("non_integer_age", "age 'forty' and 12.5", rows("age", ["forty", 12.5], [2, 3]), USER,
         ["age", "whole number", "'forty'", "12.5", "3, 4", "use whole numbers"]),
    Case("nan_key_missing_error", "empty region in 4 rows under missing: error",
         rows("region", [None] * 4, [1, 2, 3, 50]), USER,
         ["region", "not empty", "<empty>", "| 4 |", "2, 3, 4, 51",
          "key_variables.region.missing: category"]),
    Case("nan_key_missing_category", "empty region in 4 rows under missing: category and "
         "missing_moves: true (accepted: released as empty, its own category, moving)",
         both(rows("region", [None] * 4, [1, 2, 3, 50]),
              cfg("key_variables.region.missing", "category"),
              cfg("key_variables.region.missing_moves", True)), OK,
         check=check_missing_category),
    Case("nan_key_missing_default", "empty region in 4 rows under missing: category and the "
         "default policy (a blank stays a real blank): 4 records cannot be certified alone",
         both(rows("region", [None] * 4, [1, 2, 3, 50]),
              cfg("key_variables.region.missing", "category")), USER,
         ["missing: region", "k=", "a blank stays a real blank", "missing_moves: true"]),
    Case("duplicate_ids", "id R000007 on two rows", lambda j: j.frame.__setitem__(
        "id", j.frame["id"].where(j.frame.index != 5, j.frame["id"].iloc[9])), USER,
         ["id", "unique", "make the ids unique"]),
    Case("empty_id", "an empty id", rows("id", [None], [7]), USER,
         ["id", "not empty", "8", "fill in the ids"]),
    Case("missing_id_column", "input.id_column names a column that is not in the file",
         cfg("input.id_column", "person_id"), USER,
         ["person_id", "column present", "add the column to the file, or fix its name"]),
    Case("weight_zero", "weight 0 in one row", rows("weight", [0], [12]), USER,
         ["weight", "finite and > 0", "| 1 |", "13", "weights must be > 0"]),
    Case("weight_negative", "weight -5 in two rows", rows("weight", [-5, -5], [1, 2]), USER,
         ["weight", "finite and > 0", "-5", "| 2 |", "2, 3", "weights must be > 0"]),
    Case("weight_nan", "empty weight in one row", rows("weight", [None], [20]), USER,
         ["weight", "<empty>", "21"]),
    Case("weight_text", "weight 'heavy' in one row", rows("weight", ["heavy"], [20]), USER,
         ["weight", "'heavy'", "21", "weights must be > 0"]),
    Case("parquet_string_for_int", "Parquet input whose age column is text ('thirty')",
         both(rows("age", ["thirty"], [3]), lambda j: j.frame.__setitem__(
             "age", j.frame["age"].astype(str)), cfg("input.format", "parquet"),
              cfg("input.path", "data/input.parquet")), USER,
         ["age", "whole number", "'thirty'", "4", "use whole numbers"]),
    Case("parquet_text_categories", "Parquet input whose race column holds '1', '2', '3' as "
         "text while the categories are numbers",
         both(lambda j: j.frame.__setitem__("race", j.frame["race"].astype(str)),
              cfg("input.format", "parquet"), cfg("input.path", "data/input.parquet")), USER,
         ["race", "the values are text", "quote the categories"]),
    Case("several_problems", "bad race, bad age, duplicate id at once: one table",
         both(rows("race", [8], [1]), rows("age", [200], [2]),
              lambda j: j.frame.__setitem__("id", j.frame["id"].where(
                  j.frame.index != 3, j.frame["id"].iloc[4]))), USER,
         ["3 problems", "race", "age", "id", "200", "8"]),
    Case("weight_infinite", "weight inf in one row", both(
        lambda j: j.frame.__setitem__("weight", j.frame["weight"].astype(float)),
        rows("weight", [float("inf")], [5])), USER,
         ["weight", "finite and > 0", "inf", "| 1 |", "6", "weights must be > 0"]),
    Case("record_id_column", "a non-key input column named record_id (the public id)",
         lambda j: j.frame.__setitem__("record_id", np.arange(len(j.frame))), USER,
         ["'record_id'", "clashes with the public record id",
          "rename it, declare it as input.id_column, or list it in input.drop"]),
    Case("crlf_blank_lines", "CRLF line ends and two blank lines at the end (accepted)",
         raw(lambda j: j.frame.to_csv(index=False, lineterminator="\r\n").encode() + b"\r\n\r\n"),
         OK, check=check_released),
    Case("tab_delimiter", "a tab-separated file with input.delimiter: tab (accepted)", both(
        cfg("input.delimiter", "\t"),
        raw(lambda j: j.frame.to_csv(index=False, sep="\t").encode())), OK,
         check=check_released),
    Case("quoted_newline", "a dropped name holding a quoted comma, quote and newline "
         "(accepted; the name is gone from the public file)",
         rows("name", ['Line\nBreak, "quoted"'], [3]), OK, check=check_name_gone),
    Case("weight_dropped", "input.drop lists the weight column (accepted: the weight is used "
         "for the reports, not published)", cfg("input.drop", ["name", "weight"]), OK,
         check=check_weight_gone),
    # ---- the config ---------------------------------------------------------------------------
    Case("config_missing", "the config file does not exist",
         lambda j: setattr(j, "config_path", j.root / "nope.yaml"), USER,
         ["nope.yaml", "does not exist"]),
    Case("config_empty", "the config file is empty", lambda j: setattr(j, "config_text", ""),
         USER, ["is empty"]),
    Case("yaml_syntax", "a YAML syntax error (unclosed bracket)",
         lambda j: setattr(j, "config_text", "name: job\ninput: {path: [x.csv\n"), USER,
         ["not valid YAML", "line"]),
    Case("unknown_key", "an unknown key risk.xii", cfg("risk.xii", 0.4), USER,
         ["risk.xii", "unknown key"]),
    Case("wrong_type", "key_variables.age.range is a string", cfg(
        "key_variables.age.range", "0-90"), USER, ["key_variables.age.range", "'0-90'"]),
    Case("xi_one_third", "xi = 1/3", cfg("risk.xi", 1 / 3), USER,
         ["risk.xi", "strictly between 1/3 and 1"]),
    Case("xi_one", "xi = 1", cfg("risk.xi", 1), USER, ["risk.xi", "strictly between 1/3 and 1"]),
    Case("xi_0_2", "xi = 0.2", cfg("risk.xi", 0.2), USER,
         ["risk.xi", "strictly between 1/3 and 1", "0.2"]),
    Case("xi_text", 'xi = "high"', cfg("risk.xi", "high"), USER,
         ["risk.xi", "'high'", "number"]),
    Case("bands_unsorted", "age bands [0, 60, 30]", cfg("partition.age", {"bands": [0, 60, 30]}),
         USER, ["partition.age.bands", "strictly increasing", "60.0 is followed by 30.0"]),
    Case("bands_overlapping", "age bands [0, 30, 30, 60] (a repeated edge)",
         cfg("partition.age", {"bands": [0, 30, 30, 60]}), USER,
         ["partition.age.bands", "strictly increasing", "30.0 is followed by 30.0"]),
    Case("bands_above_domain", "age bands starting at 10 (ages 0-9 fall in no band)",
         cfg("partition.age", {"bands": [10, 30, 60]}), USER,
         ["partition.age.bands", "below the first band edge 10", "lower the first edge"]),
    Case("group_misses_category", "race groups without category 3",
         cfg("partition.race", {"groups": {"white": [1], "black": [2]}}), USER,
         ["partition.race.groups", "[3]", "in no group", "add them to a group"]),
    Case("group_twice", "race category 2 in two groups",
         cfg("partition.race", {"groups": {"white": [1, 2], "other": [2, 3]}}), USER,
         ["partition.race.groups", "category 2", "'white'", "'other'", "exactly one group"]),
    Case("group_unknown_category", "a race group names category 4 (not declared)",
         cfg("partition.race", {"groups": {"white": [1], "other": [2, 3, 4]}}), USER,
         ["partition.race.groups", "[4]", "not declared categories of race"]),
    Case("hierarchy_missing_value", "age hierarchy file without a row for age 90",
         hierarchy(age_hierarchy_lines()[:-1]), USER,
         ["partition.age", "1 declared value", "not in hierarchy file", "[90]",
          "add a row for each"]),
    Case("hierarchy_empty_level", "age hierarchy row '17;;<45;*' (an empty level)",
         hierarchy([ln if not ln.startswith("17;") else "17;;<45;*"
                    for ln in age_hierarchy_lines()]), USER,
         ["partition.age.hierarchy", "line 18", "empty level", "fill in every level"]),
    Case("hierarchy_ragged", "age hierarchy row with one level too few",
         hierarchy([ln if not ln.startswith("33;") else "33;30-39;*"
                    for ln in age_hierarchy_lines()]), USER,
         ["partition.age.hierarchy", "line 34", "3 levels", "line 1 has 4"]),
    Case("hierarchy_no_such_level", "hierarchy level 7 (the file has levels 0..3)",
         hierarchy(age_hierarchy_lines(), level=7), USER,
         ["partition.age.level", "level 7 does not exist", "levels 0..3"]),
    Case("hierarchy_file_missing", "the hierarchy file does not exist", both(
        hierarchy(age_hierarchy_lines()), cfg("partition.age", {"hierarchy": "hier/none.csv",
                                                                "level": 1})), USER,
         ["partition.age.hierarchy", "none.csv", "does not exist"]),
    Case("partition_not_key", "partition on 'income', which is not a key variable",
         cfg("partition.income", "as_is"), USER,
         ["partition", "['income']", "not declared under key_variables"]),
    Case("id_is_key", "input.id_column is also a key variable",
         cfg("input.id_column", "region"), USER,
         ["input.id_column", "'region'", "also a key variable"]),
    Case("partition_typo", "partition rule 'asis' (a typo of as_is)",
         cfg("partition.sex", "asis"), USER, ["partition.sex", "'as_is'", "'asis'"]),
    Case("merge_along_not_partition", "risk.merge_along names 'region', not a partition "
         "variable", cfg("risk.merge_along", ["region"]), USER,
         ["risk.merge_along", "['region']", "not among the partition variables"]),
    Case("unknown_format", "output.formats: [xlsx]", cfg("output.formats", ["xlsx"]), USER,
         ["output.formats", "'parquet', 'csv', 'sav' or 'dta'", "'xlsx'"]),
    Case("seed_negative", "seed: -5 in the config", cfg("seed", -5), USER,
         ["seed", "non-negative integer", "-5"]),
    Case("seed_missing_in_config", "no seed in the config", cfg("seed", DELETE), USER,
         ["seed", "no seed", "secrets/<name>.seed"]),
    # ---- risk structure -----------------------------------------------------------------------
    Case("all_sensitive", "every record alone in its cell (all records sensitive)",
         all_unique, OK, check=check_released),
    Case("no_sensitive", "every cell has >= 3 records: no sensitive record (the release is the "
         "input minus identifiers, certificate 1/min t)", few_cells, OK,
         check=check_no_sensitive),
    Case("k1_merge", "a PRB with k = 1 under small_blocks: merge", lone_prb, OK,
         check=check_merge_logged),
    Case("k1_calibrate", "a PRB with k = 1 under small_blocks: calibrate (merged: no theta "
         "certifies one cell)", both(lone_prb, cfg("risk.small_blocks", "calibrate")), OK,
         check=check_merge_logged),
    Case("k1_fail", "a PRB with k = 1 under small_blocks: fail",
         both(lone_prb, cfg("risk.small_blocks", "fail")), USER,
         ["sex=Female | age=60+ | race=other", "k=1", "kmin = 5",
          "risk.small_blocks is 'fail'", "'merge' or 'calibrate'"]),
    Case("single_partition_set", "no partition: one partition set, one PRB",
         cfg("partition", {}), OK, check=check_released),
    Case("one_record", "a file with one record (one PRB of one cell: nothing can certify it)",
         lambda j: setattr(j, "frame", j.frame.iloc[:1]), USER,
         ["k=1", "Partition more coarsely"]),
    Case("huge_domain", "a key with 10^6 categories (range 0..999999, 600 records)",
         both(cfg("key_variables.region", {"range": [0, 999_999]}),
              lambda j: j.frame.__setitem__("region", np.random.default_rng(1).integers(
                  0, 1_000_000, len(j.frame)))), OK, check=check_huge_domain),
    # ---- the output folder and the seed -----------------------------------------------------
    Case("output_not_writable", "the release's parent folder is not writable", _unwritable, USER,
         ["not writable", "choose another output.dir"]),
    Case("output_parent_is_file", "output.dir lies under a regular file", both(
        cfg("output.dir", "afile/job"), lambda j: (j.root / "afile").write_text("x")), USER,
         ["afile", "choose another output.dir"]),
    Case("output_in_public", "output.dir inside public/ of another release",
         make_release_at("releases/other"), USER,
         ["public/ folder of release", "other", "Choose another output.dir"]),
    Case("output_not_release", "output.dir is an existing non-empty folder that is not a "
         "release", lambda j: (j.out_dir.mkdir(parents=True),
                               (j.out_dir / "notes.txt").write_text("keep me")), USER,
         ["is not a release folder", "never replaced", "--force"]),
    Case("seed_world_readable", "the seed file has mode 0644 (refused)", seed_mode(0o644), USER,
         ["seed file", "mode 0644", "chmod 600"]),
    Case("seed_group_writable", "the seed file has mode 0620 (refused)", seed_mode(0o620), USER,
         ["seed file", "mode 0620", "chmod 600"]),
    Case("seed_not_integer", "the seed file holds text", seed_bytes(b"not a seed\n"), USER,
         ["seed file", "does not hold one decimal integer", "Restore it from backup"]),
    Case("seed_empty", "the seed file is empty", seed_bytes(b""), USER,
         ["seed file", "is empty", "Restore it from backup"]),
    Case("seed_is_folder", "seed.file names a folder (unreadable as a file)", seed_is_dir, USER,
         ["seed file", "is not a regular file"]),
]


def _case_params() -> list[Any]:
    return [pytest.param(c, id=c.id, marks=c.marks) for c in CASES]


@pytest.mark.e2e
@pytest.mark.parametrize("case", _case_params())
def test_catalogue(case: Case, job: JobBuilder, cli, prefect_api: str) -> None:
    try:
        case.setup(job)
        config_path = job.write() if job.config_path.name == "job.yaml" else job.config_path
        existed = set(job.leftovers())
        if case.timeout is None:
            res = cli("release", config_path)
        else:
            try:
                p = run_sdc(prefect_api, "release", config_path, timeout=case.timeout)
            except subprocess.TimeoutExpired:
                pytest.fail(f"sdc release took longer than {case.timeout:.0f} s")
            res = CliResult(p.returncode, p.stdout + p.stderr)
    finally:
        for undo in job.cleanup:
            undo()
    if os.environ.get("SDC_CATALOGUE_DUMP"):  # for writing docs/RELIABILITY.md by hand
        with open(os.environ["SDC_CATALOGUE_DUMP"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": case.id, "exit": res.exit_code, "out": res.text}) + "\n")
    assert "Traceback" not in res.output, res.output
    missing = [f for f in case.fragments if not contains(res.output, f)]
    assert res.exit_code == case.exit_code and not missing, (
        f"exit {res.exit_code} (expected {case.exit_code}); missing fragments {missing}\n"
        f"{res.output}")
    if case.exit_code == OK:
        assert job.out_dir.is_dir()
        assert [p for p in job.leftovers() if p != job.out_dir] == [], job.leftovers()
        if case.check is not None:
            case.check(job, res)
        audit = cli("audit", job.out_dir)
        assert audit.exit_code == 0, audit.output
    else:
        left = [p for p in job.leftovers() if p not in existed]
        assert left == [], f"a refused run left {left}"


def test_enough_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_docs_list_every_case() -> None:
    doc = REPO / "docs" / "RELIABILITY.md"
    text = doc.read_text(encoding="utf-8")
    missing = [c.id for c in CASES if f"`{c.id}`" not in text]
    assert not missing, f"docs/RELIABILITY.md does not list {missing}"



@pytest.mark.e2e
def test_bad_partition_rule_names_only_the_rule_given(job: JobBuilder, cli) -> None:
    """A bad rule in the partition union is reported once, for the rule the user wrote (it
    used to be reported once per union member, with a false 'unknown key'; fixed in 0686bf8)."""
    job.config["partition"]["age"] = {"bands": [0, 60, 30]}
    res = cli("release", job.write())
    assert res.exit_code == USER
    assert contains(res.output, "60.0 is followed by 30.0")
    for noise in ("unknown key", "required key is missing", "literal["):
        assert noise not in res.text, f"misleading {noise!r} in:\n{res.output}"


#: Refusals that only ``sdc release`` can meet: the output folder, the seed, the public frame.
RELEASE_ONLY = {"output_not_writable", "output_parent_is_file", "output_in_public",
                "output_not_release", "seed_world_readable", "seed_group_writable",
                "seed_not_integer", "seed_empty", "seed_is_folder", "seed_missing_in_config",
                "seed_negative", "record_id_column"}
#: Refusals of the risk plan (``sdc plan`` meets them, ``sdc validate`` does not).
PLAN_ONLY = {"k1_fail", "one_record"}


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_validate_and_plan_refuse_alike_and_write_nothing(command: str, job: JobBuilder,
                                                          cli) -> None:
    """``sdc validate`` and ``sdc plan`` refuse every input and config problem with the same
    exit code and message as ``sdc release``, and write nothing (no release folder, no seed
    file)."""
    failures = []
    for case in CASES:
        if case.exit_code != USER or case.id in RELEASE_ONLY or (
                command == "validate" and case.id in PLAN_ONLY):
            continue
        j = JobBuilder(job.root / case.id)
        j.root.mkdir()
        case.setup(j)
        path = j.write() if j.config_path.name == "job.yaml" else j.config_path
        if j.seed_path.exists():
            j.seed_path.unlink()  # plan must not create it
        res = cli(command, path)
        missing = [f for f in case.fragments if not contains(res.output, f)]
        if res.exit_code != USER or missing or "Traceback" in res.output:
            failures.append(f"{case.id}: exit {res.exit_code}, missing {missing}: {res.text}")
        if j.leftovers() or j.seed_path.exists():
            failures.append(f"{case.id}: {command} wrote {j.leftovers()} / the seed file")
    assert not failures, "\n".join(failures)
