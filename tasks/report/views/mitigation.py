"""Report view of the mitigation step: before/after on held-out data, per variant and per
intersection, and the fairlearn comparison (``templates/mitigation_block.html.j2``)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from fairengine.results import MethodResult, UnknownDetails
from tasks.report.format import (
    DASH,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_rate,
    fmt_seconds,
)
from tasks.report.plots import interval_forest_svg

METHOD = "mitigation"
DETAILS = UnknownDetails
TEMPLATE = "methods/mitigation.html.j2"


def _eps_cells(e: dict[str, Any] | None) -> dict[str, str]:
    if not e:
        return {"estimate": DASH, "interval": DASH, "upper": DASH}
    return {
        "estimate": fmt_number(e.get("estimate")),
        "interval": fmt_interval(e.get("low"), e.get("high")),
        "upper": fmt_number(e.get("upper_bound")),
    }


def _est(e: dict[str, Any] | None, fmt: Any = fmt_rate) -> str:
    if not e:
        return DASH
    return f"{fmt(e.get('estimate'))} [{fmt(e.get('low'))}, {fmt(e.get('high'))}]"


def view(result: MethodResult) -> dict[str, Any]:
    """Rows for the variants table (audited model first), a forest plot of held-out ε against
    the target, the deployed rule per intersection, and the fairlearn comparison."""
    method = result.to_dict()
    d = method.get("details") or {}
    target = d.get("target_epsilon")
    metrics = list(d.get("constraints") or [])
    level = fmt_level((d.get("after") or {}).get("confidence_level", 0.95))
    rows = []
    base = (d.get("base") or {}).get("test") or {}

    def row(name: str, test: dict[str, Any], v: dict[str, Any] | None) -> dict[str, Any]:
        eps = {m: _eps_cells((test.get("epsilon") or {}).get(m)) for m in metrics}
        if v is None:
            meets = (
                "yes"
                if all(
                    (test.get("epsilon") or {}).get(m, {}).get("upper_bound", 1e9) <= target
                    for m in metrics
                )
                else "no"
            )
        else:
            meets = (
                "yes"
                if v.get("meets_target")
                else ("point estimate only" if v.get("point_meets_target") else "no")
            )
        return {
            "name": name,
            "eps": [eps[m] for m in metrics],
            "meets": meets,
            "loss": _est(test.get("loss"), lambda x: fmt_number(x)),
            "accuracy": _est(test.get("accuracy")),
            "tpr": _est(test.get("tpr")),
            "fpr": _est(test.get("fpr")),
            "fit_loss": fmt_number(v.get("fit_loss")) if v else DASH,
            "seconds": fmt_seconds(v.get("seconds")) if v else DASH,
            "status": "ok" if v is None else v.get("status", "ok"),
            "reason": "" if v is None else (v.get("reason") or ""),
        }

    rows.append(row(f"audited model (threshold {fmt_number(d.get('base_threshold'))})", base, None))
    labels, est, lo, hi = ["audited model"], [], [], []
    first = metrics[0] if metrics else None

    def add_point(test: dict[str, Any]) -> None:
        e = (test.get("epsilon") or {}).get(first) or {}
        est.append(e.get("estimate"))
        lo.append(e.get("low"))
        hi.append(e.get("high"))

    add_point(base)
    for v in d.get("variants") or []:
        name = v["variant"] + (" (deployed)" if v.get("deployed") else "")
        if v.get("status") != "ok":
            rows.append({**row(name, {}, v), "status": v.get("status"), "reason": v.get("reason")})
            continue
        rows.append(row(name, v.get("test") or {}, v))
        labels.append(name)
        add_point(v.get("test") or {})
    plot = None
    if first is not None:
        plot = Markup(
            interval_forest_svg(
                f"held-out ε ({first}) before and after, target {fmt_number(target)}",
                labels,
                [
                    {
                        "name": f"posterior {level}",
                        "color": "#2f5d8a",
                        "estimate": est,
                        "low": lo,
                        "high": hi,
                    }
                ],
                reference=target,
                salt="mitigation",
            )
        )
    inter = []
    rates: list[str] = []
    for r in d.get("intersections") or []:
        if not rates:
            rates = sorted(k[: -len("_before")] for k in r if k.endswith("_before"))
        inter.append(
            {
                "group": r["intersection"],
                "n_fit": r["n_fit"],
                "n_test": r["n_test"],
                "rule": r["rule"]
                + (f" (rule of {r['fallback_from']})" if r.get("fallback_from") else ""),
                "binding": ", ".join(r.get("binding") or []) or DASH,
                "rates": [
                    f"{fmt_rate(r.get(f'{k}_before'))} → {fmt_rate(r.get(f'{k}_after'))}"
                    for k in rates
                ],
            }
        )
    comp = d.get("comparison") or None
    comparison = None
    if comp:
        comparison = {
            "attribute": comp.get("attribute"),
            "metrics": metrics,
            "rows": [
                {
                    "name": r["name"],
                    "loss": fmt_number(r["loss"]),
                    "accuracy": fmt_rate(r["accuracy"]),
                    "eps": [fmt_number((r.get("epsilon") or {}).get(m)) for m in metrics],
                }
                for r in comp.get("rows") or []
            ],
        }
    split = d.get("split") or {}
    return {
        "target": fmt_number(target),
        "metrics": metrics,
        "level": level,
        "attributes": " × ".join(d.get("attributes") or []),
        "fit_rows": split.get("fit_rows"),
        "test_rows": split.get("test_rows"),
        "deploy": d.get("deploy"),
        "rows": rows,
        "plot": plot,
        "intersections": inter,
        "rate_labels": rates,
        "comparison": comparison,
    }
