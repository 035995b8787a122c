"""Cleaning of the role columns (label, protected attributes, score, weight) before an audit.

Raw files carry artefacts that would otherwise become findings: UCI Adult writes ``", "`` between
fields (every value starts with a space) and ``?`` for a missing value, so ``" ?"`` would be
audited as a group of its own. :func:`clean_role_columns` applies three rules to the role columns
only (features go to the model as they are), and reports every change as a warning sentence:

1. **Whitespace.** Leading and trailing whitespace is stripped from text values; groups and
   labels are named by the stripped values.
2. **Missing values.** A value is missing when pandas read it as missing (NaN, an empty field)
   or when its stripped text is a marker: ``?``, ``NA``, ``N/A``, ``NaN``, ``null``, ``None``
   (case-insensitive, and pandas' other default markers), or one of the user's ``na_values``
   (numeric markers such as ``-999`` also match numbers). With ``missing="error"`` any missing
   value stops the audit with the count per column; with ``missing="drop"`` the rows with a
   missing role value are dropped and their number is reported. A text column whose remaining
   values are all numbers (it was text only because of the markers) becomes numeric.
3. **Case variants.** Values of a protected attribute that differ only in case (``Female`` /
   ``female``) are *not* merged: they stay separate groups and a warning names them with their
   counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles

MISSING_POLICIES: tuple[str, ...] = ("error", "drop")

#: text markers of a missing value (compared after stripping, case-insensitively); the first
#: seven are named in messages, the rest are pandas' other default ``na_values``
MISSING_MARKERS: tuple[str, ...] = (
    "?", "", "NA", "N/A", "NaN", "null", "None",
    "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "n/a", "nan", "NULL",
)  # fmt: skip
_NAMED_MARKERS = 7
_NOT_A_MARKER = "empty/NaN"


@dataclass(frozen=True)
class CleanedTable:
    """The table after :func:`clean_role_columns`.

    ``warnings``: one sentence per change (whitespace stripped, rows dropped, case variants);
    ``dropped_rows``: rows removed under ``missing="drop"``; ``missing_counts``: rows with a
    missing value per role column (before dropping; columns without any are left out).
    """

    frame: pd.DataFrame
    warnings: tuple[str, ...] = ()
    dropped_rows: int = 0
    missing_counts: dict[str, int] = field(default_factory=dict)


@dataclass
class _ColumnReport:
    column: str
    role: str  # "label column 'y'" etc.
    stripped: int = 0
    example: tuple[str, str] | None = None  # (before, after) of one stripped value
    missing: Counter[str] = field(default_factory=Counter)  # marker text -> rows


def clean_role_columns(
    frame: pd.DataFrame,
    roles: ColumnRoles,
    *,
    na_values: Iterable[object] = (),
    missing: str = "error",
) -> CleanedTable:
    """Strip whitespace, find missing values and flag case variants in the role columns.

    Role columns absent from ``frame`` are skipped (data validation reports them). Raises
    :class:`DataContractError` naming every role column with missing values and their count
    when ``missing="error"``, and when ``missing="drop"`` would drop every row.
    """
    if missing not in MISSING_POLICIES:
        raise DataContractError(f"missing must be one of {list(MISSING_POLICIES)}, got {missing!r}")
    user = [str(v) for v in na_values]
    markers = {m.strip().casefold() for m in (*MISSING_MARKERS, *user)}
    numeric_markers = _numbers(user)

    out = frame.copy(deep=False)
    reports: list[_ColumnReport] = []
    is_missing = np.zeros(len(frame), dtype=bool)
    for column, role in _role_columns(roles):
        if column not in frame.columns or not isinstance(frame[column], pd.Series):
            continue
        report = _ColumnReport(column, role)
        cleaned, col_missing = _clean_column(frame[column], report, markers, numeric_markers)
        if cleaned is not None:
            out[column] = cleaned
        is_missing |= col_missing
        reports.append(report)

    warnings = [_strip_warning(r) for r in reports if r.stripped]
    counts = {r.column: sum(r.missing.values()) for r in reports if r.missing}
    dropped = 0
    if counts:
        if missing == "error":
            raise DataContractError(_missing_message(reports, len(frame), user))
        dropped = int(is_missing.sum())
        if dropped == len(frame):
            raise DataContractError(
                f"every one of the {len(frame)} rows has a missing value in a role column "
                f"({_missing_summary(reports, len(frame))}); nothing is left to audit"
            )
        out = out.loc[~is_missing].reset_index(drop=True)
        warnings.append(
            f"dropped {dropped} of {len(frame)} rows with a missing value in a role column "
            f"(data.missing: drop): {_missing_summary(reports, len(frame))}"
        )
    for column in roles.protected:
        if column in out.columns and isinstance(out[column], pd.Series):
            note = _case_variants(out[column], column)
            if note:
                warnings.append(note)
    taken = {c for c, _ in _role_columns(roles)}
    features = [c for c in out.columns if c not in taken]
    warnings += _feature_marker_warnings(out, features, markers - {""})
    return CleanedTable(out, tuple(warnings), dropped, counts)


def _feature_marker_warnings(
    frame: pd.DataFrame, columns: list[str], markers: set[str]
) -> list[str]:
    """One warning per text feature column holding missing-value markers (``?`` in raw Adult):
    features go to the model unchanged, so the model sees the marker as a value."""
    out = []
    for column in columns:
        col = frame[column]
        if not isinstance(col, pd.Series) or not (
            pd.api.types.is_object_dtype(col.dtype) or pd.api.types.is_string_dtype(col.dtype)
        ):
            continue
        text = col.dropna().astype(str).str.strip()
        hits = text[text.str.casefold().isin(markers)]
        if len(hits):
            shown = ", ".join(repr(v) for v in sorted(set(hits))[:3])
            out.append(
                f"feature column {column!r} holds {len(hits)} missing-value marker(s) ({shown}); "
                "features reach the model unchanged, so it sees them as a value: drop or impute "
                "those rows first if the model was not trained with them"
            )
    return out


def _role_columns(roles: ColumnRoles) -> list[tuple[str, str]]:
    cols = [] if roles.label is None else [(roles.label, f"label column {roles.label!r}")]
    cols += [(c, f"protected attribute {c!r}") for c in roles.protected]
    if roles.score is not None:
        cols.append((roles.score, f"score column {roles.score!r}"))
    if roles.weight is not None:
        cols.append((roles.weight, f"weight column {roles.weight!r}"))
    if roles.list_id is not None:
        cols.append((roles.list_id, f"list-id column {roles.list_id!r}"))
    return cols


def _numbers(values: Iterable[str]) -> set[float]:
    found = set()
    for v in values:
        try:
            found.add(float(v))
        except ValueError:
            continue
    return {x for x in found if np.isfinite(x)}


def _clean_column(
    col: pd.Series, report: _ColumnReport, markers: set[str], numeric_markers: set[float]
) -> tuple[pd.Series | None, np.ndarray]:
    """(the cleaned column or ``None`` if unchanged, the rows with a missing value).

    Works on the distinct values (``pd.factorize``), so a label or group column of millions of
    rows costs one pass.
    """
    if pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
        return _clean_numeric(col, report, numeric_markers)
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    values = list(uniques)
    counts = np.bincount(codes[codes >= 0], minlength=len(values))
    n_na = int((codes < 0).sum())
    if n_na:
        report.missing[_NOT_A_MARKER] = n_na
    new_values: list[object] = []
    marker_of: list[bool] = []
    for value, n in zip(values, counts, strict=True):
        new = value
        if isinstance(value, str):
            new = value.strip()
            if new != value:
                report.stripped += int(n)
                if report.example is None:
                    report.example = (value, new)
            is_marker = new.casefold() in markers
            if is_marker:
                report.missing[repr(new)] += int(n)
        else:
            is_marker = _is_number(value) and float(value) in numeric_markers
            if is_marker:
                report.missing[repr(_plain(value))] += int(n)
        new_values.append(new)
        marker_of.append(is_marker)
    marker = np.asarray(marker_of, dtype=bool)
    row_missing = codes < 0
    if marker.any():
        row_missing = row_missing | (marker[np.where(codes >= 0, codes, 0)] & (codes >= 0))
    if not report.stripped and not marker.any():
        return None, row_missing

    kept = [v for v, m in zip(new_values, marker_of, strict=True) if not m]
    table = np.empty(len(new_values) + 1, dtype=object)
    table[:-1] = [None if m else v for v, m in zip(new_values, marker_of, strict=True)]
    table[-1] = None
    cleaned = table[np.where(codes >= 0, codes, len(new_values))]
    if marker.any() and kept and all(_is_numeric_text(v) for v in kept):
        return pd.Series(pd.to_numeric(cleaned), index=col.index, name=col.name), row_missing
    dtype = col.dtype if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object else None
    out = pd.Series(cleaned, index=col.index, name=col.name, dtype=dtype)
    return out, row_missing


def _clean_numeric(
    col: pd.Series, report: _ColumnReport, numeric_markers: set[float]
) -> tuple[pd.Series | None, np.ndarray]:
    """Numeric and boolean columns: NaN is missing, and so are numeric ``na_values``."""
    row_na = col.isna().to_numpy(dtype=bool)
    if row_na.any():
        report.missing[_NOT_A_MARKER] = int(row_na.sum())
    if not numeric_markers or pd.api.types.is_bool_dtype(col.dtype):
        return None, row_na
    hits = col.isin(sorted(numeric_markers)).to_numpy(dtype=bool) & ~row_na
    for value, n in col[hits].value_counts().items():
        report.missing[repr(_plain(value))] += int(n)
    if not hits.any():
        return None, row_na
    return col.mask(pd.Series(hits, index=col.index)), row_na | hits


def _plain(x: object) -> object:
    return x.item() if isinstance(x, np.generic) else x


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _is_numeric_text(value: object) -> bool:
    if _is_number(value):
        return True
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _strip_warning(r: _ColumnReport) -> str:
    before, after = r.example or ("", "")
    return (
        f"{r.role}: stripped leading/trailing whitespace from {r.stripped} value(s) (e.g. "
        f"{before!r} -> {after!r}); the audit uses the stripped values"
    )


def _missing_summary(reports: list[_ColumnReport], n_rows: int) -> str:
    parts = []
    for r in reports:
        if r.missing:
            total = sum(r.missing.values())
            kinds = ", ".join(f"{k}: {n}" for k, n in r.missing.most_common())
            parts.append(f"{r.role}: {total} of {n_rows} rows ({kinds})")
    return "; ".join(parts)


def _missing_message(reports: list[_ColumnReport], n_rows: int, user: list[str]) -> str:
    named = ", ".join(repr(m) for m in MISSING_MARKERS[:_NAMED_MARKERS])
    extra = f" and data.na_values {user!r}" if user else ""
    return (
        f"missing values in role columns: {_missing_summary(reports, n_rows)}. Fill them in the "
        "data, or set data.missing: drop to drop these rows (the number dropped is reported "
        f"with the audit). Treated as missing: empty fields, {named} (any case, surrounding "
        f"spaces ignored){extra}"
    )


def _case_variants(col: pd.Series, name: str) -> str | None:
    """A warning naming values of ``col`` that differ only in case, with their counts."""
    counts = col.value_counts(dropna=True, sort=False)
    by_fold: dict[str, list[tuple[str, int]]] = {}
    for value, n in counts.items():
        if isinstance(value, str):
            by_fold.setdefault(value.casefold(), []).append((value, int(n)))
    clashes = [sorted(vs) for vs in by_fold.values() if len(vs) > 1]
    if not clashes:
        return None
    shown = "; ".join(", ".join(f"{v!r} (n={n})" for v, n in vs) for vs in sorted(clashes))
    return (
        f"protected attribute {name!r} has values that differ only in case: {shown}; they are "
        "audited as separate groups — normalise them if they are the same group"
    )
