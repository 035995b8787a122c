"""Report view of ``group_parity``: per attribute, the groups' rates with intervals and rate
plots.
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
from tasks.report.findings import GROUP_RATES
from tasks.report.format import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_rate,
    fmt_value,
    slug,
)
from tasks.report.plots import (
    RATE_LABELS,
    as_float,
    group_rates_svg,
)

METHOD = "group_parity"
DETAILS = UnknownDetails
TEMPLATE = "methods/group_parity.html.j2"


def view(result: MethodResult) -> dict[str, Any]:
    """Per-attribute group tables and rate plots of a ``group_parity`` result (dict form)."""
    method = result.to_dict()
    details = method.get("details") or {}
    params = method.get("parameters") or {}
    threshold = details.get("threshold", params.get("threshold"))
    if details.get("prediction") == "expected" or threshold is None:
        prediction = (
            "Rates are expected rates (mean predicted probability per group; no threshold)."
        )
    else:
        prediction = f"Rates use hard predictions (score > {fmt_value(threshold)})."
    level = fmt_level(params.get("confidence_level", 0.95))
    attributes: list[dict[str, Any]] = []
    for attr, info in (details.get("attributes") or {}).items():
        groups = list(info.get("groups") or [])
        rows = []
        show_weight = False
        for g in groups:
            n = g.get("n")
            weight = g.get("weight")
            if weight is not None and n is not None and as_float(weight) != as_float(n):
                show_weight = True
            rates = g.get("rates") or {}
            rows.append(
                {
                    "group": str(g.get("group")),
                    "n": fmt_count(n),
                    "weight": fmt_count(weight),
                    "rates": [
                        {
                            "estimate": fmt_rate((rates.get(r) or {}).get("estimate")),
                            "interval": fmt_interval(
                                (rates.get(r) or {}).get("low"),
                                (rates.get(r) or {}).get("high"),
                                fmt_rate,
                            ),
                        }
                        for r in GROUP_RATES
                    ],
                }
            )
        attributes.append(
            {
                "name": str(attr),
                "anchor": slug("gp", len(attributes), attr),
                "show_weight": show_weight,
                "rows": rows,
                "plots": [
                    {"label": RATE_LABELS[r], "svg": Markup(group_rates_svg(str(attr), groups, r))}
                    for r in GROUP_RATES
                ],
            }
        )
    return {
        "prediction": prediction,
        "tolerance": fmt_value(details.get("tolerance", params.get("tolerance"))),
        "level": level,
        "rate_labels": [RATE_LABELS[r] for r in GROUP_RATES],
        "attributes": attributes,
    }
