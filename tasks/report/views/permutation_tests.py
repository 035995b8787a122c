"""Report view of ``permutation_tests``: every test's statistic, difference and Monte-Carlo
p-value, and null histograms.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from markupsafe import Markup

from fairengine.permutation.result import PermutationDetails
from fairengine.results import MethodResult
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_interval,
    fmt_number,
    fmt_pvalue,
    short_json,
)
from tasks.report.plots import null_histogram_svg

METHOD = "permutation_tests"
DETAILS = PermutationDetails
TEMPLATE = "methods/permutation_tests.html.j2"


PERM_METRIC_LABELS: dict[str, str] = {
    "positive_rate": "positive-prediction rate",
    "tpr": "TPR (recall)",
    "recall": "TPR (recall)",
    "fnr": "FNR",
    "fpr": "FPR",
    "tnr": "TNR",
    "precision": "precision",
    "accuracy": "accuracy",
    "calibration": "calibration-in-the-large",
    "auc": "AUC",
}
MAX_NULL_PLOTS = 12
"""Permutation distributions drawn (smallest p-values first); the table lists every test."""


def view(result: MethodResult) -> dict[str, Any]:
    """Every permutation test as a table row, and the null distributions of the most
    significant ones with the observed statistic marked."""
    details = result.details
    assert isinstance(details, PermutationDetails)
    tests = list(details.tests)
    rows = []
    for t in tests:
        ci, p_iv = t.ci, t.pvalue_interval
        rows.append(
            {
                "attribute": t.attribute,
                "pair": f"{t.group_a} − {t.group_b}",
                "metric": PERM_METRIC_LABELS.get(t.metric, t.metric),
                "values": f"{fmt_number(t.value_a)} vs {fmt_number(t.value_b)}",
                "difference": fmt_number(t.difference),
                "interval": fmt_interval(ci[0], ci[1]),
                "statistic": fmt_number(t.statistic),
                "pvalue": fmt_pvalue(t.pvalue),
                "pvalue_mc": f"± {fmt_number(t.pvalue_se)} "
                f"{fmt_interval(p_iv[0], p_iv[1], fmt_pvalue)}",
                "n": f"{fmt_count(t.n_a)} / {fmt_count(t.n_b)}",
            }
        )
    ranked = sorted(tests, key=lambda t: t.pvalue)
    plots = []
    for t in ranked[:MAX_NULL_PLOTS]:
        h = t.null_histogram
        if not h.counts:
            continue
        title = (
            f"{PERM_METRIC_LABELS.get(t.metric, t.metric)}, "
            f"{t.attribute}: {t.group_a} − {t.group_b}"
        )
        plots.append(
            {
                "title": title,
                "svg": Markup(
                    null_histogram_svg(
                        title,
                        list(h.edges),
                        list(h.counts),
                        h.observed,
                        values="permuted statistics",
                    )
                ),
            }
        )
    skipped = [short_json(dataclasses.asdict(x), 200) for x in details.skipped]
    return {
        "studentize": details.studentize or DASH,
        "scheme": details.scheme or DASH,
        "alternative": details.alternative or DASH,
        "rows": rows,
        "plots": plots,
        "n_tests": len(tests),
        "skipped": skipped,
    }
