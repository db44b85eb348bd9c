"""``sdc design``: count the file once, search the recoding lattice, write the chosen config.

The search itself (:mod:`sdc.method.design`) works on the cell table of the keys' declared
values; this module reads the file for it (in record batches for CSV/Parquet: memory bounded by
the cell table), turns the result into a document (``--json``) and writes a node's config so that
``sdc release`` runs it unchanged.
"""

from __future__ import annotations

import copy
import os
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sdc.authoring.design_checks import keys_held_by_derived, verify_recommended
from sdc.authoring.design_node import configured_figures, node_config, plain_rule
from sdc.authoring.design_outcome import NO_OUTCOME, outcome_of, outcome_sums
from sdc.authoring.design_shifts import importance_notes, key_moves, shift_list
from sdc.authoring.design_values import value_figures, value_lines, with_value
from sdc.authoring.design_weighted import (
    DeclaredWeights,
    declared_weights,
    transition_design_name,
)
from sdc.authoring.design_yaml import (
    ConfigPatch,
    as_plain,
    body_end,
    dump_lines,
    entry_end,
    flow_style,
    flow_text,
    flow_valued,
    indent_of,
    replace_value,
    set_entry,
)
from sdc.config.load import load_config, load_yaml
from sdc.config.model import ReleaseConfig
from sdc.io.guard import write_atomic
from sdc.method.cells import CellTable
from sdc.method.design import (
    KEY_FLOOR,
    TARGET_CHANGED,
    DesignResult,
    Node,
    candidates,
    search,
)
from sdc.method.design.importance import IMPORTANT_VARIANTS
from sdc.method.designs import design_of
from sdc.reports.recoding import DESIGN_MARK

__all__ = ["Design", "configured_figures", "count_declared", "design_document", "node_config",
           "plain_rule", "run_design", "transition_design_name", "write_node_config"]


def count_declared(config: ReleaseConfig) -> CellTable:
    """The cell table of the file in the keys' declared values (no recoding), counted once:
    in record batches for CSV/Parquet, whole for SPSS/Stata."""
    from sdc.errors import InputError
    from sdc.method.cell_passes import CellCounter, cell_table
    from sdc.method.cells import cell_codes

    raw = config.declared_view()
    if raw.input.resolved_format in ("csv", "parquet"):
        from sdc.io.batches import input_batches

        try:
            counter = CellCounter()
            for frame in input_batches(raw, columns=list(raw.key_names)):
                counter.add(cell_codes(frame, raw))
            codes, counts = counter.result()
            if codes.size == 0:
                raise InputError(f"input file {str(raw.input_path)!r} has no records")
            return cell_table(codes, counts, raw)
        except InputError as e:
            if "62-bit" not in str(e):
                raise
    from sdc.io.read import read_input
    from sdc.method.partition import partition_frame

    return partition_frame(read_input(raw), raw).cells


@dataclass
class Design:
    """A finished search: the loaded config, its YAML data as written, the result, and the
    recommendation re-certified with the config's own transition design (``configured``:
    :func:`configured_figures`; None under NZY's uniform design, which the search uses);
    ``weights``: a weighted job's weights of every declared cell."""

    config_path: Path
    config: ReleaseConfig
    base: dict[str, Any]
    result: DesignResult
    configured: dict[str, Any] | None = None
    held: dict[str, list[str]] | None = None
    refused: list[str] | None = None
    marginals: dict[str, np.ndarray] | None = None   # records per declared value, per key
    #: the outcome whose group means each key's shift (SE) follows (None: no utility.analyses)
    outcome: str | None = None
    weights: DeclaredWeights | None = None

    def values(self, key: str, rule: dict[str, Any] | None) -> dict[str, Any] | None:
        """The released-value figures of ``key`` under ``rule`` (:mod:`.design_values`)."""
        if self.marginals is None or key not in self.marginals:
            return None
        out = self.config.output
        return value_figures(key, self.config.input_key_variables[key], rule,
                             self.marginals[key], out.formats if out is not None else ())


