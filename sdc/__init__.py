"""sdc: identification-risk-controlled microdata release with the Nayak-Zhang-You unbiased PRAM.

Public API::

    cfg = sdc.load_config("configs/census_demo.yaml")
    result = sdc.release_frame(frame, cfg, seed=12345)
    result.frame, result.blocks, result.certificate

See ``docs/METHOD.md`` for the method and the README for the config reference.
"""

from sdc.config.load import load_config, parse_config
from sdc.config.model import ConfigError, ReleaseConfig
from sdc.engine.apply import ReleaseResult, apply_plan, release_frame
from sdc.engine.partition import Partitioned, partition_frame
from sdc.engine.plan import ReleasePlan, plan_release
from sdc.engine.risk import calibrate_theta, correct_match_risk, max_risk
from sdc.engine.theta import h, kmin, solve_theta
from sdc.errors import CertificationError, InputError, SmallBlockError

__version__ = "0.1.0"

__all__ = [
    "CertificationError",
    "ConfigError",
    "InputError",
    "ReleaseConfig",
    "Partitioned",
    "ReleasePlan",
    "ReleaseResult",
    "apply_plan",
    "plan_release",
    "SmallBlockError",
    "__version__",
    "calibrate_theta",
    "correct_match_risk",
    "h",
    "kmin",
    "load_config",
    "max_risk",
    "parse_config",
    "partition_frame",
    "release_frame",
    "solve_theta",
]
