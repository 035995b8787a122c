"""Report view of ``individual_fairness``: the loss-ratio test, the attack and per-group effects."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_interval,
    fmt_number,
    fmt_pvalue,
    fmt_rate,
    fmt_value,
)
from tasks.report.plots import (
    as_float,
    curve_svg,
    null_histogram_svg,
)

METHOD = "individual_fairness"
DETAILS = UnknownDetails
TEMPLATE = "methods/individual_fairness.html.j2"


def view(result: MethodResult) -> dict[str, Any]:
    """The two tests (loss ratio, error-rate ratio), the per-point ratio histogram, the lower
    bound as a function of the attack's steps, the points with the largest ratios and the
    per-group summary."""
    method = result.to_dict()
    d = method.get("details") or {}
    delta = d.get("delta")
    lr, er = d.get("loss_ratio") or {}, d.get("error_rate_ratio") or {}

    def test_row(name: str, t: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "statistic": fmt_number(t.get("statistic")),
            "interval": fmt_interval(t.get("ci_low"), t.get("ci_high")),
            "lower_bound": fmt_number(t.get("lower_bound")),
            "pvalue": fmt_pvalue(t.get("pvalue")),
        }

    tests = [test_row("Mean loss ratio E[ℓ(Φ(x))/ℓ(x)]", lr)]
    if er.get("enabled", True) and er:
        tests.append(test_row("Error-rate ratio", er))
    plots = []
    h = d.get("ratio_histogram") or {}
    if h.get("counts"):
        plots.append(
            {
                "caption": "Per-point loss ratios after the attack; the line marks δ.",
                "svg": Markup(
                    null_histogram_svg("Per-point loss ratio", h["edges"], h["counts"], delta, "δ")
                ),
            }
        )
    path = d.get("lower_bound_by_steps") or []
    if path:
        plots.append(
            {
                "caption": "Mean loss ratio and its one-sided lower bound as the attack runs "
                "longer (steps of the gradient flow); the dashed line is δ.",
                "svg": Markup(
                    curve_svg(
                        "Loss ratio vs attack steps",
                        [p.get("step") for p in path],
                        [
                            {
                                "name": "mean ratio",
                                "color": "#2f5d8a",
                                "values": [p.get("statistic") for p in path],
                            },
                            {
                                "name": "lower bound",
                                "color": "#a4502a",
                                "values": [p.get("lower_bound") for p in path],
                            },
                        ],
                        xlabel="steps",
                        hline=as_float(delta) if delta is not None else None,
                        hline_label="δ",
                    )
                ),
            }
        )
    top = []
    for p in d.get("top_points") or []:
        changes = p.get("largest_changes") or {}
        top.append(
            {
                "row": fmt_value(p.get("row")),
                "label": fmt_value(p.get("label")),
                "ratio": fmt_number(p.get("ratio")),
                "proba": f"{fmt_rate(p.get('proba_original'))} → {fmt_rate(p.get('proba_mapped'))}",
                "changes": ", ".join(f"{k} {as_float(v):+.3g}" for k, v in changes.items()),
            }
        )
    groups = [
        {
            "attribute": str(attr),
            "group": str(g.get("group")),
            "n": fmt_count(g.get("n")),
            "mean_ratio": fmt_number(g.get("mean_ratio")),
            "errors": f"{fmt_rate(g.get('error_rate_original'))} → "
            f"{fmt_rate(g.get('error_rate_mapped'))}",
        }
        for attr, rows in (d.get("per_group") or {}).items()
        for g in rows
    ]
    model = d.get("model") or {}
    metric = d.get("metric") or {}
    attack = d.get("attack") or {}
    return {
        "delta": fmt_value(delta),
        "n": fmt_count(d.get("n_audited")),
        "model": str(model.get("description") or model.get("kind") or DASH),
        "metric": str(metric.get("metric") or DASH),
        "attack": f"λ = {fmt_value(attack.get('lambda'))}, {fmt_value(attack.get('steps'))} "
        f"steps of size {fmt_value(attack.get('eta'))} ({fmt_value(attack.get('schedule'))})",
        "tests": tests,
        "plots": plots,
        "top": top,
        "groups": groups,
    }
