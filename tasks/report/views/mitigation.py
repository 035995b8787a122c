"""Report view of the mitigation step: before/after on held-out data, per variant and per
intersection, and the fairlearn comparison (``templates/methods/mitigation.html.j2``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from fairengine.mitigation.result import (
    DeployedMitigation,
    EpsilonEstimate,
    Estimate,
    SplitEvaluation,
    VariantFailure,
    VariantFit,
)
from fairengine.results import MethodResult
from tasks.report.format import (
    DASH,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_rate,
    fmt_seconds,
)
from tasks.report.plots import SERIES_COLORS, interval_forest_svg

METHOD = "mitigation"
DETAILS = DeployedMitigation
TEMPLATE = "methods/mitigation.html.j2"


def _eps_cells(e: EpsilonEstimate | None) -> dict[str, str]:
    if e is None:
        return {"estimate": DASH, "interval": DASH, "upper": DASH}
    return {
        "estimate": fmt_number(e.estimate),
        "interval": fmt_interval(e.low, e.high),
        "upper": fmt_number(e.upper_bound),
    }


def _est(e: Estimate, fmt: Callable[[Any], str] = fmt_rate) -> str:
    return f"{fmt(e.estimate)} [{fmt(e.low)}, {fmt(e.high)}]"


def _row(
    name: str, test: SplitEvaluation, metrics: list[str], target: float, v: VariantFit | None
) -> dict[str, Any]:
    """One row of the variants table: the audited model (``v`` None) or a fitted variant."""
    if v is None:
        meets = (
            "yes"
            if all(m in test.epsilon and test.epsilon[m].upper_bound <= target for m in metrics)
            else "no"
        )
    else:
        meets = (
            "yes" if v.meets_target else ("point estimate only" if v.point_meets_target else "no")
        )
    return {
        "name": name,
        "eps": [_eps_cells(test.epsilon.get(m)) for m in metrics],
        "meets": meets,
        "loss": _est(test.loss, fmt_number),
        "accuracy": _est(test.accuracy),
        "tpr": _est(test.tpr),
        "fpr": _est(test.fpr),
        "fit_loss": fmt_number(v.fit_loss) if v else DASH,
        "seconds": fmt_seconds(v.seconds) if v else DASH,
        "status": "ok",
        "reason": "",
    }


def _failed_row(name: str, v: VariantFailure, metrics: list[str]) -> dict[str, Any]:
    """A variant that could not be fitted: its status and reason."""
    return {
        "name": name,
        "eps": [_eps_cells(None) for _ in metrics],
        "meets": "no",
        "loss": DASH,
        "accuracy": DASH,
        "tpr": DASH,
        "fpr": DASH,
        "fit_loss": DASH,
        "seconds": DASH,
        "status": v.status,
        "reason": v.reason,
    }


def view(result: MethodResult) -> dict[str, Any]:
    """Rows for the variants table (audited model first), a forest plot of held-out ε against
    the target, the deployed rule per intersection, and the fairlearn comparison."""
    d = result.details
    assert isinstance(d, DeployedMitigation)
    target = d.target_epsilon
    metrics = list(d.constraints)
    level = fmt_level(d.after.confidence_level)
    base = d.base.test
    rows = [
        _row(
            f"audited model (threshold {fmt_number(d.base_threshold)})", base, metrics, target, None
        )
    ]
    labels: list[str] = ["audited model"]
    est: list[float | None] = []
    lo: list[float | None] = []
    hi: list[float | None] = []
    first = metrics[0] if metrics else None

    def add_point(test: SplitEvaluation) -> None:
        e = test.epsilon.get(first) if first is not None else None
        est.append(None if e is None else e.estimate)
        lo.append(None if e is None else e.low)
        hi.append(None if e is None else e.high)

    add_point(base)
    for v in d.variants:
        name = v.variant + (" (deployed)" if v.deployed else "")
        if isinstance(v, VariantFailure):
            rows.append(_failed_row(name, v, metrics))
            continue
        rows.append(_row(name, v.test, metrics, target, v))
        labels.append(name)
        add_point(v.test)
    plot = None
    if first is not None:
        plot = Markup(
            interval_forest_svg(
                f"held-out ε ({first}) before and after, target {fmt_number(target)}",
                labels,
                [
                    {
                        "name": f"posterior {level}",
                        "color": SERIES_COLORS[0],
                        "estimate": est,
                        "low": lo,
                        "high": hi,
                    }
                ],
                reference=target,
                salt="mitigation",
                rows="models (the audited one and each variant)",
            )
        )
    rows_i = d.intersections or ()
    rates = sorted(rows_i[0].rates) if rows_i else []  # the constrained rates
    inter = []
    for r in rows_i:
        inter.append(
            {
                "group": r.intersection,
                "n_fit": r.n_fit,
                "n_test": r.n_test,
                "rule": r.rule + (f" (rule of {r.fallback_from})" if r.fallback_from else ""),
                "binding": ", ".join(r.binding) or DASH,
                "rates": [
                    f"{fmt_rate(r.rates[k].before)} → {fmt_rate(r.rates[k].after)}" for k in rates
                ],
            }
        )
    comparison = None
    if d.comparison is not None:
        comparison = {
            "attribute": d.comparison.attribute,
            "metrics": metrics,
            "rows": [
                {
                    "name": c.name,
                    "loss": fmt_number(c.loss),
                    "accuracy": fmt_rate(c.accuracy),
                    "eps": [fmt_number(c.epsilon.get(m)) for m in metrics],
                }
                for c in d.comparison.rows
            ],
        }
    return {
        "target": fmt_number(target),
        "metrics": metrics,
        "level": level,
        "attributes": " × ".join(d.attributes),
        "fit_rows": d.split.fit_rows,
        "test_rows": d.split.test_rows,
        "deploy": d.deploy,
        "rows": rows,
        "plot": plot,
        "intersections": inter,
        "rate_labels": rates,
        "comparison": comparison,
    }
