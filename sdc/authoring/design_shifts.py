"""What a design lets move, key by key, and whether the declared importance was honoured
(``sdc design``; docs/DESIGN.md, "What each key pays").

A design that holds some keys (partition ``as_is``) lets the others move: PRAM's changes fall
on them, and their relations with every other column (group means of an outcome by the key,
the key's coefficient) are diluted toward no relation by about the share of records whose key
changes. :func:`key_moves` gives that share for every key of a node (held or not) from the
figures the search already computed (the node's expected changed share times the chance a
moved record's key changes), with the mean move of an ordered key; :func:`importance_notes`
says, when the keys' importances differ, why the recommendation does not hold an important
key (its partition refused, changing more records, or not evaluated) and which important
keys still change.
"""

from __future__ import annotations

from typing import Any

from sdc.method.design.importance import CLOSE_ABS, CLOSE_REL, IMPORTANT_VARIANTS

__all__ = ["MOVED_AT_LEAST", "importance_notes", "key_moves", "shift_list"]

#: an important key "still changes" when at least this share of the records changes it
MOVED_AT_LEAST = 0.001


def key_moves(node: Any, keys: list[str]) -> dict[str, dict[str, Any]]:
    """Every key of ``node`` (a :class:`sdc.method.design.rule.Node`): ``records_changed``,
    the expected share of records whose key PRAM changes (None when not planned);
    ``partition``: ``held`` (``as_is``: it changes only where small partition sets are
    merged), ``confined`` (bands or groups: it moves within them) or ``free``; and
    ``displacement``, a moved record's mean |change| of an ordered key (declared units);
    ``mean_shift_se``: the largest expected shift of the outcome's mean over the key's
    categories, in SE (``Node.key_shift``; None without an outcome or a category to show)."""
    part = node.partition or {}
    share = node.changed_share
    planned = share == share and node.key_change is not None and node.status == "certified"
    out: dict[str, dict[str, Any]] = {}
    for k in keys:
        rule = part.get(k)
        out[k] = {"records_changed": share * (node.key_change or {}).get(k, 0.0)
                  if planned else None,
                  "partition": "held" if rule == "as_is" else "free" if rule is None
                  else "confined",
                  "displacement": (node.displacement or {}).get(k),
                  "mean_shift_se": (getattr(node, "key_shift", None) or {}).get(k)
                  if planned else None}
    return out


def shift_list(moves: dict[str, dict[str, Any]]) -> str:
    """``ethnicity +2.1 (free), smsa -1.2 (free), education +0.39 (held)``: every key's
    largest group-mean shift in SE, largest first (two significant digits); empty: none."""
    from sdc.reports.analysis import shift_digits

    items = [(k, m) for k, m in moves.items() if m.get("mean_shift_se") is not None]
    items.sort(key=lambda km: -abs(km[1]["mean_shift_se"]))
    return ", ".join(f"{k} {m['mean_shift_se']:+.{min(shift_digits(m['mean_shift_se']), 2)}f} "
                     f"({m['partition']})" for k, m in items)


def importance_notes(result: Any) -> list[str]:
    """Why the declared importance could not be (fully) honoured by the recommendation of
    ``result`` (a :class:`sdc.method.design.rule.DesignResult`); empty when no importance
    is declared or every important key is held and unchanged."""
    imp = result.importance
    if not imp or result.recommended is None:
        return []
    low = min(imp.values())
    important = [k for k, w in imp.items() if w > low]
    rec = result.nodes[result.recommended]
    notes: list[str] = []
    names = ", ".join(important)
    if rec.variant not in IMPORTANT_VARIANTS:
        tries = [n for n in result.nodes
                 if n.levels == rec.levels and n.variant in IMPORTANT_VARIANTS]
        if not tries:
            notes.append(f"importance ({names}) not honoured: the partitions holding them were "
                         "not evaluated for this recoding (time budget: --budget)")
        for n in tries:
            if n.status == "not evaluated":
                why = "was not evaluated (time budget: --budget)"
            elif n.status != "certified":
                why = f"was {n.status}" + (f": {n.note}" if n.note else "")
            else:
                tol = max(CLOSE_ABS, CLOSE_REL * rec.changed_share)
                why = (f"changes {n.changed_share:.1%} of the records against "
                       f"{rec.changed_share:.1%} (the rule prefers it only within "
                       f"{tol:.1%} of the pick, keeping its entropy, with 10% less "
                       "weighted move distortion)")
            notes.append(f"importance ({names}) not honoured: the partition '{n.variant}' "
                         + why)
    moves = key_moves(rec, list(imp))
    for k in important:
        share = moves[k]["records_changed"]
        if share is not None and share >= MOVED_AT_LEAST:
            how = ("small partition sets are merged along it (risk.merge_along)"
                   if moves[k]["partition"] == "held" else
                   "the recommendation does not hold it (partition "
                   f"{moves[k]['partition']})")
            notes.append(f"{k} (declared important) still changes for {share:.1%} of the "
                         f"records: {how}")
    return notes
