"""The audit's findings as a table: one row per finding of every method, in the columns a
reader scans first (label, decision, estimate and interval, p-values). The MLflow run's table
artifact (:func:`tasks.mlflow_log.log_findings_table`) and ``AuditResult.to_frame()`` of the
Python API are both this table."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from fairengine.results import AuditResult

FINDINGS_COLUMNS: tuple[str, ...] = (
    "label",
    "decision",
    "estimate",
    "ci_low",
    "ci_high",
    "adjusted_pvalue",
    "pvalue",
    "attribute",
    "group_a",
    "group_b",
    "metric",
    "method",
    "key",
    "counts",
    "decided_by",
    "null_kind",
    "null_hypothesis",
    "ci_level",
    "ci_method",
    "method_title",
    "question",
    "reading",
)
"""The columns of the findings table, one row per finding (see :func:`findings_rows`); what
a reader scans first (label, decision, estimate and interval, p-values) comes first, as the MLflow
UI's table view shows the first columns."""


def _finite(value: float | None) -> float | None:
    """``value`` as a float, ``None`` when absent or not finite (JSON has no inf or NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _question_parts(question: str | None) -> tuple[str | None, ...]:
    """``(metric, attribute, group_a, group_b)`` of a two-group question
    (:func:`fairengine.results.gap_question`), else four ``None``."""
    if question:
        try:
            parts = json.loads(question)
        except ValueError:
            parts = None
        if isinstance(parts, list) and len(parts) == 4:
            return tuple(str(p) for p in parts)
    return (None, None, None, None)


def findings_rows(result: AuditResult) -> list[dict[str, Any]]:
    """One row per finding of every method, with the columns of :data:`FINDINGS_COLUMNS`.

    ``metric``, ``attribute``, ``group_a`` and ``group_b`` are known for the findings that
    compare a rate between two groups (their ``question``) and empty for the others (ε over
    intersections, FlipTest's flip rates, the individual-fairness statistics, ...; their
    ``label`` says what they measure). ``counts`` is whether the decision counts in the
    verdict (tested and not supporting evidence). Values that are not finite (an infinite
    ratio) are empty: the table is JSON.
    """
    rows: list[dict[str, Any]] = []
    for method in result.methods:
        for f in method.findings:
            metric, attribute, group_a, group_b = _question_parts(f.question)
            ci = f.interval
            rows.append(
                {
                    "key": f.key,
                    "label": f.label,
                    "method": method.method,
                    "method_title": method.title,
                    "metric": metric,
                    "attribute": attribute,
                    "group_a": group_a,
                    "group_b": group_b,
                    "estimate": _finite(f.estimate),
                    "ci_low": _finite(ci.low) if ci else None,
                    "ci_high": _finite(ci.high) if ci else None,
                    "ci_level": _finite(ci.level) if ci else None,
                    "ci_method": ci.method if ci else None,
                    "pvalue": _finite(f.pvalue),
                    "adjusted_pvalue": _finite(f.adjusted_pvalue),
                    "decision": str(f.decision),
                    "counts": bool(f.counts),
                    "decided_by": f.decided_by,
                    "null_kind": f.null_kind or None,
                    "null_hypothesis": f.null_hypothesis or None,
                    "question": f.question,
                    "reading": f.reading or None,
                }
            )
    return rows


def findings_frame(result: AuditResult) -> pd.DataFrame:
    """:func:`findings_rows` as a DataFrame with the columns :data:`FINDINGS_COLUMNS`, numbers
    as floats (``NaN`` where a value is absent or not finite)."""
    frame = pd.DataFrame(findings_rows(result), columns=list(FINDINGS_COLUMNS))
    for column in ("estimate", "ci_low", "ci_high", "ci_level", "pvalue", "adjusted_pvalue"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame
