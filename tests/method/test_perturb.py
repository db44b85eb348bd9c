"""DP-PRAM of non-key variables inside release_frame (the config's ``perturb:``)."""

import numpy as np
import pandas as pd
import pytest
import yaml
from engine_configs import REPO

import sdc
from sdc.mechanisms import dp_pram, is_eps_ldp

CATS = ["<10k", "10-30k", "30-60k", "60k+"]


@pytest.fixture(scope="module")
def census_with_class():
    d = yaml.safe_load((REPO / "configs" / "census_demo.yaml").read_text())
    f = pd.read_csv(REPO / "data_samples" / "census_sample.csv")
    f["income_class"] = pd.cut(f["income"], [-1, 10_000, 30_000, 60_000, 10**9],
                               labels=CATS).astype(str)
    return d, f


def _cfg(d, **spec):
    d = dict(d, perturb={"income_class": {"epsilon": 1.0, "categories": CATS, **spec}})
    return sdc.parse_config(d, base_dir=REPO / "configs")


@pytest.fixture(scope="module")
def dp_seed3(census_with_class):
    """The demo with income_class perturbed, released with seed 3: read by the marginal test
    and compared with the plain release by the untouched-columns test (read only)."""
    d, f = census_with_class
    return sdc.release_frame(f, _cfg(d), seed=3)


def test_released_marginal_matches_design_and_estimator_is_unbiased(census_with_class,
                                                                     dp_seed3):
    d, f = census_with_class
    res = dp_seed3
    (dp,) = res.dp_perturbations
    assert dp.proportions_source == "input" and dp.epsilon == 1.0
    p = f["income_class"].value_counts(normalize=True).reindex(CATS).to_numpy()
    design = dp_pram(p, 1.0)
    assert is_eps_ldp(design.transition_matrix, 1.0)
    n = len(f)
    m = design.released_marginal
    observed = res.frame["income_class"].value_counts(normalize=True).reindex(CATS).to_numpy()
    # each released value is an independent draw given the true one: the released share of
    # category z is a mean of n independent Bernoullis with mean m_z and total variance at
    # most n m_z (1 - m_z) -> SE <= sqrt(m (1-m) / n); 4-SE band.
    assert np.all(np.abs(observed - m) <= 4 * np.sqrt(m * (1 - m) / n))
    codes = pd.Index(CATS).get_indexer(res.frame["income_class"])
    est = design.estimate(codes, project=False)
    # est_x = sum_z A[z, x] obs_z with A = M^-1, so sd(est_x) <= sum_z |A[z, x]| sd(obs_z)
    # <= S * max|A| * sqrt(1/(4n)) (sd of a share is at most 1/(2 sqrt n)); 4-SD band.
    amp = np.abs(np.linalg.inv(design.matrix)).max()
    assert np.all(np.abs(est - p) <= 4 * len(CATS) * amp * np.sqrt(0.25 / n))


def test_key_variables_and_other_columns_are_untouched_by_dp(census_with_class, dp_seed3):
    d, f = census_with_class
    plain = sdc.release_frame(f, sdc.parse_config(d, base_dir=REPO / "configs"), seed=3)
    with_dp = dp_seed3
    pd.testing.assert_frame_equal(plain.frame.drop(columns=["income_class"]),
                                  with_dp.frame.drop(columns=["income_class"]))
    assert with_dp.dp_perturbations[0].changed > 0


def test_dp_outcome_does_not_depend_on_row_order(census_with_class):
    d, f = census_with_class
    cfg = _cfg(d)
    a = sdc.release_frame(f, cfg, seed=9).frame.set_index("person_id").sort_index()
    s = f.sample(frac=1.0, random_state=1).reset_index(drop=True)
    b = sdc.release_frame(s, cfg, seed=9).frame.set_index("person_id").sort_index()
    pd.testing.assert_frame_equal(a, b)


def test_public_proportions_publish_the_design(census_with_class):
    d, f = census_with_class
    res = sdc.release_frame(f, _cfg(d, proportions=[0.25, 0.25, 0.25, 0.25]), seed=1)
    summary = res.dp_perturbations[0].public_summary()
    assert "keep_probabilities" in summary
    hidden = sdc.release_frame(f, _cfg(d), seed=1).dp_perturbations[0].public_summary()
    assert "keep_probabilities" not in hidden


def test_bad_perturb_inputs_are_clear(census_with_class):
    d, f = census_with_class
    with pytest.raises(sdc.ConfigError, match="perturb.sex.*key variable"):
        sdc.parse_config(dict(d, perturb={"sex": {"epsilon": 1, "categories": [1, 2]}}),
                         base_dir=REPO / "configs")
    with pytest.raises(sdc.ConfigError, match="epsilon"):
        sdc.parse_config(dict(d, perturb={"income_class": {"epsilon": 0}}), base_dir=REPO)
    g = f.copy()
    g.loc[[0, 5], "income_class"] = "unknown"
    with pytest.raises(sdc.InputError, match=r"'income_class': 2 row\(s\).*unknown.*rows 1, 6"):
        sdc.release_frame(g, _cfg(d), seed=1)


@pytest.mark.parametrize("p", [[0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1], [0.7, 0.1, 0.1, 0.05, 0.05],
                               [0.25] * 4])
@pytest.mark.parametrize("eps", [0.3, 1.0, 2.0, 4.0])
def test_dp_pram_design_is_eps_dp_exactly(p, eps):
    """No tolerance: the released design's parity must not exceed e^eps even by 1e-10."""
    from sdc.mechanisms import parity

    design = dp_pram(p, eps)
    assert parity(design.transition_matrix) <= np.exp(eps)
