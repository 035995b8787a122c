"""Read an audit table from CSV or Parquet with clear errors for missing, empty or bad files.

CSV files are first looked at with the :mod:`csv` module, so that what pandas would hide is
seen and reported:

* **delimiter**: unless given, it is detected among ``,`` ``;`` tab ``|`` from the first lines
  (the candidate that splits every line into the same number > 1 of fields, the most fields
  winning, ``,`` on a tie). A table that stays one column is an error naming the delimiter: an
  audit needs at least a label and a protected-attribute column.
* **header**: read by the csv module, so a repeated column name is seen before pandas renames
  the second copy ``name.1``. Copies with identical values are reduced to the first (a warning);
  copies with different values are an error naming every position.
* **headerless files** (e.g. UCI Adult's ``adult.data``): ``names`` gives the column names.
* **rows longer than the header**: pandas would turn the first fields into the row index; an
  error.

Error messages name the file, columns, counts and positions; they never quote a line of the
file (a wrong ``data.path`` must not leak the content of whatever file it points to).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import pandas as pd

from fairengine.errors import DataContractError

FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}

#: delimiters tried when none is given, in order of preference on a tie
DELIMITERS: tuple[str, ...] = (",", ";", "\t", "|")
_SAMPLE_CHARS = 1 << 16  # text read to detect the delimiter and check the header
#: a compression detected from a file's first bytes (pandas' name for it)
_Compression = Literal["gzip", "bz2", "xz", "zip"]
_MAGIC: tuple[tuple[bytes, _Compression], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
)


class DataHygieneWarning(UserWarning):
    """Something in the input was changed or guessed while reading it (see the message)."""


@dataclass(frozen=True)
class TableRead:
    """A table read from a file, and what was changed or guessed while reading it.

    ``warnings`` are plain sentences for the audit's warnings (a repeated column reduced to one,
    a detected delimiter); ``delimiter`` is the CSV delimiter used (``None`` for Parquet).
    """

    frame: pd.DataFrame
    warnings: tuple[str, ...] = ()
    delimiter: str | None = None


def detect_format(path: Path) -> str:
    """``csv`` or ``parquet`` from the file name (``.csv``, ``.csv.gz``, ``.parquet``, ``.pq``)."""
    name = path.name.lower()
    for suffix, fmt in sorted(FORMATS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            return fmt
    raise DataContractError(
        f"cannot tell the format of {str(path)!r} from its name; expected one of "
        f"{sorted(FORMATS)} or pass format='csv'|'parquet'"
    )


def read_table(
    path: str | Path,
    format: str | None = None,
    *,
    delimiter: str | None = None,
    names: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The table of :func:`load_table`; its warnings are issued as :class:`DataHygieneWarning`."""
    table = load_table(path, format, delimiter=delimiter, names=names)
    for message in table.warnings:
        warnings.warn(message, DataHygieneWarning, stacklevel=2)
    return table.frame


