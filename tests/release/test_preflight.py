"""The pre-flight of ``sdc release``: every refusal at once, before Prefect starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sdc.errors import InputError
from sdc.executors.registry import get_executor
from sdc.publish.folder import ReleaseExistsError
from sdc.release.preflight import PreflightError, preflight
from sdc.series.membership import SeriesError


def _fake_release(folder: Path, audit: dict | None = None) -> None:
    (folder / "internal").mkdir(parents=True)
    (folder / "public").mkdir()
    (folder / "internal" / "audit.json").write_text(json.dumps(audit or {}))


def test_one_problem_keeps_its_own_exception(make_small_job, tmp_path):
    cfg = make_small_job("one")
    assert preflight(cfg).engine == "pandas"
    _fake_release(tmp_path / "releases" / "one")
    with pytest.raises(ReleaseExistsError, match="already exists"):
        preflight(cfg)
    preflight(cfg, force=True)


def test_every_problem_in_one_message(make_small_job, tmp_path):
    """dask with an existing release and a seed readable by others: the problems in one
    message (the old code raised them one at a time, after Prefect). SPSS/Stata input and
    output and CSV input are no problem on dask (every engine reads and writes every format;
    the dask client copies a CSV, SPSS or Stata input to Parquet)."""
    seed = tmp_path / "secrets" / "s.seed"
    seed.parent.mkdir()
    seed.write_text("12345\n")
    os.chmod(seed, 0o644)
    cfg = make_small_job("many", seed={"file": str(seed)}, input={"format": "dta"},
                         output={"formats": ["parquet", "sav", "dta"]})
    _fake_release(tmp_path / "releases" / "many")
    with pytest.raises(PreflightError) as e:
        preflight(cfg, engine="dask")
    msg = str(e.value)
    assert len(e.value.problems) == 2, msg
    for part in ("already exists", "mode 0644"):
        assert part in msg
    assert "output.formats" not in msg
    assert isinstance(e.value, InputError)  # exit 2


def test_batch_engines_read_and_write_every_format(tmp_path, make_small_job):
    """Every engine writes sav/dta and reads CSV, SPSS and Stata (in chunks: the contract
    suite checks the bytes): the pre-flight and the engine's own check pass them."""
    from sdc import load_config
    from sdc.io.batches import check_streamable

    for engine in ("streaming", "dask"):
        ok = make_small_job(f"ok-{engine}", output={"formats": ["csv", "sav", "dta"]})
        preflight(ok, engine=engine)
        check_streamable(load_config(ok), engine)
        cfg = make_small_job(f"st-{engine}", input={"format": "dta"},
                             output={"formats": ["csv", "dta"]})
        assert get_executor(engine).problems(load_config(cfg)) == []


def test_series_of_another_seed_is_refused_without_new_series(make_small_job, tmp_path):
    cfg = make_small_job("ser", seed={"file": str(tmp_path / "secrets" / "ser.seed")},
                         output={"dir": str(tmp_path / "releases" / "ser-{month}")})
    _fake_release(tmp_path / "releases" / "ser-2020-01",
                  {"series": {"id": "0123456789abcdef"}})
    with pytest.raises(SeriesError, match="another seed"):
        preflight(cfg)  # no seed file yet: the run would start a new series
    preflight(cfg, new_series=True)
    assert not (tmp_path / "secrets" / "ser.seed").exists()  # the pre-flight creates nothing


def test_unknown_engine_and_missing_input(make_small_job, tmp_path):
    cfg = make_small_job("eng")
    (tmp_path / "data" / "eng.csv").unlink()
    with pytest.raises(PreflightError) as e:
        preflight(cfg, engine="spark")
    assert "unknown engine 'spark'" in str(e.value) and "does not exist" in str(e.value)


def test_cli_refuses_before_prefect_starts(make_small_job, tmp_path, monkeypatch):
    """The refusal comes from the pre-flight: the temporary API is never started."""
    import flows.ephemeral
    from sdc.cli.main import app

    def boom(*a, **k):  # pragma: no cover - the assertion is that it is not called
        raise AssertionError("Prefect's server was started before the refusal")

    monkeypatch.setattr(flows.ephemeral.TemporaryAPI, "start", classmethod(boom))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    seed = tmp_path / "secrets" / "cli.seed"
    seed.parent.mkdir()
    seed.write_text("12345\n")
    os.chmod(seed, 0o644)
    cfg = make_small_job("cli", seed={"file": str(seed)})
    _fake_release(tmp_path / "releases" / "cli")
    r = CliRunner().invoke(app, ["release", str(cfg), "--engine", "streaming"])
    assert r.exit_code == 2, r.output
    assert "2 problems" in r.output and "already exists" in r.output and "0644" in r.output


def test_cli_and_preflight_import_neither_prefect_nor_pandas(make_small_job):
    """`sdc --help` and the pre-flight of a first release stay cheap: no Prefect, no pandas."""
    cfg = make_small_job("imp")
    code = ("import sys; import sdc.cli.main; from sdc.release.preflight import preflight; "
            f"preflight({str(cfg)!r}); "
            "print(sorted(m for m in ('prefect', 'pandas', 'scipy', 'pyarrow') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
