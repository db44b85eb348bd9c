"""Config layer: the release config model (:mod:`.model`, pydantic classes only) and its loader
(:mod:`.load`: YAML, paths, hierarchy files). Imports nothing of the engine."""

from sdc.config.load import format_validation_error, load_config, parse_config, read_hierarchy
from sdc.config.model import (
    AsIs,
    Bands,
    ConfigError,
    DPPerturb,
    EngineSpec,
    ExecutorSpec,
    Groups,
    Hierarchy,
    InputSpec,
    KeyVariable,
    OutputSpec,
    ReleaseConfig,
    RiskSpec,
    Schedule,
    SeedFile,
    check_xi,
)

__all__ = [
    "AsIs", "Bands", "ConfigError", "DPPerturb", "EngineSpec", "ExecutorSpec",
    "Groups", "Hierarchy", "InputSpec", "KeyVariable",
    "OutputSpec", "ReleaseConfig", "RiskSpec", "Schedule", "SeedFile", "check_xi",
    "format_validation_error", "load_config", "parse_config", "read_hierarchy",
]
