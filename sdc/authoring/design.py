"""``sdc design``: count the file once, search the recoding lattice, write the chosen config.

The search itself (:mod:`sdc.method.design`) works on the cell table of the keys' declared
values; this module reads the file for it (in record batches for CSV/Parquet: memory bounded by
the cell table), turns the result into a document (``--json``) and writes a node's config so that
``sdc release`` runs it unchanged.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from sdc.config.load import load_config, load_yaml
from sdc.config.model import ReleaseConfig
from sdc.method.cells import CellTable
from sdc.method.design import DesignResult, candidates, node_data, search

__all__ = ["Design", "count_declared", "design_document", "run_design", "write_node_config"]


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
    """A finished search: the loaded config, its YAML data as written, the result."""

    config_path: Path
    config: ReleaseConfig
    base: dict[str, Any]
    result: DesignResult


def run_design(config_path: str | Path, *, budget: float = 60.0, keep: float = 0.9,
               min_entropy: float = 0.5, derived: bool = True,
               progress: Callable[[int, int], None] | None = None) -> Design:
    """Load the config, count its file once and search (see :func:`sdc.method.design.search`)."""
    path = Path(config_path).expanduser()
    config = load_config(path)
    base = load_yaml(path.read_text(encoding="utf-8"))
    fine = count_declared(config)
    src = config.input_key_variables
    marg = {k: np.bincount(fine.key_codes[:, i], weights=fine.frequency,
                           minlength=src[k].size).astype(np.int64)
            for i, k in enumerate(config.key_names)}
    cands = candidates(config, marg, derived=derived)
    result = search(fine, config, base, cands, budget=budget, keep=keep,
                    min_entropy=min_entropy, progress=progress)
    return Design(path.resolve(), config, base, result)


def _recoding_of(design: Design, i: int) -> dict[str, dict[str, Any]]:
    r = design.result
    node = r.nodes[i]
    out = {}
    for k, lev in zip(r.keys, node.levels, strict=True):
        c = r.cands[k][lev]
        if c.rule is not None:
            out[k] = {"name": c.name, "recode": c.rule, "released_values": c.n_released}
    return out


def _node_doc(design: Design, i: int) -> dict[str, Any]:
    n = design.result.nodes[i]
    return {"node": i, "status": n.status, "recoding": _recoding_of(design, i),
            "partition": n.partition, "changed": n.changed, "share_changed": n.changed_share,
            "entropy_kept": n.entropy_kept, "recoding_loss": n.loss, "tvd": n.tvd,
            "tvd_recoding": n.tvd_recode, "certificate": n.certificate, "cells": n.n_cells,
            "sensitive_cells": n.n_sensitive, "prbs": n.n_prbs, "note": n.note}


def design_document(design: Design) -> dict[str, Any]:
    """Everything ``sdc design`` shows, as plain data (``--json``)."""
    r = design.result
    statuses = [n.status for n in r.nodes]
    frontier = sorted(r.frontier, key=lambda i: (r.nodes[i].changed, r.nodes[i].loss))
    return _clean({
        "config": str(design.config_path),
        "records": r.n_records,
        "xi": design.config.risk.xi,
        "entropy_declared": r.fine_entropy,
        "keep": r.keep,
        "nodes": {"total": len(r.nodes), "certified": statuses.count("certified"),
                  "refused": statuses.count("refused"), "pruned": statuses.count("pruned"),
                  "not_evaluated": statuses.count("not evaluated")},
        "complete": r.complete,
        "seconds": r.seconds,
        "candidates": {k: [c.name for c in cl] for k, cl in r.cands.items()},
        "current": _node_doc(design, r.current) if r.current is not None else None,
        "recommended": _node_doc(design, r.recommended) if r.recommended is not None else None,
        "frontier": [_node_doc(design, i) for i in frontier],
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


def write_node_config(design: Design, i: int, out: str | Path) -> Path:
    """Write node ``i`` as a release config at ``out``: the config as written with the node's
    ``recode:`` per key and its partition; relative paths rewritten for ``out``'s folder; the
    job named ``<name>-design`` and released into ``<output.dir>-design`` so it never collides
    with the current release."""
    r = design.result
    node = r.nodes[i]
    data = node_data(design.base, r.cands, node.levels, r.keys)
    if node.partition:
        data["partition"] = copy.deepcopy(node.partition)
    out = Path(out).expanduser()
    old_dir, new_dir = design.config_path.parent, out.resolve().parent
    if old_dir != new_dir:
        data["input"]["path"] = _rel(str(data["input"]["path"]), old_dir, new_dir)
        if isinstance(data.get("seed"), dict) and "file" in data["seed"]:
            data["seed"]["file"] = _rel(str(data["seed"]["file"]), old_dir, new_dir)
        if isinstance(data.get("output"), dict) and "dir" in data["output"]:
            data["output"]["dir"] = _rel(str(data["output"]["dir"]), old_dir, new_dir)
        rules = [*(data.get("partition") or {}).values(),
                 *(kv.get("recode") for kv in data["key_variables"].values())]
        for rule in rules:
            if isinstance(rule, dict) and "hierarchy" in rule:
                rule["hierarchy"] = _rel(str(rule["hierarchy"]), old_dir, new_dir)
    data["name"] = f"{data['name']}-design"
    if isinstance(data.get("output"), dict) and "dir" in data["output"]:
        data["output"]["dir"] = str(data["output"]["dir"]).rstrip("/") + "-design"
    else:
        data.setdefault("output", {})["dir"] = str(Path("releases") / data["name"])
    n = node
    head = (f"# Written by `sdc design {design.config_path.name}` (node {i}): a certified design "
            f"at xi = {design.config.risk.xi}.\n"
            f"# Expected records changed by PRAM: {n.changed:,.0f} ({n.changed_share:.1%}); "
            f"entropy of the released key table kept: {n.entropy_kept:.1%};\n"
            f"# key-table TVD (recoding + PRAM, bound): {n.tvd:.4f}; certificate "
            f"{n.certificate:.6f}.\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                   encoding="utf-8")
    return out