def run_design(config_path: str | Path, *, budget: float = 60.0, keep: float = KEY_FLOOR,
               min_entropy: float = 0.5, derived: bool = True, partitions: bool = True,
               target: float = TARGET_CHANGED,
               progress: Callable[[int, int], None] | None = None,
               release_checks: bool = True) -> Design:
    """Load the config, count its file once and search (see :func:`sdc.method.design.search`;
    ``keep``: the share of its own entropy every key of the recommended design keeps).
    ``release_checks``: keep the keys of ``derived:`` columns as declared and plan the
    recommendation through the pipeline (:mod:`sdc.authoring.design_checks`); ``sdc init``'s
    design step turns them off (it drops the derived columns a recoding breaks instead)."""
    path = Path(config_path).expanduser()
    config = load_config(path)
    base = load_yaml(path.read_text(encoding="utf-8"))
    if config.input.household_id is not None:  # both stages: sdc.authoring.household_design
        from sdc.authoring.household_design_run import run_household_design

        return run_household_design(path, config, base)  # type: ignore[return-value]
    fine = count_declared(config)
    src = config.input_key_variables
    marg = {k: np.bincount(fine.key_codes[:, i], weights=fine.frequency,
                           minlength=src[k].size).astype(np.int64)
            for i, k in enumerate(config.key_names)}
    cands = candidates(config, marg, derived=derived)
    weights = declared_weights(config, fine) if design_of(config).weighted else None
    held = keys_held_by_derived(config) if release_checks else {}
    y = outcome_of(config)
    moments = outcome_sums(config, fine, y) if y is not None else None
    for k in held:  # the declared values only (the first candidate is the key as declared)
        cands[k] = [c for c in cands[k] if c.rule is None] or cands[k][:1]
    result = search(fine, config, base, cands, budget=budget, keep=keep,
                    min_entropy=min_entropy, partitions=partitions, target=target,
                    progress=progress, weights=None if weights is None else weights.pair,
                    outcome=moments)
    design = Design(path.resolve(), config, base, result, held=held or None, marginals=marg,
                    outcome=y, weights=weights)
    plan = None
    if release_checks:
        checked = verify_recommended(design, node_config)
        design.refused = checked.refused
        plan = checked.plan if checked.node == result.recommended else None
    if result.recommended is not None:
        design.configured = configured_figures(design, result.recommended, plan=plan)
    return design


def _recoding_of(design: Design, i: int) -> dict[str, dict[str, Any]]:
    r = design.result
    node = r.nodes[i]
    out = {}
    for k, lev in zip(r.keys, node.levels, strict=True):
        c = r.cands[k][lev]
        if c.rule is not None:
            fig = design.values(k, c.rule)
            out[k] = {"name": c.name, "recode": plain_rule(with_value(c.rule, fig)),
                      "values": fig,
                      "released_values": c.n_released, "entropy_kept": c.kept,
                      "tvd_uniform_spread": c.tvd}
    return out


def _node_doc(design: Design, i: int) -> dict[str, Any]:
    n = design.result.nodes[i]
    return {"node": i, "status": n.status, "recoding": _recoding_of(design, i),
            "partition_variant": n.variant, "partition": n.partition, "changed": n.changed,
            "share_changed": n.changed_share, "entropy_kept": n.entropy_kept,
            "key_entropy_kept": n.key_kept, "min_key_entropy_kept": n.min_key_kept,
            "key_tvd_uniform_spread": n.key_tvd,
            "displacement": n.displacement, "move_distortion": n.displacement_sd,
            "key_change_when_moved": n.key_change, "keys_changed_when_moved": n.keys_changed,
            "key_moves": key_moves(n, design.result.keys),
            "recoding_loss": n.loss, "tvd_bound": n.tvd,
            "tvd_recoding": n.tvd_recode, "certificate": n.certificate, "cells": n.n_cells,
            "sensitive_cells": n.n_sensitive, "prbs": n.n_prbs, "note": n.note,
            **({"configured": None if n.configured is None else {
                k: v for k, v in n.configured.items() if k != "xi"},
                "balanced": n.balanced, "changed_nzy": n.nzy_changed}
               if design.result.weighted else {})}


