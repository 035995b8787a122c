"""Labels of decisions, statuses and multiplicity methods, and the view of one finding."""

from __future__ import annotations

import logging
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

log = logging.getLogger(__name__)


def multiplicity_label(multiplicity: str) -> str:
    """``holm`` -> ``Holm``, ``bh`` -> ``Benjamini–Hochberg``, ``none`` -> ``unadjusted``."""
    return MULTIPLICITY_LABELS.get(multiplicity, multiplicity)


# --------------------------------------------------------------------------- view data


def finding_view(f: Finding) -> dict[str, Any]:
    """Pre-formatted strings of one finding."""
    interval = f.interval
    return {
        "key": f.key,
        "label": f.label,
        "estimate": fmt_number(f.estimate),
        "interval": fmt_interval(interval.low, interval.high) if interval else DASH,
        "level": fmt_level(interval.level) if interval else "",
        "interval_method": interval.method if interval else "",
        "pvalue": fmt_pvalue(f.pvalue),
        "adjusted_pvalue": fmt_pvalue(f.adjusted_pvalue),
        "null_hypothesis": f.null_hypothesis,
        "decision": f.decision,
        "decision_label": DECISION_LABELS.get(f.decision, str(f.decision)),
        "reading": f.reading,
        "tested": f.tested,
        "counts": f.counts,
        "resamples": resampling_note(f),
    }


def resampling_note(f: Finding) -> str:
    """``"1,999 permutation + 49 self-map resamples"`` for a Monte-Carlo p-value (its interval
    and the resamples that would settle it are in the reading); empty for an exact one."""
    if not f.resampling:
        return ""
    return " + ".join(f"{p.resamples:,} {p.name}" for p in f.resampling) + " resamples"
