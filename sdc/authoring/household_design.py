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
  grouped), with near compositions (``destinations: near``) and ``theta: calibrated``, at
  most :data:`~sdc.method.household_composition.MAX_CLASSES` person classes, and with members
  kept in bands (``risk.member_bands``, :mod:`sdc.authoring.member_bands`). Each is planned
  (:func:`~sdc.method.household_composition.composition_plan`: rare household cells go through
  PRBs of their size, merged along the household keys, or the certified singular draw), drawn
  once (records and households changed) and measured (the composition intruder certified, the
  person-level intruder by Monte Carlo); only candidates with both <= xi are certified.
- **recommended** (:mod:`sdc.authoring.household_recommend`): among the certified candidates
  changing at most :data:`TARGET` of the records, the most age classes, then a class shift
  within 3 SE, then the fewest records changed; else the fewest records changed, the release
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

from sdc.authoring import large_groups as lgs
from sdc.authoring.household_design_yaml import (
    design_head,
    patch_mapping,
    rebase_paths,
    without_design_head,
)
from sdc.authoring.household_options import (
    AS_COLUMN,
    band_candidates,
    household_key_options,
    person_key_options,
    reassembling_columns,
    reassembly_note,
    without_group_id,
)
from sdc.authoring.household_recommend import TARGET, preference, recommend, weighted_near_data
from sdc.authoring.member_bands import SHIFT_OK, band_variants, class_shift, verify_banded
from sdc.config.model import ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.method.designs import design_of, household_design_of

__all__ = ["HouseholdCandidate", "HouseholdDesign", "band_candidates", "evaluate_household_designs",
           "DesignResult", "recommend"]

MAX_EXACT_SIZE = 40
"""Largest household (group) whose candidates get the exact person-level certificate under
protect (its cost grows with the square of the largest household: enterprises of 200 took
hours); larger groups are released without the group id (docs/HOUSEHOLDS.md)."""

NEAR = {"neighbours": 4, "kernel": "matching"}
"""The near design of every candidate (METHOD 7.12 under protect: 4 destinations, the spread
floor, the matching kernel: least-cost matchings in records changed, and a destination that
takes a fragile class away): a moved household takes a composition one or two members away in
its own household keys (docs/HOUSEHOLDS.md "Near compositions")."""


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
    #: columns the release without the group id does not release (one value per group)
    dropped: list[str] = field(default_factory=list)
    #: (config, composition plan, compositions, HK rows): what the exact levels need
    levels: Any = None
    #: the two-stage release under the threat model of large groups: its threshold
    large_groups: int | None = None
    #: the largest move of a numeric person column's mean in a class of a banded person
    #: key, in SE, in the one draw, and where (:func:`sdc.authoring.member_bands.class_shift`)
    class_shift: float = float("nan")
    class_shift_at: str = ""

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
    """Plan ``cand`` on the declared-value ``frame`` and certify it (:func:`_plan`, then
    :func:`_certify`)."""
    _plan(frame, cand, base_dir, declared_entropy)
    _certify(cand)


