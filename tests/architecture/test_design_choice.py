"""The transition design and the household design are chosen once (docs/ARCHITECTURE.md, issue
45 item 1): only the design registry (``sdc/method/designs``: :func:`design_of`) and the config
layer (``sdc/config``) read ``risk.weighted`` and ``risk.destinations``; every step after
planning reads ``plan.design``. ``weight_plan`` (the weighted mode applied by each caller after
planning) is gone. Likewise the household design's options (``risk.composition``,
``large_groups``, ``exposed_sizes``, ``member_bands``) are read by ``household_design_of`` and
the layers that write configs only; after planning the household stage's ``hs.design``. Checked
on the source with ``ast``, so a docstring or an error message naming the option is not a read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ("sdc", "flows") for p in (REPO / d).rglob("*.py"))
ALLOWED = ("sdc/method/designs/", "sdc/config/")
CHOICE = {"weighted", "destinations"}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _is_risk(node: ast.AST) -> bool:
    """``<anything>.risk`` (``config.risk``, ``cfg.risk``, ``self.config.risk``)."""
    return isinstance(node, ast.Attribute) and node.attr == "risk"


def _option_read(node: ast.AST, options: set[str]) -> str | None:
    """``node`` read as ``X.risk.<option>`` or ``getattr(X.risk, "<option>")`` (None: not)."""
    if isinstance(node, ast.Attribute) and node.attr in options and _is_risk(node.value):
        return f"line {node.lineno}: .risk.{node.attr}"
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
            and _is_risk(node.args[0]) and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in options):
        return f"line {node.lineno}: {node.func.id}(.risk, {node.args[1].value!r})"
    return None


def design_reads(source: str) -> list[str]:
    """Where ``source`` reads the config's choice of design: ``X.risk.weighted``,
    ``X.risk.destinations``, ``getattr(X.risk, "weighted")``, or names ``weight_plan``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if (read := _option_read(node, CHOICE)) is not None:
            bad.append(read)
        elif isinstance(node, ast.Name) and node.id == "weight_plan":
            bad.append(f"line {node.lineno}: weight_plan")
        elif isinstance(node, ast.Attribute) and node.attr == "weight_plan":
            bad.append(f"line {node.lineno}: .weight_plan")
        elif isinstance(node, ast.alias) and node.name == "weight_plan":
            bad.append("import of weight_plan")
        elif isinstance(node, ast.FunctionDef) and node.name == "weight_plan":
            bad.append(f"line {node.lineno}: def weight_plan")
    return bad


def test_the_check_finds_every_way_of_reading_the_choice() -> None:
    """The checker itself can fail: each form is found, a message naming the option is not."""
    src = ("a = config.risk.weighted\nb = self.cfg.risk.destinations == 'near'\n"
           "c = getattr(cfg.risk, 'weighted', False)\nfrom x import weight_plan\n"
           "d = m.weight_plan(p)\n"
           "e = 'set risk.weighted: false'\nf = config.risk.xi\n")
    assert len(design_reads(src)) == 5


# -- the household design (issue 45 item 1) ----------------------------------------------------

#: the household design's options: read only by ``household_design_of`` (sdc/method/designs),
#: the config layer and the layers that write and edit configs (sdc/authoring, sdc/cli)
HOUSEHOLD_CHOICE = {"composition", "large_groups", "exposed_sizes", "member_bands"}
HOUSEHOLD_ALLOWED = ("sdc/method/designs/", "sdc/config/", "sdc/authoring/", "sdc/cli/")
#: readers not converted yet (file -> why); empty: every reader after planning reads the design
HOUSEHOLD_NOT_YET: dict[str, str] = {}


def household_design_reads(source: str) -> list[str]:
    """Where ``source`` reads a household design option: ``X.risk.composition`` (and
    ``large_groups``, ``exposed_sizes``, ``member_bands``) or ``getattr(X.risk, "...")``."""
    reads = (_option_read(node, HOUSEHOLD_CHOICE) for node in ast.walk(ast.parse(source)))
    return [r for r in reads if r is not None]


def test_the_check_finds_every_way_of_reading_the_household_design() -> None:
    """The checker itself can fail: each form is found; a message naming the option, the
    design's own field (``hs.design.composition``) and another risk option are not."""
    src = ("a = config.risk.composition == 'protect'\nb = self.cfg.risk.large_groups\n"
           "c = getattr(cfg.risk, 'exposed_sizes', 'refuse')\nd = cfg.risk.member_bands or {}\n"
           "e = 'set risk.composition: protect'\nf = hs.design.composition\n"
           "g = config.risk.households\nh = hs.composition\n")
    assert len(household_design_reads(src)) == 4


#: (what is read, its reader, where it may be read, what to do instead)
RULES = {
    "design": (design_reads, ALLOWED,
               "the config's choice of design: ask sdc.method.designs.design_of(config) or read "
               "plan.design"),
    "household": (household_design_reads, HOUSEHOLD_ALLOWED,
                  "the household design's options: ask sdc.method.designs.household_design_of"
                  "(config) when planning, else read the design the plan carries (hs.design, "
                  "result.households.design)"),
}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_only_the_registries_read_the_choice_of_design(path: Path, rule: str) -> None:
    """No read of ``risk.weighted`` / ``risk.destinations`` and no ``weight_plan`` outside
    ``sdc/method/designs`` and ``sdc/config`` (``design_of(config)`` picks the design, the plan
    carries it: ``plan.design``); no read of ``risk.composition`` / ``large_groups`` /
    ``exposed_sizes`` / ``member_bands`` outside ``sdc/method/designs``
    (``household_design_of``), ``sdc/config`` and the config writers (``sdc/authoring``,
    ``sdc/cli``): the household stage's plan carries that design (``hs.design``)."""
    reads, allowed, what = RULES[rule]
    rel = _rel(path)
    if rel.startswith(allowed) or (rule == "household" and rel in HOUSEHOLD_NOT_YET):
        return
    bad = reads(path.read_text(encoding="utf-8"))
    assert not bad, f"{rel} reads {what} ({'; '.join(bad)})"


def test_the_not_yet_list_only_names_readers() -> None:
    """The allow-list shrinks: a file on it that no longer reads an option comes off it."""
    for rel, _why in HOUSEHOLD_NOT_YET.items():
        assert household_design_reads((REPO / rel).read_text(encoding="utf-8")), rel
