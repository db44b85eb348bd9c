"""``sdc plan CONFIG`` (what a release would do; writes nothing) and ``sdc validate CONFIG`` (the
config and its input only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sdc.cli.common import (
    MAX_LIMIT,
    ConfigArg,
    JsonOpt,
    console,
    executor_option,
    fmt_int,
    friendly_errors,
    kv_table,
)
from sdc.cli.ranges import in_range, range_text

if TYPE_CHECKING:
    from sdc.release.job import PlanSummary


def plan(
    config: ConfigArg,
    limit: Annotated[int, typer.Option(help="Show at most this many partition sets / PRBs "
                                       f"({range_text(0, MAX_LIMIT, integer=True)}).",
                                       callback=in_range(0, MAX_LIMIT, integer=True))]
    = 60,
    as_json: JsonOpt = False,
    executor: Annotated[str | None, executor_option("how the records are read and counted")]
    = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also list every small-block "
                                          "merge step.")] = False,
) -> None:
    """Show what a release would do (partition sets, PRBs, theta, certificate); write nothing.

    The summary comes last, the certificate its last line, so the verdict stays on screen."""
    with friendly_errors("plan" if as_json else None):
        from sdc.release.job import plan_job

        if as_json:  # every partition set and PRB, no --limit
            from sdc.cli.json_output import plan_document, print_document

            print_document(plan_document(plan_job(config, engine=executor), str(config)))
            return

        with console.status(f"planning {escape(str(config))}"):
            p = plan_job(config, engine=executor)
        _print_plan_tables(p, limit)
        _print_plan_summary(p, str(config), verbose)


def _print_plan_tables(p: PlanSummary, limit: int) -> None:
    """The partition sets, PRBs and small-block actions of ``sdc plan`` (``limit`` rows)."""
    ps = Table(title=f"Partition sets ({p.n_partition_sets})", title_justify="left")
    for col in ("partition set", "records", "cells", "sensitive cells", "sensitive records",
                "PRB"):
        ps.add_column(col, justify="left" if col == "partition set" else "right")
    for r in p.partition_sets.head(limit).itertuples(index=False):
        ps.add_row(Text(str(r.partition_key)), fmt_int(r.n_records), fmt_int(r.n_cells),
                   fmt_int(r.n_sensitive_cells), fmt_int(r.n_sensitive_records),
                   "-" if int(r.prb) < 0 else str(int(r.prb)))
    console.print(ps)
    if p.n_partition_sets > limit:
        console.print(f"... and {p.n_partition_sets - limit} more (--limit)")
    bt = Table(title=f"Post-randomization blocks ({p.n_prbs})", title_justify="left")
    for col in ("PRB", "k", "records", "profile t:cells", "theta", "max risk", "action",
                "exp. changed", "partition set(s)"):
        bt.add_column(col, justify="left" if col in ("partition set(s)", "profile t:cells",
                                                     "action") else "right",
                      overflow="fold")
    for r in p.blocks.head(limit).itertuples(index=False):
        bt.add_row(str(r.prb), fmt_int(r.k), fmt_int(r.n_records), str(r.profile),
                   f"{r.theta:.4f}", f"{r.max_risk:.4f}", str(r.action),
                   f"{r.expected_changed:.1f}", Text(str(r.partition_key)))
    console.print(bt)
    if p.n_prbs > limit:
        console.print(f"... and {p.n_prbs - limit} more (--limit)")
    small = p.small_block_actions
    if len(small):
        st = Table(title=f"Small-block actions ({len(small)} PRBs; kmin = {p.kmin}, policy "
                         f"{p.small_blocks})", title_justify="left")
        for col in ("PRB", "k", "theta", "max risk", "action", "partition set(s)"):
            st.add_column(col, overflow="fold",
                          justify="left" if col in ("action", "partition set(s)") else "right")
        for r in small.head(limit).itertuples(index=False):
            st.add_row(str(r.prb), fmt_int(r.k), f"{r.theta:.4f}", f"{r.max_risk:.4f}",
                       str(r.action), Text(str(r.partition_key)))
        console.print(st)
        if len(small) > limit:
            console.print(f"... and {len(small) - limit} more (--limit)")


def _print_plan_summary(p: PlanSummary, config: str, verbose: bool = False) -> None:
    """The merge steps (``verbose``), notes and warnings, then the summary table of ``sdc plan``
    with the certificate last: the verdict is what stays on screen."""
    small = p.small_block_actions
    actions = (", ".join(f"{a}: {n}" for a, n in small["action"].value_counts().items())
               if len(small) else "none (every PRB has k >= kmin and uses the theorem's "
               "theta)")
    from sdc.config.model import certificate_text

    if verbose and p.merges:
        console.print(f"Merge steps ({len(p.merges)}):", style="bold")
        for i, m in enumerate(p.merges, 1):
            console.print(Text(f"{i:>5}. {m}"))
    rows = [
        ("config", str(p.config_path)),
        ("records", fmt_int(p.n_records)),
        ("non-empty cells", f"{fmt_int(p.n_cells)} ({fmt_int(p.n_sensitive_cells)} "
                            f"sensitive, {fmt_int(p.n_sensitive_records)} records)"),
        ("partition sets / PRBs", f"{p.n_partition_sets} / {p.n_prbs}"),
        ("xi", f"{p.xi}"),
        (f"theta ({p.theta_mode})", f"{p.theta:.4f}"),
        ("kmin", str(p.kmin)),
        (f"small blocks ({p.small_blocks})", actions),
        ("expected changed records", f"{p.expected_changed:,.1f} ({p.expected_how})"),
    ]
    if p.changed is not None:
        rows.append(("changed records with the seed", fmt_int(p.changed)))
    if p.merges:
        nps = (p.blocks["n_partition_sets"] if "n_partition_sets" in p.blocks
               else p.blocks["prb"] * 0 + 1)
        merged = nps[nps > 1]
        rows.append(("merges", f"{len(p.merges)} merge steps made {len(merged)} merged PRBs of "
                               f"{int(merged.sum())} partition sets"
                     + ("" if verbose else " (the steps: --verbose)")))
    rows += [
        ("release folder", f"{p.output_dir}" + (" (exists: `sdc release` needs --force)"
                                                if p.release_exists else "")),
        ("certificate", f"{certificate_text(p.certificate, p.xi)} xi"),
    ]
    for n in p.notes:
        console.print(f"note: {n}", style="yellow", markup=False)
    from sdc.cli.json_output import plan_warnings

    for w in plan_warnings(p, config):  # = --json's list
        console.print(f"warning: {w}", style="yellow", markup=False)
    console.print(kv_table(rows, title=f"Plan for {p.name} (nothing written)"))


def validate(
    config: ConfigArg,
    executor: Annotated[str | None, executor_option("how the records are read and checked")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the config and its input (schema, domains, ids, weights) without releasing."""
    with friendly_errors("validate" if as_json else None):
        from sdc.release.job import validate_release_input

        if as_json:
            from sdc.cli.json_output import print_document, validate_document

            print_document(validate_document(validate_release_input(config, engine=executor)))
            return

        with console.status(f"validating {escape(str(config))}"):
            v = validate_release_input(config, engine=executor)
        console.print(kv_table([
            ("config", str(v.config_path)),
            ("input", f"{v.input_path} (sha256 {v.input_sha256[:16]}...)"),
            ("records / columns", f"{fmt_int(v.n_records)} / {v.n_columns}"),
            ("key variables", ", ".join(v.key_variables)),
            ("non-empty cells", f"{fmt_int(v.n_cells)} ({fmt_int(v.n_sensitive_cells)} "
                                "sensitive)"),
            ("partition sets", fmt_int(v.n_partition_sets)),
        ], title=f"{v.name}: config and input are valid"))
