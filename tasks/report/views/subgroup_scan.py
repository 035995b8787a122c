"""Report view of ``subgroup_scan``: the top subgroups as readable rules (observed vs expected
rate, n, deviation with its simultaneous interval, step-down p-value, the naive p-value beside
it), the search space, and the null distribution of the scan maximum with the observed maximum
and the critical value marked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from markupsafe import Markup

from fairengine.results import MethodResult
from fairengine.subgroup_scan.result import SubgroupScanDetails
from tasks.report.format import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_pvalue,
    fmt_rate,
)
from tasks.report.plots import null_histogram_svg

METHOD = "subgroup_scan"
DETAILS = SubgroupScanDetails
TEMPLATE = "methods/subgroup_scan.html.j2"

STATISTIC_WORDS: dict[str, tuple[str, str, str]] = {
    "calibration": ("observed outcome rate", "predicted (mean score)", "all rows"),
    "positive_rate": ("positive-prediction rate", "overall rate", "all rows"),
    "tpr": ("true-positive rate", "overall TPR", "rows with label 1"),
    "fpr": ("false-positive rate", "overall FPR", "rows with label 0"),
}
"""Per statistic: what the observed rate is, what it is compared with, and the stratum."""

BINS = 30


def view(result: MethodResult) -> dict[str, Any]:
    """The top subgroups' table and the null histogram of a ``subgroup_scan`` result."""
    d = result.details
    assert isinstance(d, SubgroupScanDetails)
    observed, expected, stratum = STATISTIC_WORDS.get(
        d.statistic_name, (d.statistic_name, "expected", "rows")
    )
    level = fmt_level(d.null.confidence_level)
    rows = [
        {
            "rank": s.rank + 1,
            "rule": s.rule,
            "n": fmt_count(s.n),
            "observed": fmt_rate(s.observed_rate),
            "expected": fmt_rate(s.expected_rate),
            "z": fmt_number(s.z),
            "deviation": fmt_number(s.deviation),
            "interval": fmt_interval(s.interval.low, s.interval.high),
            "pvalue": fmt_pvalue(s.adjusted_pvalue),
            "naive": fmt_pvalue(s.naive_pvalue),
            "score": "—" if s.score is None else fmt_number(s.score),
            "q_hat": "—" if s.q_hat is None else fmt_number(s.q_hat),
        }
        for s in d.top
    ]
    plots = []
    maxima = np.asarray(d.null.maxima, dtype=np.float64)
    if maxima.size:
        hi = max(float(maxima.max()), d.null.critical_value)
        counts, edges = np.histogram(maxima, bins=BINS, range=(float(maxima.min()), hi))
        label = "|Z|" if d.sides == "two-sided" else "Z"
        plots.append(
            {
                "svg": Markup(
                    null_histogram_svg(
                        f"Null distribution of the scan maximum, max {label}",
                        [round(float(e), 6) for e in edges],
                        counts.tolist(),
                        d.statistic,
                        "observed maximum",
                        values="null scans",
                    )
                ),
                "caption": (
                    f"{fmt_count(len(maxima))} of {fmt_count(d.null.draws)} null scans (the whole "
                    f"scan re-run under the null, {d.mode} mode); the {level} quantile "
                    f"{fmt_number(d.null.critical_value)} is the critical value of the "
                    "simultaneous intervals."
                ),
            }
        )
    return {
        "statistic": d.statistic_name,
        "observed_label": observed,
        "expected_label": expected,
        "stratum": stratum,
        "sides": d.sides,
        "level": level,
        "features": ", ".join(d.features),
        "depth": d.depth,
        "min_size": fmt_count(d.min_size),
        "levels": d.levels,
        "n_rows": fmt_count(d.n_rows),
        "n_subgroups": fmt_count(d.n_subgroups),
        "maximum": fmt_number(d.statistic),
        "pvalue": fmt_pvalue(d.pvalue),
        "draws": fmt_count(d.null.draws),
        "naive_min": fmt_pvalue(d.naive_min_pvalue),
        "bonferroni": fmt_pvalue(d.bonferroni_pvalue),
        "held_out": d.held_out,
        "show_score": any(s.score is not None for s in d.top),
        "rows": rows,
        "plots": plots,
    }
