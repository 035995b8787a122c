"""Report view of ``group_parity``: per attribute, the groups' rates with intervals and rate
plots.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.group_parity.result import RATE_NAMES, GroupParityDetails, ParityGroup
from fairengine.results import MethodResult
from tasks.report.format import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_rate,
    fmt_value,
    slug,
)
from tasks.report.plots import RATE_LABELS, group_rates_svg

METHOD = "group_parity"
DETAILS = GroupParityDetails
TEMPLATE = "methods/group_parity.html.j2"


def view(result: MethodResult) -> dict[str, Any]:
    """Per-attribute group tables and rate plots of a ``group_parity`` result."""
    details = result.details
    assert isinstance(details, GroupParityDetails)
    if details.prediction == "expected" or details.threshold is None:
        prediction = (
            "Rates are expected rates (mean predicted probability per group; no threshold)."
        )
    else:
        prediction = f"Rates use hard predictions (score > {fmt_value(details.threshold)})."
    level = fmt_level(result.parameters.get("confidence_level", 0.95))
    rates = RATE_NAMES
    attributes: list[dict[str, Any]] = []
    for attr, info in details.attributes.items():
        show_weight = any(g.weight != g.n for g in info.groups)
        rows = [
            {
                "group": g.group,
                "n": fmt_count(g.n),
                "weight": fmt_count(g.weight),
                "rates": [
                    {
                        "estimate": fmt_rate(g.rates.of(r).estimate),
                        "interval": fmt_interval(g.rates.of(r).low, g.rates.of(r).high, fmt_rate),
                    }
                    for r in rates
                ],
            }
            for g in info.groups
        ]
        plot_groups = [_plot_group(g) for g in info.groups]
        attributes.append(
            {
                "name": attr,
                "anchor": slug("gp", len(attributes), attr),
                "show_weight": show_weight,
                "rows": rows,
                "plots": [
                    {"label": RATE_LABELS[r], "svg": Markup(group_rates_svg(attr, plot_groups, r))}
                    for r in rates
                ],
            }
        )
    return {
        "prediction": prediction,
        "tolerance": fmt_value(details.tolerance),
        "level": level,
        "rate_labels": [RATE_LABELS[r] for r in rates],
        "attributes": attributes,
    }


def _plot_group(g: ParityGroup) -> dict[str, Any]:
    """One group in the form :func:`~tasks.report.plots.group_rates_svg` draws."""
    rates = {r: g.rates.of(r) for r in RATE_NAMES}
    return {
        "group": g.group,
        "n": g.n,
        "rates": {
            r: {"estimate": e.estimate, "low": e.low, "high": e.high} for r, e in rates.items()
        },
    }
