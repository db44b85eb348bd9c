"""PRAM under differential privacy with maximal mutual information (Ayed, Battiston &
Camerlenghi): matrix form (8) and its eps-DP polytope (:mod:`.polytope`), vertex enumeration
(:mod:`.vertices`), the exact optimiser (:mod:`.search`), the design applied and inverted
(:mod:`.result`). docs/MECHANISMS.md s. 5.
"""

from . import polytope, result, search, vertices
from .polytope import *  # noqa: F403
from .result import *  # noqa: F403
from .search import *  # noqa: F403
from .vertices import *  # noqa: F403

__all__ = [*polytope.__all__, *vertices.__all__, *search.__all__, *result.__all__]
