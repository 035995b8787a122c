"""Report view of ``fliptest``: flipsets per pair and direction, their tests, and transparency."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
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
    as_float,
    interval_forest_svg,
    marginal_overlay_svg,
)

METHOD = "fliptest"
DETAILS = UnknownDetails
TEMPLATE = "methods/fliptest.html.j2"


FLIPSET_WORDS = {
    "positive": "F+ (advantaged: positive → negative)",
    "negative": "F− (disadvantaged: negative → positive)",
}


def view(result: MethodResult) -> dict[str, Any]:
    """Per group pair and direction: flipset sizes against both nulls, the transparency report
    (mean feature change with intervals, consistency, sign tests) as a table and bar chart, and
    the marginal distributions of flipset members versus their group."""
    method = result.to_dict()
    details = method.get("details") or {}
    directions: list[dict[str, Any]] = []
    for pair in details.get("pairs") or []:
        for dr in pair.get("directions") or []:
            head = f"{pair.get('attribute')}: {dr.get('source')} → {dr.get('target')}"
            flips, reports, plots = [], [], []
            for kind, fs in (dr.get("flipsets") or {}).items():
                ci = fs.get("ci") or [None, None]
                null = fs.get("permutation_null") or {}
                flips.append(
                    {
                        "kind": FLIPSET_WORDS.get(kind, kind),
                        "count": fmt_count(fs.get("count")),
                        "rate": with_interval(
                            {"estimate": fs.get("rate"), "low": ci[0], "high": ci[1]}
                        ),
                        "pvalues": f"{fmt_pvalue(fs.get('pvalue_permutation'))} / "
                        f"{fmt_pvalue(fs.get('pvalue_selfmap'))}",
                        "null_q95": fmt_rate(null.get("q95")),
                        "excess": fmt_number(fs.get("excess_flips")),
                        "stable": fmt_count(fs.get("stable_count")),
                    }
                )
            for kind, tr in (dr.get("transparency") or {}).items():
                feats = tr.get("features") or []
                if not feats or not as_float(tr.get("n")) > 0:  # an empty flipset: nothing to say
                    continue
                rows = [
                    {
                        "feature": str(f.get("feature")),
                        "mean": with_interval(
                            {
                                "estimate": f.get("mean_difference"),
                                "low": (f.get("mean_difference_ci") or [None, None])[0],
                                "high": (f.get("mean_difference_ci") or [None, None])[1],
                            },
                            fmt_number,
                        ),
                        "consistency": fmt_number(f.get("consistency")),
                        "pvalue": fmt_pvalue(f.get("sign_pvalue_bh")),
                    }
                    for f in feats
                ]
                svg = interval_forest_svg(
                    f"Mean change in {FLIPSET_WORDS.get(kind, kind)[:2]}, {head}",
                    [str(f.get("feature")) for f in feats],
                    [
                        {
                            "name": "mean difference",
                            "color": "#2f5d8a",
                            "estimate": [f.get("mean_difference") for f in feats],
                            "low": [(f.get("mean_difference_ci") or [None])[0] for f in feats],
                            "high": [
                                (f.get("mean_difference_ci") or [None, None])[1] for f in feats
                            ],
                        }
                    ],
                    reference=0.0,
                    salt=slug("ft", len(directions), kind),
                )
                reports.append(
                    {
                        "kind": FLIPSET_WORDS.get(kind, kind),
                        "n": fmt_count(tr.get("n")),
                        "stability": fmt_rate(tr.get("rank_stability_mean_difference")),
                        "rows": rows,
                        "svg": Markup(svg),
                    }
                )
            for feature, h in list((dr.get("histograms") or {}).items())[:6]:
                plots.append(
                    Markup(
                        marginal_overlay_svg(
                            f"{feature}: {dr.get('source')} vs its flipsets",
                            h.get("edges") or [],
                            [
                                {
                                    "name": str(dr.get("source")),
                                    "color": "#7b8494",
                                    "counts": h.get("group") or [],
                                },
                                {
                                    "name": "F+",
                                    "color": "#a4502a",
                                    "counts": h.get("positive") or [],
                                },
                                {
                                    "name": "F−",
                                    "color": "#1f7a5a",
                                    "counts": h.get("negative") or [],
                                },
                            ],
                        )
                    )
                )
            directions.append(
                {
                    "title": head,
                    "anchor": slug("ft", len(directions), head),
                    "n": fmt_count(dr.get("n_source")),
                    "net": fmt_count(dr.get("net_flips")),
                    "dp_gap": fmt_count(dr.get("dp_count_gap")),
                    "flips": flips,
                    "reports": reports,
                    "plots": plots,
                }
            )
    return {
        "estimator": str(details.get("estimator") or DASH),
        "mode": str(details.get("mode") or DASH),
        "identity_note": str(details.get("identity_note") or ""),
        "units": str(details.get("units") or ""),
        "directions": directions,
    }
