"""laeken's `ses` (Debian r-cran-laeken: the Structure of Earnings Survey sample, 15,691
employees in 500 enterprises) released as a new user would (issue 44): ``sdc init
--household-id IDunit --weight weights``, ``sdc design -o``, ``sdc release``. The file is
exported by Rscript into the test's temporary folder when laeken is installed (never copied
into the project); else the test skips.

Enterprise keys location, NACE1, size (one value per enterprise); employee keys sex, age,
education. The done-when of issue 44 for a grouped file: at most 10% of the records changed, or
the recommended release without the group id (said so), every certificate exact and <= xi, the
weight and the earnings released. Not met (xfail, strict). The design search tries three
releases: ``protect`` (every enterprise's composition is unique: 83% would change, and the exact
person level is not computed for groups of 210); without the group id (the weight, one value
per enterprise, singles out 72 of the 489 enterprises of 2+ employees and the enterprise keys
41, so the groups could be put back together); and the threat model of large groups (two
stages, ``risk.large_groups: 9``: the group-level and person-given-group certificates exact,
0.3950 each, the weight recalibrated) whose exact composition certificate of the 143 groups of
at most 9 members is 1.0 (75 of them above xi: e.g. a one-employee group alone with its
employee's class in its enterprise keys, which neither stage moves). What the tool does is
checked by the second test: it refuses quickly and says why, naming the columns, their counts,
the costs and the small groups' figure."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
import yaml
from conftest import run_cli
from eusilc_helpers import export_laeken

KEYS = "location,NACE1,size,sex,age,education"


@pytest.fixture(scope="module")
def ses_init(tmp_path_factory):
    """``sdc init`` of ses, run once for both tests (what it prints and the draft's path)."""
    ses_csv = export_laeken(tmp_path_factory, "ses")
    base = tmp_path_factory.mktemp("ses-init")
    shutil.copy(ses_csv, base / "ses.csv")
    job = base / "job.yaml"
    r = run_cli("init", base / "ses.csv", "--household-id", "IDunit", "--weight", "weights",
                "--keys", KEYS, "-o", job)
    return r, job


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "no certified design for ses yet: protect changes 83% (every enterprise's composition is "
    "unique) and its exact person level is not computed for groups of 210; without the group "
    "id the weight (one value per enterprise) singles out 72 of 489 enterprises and the "
    "enterprise keys 41; the threat model of large groups (risk.large_groups: 9) certifies the "
    "group and person levels but the composition of 75 of the 143 groups of at most 9 members "
    "is found (exact certificate 1.0): small groups need the composition stage while large "
    "ones take the two stages (issue 44)"))
def test_ses_init_design_release(ses_init, tmp_path):
    r, job = ses_init
    assert r.exit_code == 0, r.text
    cfg = yaml.safe_load(job.read_text())
    grouped = cfg["input"].get("household_id") == "IDunit"
    if not grouped:
        assert "WITHOUT the group id" in r.text
    d = tmp_path / "d.yaml"
    r = run_cli("design", job, "-o", d, "--json")
    assert r.exit_code == 0, r.text
    rec = json.loads(r.stdout)["recommended"]
    assert rec is not None
    assert rec["without_group_id"] or rec["share_changed"] <= 0.10
    r = run_cli("release", d)
    assert r.exit_code == 0, r.text
    out = yaml.safe_load(d.read_text())["output"]["dir"]
    pub = pd.read_parquet(d.parent / out / "public" / "microdata.parquet")
    assert {"weights", "earnings", "earningsHour"} <= set(pub.columns)
    changed = int(re.search(r"records changed\s+([\d,]+)", r.text).group(1).replace(",", ""))
    assert rec["without_group_id"] or changed <= 0.10 * len(pub) * 1.2
    risk = json.loads((d.parent / out / "public" / "risk.json").read_text())
    assert risk["certificate"] <= risk["xi"] + 1e-9


@pytest.mark.slow
def test_ses_refusal_says_why_and_is_quick(ses_init):
    """What `sdc init` does on ses today: exit 2 naming, for the release without the group id,
    the columns with one value per enterprise, how many enterprises each singles out (the
    weight alone 72, the enterprise keys 41), and the cost of the fix (the weight dropped:
    no weighted estimates); for protect, the groups too large for the exact person level; for
    the threat model of large groups (one release in memory), its exact certificates and the
    small groups whose composition is found. The
    design search works on the enterprise table, so this takes seconds (before: stopped after
    40 minutes in the exact person-level certificate of 210-member groups)."""
    r, _ = ses_init
    assert r.exit_code == 2, r.text
    text = " ".join(r.text.split())
    assert "groups of up to 210 members" in text
    assert "the weight weights 72" in text
    assert "location x NACE1 x size single out 41" in text
    assert "no weighted estimates" in text
    assert "economicFinanc" in text  # dropped by the fix, named
    # the threat model of large groups: its exact figures, and why it is refused
    assert "the composition certificate of the 143 groups of at most 9 members is 1.0000" in text
    assert "covered by the group-level certificate 0.3950" in text
    assert "person-level certificate given the group keys 0.3950" in text
