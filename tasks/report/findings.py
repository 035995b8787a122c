"""Labels of decisions, statuses and multiplicity methods, and the view of one finding."""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

from fairengine.results import Finding
from tasks.report.format import (
    DASH,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_pvalue,
)

MULTIPLICITY_LABELS: dict[str, str] = {
    "holm": "Holm",
    "bh": "Benjamini–Hochberg",
    "none": "unadjusted",
    "maxt": "Holm/maxT",
}
STATUS_LABELS: dict[str, str] = {"ok": "OK", "failed": "Failed", "not_run": "Not run"}
VERDICT_LABELS: dict[str, tuple[str, str]] = {  # status -> (word, symbol)
    "pass": ("PASS", "✓"),
    "fail": ("FAIL", "✗"),
    "incomplete": ("INCOMPLETE", "!"),
}
DECISION_LABELS: dict[str, str] = {
    "reject": "Rejected",
    "fail_to_reject": "Not rejected",
    "undetermined": "Undetermined (Monte-Carlo resolution)",
    "supporting": "Supporting evidence",
    "not_tested": "Not tested",
}
#: Verdict-table order: rejections, then undetermined, then the rest.
DECISION_ORDER: dict[str, int] = {"reject": 0, "undetermined": 1, "fail_to_reject": 2}
GROUP_RATES: tuple[str, ...] = ("positive_rate", "tpr", "fpr")
#: Short names of the rates a gap question compares (``question[0]``), for one-line labels.
RATE_SHORT: dict[str, str] = {
    "positive_rate": "Positive-rate",
    "tpr": "TPR",
    "fpr": "FPR",
    "auc": "AUC",
    "base_rate": "Base-rate",
}
DECISION_SHORT: dict[str, str] = {  # badge text where space is short (the full one on hover)
    "reject": "Rejected",
    "fail_to_reject": "Not rejected",
    "undetermined": "Undetermined",
    "supporting": "Supporting",
    "not_tested": "Not tested",
}
DECISION_MARKS: dict[str, str] = {  # a symbol beside the colour, so decisions read without it
    "reject": "✗",
    "undetermined": "?",
    "fail_to_reject": "✓",
}
_TOLERANCE = re.compile(r"(?:≤|<=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")

log = logging.getLogger(__name__)


def multiplicity_label(multiplicity: str) -> str:
    """``holm`` -> ``Holm``, ``bh`` -> ``Benjamini–Hochberg``, ``none`` -> ``unadjusted``."""
    return MULTIPLICITY_LABELS.get(multiplicity, multiplicity)


# --------------------------------------------------------------------------- view data


def question_parts(f: Finding) -> tuple[str, str, str, str] | None:
    """``(metric, attribute, group a, group b)`` of a finding that compares a rate between two
    groups (its :attr:`~fairengine.results.Finding.question`); ``None`` for any other."""
    if not f.question:
        return None
    try:
        parts = json.loads(f.question)
    except ValueError:
        return None
    if not isinstance(parts, list) or len(parts) != 4:
        return None
    metric, attribute, a, b = (str(x) for x in parts)
    return metric, attribute, a, b


def finding_tolerance(f: Finding, parameters: dict[str, Any] | None = None) -> float | None:
    """The tolerance of a finding tested against one (H0 "|gap| ≤ τ", "ratio <= δ"): the number
    its null hypothesis bounds the quantity by, else the method's ``tolerance`` parameter when
    the finding's null is a tolerance; ``None`` for a null of no difference."""
    if f.pvalue is None:
        return None
    match = _TOLERANCE.search(f.null_hypothesis or "")
    value: Any = match.group(1) if match else None
    if value is None and f.null_kind == "tolerance":
        value = (parameters or {}).get("tolerance")
    try:
        tol = float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return None
    return tol if math.isfinite(tol) and tol > 0 else None


def effect_size(estimate: float | None, tolerance: float | None) -> float:
    """How large a finding is, for ranking: ``|estimate| / tolerance`` when it was tested
    against a tolerance (how many tolerances the gap or ratio spans), else ``|estimate|``;
    ``-inf`` for a missing or undefined estimate (ranked last)."""
    try:
        x = abs(float(estimate))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return -math.inf
    if not math.isfinite(x):
        return math.inf if math.isinf(x) else -math.inf
    return x / tolerance if tolerance else x


def fmt_times(x: float) -> str:
    """A multiple of a tolerance: ``4.8×``, ``167×``; ``—`` when undefined."""
    if not math.isfinite(x):
        return "∞" if x == math.inf else DASH
    return f"{x:.1f}×" if x < 10 else f"{x:,.0f}×"


