"""The id check's identities spilled to files by their top bits (issue 48: 8 bytes a record
off the heap of a 100M-record streaming release): the same duplicates, the same refusal
with global rows, the same release, and no file left behind."""

from __future__ import annotations

import numpy as np
import pytest

import sdc
from sdc.executors.streaming import stream_release
from sdc.io.spill import IdentitySpill
from sdc.pipeline import release as release_mod
from sdc.pipeline.kernels import duplicate_identities
from tests.executors.test_engines import config_for, make_frame


def test_spilled_identities_give_the_duplicates_of_the_sorted_array(tmp_path) -> None:
    rng = np.random.default_rng(4)
    ident = rng.integers(0, 2**63, 50_000, dtype=np.uint64) * np.uint64(2)
    ident[[10, 20_000, 49_999]] = ident[5]  # three more of one identity (one top-bit file)
    ident[30_000] = ident[40_000]
    ident[7] = np.uint64(2**64 - 1)  # the last file's edge
    ident[8] = np.uint64(2**64 - 1)
    spill = IdentitySpill(tmp_path / "ids")
    for part in np.array_split(ident, 7):
        spill.append(part)
    assert spill.size == ident.size
    got = spill.duplicates()
    want = duplicate_identities([ident.copy()])
    assert got is not None and got.dtype == np.uint64 and np.array_equal(got, want)
    assert want.size == 3 and not (tmp_path / "ids").exists()
    spill = IdentitySpill(tmp_path / "ids2")
    spill.append(np.arange(1000, dtype=np.uint64) << np.uint64(54))  # spread over every file
    assert spill.duplicates() is None and not (tmp_path / "ids2").exists()


@pytest.fixture
def spilled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release_mod, "SPILL_IDENTITIES", 0)  # spill whatever the size


def test_duplicate_ids_across_batches_are_reported_from_the_spill(tmp_path, spilled) -> None:
    frame = make_frame(1_000, with_missing=False)
    frame.loc[900, "pid"] = frame.loc[5, "pid"]  # rows 6 and 901: different batches of 300
    path = tmp_path / "dup.parquet"
    frame.to_parquet(path, index=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(sdc.InputError) as e:
        stream_release(config_for(path, tmp_path / "rel", "parquet"), 1, tmp_path / "o",
                       batch_rows=300, tmp_dir=scratch)
    assert "'pid'" in str(e.value) and "rows 6, 901" in str(e.value)
    assert not list(scratch.glob("sdc-identities-*"))


def test_a_spilled_release_is_the_same_bytes(tmp_path, monkeypatch) -> None:
    frame = make_frame(2_000, with_missing=False)
    path = tmp_path / "in.parquet"
    frame.to_parquet(path, index=False)
    got = {}
    for way in ("held", "spilled"):
        if way == "spilled":
            monkeypatch.setattr(release_mod, "SPILL_IDENTITIES", 0)
        scratch = tmp_path / f"scratch-{way}"
        scratch.mkdir()
        stream_release(config_for(path, tmp_path / f"rel-{way}", "parquet"), 1,
                       tmp_path / way, batch_rows=700, tmp_dir=scratch)
        got[way] = (tmp_path / way / "microdata.parquet").read_bytes()
        assert not list(scratch.glob("sdc-identities-*"))
    assert got["held"] == got["spilled"]
