"""The executor contract: every executor gives the same release, file for file.

In the style of scikit-learn's ``check_estimator``: one matrix of configs (plain, weights,
missing key values (moving or fixed), merged small blocks, calibrated theta, DP ``perturb:``,
recoded keys, a ``derived:`` column, near-cell destinations, weighted x near, many tiny batches, a second
release of a series) is released through the CLI by every executor, and each
executor's release must equal the in-memory one byte for byte: every public file, the
records file, the risk and utility reports, and the audit record up to the fields that name
the executor or the run (engine, timings, times, paths). ``sdc audit`` must pass on the
streaming release (the auditor of the batch executors' releases; a Dask release's audit is run
by test_executor_formats.py, a household release's on every executor by
tests/audit/test_household_audit.py).
Whatever an executor cannot do it refuses with exit 2 and a fix, never silently differently.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from sdc.cli.main import app
from sdc.reports.schema import validate

pytestmark = pytest.mark.e2e

EXECUTORS = ("pandas", "streaming", "dask")
KEYS = {"sex": 2, "age": 92, "race": 9, "marital": 5, "puma": 30}
runner = CliRunner()

# audit.json fields that legitimately name the executor, the run or the place
_RUN_FIELDS = {"engine", "timings", "created", "created_at", "started", "finished", "duration",
               "output", "output_dir", "release_dir", "paths", "run", "flow_run", "host",
               "config_path", "prefect", "config"}  # config: its text names the engine


def _frame(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {"pid": rng.permutation(n).astype(np.int64) * 7 + 100}
    for name, levels in KEYS.items():
        w = rng.pareto(1.1, levels) + 0.05
        cols[name] = rng.choice(levels, size=n, p=w / w.sum()).astype(np.int64)
    cols["income"] = rng.lognormal(8, 1, n).round(2)
    cols["w"] = rng.uniform(0.5, 40, n).round(3)
    cols["region"] = rng.choice(["north", "south", "east", "west"], size=n, p=[.4, .3, .2, .1])
    return pd.DataFrame(cols)


def _base(inp: Path) -> dict[str, Any]:
    return {
        "name": "contract",
        "input": {"path": str(inp), "format": "parquet", "id_column": "pid"},
        "key_variables": {k: {"range": [0, v - 1]} for k, v in KEYS.items()},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 35, 55, 65]},
                      "race": {"groups": {"white": [0], "other": list(range(1, 9))}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 20261124,
        "output": {"formats": ["parquet", "csv"]},
    }


def _weights(c):
    c["input"]["weight"] = "w"


def _weighted(c):  # weighted mode: move probabilities c_g / W_j within weight groups
    c["input"]["weight"] = "w"
    c["risk"]["weighted"] = True


def _missing(c):
    c["key_variables"]["marital"]["missing"] = "category"


def _calibrate(c):
    c["risk"] = {"xi": 0.395, "theta": "calibrated", "small_blocks": "calibrate"}


def _fine_partition(c):  # many small partition sets: merges along the partition variables
    c["partition"]["age"] = {"bands": list(range(0, 92, 5))}
    c["partition"]["race"] = "as_is"


def _banded_partition(c):  # 15-year age bands x every race: merges along both partition variables
    c["partition"]["age"] = {"bands": list(range(0, 92, 15))}
    c["partition"]["race"] = "as_is"


def _perturb(c):
    c["perturb"] = {"region": {"epsilon": 1.5, "categories": ["north", "south", "east", "west"]}}


def _perturb_from_data(c):  # DP-PRAM: domain from the data, prior proportions, a numeric column
    del c["input"]["id_column"]  # identities made distinct over all records in pass 2
    c["perturb"] = {"region": {"epsilon": 1.0, "domain_from_data": True},
                    "tenure": {"epsilon": 2.0, "categories": ["own", "rent", "other"],
                               "proportions": [0.3, 0.3, 0.4]},
                    "hours": {"epsilon": 1.0, "domain_from_data": True}}


def _no_id(c):
    del c["input"]["id_column"]


def _recode(c):  # recoded keys: every reader applies the same code map
    c["key_variables"]["age"]["recode"] = {"top": 80}
    c["key_variables"]["puma"]["recode"] = {"groups": {"rest": list(range(20, 30))}}


def _midpoint(c):  # recoded numbers released at class midpoints / a declared top value
    c["key_variables"]["age"]["recode"] = {"bands": [0, 18, 25, 35, 45, 55, 65],
                                           "value": "midpoint"}
    c["key_variables"]["marital"]["recode"] = {"top": 3, "top_value": 3.5}
    c["output"]["formats"] = ["parquet", "csv", "sav"]


def _derived(c):  # a column recomputed from the released keys (the input has age_band)
    c["derived"] = ["age_band"]


def _missing_fixed(c):  # missing key values that never move
    c["key_variables"]["marital"]["missing"] = "category"
    c["key_variables"]["marital"]["missing_moves"] = False


def _analyses(c):  # utility.analyses: formulas summed batch by batch, the same on every executor
    c["utility"] = {"analyses": ["np.log(income) ~ age + I(age**2) + C(sex) + C(race)",
                                 {"formula": "employed ~ age + hours + C(marital)",
                                  "name": "employment"}]}


def _near(c):  # near-cell destinations (docs/METHOD.md 7.12)
    c["risk"]["destinations"] = "near"


CASES = {
    "plain": [],
    "weighted": [_weighted],
    # missing key values that move, on many small partition sets merged along the partition
    # variables (cells missing different keys are never merged: docs/METHOD.md 7.9); they were
    # two cases, "missing" and "merges" (one release on every executor fewer)
    "missing-merges": [_missing, _fine_partition],
    "calibrate": [_calibrate, _fine_partition],
    "perturb-data": [_perturb_from_data],  # was tests/cli/test_cli_engines.py's perturb test
    # survey weights (input.weight, unweighted design) without an id column: the "weights" case
    # (the same weights with the id column, read with an id in "weighted") was a release on
    # every executor more for no feature of its own; with missing key values that never move
    # (they were the case "missing-fixed": one release on every executor fewer)
    "no-id-missing-fixed": [_no_id, _weights, _missing_fixed],
    # recoded keys and a DP perturb: column (categories given, with the id column) in one
    # release: they were two cases, "recode" and "perturb" (one release on every executor fewer)
    "recode-perturb": [_recode, _perturb],
    "recode-midpoint": [_midpoint],  # float key columns (18.5), .sav value labels on fractions
    # a derived column and utility.analyses (a 0/1 outcome and a numeric one with missing
    # values) in one release: they were two cases, "derived" and "analysis" (one release on
    # every executor fewer; each feature still on every executor)
    "derived-analysis": [_derived, _analyses],
    "near": [_near],
    # near W with calibrated theta and merges (43 PRBs, 11 of them merged, 18 merges); on the
    # 5-year bands of "calibrate" the same checks took 4x longer (82 PRBs to calibrate)
    "near-calibrate": [_calibrate, _banded_partition, _near],
    "weighted-near": [_weighted, _near],  # near W inside the weight groups (METHOD.md 7.11)
}


def _input(tmp_path: Path, case: str) -> Path:
    frame = _frame()
    if case == "derived-analysis":
        frame["age_band"] = frame["age"] // 10
        rng = np.random.default_rng(8)
        frame["employed"] = (rng.uniform(size=len(frame)) < 0.3 + 0.005 * frame["age"]
                             ).astype(np.int64)
        hours = 20 + 0.2 * frame["age"] + rng.normal(0, 8, len(frame))
        frame["hours"] = np.where(rng.uniform(size=len(frame)) < 0.05, np.nan, hours)
    if case == "perturb-data":
        rng = np.random.default_rng(9)
        frame["tenure"] = rng.choice(["own", "rent", "other"], size=len(frame))
        frame["hours"] = rng.integers(0, 80, len(frame))
    if case in ("missing-merges", "no-id-missing-fixed"):
        frame["marital"] = frame["marital"].astype("Int64")
        frame.loc[frame.index[::37], "marital"] = pd.NA
    inp = tmp_path / f"{case}.parquet"
    # small row groups: the batch executors read many batches
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), inp, row_group_size=500)
    return inp


def _release(tmp_path: Path, case: str, executor: str, inp: Path, tag: str = "") -> Path:
    cfg = _base(inp)
    for edit in CASES[case]:
        edit(cfg)
    out = tmp_path / f"{executor}{tag}" / "release"
    cfg["output"]["dir"] = str(out)
    if executor == "pandas":
        cfg["engine"] = "pandas"
    elif executor == "streaming":
        cfg["engine"] = {"kind": "streaming", "batch_rows": 700}
    else:
        cfg["engine"] = {"kind": "dask", "workers": 2, "batch_rows": 700}
    path = tmp_path / f"{executor}{tag}" / "job.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    r = runner.invoke(app, ["release", str(path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, f"{executor} {case}: exit {r.exit_code}\n{r.stdout}\n{r.stderr}"
    return out


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in _RUN_FIELDS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """The JSON paths where ``a`` and ``b`` differ (for a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(k), b.get(k), f"{path}/{k}") if k in a and k in b else [
                f"{path}/{k} only in one"]
        return out
    return [] if a == b else [f"{path}: {str(a)[:60]} != {str(b)[:60]}"]


