"""R laeken's synthetic EU-SILC (Debian r-cran-laeken: 14,827 persons in 6,000 households),
and laeken's other data sets (``ses``), exported by Rscript into the test's temporary folder
when laeken is installed (never copied into the project); else the test skips: a test module's
fixture calls :func:`export_eusilc` or :func:`export_laeken`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def export_laeken(tmp_path_factory, name: str) -> Path:
    """R laeken's data set ``name`` (``eusilc``, ``ses``) exported by Rscript into a temporary
    folder (skips the test without R's laeken)."""
    if shutil.which("Rscript") is None:
        pytest.skip(f"Rscript not found: install r-cran-laeken (R's laeken ships {name}) to run "
                    "this test")
    out = tmp_path_factory.mktemp(name) / f"{name}.csv"
    r = subprocess.run(["Rscript", "-e", f"suppressMessages(library(laeken)); data({name}); "
                        f"write.csv({name}, '{out}', row.names=FALSE)"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not out.is_file():
        pytest.skip(f"R's laeken is not installed (Rscript: {r.stderr.strip()[:200]}); "
                    "apt-get install r-cran-laeken to run this test")
    return out


def export_eusilc(tmp_path_factory) -> Path:
    """The synthetic EU-SILC exported by Rscript (skips the test without R's laeken)."""
    return export_laeken(tmp_path_factory, "eusilc")