def load_table(
    path: str | Path,
    format: str | None = None,
    *,
    delimiter: str | None = None,
    names: Sequence[str] | None = None,
    skip_initial_space: bool | None = None,
    skip_rows: int = 0,
) -> TableRead:
    """Read a CSV or Parquet file (see the module docstring for the CSV checks).

    ``delimiter``: CSV field delimiter, ``None`` to detect it. ``names``: column names of a CSV
    file without a header row. ``skip_initial_space``: drop the space after each delimiter
    (files written with ``", "`` between fields, such as UCI Adult); ``None`` detects it: when
    every field after the first of every sampled row starts with a space. ``skip_rows``: lines
    at the top of a CSV file that are not data (a title, a note), skipped before the header or
    the first row. Raises
    :class:`DataContractError` when the file does not exist,
    is empty (no bytes, or a header but no rows), has a single column, repeats a column name
    with different values, or cannot be parsed in the given format.
    """
    p = Path(path).expanduser()
    fmt = format or detect_format(p)
    if fmt not in ("csv", "parquet"):
        raise DataContractError(f"format must be 'csv' or 'parquet', got {fmt!r}")
    if not p.is_file():
        raise DataContractError(f"data file {str(p)!r} does not exist or is not a file")
    if p.stat().st_size == 0:
        raise DataContractError(f"data file {str(p)!r} is empty (0 bytes)")
    if fmt == "parquet":
        if delimiter is not None or names is not None or skip_initial_space or skip_rows:
            raise DataContractError(
                "data.delimiter, data.names and data.skip_rows apply to CSV files; "
                f"{str(p)!r} is read as Parquet"
            )
        frame = _parse(p, "parquet", lambda: pd.read_parquet(p))
        frame, notes = _merge_repeated(frame, [str(c) for c in frame.columns], p)
        _require_rows(frame, p)
        return TableRead(frame, tuple(notes), None)
    return _load_csv(
        p, delimiter, list(names) if names is not None else None, skip_initial_space, skip_rows
    )


# ---------------------------------------------------------------- CSV
def _spaced_fields(text: str, truncated: bool, delimiter: str) -> bool:
    """Whether every field after the first of every sampled row starts with one space (a file
    written with ``"<delimiter> "`` between fields)."""
    rows = [r for r in _rows(text, truncated, delimiter) if len(r) > 1]
    fields = [f for r in rows for f in r[1:] if f != ""]
    return bool(fields) and all(f.startswith(" ") and not f.startswith("  ") for f in fields)


def _load_csv(
    p: Path,
    delimiter: str | None,
    names: list[str] | None,
    skip_initial_space: bool | None,
    skip_rows: int = 0,
) -> TableRead:
    compression = _compression(p)
    text, truncated = _sample(p, compression)
    if skip_rows:
        text = "".join(text.splitlines(keepends=True)[skip_rows:])
    notes: list[str] = []
    if delimiter is None:
        delimiter = _detect_delimiter(text, truncated, p)
        if delimiter != ",":
            notes.append(
                f"data file {str(p)!r} was read with the delimiter {_name(delimiter)}, detected "
                "from its first lines; set data.delimiter to use another"
            )
    first = _first_row(text, truncated, delimiter)
    if first is None:
        raise DataContractError(f"data file {str(p)!r} has no columns or rows")
    if len(first) < 2:
        others = [_name(d) for d in DELIMITERS if d != delimiter and len(_split(text, d)) > 1]
        hint = (
            f"; its first line does split on {' and '.join(others)}: set data.delimiter"
            if others
            else "; set data.delimiter if the file uses a delimiter other than "
            + ", ".join(_name(d) for d in DELIMITERS)
        )
        raise DataContractError(
            f"data file {str(p)!r} reads as a single column with the delimiter "
            f"{_name(delimiter)}; an audit table needs at least a label and a protected-attribute "
            f"column{hint}"
        )
    if names is not None:
        if len(first) != len(names):
            raise DataContractError(
                f"data.names gives {len(names)} column names but the first line of "
                f"{str(p)!r} has {len(first)} fields (delimiter {_name(delimiter)})"
                + _not_data_hint(text, truncated, len(names), skip_rows)
            )
        if [f.strip() for f in first] == [str(n).strip() for n in names]:
            raise DataContractError(
                f"the first line of {str(p)!r} repeats data.names: the file has a header row; "
                "remove data.names"
            )
        header = [str(n) for n in names]
    else:
        header = first

    if skip_initial_space is None and _spaced_fields(text, truncated, delimiter):
        skip_initial_space = True
        notes.append(
            f"data file {str(p)!r} separates its fields with {_name(delimiter)} and a space; the "
            "space after each delimiter was dropped from every column (features included), so "
            f"' Female' reads 'Female'; set data.skip_initial_space: false to keep it"
        )
        header = [h.lstrip(" ") for h in header] if names is None else header
    skip_space = bool(skip_initial_space)

    def read() -> pd.DataFrame:
        if names is None:
            return pd.read_csv(
                p,
                sep=delimiter,
                low_memory=False,
                skipinitialspace=skip_space,
                compression=compression,
                skiprows=skip_rows,
            )
        return pd.read_csv(
            p,
            sep=delimiter,
            low_memory=False,
            skipinitialspace=skip_space,
            compression=compression,
            header=None,
            names=header,
            skiprows=skip_rows,
        )

    frame = _parse(p, f"csv (delimiter {_name(delimiter)})", read)
    if not frame.index.equals(pd.RangeIndex(len(frame))):  # pandas made row labels of fields
        raise DataContractError(
            f"rows of {str(p)!r} have more fields than its header ({len(header)} columns with "
            f"the delimiter {_name(delimiter)}); check data.delimiter and the header"
        )
    if frame.shape[1] != len(header):
        raise DataContractError(
            f"the header of {str(p)!r} has {len(header)} fields by the csv module but pandas "
            f"read {frame.shape[1]} columns; check data.delimiter and the file's quoting"
        )
    frame, repeated = _merge_repeated(frame, header, p)
    _require_rows(frame, p)
    return TableRead(frame, tuple(notes + repeated), delimiter)


