"""Randomized-response designs with a parity (privacy) level ``gamma = e^eps`` (Chai 2019
ch. 6-7): Warner and max-trace (:mod:`.max_trace`), t-subset and minimax (:mod:`.tsubset`),
RAPPOR and t-subset mixtures (:mod:`.rappor`). Transition matrices are ``m x k`` with
columns = true categories; a design with parity ``gamma`` is ``log(gamma)``-LDP
(:mod:`sdc.mechanisms.privacy`). docs/MECHANISMS.md s. 1-3.
"""

from . import max_trace, rappor, tsubset
from .max_trace import *  # noqa: F403
from .rappor import *  # noqa: F403
from .tsubset import *  # noqa: F403

__all__ = [*max_trace.__all__, *tsubset.__all__, *rappor.__all__]