def _plan(frame: pd.DataFrame, cand: HouseholdCandidate, base_dir: Path,
          declared_entropy: float) -> None:
    """The cheap part of a candidate, on the household aggregate: its composition table, the
    composition stage's plan (once: the draw and the expectation reuse it), the composition
    certificate, the expected records changed and its variance (exact, seed-free: the figure
    ``sdc plan`` and ``sdc release`` print) and one draw's records and households changed. Status ``planned``; the exact
    person- and household-level certificates are :func:`_certify`'s."""
    from sdc.authoring.member_bands import dependence_rungs
    from sdc.config.load import parse_config
    from sdc.io.recode import recode_frame
    from sdc.method.cells import encode_key
    from sdc.method.household_batches import household_identity
    from sdc.method.household_composition import (
        composition_stage,
        composition_table,
        expected_persons_changed,
        person_classes,
        plan_composition_stage,
        realize_compositions,
    )
    from sdc.method.household_missing import constrain, frame_groups
    from sdc.method.households import household_codes, person_config

    cfg = parse_config(copy.deepcopy(cand.data), base_dir, source="household design")
    f = recode_frame(frame, cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    groups = frame_groups(f, pc, n_cls, cfg)  # missingness groups: a structural constraint
    hk = np.column_stack([encode_key(f[k].iloc[first], k, cfg.key_variables[k])
                          for k in cfg.household_keys])
    tab = constrain(composition_table(code, pc, first.size, n_cls), groups, cfg, hk)
    x_h = None  # risk.weighted: the composition stage balanced on the members' summed weights
    if design_of(cfg).needs_weights:
        from sdc.method.household_weights import household_weights_of

        x_h = household_weights_of(f[cfg.input.weight], code, first.size)
    planned = plan_composition_stage(hk, tab, cfg, x_h, dependence_rungs(frame, cfg))
    cp = planned[0]
    cand.expected_changed, cand.changed_var = expected_persons_changed(cp, tab)
    ident = household_identity(f.iloc[first], cfg)
    st = composition_stage(ident, hk, tab, cfg, 0, x_h, planned=planned)
    from sdc.method.draws import record_identity
    new = realize_compositions(code, pc, record_identity(f, person_config(cfg)),
                               tab.counts[tab.household], tab.counts[st.released_composition],
                               tab.group, tab.band, tab.banded_households())
    cand.class_shift, cand.class_shift_at = class_shift(f, cfg, code, pc, new)
    hk_moved = (st.released_codes[:, :-1] != hk).any(axis=1)[code]
    cand.changed = int((hk_moved | (new != pc)).sum())
    cand.households_changed = int(st.changed.sum())
    cand.n_records = int(len(f))
    cand.certificate = float(cp.certificate)
    cand.composition = {"certificate": float(cp.certificate),
                        "singular_sizes": cp.singular_sizes,
                        "largest_household": int(tab.size.max(initial=0))}
    keys = np.column_stack([encode_key(f[k], k, cfg.key_variables[k]) for k in cfg.key_names])
    cand.entropy_kept = _entropy(keys) / declared_entropy if declared_entropy else 1.0
    cand.levels = (cfg, cp, tab, np.unique(hk, axis=0))
    cand.status = "planned"
    if cp.certificate > cfg.risk.xi + 1e-9:
        cand.status = "refused"
        cand.note = f"composition certificate {cp.certificate:.4f} > xi (exact)"


def _certify(cand: HouseholdCandidate) -> None:
    """The exact person- and household-level certificates of a planned candidate
    (:func:`~sdc.reports.households.exact_levels`, docs/METHOD.md 7.7): certified when both
    and the composition certificate are <= xi. Their cost grows with the square of the
    largest household: above :data:`MAX_EXACT_SIZE` members (enterprises) they are not
    computed and the candidate is not certified (docs/HOUSEHOLDS.md "Large groups")."""
    from sdc.reports.households import exact_levels

    if cand.status != "planned" or cand.levels is None:
        return
    cfg, cp, tab, hk_u = cand.levels
    largest = int(tab.size.max(initial=0))
    if largest > MAX_EXACT_SIZE:
        cand.status = "refused"
        cand.note = (f"groups of up to {largest:,} members: the exact person-level "
                     f"certificate under protect is not computed above {MAX_EXACT_SIZE} members "
                     "(large groups: release without the group id, docs/HOUSEHOLDS.md)")
        return
    from sdc.reports.household_verdicts import size_exposure

    levels = exact_levels(cp, tab, hk_u, cfg, household_design_of(cfg))
    sl = levels["size"]
    cand.composition.update({
        "person_certificate": levels["person"]["certificate"],
        "household_level_certificate": levels["household"]["certificate"],
        "size_level_certificate": sl["certificate"],
        "size_level_protectable": sl["protectable_certificate"],
        "exposed_sizes": sl["exposed_sizes"]})
    xi = float(cfg.risk.xi)
    above = [f"{n} certificate {v:.4f} > xi (exact)" for n, v in (
        ("person-level", levels["person"]["certificate"]),
        ("household-level", levels["household"]["certificate"]),
        ("household keys x size", sl["enforced"]),
        ("composition", cand.certificate)) if v > xi + 1e-9]
    cand.status = "refused" if above else "certified"
    cand.note = "; ".join(above + ([size_exposure(sl)] if sl["exposed_sizes"] else []))


def _protect_data(base: dict[str, Any], recoding: dict[str, dict[str, Any]],
                  near: bool) -> dict[str, Any]:
    """``base`` with ``risk.composition: protect``, the keys' ``recoding``, near compositions
    (or NZY's uniform destinations) and ``theta: calibrated``."""
    data = copy.deepcopy(base)
    risk = dict(data.get("risk") or {})
    for k, r in recoding.items():
        (data.get("partition") or {}).pop(k, None)
        if r["recode"] == AS_COLUMN:  # a household-size key released as a household column
            data["key_variables"].pop(k)
            inp = data["input"]
            inp["household_columns"] = [*(inp.get("household_columns") or []), k]
            if risk.get("merge_along"):
                risk["merge_along"] = [m for m in risk["merge_along"] if m != k]
            continue
        data["key_variables"][k] = {**data["key_variables"][k], "recode": r["recode"]}
    risk["composition"] = "protect"
    risk.pop("large_groups", None)  # the two stages' threat model: not with protect
    risk.pop("destinations", None)
    risk.pop("near", None)
    if near:  # a moved household to a near composition
        risk.update({"destinations": "near", "near": dict(NEAR)})
    if (data.get("input") or {}).get("weight_release") == "recalibrated":
        # the released weight is recalibrated to the released household keys: balancing the
        # original weights (risk.weighted) serves no released estimate, and its weight groups
        # split the blocks the matchings choose in (docs/HOUSEHOLDS.md, "Near compositions")
        risk.pop("weighted", None)
    risk["theta"] = "calibrated"  # the smallest certified theta: fewer households move
    # a size with 2..kmin-1 rare compositions gets a calibrated PRB of its own (PRBs never mix
    # sizes, so merging cannot help it): else it is singular, and its households draw their
    # household keys uniformly, every member changing (sdcMicro's testdata: 13.5% -> 13.2%)
    risk["small_blocks"] = "calibrate"
    risk.pop("households", None)  # the default: fail
    data["risk"] = risk
    return data


def evaluate_household_designs(frame: pd.DataFrame, config: ReleaseConfig,
                               base: dict[str, Any], base_dir: Path
                               ) -> tuple[HouseholdCandidate, list[HouseholdCandidate]]:
    """The config as written and the ``risk.composition: protect`` candidates (see the
    module docstring) on ``frame`` (the input in its declared values). Returns (as written,
    candidates in order of records changed, certified first).

    Aggregates first: every candidate is planned on the household table (composition plan,
    exact expected records changed, composition certificate: :func:`_plan`); the costly exact
    person- and household-level certificates (:func:`_certify`) are computed in the order
    the recommendation prefers (:func:`recommend`) until one is certified. The others keep
    their planned figures and the status ``not evaluated``."""
    from sdc.method.cells import encode_key
    from sdc.method.household_composition import MAX_CLASSES

    kvs = config.input_key_variables
    declared = np.column_stack([encode_key(frame[k], k, kvs[k]) for k in config.key_names])
    declared_entropy = _entropy(declared)
    current = HouseholdCandidate(copy.deepcopy(base), {}, n_records=len(frame))
    _evaluate_current(frame, config, current)
    coarser = household_key_options(frame, config)
    options = [*person_key_options(frame, config), *(o for _, o in coarser)]
    names = [*config.person_keys, *(k for k, _ in coarser)]
    cands: list[HouseholdCandidate] = []
    seen: set[str] = set()
    for combo in itertools.product(*options):
        n_person = len(config.person_keys)
        if int(np.prod([c[2] for c in combo[:n_person]])) > MAX_CLASSES:
            continue
        recoding = {k: {"name": name, "recode": rule, "released_values": n}
                    for k, (name, rule, n) in zip(names, combo, strict=True) if rule is not None}
        for near in (True, False):  # near compositions, and NZY's uniform destinations
            data = _protect_data(base, recoding, near)
            if (sig := repr(data)) in seen:  # an option equal to the config's own recoding
                continue
            seen.add(sig)
            cands.append(_planned(frame, HouseholdCandidate(data, recoding), base_dir,
                                  declared_entropy))
    cands.extend(_planned(frame, HouseholdCandidate(data, rec), base_dir, declared_entropy)
                 for data, rec in weighted_near_data(cands, NEAR))  # near.weights
    best = min((c for c in cands if c.status == "planned" and c.share_changed <= TARGET),
               key=preference, default=None)
    if best is not None and not best.class_shift <= SHIFT_OK:  # members kept in bands
        for bands in band_variants(best.recoding):
            data = copy.deepcopy(best.data)
            data["risk"]["member_bands"] = bands
            cands.append(_planned(frame, HouseholdCandidate(data, best.recoding), base_dir,
                                  declared_entropy))
    cands.append(_without_group_id(frame, config, base, base_dir))
    if lgs.sampled(base) or int(frame.groupby(config.input.household_id,
                                          sort=False).size().max()) > lgs.LARGE_GROUP:
        # grouped files (enterprises): the two-stage release under the threat model of
        # large groups (risk.large_groups; members sampled: coarser group keys too)
        cands.extend(lgs.large_groups_candidates(frame, config, base, base_dir,
                                             HouseholdCandidate, _released_in_memory))
    _certify_preferred(cands, lambda c: verify_banded(frame, c, base_dir, _released_in_memory))
    for c in cands:
        if c.status == "planned":
            c.status = "not evaluated"
            c.note = ("exact person- and household-level certificates not computed: a design "
                      "the recommendation prefers is certified")
    cands.sort(key=lambda c: (c.status != "certified", c.share_changed))
    return current, cands


def _planned(frame: pd.DataFrame, cand: HouseholdCandidate, base_dir: Path,
             declared_entropy: float) -> HouseholdCandidate:
    try:
        _plan(frame, cand, base_dir, declared_entropy)
    except (InputError, SmallBlockError) as e:
        cand.status, cand.note = "refused", str(e).splitlines()[0][:200]
    return cand


def _certify_preferred(cands: list[HouseholdCandidate], verify: Any = None) -> None:
    """Certify the planned candidates in the order :func:`recommend` prefers them, until
    one is certified: first those changing at most :data:`TARGET` of the records (class
    shift, most classes of the banded person keys, then fewest records), then all by records
    changed (the release without the group id among them). ``verify(c)`` after a candidate
    is certified (:func:`~sdc.authoring.member_bands.verify_banded`)."""
    def done(c: HouseholdCandidate) -> bool:
        _certify(c)
        if c.status == "certified" and verify is not None:
            verify(c)
        return c.status == "certified"

    within = sorted((c for c in cands if c.status == "planned"
                     and c.share_changed <= TARGET), key=preference)
    if any(done(c) for c in within):
        return
    for c in sorted(cands, key=lambda c: c.share_changed):
        if c.status == "certified" or done(c):
            return


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
    if singled:  # the fix applied: the group-level columns that are neither key nor weight
        weight = config.input.weight
        fixed = [c for c in const if c not in config.key_names and c != weight]
        if fixed:
            cand.data["input"]["drop"] = [*cand.data["input"]["drop"], *fixed]
            cand.dropped = fixed
            released = [c for c in released if c not in fixed]
            const, singled, groups = reassembling_columns(frame, hid, released)
    if singled:
        cand.status = "refused"
        cand.note = reassembly_note(frame, config, const, singled, groups, cand.dropped)
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
    if cand.dropped:
        cand.note += (f"; not released (one value per household, they would put households "
                      f"back together): {', '.join(cand.dropped)}")
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
        if comp.get("mode") == "large_groups":
            cur.note = res.household_report["risk"]["message"]
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


#: the recommendation of a household design (the index of the recommended candidate)
DesignResult = _Result


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
    #: what ``risk.exposed_sizes: drop`` leaves out of the file the candidates are judged on
    #: (:func:`sdc.method.household_exposed.exposed_households`), None: nothing
    left_out: dict[str, Any] | None = None

    def _doc(self, i: int, c: HouseholdCandidate) -> dict[str, Any]:
        return {"node": i, "status": c.status, "recoding": c.recoding,
                "changed": c.changed, "share_changed": c.share_changed,
                "expected_changed": c.expected_changed, "sd_changed": c.sd_changed,
                "households_changed": c.households_changed,
                "entropy_kept": c.entropy_kept, "tvd": float("nan"),
                "certificate": c.certificate, "composition": c.composition, "note": c.note,
                "risk": {k: v for k, v in (c.data.get("risk") or {}).items()},
                "without_group_id": c.without_group_id, "large_groups": c.large_groups,
                "dropped": list(c.dropped), "class_shift": c.class_shift,
                "class_shift_at": c.class_shift_at, "left_out": self._left(c)}

    def _left(self, c: HouseholdCandidate) -> dict[str, Any] | None:
        """The households and persons the candidate leaves out (``risk.exposed_sizes:
        drop``), None: none."""
        if self.left_out is None or (c.data.get("risk") or {}).get("exposed_sizes") != "drop":
            return None
        return {"households": self.left_out["households"],
                "persons": self.left_out["persons"], "share": self.left_out["share"],
                "sizes": {str(k): v for k, v in self.left_out["sizes"].items()}}

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
            # what risk.exposed_sizes: drop leaves out of the file the candidates are judged on
            "left_out": self._left(HouseholdCandidate({"risk": {"exposed_sizes": "drop"}}, {})),
            "recommended": None if rec is None else self._doc(rec, self.candidates[rec]),
            "frontier": [self._doc(i, self.candidates[i]) for i in cert],
            # why the best refused household design and the release without the group id
            # were refused (what `sdc design` prints when nothing is certified)
            "refused": {
                "protect": next((c.note for c in self.candidates
                                 if not c.without_group_id and c.large_groups is None
                                 and c.status == "refused"), ""),
                "large_groups": next((c.note for c in self.candidates
                                      if c.large_groups is not None
                                      and c.status == "refused"), ""),
                "without_group_id": next((c.note for c in self.candidates
                                          if c.without_group_id and c.status == "refused"), "")},
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
            rebase_paths(new, old_dir, new_dir)
        yaml = YAML(typ="rt")
        yaml.width = 100
        doc = yaml.load(without_design_head(self.config_path.read_text(encoding="utf-8")))
        patch_mapping(doc, new)
        quote_ambiguous(doc)  # categories yes/no, dates, numbers-as-strings stay strings
        buf = io.StringIO()
        yaml.dump(doc, buf)
        how, certs, what = design_head(c)
        head = [
            f"Written by `sdc design {self.config_path.name}` (household file): "
            f"{how}, certified at xi = {self.config.risk.xi}.",
            certs,
            f"Records changed: {changes_text(c.expected_changed, c.changed_var, c.n_records)}"
            f" (one draw: {c.changed:,}); households changed in one draw: "
            f"{c.households_changed:,}.",
            "What changed: " + what,
            (f"Seed: a new seed file ({seed['file']}): a new seed starts a new release series "
             "(docs/SERIES.md)." if isinstance(seed, dict) and "file" in seed else
             "Seed: the config's whole-number seed is kept (tests and demos only); a real job "
             "gets `seed: {file: ...}`, and a new seed starts a new series (docs/SERIES.md)."),
        ]
        import textwrap

        lines = [w for h in head for w in textwrap.wrap(h, 96)]
        text = "".join(f"# {ln}\n" for ln in lines) + buf.getvalue()
        return write_atomic(out, text)
