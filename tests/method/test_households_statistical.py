"""The household-level certificate checked by Monte Carlo and by brute force.

The household stage is NZY on the household table: one unit per household, t_j counted in
households. Monte Carlo: many independent household PRBs in one release (one per region, each
with the same frequency profile; the draws are keyed by the household id, so different
households are independent) and three seeds; the intruder who knows a target household's keys
picks one household released in its cell uniformly, and the Rao-Blackwellized hit 1{B released
in its cell} / a, averaged over the replications with S = a, estimates R_j(a, t). Tolerance: 4
standard errors, SE = sqrt(p (1 - p) / n_a) / a with p = a R_j(a, t) the exact hit
probability (a two-sided 4-sigma band has false-alarm probability ~6e-5 per comparison).
Brute force: every outcome of a tiny household file enumerated.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc import correct_match_risk, solve_theta

XI = 0.395
# per region: dwellings 1-4 one household each (t = 1), dwelling 5 two households (t = 2):
# household profile {1: 4, 2: 1}, k = 5 = kmin at xi = 0.395
PER_REGION = [1, 2, 3, 4, 5, 5]
PROFILE = {1: 4, 2: 1}


def _config(n_regions):
    return sdc.parse_config({
        "name": "mc",
        "input": {"path": "x.csv", "household_id": "hid"},
        "key_variables": {"region": {"range": [1, n_regions], "level": "household"},
                          "dwelling": {"range": [1, 6], "level": "household"},
                          "sex": {"categories": [1, 2]}},
        "partition": {"region": "as_is"},
        "risk": {"households": "warn", "xi": XI},
        "seed": 1,
    })


def _file(n_regions, members=3):
    n_h = n_regions * len(PER_REGION)
    region = np.repeat(np.arange(1, n_regions + 1), len(PER_REGION))
    dwelling = np.tile(PER_REGION, n_regions)
    size = np.full(n_h, members) if np.isscalar(members) else np.asarray(members)
    hid = np.repeat(np.arange(n_h), size)
    return pd.DataFrame({"hid": hid, "region": region[hid], "dwelling": dwelling[hid],
                         "sex": 1})


N_REGIONS = 2000


@pytest.fixture(scope="module")
def released_dwellings() -> list[np.ndarray]:
    """The released dwelling of every household (regions x PER_REGION) of the 2,000-region
    file under seeds 101, 202 and 303, each release's certificate checked <= xi: released once
    for both targets (the same three releases; ~3.5 CPU s)."""
    cfg = _config(N_REGIONS)
    f = _file(N_REGIONS)
    out = []
    for seed in (101, 202, 303):
        r = sdc.release_frame(f, cfg, seed)
        assert r.households.certificate <= XI + 1e-12
        # the household table released, one row per household (order of first appearance)
        hf = r.frame.groupby(cfg.input.household_id, sort=False).first()
        out.append(hf["dwelling"].to_numpy().reshape(N_REGIONS, len(PER_REGION)))
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("target,t", [(0, 1), (4, 2)])  # a singleton and a doubleton household
def test_household_certificate_by_monte_carlo(target, t, released_dwellings):
    theta = solve_theta(XI)
    hits: dict[int, list[float]] = {}
    for rel in released_dwellings:
        own = PER_REGION[target]
        s = (rel == own).sum(axis=1)                 # households released in the cell
        b_in = rel[:, target] == own                 # target released in its own cell
        for a in np.unique(s[s > 0]):
            hits.setdefault(int(a), []).extend((b_in[s == a] / a).tolist())
    exact = correct_match_risk(PROFILE, t, theta, a_max=max(hits))
    checked = 0
    for a, v in hits.items():
        if len(v) < 200:
            continue
        r_exact = float(exact[a - 1])
        p = r_exact * a
        se = np.sqrt(p * (1 - p) / len(v)) / a
        assert abs(np.mean(v) - r_exact) <= 4 * se + 1e-12, (a, np.mean(v), r_exact, se)
        assert r_exact <= XI + 1e-12
        checked += 1
    assert checked >= 1


def _brute_force_max_risk(t_cells, theta):
    """max over target cell j, picked cell z and a of P(B released in z | S_z = a) / a, by
    enumerating every outcome of every household (stay, or move to one of the k-1 others)."""
    k = len(t_cells)
    owners = np.repeat(np.arange(k), t_cells)
    n = owners.size
    probs = []
    for i in range(n):
        j = owners[i]
        p = np.full(k, theta / (t_cells[j] * (k - 1)))
        p[j] = 1 - theta / t_cells[j]
        probs.append(p)
    best = 0.0
    for target in range(n):
        num: dict[tuple[int, int], float] = {}
        den: dict[tuple[int, int], float] = {}
        for out in itertools.product(range(k), repeat=n):
            pr = float(np.prod([probs[i][out[i]] for i in range(n)]))
            counts = np.bincount(out, minlength=k)
            for z in range(k):
                a = int(counts[z])
                if a == 0:
                    continue
                den[(z, a)] = den.get((z, a), 0.0) + pr
                if out[target] == z:
                    num[(z, a)] = num.get((z, a), 0.0) + pr / a
        for key, d in den.items():
            if d > 1e-15:
                best = max(best, num.get(key, 0.0) / d)
    return best


def test_household_certificate_by_brute_force_on_a_tiny_file():
    """Households of 1 to 4 persons: t_j is counted in households (profile {1: 4, 2: 1}), not
    in persons, and the recorded household PRB risk equals the enumeration's maximum."""
    cfg = _config(1)
    f = _file(1, members=[4, 1, 3, 2, 2, 1])
    r = sdc.release_frame(f, cfg, 9)
    st = r.households
    blocks = st.result.blocks
    assert len(blocks) == 1 and blocks["profile"].iat[0] == "1:4, 2:1"
    theta = float(blocks["theta"].iat[0])
    brute = _brute_force_max_risk([1, 1, 1, 1, 2], theta)
    assert blocks["max_risk"].iat[0] == pytest.approx(brute, rel=1e-9)
    assert st.certificate == pytest.approx(brute, rel=1e-9)
    assert brute <= XI + 1e-12
    # members share their household's released values
    assert (r.frame.groupby("hid")["dwelling"].nunique() == 1).all()
