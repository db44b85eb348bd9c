"""What an input file really is, from its first bytes (a Parquet file declared as CSV, a
``.csv.gz``): refused with what the file is and the fix, before a reader turns it into noise."""

from __future__ import annotations

from pathlib import Path

from sdc.errors import InputError

__all__ = ["check_file_kind", "duplicate_names_error", "file_kind"]

#: leading bytes -> (kind, the input.format that reads it or None, the fix)
_MAGIC: list[tuple[bytes, str, str | None]] = [
    (b"PAR1", "a Parquet file", "parquet"),
    (b"$FL2", "an SPSS .sav file", "sav"),
    (b"$FL3", "an SPSS .zsav file", "sav"),
    (b"<stata_dta>", "a Stata .dta file", "dta"),
    (b"\x1f\x8b", "a gzip-compressed file", None),
    (b"BZh", "a bzip2-compressed file", None),
    (b"\xfd7zXZ\x00", "an xz-compressed file", None),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file", None),
    (b"PK\x03\x04", "a zip archive (or an Excel .xlsx file)", None),
    (b"\xd0\xcf\x11\xe0", "an old Excel .xls (OLE) file", None),
]


def file_kind(path: Path) -> tuple[str, str | None] | None:
    """(what the file is, the input.format that reads it) when its first bytes say so."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    for magic, what, fmt in _MAGIC:
        if head.startswith(magic):
            return what, fmt
    return None


def check_file_kind(path: Path, fmt: str) -> None:
    """Raise :class:`InputError` if ``path``'s first bytes show another format than ``fmt``
    (``csv``, ``parquet``, ``sav``, ``dta``), naming what the file is and the fix."""
    found = file_kind(path)
    if found is None:
        return  # text, or a file the format's own reader describes
    what, right = found
    if right == fmt:
        return
    if right is not None:
        fix = f"set input.format: {right} (or give the file its usual suffix)"
    else:
        fix = "decompress or export it to CSV or Parquet first, and point input.path at that file"
    raise InputError(f"input file {str(path)!r} is {what}, not {fmt.upper()} as the config "
                     f"says (input.format {fmt!r}, or the file's suffix); {fix}")


def duplicate_names_error(path: Path, names: list[str]) -> InputError:
    """The refusal of a file whose header repeats a column name (each name with its
    1-based column positions)."""
    seen: dict[str, list[int]] = {}
    for i, n in enumerate(names, 1):
        seen.setdefault(n, []).append(i)
    desc = "; ".join(f"{n!r} at columns {pos}" for n, pos in seen.items() if len(pos) > 1)
    return InputError(
        f"input file {str(path)!r} has duplicated column names: {desc}. Every column needs a "
        "unique name: rename or remove the duplicates in the file's header"
    )