def finding_attribute(f: Finding, protected: list[str] | tuple[str, ...]) -> str | None:
    """The protected attribute, or intersection (``race × sex``), a finding concerns: its gap
    question's attribute, else the first part of its key naming one (``df_eps.sp.race_x_sex``,
    ``fliptest_pos.gender.man_woman``); ``None`` for a finding about the whole model."""
    q = question_parts(f)
    names = [str(a) for a in protected]
    if q is not None:
        return intersection_name(q[1], names)
    for part in f.key.split(".")[1:]:
        name = intersection_name(part, names)
        if name in names or " × " in name:
            return name
    return None


def intersection_name(name: str, protected: list[str]) -> str:
    """``race × sex`` for an intersection named ``race_x_sex`` or ``race & sex`` (every part a
    protected attribute); any other name as given."""
    for sep in ("_x_", " & ", " × "):
        parts = name.split(sep)
        if len(parts) > 1 and all(p in protected for p in parts):
            return " × ".join(parts)
    return name


def short_label(f: Finding) -> str:
    """A one-line name: ``Positive-rate gap, race: A − B`` for a comparison of two groups (the
    method's full label names the test), else the finding's label."""
    q = question_parts(f)
    if q is None or q[0] not in RATE_SHORT:
        return f.label or f.key
    metric, attribute, a, b = q
    kind = "gap" if f.null_kind == "tolerance" else "difference"
    return f"{RATE_SHORT[metric]} {kind}, {attribute}: {a} − {b}"


def rank_key(f: dict[str, Any]) -> tuple[int, float, float, str]:
    """Order of the top findings (on :func:`finding_view` dicts): rejected first, then
    undetermined, then not rejected; within each, the larger effect first (:func:`effect_size`:
    in tolerances where the test has one, else the absolute estimate); then the smaller
    adjusted p-value; then the key (stable across renders)."""
    p = f.get("adjusted_pvalue_value")
    return (
        DECISION_ORDER.get(f["decision"], 3),
        -f["effect"],
        1.0 if p is None or not math.isfinite(p) else p,
        f["key"],
    )


def finding_view(
    f: Finding, tolerance: float | None = None, attribute: str | None = None
) -> dict[str, Any]:
    """Pre-formatted strings of one finding (``tolerance``: :func:`finding_tolerance`;
    ``attribute``: the protected attribute or intersection it concerns, for grouping)."""
    interval = f.interval
    effect = effect_size(f.estimate, tolerance)
    return {
        "key": f.key,
        "label": f.label,
        "short_label": short_label(f),
        "attribute": attribute,
        "tolerance": tolerance,
        "effect": effect,
        "effect_text": fmt_times(effect) if tolerance else DASH,
        "tolerance_text": f"{tolerance:g}" if tolerance else "",
        "adjusted_pvalue_value": f.adjusted_pvalue,
        "mark": DECISION_MARKS.get(f.decision, ""),
        "estimate": fmt_number(f.estimate),
        "interval": fmt_interval(interval.low, interval.high) if interval else DASH,
        "level": fmt_level(interval.level) if interval else "",
        "interval_method": interval.method if interval else "",
        "pvalue": fmt_pvalue(f.pvalue),
        "adjusted_pvalue": fmt_pvalue(f.adjusted_pvalue),
        "null_hypothesis": f.null_hypothesis,
        "decision": f.decision,
        "decision_label": DECISION_LABELS.get(f.decision, str(f.decision)),
        "decision_short": DECISION_SHORT.get(f.decision, str(f.decision)),
        "reading": f.reading,
        "tested": f.tested,
        "counts": f.counts,
        "resamples": resampling_note(f),
        "pvalue_note": pvalue_note(f),
    }


def pvalue_note(f: Finding) -> str:
    """For a Monte-Carlo p-value: the interval its resamples leave for the exact p-value (and,
    when undetermined, how many resamples would settle it); empty for an exact p-value."""
    if f.pvalue_bounds is None:
        return ""
    low, high = f.pvalue_bounds
    text = f"Monte-Carlo interval of the p-value: [{fmt_pvalue(low)}, {fmt_pvalue(high)}]"
    if f.decision == "undetermined" and f.resamples_needed:
        text += f"; about {f.resamples_needed:,.0f} resamples would settle the decision"
    return text


def resampling_note(f: Finding) -> str:
    """``"1,999 permutation + 49 self-map resamples"`` for a Monte-Carlo p-value (its interval
    and the resamples that would settle it are in the reading); empty for an exact one."""
    if not f.resampling:
        return ""
    return " + ".join(f"{p.resamples:,} {p.name}" for p in f.resampling) + " resamples"
