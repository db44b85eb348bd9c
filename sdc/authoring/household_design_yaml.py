"""The YAML side of ``sdc design -o`` of a household file (:mod:`sdc.authoring.
household_design`): the input config's text patched in place by a round-trip load, so that its
comments and layout stay; relative paths rewritten for the new file's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["design_head", "flow_node", "patch_mapping", "plain", "rebase_paths", "without_design_head"]


def without_design_head(text: str) -> str:
    """A config written by ``sdc design`` and designed again loses its old comment block (the
    new one replaces it); every other comment stays."""
    from sdc.reports.recoding import DESIGN_MARK

    lines = text.splitlines(keepends=True)
    j = 0
    if lines and lines[0].startswith(("# Written by `sdc design", DESIGN_MARK)):
        while j < len(lines) and lines[j].startswith("#"):
            j += 1
    return "".join(lines[j:])


def rebase_paths(data: dict[str, Any], old_dir: Path, new_dir: Path) -> None:
    """Relative paths of a config mapping (input, seed, output, hierarchy files) rewritten so
    that they name the same files from ``new_dir``."""
    import os

    def rel(p: str) -> str:
        q = Path(p).expanduser()
        if q.is_absolute():
            return p
        return os.path.relpath((old_dir / q).resolve(), new_dir.resolve())

    data["input"]["path"] = rel(str(data["input"]["path"]))
    if isinstance(data.get("seed"), dict) and "file" in data["seed"]:
        data["seed"]["file"] = rel(str(data["seed"]["file"]))
    if (data.get("output") or {}).get("dir"):
        data["output"]["dir"] = rel(str(data["output"]["dir"]))
    for rule in [*(data.get("partition") or {}).values(),
                 *((kv or {}).get("recode") for kv in (data.get("key_variables") or {}).values())]:
        if isinstance(rule, dict) and "hierarchy" in rule:
            rule["hierarchy"] = rel(str(rule["hierarchy"]))


def flow_node(value: Any) -> Any:
    """A new value for the round-trip document: mappings and lists in flow style."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        m = CommentedMap((k, flow_node(v)) for k, v in value.items())
        m.fa.set_flow_style()
        return m
    if isinstance(value, list):
        q = CommentedSeq(flow_node(v) for v in value)
        q.fa.set_flow_style()
        return q
    return value


def patch_mapping(doc: Any, new: dict[str, Any]) -> None:
    """Make the round-trip mapping ``doc`` equal to ``new`` touching only what differs (keys
    added, removed or changed; nested mappings patched in place so their comments stay)."""
    for k in [k for k in doc if k not in new]:
        del doc[k]
    for k, v in new.items():
        if k in doc and isinstance(doc[k], dict) and isinstance(v, dict):
            patch_mapping(doc[k], v)
        elif k not in doc or plain(doc[k]) != v:
            doc[k] = flow_node(v)


def plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return node


def design_head(c: Any) -> tuple[str, str, str]:
    """(how, certificates, what changed) of candidate ``c`` for the comment block ``sdc design
    -o`` writes: ``risk.composition: protect`` or the two stages of a grouped file
    (:mod:`sdc.authoring.large_groups`)."""
    if c.large_groups is not None:
        from sdc.authoring import large_groups as lgs

        how, what = lgs.design_head(c)
        return how, lgs.design_certs(c), what
    comp = c.composition
    changed = [f"{k}: {r.get('name', r.get('rule'))}" for k, r in c.recoding.items()]
    certs = (
        f"Composition intruder certificate {c.certificate:.6f}; person-level certificate "
        f"{comp.get('person_certificate', 0):.4f}, household-level "
        f"{comp.get('household_level_certificate', 0):.4f}, household keys x "
        f"size {comp.get('size_level_protectable', 0):.4f} (exact)"
        + ("; exposed household sizes (fewer than 1/xi households, shown by any "
           "household release): " + ", ".join(
               f"{e['size']} ({e['households']})" for e in comp.get("exposed_sizes") or [])
           if comp.get("exposed_sizes") else "") + ".")
    bands = (c.data.get("risk") or {}).get("member_bands")
    kept = ("; a moved member keeps its band of " + "; ".join(
        f"{k} (cut at {', '.join(f'{x:g}' for x in v)})" for k, v in bands.items())
        + " (risk.member_bands)" if bands else "")
    shift = (f"; person columns' means by class moved at most {c.class_shift:.1f} SE in one "
             f"draw ({c.class_shift_at})" if getattr(c, "class_shift_at", "") else "")
    return ("risk.composition: protect", certs,
            "person keys recoded for households (" + "; ".join(changed) + "); the household "
            "stage post-randomizes rare compositions (docs/HOUSEHOLDS.md)" + kept + shift + ".")
