"""The expected duration of the slow tests, for ordering the work of ``make test``'s xdist
workers (tests/conftest.py: the longest groups start first, so that no long test starts last
and runs alone while the other workers idle).

``tests/durations.json`` maps a test's node id to its seconds in a full run (tests under one
second are left out and count as :data:`DEFAULT_SECONDS`). It only orders the work: a stale or
missing entry makes the run slower, never different. To refresh it after a full run with
``--junitxml=run.xml``::

    python tests/durations.py run.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")
#: the seconds of a test not in the table
DEFAULT_SECONDS = 0.5
#: tests shorter than this are left out of the table
MIN_SECONDS = 1.0


def load() -> dict[str, float]:
    """The table (empty when it is missing or unreadable)."""
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def from_junit(path: Path, root: Path) -> dict[str, float]:
    """Node id -> seconds (setup + call + teardown) of each test in a JUnit XML report."""
    out: dict[str, float] = {}
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        seconds = float(case.get("time") or 0)
        for cut in range(len(parts), 0, -1):  # the module is the longest prefix that is a file
            module = Path(*parts[:cut]).with_suffix(".py")
            if (root / module).is_file():
                nodeid = "::".join([module.as_posix(), *parts[cut:], case.get("name", "")])
                out[nodeid.split("@")[0]] = round(seconds, 1)
                break
    return out


if __name__ == "__main__":
    table = {k: v for k, v in sorted(from_junit(Path(sys.argv[1]), TABLE.parents[1]).items())
             if v >= MIN_SECONDS}
    TABLE.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{TABLE}: {len(table)} tests, {sum(table.values()):.0f} s")
