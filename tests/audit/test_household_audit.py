"""``sdc audit`` of a household release out of core (issue 30): the source and the public file
counted by the pipeline's count pass with the auditor's runner, in batches on every executor.
The same audit on the in-memory, streaming and Dask executors' releases; a tampered public
household file fails with the in-memory check's message; the batches a streaming audit reads
are never larger than the configured batch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from household_helpers import household_job, household_parquet, release_folder

from sdc.audit.verify import verify_release
from sdc.io.write import parquet_bytes, sha256_bytes

#: the one check whose wording says how the output schema was checked (whole or per batch)
SCHEMA = "public microdata: output schema"


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, Path]:
    """One household file released by the three executors (no Prefect)."""
    tmp = tmp_path_factory.mktemp("hh-audit")
    inp = household_parquet(tmp / "households.parquet")
    engines = {"pandas": "pandas", "streaming": {"kind": "streaming", "batch_rows": 300},
               "dask": {"kind": "dask", "workers": 2, "batch_rows": 300}}
    return {name: release_folder(household_job(tmp, inp, spec, name=name))
            for name, spec in engines.items()}


def _checks(rep) -> list[tuple[str, bool, str]]:
    return [(c.name, c.ok, "" if c.name == SCHEMA else c.detail) for c in rep.checks]


def test_household_audit_is_the_same_on_every_executor(releases, monkeypatch):
    """Every check of the audit (name, verdict and detail; the output schema's wording
    aside) is the same for the in-memory, streaming and Dask releases, and all pass.

    The streaming audit reads in batches: with ``batch_rows: 300`` its count passes see the
    source and the public file in batches of at most 300 persons (never a whole file, 2,500
    persons): memory is bounded by the batch, the cell tables and the household tables. (That
    was test_streaming_household_audit_reads_in_batches, which released a file of its own to
    audit it again.)"""
    import sdc.pipeline.passes as hc

    seen: list[int] = []
    count_batch = hc.count_batch

    def spy(frame, *args, **kw):
        seen.append(len(frame))
        return count_batch(frame, *args, **kw)

    got = {}
    for name, rel in releases.items():
        with monkeypatch.context() as m:
            if name == "streaming":
                m.setattr(hc, "count_batch", spy)
            got[name] = verify_release(rel)
    source = releases["streaming"].parent.parent / "households.parquet"
    n = len(pd.read_parquet(source, columns=["hh_id"]))
    # source and public file counted by the audit, and the source again by the re-derivation
    assert sum(seen) >= 2 * n and max(seen) <= 300 < n, (n, seen)
    for name, rep in got.items():
        assert rep.ok, (name, [(c.name, c.detail) for c in rep.failed])
    names = {c.name for c in got["pandas"].checks}
    assert {"households: consistent", "households: intact",
            "household stage: partition sets: counts equal", "person stage: PRB max risk <= xi",
            "person stage: counts per person partition group", "certificate = recorded",
            "re-derived release: public files"} <= names
    assert _checks(got["streaming"]) == _checks(got["pandas"])
    assert _checks(got["dask"]) == _checks(got["pandas"])


def _tamper(rel: Path) -> pd.DataFrame:
    """Give one member of the first household of two or more another region, in both
    public files, with their hashes fixed as a careful forger would; returns the file."""
    pub = pd.read_parquet(rel / "public" / "microdata.parquet")
    sizes = pub.groupby("hh_id").size()
    hid = sizes.index[sizes >= 2][0]
    row = np.flatnonzero(pub["hh_id"].to_numpy() == hid)[-1]
    col = pub.columns.get_loc("region")
    pub.iloc[row, col] = pub["region"].iloc[row] % 12 + 1
    audit = json.loads((rel / "internal" / "audit.json").read_text())
    for name, data in (("microdata.parquet", parquet_bytes(pub)),
                       ("microdata.csv", pub.to_csv(index=False, lineterminator="\n").encode())):
        (rel / "public" / name).chmod(0o644)
        (rel / "public" / name).write_bytes(data)
        audit["public_files"][name] = sha256_bytes(data)
    (rel / "internal" / "audit.json").write_text(json.dumps(audit))
    return pub


@pytest.mark.parametrize("executor", ["pandas", "streaming"])
def test_tampered_public_household_fails_with_the_whole_file_message(releases, executor,
                                                                     tmp_path):
    """A public household whose members disagree on a household key fails ``households:
    consistent`` with the message of the in-memory check on the whole public file (the
    violating household's rows gathered from the batches)."""
    import shutil

    from sdc.config.load import load_yaml, parse_config
    from sdc.errors import InputError
    from sdc.method.households import check_households

    rel = tmp_path / "rel"
    shutil.copytree(releases[executor], rel)
    pub = _tamper(rel)
    rep = verify_release(rel)
    bad = {c.name: c for c in rep.failed}
    assert "households: consistent" in bad
    audit = json.loads((rel / "internal" / "audit.json").read_text())
    cfg = parse_config(load_yaml(audit["config"]["text"]), Path("."))
    with pytest.raises(InputError) as e:
        check_households(pub, cfg)
    assert bad["households: consistent"].detail == str(e.value)
    assert "column 'region' differs within 1 household(s)" in str(e.value)