#: digests of the (risk.json, utility.json) pairs that passed the schema check
_VALID: set[str] = set()


def _validated(docs: dict[str, Any], where: str) -> None:
    """The report schema check of ``docs``, once per distinct pair of documents: every
    executor's documents are the reference's (compared after), and the check is a function
    of the documents (0.1-0.5 s CPU each)."""
    digest = hashlib.sha256(json.dumps(docs, sort_keys=True).encode()).hexdigest()
    if digest not in _VALID:
        validate(docs["risk.json"], docs["utility.json"], where=where)
        _VALID.add(digest)


def _files(release: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in sorted((release / "public").iterdir()):
        out[f"public/{f.name}"] = _sha(f)
    internal = release / "internal"
    out["internal/records.parquet"] = _sha(internal / "records.parquet")
    docs = {f: json.loads((internal / f).read_text()) for f in ("risk.json", "utility.json")}
    _validated(docs, where=str(internal))  # not at release
    for f, doc in docs.items():
        out[f"internal/{f}"] = _strip(doc)
    audit = json.loads((internal / "audit.json").read_text())
    if isinstance(audit.get("series"), dict):
        audit["series"].pop("previous", None)  # the folder and audit hash of the previous run
        audit["series"].pop("output_pattern", None)
        # the earlier members' and lineage candidates' folders: compared by name (the paths
        # differ per executor, like previous's)
        for key in ("members", "lineage_candidates"):
            if isinstance(audit["series"].get(key), list):
                audit["series"][key] = [Path(p).name for p in audit["series"][key]]
        if isinstance(audit["series"].get("risk_vs_previous"), dict):
            audit["series"]["risk_vs_previous"].pop("previous", None)
    if isinstance(audit.get("seed"), dict):
        audit["seed"].pop("path", None)  # where the seed file is (its SHA-256 is compared)
    out["internal/audit.json"] = _strip(audit)
    return out


def _cases() -> list[Any]:
    """The cases as parameters, each in its own ``xdist_group`` (its reference made once)."""
    return [pytest.param(case, marks=pytest.mark.xdist_group(f"contract-{case}"))
            for case in CASES]


GOLDEN = Path(__file__).with_name("golden.json")


def _digest(value: Any) -> str:
    """A file's SHA-256, or a JSON document's (stripped of run fields) in canonical form."""
    if isinstance(value, str):
        return value
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("case", _cases())
def test_in_memory_release_is_the_recorded_one(case, reference):
    """The reference itself is pinned: every case's public CSV, codebook, risk, utility and
    audit documents have the SHA-256 recorded in golden.json (Parquet files are left out:
    their bytes name the pyarrow version). A refactoring of the pipeline that changes any
    released byte fails here even when every executor changes alike. After an intended change
    of the output, rerun with SDC_UPDATE_GOLDEN=1 and say why in the commit."""
    files = dict(reference[case][1])
    # the audit record's file hashes and input path/hash name Parquet bytes and the temp folder
    files["internal/audit.json"] = {k: v for k, v in files["internal/audit.json"].items()
                                    if k not in ("input", "public_files", "internal_files",
                                                 "series")}
    got = {k: _digest(v) for k, v in files.items() if not k.endswith(".parquet")}
    if os.environ.get("SDC_UPDATE_GOLDEN"):
        table = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        GOLDEN.write_text(json.dumps({**table, case: got}, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())[case]
    assert got == expected, [k for k in expected if got.get(k) != expected[k]]


@pytest.mark.parametrize("executor", [e for e in EXECUTORS if e != "pandas"])
@pytest.mark.parametrize("case", _cases())
def test_executor_gives_the_in_memory_release(executor, case, reference, tmp_path):
    """The executor's release equals the in-memory one in every file (run fields aside), and
    ``sdc audit`` passes on the streaming one. A Dask release is audited by the streaming
    executor (the registry's ``audited_by``) and is the same bytes as the streaming release
    (checked here), so its audit repeats the streaming one's: ``sdc audit`` of a Dask release
    is run by test_executor_formats.py (``_same_everywhere``) and
    tests/audit/test_household_audit.py."""
    if executor == "dask":
        pytest.importorskip("distributed")
    inp, expected = reference[case]
    rel = _release(tmp_path, case, executor, inp)
    got = _files(rel)
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == expected[name], (f"{executor} differs from pandas in {name} ({case}): "
                                             f"{_differences(got[name], expected[name])}")
    if executor == "streaming":  # the auditor of both batch executors' releases
        r = runner.invoke(app, ["audit", str(rel)])
        assert r.exit_code == 0, r.stdout + r.stderr


@pytest.mark.xdist_group("contract-perturb-data")
def test_perturb_changes_the_perturbed_columns(reference):
    """The ``perturb-data`` case really perturbs: some region counts change (epsilon 1, four
    categories: P(keep) < 0.6, so about 1,200 of 3,000 values move; equal counts in all four
    categories by chance is practically impossible) and the numeric ``hours`` column stays
    numeric with some values changed."""
    inp, files = reference["perturb-data"]
    public = pd.read_parquet(Path(str(inp)).parent / "pandas" / "release" / "public"
                             / "microdata.parquet")
    frame = pd.read_parquet(inp)
    assert len(public) == len(frame) and files
    assert (public["region"].value_counts().sort_index()
            != frame["region"].value_counts().sort_index()).any()
    assert set(public["tenure"]) <= {"own", "rent", "other"}
    assert pd.api.types.is_numeric_dtype(public["hours"])
    assert (np.sort(public["hours"].to_numpy()) != np.sort(frame["hours"].to_numpy())).any()


def test_series_second_release_is_the_same_on_every_executor(prefect_harness, tmp_path):
    """A second release of a series (one record added, one changed) compares itself with the
    first: the same public files and series figures whichever executor ran either release."""
    frame = _frame(2000)
    first = tmp_path / "first.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), first, row_group_size=400)
    second = frame.copy()
    second.loc[0, "age"] = (second.loc[0, "age"] + 1) % 92
    second = pd.concat([second, frame.iloc[[5]].assign(pid=10**9)], ignore_index=True)
    inp2 = tmp_path / "second.parquet"
    pq.write_table(pa.Table.from_pandas(second, preserve_index=False), inp2, row_group_size=400)
    results = {}
    for executor in EXECUTORS:
        root = tmp_path / executor
        seed = root / "series.seed"
        root.mkdir()
        seed.write_text("271828182845904523536028747135266249\n")
        seed.chmod(0o600)
        releases = root / "releases"
        for i, inp in enumerate((first, inp2)):
            cfg = _base(inp)
            cfg["seed"] = {"file": str(seed)}
            cfg["output"]["dir"] = str(releases / "c-{month}")
            cfg["engine"] = executor if executor != "dask" else {"kind": "dask", "workers": 2}
            path = root / f"job{i}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            r = runner.invoke(app, ["release", str(path)], env={"COLUMNS": "200"})
            assert r.exit_code == 0, r.stdout + r.stderr
            if i == 0:  # pretend the first release was last month's
                (this,) = list(releases.iterdir())
                this.rename(releases / "c-0000-01")
        (this,) = [p for p in releases.iterdir() if p.name != "c-0000-01"]
        audit = json.loads((this / "internal" / "audit.json").read_text())
        assert audit["series"]["previous"]["dir"].endswith("c-0000-01")
        results[executor] = _files(this)
    for executor in EXECUTORS[1:]:
        assert results[executor] == results["pandas"], _differences(results[executor],
                                                                    results["pandas"])


def _household_columns(frame: pd.DataFrame, cfg: dict[str, Any]) -> pd.DataFrame:
    """The ``weights-perturb-derived`` variant: a household-level derived column (``region_name``, a
    household column), a person-level one (``age_band``), DP-PRAM of a household column
    (``water``, once per household) and of a person column (``lang``)."""
    rng = np.random.default_rng(3)
    frame = frame.assign(region_name="R" + frame["region"].astype(str),
                         age_band=frame["age"] // 10,
                         lang=rng.choice(["de", "fr", "it"], size=len(frame)))
    cfg["input"]["household_columns"] = [*cfg["input"]["household_columns"], "region_name"]
    cfg["derived"] = ["region_name", "age_band"]
    cfg["perturb"] = {"water": {"epsilon": 1.5, "categories": [1, 2, 3, 4, 5]},
                      "lang": {"epsilon": 1.0, "categories": ["de", "fr", "it"]}}
    return frame


def _protect(cfg: dict[str, Any]) -> None:
    """The ``protect`` variant: ``risk.composition: protect`` (docs/HOUSEHOLDS.md), person keys
    sex and age recoded into three bands (6 person classes), relation a non-key column,
    ``risk.households: fail``."""
    keys = cfg["key_variables"]
    keys.pop("relation")
    keys["age"] = {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}
    cfg["partition"] = {"sex": "as_is"}
    cfg["risk"] = {"xi": 0.5, "composition": "protect", "households": "fail"}


# "weights-perturb-derived": the survey weights (input.weight, unweighted design) and the
# derived and perturbed columns of both levels in one release (they were two variants,
# "weights" and "perturb-derived": three releases fewer, every feature still on every executor);
# it also writes SPSS/Stata files. It asks what the "plain" variant asked (the same file under
# the same unweighted design and default composition, with a survey weight and more columns
# beside the keys), which was three releases and an audit more
@pytest.mark.parametrize("variant", ["weighted", "weights-perturb-derived",
                                     "protect", "protect-weighted", "protect-matching",
                                     "protect-drop"])
def test_household_release_is_the_same_on_every_executor(prefect_harness, tmp_path, variant):
    """A household file (docs/HOUSEHOLDS.md): the streaming and Dask executors' releases equal
    the in-memory one file for file (households split over batches and Parquet pieces, changed
    households, left-out small classes, the households sections of risk, utility and audit,
    ``derived:`` and ``perturb:`` columns of both levels, survey weights, ``risk.weighted``,
    SPSS/Stata files of a household file); ``sdc audit`` passes on the in-memory one (the same audit on every executor's household release:
    tests/audit/test_household_audit.py)."""
    from engine_configs import household_config

    from sdc.samples import generate_household_sample

    frame = generate_household_sample(2500, seed=8, n_regions=12)
    if variant == "weights-perturb-derived":
        frame = _household_columns(frame, household_config())
    if variant == "protect-matching":  # income missing exactly under 15: missingness groups
        frame["income"] = frame["income"].astype(float).where(frame["age"] >= 15)
    inp = tmp_path / "households.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), inp, row_group_size=450)
    files = {}
    for executor in ("pandas", "streaming", "dask"):
        weights = variant in ("weighted", "weights-perturb-derived", "protect-weighted")
        cfg = household_config(**({"weight": "hh_weight"} if weights else {}))
        if variant.startswith("protect"):
            _protect(cfg)
        if variant.endswith("weighted"):  # balanced on the weights (docs/HOUSEHOLDS.md)
            cfg["risk"]["weighted"] = True
        if variant in ("protect-matching", "protect-drop"):  # near compositions by matchings
            cfg["risk"].update({"destinations": "near", "theta": "calibrated",
                                "near": {"neighbours": 4, "kernel": "matching"}})
        if variant == "protect-matching":  # weighted (near.weights, METHOD 7.12; issue 44)
            # with a ladder of flatter vectors for the PRBs the dependence check flags (the
            # loop runs on every executor's count; laeken's eusilc relaxes one PRB:
            # tests/method/test_household_rungs_eusilc.py)
            cfg["risk"]["near"].update({"weights": [0.4, 0.4, 0.2], "fallback_weights": [
                [0.34, 0.33, 0.33], [0.25, 0.25, 0.25, 0.25]]})
        if variant == "protect-drop":  # the two 8-person households exposed at xi 0.395: left
            # out of every batch (streaming: 700 rows; Dask: Parquet pieces) (issue 44)
            cfg["risk"].update({"xi": 0.395, "exposed_sizes": "drop",
                                "small_blocks": "calibrate"})
        if variant == "weights-perturb-derived":
            _household_columns(frame, cfg)
        cfg["input"].update({"path": str(inp), "format": "parquet", "drop": ["income"]})
        if variant in ("protect-matching", "protect-drop"):  # income kept; with the groups, water (a household
            # column) narrows urbrur in the small PRB of 7-person households: dropped
            cfg["input"]["drop"] = ["water"] + (["income"] if variant == "protect-drop" else [])
            cfg["input"]["household_columns"].remove("water")
        # weights-perturb-derived writes SPSS/Stata too: a household file's .sav/.dta (records
        # in household order) the same bytes on every executor (was test_executor_formats.py's
        # test_spss_and_stata_files_of_a_household_file, three more releases of the file)
        sav_dta = variant == "weights-perturb-derived"
        formats = ["parquet", "csv"] + (["sav", "dta"] if sav_dta else [])
        cfg["output"] = {"dir": str(tmp_path / executor / "release"), "formats": formats}
        cfg["engine"] = {"pandas": "pandas", "streaming": {"kind": "streaming", "batch_rows": 700},
                         "dask": {"kind": "dask", "workers": 2}}[executor]
        path = tmp_path / executor / "job.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(yaml.safe_dump(cfg))
        r = runner.invoke(app, ["release", str(path)], env={"COLUMNS": "200"})
        assert r.exit_code == 0, f"{executor}: exit {r.exit_code}\n{r.stdout}\n{r.stderr}"
        rel = tmp_path / executor / "release"
        files[executor] = _files(rel)
    # the in-memory release audited (every variant's audit passes); the streaming and Dask
    # releases are the same bytes (checked below), and the audit of a household release is
    # the same on every executor (tests/audit/test_household_audit.py asks that)
    a = runner.invoke(app, ["audit", str(tmp_path / "pandas" / "release")])
    assert a.exit_code == 0, a.stdout + a.stderr
    risk = files["pandas"]["internal/risk.json"]["households"]
    assert risk["households_changed"] > 0
    if variant.startswith("protect"):  # certified, and measured within xi
        comp = risk["composition"]
        assert comp["mode"] == "protect" and comp["certificate"] <= 0.5 and risk["pass"]
        if variant == "protect-matching":  # members never leave their missingness group
            assert comp["missingness_groups"] == ["income missing <=> age in {0}"]
            pub = pd.read_parquet(tmp_path / "pandas" / "release" / "public" /
                                  "microdata.parquet")
            child = pd.to_numeric(pub["age"]) < 15
            assert (child == pub["income"].isna()).all()
        if variant == "protect-drop":
            assert risk["left_out"]["sizes"] == [{"size": 8, "households": 2}]
            pub = pd.read_parquet(tmp_path / "pandas" / "release" / "public" /
                                  "microdata.parquet")
            assert len(pub) == len(frame) - 16 and pub.groupby("hh_id").size().max() == 7
    else:
        assert risk["small_classes"] > 0
    if sav_dta:
        assert {"public/microdata.sav", "public/microdata.dta"} <= set(files["pandas"])
    if variant == "weights-perturb-derived":  # the columns follow the released keys on every engine
        public = pd.read_parquet(tmp_path / "pandas" / "release" / "public" / "microdata.parquet")
        assert (public["region_name"] == "R" + public["region"].astype(str)).all()
        assert (public["age_band"] == public["age"] // 10).all()
        assert (public.groupby("hh_id")["water"].nunique() == 1).all()
    for executor in ("streaming", "dask"):
        assert set(files[executor]) == set(files["pandas"])
        for name in files["pandas"]:
            assert files[executor][name] == files["pandas"][name], (
                f"{executor} differs from pandas in {name}: "
                f"{_differences(files[executor][name], files['pandas'][name])}")
