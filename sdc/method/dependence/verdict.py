"""The dependence check's verdict: the refusal (exit 2) naming every failing column and its
fixes."""

from __future__ import annotations

from typing import Any

from sdc.errors import InputError
from sdc.method.dependence.measure import ColumnDependence
from sdc.method.dependence.members import PERSON_LEVEL

#: ``ColumnDependence.via`` of a column rebuilt from released ones
#: (:mod:`sdc.method.dependence.rebuild`)
REBUILT = "rebuilt"

__all__ = ["DependenceError", "dependence_error", "raise_if_dependent", "visible_error",
           "visibly_moved"]


class DependenceError(InputError):
    """A released non-key column gives the original key values away (exit 2)."""

    def __init__(self, message: str, figures: list[ColumnDependence]) -> None:
        super().__init__(message)
        self.figures = figures

    def to_drop(self, dropped: list[str] | tuple[str, ...] = ()) -> list[str]:
        """The input columns whose drop fixes each failing figure: a column's own name; for
        a pair or a rebuilt column (``of``: the dropped column and what rebuilds it), the
        second column of it, none when a column of the pair (the rebuilding column) is
        ``dropped`` or named here already (a pair's name, ``a - b``, is no column)."""
        out: list[str] = []
        for f in self.figures:
            if not f.flagged:
                continue
            if f.of:
                if any(c in dropped or c in out for c in f.of[f.via == REBUILT:]):
                    continue
                col = f.of[1]
            else:
                col = f.column
            if col not in out:
                out.append(col)
        return out


def visibly_moved(figures: list[ColumnDependence]) -> list[ColumnDependence]:
    """The passing columns that show which records moved (``ColumnDependence.visible``)."""
    return [f for f in figures if f.visibly_moved and not f.flagged]


def visible_error(figures: list[ColumnDependence], config: Any) -> str | None:
    """``risk.dependence: strict``: the refusal message when a column shows moved records."""
    shown = visibly_moved(figures)
    if getattr(config.risk, "dependence", "report") != "strict" or not shown:
        return None
    lines = [
        f"- {f.column!r} pins the original value of {', '.join(sorted(f.visible))} for "
        f"{', '.join(f'{f.visible[k]:.2%}' for k in sorted(f.visible))} of the records that "
        "may move (a copy or a finer grain of the key): a moved record's value points to "
        "another key value than the one released with it (its identification risk stays "
        f"<= xi: figure {f.figure:.3f})" for f in shown]
    names = ", ".join(f.column for f in shown)
    return (f"{len(shown)} released non-key column(s) show which records moved, and "
            "`risk.dependence: strict` refuses that; nothing was released:\n" + "\n".join(lines)
            + f"\nFix each column in one of these ways: list it under `derived: [{names}]` "
            "(recomputed from the released key values, when it is a function of them), drop it "
            f"(`input.drop: [{names}]`), recode it in the input to the key's released grain, "
            "make it a key variable, or accept it with `risk.dependence: report` (the "
            "codebook then says so). See docs/METHOD.md, 'Columns that show moved records'.")


