"""Report view of ``ranking_metrics``: per attribute, a group table (items, share of the items,
share of the top k and skew@k for each cutoff, mean exposure), precision@k and recall@k when the
audit has relevance labels, a diverging bar plot of skew@k per group and NDKL; the ranks' tie
policy and the number of lists.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.ranking.precision import PrecisionAtK
from fairengine.ranking.result import RankingAttribute, RankingDetails
from fairengine.ranking.statistics import RankingStatistics
from fairengine.results import MethodResult
from tasks.report.format import (
    fmt_count,
    fmt_level,
    fmt_number,
    fmt_rate,
    fmt_value,
    slug,
)
from tasks.report.plots import SERIES_COLORS, signed_bars_svg

METHOD = "ranking_metrics"
DETAILS = RankingDetails
TEMPLATE = "methods/ranking_metrics.html.j2"

TIES: dict[str, str] = {
    "order": "tied scores within a list are ranked in row order (the earlier row ranks higher)",
    "error": "tied scores within a list are refused (ties: error), so the ranks have no ties",
}


def view(result: MethodResult) -> dict[str, Any]:
    """Per-attribute group tables, skew plots and NDKL of a ``ranking_metrics`` result."""
    details = result.details
    assert isinstance(details, RankingDetails)
    ties = str(result.parameters.get("ties", "order"))
    threshold = result.parameters.get("relevance_threshold")
    return {
        "n_items": fmt_count(details.n_items),
        "n_lists": fmt_count(details.n_lists),
        "one_list": details.n_lists == 1,
        "ties": TIES.get(ties, f"ties: {ties}"),
        "cutoffs": list(details.cutoffs),
        "relevance": details.relevance,
        "relevant": (
            "relevance > 0" if threshold is None else f"relevance ≥ {fmt_value(threshold)}"
        ),
        "level": fmt_level(details.confidence_level),
        "n_permutations": fmt_count(details.n_permutations),
        "attributes": [
            attribute_view(a, details.n_lists > 1, i) for i, a in enumerate(details.attributes)
        ],
    }


def attribute_view(a: RankingAttribute, several_lists: bool, index: int) -> dict[str, Any]:
    """One attribute's representation table, relevance table, skew plot and NDKL."""
    s = a.statistics
    total = s.n_items
    rows = []
    for g in s.exposure.groups:
        cuts = []
        for t in s.topk:
            share = t.group(g.group)
            cuts.append(
                {
                    "share": fmt_rate(share.share_top),
                    "count": f"{fmt_count(share.n_top)} of {fmt_count(t.n_top)}",
                    "expected": fmt_rate(share.share_expected),
                    "skew": fmt_number(share.skew),
                }
            )
        rows.append(
            {
                "group": g.group,
                "n": fmt_count(g.n),
                "share": fmt_rate(g.n / total if total else float("nan")),
                "cuts": cuts,
                "exposure": fmt_number(g.mean_exposure),
                "relevance": fmt_number(g.mean_relevance),
                "per_relevance": fmt_number(g.exposure_per_relevance),
            }
        )
    return {
        "name": a.attribute,
        "anchor": slug("rank", index, a.attribute),
        "cutoffs": [t.cutoff.label for t in s.topk],
        "expected": several_lists,
        "with_relevance": s.exposure.with_relevance,
        "rows": rows,
        "extremes": [
            {
                "cutoff": t.cutoff.label,
                "min": fmt_number(t.min_skew),
                "min_group": t.min_group,
                "max": fmt_number(t.max_skew),
                "max_group": t.max_group,
            }
            for t in s.topk
        ],
        "precision": precision_view(s.precision) if s.precision else None,
        "ndkl": {
            "value": fmt_number(s.ndkl.value),
            "lists": fmt_count(s.ndkl.n_lists),
            "one_list": s.ndkl.n_lists == 1,
            "min": fmt_number(s.ndkl.min_list),
            "max": fmt_number(s.ndkl.max_list),
        },
        "pairs": f"{fmt_count(a.pairs_planned)} of {fmt_count(a.pairs_possible)}",
        "all_pairs": a.pairs_planned == a.pairs_possible,
        "plot": skew_svg(s, index) if s.topk else None,
    }


def precision_view(precision: tuple[PrecisionAtK, ...]) -> dict[str, Any]:
    """precision@k and recall@k of every group (and of all items) at each cutoff."""
    first = precision[0]

    def cells(group: str | None) -> list[dict[str, str]]:
        out = []
        for p in precision:
            g = p.overall if group is None else p.group(group)
            out.append(
                {
                    "precision": fmt_rate(g.precision),
                    "precision_count": f"{fmt_count(g.n_relevant_top)} of {fmt_count(g.n_top)}",
                    "recall": fmt_rate(g.recall),
                    "recall_count": f"{fmt_count(g.n_relevant_top)} of {fmt_count(g.n_relevant)}",
                }
            )
        return out

    rows = [{"group": g.group, "cells": cells(g.group)} for g in first.groups]
    return {
        "cutoffs": [p.cutoff.label for p in precision],
        "rows": rows,
        "overall": {"group": "All items", "cells": cells(None)},
    }


def skew_svg(s: RankingStatistics, index: int) -> Markup:
    """Skew@k per group as bars from 0, one bar per cutoff."""
    groups = s.topk[0].groups
    series = [
        {
            "name": t.cutoff.label,
            "color": SERIES_COLORS[j % len(SERIES_COLORS)],
            "values": [g.skew for g in t.groups],
        }
        for j, t in enumerate(s.topk)
    ]
    return Markup(
        signed_bars_svg(
            f"Skew@k by {s.attribute}: ln(share of the top k / expected share)",
            [g.group for g in groups],
            series,
            sizes=[g.n for g in groups],
            salt=f"rank-skew-{index}",
        )
    )