def design_document(design: Design) -> dict[str, Any]:
    """Everything ``sdc design`` shows, as plain data (``--json``)."""
    if hasattr(design, "document"):  # a household file's design
        return _clean(design.document())
    r = design.result
    statuses = [n.status for n in r.nodes]
    frontier = sorted(r.frontier, key=lambda i: (r.nodes[i].changed, r.nodes[i].loss))
    return _clean({
        "config": str(design.config_path),
        "records": r.n_records,
        "xi": design.config.risk.xi,
        "entropy_declared": r.fine_entropy,
        "keep": r.keep,
        "key_floor": r.keep,
        "target_changed": r.target,
        "warn_changed": r.warn,
        "verdict": r.verdict,
        "given_up": r.given_up,
        "held_by_derived": design.held or {},
        "refused_by_release_checks": design.refused or [],
        "nodes": {"total": len(r.nodes), "certified": statuses.count("certified"),
                  "refused": statuses.count("refused"), "pruned": statuses.count("pruned"),
                  "not_evaluated": statuses.count("not evaluated")},
        "complete": r.complete,
        "seconds": r.seconds,
        "candidates": {k: [c.name for c in cl] for k, cl in r.cands.items()},
        "current": _node_doc(design, r.current) if r.current is not None else None,
        "recommended": _node_doc(design, r.recommended) if r.recommended is not None else None,
        "recommended_configured": design.configured,
        "frontier": [_node_doc(design, i) for i in frontier],
        "weighted": r.weighted,
        "importance": r.importance or None,
        "importance_notes": importance_notes(r),
        "outcome": design.outcome,
        "outcome_note": None if design.outcome is not None else NO_OUTCOME,
    })


