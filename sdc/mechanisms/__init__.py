"""Randomized-response and PRAM mechanisms with provable privacy (METHOD.md section 7.8).

Pure numpy/scipy. One module per idea:

* :mod:`.privacy` - parity, eps-LDP, beta-factor, rho1-to-rho2, (h_l, h_u)-SIP, admissibility
  (Chai 2019 ch. 3-5; Nayak 2020 sections 3-4).
* :mod:`.designs` - Warner, max-trace, t-subset, minimax design and estimator, RAPPOR
  (Chai 2019 ch. 6-7).
* :mod:`.kronecker` - iterated bisymmetric bit randomizers (Kronecker paper, 2018).
* :mod:`.dp_pram` - PRAM with maximal mutual information under eps-DP (Ayed, Battiston &
  Camerlenghi).
* :mod:`.binary_dp` - optimal (eps, delta)-DP binary randomized response (Holohan, Leith &
  Mason 2017).

Matrix convention: unless a docstring says otherwise (form 8 of Ayed et al. and the design
matrix of Holohan et al. are kept in their papers' row orientation), transition matrices have
**columns = true categories** and rows = outputs.
"""

from .binary_dp import (
    BinaryRRDesign,
    g_threshold,
    in_feasible_region,
    optimal_eps_delta_designs,
    optimal_eps_design,
    optimal_warner_design,
    rr_mle,
    rr_mle_variance,
    t0_threshold,
)
from .designs import (
    MinimaxDesign,
    estimate_max_trace,
    estimate_mixture,
    estimate_rappor_empirical,
    estimate_tsubset,
    max_trace_bound,
    max_trace_design,
    max_trace_risk,
    minimax_design,
    minimax_f,
    minimax_q,
    minimax_risk,
    mixture_risk,
    modified_rappor_matrix,
    modified_rappor_weights,
    rappor_empirical_risk,
    rappor_flip_probability,
    rappor_matrix,
    rappor_mixture_weights,
    sample_max_trace,
    sample_modified_rappor,
    sample_rappor,
    sample_tsubset,
    tsubset_constants,
    tsubset_covariance,
    tsubset_matrix,
    warner_design,
)
from .dp_pram import (
    DPPramResult,
    apply_dp_pram,
    dp_pram,
    estimate_proportions,
    is_dp_feasible,
    mutual_information,
    pram_matrix,
    proposition_3_2_holds,
    vertex_values,
)
from .kronecker import (
    apply_kron_power,
    bit_randomizer,
    estimate_marginal,
    kron_epsilon,
    kron_estimator_trace_covariance,
    kron_power,
    randomize_bits,
    simmons_unrelated_bit_parameter,
    warner_bit_parameter,
)
from .privacy import (
    has_proportional_rows,
    is_admissible,
    is_beta_factor_private,
    is_eps_ldp,
    is_rho1_rho2_private,
    is_sip,
    ldp_epsilon,
    parity,
    privacy_demand,
    rho_to_gamma,
    row_parity,
)

__all__ = [
    # privacy
    "row_parity",
    "parity",
    "ldp_epsilon",
    "is_eps_ldp",
    "is_beta_factor_private",
    "rho_to_gamma",
    "is_rho1_rho2_private",
    "privacy_demand",
    "is_sip",
    "is_admissible",
    "has_proportional_rows",
    # designs
    "warner_design",
    "max_trace_design",
    "max_trace_bound",
    "max_trace_risk",
    "sample_max_trace",
    "estimate_max_trace",
    "minimax_f",
    "minimax_q",
    "minimax_risk",
    "minimax_design",
    "MinimaxDesign",
    "tsubset_matrix",
    "sample_tsubset",
    "tsubset_constants",
    "estimate_tsubset",
    "tsubset_covariance",
    "rappor_flip_probability",
    "sample_rappor",
    "rappor_matrix",
    "rappor_mixture_weights",
    "modified_rappor_weights",
    "modified_rappor_matrix",
    "sample_modified_rappor",
    "estimate_mixture",
    "mixture_risk",
    "estimate_rappor_empirical",
    "rappor_empirical_risk",
    # kronecker
    "bit_randomizer",
    "kron_power",
    "apply_kron_power",
    "randomize_bits",
    "estimate_marginal",
    "kron_estimator_trace_covariance",
    "kron_epsilon",
    "warner_bit_parameter",
    "simmons_unrelated_bit_parameter",
    # dp-pram
    "dp_pram",
    "DPPramResult",
    "apply_dp_pram",
    "estimate_proportions",
    "mutual_information",
    "pram_matrix",
    "vertex_values",
    "proposition_3_2_holds",
    "is_dp_feasible",
    # binary dp
    "BinaryRRDesign",
    "in_feasible_region",
    "rr_mle",
    "rr_mle_variance",
    "optimal_eps_design",
    "g_threshold",
    "t0_threshold",
    "optimal_eps_delta_designs",
    "optimal_warner_design",
]
