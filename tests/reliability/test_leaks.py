"""Leak checks on the session's census release (59,033 records).

Nothing in ``public/`` may reveal the seed, theta or any per-PRB figure, an original record id,
a value of a dropped identifier, or the original row order. Each public file is scanned three
ways, because a Parquet file is compressed and a literal scan of its bytes alone proves little:

1. its raw bytes (every file, every secret as bytes);
2. its decoded content: the Parquet table rendered as text, plus its schema and key-value
   metadata; the CSV and the codebook as text;
3. the set of its field values (ids and names compared as whole values).

Modes: ``internal/`` 0700 and its files 0600; the seed file 0600 in a 0700 folder (created by
the release run itself).
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats

from .conftest import CENSUS_CSV, CensusRelease

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def original() -> pd.DataFrame:
    return pd.read_csv(CENSUS_CSV, dtype={"person_id": "str", "full_name": "str"})


@pytest.fixture(scope="module")
def internal(census_release: CensusRelease) -> dict:
    audit = json.loads((census_release.out_dir / "internal" / "audit.json").read_text("utf-8"))
    blocks = pd.read_parquet(census_release.out_dir / "internal" / "blocks.parquet")
    return {"audit": audit, "blocks": blocks}


def decoded_texts(out_dir: Path) -> dict[str, str]:
    """Every public file as text: raw bytes (latin-1, so every byte maps to one character),
    plus the decoded Parquet table and its metadata."""
    texts: dict[str, str] = {}
    for p in sorted((out_dir / "public").iterdir()):
        raw = p.read_bytes()
        texts[f"{p.name} (bytes)"] = raw.decode("latin-1")
        if p.suffix == ".parquet":
            pf = pq.ParquetFile(p)
            meta = pf.schema_arrow.metadata or {}
            kv = pf.metadata.metadata or {}
            texts[f"{p.name} (metadata)"] = " ".join(
                (k + b"=" + v).decode("utf-8", "replace") for k, v in {**meta, **kv}.items())
            texts[f"{p.name} (table)"] = pd.read_parquet(p).to_csv(index=False)
        else:
            texts[f"{p.name} (text)"] = raw.decode("utf-8")
    return texts


def public_values(out_dir: Path) -> set[str]:
    vals: set[str] = set()
    for p in (out_dir / "public").iterdir():
        if p.suffix == ".parquet":
            df = pd.read_parquet(p)
            vals.update(df.columns.astype(str))
            for c in df.columns:
                vals.update(df[c].astype(str).unique().tolist())
        elif p.suffix == ".csv":
            df = pd.read_csv(p, dtype=str, keep_default_na=False)
            vals.update(df.columns)
            for c in df.columns:
                vals.update(df[c].unique().tolist())
    return vals


def secret_figures(census_release: CensusRelease, internal: dict) -> list[str]:
    """The seed, theta and every per-PRB figure worth searching for as text."""
    seed = census_release.seed
    figs = [str(seed), f"{seed:x}", f"{seed:X}"]
    b = internal["blocks"]
    for col in ("theta", "max_risk", "expected_changed"):
        for v in b[col].unique():
            figs += [repr(float(v)), f"{v:.6f}", f"{v:.5f}"]
    figs += [s for s in b["profile"].unique() if len(s) >= 6]  # "1:326, 2:77"
    cert = internal["audit"]["risk"]["certificate"]
    figs += [repr(float(cert)), f"{cert:.6f}"]
    return sorted(set(figs))


def test_no_seed_theta_or_prb_figure_in_public(census_release: CensusRelease,
                                               internal: dict) -> None:
    figures = secret_figures(census_release, internal)
    assert len(figures) > 50
    found = {name: [f for f in figures if f in text]
             for name, text in decoded_texts(census_release.out_dir).items()}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"secret figures in public files: {found}"
    # the theorem's theta itself (0.7990...) must not be printed either, at any precision >= 3
    theta = internal["audit"]["risk"]["theta"]
    for name, text in decoded_texts(census_release.out_dir).items():
        if "(bytes)" in name and name.endswith(".parquet (bytes)"):
            continue  # compressed bytes: covered by the decoded table and metadata
        assert f"{theta:.3f}" not in text, f"theta {theta:.3f} printed in {name}"


def test_no_original_id_or_dropped_value_in_public(census_release: CensusRelease,
                                                   original: pd.DataFrame) -> None:
    ids = set(original["person_id"])
    names = set(original["full_name"])
    values = public_values(census_release.out_dir)
    assert not (ids & values), sorted(ids & values)[:5]
    assert not (names & values), sorted(names & values)[:5]
    for name, text in decoded_texts(census_release.out_dir).items():
        # ids anywhere in the text or bytes (substring scan through their fixed pattern)
        leaked = set(re.findall(r"P\d{7}", text)) & ids
        assert not leaked, f"original ids in {name}: {sorted(leaked)[:5]}"
        # names: every capitalised word pair, compared with the set of names
        pairs = set(re.findall(r"[A-Z][a-z]+ [A-Z][a-z'-]+", text))
        assert not (pairs & names), f"dropped names in {name}: {sorted(pairs & names)[:5]}"
        for col in ("person_id", "full_name"):
            assert col not in text, f"column name {col!r} in {name}"


def test_public_row_order_is_unrelated_to_input_order(census_release: CensusRelease,
                                                      original: pd.DataFrame) -> None:
    """Records unique in all their released columns and unchanged by PRAM can be found in
    both files; their public positions must look like a random permutation of their input
    positions. Under H0 Spearman's rho has sd ~ 1/sqrt(m - 1): the bound is 5 sd."""
    pub = pd.read_parquet(census_release.out_dir / "public" / "microdata.parquet")
    cols = [c for c in original.columns if c not in ("person_id", "full_name")]
    a = original[cols].assign(_pos_in=np.arange(len(original)))
    b = pub[cols].assign(_pos_out=np.arange(len(pub)))
    a = a[~a.duplicated(cols, keep=False)]
    b = b[~b.duplicated(cols, keep=False)]
    m = a.merge(b, on=cols, how="inner")
    assert len(m) > 20_000
    rho = stats.spearmanr(m["_pos_in"], m["_pos_out"]).statistic
    assert abs(rho) < 5 / np.sqrt(len(m) - 1), rho
    # and record_id is just 1..n in file order
    assert pub["record_id"].tolist() == list(range(1, len(pub) + 1))


