"""Report view of ``fliptest``: flipsets per pair and direction, their tests, and transparency."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

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
}


def view(result: MethodResult) -> dict[str, Any]:
    """Per group pair and direction: flipset sizes against both nulls, the transparency report
    (mean feature change with intervals, consistency, sign tests) as a table and bar chart, and
    the marginal distributions of flipset members versus their group."""
    details = result.details
    assert isinstance(details, FlipTestDetails)
    directions: list[dict[str, Any]] = []
    for pair in details.pairs:
        for dr in pair.directions:
            head = f"{pair.attribute}: {dr.source} → {dr.target}"
            flips, reports, plots = [], [], []
            for kind, fs in dr.flipsets.items():
                null = fs.permutation_null
                flips.append(
                    {
                        "kind": FLIPSET_WORDS.get(kind, kind),
                        "count": fmt_count(fs.count),
                        "rate": with_interval(
                            {"estimate": fs.rate, "low": fs.ci[0], "high": fs.ci[1]}
                        ),
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
                    f"Mean change in {FLIPSET_WORDS.get(kind, kind)[:2]}, {head}",
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
                    salt=slug("ft", len(directions), kind),
                    rows="features",
                )
                reports.append(
                    {
                        "kind": FLIPSET_WORDS.get(kind, kind),
                        "n": fmt_count(tr.n),
                        "stability": fmt_rate(tr.rank_stability_mean_difference),
                        "rows": rows,
                        "svg": Markup(svg),
                    }
                )
            for feature, h in list(dr.histograms.items())[:6]:
                plots.append(
                    Markup(
                        marginal_overlay_svg(
                            f"{feature}: {dr.source} vs its flipsets",
                            list(h.edges),
                            [
                                {
                                    "name": dr.source,
                                    "color": SERIES_COLORS[2],
                                    "counts": list(h.group),
                                },
                                {
                                    "name": "F+",
                                    "color": SERIES_COLORS[0],
                                    "counts": list(h.positive),
                                },
                                {
                                    "name": "F−",
                                    "color": SERIES_COLORS[1],
                                    "counts": list(h.negative),
                                },
                            ],
                        )
                    )
                )
            directions.append(
                {
                    "title": head,
                    "anchor": slug("ft", len(directions), head),
                    "n": fmt_count(dr.n_source),
                    "net": fmt_count(dr.net_flips),
                    "dp_gap": fmt_count(dr.dp_count_gap),
                    "flips": flips,
                    "reports": reports,
                    "plots": plots,
                }
            )
    return {
        "estimator": details.estimator or DASH,
        "mode": details.mode or DASH,
        "identity_note": details.identity_note,
        "units": details.units,
        "directions": directions,
    }
