"""R laeken's synthetic EU-SILC (Debian r-cran-laeken: 14,827 persons in 6,000 households),
exported by Rscript into the test's temporary folder when laeken is installed (never copied
into the project); else the test skips: a test module's fixture calls
:func:`export_eusilc`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def export_eusilc(tmp_path_factory) -> Path:
    """The file exported by Rscript (skips the test without R's laeken)."""
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not found: install r-cran-laeken (R's laeken ships the synthetic "
                    "EU-SILC) to run this test")
    out = tmp_path_factory.mktemp("eusilc") / "eusilc.csv"
    r = subprocess.run(["Rscript", "-e", "suppressMessages(library(laeken)); data(eusilc); "
                        f"write.csv(eusilc, '{out}', row.names=FALSE)"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not out.is_file():
        pytest.skip(f"R's laeken is not installed (Rscript: {r.stderr.strip()[:200]}); "
                    "apt-get install r-cran-laeken to run this test")
    return out
