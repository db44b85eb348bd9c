"""sdc: identification-risk-controlled microdata release with the Nayak-Zhang-You unbiased PRAM.

Public API::

    cfg = sdc.load_config("configs/census_demo.yaml")
    frame = sdc.read_input(cfg)          # the release's own reader (key recodes applied)
    result = sdc.release_frame(frame, cfg, seed=12345)
    result.frame, result.blocks, result.certificate

See ``docs/METHOD.md`` for the method and the README for the config reference.
"""

from typing import TYPE_CHECKING

from sdc.errors import CertificationError, InputError, SmallBlockError

if TYPE_CHECKING:  # the names below are imported on first use (PEP 562 __getattr__)
    from sdc.config.load import load_config, parse_config
    from sdc.config.model import ConfigError, ReleaseConfig
    from sdc.executors.memory import release_frame
    from sdc.io.read import read_input
    from sdc.method.designs import plan_release
    from sdc.method.partition import Partitioned, partition_frame
    from sdc.method.plan import ReleasePlan
    from sdc.method.risk import calibrate_theta, correct_match_risk, max_risk
    from sdc.method.theta import h, kmin, solve_theta

#: where each lazily imported public name lives: ``import sdc`` (and therefore every
#: ``sdc.<module>``, e.g. the CLI's pre-flight) stays cheap; the engine (pandas, scipy) is
#: imported by the first use of an engine name
_LAZY = {
    "load_config": "sdc.config.load", "parse_config": "sdc.config.load",
    "ConfigError": "sdc.config.model", "ReleaseConfig": "sdc.config.model",
    "read_input": "sdc.io.read",
    "release_frame": "sdc.executors.memory",
    "Partitioned": "sdc.method.partition", "partition_frame": "sdc.method.partition",
    "ReleasePlan": "sdc.method.plan", "plan_release": "sdc.method.designs",
    "calibrate_theta": "sdc.method.risk", "correct_match_risk": "sdc.method.risk",
    "max_risk": "sdc.method.risk",
    "h": "sdc.method.theta", "kmin": "sdc.method.theta", "solve_theta": "sdc.method.theta",
}


def __getattr__(name: str):  # noqa: ANN202 - PEP 562
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sdc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "CertificationError",
    "ConfigError",
    "InputError",
    "ReleaseConfig",
    "Partitioned",
    "ReleasePlan",
    "plan_release",
    "read_input",
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
