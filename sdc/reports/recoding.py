"""Recoding loss: what ``key_variables.X.recode`` costs before PRAM moves any record.

Per recoded key, from the counts of its declared values (:func:`fine_counts`) and the code map:
``records_coarsened`` (records whose released value stands for several declared values) and the
Shannon entropy (bits) of the key's marginal over its declared and its released values
(``entropy_lost``, ``entropy_kept`` = after / before). Overall: records with at least one
coarsened key, and the entropy of the released joint key table before PRAM (PRAM is unbiased,
so also the expected released table's). docs/DESIGN.md, "Recoding".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.cells import encode_key

__all__ = ["entropy_bits", "fine_counts", "recoding_section"]


def entropy_bits(counts: np.ndarray) -> float:
    """Shannon entropy in bits of the distribution given by non-negative ``counts``."""
    c = np.asarray(counts, dtype=float)
    c = c[c > 0]
    n = c.sum()
    if n <= 0:
        return 0.0
    p = c / n
    return float(-(p * np.log2(p)).sum())


def recoding_section(config: ReleaseConfig, fine: dict[str, np.ndarray],
                     cell_codes: np.ndarray, cell_frequency: np.ndarray) -> dict[str, Any]:
    """``utility.json``'s ``recoding`` section (see the module docstring).

    ``fine``: counts of the declared values of each recoded key; ``cell_codes`` (C, p) and
    ``cell_frequency`` (C,): the released cell table before PRAM (key codes in config order).
    """
    keys = config.key_names
    n = int(cell_frequency.sum())
    coarse_any = np.zeros(cell_frequency.size, dtype=bool)
    rows = []
    for k in config.recoded_keys:
        code_map, n_rel = config.recode_map(k)
        members = np.bincount(code_map, minlength=n_rel)
        coarse_class = members > 1
        counts = np.asarray(fine[k], dtype=np.int64)
        released = np.bincount(code_map, weights=counts, minlength=n_rel).astype(np.int64)
        coarsened = int(released[coarse_class].sum())
        h0, h1 = entropy_bits(counts), entropy_bits(released)
        coarse_any |= coarse_class[cell_codes[:, keys.index(k)]]
        rows.append({
            "name": k, "rule": _rule_name(config, k),
            "declared_values": int(code_map.size), "released_values": int(n_rel),
            "records_coarsened": coarsened, "share_coarsened": coarsened / n if n else 0.0,
            "entropy_before": h0, "entropy_after": h1, "entropy_lost": max(h0 - h1, 0.0),
            "entropy_kept": h1 / h0 if h0 > 0 else 1.0,
        })
    any_n = int(cell_frequency[coarse_any].sum())
    return {"keys": rows, "records_coarsened": any_n, "share_coarsened": any_n / n if n else 0.0,
            "joint_entropy_after": entropy_bits(cell_frequency)}


def _rule_name(config: ReleaseConfig, key: str) -> str:
    rule = config.input_key_variables[key].recode
    name = type(rule).__name__.lower()
    return {"topbottom": "top_bottom", "recodebands": "bands"}.get(name, name)


def fine_counts(config: ReleaseConfig, frames=None,
                skip: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Counts of every declared value (input codes, ``missing`` last) of each recoded key,
    over ``frames`` (an iterable of raw input frames; default: the input read in batches,
    key columns only, or whole for SPSS/Stata); ``skip``: global row numbers not released
    (``risk.exposed_sizes: drop``'s left-out households), not counted."""
    keys = config.recoded_keys
    src = config.input_key_variables
    counts = {k: np.zeros(src[k].size, dtype=np.int64) for k in keys}
    if not keys:
        return counts
    if frames is None:
        raw = config.declared_view()
        if config.input.resolved_format in ("csv", "parquet"):
            from sdc.io.batches import input_batches

            frames = input_batches(raw, columns=keys)
        else:
            from sdc.io.read import read_input

            frames = [read_input(raw)]
    for frame in frames:
        if skip is not None and len(skip):
            frame = frame[~np.isin(frame.index.to_numpy(np.int64), skip)]
        for k in keys:
            counts[k] += np.bincount(encode_key(frame[k], k, src[k]), minlength=src[k].size)
    return counts


CHANGE_WARN_SHARE = 0.2
"""Above this share of records changed (overall, or in one key's values) the release says so in
words and points to ``sdc design``."""


DESIGN_MARK = "# Written by `sdc design"
"""The first line of a config ``sdc design -o`` writes: the warnings then never send the user
back to ``sdc design`` on the file it wrote."""


def written_by_design(config_path: str | Path | None) -> bool:
    """Whether the config at ``config_path`` is one ``sdc design -o`` wrote (its first line)."""
    if config_path is None:
        return False
    try:
        with open(config_path, encoding="utf-8") as f:
            return f.readline().startswith(DESIGN_MARK)
    except (OSError, UnicodeDecodeError):
        return False


def change_warnings(share_changed: float, by_key: dict[str, float] | None = None, *,
                    config_hint: str = "CONFIG",
                    threshold: float = CHANGE_WARN_SHARE) -> list[str]:
    """Plain-language warnings when PRAM changes more than ``threshold`` of the records, or of
    one key's values (``by_key``: key -> share of records whose value of that key changed).
    For a config ``sdc design`` wrote (:func:`written_by_design`), they say what is left to
    give up instead of pointing back to ``sdc design``."""
    out = []
    if written_by_design(config_hint):
        if share_changed > threshold:
            out.append(
                f"{share_changed:.1%} of the records have changed key values (more than "
                f"{threshold:.0%}), with the design `sdc design` recommended: no design it "
                "evaluated gets under this share without a key losing more than its floor of "
                "information. The comment at the top of this config says what would have to be "
                "given up (coarser keys, a lower --keep, or a key dropped).")
        return out
    if share_changed > threshold:
        out.append(
            f"{share_changed:.1%} of the records have changed key values (more than "
            f"{threshold:.0%}): the key variables are too fine for this file, and many "
            f"tabulations of the public file will be noisy. Run `sdc design {config_hint}` to "
            "find recodings (bands, top coding, merged rare categories) that change fewer "
            "records at the same xi.")
    for k, share in (by_key or {}).items():
        if share > threshold and share_changed <= threshold:
            out.append(
                f"{share:.1%} of the records have a changed value of {k!r} (more than "
                f"{threshold:.0%}): {k} is too fine for this file; `sdc design {config_hint}` "
                f"proposes recodings of {k}.")
    return out
