"""Turning an engine result into a release folder, and publishing it atomically.

Layout of a release (``output.dir``)::

    <release>/
      public/                      mode 0755, files 0644: what the public gets
        microdata.parquet          per output.formats
        microdata.csv
        codebook.md
      internal/                    mode 0700, files 0600: for the agency and the auditor only
        audit.json                 config copy + SHA-256, input SHA-256 and rows, xi, theta,
                                   kmin, PRB table, certificate, public/internal file hashes,
                                   seed file path + SHA-256 (never the seed)
        blocks.parquet             the PRB table
        partition_sets.parquet     partition sets, their counts and PRB
        risk.json, utility.json, report.html, ...   (reports passed in by the caller)

Nothing in ``public/`` depends on the input's row order or reveals the seed, theta per block,
PRB contents or a link to the original records: the original id column is removed, records are
put in a canonical order (sorted by all released values) and then shuffled with the release's
own random stream ``stream(seed, "public-row-order")``, and numbered 1..n afresh
(:data:`PUBLIC_ID`).

Crash behaviour of :func:`write_release` (also in ``docs/RELEASE_FOLDER.md``):

- Everything is written into a hidden sibling ``<parent>/.<name>.tmp-<pid>-<hex>`` (mode 0700
  while being written), every file and folder is fsynced, then the folder is renamed to
  ``<parent>/<name>`` in one ``rename`` (``renameat2(RENAME_NOREPLACE)`` on Linux, so a
  concurrent publisher cannot be overwritten). Killed at any point before that rename: no
  ``<name>`` folder appears (or the earlier release stays exactly as it was); killed after it:
  the release is complete. A power cut after the rename cannot lose the files' contents (they
  were fsynced before) and the parent folder is fsynced after.
- With ``force`` and an existing release, the new folder is swapped in with one atomic
  ``renameat2(RENAME_EXCHANGE)``: until that instant the old release is in place and complete;
  after it the new one is. The old one then sits in the temp folder and is deleted. Where the
  exchange is unavailable (non-Linux, some file systems), the old release is first renamed to
  ``.<name>.old-<pid>-<hex>`` and the new one renamed into place; a crash between these two
  renames leaves no ``<name>`` for a moment, and the next run renames the old release back
  before doing anything else.
- Leftover ``.<name>.tmp-*`` / ``.<name>.old-*`` folders of a process that no longer exists
  (a killed run) are removed at the start of the next run; those of a live process (a
  concurrent run) are left alone.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import json
import math
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sdc.config import AsIs, Bands, Groups, Hierarchy, ReleaseConfig
from sdc.errors import InputError
from sdc.hierarchies import generalize_domain
from sdc.io import csv_bytes, parquet_bytes, sha256_bytes
from sdc.release import ReleaseResult
from sdc.schemas import PUBLIC_ID, validate_output
from sdc.seeds import SeedInfo
from sdc.streams import stream

__all__ = [
    "PUBLIC_ID",
    "ReleaseExistsError",
    "ReleaseFolderError",
    "assemble_release",
    "build_audit",
    "checkpoint",
    "codebook_markdown",
    "config_text_of",
    "public_frame",
    "write_release",
]

AUDIT_FORMAT = "sdc-audit/1"
_MAX_LISTED = 10_000  # categories listed one by one in the codebook
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ReleaseExistsError(FileExistsError):
    """The release folder exists and ``force`` was not given."""


class ReleaseFolderError(ValueError):
    """The release folder cannot be written there (inside another release, not writable, or an
    existing folder that is not a release)."""


# -- test hook -------------------------------------------------------------------------------
def checkpoint(name: str) -> None:
    """Crash-test hook. With env ``SDC_CHECKPOINT_DIR`` set, touch ``<dir>/<name>`` (``/``
    replaced by ``_``); with ``SDC_PAUSE_AT == name``, then sleep 120 s so a test can SIGKILL
    the process exactly here. Does nothing otherwise."""
    d = os.environ.get("SDC_CHECKPOINT_DIR")
    if d:
        folder = Path(d)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name.replace("/", "_")).touch()
    if os.environ.get("SDC_PAUSE_AT") == name:
        time.sleep(120)


# -- the public frame --------------------------------------------------------------------------
def _canonical_order(frame: pd.DataFrame) -> np.ndarray:
    """Row positions sorted by all column values (first column first, missing last).

    Rows that tie are identical in every column, so the order of the *content* does not depend
    on the input's row order.
    """
    if len(frame.columns) == 0:
        return np.arange(len(frame))
    keys = []
    for c in frame.columns:
        s = frame[c]
        try:
            codes, _ = pd.factorize(s, sort=True, use_na_sentinel=True)
        except TypeError:  # mixed types in an object column
            codes, _ = pd.factorize(s.astype(str), sort=True, use_na_sentinel=True)
        codes = np.where(codes < 0, np.iinfo(np.int64).max, codes)  # missing last
        keys.append(codes)
    return np.lexsort(keys[::-1])


def public_frame(result: ReleaseResult, config: ReleaseConfig, seed: int) -> pd.DataFrame:
    """The public microdata: released records, original id removed, shuffled, renumbered.

    1. ``result.frame`` minus ``input.id_column`` (dropped identifiers are already gone);
    2. sorted canonically by all released values (stable lexsort), so the outcome does not
       depend on the input's row order;
    3. permuted by ``stream(seed, "public-row-order").permutation(n)``;
    4. ``record_id`` = 1..n inserted as the first column; index reset.

    Raises :class:`~sdc.errors.InputError` if the input has a non-id column named
    ``record_id`` (it would clash with the public id).
    """
    frame = result.frame
    id_col = config.input.id_column
    if id_col is not None and id_col in frame.columns:
        frame = frame.drop(columns=[id_col])
    if PUBLIC_ID in frame.columns:
        raise InputError(
            f"column {PUBLIC_ID!r} in the input clashes with the public record id the release "
            f"adds; rename it, declare it as input.id_column, or list it in input.drop"
        )
    n = len(frame)
    order = _canonical_order(frame)
    perm = stream(seed, "public-row-order").permutation(n)
    out = frame.iloc[order[perm]].reset_index(drop=True)
    out.insert(0, PUBLIC_ID, np.arange(1, n + 1, dtype=np.int64))
    return out


# -- codebook ---------------------------------------------------------------------------------
def _type_name(dtype: Any) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "date/time"
    return "text"


def _md(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _rule_text(var: str, config: ReleaseConfig) -> str:
    rule = config.partition[var]
    kv = config.key_variables[var]
    labels = generalize_domain(var, kv, rule).labels
    shown = ", ".join(labels[:15]) + (", ..." if len(labels) > 15 else "")
    if isinstance(rule, Bands):
        return f"bands {shown}"
    if isinstance(rule, Groups):
        return "groups " + "; ".join(f"{g}: {', '.join(map(str, m))}" for g, m in rule.groups.items())
    if isinstance(rule, Hierarchy):
        return f"hierarchy {Path(rule.hierarchy).name} level {rule.level}: {shown}"
    return "as is"


def _merged_variables(result: ReleaseResult, config: ReleaseConfig) -> tuple[int, list[str]]:
    """(number of PRBs made of several partition sets, partition variables whose generalized
    value differs inside at least one of them)."""
    ps = result.partition_sets
    pvars = [v for v in config.partition_variables if v in ps.columns]
    ps = ps[ps["prb"] >= 0]
    if ps.empty or not pvars:
        return 0, []
    sizes = ps.groupby("prb").size()
    multi = ps[ps["prb"].isin(sizes.index[sizes > 1])]
    if multi.empty:
        return 0, []
    nunique = multi.groupby("prb")[pvars].nunique()
    return int((sizes > 1).sum()), [v for v in pvars if (nunique[v] > 1).any()]


def _perturbation(var: str, config: ReleaseConfig, merged_vars: list[str] = ()) -> str:
    if var in config.key_variables:
        rule = config.partition.get(var)
        if rule is None:
            return ("may have been changed (key variable; post-randomized in records of rare "
                    "key combinations)")
        across = (" and, in merged partition sets, to a neighbouring generalized value"
                  if var in merged_vars else "")
        if rule == "as_is" or isinstance(rule, AsIs):
            if var in merged_vars:
                return "may have been changed, only in merged partition sets (see Partition)"
            return "never changed (partition variable, kept as is)"
        exact = "" if across else "; the generalized value is exact"
        return (f"may have been changed only within its generalized value ({_rule_text(var, config)})"
                f"{across}{exact}")
    if var in config.perturb:
        return f"may have been changed (eps-differentially private PRAM, eps = {config.perturb[var].epsilon:g})"
    if var == PUBLIC_ID:
        return "new sequential number 1..n in random order; no link to the original file"
    return "unchanged"


def codebook_markdown(config: ReleaseConfig, result: ReleaseResult) -> str:
    """The public codebook (Markdown).

    Lists every public variable with its type and whether it may have been perturbed, the
    categories and labels of every key variable, the partition (generalized values preserved
    exactly), xi, the number of records and the DP-PRAM variables of ``config.perturb``. It
    states nothing record-level and nothing from which PRAM could be undone: no seed, no theta
    per block, no PRB contents, no counts of changed records per block.
    """
    id_col = config.input.id_column
    cols = [PUBLIC_ID] + [c for c in result.frame.columns if c != id_col]
    dtypes = {c: result.frame[c].dtype for c in cols if c != PUBLIC_ID}
    n = len(result.frame)
    keys = config.key_names
    xi = config.risk.xi
    n_merged, merged_vars = _merged_variables(result, config)
    lines = [
        f"# Codebook: {config.name}",
        "",
        f"Public-use microdata: {n} records, {len(cols)} variables "
        f"({', '.join(f'`microdata.{f}`' for f in (config.output.formats if config.output else ['parquet']))}).",
        "",
        "## Disclosure control",
        "",
        "The file was protected with the Nayak-Zhang-You unbiased post-randomization method "
        "(PRAM). An intruder who knows a respondent's values of the key variables "
        f"({', '.join(f'`{k}`' for k in keys)}) and that the respondent is in the file picks the "
        f"right record with probability at most **xi = {xi:g}**, for every respondent and every "
        "number of matching records.",
        "",
        f"- Records in combinations of key values shared by at least {math.ceil(1 / xi)} "
        "respondents are unchanged. Records in rarer combinations may have had their key "
        "values replaced, all together, by those of another rare combination of the same "
        "partition set (below). The expected count of every combination of key values equals "
        "its count in the original file, and combinations absent from the original never appear.",
        "- Variables that are not key variables are released as collected"
        + (" (except the DP-PRAM variables below)." if config.perturb else "."),
        "- Direct identifiers and the original record identifier are removed; the records are in "
        f"random order and `{PUBLIC_ID}` is a new number with no link to the original file.",
    ]
    if config.partition:
        lines += [
            "",
            "### Partition",
            "",
            "Post-randomization never moves a record out of its partition set, so these "
            "generalized values are exact for every record"
            + (" (except as noted below for merged partition sets):" if n_merged else ":"),
            "",
        ]
        lines += [f"- `{v}`: {_md(_rule_text(v, config))}" for v in config.partition]
        if n_merged:
            lines += [
                "",
                f"In {n_merged} place(s), small partition sets had too few rare combinations "
                "to be protected on their own and were merged with neighbouring partition sets. "
                "Inside such a merged group a record may have moved between its partition sets, "
                f"so the generalized values of {', '.join(f'`{v}`' for v in merged_vars)} are "
                "exact for the merged group, not for each partition set in it.",
            ]
    if config.perturb:
        lines += ["", "### Differentially private PRAM", "",
                  "These non-key variables were randomized with eps-differentially private PRAM "
                  "(smaller eps = more protection, more noise):", ""]
        lines += [f"- `{v}`: eps = {p.epsilon:g}" for v, p in config.perturb.items()]
    lines += ["", "## Variables", "", "| # | variable | type | role | perturbation |",
              "|---|---|---|---|---|"]
    for i, c in enumerate(cols, start=1):
        typ = "integer" if c == PUBLIC_ID else _type_name(dtypes[c])
        role = ("record id" if c == PUBLIC_ID else "key" if c in config.key_variables
                else "weight" if c == config.input.weight else "")
        lines.append(f"| {i} | `{_md(c)}` | {typ} | {role} | {_md(_perturbation(c, config, merged_vars))} |")
    lines += ["", "## Categories of the key variables", ""]
    for k in keys:
        kv = config.key_variables[k]
        lines += [f"### `{k}`", ""]
        if kv.range is not None and not kv.labels:
            lines.append(f"Whole numbers {kv.range[0]} to {kv.range[1]}.")
        elif not kv.labels and len(kv.domain) > _MAX_LISTED:
            shown = ", ".join(f"`{_md(v)}`" for v in kv.domain[:100])
            lines.append(f"{len(kv.domain)} categories (the full list is in the release "
                         f"config); the first 100: {shown}, ...")
        elif not kv.labels:
            lines.append("Categories: " + ", ".join(f"`{_md(v)}`" for v in kv.domain) + ".")
        else:
            lines += ["| value | label |", "|---|---|"]
            lines += [f"| {_md(v)} | {_md(kv.labels.get(v, ''))} |" for v in kv.domain]
        if kv.missing == "category":
            lines.append("")
            lines.append("An empty value means *missing* (a category of its own).")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- the audit record ---------------------------------------------------------------------------
def _plain(obj: Any) -> Any:
    """Recursively convert numpy/pandas/Path values into JSON-serializable Python ones."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return _plain(frame.to_dict(orient="records"))


