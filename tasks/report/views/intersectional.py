"""Report view of ``intersectional``: ε per grouping and metric, the rates behind it, the smallest
cells.
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
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
    interval_forest_svg,
    largest_groups,
)

METHOD = "intersectional"
DETAILS = UnknownDetails
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
    method = result.to_dict()
    details = method.get("details") or {}
    metrics = details.get("metrics") or {}
    grouping_attributes = details.get("groupings") or {}
    groupings = list(grouping_attributes.keys())
    level = fmt_level((details.get("estimators") or {}).get("confidence_level", 0.95))
    blocks = []
    for gi, grouping in enumerate(groupings):
        attributes = grouping_attributes.get(grouping) or [grouping]
        title = " × ".join(str(a) for a in attributes)  # the attributes' names, not the key token
        rows, labels, est, b_lo, b_hi, y_lo, y_hi = [], [], [], [], [], [], []
        for metric, per_grouping in metrics.items():
            g = (per_grouping or {}).get(grouping)
            if not g:
                continue
            e = g.get("estimators") or {}
            boot, bayes = e.get("bootstrap") or {}, e.get("bayesian") or {}
            pair = g.get("pair") or {}
            conv = g.get("convention") or {}
            label = DF_METRIC_LABELS.get(metric, metric)
            rows.append(
                {
                    "metric": label,
                    "epsilon": fmt_number(g.get("epsilon")),
                    "convention": str(conv.get("name") or g.get("outcomes") or DASH),
                    "epsilon_other": fmt_number(conv.get("other_epsilon")),
                    "other_convention": str(conv.get("other_name") or DASH),
                    "ratio": fmt_number(g.get("ratio")),
                    "bootstrap": fmt_interval(boot.get("low"), boot.get("high")),
                    "bayesian": fmt_interval(bayes.get("low"), bayes.get("high")),
                    "headline": str(g.get("headline") or DASH),
                    "pair": (
                        f"{pair.get('high')} ({fmt_rate(pair.get('rate_high'))}) vs "
                        f"{pair.get('low')} ({fmt_rate(pair.get('rate_low'))})"
                        if pair
                        else DASH
                    ),
                }
            )
            labels.append(label)
            est.append(g.get("epsilon"))
            b_lo.append(boot.get("low"))
            b_hi.append(boot.get("high"))
            y_lo.append(bayes.get("low"))
            y_hi.append(bayes.get("high"))
        if not rows:
            continue
        plot = interval_forest_svg(
            f"ε by metric over {title}",
            labels,
            [
                {
                    "name": "bootstrap",
                    "color": "#2f5d8a",
                    "estimate": est,
                    "low": b_lo,
                    "high": b_hi,
                },
                {"name": "Bayesian", "color": "#a4502a", "low": y_lo, "high": y_hi},
            ],
            salt=f"df-{gi}",
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
            "group": str(c.get("group")),
            "n": fmt_count(c.get("n")),
            "positives": fmt_count(c.get("positives")),
            "status": str(c.get("status") or ""),
        }
        for c in details.get("smallest") or []
    ]
    return {
        "level": level,
        "attributes": " × ".join(map(str, details.get("attributes") or [])),
        "n_intersections": fmt_count(details.get("n_intersections")),
        "outcomes": str(details.get("outcomes") or ""),
        "convention": str(details.get("convention") or details.get("outcomes") or DASH),
        "other_convention": str(details.get("other_convention") or DASH),
        "blocks": blocks,
        "rates": rates,
        "smallest": smallest,
        "notes": [str(n) for n in details.get("notes") or []],
    }


DF_RATE_LABELS: dict[str, str] = {
    "selection_rate": "Selection rate",
    "base_rate": "Base rate P(y=1)",
    "tpr": "TPR",
    "fpr": "FPR",
}
DF_RATE_COLORS: dict[str, str] = {"selection_rate": "#2f5d8a", "base_rate": "#a4502a"}


def intersection_rates_view(details: dict[str, Any]) -> dict[str, Any] | None:
    """The rates ε compares, per intersection of the finest grouping: smoothed rate and
    Beta-posterior interval of each rate (table), and a forest plot of the selection and base
    rates (the largest :data:`~tasks.report.plots.MAX_PLOT_GROUPS` intersections).

    ``None`` when the result carries no per-intersection rates (more intersections than the
    method details).
    """
    all_rates = details.get("rates") or {}
    if not all_rates:
        return None
    grouping, tab = max(all_rates.items(), key=lambda kv: len(kv[1].get("attributes") or []))
    names = [str(g) for g in tab.get("group") or []]
    sizes = list(tab.get("n") or [])
    keys = [k for k in DF_RATE_LABELS if isinstance(tab.get(k), dict)]
    rows = []
    for i, name in enumerate(names):
        cells = []
        for k in keys:
            r = tab[k]
            status = (r.get("status") or [])[i] if i < len(r.get("status") or []) else "ok"
            cell = with_interval(
                {"estimate": r["rate"][i], "low": r["low"][i], "high": r["high"][i]}
            )
            cells.append(cell if status == "ok" else f"{cell} ({status})")
        rows.append(
            {"group": name, "n": fmt_count(sizes[i] if i < len(sizes) else None), "cells": cells}
        )
    plotted = [k for k in ("selection_rate", "base_rate") if k in keys]
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
                        "estimate": [tab[k]["rate"][e["i"]] for e in shown],
                        "low": [tab[k]["low"][e["i"]] for e in shown],
                        "high": [tab[k]["high"][e["i"]] for e in shown],
                    }
                    for k in plotted
                ],
                salt=slug("df-rates", grouping),
            )
        )
    return {
        "grouping": str(grouping),
        "anchor": slug("df-rates", grouping),
        "labels": [DF_RATE_LABELS[k] for k in keys],
        "plotted": " and ".join(DF_RATE_LABELS[k].lower() for k in plotted),
        "rows": rows,
        "plot": plot,
    }
