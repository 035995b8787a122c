"""Report view of ``group_metrics`` (the LiFT suite): per encoding, group rates, pairwise gaps and
ratios, distribution distances.
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_number,
    slug,
    with_interval,
)
from tasks.report.plots import (
    MAX_PLOT_GROUPS,
    interval_forest_svg,
    largest_groups,
)

METHOD = "group_metrics"
DETAILS = UnknownDetails
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


def base_vs_positive_svg(name: str, groups: list[dict[str, Any]], salt: str) -> Markup | None:
    """Forest plot of the label base rate and the positive-prediction rate per group (with
    their intervals) of one ``group_metrics`` encoding; the largest
    :data:`~tasks.report.plots.MAX_PLOT_GROUPS` groups. ``None`` without groups."""
    if not groups:
        return None
    shown = largest_groups(list(groups), MAX_PLOT_GROUPS)
    suffix = f" (largest {len(shown)} of {len(groups)})" if len(shown) < len(groups) else ""
    series = [
        {
            "name": label,
            "color": color,
            "estimate": [(g.get(key) or {}).get("estimate") for g in shown],
            "low": [(g.get(key) or {}).get("low") for g in shown],
            "high": [(g.get(key) or {}).get("high") for g in shown],
        }
        for key, label, color in (
            ("base_rate", "base rate (labels)", "#a4502a"),
            ("positive_rate", "positive rate (predictions)", "#2f5d8a"),
        )
    ]
    return Markup(
        interval_forest_svg(
            f"Base rate and positive rate by {name}{suffix}",
            [str(g.get("group")) for g in shown],
            series,
            salt=salt,
        )
    )


def view(result: MethodResult) -> dict[str, Any]:
    """Per attribute (and the intersection): group rates and performance with intervals (and a
    base-rate vs positive-rate plot), pairwise gaps and ratios with the four-fifths flag,
    distances from the reference, and the inequality indices over each benefit vector."""
    method = result.to_dict()
    details = method.get("details") or {}
    encodings = []
    for ei, (name, enc) in enumerate((details.get("encodings") or {}).items()):
        groups = enc.get("groups") or []
        perf_names = sorted({k for g in groups for k in (g.get("performance") or {})})

        group_rows = []
        for g in groups:
            cells = []
            for key, _ in GM_RATES:
                cells.append(with_interval(g.get(key) or {}))
            for key in perf_names:
                cells.append(with_interval((g.get("performance") or {}).get(key) or {}))
            group_rows.append(
                {"group": str(g.get("group")), "n": fmt_count(g.get("n")), "cells": cells}
            )
        pair_rows = []
        pairs = enc.get("pairs") or {}
        for key, label in GM_RATES:
            for p in pairs.get(key) or []:
                pair_rows.append(
                    {
                        "metric": label,
                        "pair": f"{p.get('a')} vs {p.get('b')}",
                        "gap": with_interval(
                            {
                                "estimate": p.get("gap"),
                                "low": p.get("gap_low"),
                                "high": p.get("gap_high"),
                            },
                            fmt_number,
                        ),
                        "ratio": with_interval(
                            {
                                "estimate": p.get("ratio"),
                                "low": p.get("ratio_low"),
                                "high": p.get("ratio_high"),
                            },
                            fmt_number,
                        ),
                        "impact": fmt_number(p.get("impact_ratio")),
                        "four_fifths": "violated" if p.get("four_fifths_violated") else "met",
                    }
                )
        distances = [
            {
                "level": str(level),
                "values": [fmt_number((d or {}).get(k)) for k, _ in GM_DISTANCES],
            }
            for level, d in (enc.get("distances") or {}).items()
        ]
        benefits = enc.get("benefits") or {}
        agg_names = sorted({a for b in benefits.values() for a in (b.get("aggregates") or {})})
        benefit_rows = [
            {
                "benefit": str(bname),
                "n": fmt_count(b.get("n_entries")),
                "values": [fmt_number((b.get("aggregates") or {}).get(a)) for a in agg_names],
            }
            for bname, b in benefits.items()
        ]
        encodings.append(
            {
                "name": str(name),
                "kind": str(enc.get("kind") or ""),
                "plot": base_vs_positive_svg(str(name), groups, slug("gm", ei, name)),
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
    auc = details.get("auc") or {}
    return {
        "lift_compat": bool(details.get("lift_compat")),
        "auc_method": str(auc.get("method") or DASH),
        "encodings": encodings,
    }