def config_text_of(config: ReleaseConfig) -> str:
    """The config file's text if it was loaded from a file, else a YAML dump of the model
    (hierarchy tables excluded; paths as written)."""
    if config.source_path is not None and Path(config.source_path).is_file():
        return Path(config.source_path).read_text(encoding="utf-8")

    def conv(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [conv(v) for v in o]
        return str(o) if isinstance(o, Path) else o

    data = conv(config.model_dump(mode="python", exclude_none=True))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("sdc")
    except Exception:  # not installed as a distribution
        import sdc

        return sdc.__version__


def build_audit(config: ReleaseConfig, result: ReleaseResult, *, input_path: Path,
                input_sha256: str, n_rows: int, seed_info: SeedInfo,
                public_hashes: dict[str, str], config_text: str,
                package_version: str, internal_hashes: dict[str, str] | None = None
                ) -> dict[str, Any]:
    """The content of ``internal/audit.json``.

    Keys: ``format``, ``name``, ``created_at`` (UTC; internal only), ``package_version``,
    ``python``, ``config`` (``text`` = exact copy, ``sha256`` of its UTF-8 bytes, ``base_dir``
    its relative paths resolve against, ``source_path``), ``input`` (absolute ``path``,
    ``format``, ``sha256``, ``n_rows``), ``seed`` (``source``: ``file`` or ``config``, the file's
    ``path`` and ``sha256`` - never the seed), ``risk`` (``xi``, ``theta``, ``kmin``,
    ``theta_mode``, ``small_blocks``, ``certificate``, ``certificate_at``, ``merges``),
    ``counts`` (records, cells, sensitive cells, partition sets, PRBs, records changed),
    ``blocks`` (the PRB table, one dict per PRB with its action), ``public_files`` and
    ``internal_files`` (name -> SHA-256).
    """
    sens = result.cell_prb >= 0
    return _plain({
        "format": AUDIT_FORMAT,
        "name": config.name,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "package_version": package_version,
        "python": sys.version.split()[0],
        "config": {
            "text": config_text,
            "sha256": sha256_bytes(config_text.encode("utf-8")),
            "base_dir": str(config.base_dir),
            "source_path": str(config.source_path) if config.source_path else None,
        },
        "input": {
            "path": str(Path(input_path).resolve()),
            "format": config.input.resolved_format,
            "sha256": input_sha256,
            "n_rows": int(n_rows),
        },
        "seed": {
            "source": "config" if seed_info.path is None else "file",
            "path": str(seed_info.path) if seed_info.path is not None else None,
            "sha256": seed_info.sha256,
            "created_by_this_run": bool(seed_info.created),
        },
        "risk": {
            "xi": float(result.xi),
            "theta": float(result.theta),
            "kmin": int(result.kmin),
            "theta_mode": config.risk.theta,
            "small_blocks": config.risk.small_blocks,
            "certificate": float(result.certificate),
            "certificate_at": result.certificate_at,
            "merges": list(result.merges),
        },
        "counts": {
            "records": int(len(result.frame)),
            "cells": int(result.cells.n_cells),
            "sensitive_cells": int(sens.sum()),
            "sensitive_records": int(result.cells.frequency[sens].sum()),
            "partition_sets": int(len(result.partition_sets)),
            "prbs": int(len(result.blocks)),
            "records_changed": int(result.n_changed),
        },
        "blocks": _records(result.blocks),
        "public_files": dict(public_hashes),
        "internal_files": dict(internal_hashes or {}),
    })


def assemble_release(config: ReleaseConfig, original: pd.DataFrame, result: ReleaseResult,
                     seed_info: SeedInfo, *, input_sha256: str, config_text: str,
                     reports: dict[str, bytes] | None = None
                     ) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """All files of a release as bytes: ``(public, internal)``, each name -> bytes.

    public: ``microdata.parquet`` and/or ``microdata.csv`` (per ``output.formats``; the frame of
    :func:`public_frame`, validated with :func:`sdc.schemas.validate_output` first) and
    ``codebook.md``. internal: ``blocks.parquet``, ``partition_sets.parquet``, the ``reports``
    given (e.g. ``risk.json``, ``report.html``) and ``audit.json`` (:func:`build_audit`, with
    the SHA-256 of every other file).

    Raises :class:`~sdc.schemas.OutputSchemaError` if the public frame breaks the output
    schema, :class:`ValueError` if a report name is reserved or not a plain file name.
    """
    pub = public_frame(result, config, seed_info.value)
    validate_output(pub, config)
    formats = config.output.formats if config.output is not None else ["parquet"]
    public: dict[str, bytes] = {}
    if "parquet" in formats:
        public["microdata.parquet"] = parquet_bytes(pub)
    if "csv" in formats:
        public["microdata.csv"] = csv_bytes(pub)
    public["codebook.md"] = codebook_markdown(config, result).encode("utf-8")

    internal: dict[str, bytes] = {
        "blocks.parquet": parquet_bytes(result.blocks),
        "partition_sets.parquet": parquet_bytes(result.partition_sets),
    }
    for name, data in (reports or {}).items():
        if name in internal or name == "audit.json" or not _NAME_OK.match(name):
            raise ValueError(f"report name {name!r} is reserved or not a plain file name")
        internal[name] = bytes(data)
    audit = build_audit(
        config, result, input_path=config.input_path, input_sha256=input_sha256,
        n_rows=len(original), seed_info=seed_info,
        public_hashes={k: sha256_bytes(v) for k, v in public.items()},
        internal_hashes={k: sha256_bytes(v) for k, v in internal.items()},
        config_text=config_text, package_version=_package_version(),
    )
    internal["audit.json"] = (json.dumps(audit, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return public, internal


# -- atomic publish ---------------------------------------------------------------------------
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False if the call is unavailable (then the caller falls
    back). Raises OSError for real failures (e.g. EEXIST with NOREPLACE)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_release(p: Path) -> bool:
    return (p / "internal" / "audit.json").is_file() or (
        (p / "public").is_dir() and (p / "internal").is_dir())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]+$")


def _leftovers(parent: Path, name: str) -> list[tuple[Path, str, bool]]:
    """(path, kind, stale) of this release's temp/old folders in ``parent``."""
    out = []
    for p in parent.glob(f".{_glob_escape(name)}.*-*"):
        m = _LEFTOVER.match(p.name)
        if m is None or m["name"] != name:
            continue
        pid = int(m["pid"])
        out.append((p, m["kind"], not _pid_alive(pid) or pid == 0))
    return sorted(out)


def _glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


def _recover_and_clean(out_dir: Path) -> list[Path]:
    """Undo a half-done fallback swap and remove stale leftovers of killed runs."""
    removed = []
    parent, name = out_dir.parent, out_dir.name
    items = _leftovers(parent, name)
    if not out_dir.exists():
        olds = [p for p, kind, stale in items if kind == "old" and stale]
        if olds:  # killed between the two renames of the fallback swap: put the old one back
            os.rename(olds[-1], out_dir)
            _fsync_dir(parent)
            items = _leftovers(parent, name)
    for p, _kind, stale in items:
        if stale:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _write_file(path: Path, data: bytes, mode: int, label: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        half = len(data) // 2
        f.write(data[:half])
        f.flush()
        checkpoint(f"writing:{label}")
        f.write(data[half:])
        f.flush()
        os.fsync(f.fileno())


def _check_target(out_dir: Path) -> None:
    for a in out_dir.parents:
        if _is_release(a):
            inside = out_dir.relative_to(a).parts[0]
            where = f"the {inside}/ folder of" if inside in ("public", "internal") else "inside"
            raise ReleaseFolderError(
                f"output folder {str(out_dir)!r} lies in {where} release {str(a)!r}; a release "
                "must not be written inside another one (its public files would change). "
                "Choose another output.dir, e.g. a sibling of that release"
            )


def write_release(out_dir: Path, public: dict[str, bytes], internal: dict[str, bytes], *,
                  force: bool = False) -> Path:
    """Publish a release folder atomically; return its absolute path.

    ``public`` files go to ``<out_dir>/public/`` (folder 0755, files 0644), ``internal`` files
    to ``<out_dir>/internal/`` (folder 0700, files 0600). Steps:

    1. refuse an ``out_dir`` inside another release (e.g. in its ``public/``), a parent that
       cannot be created or written, or an existing ``out_dir`` that is not a release (a
       non-empty folder without ``internal/audit.json``; never deleted, even with ``force``);
    2. put back an old release left by a half-done fallback swap, and delete stale
       ``.<name>.tmp-*`` / ``.<name>.old-*`` folders of killed runs;
    3. an existing release without ``force`` -> :class:`ReleaseExistsError`;
    4. write every file into ``<parent>/.<name>.tmp-<pid>-<hex>`` (0700 while writing), each
       file fsynced (the test hook ``checkpoint("writing:<file>")`` runs after half of each
       file's bytes), the folders fsynced, then the folder made 0755;
    5. ``checkpoint("before_rename")``, then one atomic rename into place (exchange with the
       old release under ``force``), fsync of the parent, removal of the old release.

    Any exception during 4-5 removes the temp folder and re-raises; a SIGKILL leaves it for the
    next run to remove. See the module docstring for what a crash at each point leaves.
    """
    out_dir = Path(out_dir).expanduser().absolute()
    name = out_dir.name
    if not name or name in (".", ".."):
        raise ReleaseFolderError(f"output folder {str(out_dir)!r} has no usable name")
    for group in (public, internal):
        for fname in group:
            if not _NAME_OK.match(fname):
                raise ValueError(f"release file name {fname!r} is not a plain file name")
    _check_target(out_dir)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (PermissionError, FileExistsError, NotADirectoryError, OSError) as e:
        raise ReleaseFolderError(
            f"cannot create the folder {str(parent)!r} for release {name!r} ({e.strerror or e}); "
            "create it or choose another output.dir"
        ) from None
    if not parent.is_dir():
        raise ReleaseFolderError(f"{str(parent)!r} is not a folder; choose another output.dir")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ReleaseFolderError(
            f"folder {str(parent)!r} is not writable by this user, so release {name!r} cannot be "
            "written there; make it writable (chmod/chown) or choose another output.dir"
        )
    _recover_and_clean(out_dir)
    exists = out_dir.exists() or out_dir.is_symlink()
    if exists:
        if out_dir.is_dir() and not out_dir.is_symlink() and not any(out_dir.iterdir()):
            out_dir.rmdir()  # an empty folder is not a release: publish in its place
            exists = False
        elif (not out_dir.is_dir() or out_dir.is_symlink()
              or not (out_dir / "internal" / "audit.json").is_file()):
            raise ReleaseFolderError(
                f"{str(out_dir)!r} exists and is not a release folder (no internal/audit.json); "
                "it is never replaced, not even with --force. Move it away or choose another "
                "output.dir"
            )
        elif not force:
            raise ReleaseExistsError(
                f"release {str(out_dir)!r} already exists and is never overwritten silently. "
                "Rerun with --force to replace it (the old release stays in place until the "
                "new one is complete), or choose another output.dir"
            )

    tmp = parent / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp, 0o700)
    try:
        pub_dir, int_dir = tmp / "public", tmp / "internal"
        os.mkdir(pub_dir, 0o755)
        os.chmod(pub_dir, 0o755)
        os.mkdir(int_dir, 0o700)
        os.chmod(int_dir, 0o700)
        for fname, data in public.items():
            _write_file(pub_dir / fname, data, 0o644, fname)
        for fname, data in internal.items():
            _write_file(int_dir / fname, data, 0o600, fname)
        _fsync_dir(pub_dir)
        _fsync_dir(int_dir)
        os.chmod(tmp, 0o755)
        _fsync_dir(tmp)
        checkpoint("before_rename")
        if exists:
            _swap(tmp, out_dir)
        else:
            _publish_new(tmp, out_dir)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # after an exchange, tmp holds the old release
    shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _publish_new(tmp: Path, out_dir: Path) -> None:
    try:
        done = _renameat2(tmp, out_dir, _RENAME_NOREPLACE)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise ReleaseExistsError(
                f"release {str(out_dir)!r} appeared while this one was being written (another "
                "run?); nothing was replaced. Rerun with --force to replace it"
            ) from None
        raise
    if not done:
        if out_dir.exists():
            raise ReleaseExistsError(
                f"release {str(out_dir)!r} appeared while this one was being written; rerun "
                "with --force to replace it")
        os.rename(tmp, out_dir)


def _swap(tmp: Path, out_dir: Path) -> None:
    if _renameat2(tmp, out_dir, _RENAME_EXCHANGE):
        return
    old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(out_dir, old)
    checkpoint("between_renames")
    try:
        os.rename(tmp, out_dir)
    except BaseException:
        os.rename(old, out_dir)  # put the old release back
        raise
    os.rename(old, tmp)  # so the caller's cleanup removes the old release
