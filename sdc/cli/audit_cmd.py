"""``sdc audit RELEASE_DIR`` (re-verify a release; ``--series``: the measured risk of a series)
and ``sdc report RELEASE_DIR`` (re-render internal/report.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sdc.cli.common import (
    EXIT_FAILURE,
    JsonOpt,
    ReleaseDirArg,
    console,
    err_console,
    friendly_errors,
    user_error,
)


def audit(
    release_dirs: Annotated[list[Path], typer.Argument(
        help="A release folder; with --series, the releases of a series in order.",
        show_default=False, metavar="RELEASE_DIR...")],
    series: Annotated[bool, typer.Option(
        "--series", help="Measure the risk of a release series from the releases' internal "
        "data: share of records in consecutive releases whose released key values changed, "
        "and the linking intruder's correct-match rate per (t_j, a) next to xi. Exit 1 when "
        "the rate with one matching record exceeds xi.")] = False,
    source: Annotated[Path | None, typer.Option(
        "--source", help="The input file (or folder of parts) at its new place, when it moved "
        "since the release; its SHA-256 must still match the recorded one.",
        show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-verify a release: source hash, partition sets, PRBs, certificate <= xi, file hashes.

    With --series DIR [DIR ...]: measure the risk of the series."""
    if series:
        _audit_series(release_dirs, as_json)
        return
    with friendly_errors("audit" if as_json else None):
        from sdc.audit.verify import verify_release

        if len(release_dirs) != 1:
            raise user_error(f"sdc audit takes one release folder ({len(release_dirs)} "
                                 "given); to measure a series of releases add --series")
        release_dir = release_dirs[0]

        if not release_dir.is_dir():
            raise FileNotFoundError(f"release folder {str(release_dir)!r} does not exist")
        if as_json:
            from sdc.cli.json_output import audit_document, print_document

            doc = audit_document(verify_release(release_dir, source), release_dir)
            print_document(doc)
            if not doc["passed"]:
                raise typer.Exit(EXIT_FAILURE)
            return
        with console.status(f"auditing {escape(str(release_dir))}"):
            report = verify_release(release_dir, source)
        t = Table(title=escape(f"Audit of {release_dir}"), title_justify="left")
        t.add_column("check")
        t.add_column("result")
        t.add_column("detail")
        for c in report.checks:
            t.add_row(Text(c.name), "[green]pass[/green]" if c.ok else "[bold red]FAIL[/bold red]",
                      Text(str(c.detail)))
        console.print(t)
        failed = [c for c in report.checks if not c.ok]
        if failed or not report.ok:
            err_console.print(f"audit FAILED: {len(failed)} of {len(report.checks)} checks",
                              style="bold red")
            raise typer.Exit(EXIT_FAILURE)
        from sdc.publish.review import is_staged

        staged = (" (a release STAGED for review, not published: `sdc approve` publishes it)"
                  if is_staged(release_dir) else "")
        console.print(f"[green]audit passed[/green]: {len(report.checks)} checks{escape(staged)}")


def _audit_series(release_dirs: list[Path], as_json: bool) -> None:
    """``sdc audit --series``: the measured series risk (sdc.series.risk)."""
    with friendly_errors("audit" if as_json else None):
        from sdc.series.risk import series_risk_of_dirs

        for d in release_dirs:
            if not d.is_dir():
                raise FileNotFoundError(f"release folder {str(d)!r} does not exist")
        risk = series_risk_of_dirs(release_dirs)
        rate = risk.rate_a1("series_rate")
        cert = risk.certificate()
        ok = cert.passed
        if as_json:
            import json

            doc = {"command": "audit-series", "releases": [str(d) for d in release_dirs],
                   "passed": ok, **risk.to_dict(), "certificate": cert.to_dict()}
            print(json.dumps(doc, indent=2, default=float))
            if not ok:
                raise typer.Exit(EXIT_FAILURE)
            return
        t = Table(title="Records present in consecutive releases", title_justify="left")
        for c in ("release", "previous", "records in both", "released keys changed", "share"):
            t.add_column(c)
        for r in risk.changed.itertuples():
            t.add_row(Text(str(release_dirs[r.release])), Text(str(release_dirs[r.release - 1])),
                      f"{r.n_common:,}", f"{r.n_changed:,}", f"{r.share:.2%}")
        console.print(t)
        t = Table(title=f"Linking intruder over {risk.n_releases} releases (modal released "
                  f"cell) vs the last release alone; xi = {risk.xi}", title_justify="left")
        for c in ("t_j", "a", "targets", "series rate", "targets (last only)", "rate (last only)"):
            t.add_column(c)
        for r in risk.intruder.itertuples():
            t.add_row(str(r.t), str(r.a), f"{r.n_series:,}", f"{r.series_rate:.4f}",
                      f"{r.n_single:,}", f"{r.single_rate:.4f}")
        console.print(t)
        at = cert.at
        msg = (f"series certificate {cert.max_rate:.4f}"
               + (f" (class t_j = {at['t']}, a = {at['a']}, {at['n']:,} targets)" if at else "")
               + f", xi {risk.xi}; with one matching record, pooled: series {rate:.4f}, last "
               f"release alone {risk.rate_a1('single_rate'):.4f} (measured per class, a class "
               f"exceeds xi above xi + {cert.z:g} standard errors: docs/SERIES.md)"
               + ("" if cert.tested else "; with two releases the linking intruder is the last "
                  "release's own, which its exact certificate covers: the classes are shown, "
                  "not tested"))
        if not ok:
            for r in cert.exceeding.to_dict(orient="records"):
                err_console.print("series risk ABOVE xi in " + cert.describe(r), style="bold red")
            err_console.print("series risk ABOVE xi: " + msg, style="bold red")
            raise typer.Exit(EXIT_FAILURE)
        console.print("[green]series risk within xi[/green]: " + msg)


def report(
    release_dir: ReleaseDirArg,
    force: Annotated[bool, typer.Option("--force", help="Replace an internal/report.html that "
                                        "the release did not write (its SHA-256 differs from "
                                        "audit.json's).")] = False,
) -> None:
    """Re-render internal/report.html of a release from its risk and utility JSON."""
    with friendly_errors():
        from sdc.reports.build import render_release_report

        if not release_dir.is_dir():
            raise FileNotFoundError(f"release folder {str(release_dir)!r} does not exist")
        _refuse_foreign_report(release_dir, force)
        with console.status(f"rendering the report of {escape(str(release_dir))}"):
            path = render_release_report(release_dir)
        console.print(f"[green]Report written to[/green] {escape(str(path))}")


def _refuse_foreign_report(release_dir: Path, force: bool) -> None:
    """``sdc report`` rewrites internal/report.html only when it is absent or the one the
    release wrote (its SHA-256 is audit.json's); anything else needs --force."""
    import json

    from sdc.io.guard import OverwriteError, refuse_overwrite
    from sdc.io.write import sha256_file

    html = release_dir / "internal" / "report.html"
    if not (html.exists() or html.is_symlink()):
        return
    try:
        audit = json.loads((release_dir / "internal" / "audit.json").read_text(encoding="utf-8"))
        recorded = (audit.get("internal_files") or {}).get("report.html")
        ours = (recorded is not None and html.is_file() and not html.is_symlink()
                and sha256_file(html) == recorded)
    except (OSError, ValueError, AttributeError):
        ours = False
    if ours:
        return
    try:
        refuse_overwrite(html, force=force, option="sdc report: the page")
    except OverwriteError as e:
        raise OverwriteError(f"{e} (it is not the page the release wrote: its SHA-256 differs "
                             "from internal/audit.json's)") from None
