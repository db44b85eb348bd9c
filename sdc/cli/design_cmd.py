"""``sdc design CONFIG``: search recodings for the least-changed certified release and print the
Pareto frontier and the recommendation (docs/DESIGN.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sdc.cli.common import (
    EXIT_USAGE,
    MAX_BUDGET,
    MAX_LIMIT,
    ConfigArg,
    JsonOpt,
    console,
    err_console,
    fmt_int,
    friendly_errors,
    kv_table,
)
from sdc.cli.ranges import in_range, range_text


def design(
    config: ConfigArg,
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Write the recommended design as a release config here.",
        show_default=False)] = None,
    budget: Annotated[float, typer.Option(
        "--budget", help="Seconds for planning lattice nodes (the rest stay unevaluated); "
        f"{range_text(0, MAX_BUDGET, lo_open=True)}.",
        callback=in_range(0, MAX_BUDGET, lo_open=True, what="seconds of search"))]
    = 60.0,
    keep: Annotated[float, typer.Option(
        "--keep", help="Share of its own entropy every key of the recommended design keeps at "
        "least (the per-key floor); in (0, 1].",
        callback=in_range(0, 1, lo_open=True, what="a share of the entropy"))] = 0.7,
    target: Annotated[float, typer.Option(
        "--target", help="Share of records changed the recommendation aims at (or less); in "
        "(0, 1).", callback=in_range(0, 1, lo_open=True, hi_open=True,
                                     what="a share of the records"))]
    = 0.08,
    limit: Annotated[int, typer.Option(help="Show at most this many frontier points "
                                       f"({range_text(0, MAX_LIMIT, integer=True)}).",
                                       callback=in_range(0, MAX_LIMIT, integer=True))] = 25,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Every column of the frontier "
                                          "(on a narrow terminal the displacement, TVD bound "
                                          "and partition columns are left out).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing -o file (never "
                                        "the job's own config, input, seed or hierarchy "
                                        "files).")] = False,
) -> None:
    """Find recodings of the keys that change fewer records at the same xi.

    Searches the lattice of recodings for the certified release that changes the fewest records;
    prints the Pareto frontier (records changed, entropy lost, a bound on the key-table TVD) and
    the recommended design (docs/DESIGN.md)."""
    with friendly_errors("design" if as_json else None):
        from sdc.authoring.design import design_document, run_design, write_node_config
        from sdc.io.guard import job_files, refuse_overwrite

        if out is not None:  # before the search: refused at once, not after --budget seconds
            refuse_overwrite(out, force=force, option="-o", protected=job_files(config))
        if as_json:
            d = run_design(config, budget=budget, keep=keep, target=target)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            with Progress("[progress.description]{task.description}", BarColumn(),
                          MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                          transient=True) as bar:
                task = bar.add_task("design: lattice nodes", total=None)
                d = run_design(config, budget=budget, keep=keep, target=target,
                               progress=lambda done, total: bar.update(task, completed=done,
                                                                        total=total))
        doc = design_document(d)
        written = None
        if out is not None and d.result.recommended is not None:
            refuse_overwrite(out, force=force, option="-o", protected=job_files(config))
            written = write_node_config(d, d.result.recommended, out)
            doc["written"] = str(written)
        if as_json:
            from sdc.cli.json_output import print_document

            print_document({"command": "design", "ok": True, **doc})
            return
        _print_design(doc, limit, verbose)
        if out is not None and written is None:
            err_console.print("no design keeps the requested entropy: nothing written",
                              style="yellow")
            raise typer.Exit(EXIT_USAGE)


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def _expected(p: dict[str, Any], n: int) -> str:
    """A household candidate's expected share of records changed and its SD (one release)."""
    sd = p.get("sd_changed")
    if sd is None or sd != sd or not n:
        return _pct(p["share_changed"])
    return f"{_pct(p['share_changed'])} ± {_pct(sd / n)}"


def _changes(p: dict[str, Any], n: int) -> str:
    """``1,205 records (8.1%) expected to change (SD 41)``: init's and release's wording."""
    from sdc.method.expected_changes import changes_text

    sd = p.get("sd_changed")
    if sd is None or sd != sd:
        return f"{_pct(p['share_changed'])} of records changed"
    return changes_text(p["share_changed"] * n, sd * sd, n)


