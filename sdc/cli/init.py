"""``sdc init DATA --keys a,b,c``: draft a complete, commented release config from a data file.

The drafting itself is :mod:`sdc.authoring.draft` (it reads the data and runs the partition and
the engine to check the suggestion); this module parses the options, refuses to overwrite an
existing config without ``--force`` and writes the file atomically (temp file + rename).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

__all__ = ["make_init_command", "split_list"]


def split_list(text: str | None) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]`` (empty items dropped)."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _write_new(path: Path, text: str, force: bool, data: Path | None = None) -> None:
    """Refuse what must not be overwritten (sdc.io.guard: the data file always, any existing
    file without ``--force``), then write by temp file + rename."""
    from sdc.io.guard import refuse_overwrite, write_atomic

    refuse_overwrite(path, force=force, option="-o",
                     protected={"the data file": data} if data is not None else None)
    write_atomic(path, text)


def make_init_command(friendly_errors: Callable[[], AbstractContextManager[None]],
                      console: Console) -> Callable[..., None]:
    """The ``sdc init`` command, bound to the CLI's error handling and console (given by
    ``sdc.cli.main``, which this module does not import: no import cycle)."""

    def init_command(
        data: Annotated[Path, typer.Argument(help="The microdata file (CSV, Parquet, SPSS .sav, "
                                             "Stata .dta).", show_default=False)],
        keys: Annotated[str, typer.Option("--keys", help="Key variables, comma-separated: what an "
                                          "intruder can match on.", show_default=False)],
        id_column: Annotated[str | None, typer.Option("--id", help="Unique record id column "
                                                      "(never released).")] = None,
        drop: Annotated[str | None, typer.Option("--drop", help="Direct identifiers, "
                                                 "comma-separated (never released).")] = None,
        weight: Annotated[str | None, typer.Option("--weight", help="Survey weight column.")] = None,
        household_id: Annotated[str | None, typer.Option(
            "--household-id", help="Household file: the column grouping persons into "
            "households (keys with one value per household become household-level; the "
            "composition is checked and protected when needed).")] = None,
        members_sampled: Annotated[bool, typer.Option(
            "--members-sampled", help="Grouped file whose members are a SAMPLE of each group "
            "(employees sampled within enterprises): declares the composition intruder outside "
            "the threat model for every group (input.members: sampled; never for household "
            "surveys that interview the whole household; docs/HOUSEHOLDS.md).")] = False,
        output: Annotated[Path | None, typer.Option("-o", "--output", help="Config file to write "
                                                    "(default: ./<data name>.yaml).")] = None,
        name: Annotated[str | None, typer.Option("--name", help="Release job name (default: the "
                                                 "data file's name).")] = None,
        fmt: Annotated[str | None, typer.Option("--format", help="csv | parquet | sav | dta "
                                                "(default: from the suffix).")] = None,
        delimiter: Annotated[str, typer.Option("--delimiter", help="CSV delimiter.")] = ",",
        encoding: Annotated[str, typer.Option("--encoding", help="CSV encoding.")] = "utf-8",
        force: Annotated[bool, typer.Option("--force", help="Replace an existing config file.")]
        = False,
        analysis_keys: Annotated[str | None, typer.Option(
            "--analysis-keys", help="Keys the analyses need (comma-separated, among --keys): "
            "written with `importance: high` (the others normal); the draft's design step "
            "holds them and lets the other keys move (docs/DESIGN.md).")] = None,
    ) -> None:
        """Draft a commented release config from DATA (observed domains: review before release)."""
        with friendly_errors():
            key_list, drop_list = split_list(keys), split_list(drop)
            important = _analysis_keys(analysis_keys, key_list)
            if members_sampled and not household_id:
                from sdc.config.model import ConfigError

                raise ConfigError("--members-sampled needs --household-id (the column naming "
                                  "each member's group)")
            out = (output or Path(f"{Path(data).stem}.yaml")).expanduser()
            from sdc.io.guard import refuse_overwrite

            # refused before reading a large file: the data file always, an existing file
            # without --force
            refuse_overwrite(out, force=force, option="-o", protected={"the data file": data})
            frame, draft = _read_and_draft(
                console, data, out, key_list, fmt=fmt, delimiter=delimiter, encoding=encoding,
                id_column=id_column, drop=drop_list, weight=weight, name=name,
                household_id=household_id)
            if members_sampled:  # the user's declaration (docs/HOUSEHOLDS.md)
                draft.input["members"] = "sampled"
            for k in important:   # read by the design step (importance: docs/DESIGN.md)
                draft.keys[k].importance = "high"
            if household_id:  # judged as sdc release would; the household design if needed
                _finish_household_draft(console, frame, draft, data, out, key_list, force)
                return
            _finish_person_draft(console, frame, draft, data, out, key_list, important, force)

    return init_command


def _analysis_keys(analysis_keys: str | None, key_list: list[str]) -> list[str]:
    """The ``--analysis-keys`` list, each checked to be among ``--keys`` (exit 2 otherwise)."""
    important = split_list(analysis_keys)
    if [k for k in important if k not in key_list]:
        from sdc.config.model import ConfigError

        raise ConfigError(
            f"--analysis-keys {[k for k in important if k not in key_list]} not among "
            f"--keys {key_list}: give key variables (the keys whose released values "
            "the analyses need)")
    return important


def _read_and_draft(console: Console, data: Path, out: Path, key_list: list[str], *,
                    fmt: str | None, delimiter: str, encoding: str, id_column: str | None,
                    drop: list[str], weight: str | None, name: str | None,
                    household_id: str | None) -> tuple[Any, Any]:
    """Read DATA and build the draft (partition checked by the engine): ``(frame, draft)``."""
    from rich.markup import escape

    from sdc.authoring.draft import build_draft, read_for_draft

    with console.status(f"reading {escape(str(data))} and checking a partition"):
        frame, value_labels, variable_labels, resolved = read_for_draft(
            data, key_list, fmt=fmt, delimiter=delimiter, encoding=encoding,
            id_column=id_column, drop=drop, weight=weight, household_id=household_id)
        draft = build_draft(
            frame, data_path=Path(data), config_path=out, keys=key_list, fmt=resolved,
            id_column=id_column, drop=drop, weight=weight, delimiter=delimiter,
            encoding=encoding, value_labels=value_labels, variable_labels=variable_labels,
            name=name, household_id=household_id)
    return frame, draft


def _finish_household_draft(console: Console, frame: Any, draft: Any, data: Path, out: Path,
                            key_list: list[str], force: bool) -> None:
    """Judge the household draft as ``sdc release`` would (designed if needed), write, say."""
    from sdc.authoring.draft import DESIGN_WHEN, draft_yaml, judge_household_draft

    with console.status("judging the household draft as sdc release would (both "
                        "stages, the composition intruder)"):
        designed = judge_household_draft(frame, draft, out, when=DESIGN_WHEN,
                                         data_display=str(data))
    _write_new(out, draft_yaml(draft, data_display=str(data)), force, data)
    for note in draft.design_notes if designed else []:
        console.print(note, markup=False, soft_wrap=True)
    _say_household_draft(draft, out, key_list, console)


def _finish_person_draft(console: Console, frame: Any, draft: Any, data: Path, out: Path,
                         key_list: list[str], important: list[str], force: bool) -> None:
    """Write the person draft; when it changes more than ``DESIGN_WHEN`` of the records (or
    analysis keys are given) run the design step and rewrite it; say what was written."""
    from sdc.authoring.draft import DESIGN_WHEN, apply_design, draft_yaml

    _write_new(out, draft_yaml(draft, data_display=str(data)), force, data)
    c = draft.check
    imp = 0 < len(set(important)) < len(set(key_list))
    if c and c["records"] and (c["expected_changed"] / c["records"] > DESIGN_WHEN or imp):
        share = c["expected_changed"] / c["records"]
        with console.status(f"the draft changes {share:.0%} of the records: searching "
                            "recodings and partitions (sdc design)"):
            designed = apply_design(draft, out)
        if designed:
            # the design's partition lets other keys move: planned once more (the
            # dependence check: a column giving a free key away is derived or dropped), and
            # the draft's comment gets the figures of the partition it now has
            from sdc.authoring.draft import checked_plan, typed_keys
            from sdc.authoring.draft_checks import plan_figures

            plan_data = draft.as_dict()
            plan_data["seed"] = 0
            plan = checked_plan(typed_keys(frame, draft.keys), plan_data, out.resolve().parent,
                                draft)
            if hasattr(plan, "partitioned"):   # a person file's plan
                draft.check.update(plan_figures(plan, int(c.get("kmin") or 0)))
        if designed:
            _write_new(out, draft_yaml(draft, data_display=str(data)), True, data)
            for note in draft.design_notes:
                console.print(note, markup=False, soft_wrap=True)
    _say_person_draft(draft, out, key_list, console)


def _say_person_draft(draft: Any, out: Path, keys: list[str], console: Console) -> None:
    """Print what the person draft holds (partition, certificate) and the next steps."""
    from rich.markup import escape

    from sdc.config.model import certificate_text

    c = draft.check
    part = ", ".join(f"{v} ({'as is' if r == 'as_is' else 'bands'})"
                     for v, r in draft.partition.items()) or "none"
    console.print(f"[green]Config draft written to[/green] {escape(str(out))}")
    console.print(
        f"{c['records']:,} records, keys {', '.join(keys)}; partition: {part}; "
        f"{c['partition_sets']} partition sets, {c['prbs']} PRBs, certificate "
        f"{certificate_text(c['certificate'], c['xi'], 4)} xi = {c['xi']}", markup=False,
        soft_wrap=True)
    _say_review(out, console)

def _say_household_draft(draft: Any, out: Path, keys: list[str], console: Console) -> None:
    """Print what the household draft holds (levels, certificate, changes) and the next steps."""
    from rich.markup import escape

    from sdc.config.model import certificate_text

    c = draft.check
    hk = [k for k, kd in draft.keys.items() if kd.level == "household"]
    console.print(f"[green]Config draft written to[/green] {escape(str(out))}")
    hid = draft.input.get("household_id")  # None: the design withheld it (a person file)
    cert = f"certificate {certificate_text(c['certificate'], c['xi'], 4)} xi = {c['xi']}"
    if hid is None:
        console.print(
            f"{c['records']:,} records, released without the household id (a person file: the "
            f"design's recommendation); keys {', '.join(keys)}; {cert}; {_changes(c)}",
            markup=False, soft_wrap=True)
        _say_review(out, console)
        return
    console.print(
        f"{c['records']:,} records, household file ({hid}); household "
        f"keys {', '.join(hk)}; person keys "
        f"{', '.join(k for k in keys if k not in hk and k in draft.keys)}; "
        + "".join(f"{k}: a household column (the design's); " for k in keys
                  if k not in draft.keys)
        + f"{cert}; {_changes(c)}"
        + ("; risk.composition: protect" if draft.risk.get("composition") else "")
        + ("; input.members: sampled (declared: the composition intruder is outside the "
           "threat model)" if draft.input.get("members") == "sampled" else ""),
        markup=False, soft_wrap=True)
    _say_review(out, console)


def _changes(c: dict[str, Any]) -> str:
    """Records changed in expectation (the plan's, with the SD of one release: what `sdc
    design` and `sdc release` print too), else one draw's (issue 44)."""
    from sdc.method.expected_changes import changes_text

    e = c.get("expected_changed", float("nan"))
    if e != e:
        return f"about {c['changed']:,} records and {c['households_changed']:,} households changed"
    sd = c.get("sd_changed", float("nan"))
    return (changes_text(e, sd * sd, int(c["records"]))
            + (f"; {c['households_changed']:,} households changed in one draw"
               if "households_changed" in c else ""))


def _say_review(out: Path, console: Console) -> None:
    """The closing advice: observed domains to replace, then plan and release."""
    console.print("The categories and ranges are OBSERVED in the data: replace them with "
                  "each variable's public domain before a real release (a domain read "
                  "from the data can reveal a rare value).", style="yellow", markup=False)
    console.print(f"Next: review it, then `sdc plan {out}` and `sdc release {out}`.",
                  markup=False)
