"""Read an audit table from CSV or Parquet with clear errors for missing, empty or bad files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fairengine.errors import DataContractError

FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


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


def read_table(path: str | Path, format: str | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame.

    Raises :class:`DataContractError` when the file does not exist, is empty (no bytes, or a
    header but no rows), or cannot be parsed in the given format.
    """
    p = Path(path).expanduser()
    fmt = format or detect_format(p)
    if fmt not in ("csv", "parquet"):
        raise DataContractError(f"format must be 'csv' or 'parquet', got {fmt!r}")
    if not p.is_file():
        raise DataContractError(f"data file {str(p)!r} does not exist or is not a file")
    if p.stat().st_size == 0:
        raise DataContractError(f"data file {str(p)!r} is empty (0 bytes)")
    try:
        frame = pd.read_csv(p) if fmt == "csv" else pd.read_parquet(p)
    except pd.errors.EmptyDataError:
        raise DataContractError(f"data file {str(p)!r} has no columns or rows") from None
    except Exception as exc:  # parser errors of pandas/pyarrow: re-raise with the file named
        raise DataContractError(
            f"could not read {str(p)!r} as {fmt}: {type(exc).__name__}: {exc}"
        ) from exc
    if len(frame) == 0:
        raise DataContractError(
            f"data file {str(p)!r} has a header ({len(frame.columns)} columns) but no rows"
        )
    return frame