def _left_out(left: dict[str, Any]) -> str:
    """What ``risk.exposed_sizes: drop`` leaves out (the design table's line)."""
    sizes = ", ".join(f"{s} ({n} households)" for s, n in left["sizes"].items())
    return (f"sizes {sizes} held by fewer than 1/xi households: the candidates leave "
            f"{left['households']:,} households, {left['persons']:,} persons "
            f"({left['share']:.2%}) out of the public file (risk.exposed_sizes: drop; "
            "docs/HOUSEHOLDS.md 'Exposed sizes')")


def _print_household_design(doc: dict[str, Any], limit: int) -> None:
    """``sdc design`` of a household file (sdc.authoring.household_design)."""
    c = doc["current"]
    console.print(kv_table([
        ("config", doc["config"]), ("records", fmt_int(doc["records"])), ("xi", str(doc["xi"])),
        ("the config as written", f"{c['status']}" + (f": {c['note']}" if c["note"] else "")),
        ("candidates", f"{doc['nodes']['total']} (risk.composition: protect, person keys "
                       "recoded; grouped files: the two stages, coarser group keys, without "
                       f"the group id; {doc['nodes']['certified']} certified)"),
        *([("exposed household sizes", _left_out(doc["left_out"]))] if doc.get("left_out")
          else []),
    ], title="Design search (household file: both stages, the composition intruder)"))
    t = Table(title="Certified household designs (* recommended)", title_justify="left")
    for col in ("", "records changed (expected)", "households changed", "composition cert.",
                "person cert.", "household cert.", "keys x size cert.", "left out", "recoding"):
        t.add_column(col, justify="left" if col in ("", "recoding") else "right",
                     overflow="fold")
    rec = doc["recommended"]["node"] if doc["recommended"] else None
    for p in doc["frontier"][:limit]:
        recoding = "; ".join(f"{k}: {v['name'] if 'as_household_column' in v['recode'] else v['recode']}"
                             for k, v in p["recoding"].items()) or "none"
        if (p.get("risk") or {}).get("member_bands"):
            recoding += "; members keep bands " + "; ".join(
                f"{k} cut at {v}" for k, v in p["risk"]["member_bands"].items())
        if p.get("class_shift") == p.get("class_shift") and p.get("class_shift_at"):
            recoding += f" (means by class moved <= {p['class_shift']:.1f} SE)"
        if p.get("without_group_id"):
            recoding = "without the group id: a person file (no household reassembled)"
        comp = f"{p['certificate']:.4f}"
        if p.get("large_groups") is not None:  # two stages: the small groups' exact figure
            lg = p["composition"].get("large_groups") or {}
            comp = ("outside (members sampled)" if lg.get("members") == "sampled" else
                    f"{lg.get('certificate', float('nan')):.4f} (groups <= {p['large_groups']})")
            recoding = f"two stages; {recoding}"
        t.add_row("*" if p["node"] == rec else "", _expected(p, doc["records"]),
                  fmt_int(p["households_changed"]), comp,
                  f"{p['composition'].get('person_certificate', 0):.4f}",
                  f"{p['composition'].get('household_level_certificate', 0):.4f}",
                  f"{p['composition'].get('size_level_protectable', 0):.4f}",
                  (f"{p['left_out']['households']:,} hh, {p['left_out']['persons']:,} p"
                   if p.get("left_out") else "none"), Text(recoding))
    console.print(t)
    if rec is None:
        console.print("no household design is certified at this xi: coarser household keys "
                      "or a larger xi", style="yellow")
        for what, note in (doc.get("refused") or {}).items():
            if note:
                label = ("protect, the fewest records changed" if what == "protect"
                         else "the release without the group id")
                console.print(f"{label}: {note}", markup=False)
        return
    r = doc["recommended"]
    if r.get("without_group_id"):
        console.print(f"recommended: the release without the group id ({r['note']}): "
                      f"{_expected(r, doc['records'])} of records changed, certificate "
                      f"{r['certificate']:.4f} <= xi; no household design changes at most 15% "
                      "of the records", markup=False)
        if doc.get("written"):
            console.print(f"wrote {doc['written']}: run `sdc release {doc['written']}`",
                          markup=False)
        return
    if r.get("large_groups") is not None:
        console.print(f"recommended: two stages, {_changes(r, doc['records'])}: {r['note']}",
                      markup=False)
    else:
        console.print(f"recommended: risk.composition: protect, {_changes(r, doc['records'])}, "
                      f"composition certificate {r['certificate']:.4f} <= xi", markup=False)
    if doc.get("written"):
        console.print(f"wrote {doc['written']}: run `sdc release {doc['written']}`", markup=False)