def _clean(o: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN to None."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and o != o:
        return None
    return o


def _rel(p: str, old_dir: Path, new_dir: Path) -> str:
    q = Path(p).expanduser()
    if q.is_absolute():
        return str(q)
    return os.path.relpath(os.path.normpath(old_dir / q), new_dir)


def _seed_path(seed_file: str, name: str) -> str:
    """A new seed file next to the old one, named after the new job."""
    old = Path(seed_file)
    return str(old.with_name(f"{name}.seed")) if old.name else f"secrets/{name}.seed"


def _head(design: Design, i: int, changes: list[str], seed_note: str) -> str:
    r = design.result
    n = r.nodes[i]
    cur = r.nodes[r.current] if r.current is not None else None
    lines = [
        f"{DESIGN_MARK} {design.config_path.name}` (node {i}, {n.variant} partition): a "
        f"certified design at xi = {design.config.risk.xi}.",
        f"# Why: {r.verdict}.",
    ]
    if cur is not None and cur.changed_share == cur.changed_share:
        lines.append(f"# Expected records changed by PRAM: {cur.changed:,.0f} "
                     f"({cur.changed_share:.1%}) as the config was -> {n.changed:,.0f} "
                     f"({n.changed_share:.1%}) with this design.")
    else:
        lines.append(f"# Expected records changed by PRAM: {n.changed:,.0f} "
                     f"({n.changed_share:.1%}).")
    kept = ", ".join(f"{k} {v:.0%}" for k, v in n.key_kept.items())
    lines.append(f"# Each key keeps of its own entropy: {kept} (floor {r.keep:.0%}); the key "
                 f"table keeps {n.entropy_kept:.1%}.")
    if n.displacement:
        disp = ", ".join(f"{k} {v:.2f}" for k, v in n.displacement.items())
        lines.append(f"# Mean |change| of a moved record's ordered keys (declared units): {disp}.")
    if n.key_change:
        ch = ", ".join(f"{k} {v:.0%}" for k, v in n.key_change.items())
        lines.append(f"# A moved record changes {n.keys_changed:.2f} keys on average ({ch}).")
    moves = key_moves(n, r.keys)
    if any(m["records_changed"] for m in moves.values()):
        each = ", ".join(f"{k} {m['records_changed']:.1%} ({m['partition']})"
                         for k, m in moves.items() if m["records_changed"] is not None)
        lines.append(f"# Records whose key PRAM changes (their relations with other columns "
                     f"are diluted by about as much): {each}.")
    if shift_list(moves):
        lines.append(f"# Expected shift of mean {design.outcome} by each key's category, "
                     f"largest, in SE: {shift_list(moves)}.")
    if i == r.recommended:
        lines += [f"# {note}." for note in importance_notes(r)]
    lines.append(f"# Key-table TVD bound (recoding + PRAM): {n.tvd:.4f}; certificate "
                 f"{n.certificate:.6f}.")
    if changes:
        lines.append("# What changed:")
        lines += [f"#   - {c}" for c in changes]
    for g in r.given_up:
        m = re.search(r"node (\d+)", g)
        if m:  # name the design, not its node number
            j = int(m.group(1))
            what = "; ".join(f"{k}: {v['name']}" for k, v in _recoding_of(design, j).items())
            g = g.replace(m.group(0), f"with {what or 'no recoding'}")
        lines.append(f"# Not reached: {g}.")
    lines.append(f"# {seed_note}")
    wrapped: list[str] = []
    for line in lines:
        body = line[2:] if line.startswith("# ") else line.lstrip("#")
        lead = "#   " if body.startswith("  - ") else "# "
        wrapped += textwrap.wrap(body, width=94, initial_indent="# ",
                                 subsequent_indent=lead + ("    " if lead == "#   " else ""),
                                 break_on_hyphens=False, break_long_words=False) or ["#"]
    return "\n".join(wrapped) + "\n"


def write_node_config(design: Design, i: int, out: str | Path) -> Path:
    """Write node ``i`` as a release config at ``out``: the input config's text, edited where
    the design differs, so every comment, the layout and flow-style lists of the input are
    kept (lines located with ruamel.yaml's round-trip loader); each key's ``recode:`` and the
    partition are the node's (new values in flow style, whole numbers as ints); relative paths
    are rewritten for ``out``'s folder; the job is named ``<name>-design``, released into
    ``<output.dir>-design`` and gets its own seed file (a new seed starts a new series,
    docs/SERIES.md); a comment block at the top says what changed and why. The overwrite
    guard (:func:`sdc.io.guard.refuse_overwrite`) is the caller's."""
    if hasattr(design, "write"):  # a household file's design
        return design.write(i, out)
    from ruamel.yaml import YAML

    node = design.result.nodes[i]
    text = _strip_old_head(design.config_path.read_text(encoding="utf-8"))
    data = YAML(typ="rt").load(text)
    patch = ConfigPatch(text)
    changes = _recode_edits(design, node, data, patch)
    changes += _partition_edits(node, data, patch)
    out = Path(out).expanduser()
    old_dir, new_dir = design.config_path.parent, out.resolve().parent
    name = f"{data['name']}-design"
    nline = data.lc.key("name")[0]
    patch.replace(nline, entry_end(patch.lines, nline), dump_lines({"name": name}))
    seed_note = _seed_edit(data, patch, name, old_dir, new_dir)
    _path_edits(data, patch, name, old_dir, new_dir)
    body = _drop_draft_checks(patch.text()) if changes else patch.text()
    write_atomic(out, _head(design, i, changes, seed_note) + body)
    return out


def _recode_edits(design: Design, node: Node, data: Any, patch: ConfigPatch) -> list[str]:
    """Set every key's ``recode:`` to the node's (a one-line key becomes a block); returns
    what changed, one line per key changed (with its released values' figures)."""
    r = design.result
    changes: list[str] = []
    kvs = data["key_variables"]
    for k, lev in zip(r.keys, node.levels, strict=True):
        c = r.cands[k][lev]
        kv = kvs[k]
        old = as_plain(kv.get("recode")) if "recode" in kv else None
        fig = design.values(k, c.rule)
        new = plain_rule(with_value(c.rule, fig)) if c.rule is not None else None
        if old == new:
            continue
        line = kvs.lc.key(k)[0]
        if flow_valued(patch.lines[line]) or kv.fa.flow_style():
            # a one-line key ({range: [0, 91]}) becomes a block with the recode on its own line
            block = {str(a): (flow_style(as_plain(b)) if isinstance(b, dict | list) else b)
                     for a, b in kv.items() if a != "recode"}
            if new is not None:
                block["recode"] = flow_style(new)
            patch.replace(line, entry_end(patch.lines, line),
                          dump_lines({k: block}, indent_of(patch.lines[line])))
        else:
            set_entry(patch, kv, "recode", new, indent_of(patch.lines[line]) + 2,
                      body_end(patch, line))
        changes.append(f"{k}: recoding removed (the declared values)" if new is None else
                       f"{k}: {c.name} ({c.n_released} released values, {c.kept:.0%} of its "
                       "own entropy kept)")
        changes += value_lines(k, fig) if new is not None and fig else []
    return changes


def _partition_edits(node: Node, data: Any, patch: ConfigPatch) -> list[str]:
    """Set ``partition:`` to the node's (entry by entry in a block mapping, else the whole
    entry; after ``key_variables`` when there was none) and ``risk.merge_along`` with it;
    returns what changed."""
    new_part = plain_rule(copy.deepcopy(node.partition or {}))
    old_part = as_plain(data.get("partition") or {})
    if new_part == old_part:
        return []
    part = data.get("partition")
    if "partition" in data and isinstance(part, dict) and part and new_part and \
            not flow_valued(patch.lines[data.lc.key("partition")[0]]):
        pline = data.lc.key("partition")[0]
        last = body_end(patch, pline)
        for v in part:
            if v not in new_part:
                set_entry(patch, part, v, None, 2, last)
        for v, rule in new_part.items():
            if old_part.get(v) != rule:
                set_entry(patch, part, v, rule, 2, last)
    elif "partition" in data:
        pline = data.lc.key("partition")[0]
        patch.replace(pline, entry_end(patch.lines, pline),
                      dump_lines({"partition": {v: rl if isinstance(rl, str) else flow_style(rl)
                                                for v, rl in new_part.items()}
                                  or flow_style({})}))
    else:
        kline = data.lc.key("key_variables")[0]
        patch.replace(entry_end(patch.lines, kline), entry_end(patch.lines, kline),
                      dump_lines({"partition": {v: rl if isinstance(rl, str) else flow_style(rl)
                                                for v, rl in new_part.items()}}))
    return ["partition: " + (", ".join(
        f"{v}: {rule if isinstance(rule, str) else flow_text(rule)}"
        for v, rule in new_part.items()) or "none") + f" ({node.variant}; PRAM moves a "
        "record only within its partition set, small ones merged)",
        *_merge_along_edit(node, data, patch)]


def _merge_along_edit(node: Node, data: Any, patch: ConfigPatch) -> list[str]:
    """Set ``risk.merge_along`` to the node's partition variant's merge order (removed when it
    has none); returns what changed."""
    risk = data.get("risk")
    if not (node.variant != "config" and isinstance(risk, dict) and (
            "merge_along" in risk or node.merge_along)):
        return []
    rline = data.lc.key("risk")[0]
    if flow_valued(patch.lines[rline]):
        plain = {a: b for a, b in as_plain(risk).items() if a != "merge_along"}
        if node.merge_along:
            plain["merge_along"] = list(node.merge_along)
        patch.replace(rline, entry_end(patch.lines, rline),
                      dump_lines({"risk": flow_style(plain)}))
    else:
        set_entry(patch, risk, "merge_along", node.merge_along, 2, body_end(patch, rline))
    return [f"risk.merge_along: {node.merge_along} (small PRBs merged along "
            + ("the least important keys first: the important keys move least)"
               if node.variant in IMPORTANT_VARIANTS else
               "nominal keys first: ordered keys move least)")
            if node.merge_along
            else "risk.merge_along removed (the merge order follows the new partition)"]


def _section(data: Any, patch: ConfigPatch, key: str) -> tuple[int, int]:
    """The lines (start, end) of the top-level entry ``key``."""
    line = data.lc.key(key)[0]
    return line, entry_end(patch.lines, line)


def _seed_edit(data: Any, patch: ConfigPatch, name: str, old_dir: Path,
               new_dir: Path) -> str:
    """A seed file becomes a new one named after the job ``name`` (a new series); returns the
    note on the seed for the comment block."""
    seed = data.get("seed")
    if not (isinstance(seed, dict) and "file" in seed):
        return ("Seed: the config's whole-number seed is kept (tests and demos only); a real "
                "job gets `seed: {file: ...}`, and a new seed starts a new series "
                "(docs/SERIES.md).")
    new_seed = _seed_path(str(seed["file"]), name)
    if old_dir != new_dir:
        new_seed = _rel(new_seed, old_dir, new_dir)
    replace_value(patch, *_section(data, patch, "seed"), str(seed["file"]), new_seed)
    return (f"Seed: a new seed file ({new_seed}, created by the first release): a new "
            "seed starts a new release series (docs/SERIES.md); releases of this job "
            "are not linked to the original job's.")


def _path_edits(data: Any, patch: ConfigPatch, name: str, old_dir: Path,
                new_dir: Path) -> None:
    """Relative paths (input, hierarchies, output) rewritten for the new config's folder;
    the output folder gets ``-design`` (``releases/<name>`` when the config had none)."""
    if old_dir != new_dir:
        old_in = str(data["input"]["path"])
        replace_value(patch, *_section(data, patch, "input"), old_in,
                      _rel(old_in, old_dir, new_dir))
        for v, rule in [*(data.get("partition") or {}).items(),
                        *((k, kv.get("recode")) for k, kv in data["key_variables"].items())]:
            if isinstance(rule, dict) and "hierarchy" in rule:
                h = str(rule["hierarchy"])
                where = _section(data, patch, "partition") if v in (
                    data.get("partition") or {}) and rule is data["partition"][v] \
                    else _section(data, patch, "key_variables")
                replace_value(patch, *where, h, _rel(h, old_dir, new_dir))
    outp = data.get("output")
    if isinstance(outp, dict) and "dir" in outp:
        old_out = str(outp["dir"])
        new_out = (_rel(old_out, old_dir, new_dir) if old_dir != new_dir else old_out)
        replace_value(patch, *_section(data, patch, "output"), old_out,
                      new_out.rstrip("/") + "-design")
    else:
        patch.replace(len(patch.lines), len(patch.lines),
                      dump_lines({"output": {"dir": str(Path("releases") / name)}}))


_DRAFT_CHECKS = ("# suggested by sdc init and checked on the data:", "# checked: certificate")


def _drop_draft_checks(text: str) -> str:
    """``sdc init``'s figures of the draft (partition sets, PRBs, certificate) no longer hold once
    the design changed a recoding or the partition: those comment lines go (the design's own
    figures are in the block at the top); every other comment stays."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.lstrip().startswith(_DRAFT_CHECKS))


def _strip_old_head(text: str) -> str:
    """A config written by ``sdc design`` and designed again: its old comment block goes (the
    new one replaces it); every other comment stays."""
    lines = text.splitlines(keepends=True)
    if not lines or not lines[0].startswith(DESIGN_MARK):
        return text
    j = 0
    while j < len(lines) and lines[j].startswith("#"):
        j += 1
    return "".join(lines[j:])
