"""Report view of ``multiclass_metrics``: per attribute, one group × class table per rate
(selection rate, TPR, FPR; classes as columns, each estimate over its interval), a stacked bar
plot of each group's predicted-class distribution, and ε-differential fairness over the K
outcomes.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.multiclass.rates import ClassRates, RateEstimate
from fairengine.multiclass.result import MulticlassAttribute, MulticlassDetails
from fairengine.results import MethodResult
from tasks.report.format import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_rate,
    fmt_value,
    slug,
)
from tasks.report.plots import stacked_shares_svg

METHOD = "multiclass_metrics"
DETAILS = MulticlassDetails
TEMPLATE = "methods/multiclass_metrics.html.j2"

RATES: tuple[tuple[str, str, str], ...] = (
    ("selection", "Selection rate", "P(ŷ = c | group)"),
    ("tpr", "True-positive rate (TPR)", "P(ŷ = c | y = c, group)"),
    ("fpr", "False-positive rate (FPR)", "P(ŷ = c | y ≠ c, group)"),
)
"""The rate tables in order: the :class:`~fairengine.multiclass.rates.GroupClassRates` field,
the heading and what it estimates."""

PREDICTIONS: dict[str, str] = {
    "classes": "Predictions are classes (one per row).",
    "argmax": "Predictions are the most probable class of each row's probabilities.",
    "expected": "Rates are expected rates (mean predicted probability of the class; no argmax).",
}

INTERVALS: dict[str, str] = {
    "wilson": "Wilson score intervals",
    "wilson (effective counts)": "Wilson intervals on the effective counts (weights)",
    "wald (expected counts)": "Wald intervals (expected counts)",
}


def cell(r: RateEstimate) -> dict[str, str]:
    """A rate and its interval, formatted."""
    return {
        "estimate": fmt_rate(r.value),
        "interval": fmt_interval(r.interval.low, r.interval.high, fmt_rate),
    }


def view(result: MethodResult) -> dict[str, Any]:
    """Per-attribute rate tables, predicted-class plots and ε of a ``multiclass_metrics``
    result."""
    details = result.details
    assert isinstance(details, MulticlassDetails)
    level = fmt_level(details.confidence_level)
    methods = {
        e.interval.method
        for a in details.attributes
        for g in a.rates.groups
        for e in (*g.selection[:1], *g.tpr[:1])
    }
    kinds = {a.rates.prediction for a in details.attributes}
    return {
        "level": level,
        "classes": list(details.classes),
        "n_classes": len(details.classes),
        "prediction": " ".join(PREDICTIONS.get(k, k) for k in sorted(kinds)),
        "intervals": "; ".join(INTERVALS.get(m, m) for m in sorted(methods)) or "intervals",
        "n_permutations": fmt_count(details.n_permutations),
        "attributes": [attribute_view(a, level, i) for i, a in enumerate(details.attributes)],
    }


def attribute_view(a: MulticlassAttribute, level: str, index: int) -> dict[str, Any]:
    """One attribute's rate tables, distribution plot and ε."""
    rates = a.rates
    tables = [
        {
            "label": label,
            "meaning": meaning,
            "rows": [
                {
                    "group": g.group,
                    "n": fmt_count(g.n),
                    "cells": [cell(r) for r in getattr(g, metric)],
                }
                for g in rates.groups
            ],
        }
        for metric, label, meaning in RATES
    ]
    return {
        "name": a.attribute,
        "anchor": slug("mc", index, a.attribute),
        "tables": tables,
        "pairs": f"{fmt_count(a.pairs_planned)} of {fmt_count(a.pairs_possible)}",
        "all_pairs": a.pairs_planned == a.pairs_possible,
        "plot": distribution_svg(rates, index),
        "epsilon": epsilon_view(a.epsilon) if a.epsilon is not None else None,
    }


def distribution_svg(rates: ClassRates, index: int) -> Markup:
    """Each group's predicted-class distribution (its selection rates) as a stacked bar."""
    return Markup(
        stacked_shares_svg(
            f"Predicted class by {rates.attribute}",
            [g.group for g in rates.groups],
            rates.classes,
            [[r.value for r in g.selection] for g in rates.groups],
            sizes=[g.n for g in rates.groups],
            salt=f"mc-dist-{index}",
        )
    )


def epsilon_view(eps: MulticlassEpsilon) -> dict[str, Any]:
    """ε over the K outcomes: the smoothed and empirical values, where the smoothed one is
    attained, each class's own ε and the posterior when drawn."""
    posterior = None
    if eps.posterior is not None:
        p = eps.posterior
        posterior = {
            "draws": fmt_count(p.n_draws),
            "mean": fmt_number(p.mean),
            "median": fmt_number(p.median),
            "level": fmt_level(p.interval.level),
            "interval": fmt_interval(p.interval.low, p.interval.high),
            "upper": fmt_number(p.upper_bound),
        }
    return {
        "epsilon": fmt_number(eps.epsilon),
        "empirical": fmt_number(eps.epsilon_empirical),
        "concentration": fmt_value(eps.concentration),
        "class_label": eps.class_label,
        "group_high": eps.group_high,
        "group_low": eps.group_low,
        "per_class": [fmt_number(v) for v in eps.per_class],
        "posterior": posterior,
    }
