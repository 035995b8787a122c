"""Report view of ``individual_fairness``: the loss-ratio test, the attack and per-group effects."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.individual.result import IndividualFairnessDetails, RatioTestSummary
from fairengine.results import MethodResult
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
    SERIES_COLORS,
    curve_svg,
    null_histogram_svg,
)

OUTPUT_HEADINGS = {
    "binary": "P(y=1): original → mapped",
    "regression": "Prediction: original → mapped",
    "multiclass": "P(own class): original → mapped",
}
"""The heading of the model-output column of the top points, per task."""

METHOD = "individual_fairness"
DETAILS = IndividualFairnessDetails
TEMPLATE = "methods/individual_fairness.html.j2"


def view(result: MethodResult) -> dict[str, Any]:
    """The two tests (loss ratio, error-rate ratio), the per-point ratio histogram, the lower
    bound as a function of the attack's steps, the points with the largest ratios and the
    per-group summary."""
    d = result.details
    assert isinstance(d, IndividualFairnessDetails)
    delta = d.delta

    def test_row(name: str, t: RatioTestSummary) -> dict[str, Any]:
        return {
            "name": name,
            "statistic": fmt_number(t.statistic),
            "interval": fmt_interval(t.ci_low, t.ci_high),
            "lower_bound": fmt_number(t.lower_bound),
            "pvalue": fmt_pvalue(t.pvalue),
        }

    tests = [test_row(f"Mean loss ratio E[ℓ(Φ(x))/ℓ(x)], {d.loss}", d.loss_ratio)]
    if d.error_rate_ratio.enabled:
        tests.append(test_row("Error-rate ratio", d.error_rate_ratio))
    plots = []
    h = d.ratio_histogram
    if h is not None and h.counts:
        plots.append(
            {
                "caption": "Per-point loss ratios after the attack; the line marks δ.",
                "svg": Markup(
                    null_histogram_svg(
                        "Per-point loss ratio",
                        list(h.edges),
                        list(h.counts),
                        delta,
                        "δ",
                        values="audited points' loss ratios",
                    )
                ),
            }
        )
    path = d.lower_bound_by_steps
    if path:
        plots.append(
            {
                "caption": "Mean loss ratio and its one-sided lower bound as the attack runs "
                "longer (steps of the gradient flow); the dashed line is δ.",
                "svg": Markup(
                    curve_svg(
                        "Loss ratio vs attack steps",
                        [p.step for p in path],
                        [
                            {
                                "name": "mean ratio",
                                "color": SERIES_COLORS[0],
                                "values": [p.statistic for p in path],
                            },
                            {
                                "name": "lower bound",
                                "color": SERIES_COLORS[1],
                                "values": [p.lower_bound for p in path],
                            },
                        ],
                        xlabel="steps",
                        hline=delta,
                        hline_label="δ",
                    )
                ),
            }
        )
    regression = d.task == "regression"
    show = fmt_number if regression else fmt_rate  # a prediction, or a probability
    top = [
        {
            "row": fmt_value(p.row),
            "label": fmt_number(p.label) if regression else fmt_value(p.label),
            "ratio": fmt_number(p.ratio),
            "proba": f"{show(p.proba_original)} → {show(p.proba_mapped)}",
            "changes": ", ".join(f"{k} {v:+.3g}" for k, v in p.largest_changes.items()),
        }
        for p in d.top_points
    ]
    groups = [
        {
            "attribute": attr,
            "group": g.group,
            "n": fmt_count(g.n),
            "mean_ratio": fmt_number(g.mean_ratio),
            "errors": f"{fmt_rate(g.error_rate_original)} → {fmt_rate(g.error_rate_mapped)}",
        }
        for attr, rows in d.per_group.items()
        for g in rows
    ]
    attack = d.attack
    return {
        "delta": fmt_value(delta),
        "n": fmt_count(d.n_audited),
        "model": d.model.description or d.model.kind or DASH,
        "metric": d.metric.metric or DASH,
        "attack": f"λ = {fmt_value(attack.lam)}, {fmt_value(attack.steps)} "
        f"steps of size {fmt_value(attack.eta)} ({fmt_value(attack.schedule)})",
        "tests": tests,
        "output": OUTPUT_HEADINGS.get(d.task, OUTPUT_HEADINGS["binary"]),
        "errors": d.error_rate_ratio.enabled,
        "plots": plots,
        "top": top,
        "groups": groups,
    }
