"""PRAM under differential privacy with maximal mutual information (Ayed, Battiston &
Camerlenghi): matrix form (8) and its eps-DP polytope (:mod:`.polytope`), vertex enumeration
(:mod:`.vertices`), the exact optimiser (:mod:`.search`), the design applied and inverted
(:mod:`.result`). docs/MECHANISMS.md s. 5.
"""

from .polytope import (
    count_vertex_values,
    dp_pram_constraints,
    is_dp_feasible,
    mutual_information,
    pram_epsilon,
    pram_matrix,
    proposition_3_2_bound,
    proposition_3_2_holds,
    released_marginal,
    vertex_values,
)
from .result import DPPramResult, apply_dp_pram, estimate_proportions, project_to_simplex
from .search import dp_pram
from .vertices import enumerate_vertices, proposition_3_2_vertices

__all__ = [
    "DPPramResult",
    "dp_pram",
    "pram_matrix",
    "released_marginal",
    "mutual_information",
    "vertex_values",
    "proposition_3_2_holds",
    "proposition_3_2_bound",
    "dp_pram_constraints",
    "is_dp_feasible",
    "pram_epsilon",
    "enumerate_vertices",
    "proposition_3_2_vertices",
    "count_vertex_values",
    "apply_dp_pram",
    "estimate_proportions",
    "project_to_simplex",
]

