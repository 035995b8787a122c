"""Report view of ``regression_metrics``: per attribute, the groups' mean target, mean
prediction, bias (mean residual), MAE and RMSE with intervals, a plot of the bias per group with
its interval and one of the mean target and mean prediction, and the bounded group loss table
when a loss bound was set.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.regression.bounded_loss import BoundedGroupLoss
from fairengine.regression.result import RegressionAttribute, RegressionDetails
from fairengine.regression.summaries import Estimate, GroupSummary
from fairengine.results import MethodResult
from tasks.report.format import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_pvalue,
    fmt_value,
    slug,
)
from tasks.report.plots import (
    SERIES_COLORS,
    interval_forest_svg,
    signed_bars_svg,
)

METHOD = "regression_metrics"
DETAILS = RegressionDetails
TEMPLATE = "methods/regression_metrics.html.j2"

COLUMNS: tuple[tuple[str, str], ...] = (
    ("mean_target", "Mean target"),
    ("mean_prediction", "Mean prediction"),
    ("mean_residual", "Bias (target − prediction)"),
    ("mae", "MAE"),
    ("rmse", "RMSE"),
)
"""The group table's quantities (:data:`fairengine.regression.SUMMARY_QUANTITIES` names) and
headers, in order."""

LOSS_NAMES: dict[str, str] = {
    "squared": "squared error (y − ŷ)²",
    "absolute": "absolute error |y − ŷ|",
}


def cell(e: Estimate) -> dict[str, str]:
    """An estimate and its interval, formatted."""
    return {
        "estimate": fmt_number(e.value),
        "interval": fmt_interval(e.interval.low, e.interval.high),
    }


def view(result: MethodResult) -> dict[str, Any]:
    """Per-attribute group tables, bias and mean plots, and bounded group loss of a
    ``regression_metrics`` result."""
    details = result.details
    assert isinstance(details, RegressionDetails)
    level = fmt_level(details.confidence_level)
    attributes = [attribute_view(a, level, i) for i, a in enumerate(details.attributes)]
    return {
        "level": level,
        "columns": [label for _, label in COLUMNS],
        "n_permutations": fmt_count(details.n_permutations),
        "attributes": attributes,
    }


def attribute_view(a: RegressionAttribute, level: str, index: int) -> dict[str, Any]:
    """One attribute's table, plots and bounded group loss."""
    groups = a.summaries.groups
    weighted = a.summaries.weighted
    rows = [
        {
            "group": g.group,
            "n": fmt_count(g.n),
            "weight": fmt_count(g.weight_total),
            "n_effective": fmt_count(round(g.n_effective, 1)),
            "cells": [cell(g.estimate(q)) for q, _ in COLUMNS],
        }
        for g in groups
    ]
    return {
        "name": a.attribute,
        "anchor": slug("reg", index, a.attribute),
        "weighted": weighted,
        "rows": rows,
        "pairs": f"{fmt_count(a.pairs_planned)} of {fmt_count(a.pairs_possible)}",
        "all_pairs": a.pairs_planned == a.pairs_possible,
        "plots": [
            {
                "svg": bias_svg(a.attribute, groups, index),
                "caption": (
                    f"Bias (mean residual, target − prediction) per group of {a.attribute}, with "
                    f"{level} intervals: above 0 the model under-predicts the group's target, "
                    "below 0 it over-predicts."
                ),
            },
            {
                "svg": means_svg(a.attribute, groups, index),
                "caption": (
                    f"Mean target and mean prediction per group of {a.attribute}, with {level} "
                    "intervals."
                ),
            },
        ],
        "bounded": bounded_view(a.bounded) if a.bounded is not None else None,
    }


def bias_svg(attr: str, groups: tuple[GroupSummary, ...], index: int) -> Markup:
    """The bias per group as bars from 0 with their intervals."""
    return Markup(
        signed_bars_svg(
            f"Bias (target − prediction) by {attr}",
            [g.group for g in groups],
            [
                {
                    "name": "bias",
                    "color": SERIES_COLORS[0],
                    "values": [g.mean_residual.value for g in groups],
                    "low": [g.mean_residual.interval.low for g in groups],
                    "high": [g.mean_residual.interval.high for g in groups],
                }
            ],
            sizes=[g.n for g in groups],
            salt=f"reg-bias-{index}",
        )
    )


def means_svg(attr: str, groups: tuple[GroupSummary, ...], index: int) -> Markup:
    """Mean target and mean prediction per group, with intervals."""
    series = [
        {
            "name": name,
            "color": SERIES_COLORS[j],
            "estimate": [g.estimate(q).value for g in groups],
            "low": [g.estimate(q).interval.low for g in groups],
            "high": [g.estimate(q).interval.high for g in groups],
        }
        for j, (q, name) in enumerate(
            (("mean_target", "mean target"), ("mean_prediction", "mean prediction"))
        )
    ]
    return Markup(
        interval_forest_svg(
            f"Mean target and mean prediction by {attr}",
            [g.group for g in groups],
            series,
            salt=f"reg-means-{index}",
            rows="groups",
        )
    )


def bounded_view(b: BoundedGroupLoss) -> dict[str, Any]:
    """The bounded group loss table: each group's mean loss, one-sided bounds, the p-value of
    H0: loss ≤ ζ and what the bounds say."""
    level = fmt_level(b.confidence_level)
    rows = []
    for g in b.groups:
        if g.certified(b.bound):
            reading = "within ζ (upper bound ≤ ζ)"
        elif g.lower > b.bound:
            reading = "exceeds ζ (lower bound > ζ)"
        else:
            reading = "not settled (ζ inside the bounds)"
        rows.append(
            {
                "group": g.group,
                "n": fmt_count(g.n),
                "mean_loss": fmt_number(g.mean_loss),
                "lower": fmt_number(g.lower),
                "upper": fmt_number(g.upper),
                "pvalue": fmt_pvalue(g.pvalue),
                "reading": reading,
            }
        )
    return {
        "loss": LOSS_NAMES.get(b.loss, b.loss),
        "bound": fmt_value(b.bound),
        "level": level,
        "rows": rows,
        "worst": b.worst.group if b.groups else None,
    }