def _print_design(doc: dict[str, Any], limit: int, verbose: bool = False) -> None:
    """Print a design search: summary, Pareto frontier, the config as it is, the recommendation
    (last: the verdict stays on screen). Text wraps at word boundaries (rich), never inside a
    number."""
    if doc.get("household_file"):
        _print_household_design(doc, limit)
        return
    _print_search_summary(doc)
    _print_frontier(doc, limit, verbose)
    rec = doc["recommended"]["node"] if doc["recommended"] else None
    c = doc["current"]
    if c is not None:
        console.print(f"the config as it is: {_pct(c['share_changed'])} of records changed "
                      f"(expected), certificate {c['certificate']:.4f}", markup=False)
    if rec is None:
        console.print(f"no evaluated design keeps {_pct(doc['keep'])} of every key's entropy",
                      style="yellow")
        return
    _print_recommended(doc)
    for note in doc.get("importance_notes") or []:
        console.print(note, style="yellow", markup=False)
    for g in doc.get("given_up") or []:
        console.print(f"not reached: {g}", style="yellow", markup=False)
    if doc.get("written"):
        console.print(f"wrote {doc['written']}: run `sdc release {doc['written']}`", markup=False)


def _print_search_summary(doc: dict[str, Any]) -> None:
    """The search's table: records, xi, declared entropy, lattice nodes, time, importance."""
    nodes = doc["nodes"]
    console.print(kv_table([
        ("config", doc["config"]),
        ("records", fmt_int(doc["records"])),
        ("xi", str(doc["xi"])),
        ("entropy of the declared key table", f"{doc['entropy_declared']:.3f} bits"),
        ("lattice nodes", f"{nodes['total']} ({nodes['certified']} certified, {nodes['pruned']} "
                          f"pruned below the entropy floor, {nodes['refused']} refused, "
                          f"{nodes['not_evaluated']} not evaluated)"),
        ("search", f"{doc['seconds']:.1f} s" + ("" if doc["complete"] else
                                                " (time budget reached: --budget)")),
        *([("analytic importance", ", ".join(f"{k} x{w:.2f}" for k, w in
                                              doc["importance"].items())
            + " (move distortion weighted; docs/DESIGN.md)")] if doc.get("importance") else []),
    ], title="Design search"))


#: below this terminal width the frontier leaves out its widest columns (unless --verbose)
NARROW = 120


