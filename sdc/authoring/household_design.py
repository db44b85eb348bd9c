"""The design search of a household file (``sdc design``, docs/HOUSEHOLDS.md "Design").

A household file is released in two stages and refused when the household stage holds a rare
household cell no PRB can certify (k = 1), or when the composition intruder exceeds xi
(``risk.households: fail``, the default). The person-file search (:mod:`sdc.method.design`)
models neither, so a household config is searched here:

- **the config as written** is evaluated as ``sdc release`` evaluates it: both stages planned
  (refused: the household stage's or the person stage's message), then released once in memory
  and the composition intruder measured (refused above xi);
- **candidates** release with ``risk.composition: protect`` (the household stage keyed on
  HK x composition, :mod:`sdc.method.household_composition`), the person keys recoded for
  households (:mod:`sdc.authoring.household_options`: 2 to 4 quantile bands and the standard
  age bands of a numeric key, a categorical key as declared or with its rare categories
  grouped), with near compositions (``destinations: near``) and ``theta: calibrated``,
  at most
  :data:`~sdc.method.household_composition.MAX_CLASSES` person classes. Each is planned
  (:func:`~sdc.method.household_composition.composition_plan`: rare household cells go through
  PRBs of their size, merged along the household keys, or the certified singular draw), drawn
  once (records and households changed) and measured (the composition intruder certified, the
  person-level intruder by Monte Carlo); only candidates with both <= xi are certified.
- **recommended**: among the certified candidates changing at most :data:`TARGET` of the
  records, the one with the most age (banded person key) classes, then the fewest records
  changed; when none changes so few, the one changing the fewest records, the release
  **without the group id** among them (a person file: the household id dropped, every key a
  person key; large groups such as enterprises, where every group's composition is unique).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sdc.authoring.household_options import (
    band_candidates,
    person_key_options,
    reassembling_columns,
    without_group_id,
)
from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.designs import design_of

__all__ = ["HouseholdCandidate", "HouseholdDesign", "band_candidates", "evaluate_household_designs",
           "run_household_design"]

N_SIM = 10
"""Monte Carlo replays of the person-level intruder per candidate."""

NEAR = {"neighbours": 4}
"""The near design of every candidate (METHOD 7.12 under protect: 4 destinations, the spread
floor): a moved household takes a composition one or two members away in its own household
keys (docs/HOUSEHOLDS.md "Near compositions")."""

TARGET = 0.15
"""Recommended: the certified candidate with the most classes of its banded person keys (age)
among those changing at most this share of the records, then the fewest records changed;
when none changes so few, the one changing the fewest."""


@dataclass
class HouseholdCandidate:
    """One evaluated household design: ``data`` the config as a YAML mapping, ``recoding``
    per person key (name, rule, released values), its status and figures."""

    data: dict[str, Any]
    recoding: dict[str, dict[str, Any]]
    status: str = "not evaluated"
    note: str = ""
    certificate: float = float("nan")
    changed: int = 0
    households_changed: int = 0
    n_records: int = 0
    entropy_kept: float = float("nan")
    composition: dict[str, Any] = field(default_factory=dict)
    #: the release without the household (group) id: a person file
    without_group_id: bool = False
    #: records changed in expectation under the candidate's plan, and the variance of one
    #: release's count (seed-free: :mod:`sdc.method.expected_changes`); ``changed`` is one
    #: draw's (seed 0)
    expected_changed: float = float("nan")
    changed_var: float = float("nan")

    @property
    def share_changed(self) -> float:
        """The expected share of records changed (one draw's when no expectation is known)."""
        e = self.expected_changed if self.expected_changed == self.expected_changed \
            else self.changed
        return e / self.n_records if self.n_records else 0.0

    @property
    def sd_changed(self) -> float:
        return float(np.sqrt(self.changed_var)) if self.changed_var >= 0 else float("nan")


def _entropy(rows: np.ndarray) -> float:
    _, c = np.unique(rows, axis=0, return_counts=True)
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def _evaluate(frame: pd.DataFrame, cand: HouseholdCandidate, base_dir: Path,
              declared_entropy: float) -> None:
    """Plan, draw once and measure ``cand`` on the declared-value ``frame``."""
    from sdc.config.load import parse_config
    from sdc.io.recode import recode_frame
    from sdc.method.cells import encode_key
    from sdc.method.household_batches import household_identity
    from sdc.method.household_composition import (
        composition_plan,
        composition_stage,
        composition_table,
        expected_persons_changed,
        person_classes,
        realize_compositions,
    )
    from sdc.method.households import household_codes, person_config
    from sdc.reports.households import protected_composition_risk

    cfg = parse_config(copy.deepcopy(cand.data), base_dir, source="household design")
    f = recode_frame(frame, cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = composition_table(code, pc, first.size, n_cls)
    hk = np.column_stack([encode_key(f[k].iloc[first], k, cfg.key_variables[k])
                          for k in cfg.household_keys])
    x_h = None  # risk.weighted: the composition stage balanced on the members' summed weights
    if design_of(cfg).needs_weights:
        from sdc.method.household_weights import household_weights_of

        x_h = household_weights_of(f[cfg.input.weight], code, first.size)
    cp = composition_plan(hk, tab, cfg, x_h)
    cand.expected_changed, cand.changed_var = expected_persons_changed(cp, tab)
    ident = household_identity(f.iloc[first], cfg)
    st = composition_stage(ident, hk, tab, cfg, 0, x_h)
    from sdc.method.draws import record_identity

    new = realize_compositions(code, pc, record_identity(f, person_config(cfg)),
                               tab.counts[tab.household], tab.counts[st.released_composition])
    hk_moved = (st.released_codes[:, :-1] != hk).any(axis=1)[code]
    cand.changed = int((hk_moved | (new != pc)).sum())
    cand.households_changed = int(st.changed.sum())
    cand.n_records = int(len(f))
    comp = protected_composition_risk(ident, hk, tab, cfg, 1, n_sim=N_SIM,
                                      certificate=(cp.certificate, cp.certificate_at),
                                      weight=x_h)
    cand.composition = {"certificate": comp["certificate"],
                        "max_class_estimate": comp["max_class_estimate"],
                        "person_max_cell_estimate": comp["person"]["max_cell_estimate"],
                        "person_certificate": comp["person"]["certificate"],
                        "household_level_certificate": comp["household_level"]["certificate"],
                        "singular_sizes": cp.singular_sizes}
    cand.certificate = float(cp.certificate)
    keys = np.column_stack([encode_key(f[k], k, cfg.key_variables[k]) for k in cfg.key_names])
    cand.entropy_kept = _entropy(keys) / declared_entropy if declared_entropy else 1.0
    if comp["exceeds_xi"]:
        cand.status = "refused"
        cand.note = "; ".join(
            f"{n} certificate {v:.4f} > xi (exact)" for n, v in (
                ("person-level", comp["person"]["certificate"]),
                ("household-level", comp["household_level"]["certificate"]),
                ("composition", comp["certificate"])) if v > cfg.risk.xi + 1e-9)
    else:
        cand.status = "certified"


def evaluate_household_designs(frame: pd.DataFrame, config: ReleaseConfig,
                               base: dict[str, Any], base_dir: Path
                               ) -> tuple[HouseholdCandidate, list[HouseholdCandidate]]:
    """The config as written and the ``risk.composition: protect`` candidates, evaluated
    (see the module docstring) on ``frame`` (the input in its declared values). Returns
    (as written, candidates in order of records changed, certified first)."""
    from sdc.method.cells import encode_key

    kvs = config.input_key_variables
    declared = np.column_stack([encode_key(frame[k], k, kvs[k]) for k in config.key_names])
    declared_entropy = _entropy(declared)
    current = HouseholdCandidate(copy.deepcopy(base), {}, n_records=len(frame))
    _evaluate_current(frame, config, current)
    options = person_key_options(frame, config)
    from sdc.method.household_composition import MAX_CLASSES

    cands = []
    for combo in itertools.product(*options):
        if int(np.prod([c[2] for c in combo])) > MAX_CLASSES:
            continue
        data = copy.deepcopy(base)
        recoding = {}
        for k, (name, rule, n) in zip(config.person_keys, combo, strict=True):
            if rule is None:
                continue
            data["key_variables"][k] = {**data["key_variables"][k], "recode": rule}
            (data.get("partition") or {}).pop(k, None)
            recoding[k] = {"name": name, "recode": rule, "released_values": n}
        risk = dict(data.get("risk") or {})
        risk.update({"composition": "protect"})
        if risk.get("destinations") != "near":  # a moved household to a near composition
            risk.update({"destinations": "near", "near": dict(NEAR)})
        risk["theta"] = "calibrated"  # the smallest certified theta: fewer households move
        risk.pop("households", None)  # the default: fail
        data["risk"] = risk
        cand = HouseholdCandidate(data, recoding)
        try:
            _evaluate(frame, cand, base_dir, declared_entropy)
        except (InputError, SmallBlockError) as e:
            cand.status, cand.note = "refused", str(e).splitlines()[0][:200]
        cands.append(cand)
        if cand.status != "certified" and risk.get("destinations") == "near":
            # near compositions can leave a person alone with its class where only its own
            # household can bring it (exact person-level certificate 1, issue 44): the same
            # recoding with NZY's uniform destinations
            uni = copy.deepcopy(data)
            uni["risk"].pop("destinations", None)
            uni["risk"].pop("near", None)
            alt = HouseholdCandidate(uni, recoding)
            try:
                _evaluate(frame, alt, base_dir, declared_entropy)
            except (InputError, SmallBlockError) as e:
                alt.status, alt.note = "refused", str(e).splitlines()[0][:200]
            cands.append(alt)
    cands.sort(key=lambda c: (c.status != "certified", c.share_changed))
    cands.append(_without_group_id(frame, config, base, base_dir))
    return current, cands


def _without_group_id(frame: pd.DataFrame, config: ReleaseConfig, base: dict[str, Any],
                      base_dir: Path) -> HouseholdCandidate:
    """The release without the group id (:func:`~sdc.authoring.household_options.
    without_group_id`), released once in memory as a person file."""
    from sdc.config.load import parse_config
    from sdc.io.recode import recode_frame

    cand = HouseholdCandidate(without_group_id(base), {}, n_records=len(frame),
                              without_group_id=True)
    hid = config.input.household_id
    gone = {hid, config.input.id_column, *(cand.data["input"].get("drop") or [])}
    released = [c for c in frame.columns if c not in gone]
    const, singled, groups = reassembling_columns(frame, hid, released)
    if singled:
        shown = ", ".join(const[:6]) + (f" (+{len(const) - 6} more)" if len(const) > 6 else "")
        cand.status = "refused"
        cand.note = (f"without the group id {hid}: {shown} have one value per household and "
                     f"single out {singled:,} of {groups:,} households of 2+ members, so the "
                     "households can be put back together; list them under input.drop to "
                     "release without the group id")
        return cand
    try:
        cfg = parse_config(copy.deepcopy(cand.data), base_dir, source="household design")
        res = _released_in_memory(recode_frame(frame, cfg), cfg)
    except (InputError, SmallBlockError, ValueError) as e:
        cand.status, cand.note = "refused", str(e).splitlines()[0][:200]
        return cand
    cand.certificate = float(res.certificate)
    cand.changed = int(res.n_changed)
    from sdc.method.expected_changes import person_changes
    from sdc.method.plan import draw_plan

    cand.expected_changed, cand.changed_var = person_changes(draw_plan(res.plan, cfg))
    cand.entropy_kept = 1.0
    cand.status = "certified"
    cand.note = (f"without the group id {hid}: a person file (no released column has one "
                 "value per household that singles a household out)")
    return cand


def _evaluate_current(frame: pd.DataFrame, config: ReleaseConfig,
                      cur: HouseholdCandidate) -> None:
    """The config as written, as ``sdc release`` judges it: released once in memory, refused
    by the household or person stage (k = 1 rare household cells) or by the composition
    intruder (``risk.households: fail``)."""
    from sdc.io.recode import recode_frame

    if config.risk.composition == "protect":  # already protected: judged as a candidate
        from sdc.method.cells import encode_key

        kvs = config.input_key_variables
        declared = np.column_stack([encode_key(frame[k], k, kvs[k]) for k in config.key_names])
        try:
            _evaluate(frame, cur, config.base_dir, _entropy(declared))
        except (InputError, SmallBlockError) as e:
            cur.status, cur.note = "refused", str(e).splitlines()[0][:240]
        return
    try:
        res = _released_in_memory(recode_frame(frame, config), config)
    except (InputError, SmallBlockError) as e:
        cur.status, cur.note = "refused", str(e).splitlines()[0][:240]
        return
    cur.certificate = float(res.certificate)
    cur.changed = int(res.n_changed)
    cur.expected_changed = float(res.households.expected_changed)
    cur.changed_var = float(res.households.expected_changed_var)
    cur.households_changed = int(res.households.changed.sum())
    comp = res.households.composition
    cur.composition = {"max_class_estimate": comp["max_class_estimate"]}
    if comp["exceeds_xi"] and config.risk.households == "fail":
        cur.status = "refused"
        cur.note = (f"composition intruder {comp['max_class_estimate']:.4f} > xi (measured): "
                    "`sdc release` refuses it (risk.households: fail)")
    else:
        cur.status = "certified"
    cur.entropy_kept = 1.0


def _released_in_memory(frame: pd.DataFrame, config: ReleaseConfig) -> Any:
    """``frame`` (released values) released with seed 0 by the one pipeline
    (:mod:`sdc.pipeline.run`) on the in-memory runner, the public files into a throw-away
    folder: the outcome as ``sdc release`` computes it, the composition intruder included."""
    import tempfile

    from sdc.executors import get_executor

    with tempfile.TemporaryDirectory(prefix="sdc-design-") as tmp:
        return get_executor("memory").release(config, 0, Path(tmp), frame=frame)


@dataclass
class _Result:
    recommended: int | None


@dataclass
class HouseholdDesign:
    """``sdc design`` of a household file: the config as written (``current``) and the
    candidates; ``result.recommended`` the index of the recommended one (None: none
    certified). ``document()`` and ``write()`` are what :mod:`sdc.authoring.design` calls."""

    config_path: Path
    config: ReleaseConfig
    base: dict[str, Any]
    current: HouseholdCandidate
    candidates: list[HouseholdCandidate]
    result: _Result

    def _doc(self, i: int, c: HouseholdCandidate) -> dict[str, Any]:
        return {"node": i, "status": c.status, "recoding": c.recoding,
                "changed": c.changed, "share_changed": c.share_changed,
                "expected_changed": c.expected_changed, "sd_changed": c.sd_changed,
                "households_changed": c.households_changed,
                "entropy_kept": c.entropy_kept, "tvd": float("nan"),
                "certificate": c.certificate, "composition": c.composition, "note": c.note,
                "risk": {k: v for k, v in (c.data.get("risk") or {}).items()},
                "without_group_id": c.without_group_id}

    def document(self) -> dict[str, Any]:
        cert = [i for i, c in enumerate(self.candidates) if c.status == "certified"]
        rec = self.result.recommended
        cur = self._doc(-1, self.current)
        return {
            "config": str(self.config_path), "records": self.current.n_records,
            "xi": self.config.risk.xi, "household_file": True,
            "entropy_declared": float("nan"), "keep": 0.0,
            "nodes": {"total": len(self.candidates), "certified": len(cert),
                      "refused": len(self.candidates) - len(cert), "pruned": 0,
                      "not_evaluated": 0},
            "complete": True, "seconds": 0.0, "candidates": {},
            "current": cur,
            "recommended": None if rec is None else self._doc(rec, self.candidates[rec]),
            "frontier": [self._doc(i, self.candidates[i]) for i in cert],
        }

    def write(self, i: int, out: str | Path) -> Path:
        """The candidate's config at ``out``: the input config's text edited by a round-trip
        YAML load (comments, layout, flow lists and ints of the input kept; changed values in
        flow style), a comment block on what changed and why, named ``<name>-design``,
        released into ``<output.dir>-design``, with its own seed file (a new seed starts a new
        series, docs/SERIES.md); relative paths rewritten for ``out``'s folder."""
        import io

        from ruamel.yaml import YAML

        from sdc.authoring.design_yaml import quote_ambiguous
        from sdc.io.guard import write_atomic
        from sdc.method.expected_changes import changes_text

        c = self.candidates[i]
        new = copy.deepcopy(c.data)
        out = Path(out).expanduser()
        old_dir, new_dir = self.config_path.parent, out.resolve().parent
        name = f"{new['name']}-design"
        new["name"] = name
        seed = new.get("seed")
        if isinstance(seed, dict) and "file" in seed:  # a new seed file next to the old one
            old_seed = Path(str(seed["file"]))
            seed["file"] = str(old_seed.with_name(f"{name}.seed")) if old_seed.name else \
                f"secrets/{name}.seed"
        outdir = (new.get("output") or {}).get("dir")
        if outdir:
            new["output"]["dir"] = str(outdir).rstrip("/") + "-design"
        if old_dir != new_dir:
            _rebase_paths(new, old_dir, new_dir)
        yaml = YAML(typ="rt")
        yaml.width = 100
        doc = yaml.load(_without_design_head(self.config_path.read_text(encoding="utf-8")))
        _patch_mapping(doc, new)
        quote_ambiguous(doc)  # categories yes/no, dates, numbers-as-strings stay strings
        buf = io.StringIO()
        yaml.dump(doc, buf)
        changed = [f"{k}: {r.get('name', r.get('rule'))}" for k, r in c.recoding.items()]
        head = [
            f"Written by `sdc design {self.config_path.name}` (household file): "
            f"risk.composition: protect, certified at xi = {self.config.risk.xi}.",
            f"Composition intruder certificate {c.certificate:.6f}; person-level certificate "
            f"{c.composition.get('person_certificate', 0):.4f}, household-level "
            f"{c.composition.get('household_level_certificate', 0):.4f} (exact).",
            f"Records changed: {changes_text(c.expected_changed, c.changed_var, c.n_records)}"
            f" (one draw: {c.changed:,}); households changed in one draw: "
            f"{c.households_changed:,}.",
            "What changed: person keys recoded for households (" + "; ".join(changed) + "); "
            "the household stage post-randomizes rare compositions (docs/HOUSEHOLDS.md).",
            (f"Seed: a new seed file ({seed['file']}): a new seed starts a new release series "
             "(docs/SERIES.md)." if isinstance(seed, dict) and "file" in seed else
             "Seed: the config's whole-number seed is kept (tests and demos only); a real job "
             "gets `seed: {file: ...}`, and a new seed starts a new series (docs/SERIES.md)."),
        ]
        import textwrap

        lines = [w for h in head for w in textwrap.wrap(h, 96)]
        text = "".join(f"# {ln}\n" for ln in lines) + buf.getvalue()
        return write_atomic(out, text)


def _without_design_head(text: str) -> str:
    """A config written by ``sdc design`` and designed again loses its old comment block (the
    new one replaces it); every other comment stays."""
    from sdc.reports.recoding import DESIGN_MARK

    lines = text.splitlines(keepends=True)
    j = 0
    if lines and lines[0].startswith(("# Written by `sdc design", DESIGN_MARK)):
        while j < len(lines) and lines[j].startswith("#"):
            j += 1
    return "".join(lines[j:])


def _rebase_paths(data: dict[str, Any], old_dir: Path, new_dir: Path) -> None:
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


def _flow_node(value: Any) -> Any:
    """A new value for the round-trip document: mappings and lists in flow style."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        m = CommentedMap((k, _flow_node(v)) for k, v in value.items())
        m.fa.set_flow_style()
        return m
    if isinstance(value, list):
        q = CommentedSeq(_flow_node(v) for v in value)
        q.fa.set_flow_style()
        return q
    return value


def _patch_mapping(doc: Any, new: dict[str, Any]) -> None:
    """Make the round-trip mapping ``doc`` equal to ``new`` touching only what differs (keys
    added, removed or changed; nested mappings patched in place so their comments stay)."""
    for k in [k for k in doc if k not in new]:
        del doc[k]
    for k, v in new.items():
        if k in doc and isinstance(doc[k], dict) and isinstance(v, dict):
            _patch_mapping(doc[k], v)
        elif k not in doc or _plain(doc[k]) != v:
            doc[k] = _flow_node(v)


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def run_household_design(path: Path, config: ReleaseConfig,
                         base: dict[str, Any]) -> HouseholdDesign:
    """Read the household file in its declared values and evaluate the designs."""
    from sdc.io.read import read_input

    raw = config.declared_view()
    frame = read_input(raw)
    current, cands = evaluate_household_designs(frame, config, base, path.resolve().parent)
    rec = recommend(cands)
    return HouseholdDesign(path.resolve(), config, base, current, cands, _Result(rec))


def recommend(cands: list[HouseholdCandidate]) -> int | None:
    """Index of the recommended candidate (:data:`TARGET`), None when none is certified."""
    cert = [i for i, c in enumerate(cands) if c.status == "certified"]
    groups = [i for i in cert if not cands[i].without_group_id]
    within = [i for i in groups if cands[i].share_changed <= TARGET]
    if within:
        return max(within, key=lambda i: (_numeric_classes(cands[i]), -cands[i].share_changed))
    # no household design changes so few: the fewest records, the group id given up when
    # that costs less (large groups: enterprises)
    return min(cert, key=lambda i: cands[i].share_changed) if cert else None


def _numeric_classes(c: HouseholdCandidate) -> int:
    """Released classes of the banded person keys (age classes): what the recommendation
    keeps first."""
    return sum(int(r["released_values"]) for r in c.recoding.values()
               if "bands" in (r.get("recode") or {}))

