"""Report view of ``intersectional``: ε per grouping and metric, the rates behind it, the smallest
cells.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.intersectional.result import GroupingRates, IntersectionalDetails, RateColumns
from fairengine.results import MethodResult
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_rate,
    slug,
    with_interval,
)
from tasks.report.plots import (
    MAX_PLOT_GROUPS,
    SERIES_COLORS,
    interval_forest_svg,
    largest_groups,
)

METHOD = "intersectional"
DETAILS = IntersectionalDetails
TEMPLATE = "methods/intersectional.html.j2"


DF_METRIC_LABELS: dict[str, str] = {
    "elift": "Empirical lift (labels)",
    "slift": "Impact ratio, slift (labels)",
    "sp": "Statistical parity (predictions)",
    "tpr": "TPR parity (predictions)",
    "fpr": "FPR parity (predictions)",
    "eo": "Equalized odds (predictions)",
}


def view(result: MethodResult) -> dict[str, Any]:
    """Per grouping (the intersection first, then each attribute): ε per metric with the
    smoothed estimate under the configured outcome convention and, beside it, under the other
    convention (positive outcome only vs both outcomes), the bootstrap and Bayesian intervals, the
    driving pair, a forest plot; then the smallest intersections and the method's notes."""
    details = result.details
    assert isinstance(details, IntersectionalDetails)
    level = fmt_level(details.estimators.confidence_level)
    blocks = []
    for gi, (grouping, grouping_attributes) in enumerate(details.groupings.items()):
        attributes = grouping_attributes or (grouping,)
        title = " × ".join(attributes)  # the attributes' names, not the key token
        rows, labels = [], []
        est: list[float] = []
        b_lo: list[float] = []
        b_hi: list[float] = []
        y_lo: list[float] = []
        y_hi: list[float] = []
        for metric, per_grouping in details.metrics.items():
            g = per_grouping.get(grouping)
            if g is None:
                continue
            boot, bayes = g.estimators.bootstrap, g.estimators.bayesian
            pair, conv = g.pair, g.convention
            label = DF_METRIC_LABELS.get(metric, metric)
            rows.append(
                {
                    "metric": label,
                    "epsilon": fmt_number(g.epsilon),
                    "convention": conv.name or g.outcomes or DASH,
                    "epsilon_other": fmt_number(conv.other_epsilon),
                    "other_convention": conv.other_name or DASH,
                    "ratio": fmt_number(g.ratio),
                    "bootstrap": fmt_interval(boot.low, boot.high),
                    "bayesian": fmt_interval(bayes.low, bayes.high),
                    "headline": g.headline or DASH,
                    "pair": (
                        f"{pair.high} ({fmt_rate(pair.rate_high)}) vs "
                        f"{pair.low} ({fmt_rate(pair.rate_low)})"
                    ),
                }
            )
            labels.append(label)
            est.append(g.epsilon)
            b_lo.append(boot.low)
            b_hi.append(boot.high)
            y_lo.append(bayes.low)
            y_hi.append(bayes.high)
        if not rows:
            continue
        plot = interval_forest_svg(
            f"ε by metric over {title}",
            labels,
            [
                {
                    "name": "bootstrap",
                    "color": SERIES_COLORS[0],
                    "estimate": est,
                    "low": b_lo,
                    "high": b_hi,
                },
                {"name": "Bayesian", "color": SERIES_COLORS[1], "low": y_lo, "high": y_hi},
            ],
            salt=f"df-{gi}",
            rows="metrics",
        )
        blocks.append(
            {
                "grouping": title,
                "anchor": slug("df", gi, grouping),
                "rows": rows,
                "plot": Markup(plot),
            }
        )
    rates = intersection_rates_view(details)
    smallest = [
        {
            "group": c.group,
            "n": fmt_count(c.n),
            "positives": fmt_count(c.positives),
            "status": c.status,
        }
        for c in details.smallest
    ]
    return {
        "level": level,
        "attributes": " × ".join(details.attributes),
        "n_intersections": fmt_count(details.n_intersections),
        "outcomes": details.outcomes,
        "convention": details.convention or details.outcomes or DASH,
        "other_convention": details.other_convention or DASH,
        "blocks": blocks,
        "rates": rates,
        "smallest": smallest,
        "notes": list(details.notes),
    }


DF_RATE_LABELS: dict[str, str] = {
    "selection_rate": "Selection rate",
    "base_rate": "Base rate P(y=1)",
    "tpr": "TPR",
    "fpr": "FPR",
}
DF_RATE_COLORS: dict[str, str] = {"selection_rate": SERIES_COLORS[0], "base_rate": SERIES_COLORS[1]}


def _rate_columns(tab: GroupingRates) -> dict[str, RateColumns]:
    """The rates of ``tab`` that the audited metrics used, in :data:`DF_RATE_LABELS` order."""
    present = {
        "selection_rate": tab.selection_rate,
        "base_rate": tab.base_rate,
        "tpr": tab.tpr,
        "fpr": tab.fpr,
    }
    return {k: r for k in DF_RATE_LABELS if (r := present.get(k)) is not None}


def intersection_rates_view(details: IntersectionalDetails) -> dict[str, Any] | None:
    """The rates ε compares, per intersection of the finest grouping: smoothed rate and
    Beta-posterior interval of each rate (table), and a forest plot of the selection and base
    rates (the largest :data:`~tasks.report.plots.MAX_PLOT_GROUPS` intersections).

    ``None`` when the result carries no per-intersection rates (more intersections than the
    method details).
    """
    if not details.rates:
        return None
    grouping, tab = max(details.rates.items(), key=lambda kv: len(kv[1].attributes))
    names = list(tab.group)
    sizes = list(tab.n)
    columns = _rate_columns(tab)
    keys = list(columns)
    rows = []
    for i, name in enumerate(names):
        cells = []
        for r in columns.values():
            status = r.status[i] if i < len(r.status) else "ok"
            cell = with_interval({"estimate": r.rate[i], "low": r.low[i], "high": r.high[i]})
            cells.append(cell if status == "ok" else f"{cell} ({status})")
        rows.append(
            {"group": name, "n": fmt_count(sizes[i] if i < len(sizes) else None), "cells": cells}
        )
    plotted = [k for k in ("selection_rate", "base_rate") if k in columns]
    plot = None
    if plotted and names:
        entries = [
            {"group": name, "n": sizes[i] if i < len(sizes) else 0, "i": i}
            for i, name in enumerate(names)
        ]
        shown = largest_groups(entries, MAX_PLOT_GROUPS)
        suffix = f" (largest {len(shown)} of {len(names)})" if len(shown) < len(names) else ""
        plot = Markup(
            interval_forest_svg(
                f"Rates per intersection{suffix}",
                [e["group"] for e in shown],
                [
                    {
                        "name": DF_RATE_LABELS[k],
                        "color": DF_RATE_COLORS[k],
                        "estimate": [columns[k].rate[e["i"]] for e in shown],
                        "low": [columns[k].low[e["i"]] for e in shown],
                        "high": [columns[k].high[e["i"]] for e in shown],
                    }
                    for k in plotted
                ],
                salt=slug("df-rates", grouping),
                rows="intersections",
            )
        )
    return {
        "grouping": grouping,
        "anchor": slug("df-rates", grouping),
        "labels": [DF_RATE_LABELS[k] for k in keys],
        "plotted": " and ".join(DF_RATE_LABELS[k].lower() for k in plotted),
        "rows": rows,
        "plot": plot,
    }
