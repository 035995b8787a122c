"""Report view of ``permutation_tests``: every test's statistic, difference and Monte-Carlo
p-value, and null histograms.
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_interval,
    fmt_number,
    fmt_pvalue,
    short_json,
)
from tasks.report.plots import (
    as_float,
    null_histogram_svg,
)

METHOD = "permutation_tests"
DETAILS = UnknownDetails
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
    method = result.to_dict()
    details = method.get("details") or {}
    tests = list(details.get("tests") or [])
    rows = []
    for t in tests:
        ci = t.get("ci") or [None, None]
        p_iv = t.get("pvalue_interval") or [None, None]
        rows.append(
            {
                "attribute": str(t.get("attribute")),
                "pair": f"{t.get('group_a')} − {t.get('group_b')}",
                "metric": PERM_METRIC_LABELS.get(str(t.get("metric")), str(t.get("metric"))),
                "values": f"{fmt_number(t.get('value_a'))} vs {fmt_number(t.get('value_b'))}",
                "difference": fmt_number(t.get("difference")),
                "interval": fmt_interval(ci[0], ci[1]),
                "statistic": fmt_number(t.get("statistic")),
                "pvalue": fmt_pvalue(t.get("pvalue")),
                "pvalue_mc": f"± {fmt_number(t.get('pvalue_se'))} "
                f"{fmt_interval(p_iv[0], p_iv[1], fmt_pvalue)}",
                "n": f"{fmt_count(t.get('n_a'))} / {fmt_count(t.get('n_b'))}",
            }
        )
    ranked = sorted(tests, key=lambda t: as_float(t.get("pvalue")))
    plots = []
    for t in ranked[:MAX_NULL_PLOTS]:
        h = t.get("null_histogram") or {}
        if not h.get("counts"):
            continue
        title = (
            f"{PERM_METRIC_LABELS.get(str(t.get('metric')), t.get('metric'))}, "
            f"{t.get('attribute')}: {t.get('group_a')} − {t.get('group_b')}"
        )
        plots.append(
            {
                "title": title,
                "svg": Markup(
                    null_histogram_svg(title, h["edges"], h["counts"], h.get("observed"))
                ),
            }
        )
    skipped = [
        str(x) if not isinstance(x, dict) else short_json(x, 200)
        for x in details.get("skipped") or []
    ]
    return {
        "studentize": str(details.get("studentize") or DASH),
        "scheme": str(details.get("scheme") or DASH),
        "alternative": str(details.get("alternative") or DASH),
        "rows": rows,
        "plots": plots,
        "n_tests": len(tests),
        "skipped": skipped,
    }
