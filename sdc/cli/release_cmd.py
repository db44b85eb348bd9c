"""``sdc release CONFIG``: run the release flow, wait for a review if asked, print the summary."""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from sdc.cli.common import (
    EXIT_USAGE,
    ConfigArg,
    JsonOpt,
    console,
    err_console,
    executor_option,
    fmt_int,
    friendly_errors,
    kv_table,
)


def release(
    config: ConfigArg,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing release (the old "
                                        "one stays until the new one is complete).")] = False,
    new_series: Annotated[bool, typer.Option(
        "--new-series", help="Start a new seed for an output pattern that already has releases "
        "under another seed. A new seed is an independent randomization: records released "
        "before become linkable and their true key values leak.")] = False,
    discard_extra_files: Annotated[bool, typer.Option(
        "--discard-extra-files", help="With --force: also delete files staff put into the "
        "release folder (an approval, a signature). Without it --force refuses and lists "
        "them.")] = False,
    as_json: JsonOpt = False,
    timings: Annotated[bool, typer.Option("--timings", help="Also print the seconds of every "
                                          "step and of Prefect's start-up, as one JSON line "
                                          "starting with 'timings ' (not with --json).")] = False,
    executor: Annotated[str | None, executor_option(
        "default memory; dask runs a LocalCluster, or the config's executor.scheduler")] = None,
    review: Annotated[bool, typer.Option(
        "--review", help="Stage the release (owner-only <release>.staged) for review instead "
        "of publishing it; `sdc approve` publishes it (as the config's review: does).")]
    = False,
    wait_for_review: Annotated[bool, typer.Option(
        "--wait-for-review", help="With a review (--review or the config's review:): wait "
        "until `sdc approve` or `sdc reject` (another terminal) decides; exit 0 when approved "
        "and published, 2 when rejected. Ctrl-C stops waiting and leaves the release "
        "staged.")] = False,
    no_reuse: Annotated[bool, typer.Option(
        "--no-reuse", help="Start Prefect's temporary API for this run only, instead of "
        "starting a local server that later runs reuse (it stops after "
        "SDC_SERVER_IDLE_MINUTES, default 15, without a run; docs/OPERATIONS.md). A server "
        "that runs already (`sdc server start`) is still used.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="List every small-block merge (partition sets joined) in the "
        "summary; without it the summary counts them and names the largest (the full list "
        "is in the report).")] = False,
) -> None:
    """Run the release flow for CONFIG and publish the release folder."""
    import time

    t0 = time.perf_counter()
    from datetime import UTC, datetime

    started = datetime.now(UTC).isoformat(timespec="seconds")   # --wait-for-review
    with friendly_errors("release" if as_json else None):
        # everything that can be refused is refused here, at once and in one message, before
        # Prefect is imported or its server started; the flow takes these checks and this
        # config (read once), and runs them itself only when started otherwise (a schedule)
        # (a temporary API, when the run will use one, is launched first: it boots during
        # the pre-flight too, and a refusal stops it)
        from flows.run import early_api

        temp_api = early_api(reuse=not no_reuse)
        from sdc.release.preflight import preflight

        try:
            checked = preflight(config, force=force, new_series=new_series, engine=executor,
                                discard_extra_files=discard_extra_files)
        except BaseException:
            if temp_api is not None:
                temp_api.stop()
            raise
        preflight_seconds = time.perf_counter() - t0
        from flows.run import PrefectServerLostError, run_release

        quiet = nullcontext() if as_json else None  # stdout holds the JSON document only
        try:
            with quiet or console.status(f"release {escape(str(config))}: starting") as status:
                def show(step: str) -> None:
                    status.update(f"release {escape(str(config))}: {step}")

                summary, startup = run_release(
                    config, checked, force=force, new_series=new_series, engine=executor,
                    review=review or wait_for_review, discard_extra_files=discard_extra_files,
                    reuse=not no_reuse, progress=None if as_json else show, t0=t0,
                    temp_api=temp_api)
        except PrefectServerLostError as e:
            if e.published is None or as_json:
                raise
            _published_without_server(e)
            return
        if wait_for_review:  # the run is over: wait on the staged folder (any server or none)
            _await_review(summary, as_json, started)
        total = time.perf_counter() - t0
        summary["total_seconds"] = round(total, 3)
        if as_json:
            from sdc.cli.json_output import print_document, release_document

            print_document(release_document({**summary, "config_path": str(config)}))
            if (summary.get("review") or {}).get("status") == "rejected":
                raise typer.Exit(EXIT_USAGE)
            return
        _print_release_summary({**summary, "config_path": str(config)}, verbose=verbose)
        if timings:
            _print_timings(total, preflight_seconds, summary, startup)


