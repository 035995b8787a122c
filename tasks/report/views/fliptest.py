"""Report view of ``fliptest``: flipsets per pair and direction, their tests, and transparency."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine import worker_processes
from fairengine.fliptest.result import FlipTestDetails
from fairengine.results import MethodResult
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_number,
    fmt_pvalue,
    fmt_rate,
    slug,
    with_interval,
)
from tasks.report.plots import (
    SERIES_COLORS,
    interval_forest_svg,
    marginal_overlay_svg,
)

METHOD = "fliptest"
DETAILS = FlipTestDetails
TEMPLATE = "methods/fliptest.html.j2"


FLIPSET_WORDS = {
    "positive": "F+ (advantaged: positive → negative)",
    "negative": "F− (disadvantaged: negative → positive)",
    "changed": "F (predicted class changes)",
}
VALUE_WORDS = {
    "positive": "F+ (prediction ≥ δ higher than the counterpart's)",
    "negative": "F− (prediction ≥ δ lower than the counterpart's)",
}
SHORT = {"positive": "F+", "negative": "F−", "changed": "F"}


def _flip_note(details: FlipTestDetails) -> str:
    """What a flip is in this audit (:mod:`fairengine.fliptest.outcomes`)."""
    if details.flip == "value":
        return (
            f"A flip is a change of the prediction by at least δ = {details.delta:g}: "
            "F+ holds those whose prediction is at least δ higher than their counterpart's "
            "(moving them to the target group lowers it), F− those whose prediction is at least "
            "δ lower."
        )
    if details.flip == "class":
        return (
            "A flip is a change of the predicted class: F holds those whose counterpart gets "
            "another class; the table of class changes counts them per (from, to) pair."
        )
    on = (
        f"the decision prediction > {details.threshold:g}"
        if details.task == "regression"
        else "the decision"
    )
    return (
        f"Flips of {on}: F+ holds those whose positive decision becomes negative, F− the reverse."
    )


def _class_table(dr: Any) -> dict[str, Any] | None:
    """A multiclass direction's (from, to) counts, with each class's counts in the source
    sample, among the images and in the target sample."""
    cf = dr.class_flips
    if cf is None:
        return None
    return {
        "classes": list(cf.classes),
        "rows": [
            {
                "cls": c,
                "cells": [fmt_count(v) for v in cf.transitions[i]],
                "source": fmt_count(cf.source_counts[i]),
                "mapped": fmt_count(cf.mapped_counts[i]),
                "target": fmt_count(cf.target_counts[i]),
                "out": fmt_count(cf.flipped_out[i]),
                "in": fmt_count(cf.flipped_in[i]),
            }
            for i, c in enumerate(cf.classes)
        ],
    }


def _summary_line(dr: Any) -> str:
    """The sentence under a direction's heading: net flips and the DP gap (decisions), the
    mean prediction shift (regression with δ), or the class-change total (multiclass)."""
    n = fmt_count(dr.n_source)
    if dr.prediction_shift is not None:
        ps = dr.prediction_shift
        return (
            f"{n} source individuals; mean prediction {fmt_number(ps.mean_source)}, of their "
            f"counterparts {fmt_number(ps.mean_mapped)} (target group "
            f"{fmt_number(ps.mean_target)}; mean change {fmt_number(ps.mean_change)}); "
            f"{fmt_rate(ps.unchanged_rate)} change by less than δ; net flips "
            f"{fmt_count(dr.net_flips)}."
        )
    if dr.class_flips is not None:
        changed = dr.flipsets.changed
        return (
            f"{n} source individuals; {fmt_count(None if changed is None else changed.count)} "
            "get another class as their counterpart."
        )
    return (
        f"{n} source individuals; net flips {fmt_count(dr.net_flips)} (demographic-parity count "
        f"gap {fmt_count(dr.dp_count_gap)})."
    )


def view(result: MethodResult) -> dict[str, Any]:
    """Per group pair and direction: flipset sizes against both nulls, the transparency report
    (mean feature change with intervals, consistency, sign tests) as a table and bar chart, and
    the marginal distributions of flipset members versus their group. The directions' figures
    (most of a full report's render time) are drawn in the audit's worker processes while they
    are up (:func:`fairengine.worker_processes.run_many_if_warm`), else here: the same page."""
    details = result.details
    assert isinstance(details, FlipTestDetails)
    calls = [
        (details.flip, pair.attribute, dr, i)
        for i, (pair, dr) in enumerate(
            (pair, dr) for pair in details.pairs for dr in pair.directions
        )
    ]
    return {
        "estimator": details.estimator or DASH,
        "mode": details.mode or DASH,
        "identity_note": details.identity_note if details.flip == "decision" else "",
        "flip_note": _flip_note(details),
        "units": details.units,
        "directions": worker_processes.run_many_if_warm(direction_view, calls),
    }


def direction_view(flip: str, attribute: str, dr: Any, index: int) -> dict[str, Any]:
    """The view of one direction (the ``index``-th of the method) of a pair of groups of
    ``attribute``; ``flip`` is :attr:`FlipTestDetails.flip`."""
    words = VALUE_WORDS if flip == "value" else FLIPSET_WORDS
    head = f"{attribute}: {dr.source} → {dr.target}"
    flips, reports, plots = [], [], []
    for kind, fs in dr.flipsets.items():
        null = fs.permutation_null
        flips.append(
            {
                "kind": words.get(kind, kind),
                "count": fmt_count(fs.count),
                "rate": with_interval({"estimate": fs.rate, "low": fs.ci[0], "high": fs.ci[1]}),
                "pvalues": f"{fmt_pvalue(fs.pvalue_permutation)} / "
                f"{fmt_pvalue(fs.pvalue_selfmap)}",
                "null_q95": fmt_rate(None if null is None else null.q95),
                "excess": fmt_number(fs.excess_flips),
                "stable": fmt_count(fs.stable_count),
            }
        )
    for kind, tr in dr.transparency.items():
        feats = tr.features
        if not feats or not tr.n > 0:  # an empty flipset: nothing to say
            continue
        rows = [
            {
                "feature": f.feature,
                "mean": with_interval(
                    {
                        "estimate": f.mean_difference,
                        "low": f.mean_difference_ci[0],
                        "high": f.mean_difference_ci[1],
                    },
                    fmt_number,
                ),
                "consistency": fmt_number(f.consistency),
                "pvalue": fmt_pvalue(f.sign_pvalue_bh),
            }
            for f in feats
        ]
        svg = interval_forest_svg(
            f"Mean change in {SHORT.get(kind, kind)}, {head}",
            [f.feature for f in feats],
            [
                {
                    "name": "mean difference",
                    "color": SERIES_COLORS[0],
                    "estimate": [f.mean_difference for f in feats],
                    "low": [f.mean_difference_ci[0] for f in feats],
                    "high": [f.mean_difference_ci[1] for f in feats],
                }
            ],
            reference=0.0,
            salt=slug("ft", index, kind),
            rows="features",
        )
        reports.append(
            {
                "kind": words.get(kind, kind),
                "n": fmt_count(tr.n),
                "stability": fmt_rate(tr.rank_stability_mean_difference),
                "rows": rows,
                "svg": Markup(svg),
            }
        )
    for feature, h in list(dr.histograms.items())[:6]:
        series = [{"name": dr.source, "color": SERIES_COLORS[2], "counts": list(h.group)}]
        for color, (kind, counts) in zip(
            (SERIES_COLORS[0], SERIES_COLORS[1]),
            [(k, getattr(h, k)) for k in ("positive", "negative", "changed")
             if getattr(h, k) is not None],
            strict=False,
        ):  # fmt: skip
            series.append({"name": SHORT[kind], "color": color, "counts": list(counts)})
        plots.append(
            Markup(
                marginal_overlay_svg(
                    f"{feature}: {dr.source} vs its flipsets", list(h.edges), series
                )
            )
        )
    return {
        "title": head,
        "anchor": slug("ft", index, head),
        "n": fmt_count(dr.n_source),
        "summary": _summary_line(dr),
        "classes": _class_table(dr),
        "flips": flips,
        "reports": reports,
        "plots": plots,
    }