def test_no_seed_anywhere_but_the_seed_file(census_release: CensusRelease) -> None:
    """The audit records the seed file's path and SHA-256, never the seed; nor do the other
    internal files or the CLI output."""
    seed = str(census_release.seed)
    assert len(seed) >= 20  # 128 random bits
    for p in (census_release.out_dir / "internal").iterdir():
        assert seed.encode() not in p.read_bytes(), f"the seed is in internal/{p.name}"
    assert seed not in census_release.cli_output


def test_internal_and_seed_modes(census_release: CensusRelease) -> None:
    internal_dir = census_release.out_dir / "internal"
    assert stat.S_IMODE(internal_dir.stat().st_mode) == 0o700
    files = list(internal_dir.iterdir())
    assert len(files) >= 2
    for p in files:
        assert p.is_file()
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
    assert stat.S_IMODE(census_release.seed_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(census_release.seed_path.parent.stat().st_mode) == 0o700
    public_dir = census_release.out_dir / "public"
    assert stat.S_IMODE(public_dir.stat().st_mode) == 0o755
    for p in public_dir.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p.name


def test_scanner_finds_planted_leaks(census_release: CensusRelease, internal: dict,
                                     original: pd.DataFrame, tmp_path: Path) -> None:
    """The scans above can fail: a copy of the release with an id, a name, the seed and a
    theta planted in its CSV, codebook and Parquet metadata is caught by each of them."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(census_release.out_dir, copy)
    pid, name = original["person_id"].iloc[17], original["full_name"].iloc[17]
    theta = float(internal["blocks"]["theta"].iloc[0])
    with open(copy / "public" / "microdata.csv", "a", encoding="utf-8") as f:
        f.write(f"{pid},{name}\n")
    with open(copy / "public" / "codebook.md", "a", encoding="utf-8") as f:
        f.write(f"\nseed {census_release.seed}\n")
    table = pq.read_table(copy / "public" / "microdata.parquet")
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           b"note": repr(theta).encode()})
    pq.write_table(table, copy / "public" / "microdata.parquet")
    texts = decoded_texts(copy)
    assert pid in texts["microdata.csv (text)"] and name in public_values(copy)
    assert str(census_release.seed) in texts["codebook.md (text)"]
    assert repr(theta) in texts["microdata.parquet (metadata)"]
