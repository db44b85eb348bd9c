"""Fixtures of the reliability suite (issue 6).

Everything is written under ``tmp_path``; the shared census sample and the demo config are
read from the repository. ``prepared_census`` writes one census job (CSV input, int seed file,
output under a per-module temp folder) that the slow subprocess tests share.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CENSUS_CSV = REPO / "data_samples" / "census_sample.csv"
CENSUS_YAML = REPO / "configs" / "census_demo.yaml"
SDC_BIN = REPO / ".venv" / "bin" / "sdc"