def _print_frontier(doc: dict[str, Any], limit: int, verbose: bool = False) -> None:
    """The Pareto frontier table (at most ``limit`` points) and its notes. Numbers never wrap;
    on a terminal narrower than :data:`NARROW` columns the displacement, TVD bound and
    partition columns are left out unless ``verbose``."""
    t = Table(title=f"Pareto frontier ({len(doc['frontier'])} points; * recommended, "
                    "= the config as it is)", title_justify="left")
    weighted = doc.get("weighted", False)
    cols = ["", "changed", "entropy kept", "lowest key", "keys moved", "displacement",
            "TVD bound", *(("weighted bias", "beyond 3 SE") if weighted else ()), "recoding",
            "partition"]
    narrow = not verbose and console.width < NARROW
    left_out = {"displacement", "TVD bound", "partition"} if narrow else set()
    for col in cols:
        text = col in ("", "recoding", "partition", "displacement")
        t.add_column(col, justify="left" if col in ("", "recoding", "partition") else "right",
                     overflow="fold" if text else "ellipsis", no_wrap=not text)
    rec = doc["recommended"]["node"] if doc["recommended"] else None
    cur = doc["current"]["node"] if doc["current"] else None
    for p in doc["frontier"][:limit]:
        mark = ("*" if p["node"] == rec else "") + ("=" if p["node"] == cur else "")
        recoding = "; ".join(f"{k}: {v['name']}" for k, v in p["recoding"].items()) or "none"
        t.add_row(mark, _pct(p["share_changed"]), _pct(p["entropy_kept"]),
                  _pct(p["min_key_entropy_kept"]),
                  "-" if p["keys_changed_when_moved"] is None
                  else f"{p['keys_changed_when_moved']:.2f}", _disp(p), f"{p['tvd_bound']:.4f}",
                  *(_balance(p) if weighted else ()), Text(recoding), p["partition_variant"])
    for i in sorted((cols.index(c) for c in left_out), reverse=True):
        t.columns.pop(i)
    console.print(t)
    if left_out:
        console.print(f"(narrow terminal: {', '.join(sorted(left_out))} left out; --verbose "
                      "shows them)", markup=False)
    if weighted:
        console.print("weighted bias: sum |E[weighted total] - original| over the key cells, "
                      "share of the total weight; beyond 3 SE: expected share of perturbed "
                      "cells whose mean over 30 releases is beyond 3 standard errors (0.3% "
                      "when unbiased); both exact, from the configured design (- not planned)",
                      markup=False)
    if verbose:  # every point: the share of records whose key PRAM changes, by key
        for p in doc["frontier"][:limit]:
            console.print(f"  node {p['node']} ({_pct(p['share_changed'])} changed): "
                          + _moves_list(p), markup=False)
    _print_shifts(doc, limit, verbose)
    if len(doc["frontier"]) > limit:
        console.print(f"... and {len(doc['frontier']) - limit} more (--limit)")
    for k, cols in (doc.get("held_by_derived") or {}).items():
        console.print(f"{k}: not recoded (the derived column(s) {', '.join(cols)} are computed "
                      "from it; a recoding would make them no function of the released keys)",
                      markup=False)
    for line in doc.get("refused_by_release_checks") or []:
        console.print(line, markup=False, style="yellow")


def _print_recommended(doc: dict[str, Any]) -> None:
    """The recommended design: changes, entropy kept per key, partition, move distortion."""
    from sdc.authoring.design_yaml import flow_text

    r = doc["recommended"]
    console.print(f"recommended ({doc['verdict']}): {_pct(r['share_changed'])} changed, "
                  f"{_pct(r['entropy_kept'])} of the key table's entropy kept, TVD bound "
                  f"{r['tvd_bound']:.4f}, certificate {r['certificate']:.4f} <= xi",
                  markup=False)
    _print_configured(doc.get("recommended_configured"))
    for k, v in r["key_entropy_kept"].items():
        rc = r["recoding"].get(k)
        what = (f"recode: {flow_text(rc['recode'])} ({rc['name']}, {rc['released_values']} "
                "released values)" if rc else "declared values")
        d = r["displacement"].get(k)
        tvd = r["key_tvd_uniform_spread"].get(k)
        if rc and tvd:
            what += f"; TVD of its distribution spread uniformly within classes {tvd:.3f}"
        console.print(f"  {k}: keeps {_pct(v)} of its own entropy; {what}"
                      + (f"; a moved record's {k} moves by {d:.2f} on average"
                         if d is not None else "") + _moves_text(r, k), markup=False)
        if rc and rc.get("values"):  # the recode's own shift of the key's mean and sd
            from sdc.authoring.design_values import value_lines

            for line in value_lines(k, rc["values"]):
                console.print(f"    {line}", markup=False)
    console.print(f"  partition ({r['partition_variant']}): {r['partition'] or 'none'}",
                  markup=False)
    if any((m.get("records_changed") or 0) > 0 for m in (r.get("key_moves") or {}).values()):
        console.print("  (a key's relations with the other columns, its group means and "
                      "coefficients, are diluted by about the share of records whose key "
                      "changes: the keys a design lets move pay for those it holds)",
                      markup=False)
    from sdc.authoring.design_shifts import shift_list

    if shift_list(r.get("key_moves") or {}):
        console.print(f"  mean {doc['outcome']} by each key's category, largest expected "
                      f"shift in SE: {shift_list(r['key_moves'])}", markup=False)
    if r.get("keys_changed_when_moved") is not None:
        console.print(f"  a moved record changes {r['keys_changed_when_moved']:.2f} keys on "
                      "average", markup=False)
    if r.get("move_distortion") is not None:
        console.print(f"  move distortion {r['move_distortion']:.3f} per moved record"
                      + (" (weighted by importance)" if doc.get("importance") else ""),
                      markup=False)


