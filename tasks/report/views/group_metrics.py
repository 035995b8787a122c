"""Report view of ``group_metrics`` (the LiFT suite): per encoding, group rates, pairwise gaps and
ratios, distribution distances.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.group_metrics.result import (
    CustomEstimate,
    EncodingMetrics,
    GroupMetricsDetails,
    GroupRate,
    LevelDistances,
    MetricsGroup,
    Performance,
    RatePair,
)
from fairengine.results import MethodResult
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_number,
    slug,
    with_interval,
)
from tasks.report.plots import (
    MAX_PLOT_GROUPS,
    SERIES_COLORS,
    interval_forest_svg,
    largest_groups,
)

METHOD = "group_metrics"
DETAILS = GroupMetricsDetails
TEMPLATE = "methods/group_metrics.html.j2"


GM_RATES: tuple[tuple[str, str], ...] = (
    ("base_rate", "Base rate P(y=1)"),
    ("positive_rate", "Positive rate"),
    ("tpr", "TPR"),
    ("fpr", "FPR"),
)
GM_DISTANCES: tuple[tuple[str, str], ...] = (
    ("INF_NORM_DIST", "∞-norm"),
    ("TOTAL_VAR_DIST", "Total variation"),
    ("JS_DIVERGENCE", "JS divergence"),
    ("KL_DIVERGENCE", "KL divergence"),
)


def base_vs_positive_svg(name: str, groups: tuple[MetricsGroup, ...], salt: str) -> Markup | None:
    """Forest plot of the label base rate and the positive-prediction rate per group (with
    their intervals) of one ``group_metrics`` encoding; the largest
    :data:`~tasks.report.plots.MAX_PLOT_GROUPS` groups. ``None`` without groups."""
    if not groups:
        return None
    sizes = [{"n": g.n, "index": i} for i, g in enumerate(groups)]
    shown = [groups[s["index"]] for s in largest_groups(sizes, MAX_PLOT_GROUPS)]
    suffix = f" (largest {len(shown)} of {len(groups)})" if len(shown) < len(groups) else ""
    series = [
        _series("base rate (labels)", SERIES_COLORS[1], [g.base_rate for g in shown]),
        _series("positive rate (predictions)", SERIES_COLORS[0], [g.positive_rate for g in shown]),
    ]
    return Markup(
        interval_forest_svg(
            f"Base rate and positive rate by {name}{suffix}",
            [g.group for g in shown],
            series,
            salt=salt,
            rows="groups",
        )
    )


def _series(name: str, color: str, rates: list[GroupRate | None]) -> dict[str, Any]:
    """One series of :func:`~tasks.report.plots.interval_forest_svg` (None: not computed)."""
    return {
        "name": name,
        "color": color,
        "estimate": [None if r is None else r.estimate for r in rates],
        "low": [None if r is None else r.low for r in rates],
        "high": [None if r is None else r.high for r in rates],
    }


def _group_rates(g: MetricsGroup) -> tuple[GroupRate | None, ...]:
    """The rates of :data:`GM_RATES` of one group (None where not computed)."""
    return (g.base_rate, g.positive_rate, g.tpr, g.fpr)


def _rate_pairs(enc: EncodingMetrics) -> tuple[tuple[RatePair, ...] | None, ...]:
    """The reported pairs of the rates of :data:`GM_RATES` (None where not audited)."""
    p = enc.pairs
    return (p.base_rate, p.positive_rate, p.tpr, p.fpr)


def _distances(d: LevelDistances) -> tuple[float | None, ...]:
    """The distances of :data:`GM_DISTANCES` (None where not computed)."""
    return (d.INF_NORM_DIST, d.TOTAL_VAR_DIST, d.JS_DIVERGENCE, d.KL_DIVERGENCE)


def _estimate_cell(e: GroupRate | Performance | None) -> str:
    """``estimate [low, high]`` of a rate or performance entry (``—`` parts where absent)."""
    if e is None:
        return with_interval({})
    if isinstance(e, CustomEstimate):
        return with_interval({"estimate": e.estimate})
    return with_interval({"estimate": e.estimate, "low": e.low, "high": e.high})


def view(result: MethodResult) -> dict[str, Any]:
    """Per attribute (and the intersection): group rates and performance with intervals (and a
    base-rate vs positive-rate plot), pairwise gaps and ratios with the four-fifths flag,
    distances from the reference, and the inequality indices over each benefit vector."""
    details = result.details
    assert isinstance(details, GroupMetricsDetails)
    encodings = []
    for ei, (name, enc) in enumerate(details.encodings.items()):
        groups = enc.groups
        perf_names = sorted({k for g in groups for k in (g.performance or {})})

        group_rows = []
        for g in groups:
            cells = [_estimate_cell(r) for r in _group_rates(g)]
            cells += [_estimate_cell((g.performance or {}).get(key)) for key in perf_names]
            group_rows.append({"group": g.group, "n": fmt_count(g.n), "cells": cells})
        pair_rows = [
            {
                "metric": label,
                "pair": f"{p.a} vs {p.b}",
                "gap": with_interval(
                    {"estimate": p.gap, "low": p.gap_low, "high": p.gap_high}, fmt_number
                ),
                "ratio": with_interval(
                    {"estimate": p.ratio, "low": p.ratio_low, "high": p.ratio_high}, fmt_number
                ),
                "impact": fmt_number(p.impact_ratio),
                "four_fifths": "violated" if p.four_fifths_violated else "met",
            }
            for (_, label), rows in zip(GM_RATES, _rate_pairs(enc), strict=True)
            for p in rows or ()
        ]
        by_level = {"model": enc.distances.model, "dataset": enc.distances.dataset}
        distances = []
        for level in details.levels:  # in the configured order
            d = by_level.get(level)
            if d is not None:
                distances.append({"level": level, "values": [fmt_number(v) for v in _distances(d)]})
        benefits = enc.benefits
        agg_names = sorted({a for b in benefits.values() for a in b.aggregates})
        benefit_rows = [
            {
                "benefit": bname,
                "n": fmt_count(b.n_entries),
                "values": [fmt_number(b.aggregates.get(a)) for a in agg_names],
            }
            for bname, b in benefits.items()
        ]
        encodings.append(
            {
                "name": name,
                "kind": enc.kind,
                "plot": base_vs_positive_svg(name, groups, slug("gm", ei, name)),
                "anchor": slug("gm", ei, name),
                "rate_labels": [label for _, label in GM_RATES] + perf_names,
                "groups": group_rows,
                "pairs": pair_rows,
                "distance_labels": [label for _, label in GM_DISTANCES],
                "distances": distances,
                "aggregate_labels": [a.replace("_", " ").lower() for a in agg_names],
                "benefits": benefit_rows,
            }
        )
    return {
        "lift_compat": details.lift_compat,
        "auc_method": details.auc.method or DASH,
        "encodings": encodings,
    }