def _published_without_server(e: Any) -> None:
    """The server went away after the release was written (issue 47: exit 2 "the temporary
    one this command started" for a published release): a warning, where the release is,
    exit 0. Prefect's services would retry sending the run's logs to the dead server for
    minutes at exit; nothing they hold matters, so the command leaves at once (not inside a
    test's CliRunner, whose streams are swapped)."""
    import sys

    err_console.print(f"warning: {e}", style="yellow", markup=False, soft_wrap=True)
    staged = Path(str(e.published)).name.endswith(".staged")
    console.print(f"Release {'staged for review in' if staged else 'written to'} "
                  f"{e.published}", markup=False)
    if sys.stderr is sys.__stderr__:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _print_timings(total: float, preflight_seconds: float, summary: dict[str, Any],
                   startup: dict[str, Any]) -> None:
    """``--timings``: one JSON line starting with 'timings ' (total, CPU, pre-flight, job,
    Prefect's share, every task and start-up step)."""
    import json

    cpu = os.times()
    out = {"total_seconds": round(total, 3),
           "cpu_seconds": round(cpu.user + cpu.system, 3), "preflight_seconds":
           round(preflight_seconds, 3), "job_seconds": summary.get("seconds"),
           "prefect_seconds": round(total - (summary.get("seconds") or 0.0), 3),
           "tasks": summary.get("timings", {})}
    out.update(startup)
    console.print("timings " + json.dumps(out), markup=False, soft_wrap=True, highlight=False)


def _await_review(summary: dict, as_json: bool, since: str) -> None:
    """``--wait-for-review``: after the run, wait until the staged release is approved
    or rejected by `sdc approve` / `sdc reject` (any process) and record the outcome in
    ``summary["review"]``. Ctrl-C stops waiting (exit 130); the release stays staged."""
    rev = summary.get("review")
    if rev is None or rev.get("status") != "pending":
        return
    from sdc.publish.review import await_decision

    staged = str(rev["staged_dir"])
    msg = (f"release staged for review in {escape(staged)}: waiting for `sdc approve "
           f"{escape(staged)} --as NAME` or `sdc reject ...` (Ctrl-C stops waiting; the release "
           "stays staged)")
    try:
        with nullcontext() if as_json else console.status(msg):
            outcome = await_decision(Path(rev["release_dir"]), since=since)
    except KeyboardInterrupt:
        err_console.print(f"stopped waiting: the release stays staged in {staged} for "
                          "`sdc approve` / `sdc reject`", markup=False)
        raise typer.Exit(130) from None
    summary["review"] = {**rev, **outcome}
    if outcome["status"] == "approved":
        summary["release_dir"] = outcome["release_dir"]


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _changed_text(s: dict[str, Any]) -> str:
    """Records changed and what was expected (a household file: the persons both stages, or
    the composition stage, change in expectation, with the SD of one release: issue 44)."""
    sd = s.get("expected_changed_sd")
    spread = f", SD {sd:,.1f}" if sd is not None else ""
    return f"{fmt_int(s['records_changed'])} (expected {s['expected_changed']:,.1f}{spread})"


