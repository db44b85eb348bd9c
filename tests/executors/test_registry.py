"""The executor registry decides what each executor reads: no engine name is tested outside it."""

from __future__ import annotations

import dataclasses

import pytest

import sdc
from sdc.executors import registry
from sdc.executors.registry import Executor, executor_names, get_executor, register_executor


def _config(fmt: str):
    return sdc.parse_config({"name": "r", "input": {"path": f"in.{fmt}", "format": fmt},
                             "key_variables": {"sex": {"categories": [1, 2]}},
                             "risk": {"xi": 0.5}, "seed": 1})


def test_every_registered_executor_reads_every_input_format():
    assert set(executor_names()) >= {"pandas", "streaming", "dask"}
    for name in executor_names():
        for fmt in ("csv", "parquet"):
            assert get_executor(name).problems(_config(fmt)) == [], (name, fmt)
    for name in executor_names():  # SPSS/Stata too: the batch readers read them in chunks
        for fmt in ("sav", "dta"):
            assert get_executor(name).problems(_config(fmt)) == [], (name, fmt)


def test_a_new_executor_is_one_registration(monkeypatch):
    """An executor registered with Parquet as its only input format is refused a CSV input,
    and the refusal names every executor that reads CSV as the way out."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    pandas = get_executor("pandas")
    register_executor(dataclasses.replace(pandas, name="parquet-only",
                                          input_formats=("parquet",)))
    (msg,) = get_executor("parquet-only").problems(_config("csv"))
    assert "input.format 'csv'" in msg
    for other in ("pandas", "streaming", "dask"):
        assert other in msg
    with pytest.raises(sdc.ConfigError, match="parquet-only"):
        get_executor("nope")
    assert isinstance(get_executor("parquet-only"), Executor)