def _compression(p: Path) -> _Compression | None:
    """The compression of ``p`` from its first bytes (``None``: plain text)."""
    with p.open("rb") as fh:
        head = fh.read(8)
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def _open_text(p: Path, compression: _Compression | None) -> IO[str]:
    enc, errors, newline = "utf-8-sig", "replace", ""
    if compression == "gzip":
        return gzip.open(p, "rt", encoding=enc, errors=errors, newline=newline)
    if compression == "bz2":
        return bz2.open(p, "rt", encoding=enc, errors=errors, newline=newline)
    if compression == "xz":
        return lzma.open(p, "rt", encoding=enc, errors=errors, newline=newline)
    if compression == "zip":
        archive = zipfile.ZipFile(p)
        members = [n for n in archive.namelist() if not n.endswith("/")]
        if len(members) != 1:
            raise DataContractError(
                f"zip file {str(p)!r} must hold exactly one CSV file; it holds {len(members)}"
            )
        return io.TextIOWrapper(
            archive.open(members[0]), encoding=enc, errors=errors, newline=newline
        )
    return p.open("r", encoding=enc, errors=errors, newline=newline)


def _sample(p: Path, compression: _Compression | None) -> tuple[str, bool]:
    """The first ``_SAMPLE_CHARS`` characters (cut after the last full line) and whether the file
    goes on after them."""
    try:
        with _open_text(p, compression) as fh:
            text = fh.read(_SAMPLE_CHARS)
            truncated = len(text) == _SAMPLE_CHARS and fh.read(1) != ""
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:
        raise DataContractError(
            f"could not read {str(p)!r} as {compression or 'text'}: {type(exc).__name__}"
        ) from None
    if truncated and "\n" in text:
        text = text[: text.rindex("\n") + 1]
    return text, truncated


def _split(text: str, delimiter: str) -> list[str]:
    """The fields of the first non-empty row of ``text`` (``[]`` if none)."""
    return _first_row(text, False, delimiter) or []


def _rows(text: str, truncated: bool, delimiter: str) -> list[list[str]]:
    """The non-empty rows of the sample; the last one is dropped when the sample was cut (its
    quoted field may go on)."""
    try:
        rows = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
    except csv.Error:
        return []
    return rows[:-1] if truncated and len(rows) > 1 else rows