def _print_release_summary(s: dict[str, Any], verbose: bool = False) -> None:
    from sdc.config.model import certificate_text

    rows = [
        ("records", fmt_int(s["n"])),
        ("partition sets", fmt_int(s["n_partition_sets"])),
        ("PRBs", fmt_int(s["n_prbs"])),
        (f"theta ({s['theta_mode']})", f"{s['theta']:.4f}   kmin = {s['kmin']}"),
        ("certificate", f"{certificate_text(s['certificate'], s['xi'])} xi = {s['xi']}"),
        ("records changed", _changed_text(s)),
    ]
    hh = s.get("households")
    if hh:
        how = ("certified" if hh["composition_mode"] == "protect" else
               f"of groups <= {hh['large_groups']} members, exact"
               if hh["composition_mode"] == "large_groups" else "measured, riskiest class")
        rows.append(("households", f"{fmt_int(hh['n'])} ({fmt_int(hh['changed'])} changed), "
                                   f"{hh['prbs']} household PRBs; "
                                   + (hh["threat_model"] if hh.get("members") == "sampled" else
                                      f"composition intruder {how} {hh['composition']:.4f}")
                                   + (f"; household keys x size {hh['size_level']:.4f}"
                                      if "size_level" in hh else "")))
        if hh.get("left_out"):
            lo = hh["left_out"]
            rows.append(("left out", f"{fmt_int(lo['households'])} households, "
                         f"{fmt_int(lo['persons'])} persons ({100 * lo['persons'] / max(lo['of_persons'], 1):.2f}%"
                         + (f", weighted {100 * lo['weighted_share']:.2f}%"
                            if lo.get("weighted_share") is not None else "")
                         + ") of size " + ", ".join(str(e["size"]) for e in lo["sizes"])
                         + ": exposed sizes (fewer than 1/xi households), "
                           "risk.exposed_sizes: drop; weight recalibrated"))
    if s["merges"] and verbose:
        rows.append(("merges", "\n".join(s["merges"])))
    elif s["merges"]:
        big = s.get("largest_merge")
        largest = ("" if not big else
                   f"; largest: {big['partition_sets']} partition sets"
                   + (f" ({big['stage']} stage)" if big.get("stage") else "")
                   + f": {_clip(big['partition_key'], 100)}")
        rows.append(("merges", f"{len(s['merges'])} merge steps{largest} (the steps: "
                               "--verbose, and the report's \"Small blocks\" line under its "
                               "first screen)"))
    if s.get("seconds") is not None:
        total = s.get("total_seconds")
        rows.append(("time", f"{s['seconds']:.1f} s job" if total is None else
                     f"{total:.1f} s = {s['seconds']:.1f} s job + "
                     f"{max(total - s['seconds'], 0.0):.1f} s Prefect start-up and bookkeeping"))
    console.print(kv_table(rows, title=f"Release {s['name']}"))
    from sdc.cli.json_output import release_warnings

    for w in release_warnings(s, str(s.get("config_path") or "CONFIG")):  # = --json's list
        console.print(f"warning: {w}", style="yellow", markup=False)
    if s.get("seed_created"):
        console.print(f"created the seed file {s.get('seed_file')} (mode 0600): back it up, "
                      "it is what makes a rerun byte-identical", style="yellow", markup=False)
    rev = s.get("review")
    if rev is not None and rev.get("status") == "approved":
        console.print(f"[green]approved[/green] by {escape(str(rev.get('name')))}; "
                      f"[green]Release written to[/green] {escape(str(rev['release_dir']))}")
        return
    if rev is not None and rev.get("status") == "rejected":
        by = f" by {rev['name']}" if rev.get("name") else " (sdc reject)"
        err_console.print(f"release rejected{escape(by)}: the staged release was deleted and "
                          "nothing was published", style="bold red")
        raise typer.Exit(EXIT_USAGE)
    if rev is not None:
        who = ", ".join(rev["approvers"]) or "a named reviewer"
        console.print(f"[yellow]Release staged for review[/yellow] in "
                      f"{escape(str(rev['staged_dir']))} (owner-only; nothing is published). "
                      f"{escape(who)} approves with: sdc approve {escape(str(rev['staged_dir']))}"
                      " --as NAME [--comment TEXT]   (or: sdc reject ... --as NAME)")
        return
    console.print(f"[green]Release written to[/green] {escape(str(s['release_dir']))}")