def _print_configured(cf: dict[str, Any] | None) -> None:
    """The recommendation under the config's own design (the search ranks by NZY's uniform
    design; the release uses the config's)."""
    if not cf:
        return
    console.print(
        (f"with this config's {cf['design']} design (as `sdc release` plans it): "
         f"{_pct(cf['share_changed'])} expected changed ({cf['changed']:,.1f} records), "
         f"certificate {cf['certificate']:.4f} "
         + ("<= xi" if cf["certified"] else "> xi: NOT certified")
         + (f", {cf['weight_groups']} weight groups ({cf['nzy_groups']} keep NZY, "
            f"{_pct(cf['weighted_fallback'])} of the weight); weighted totals: bias "
            f"{cf['weighted_bias']:.2%} of the total weight, {_pct(cf['weighted_beyond'])} "
            "of cells expected beyond 3 SE over 30 releases"
            if "weight_groups" in cf else ""))
        if cf.get("certificate") is not None else
        f"with this config's {cf['design']} design: not certified ({cf['note']})",
        markup=False)


def _balance(p: dict[str, Any]) -> tuple[str, str]:
    """A frontier point's weighted bias and share beyond 3 SE (its configured design)."""
    c = p.get("configured") or {}
    if "weighted_bias" not in c:
        return ("refused", "-") if c.get("note") else ("-", "-")
    return f"{c['weighted_bias']:.2%}", _pct(c["weighted_beyond"])


def _disp(p: dict[str, Any]) -> str:
    d = p.get("displacement") or {}
    return ", ".join(f"{k} {v:.1f}" for k, v in d.items()) or "-"


def _moves_text(r: dict[str, Any], k: str) -> str:
    """``; PRAM changes it for 4.1% of records (free)`` for key ``k`` of a node."""
    m = (r.get("key_moves") or {}).get(k)
    if not m or m.get("records_changed") is None:
        return ""
    return f"; PRAM changes it for {_pct(m['records_changed'])} of records ({m['partition']})"


def _print_shifts(doc: dict[str, Any], limit: int, verbose: bool) -> None:
    """Every frontier point's keys by the largest expected shift of the outcome's mean over
    their categories, in SE (the three largest; all with ``verbose``), or why none is shown."""
    from sdc.authoring.design_shifts import shift_list

    if doc.get("outcome") is None:
        if doc.get("outcome_note"):
            console.print(doc["outcome_note"], markup=False)
        return
    lines = []
    for p in doc["frontier"][:limit]:
        items = shift_list(p.get("key_moves") or {}).split(", ")
        if items != [""]:
            more = ("" if verbose or len(items) <= 3
                    else f"; {len(items) - 3} more keys with --verbose")
            lines.append(f"  node {p['node']}: "
                         + ", ".join(items if verbose else items[:3]) + more)
    if lines:
        console.print(f"mean {doc['outcome']} by each key's category, largest expected shift "
                      "in SE (the keys a point holds, confines or leaves free):", markup=False)
        for line in lines:
            console.print(line, markup=False)


def _moves_list(p: dict[str, Any]) -> str:
    """A frontier point's keys with the share of records whose key changes, largest first."""
    moves = [(k, m) for k, m in (p.get("key_moves") or {}).items()
             if m.get("records_changed") is not None]
    moves.sort(key=lambda km: -km[1]["records_changed"])
    return ", ".join(f"{k} {_pct(m['records_changed'])} ({m['partition']})"
                     for k, m in moves) or "not planned"