def _not_data_hint(text: str, truncated: bool, n_names: int, skip_rows: int) -> str:
    """When the lines after the first split into ``n_names`` fields on one delimiter (the first
    line is a title or a note, as in UCI's ``adult.test``): what to set."""
    lines = text.splitlines(keepends=True)
    rest = "".join(lines[1:])
    for d in DELIMITERS:
        rows = _rows(rest, truncated, d)
        if rows and all(len(r) == n_names for r in rows):
            return (
                f"; the lines after it split into {n_names} fields on {_name(d)}: if the first "
                f"line is not data (a title or a note), set data.skip_rows: {skip_rows + 1}"
            )
    return ""


def _first_row(text: str, truncated: bool, delimiter: str) -> list[str] | None:
    rows = _rows(text, truncated, delimiter)
    return rows[0] if rows else None


def _detect_delimiter(text: str, truncated: bool, p: Path) -> str:
    """The delimiter that splits every sampled row into the same number > 1 of fields (most
    fields first, then the order of :data:`DELIMITERS`); else the one splitting the first row
    into the most fields; else ``,`` (the single-column error follows)."""
    consistent: list[tuple[int, int, str]] = []
    first_counts: list[tuple[int, int, str]] = []
    for rank, d in enumerate(DELIMITERS):
        rows = _rows(text, truncated, d)
        if not rows:
            continue
        counts = {len(r) for r in rows}
        if len(counts) == 1 and len(rows[0]) > 1:
            consistent.append((len(rows[0]), -rank, d))
        if len(rows[0]) > 1:
            first_counts.append((len(rows[0]), -rank, d))
    if consistent:
        return max(consistent)[2]
    if first_counts:
        return max(first_counts)[2]
    return ","


def _name(delimiter: str) -> str:
    return "tab ('\\t')" if delimiter == "\t" else repr(delimiter)


# ---------------------------------------------------------------- shared
def _parse(p: Path, what: str, read: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``read()`` with pandas/pyarrow errors re-raised naming the file (first line of the
    library's message only, cut to 200 characters)."""
    try:
        return read()
    except pd.errors.EmptyDataError:
        raise DataContractError(f"data file {str(p)!r} has no columns or rows") from None
    except Exception as exc:  # parser errors of pandas/pyarrow: re-raise with the file named
        lines = str(exc).strip().splitlines()
        detail = lines[0][:200] if lines else ""
        raise DataContractError(
            f"could not read {str(p)!r} as {what}: {type(exc).__name__}: {detail}"
        ) from None


def _require_rows(frame: pd.DataFrame, p: Path) -> None:
    if len(frame) == 0:
        raise DataContractError(
            f"data file {str(p)!r} has a header ({len(frame.columns)} columns) but no rows"
        )


def _merge_repeated(
    frame: pd.DataFrame, header: list[str], p: Path
) -> tuple[pd.DataFrame, list[str]]:
    """Drop later copies of a repeated column name whose values equal the first copy's (one
    warning each); raise when copies differ. ``header`` is the file's own header, position by
    position (pandas has already renamed repeats to ``name.1``)."""
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(header):
        positions.setdefault(name, []).append(i)
    repeated = {n: pos for n, pos in positions.items() if len(pos) > 1}
    if not repeated:
        return frame, []
    notes: list[str] = []
    differing: list[str] = []
    drop: set[int] = set()
    for name, pos in repeated.items():
        first = frame.iloc[:, pos[0]]
        where = ", ".join(str(i + 1) for i in pos)
        if all(frame.iloc[:, j].equals(first) for j in pos[1:]):
            drop.update(pos[1:])
            notes.append(
                f"column {name!r} appears {len(pos)} times in {str(p)!r} (columns {where}) with "
                "identical values; the first copy is kept"
            )
        else:
            differing.append(f"{name!r} at columns {where}")
    if differing:
        raise DataContractError(
            f"data file {str(p)!r} repeats column name(s) with different values: "
            f"{'; '.join(differing)} (positions count from 1); rename them so that each name "
            "means one column"
        )
    keep = [i for i in range(frame.shape[1]) if i not in drop]
    return frame.iloc[:, keep], notes
