"""Weighted matchings of the near design (``risk.near: {kernel: matching, weights: [...]}``,
sdc.method.near; docs/METHOD.md 7.12; issue 44): W = sum_i w_i Q_i is exactly doubly
stochastic with w_i at the i-th matching's destination (the first the least-cost one); its
exact person- and household-level certificates equal the enumeration of every household's
outcome; the config refuses weights that are not a distribution or go with the band kernel;
the household design search offers the weighted variants of the preferred near candidate."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from test_near_matching import _stage, assert_matching_certifies_as_enumerated

from sdc.config.model import NearSpec
from sdc.method.near import matching_destinations, near_transition, record_cost

WEIGHTS = ([0.44, 0.44, 0.12], [0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1])


def _dense(tr, k: int) -> np.ndarray:
    w = np.zeros((k, k))
    indptr, indices, weights = tr.csr()
    np.add.at(w, (np.repeat(np.arange(k), np.diff(indptr)), indices), weights)
    return w


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("weights", WEIGHTS)
def test_weighted_matching_w_is_doubly_stochastic_with_its_weights(seed, weights):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(6, 40))
    codes, metrics = _stage(rng, k, int(rng.integers(3, 5)), 4, 3)
    t = rng.integers(1, 3, size=k)
    tr, info = near_transition(codes, np.zeros(k, np.uint64), t, 0.7, metrics,
                               NearSpec(kernel="matching", weights=weights))
    assert info["w"] == "near" and info["weights"] == weights
    w = _dense(tr, k)
    assert np.allclose(w.sum(axis=1), 1.0, atol=1e-15)
    assert np.allclose(w.sum(axis=0), 1.0, atol=1e-15)
    assert np.all(np.diag(w) == 0.0)
    # row j holds w_i at Q_i(j), Q_i the matchings of matching_destinations in order
    q = matching_destinations(record_cost(codes, metrics), len(weights))
    for i, x in enumerate(weights):
        assert np.allclose(w[np.arange(k), q[:, i]], x)
    assert tr.move == pytest.approx(0.7 / t)


def test_a_prb_too_small_for_the_weights_gets_the_uniform_w():
    rng = np.random.default_rng(3)
    codes, metrics = _stage(rng, 3, 3, 4, 2)
    tr, info = near_transition(codes, np.zeros(3, np.uint64), np.ones(3, np.int64), 0.7,
                               metrics, NearSpec(kernel="matching", weights=[0.4, 0.3, 0.3]))
    assert info["w"] == "uniform" and tr.uniform


@pytest.mark.parametrize("seed", range(8))
def test_weighted_matching_rows_certify_as_enumerated(seed):
    """The exact person-level and household-level figures of a weighted matching W equal the
    enumeration of every household's outcome (5 households of one size, one per cell)."""
    weights = [0.5, 0.3, 0.2] if seed % 2 else [0.44, 0.44, 0.12]
    assert_matching_certifies_as_enumerated(np.random.default_rng(500 + seed),
                                            NearSpec(kernel="matching", weights=weights))


@pytest.mark.parametrize("bad", [
    {"kernel": "matching", "weights": [0.5, 0.4]},          # sum 0.9
    {"kernel": "matching", "weights": [1.0]},               # one destination
    {"kernel": "matching", "weights": [0.6, 0.5, -0.1]},    # negative
    {"kernel": "band", "weights": [0.5, 0.5]},              # band kernel
    {"kernel": "matching", "weights": [0.5, 0.5], "matched": 2},
])
def test_the_config_refuses_weights_that_are_not_a_distribution(bad):
    with pytest.raises(ValidationError, match="near.weights"):
        NearSpec(**bad)


def test_the_design_search_offers_the_weighted_variants_of_the_preferred_near_candidate():
    from types import SimpleNamespace

    from sdc.authoring.household_recommend import NEAR_WEIGHTS, weighted_near_data

    def cand(share, bands, near=True):
        return SimpleNamespace(
            status="planned", share_changed=share, class_shift=float("nan"),
            recoding={"age": {"recode": {"bands": list(range(bands))},
                              "released_values": bands}},
            data={"risk": {"destinations": "near"} if near else {}})

    five, two, uniform = cand(0.2, 5), cand(0.09, 2), cand(0.05, 5, near=False)
    out = weighted_near_data([five, two, uniform], {"kernel": "matching"})
    # `five` changes more than TARGET (15%): the preferred within TARGET is `two`, the
    # preferred overall (most age classes first) `five`; the uniform one gets none
    assert [r for _, r in out] == [two.recoding] * len(NEAR_WEIGHTS) + \
        [five.recoding] * len(NEAR_WEIGHTS)
    assert [d["risk"]["near"]["weights"] for d, _ in out[:len(NEAR_WEIGHTS)]] == \
        [list(w) for w, _ in NEAR_WEIGHTS]
    # each a ladder: the flatter vectors a PRB the dependence check flags falls back to
    assert [d["risk"]["near"]["fallback_weights"] for d, _ in out[:len(NEAR_WEIGHTS)]] == \
        [[list(f) for f in fb] for _, fb in NEAR_WEIGHTS]
    for d, _ in out:  # a config sdc release accepts
        NearSpec(**d["risk"]["near"])
    assert all(d["risk"]["near"]["kernel"] == "matching" for d, _ in out)
