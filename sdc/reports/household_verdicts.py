"""The verdicts of a household release's composition level (risk.json ``households``'s
``message`` and ``fixes``): under ``risk.composition: protect``, under ``risk.large_groups``
(docs/METHOD.md 7.15) and for the household sizes no release protects (exposed sizes)."""

from __future__ import annotations

from typing import Any


def riskiest_class(comp: dict[str, Any]) -> str:
    """'F = 1: 986 households, 1/F = 1.0000 before' for the riskiest class of ``comp``."""
    top = max(comp["classes"], key=lambda c: c["estimate"], default=None)
    if top is None:
        return "no households"
    return (f"class F = {top['class']} (F: households sharing the composition), "
            f"{top['households']:,} households, risk before {top['before']:.4f}, after "
            f"{top['estimate']:.4f} ± {top['se']:.4f}")


def large_groups_verdict(comp: dict[str, Any], xi: float, household_certificate: float,
                         person_certificate: float) -> tuple[str, list[str]]:
    """The message and fixes of a two-stage release under ``risk.large_groups`` (the threat
    model of large groups, docs/METHOD.md 7.15): the exact composition certificate of the
    small groups, and which certificates cover the large ones."""
    lg = comp["large_groups"]
    t = lg["threshold"]
    if lg.get("members") == "sampled":
        from sdc.method.group_composition import SAMPLED_MEMBERS

        return (f"{SAMPLED_MEMBERS}: the {lg['large_groups']:,} groups "
                f"({lg['large_persons']:,} persons) are covered by the group-level certificate "
                f"{household_certificate:.4f} (household stage, counted in groups) and the "
                f"person-level certificate given the group keys {person_certificate:.4f} "
                "(exact)"), []
    covered = (f"the {lg['large_groups']:,} groups of more than {t} members "
               f"({lg['large_persons']:,} persons) are outside the composition intruder's "
               f"threat model (risk.large_groups: {t}): covered by the group-level certificate "
               f"{household_certificate:.4f} (household stage, counted in groups) and the "
               f"person-level certificate given the group keys {person_certificate:.4f} (exact)")
    small = (f"the composition certificate of the {lg['small_groups']:,} groups of at most {t} "
             f"members is {lg['certificate']:.4f} (exact)")
    if not lg["exceeds_xi"]:
        return f"{small}, within xi = {xi}; {covered}", []
    sizes = ", ".join(f"{n:,} of size {s}" for s, n in lg["groups_above_xi"].items())
    return (f"{small} > xi = {xi} ({sizes} above xi: a small group whose composition no "
            f"other group of its keys can be released with is found); {covered}"), [
        f"a smaller risk.large_groups (the data producer's statement of which groups an "
        f"intruder can know every member of; {t} now)",
        "risk.composition: protect (every group's composition certified; costly for large "
        "groups)",
        "coarser person keys or fewer household-level keys",
    ]


def protect_verdict(comp: dict[str, Any], xi: float) -> tuple[str, list[str]]:
    """The message and fixes of a ``risk.composition: protect`` release: its three exact
    certificates (composition, person level, household keys) against xi."""
    levels = [("composition", comp["certificate"], comp.get("certificate_at") or {}),
              ("person-level", comp["person"]["certificate"],
               comp["person"].get("certificate_at") or {}),
              ("household-level (household keys)", comp["household_level"]["certificate"],
               comp["household_level"].get("certificate_at") or {})]
    sl = comp.get("size_level")
    if sl is not None:  # before issue 44's size level, audit.json had none
        levels.append(("household keys x size", sl["enforced"], sl.get("certificate_at") or {}))
    above = [(n, v, at) for n, v, at in levels if v > xi + 1e-9]
    exposed = size_exposure(sl)
    if not above:
        names = ", ".join(n.split(" (")[0] for n, _, _ in levels)
        return (f"the {names} certificates (exact: "
                + ", ".join(f"{v:.4f}" for _, v, _ in levels) + f") are within xi = {xi}"
                + (f"; {exposed}" if exposed else "")), []
    parts = []
    for n, v, at in above:
        where = ""
        if at.get("target"):
            size = (f" in a household of {at['target_household_size']}"
                    if n in ("person-level", "household keys x size") else "")
            where = f" (a target {at['target']}{size}, released count {at.get('released_count')})"
        parts.append(f"the {n} certificate {v:.4f}{where}")
    fixes = [
        "coarser person keys (fewer person classes: a person whose class no other household "
        "of its household keys has is found when its household stays)",
        "fewer or coarser household-level keys (recode a rare value into a larger category)",
        "`sdc design` on this config lists the certified household designs",
    ] + ([f"members never leave their missingness group ({'; '.join(comp['missingness_groups'])}"
          "): coarser person keys within each group, or drop the column(s) named"]
         if comp.get("missingness_groups") else [])
    if exposed and any(n == "household keys x size" for n, _, _ in above):
        fixes = [f"{exposed}: risk.exposed_sizes: drop (those households left out of the "
                 "public file, the weight recalibrated), release without the household id (a "
                 "person file), or a larger xi", *fixes]
    return ("under risk.composition: protect " + "; ".join(parts) + f" exceeds xi = {xi} "
            "(exact, docs/METHOD.md 7.7)"), fixes


def size_exposure(sl: dict[str, Any] | None) -> str:
    """'household size 9 (2 households): shown by any release with household pseudonyms,
    risk 0.5000' for the exposed sizes of a ``size_level`` section ('' when none)."""
    if not sl or not sl.get("exposed_sizes"):
        return ""
    sizes = ", ".join(f"{e['size']} ({e['households']} household"
                      f"{'s' if e['households'] != 1 else ''})" for e in sl["exposed_sizes"])
    return (f"household size {sizes} held by fewer than 1/xi households: shown by any "
            f"release with household pseudonyms (household keys x size risk "
            f"{sl['certificate']:.4f}, not bounded by xi)")
