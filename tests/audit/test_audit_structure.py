"""``audit.json``'s ``prb_structure``: an independent program rebuilds every PRB and the
certificate from the audit record alone (no input file, no sdc engine code: the exact max risk
is recomputed from the formulas of docs/METHOD.md section 7.1 by brute force here), and gets
the release's PRBs, thetas, max risks and certificate; and from the source file plus
audit.json (its config copy) every partition set's records and profile are recounted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

import sdc
from sdc.series.seeds import SeedInfo
from tests.release_helpers import release_files


def _frame(n: int = 1_500, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 90, n)
    return pd.DataFrame({
        "pid": np.arange(n) * 3 + 1,
        "age": age,
        "sex": rng.choice([1, 2], n),
        "region": rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.4, 0.3, 0.2, 0.06, 0.03, 0.01]),
        "income": np.round(rng.lognormal(8, 1, n), 2),
    })


def _config_data(tmp_path: Path, **risk) -> dict:
    return {
        "name": "structure",
        "input": {"path": str(tmp_path / "in.parquet"), "id_column": "pid"},
        "key_variables": {"age": {"range": [0, 89]}, "sex": {"categories": [1, 2]},
                          "region": {"categories": [1, 2, 3, 4, 5, 6]}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 20, 40, 60, 80]},
                      "region": "as_is"},
        "risk": {"xi": 0.395, "small_blocks": "merge", **risk},
        "seed": 7,
        "output": {"dir": str(tmp_path / "rel"), "formats": ["parquet"]},
    }


def _audit(tmp_path: Path, **risk) -> tuple[dict, Any]:
    frame = _frame()
    frame.to_parquet(tmp_path / "in.parquet", index=False)
    data = _config_data(tmp_path, **risk)
    cfg = sdc.parse_config(data, tmp_path)
    result = sdc.release_frame(frame, cfg, 7, out_dir=tmp_path / "out")
    _, internal = release_files(cfg, result, SeedInfo(value=7, path=None, sha256=None,
                                                      created=False),
                                input_sha256="0" * 64,
                                config_text=yaml.safe_dump(data, sort_keys=False))
    return json.loads(internal["audit.json"]), result


# -- an independent re-derivation (docs/METHOD.md 7.1), written from the formulas, not the engine --
def _binom(n: int, p: float) -> np.ndarray:
    return np.array([math.comb(n, a) * p ** a * (1 - p) ** (n - a) for a in range(n + 1)])


def _risk_terms(profile: dict[int, int], theta: float) -> float:
    """max over the target's cell j, the picked cell z and the released count a of
    R_{j->z}(a, t) = (1/a) q P(S'=a-1) / (q P(S'=a-1) + (1-q) P(S'=a)) (docs/METHOD.md 7.1), with
    NZY's transitions: stay 1 - theta/t_j, move to each other cell theta/((k-1) t_j). Cells
    with equal t are exchangeable: one j and one z per distinct frequency (and z = j)."""
    k = sum(profile.values())
    assert k >= 2
    cells = sorted(t for t, m in profile.items() for _ in range(m))
    first = {t: cells.index(t) for t in profile}
    best = 0.0
    for t_j, j in first.items():
        zs = {j} | {cells.index(t) if t != t_j else j + 1 for t in profile
                    if t != t_j or profile[t] > 1}
        for z in zs:
            dist = np.array([1.0])
            for l_, t_l in enumerate(cells):
                if l_ == j:
                    n, p = t_l - 1, (1 - theta / t_l) if z == j else theta / ((k - 1) * t_l)
                elif l_ == z:
                    n, p = t_l, 1 - theta / t_l
                else:
                    n, p = t_l, theta / ((k - 1) * t_l)
                dist = np.convolve(dist, _binom(n, p))
            q = (1 - theta / t_j) if z == j else theta / ((k - 1) * t_j)
            dist = np.append(dist, 0.0)
            for a in range(1, dist.size):
                num = q * dist[a - 1]
                den = num + (1 - q) * dist[a]
                if den > 0:
                    best = max(best, num / den / a)
    return best


def test_every_prb_and_the_certificate_rebuilt_from_audit_json_alone(tmp_path):
    audit, result = _audit(tmp_path)
    st = audit["prb_structure"]
    assert st["format"] == "sdc-prbs/1"
    assert st["partition_variables"] == ["sex", "age", "region"]
    assert st["merges"], "the config is meant to merge small partition sets"
    sets = st["partition_sets"]
    # 1. every PRB is the union of the partition sets that name it; its profile is theirs
    by_prb: dict[int, list[dict]] = {}
    for s in sets:
        assert set(s["values"]) == set(st["partition_variables"])
        if s["prb"] >= 0:
            by_prb.setdefault(s["prb"], []).append(s)
        else:
            assert not s["profile"]                 # no sensitive cell, no PRB
    assert sorted(by_prb) == list(range(len(st["prbs"])))
    for prb in st["prbs"]:
        members = by_prb[prb["prb"]]
        assert [m["id"] for m in members] == prb["partition_sets"]
        prof: dict[str, int] = {}
        for m in members:
            for t, c in m["profile"].items():
                assert 1 <= int(t) <= st["t_max"] and int(t) * st["xi"] < 1
                prof[t] = prof.get(t, 0) + c
        assert prof == prb["profile"]
        assert sum(prof.values()) == prb["k"]
        assert prb["merged"] == (len(members) > 1)
        # 2. theta: the theorem's where k >= kmin and it certifies, else calibrated (lower)
        if prb["action"].endswith("theorem"):
            assert prb["theta"] == st["theta"] and prb["k"] >= st["kmin"]
        # 3. the exact max risk, recomputed independently, and <= xi
        risk = _risk_terms({int(t): c for t, c in prof.items()}, prb["theta"])
        assert risk == pytest.approx(prb["max_risk"], rel=1e-9, abs=1e-12)
        assert risk <= st["xi"] + 1e-12
    # 4. every merged PRB is listed with its members
    assert [m["prb"] for m in st["merges"]] == [p["prb"] for p in st["prbs"] if p["merged"]]
    for m in st["merges"]:
        assert m["labels"] == [sets[i]["label"] for i in m["partition_sets"]]
    # 5. the certificate: max over PRBs and over non-sensitive cells (1 / t)
    ns = st["non_sensitive"]
    cert = max([p["max_risk"] for p in st["prbs"]]
               + ([1.0 / ns["min_t"]] if ns["min_t"] else []))
    assert cert == pytest.approx(audit["risk"]["certificate"], rel=1e-12)
    assert audit["risk"]["certificate"] == result.certificate
    # ... and it equals the release: PRBs, members, thetas, risks, record counts
    blocks = result.blocks
    assert len(blocks) == len(st["prbs"])
    for prb, (_, b) in zip(st["prbs"], blocks.iterrows(), strict=True):
        assert b["partition_key"] == " + ".join(sets[i]["label"] for i in prb["partition_sets"])
        assert (b["k"], b["theta"], b["max_risk"]) == (prb["k"], prb["theta"], prb["max_risk"])
        assert b["n_records"] == sum(int(t) * c for t, c in prb["profile"].items())
    assert sum(s["n_records"] for s in sets) == len(result.frame)


def test_calibrated_prbs_rebuilt_too(tmp_path):
    audit, _ = _audit(tmp_path, theta="calibrated")
    st = audit["prb_structure"]
    for prb in st["prbs"]:
        risk = _risk_terms({int(t): c for t, c in prb["profile"].items()}, prb["theta"])
        assert risk == pytest.approx(prb["max_risk"], rel=1e-9, abs=1e-12)


def test_prb_structure_holds_no_record_level_data(tmp_path):
    audit, result = _audit(tmp_path)
    text = json.dumps(audit["prb_structure"])
    assert "pid" not in text and "income" not in text
    assert len(audit["prb_structure"]["partition_sets"]) == len(result.partition_sets)


def test_partition_sets_recounted_from_the_source_file_and_audit_json(tmp_path):
    """The other half of an independent audit: from the source file and audit.json (its
    config copy and prb_structure) alone, put every record into its partition set by the
    config's rules, count the cells, and get every partition set's records and profile of
    sensitive cells (t * xi < 1) as recorded. pandas group-bys only, no sdc code."""
    audit, _ = _audit(tmp_path)
    st = audit["prb_structure"]
    cfg = yaml.safe_load(audit["config"]["text"])
    frame = pd.read_parquet(cfg["input"]["path"])
    keys = list(cfg["key_variables"])
    labels = {}
    for var, rule in cfg["partition"].items():
        if rule == "as_is":
            labels[var] = frame[var].astype(str)
        else:  # bands: the band's lower edge, matched with the label's leading number
            edges = np.asarray(rule["bands"])
            labels[var] = pd.Series(edges[np.searchsorted(edges, frame[var], "right") - 1])
    # the partition labels are functions of the keys: grouping by both gives the cells
    part_cols = [f"_{v}" for v in st["partition_variables"]]
    records = frame[keys].assign(**{f"_{v}": labels[v].to_numpy() for v in labels})
    cells = records.groupby(keys + part_cols).size().rename("t").reset_index()
    xi = cfg["risk"]["xi"]
    recounted = {}
    for key, g in cells.groupby(part_cols):
        sens = g["t"][g["t"] * xi < 1]
        recounted[tuple(str(k) for k in key)] = (
            int(g["t"].sum()), {str(t): int(c) for t, c in sens.value_counts().sort_index().items()})

    def norm(var: str, label: str) -> str:
        rule = cfg["partition"][var]
        return label if rule == "as_is" else str(int(label.split("-")[0].rstrip("+")))

    recorded = {tuple(norm(v, s["values"][v]) for v in st["partition_variables"]):
                (s["n_records"], s["profile"]) for s in st["partition_sets"]}
    assert recorded == recounted