def dependence_error(figures: list[ColumnDependence], plan: Any, config: Any) -> str | None:
    """The refusal message when some column fails (or, under ``risk.dependence: strict``,
    shows moved records), else None."""
    bad = [f for f in figures if f.flagged]
    if not bad:
        return visible_error(figures, config)
    xi = plan.partitioned.xi
    lines = []
    for f in bad:
        keys = sorted(f.revealed, key=lambda k: -f.revealed[k])
        shown = [k for k in keys if f.revealed[k] >= 0.05] or keys[:1]
        where = (str(plan.blocks["partition_key"].iat[f.prb])
                 if 0 <= f.prb < len(plan.blocks) else "")
        how = (f"an intruder computes {f.relation}, which narrows" if f.relation else
               "its value narrows" if f.via == "values" else
               f"together, {f.of[0]} and {f.of[1]} (neither alone) narrow" if f.of else
               "taken in order, its values fall into runs that each hold one value of the key "
               "(a finer grain, a prefix code), which narrows")
        if f.via == REBUILT:
            lines.append(
                f"- {f.column!r} is not released as it is, but released columns rebuild it: "
                f"{f.relation}. Rebuilt, its value narrows "
                f"{', '.join(f'{k} for {f.revealed[k]:.0%}' for k in shown) or 'no key'} of the "
                "households that may move: an intruder who rebuilds it and keeps the released "
                f"households whose {f.column} agrees with a target's keys picks the target with "
                f"probability {f.figure:.3f} against xi = {xi} ({f.baseline:.3f} without it; "
                f"household PRB {f.prb}: {where}; {f.mean_figure:.3f} on average over every "
                "household that may move)")
            continue
        if f.level == PERSON_LEVEL:
            how = ("one member per household, " + how if not f.of else how)
            lines.append(
                f"- {f.column!r} (a person column) reveals the original household key(s) "
                f"{', '.join(shown) or ''} ({how} {', '.join(f'{k} for {f.revealed[k]:.0%}' for k in shown)} "
                f"of the households that may move): an intruder who knows a target household's "
                f"keys and keeps the released households whose members' {f.column} agrees "
                f"with them picks the target with probability {f.figure:.3f} against xi = {xi} "
                f"({f.baseline:.3f} without the column; household PRB {f.prb}: {where}; "
                f"{f.mean_figure:.3f} on average over every household that may move)")
            continue
        if f.finer and not f.level:
            keys = ", ".join(f.finer)
            lines.append(
                f"- {f.column!r} holds {keys} at a finer grain than released (several of its "
                f"values within one released value of {keys}: a copy of the key as collected, "
                "a finer band, a date): an intruder who knows a target's "
                f"{keys} as collected matches on {f.column} and the recoding of {keys} no "
                "longer protects anyone; moved records also show their original value "
                f"(filter intruder at the released grain: {f.figure:.3f} against xi = {xi}). "
                f"Also fixed by recoding {f.column} in the input to the released grain of {keys}")
            continue
        lines.append(
            f"- {f.column!r} reveals the original value(s) of {', '.join(shown) or 'the keys'} "
            f"({how} {', '.join(f'{k} for {f.revealed[k]:.0%}' for k in shown)} of "
            f"the records that may move): an intruder who knows a target's key values and keeps "
            f"the released records whose {f.column} agrees with them picks the target with "
            f"probability {f.figure:.3f} against xi = {xi} ({f.baseline:.3f} without the "
            f"column; PRB {f.prb}: {where}; {f.mean_figure:.3f} on average over every record "
            f"that may move)")
    weight = getattr(config.input, "weight", None)
    names = [f.column for f in bad if f.column != weight and not f.of and not f.level]
    rebuilt = [f for f in bad if f.via == REBUILT]
    pairs = [f for f in bad if f.of and f.via != REBUILT]
    members = [f.column for f in bad if f.level == PERSON_LEVEL and not f.of]
    fixes = []
    if members:
        fixes.append(
            "\nFix each person column that gives a household key away (" + ", ".join(members)
            + ") in one of these ways: drop it (`input.drop: [" + ", ".join(members) + "]`); "
            "when it has one value per household, list it in `input.household_columns` and "
            "under `derived:` (recomputed from the household's released household keys); "
            "coarsen it in the input (into groups the household keys do not determine); or "
            "keep the household key(s) it reveals as is (`partition: {KEY: as_is}`: "
            "households leave their values only through small household PRBs merged across "
            "them, which this check reports again). Making it a person key does not help: "
            "person keys move only inside the household keys' values.")
    if names:
        fixes.append(
            "\nFix each column in one of three ways: list it under `derived: ["
            + ", ".join(names) + "]` (recomputed from the released key values through the "
            "mapping observed in the input; refused when the column is not a function of the "
            "keys), drop it (`input.drop: [" + ", ".join(names) + "]`), or make it a key "
            "variable.")
    if pairs:
        fixes.append(
            "\nFix each pair (" + "; ".join(f.column for f in pairs) + ") by dropping one of its "
            "two columns (e.g. `input.drop: [" + ", ".join(dict.fromkeys(f.of[1] for f in pairs))
            + "]`), making one of them a key variable, or listing one under `derived:` when it "
            "is a function of the keys.")
    if rebuilt:
        fixes.append(
            "\nFix each rebuilt column (" + ", ".join(f.column for f in rebuilt) + ") by "
            "breaking its relation: drop the released column named with it (`input.drop: ["
            + ", ".join(dict.fromkeys(f.of[1] for f in rebuilt)) + "]`; for a sum, any of its "
            "terms), or make the rebuilt column a key variable (it is then released "
            "post-randomized and certified); docs/METHOD.md, 'Columns rebuilt from released "
            "ones'.")
    if weight in {f.column for f in bad if not f.level and f.via != REBUILT}:
        fixes.append(
            f"\nThe survey weight {weight!r} (weights constant within strata of a key) cannot be "
            "derived: (it would no longer weight its record). Fix: keep the key(s) it depends on "
            "as is (`partition: {KEY: as_is}`: records never leave them; small PRBs merged "
            "across them still move records, which this check reports again: coarsen the "
            f"other keys), or drop the weight (`input.drop: [{weight}]` and no "
            "`input.weight`).")
    return (
        f"{len(bad)} released non-key column(s) give the original key values away, so the "
        "certificate would not hold for the released file; nothing was released:\n"
        + "\n".join(lines) + "".join(fixes)
        + " See docs/METHOD.md, 'Dependence of non-key columns'.")


def raise_if_dependent(figures: list[ColumnDependence], plan: Any, config: Any) -> None:
    """Raise :class:`DependenceError` (exit 2) naming every failing column and the fixes."""
    msg = dependence_error(figures, plan, config)
    if msg is not None:
        raise DependenceError(msg, figures)


