"""Render an :class:`~fairengine.results.AuditResult` as one self-contained HTML report.

The report is a rendering of the result's JSON (:meth:`AuditResult.to_dict`): this module turns
that dict into plain, pre-formatted view data (strings, lists, dicts) plus inline SVG plots, and
``templates/report.html.j2`` lays it out. The template does no arithmetic and no formatting; it is
autoescaped, and the only markup it prints unescaped is the SVG made by
:mod:`tasks.report_plots` (whose text matplotlib XML-escapes).

The HTML is self-contained: inline CSS (``templates/report.css``), inline SVG, no scripts, no
external URLs or fonts, and a print stylesheet. Layout: header, verdict banner, verdict table
(every tested finding), the methods overview (every method with its status, tests, time and,
for failed or not-run methods, the reason), one section per method, data validation,
configuration and step timings. ``benchmarks/report_render.py`` measures the render time and
size of a full every-method report.

Adding a report block for a new method: write ``<method>_view(method_dict) -> dict`` here,
register it in :data:`DETAIL_VIEWS`, and add a macro of the same name plus ``_block`` to
``report.html.j2``'s ``detail_blocks``. Methods without a block get their generic section
(status, parameters, findings, warnings, reason) and their raw ``details`` as JSON.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from fairengine.results import AuditResult
from tasks.report_format import (
    DASH,
    fmt_count,
    fmt_datetime,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_pvalue,
    fmt_rate,
    fmt_seconds,
    fmt_value,
    short_json,
    slug,
)
from tasks.report_mitigation import mitigation_view
from tasks.report_plots import (
    MAX_PLOT_GROUPS,
    RATE_LABELS,
    as_float,
    curve_svg,
    group_rates_svg,
    interval_forest_svg,
    largest_groups,
    marginal_overlay_svg,
    null_histogram_svg,
)
from templates import TEMPLATE_DIR

TEMPLATE_NAME = "report.html.j2"
REPORT_FILENAME = "report.html"
RAW_DETAILS_LIMIT = 20_000
"""Characters of a method's raw ``details`` JSON shown when it has no dedicated block."""

MULTIPLICITY_LABELS: dict[str, str] = {
    "holm": "Holm",
    "bh": "Benjamini–Hochberg",
    "none": "unadjusted",
    "maxt": "Holm/maxT",
}
STATUS_LABELS: dict[str, str] = {"ok": "OK", "failed": "Failed", "not_run": "Not run"}
VERDICT_LABELS: dict[str, tuple[str, str]] = {  # status -> (word, symbol)
    "pass": ("PASS", "✓"),
    "fail": ("FAIL", "✗"),
    "incomplete": ("INCOMPLETE", "!"),
}
DECISION_LABELS: dict[str, str] = {
    "reject": "Rejected",
    "fail_to_reject": "Not rejected",
    "undetermined": "Undetermined (Monte-Carlo resolution)",
    "supporting": "Supporting evidence",
    "not_tested": "Not tested",
}
#: Verdict-table order: rejections, then undetermined, then the rest.
DECISION_ORDER: dict[str, int] = {"reject": 0, "undetermined": 1, "fail_to_reject": 2}
GROUP_RATES: tuple[str, ...] = ("positive_rate", "tpr", "fpr")

log = logging.getLogger(__name__)


def multiplicity_label(multiplicity: str) -> str:
    """``holm`` -> ``Holm``, ``bh`` -> ``Benjamini–Hochberg``, ``none`` -> ``unadjusted``."""
    return MULTIPLICITY_LABELS.get(multiplicity, multiplicity)


# --------------------------------------------------------------------------- view data


def finding_view(f: dict[str, Any]) -> dict[str, Any]:
    """Pre-formatted strings of one finding (dict form)."""
    interval = f.get("interval")
    decision = f.get("decision") or "not_tested"
    return {
        "key": f.get("key", ""),
        "label": f.get("label", ""),
        "estimate": fmt_number(f.get("estimate")),
        "interval": fmt_interval(interval["low"], interval["high"]) if interval else DASH,
        "level": fmt_level(interval.get("level")) if interval else "",
        "interval_method": (interval.get("method") or "") if interval else "",
        "pvalue": fmt_pvalue(f.get("pvalue")),
        "adjusted_pvalue": fmt_pvalue(f.get("adjusted_pvalue")),
        "null_hypothesis": f.get("null_hypothesis") or "",
        "decision": decision,
        "decision_label": DECISION_LABELS.get(decision, str(decision)),
        "reading": f.get("reading") or "",
        "tested": f.get("pvalue") is not None,
        "counts": f.get("pvalue") is not None and decision != "supporting",
        "resamples": resampling_note(f),
    }


def resampling_note(f: dict[str, Any]) -> str:
    """``"1,999 permutation + 49 self-map resamples"`` for a Monte-Carlo p-value (its interval
    and the resamples that would settle it are in the reading); empty for an exact one."""
    parts = f.get("resampling") or []
    if not parts:
        return ""
    return " + ".join(f"{int(p['resamples']):,} {p['name']}" for p in parts) + " resamples"


def group_parity_view(method: dict[str, Any]) -> dict[str, Any]:
    """Per-attribute group tables and rate plots of a ``group_parity`` result (dict form)."""
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


DF_METRIC_LABELS: dict[str, str] = {
    "elift": "Empirical lift (labels)",
    "slift": "Impact ratio, slift (labels)",
    "sp": "Statistical parity (predictions)",
    "tpr": "TPR parity (predictions)",
    "fpr": "FPR parity (predictions)",
    "eo": "Equalized odds (predictions)",
}


def intersectional_view(method: dict[str, Any]) -> dict[str, Any]:
    """Per grouping (the intersection first, then each attribute): ε per metric with the
    smoothed estimate under the configured outcome convention and, beside it, under the other
    convention (positive outcome only vs both outcomes), the bootstrap and Bayesian intervals, the
    driving pair, a forest plot; then the smallest intersections and the method's notes."""
    details = method.get("details") or {}
    metrics = details.get("metrics") or {}
    grouping_attributes = details.get("groupings") or {}
    groupings = list(grouping_attributes.keys())
    level = fmt_level((details.get("estimators") or {}).get("confidence_level", 0.95))
    blocks = []
    for gi, grouping in enumerate(groupings):
        attributes = grouping_attributes.get(grouping) or [grouping]
        title = " × ".join(str(a) for a in attributes)  # the attributes' names, not the key token
        rows, labels, est, b_lo, b_hi, y_lo, y_hi = [], [], [], [], [], [], []
        for metric, per_grouping in metrics.items():
            g = (per_grouping or {}).get(grouping)
            if not g:
                continue
            e = g.get("estimators") or {}
            boot, bayes = e.get("bootstrap") or {}, e.get("bayesian") or {}
            pair = g.get("pair") or {}
            conv = g.get("convention") or {}
            label = DF_METRIC_LABELS.get(metric, metric)
            rows.append(
                {
                    "metric": label,
                    "epsilon": fmt_number(g.get("epsilon")),
                    "convention": str(conv.get("name") or g.get("outcomes") or DASH),
                    "epsilon_other": fmt_number(conv.get("other_epsilon")),
                    "other_convention": str(conv.get("other_name") or DASH),
                    "ratio": fmt_number(g.get("ratio")),
                    "bootstrap": fmt_interval(boot.get("low"), boot.get("high")),
                    "bayesian": fmt_interval(bayes.get("low"), bayes.get("high")),
                    "headline": str(g.get("headline") or DASH),
                    "pair": (
                        f"{pair.get('high')} ({fmt_rate(pair.get('rate_high'))}) vs "
                        f"{pair.get('low')} ({fmt_rate(pair.get('rate_low'))})"
                        if pair
                        else DASH
                    ),
                }
            )
            labels.append(label)
            est.append(g.get("epsilon"))
            b_lo.append(boot.get("low"))
            b_hi.append(boot.get("high"))
            y_lo.append(bayes.get("low"))
            y_hi.append(bayes.get("high"))
        if not rows:
            continue
        plot = interval_forest_svg(
            f"ε by metric over {title}",
            labels,
            [
                {
                    "name": "bootstrap",
                    "color": "#2f5d8a",
                    "estimate": est,
                    "low": b_lo,
                    "high": b_hi,
                },
                {"name": "Bayesian", "color": "#a4502a", "low": y_lo, "high": y_hi},
            ],
            salt=f"df-{gi}",
        )
        blocks.append(
            {
                "grouping": title,
                "anchor": slug("df", gi, grouping),
                "rows": rows,
                "plot": Markup(plot),
            }
        )
    rates = intersection_rates_view(details)
    smallest = [
        {
            "group": str(c.get("group")),
            "n": fmt_count(c.get("n")),
            "positives": fmt_count(c.get("positives")),
            "status": str(c.get("status") or ""),
        }
        for c in details.get("smallest") or []
    ]
    return {
        "level": level,
        "attributes": " × ".join(map(str, details.get("attributes") or [])),
        "n_intersections": fmt_count(details.get("n_intersections")),
        "outcomes": str(details.get("outcomes") or ""),
        "convention": str(details.get("convention") or details.get("outcomes") or DASH),
        "other_convention": str(details.get("other_convention") or DASH),
        "blocks": blocks,
        "rates": rates,
        "smallest": smallest,
        "notes": [str(n) for n in details.get("notes") or []],
    }


DF_RATE_LABELS: dict[str, str] = {
    "selection_rate": "Selection rate",
    "base_rate": "Base rate P(y=1)",
    "tpr": "TPR",
    "fpr": "FPR",
}
DF_RATE_COLORS: dict[str, str] = {"selection_rate": "#2f5d8a", "base_rate": "#a4502a"}


def intersection_rates_view(details: dict[str, Any]) -> dict[str, Any] | None:
    """The rates ε compares, per intersection of the finest grouping: smoothed rate and
    Beta-posterior interval of each rate (table), and a forest plot of the selection and base
    rates (the largest :data:`~tasks.report_plots.MAX_PLOT_GROUPS` intersections).

    ``None`` when the result carries no per-intersection rates (more intersections than the
    method details).
    """
    all_rates = details.get("rates") or {}
    if not all_rates:
        return None
    grouping, tab = max(all_rates.items(), key=lambda kv: len(kv[1].get("attributes") or []))
    names = [str(g) for g in tab.get("group") or []]
    sizes = list(tab.get("n") or [])
    keys = [k for k in DF_RATE_LABELS if isinstance(tab.get(k), dict)]
    rows = []
    for i, name in enumerate(names):
        cells = []
        for k in keys:
            r = tab[k]
            status = (r.get("status") or [])[i] if i < len(r.get("status") or []) else "ok"
            cell = with_interval(
                {"estimate": r["rate"][i], "low": r["low"][i], "high": r["high"][i]}
            )
            cells.append(cell if status == "ok" else f"{cell} ({status})")
        rows.append(
            {"group": name, "n": fmt_count(sizes[i] if i < len(sizes) else None), "cells": cells}
        )
    plotted = [k for k in ("selection_rate", "base_rate") if k in keys]
    plot = None
    if plotted and names:
        entries = [
            {"group": name, "n": sizes[i] if i < len(sizes) else 0, "i": i}
            for i, name in enumerate(names)
        ]
        shown = largest_groups(entries, MAX_PLOT_GROUPS)
        suffix = f" (largest {len(shown)} of {len(names)})" if len(shown) < len(names) else ""
        plot = Markup(
            interval_forest_svg(
                f"Rates per intersection{suffix}",
                [e["group"] for e in shown],
                [
                    {
                        "name": DF_RATE_LABELS[k],
                        "color": DF_RATE_COLORS[k],
                        "estimate": [tab[k]["rate"][e["i"]] for e in shown],
                        "low": [tab[k]["low"][e["i"]] for e in shown],
                        "high": [tab[k]["high"][e["i"]] for e in shown],
                    }
                    for k in plotted
                ],
                salt=slug("df-rates", grouping),
            )
        )
    return {
        "grouping": str(grouping),
        "anchor": slug("df-rates", grouping),
        "labels": [DF_RATE_LABELS[k] for k in keys],
        "plotted": " and ".join(DF_RATE_LABELS[k].lower() for k in plotted),
        "rows": rows,
        "plot": plot,
    }


PERM_METRIC_LABELS: dict[str, str] = {
    "positive_rate": "positive-prediction rate",
    "tpr": "TPR (recall)",
    "recall": "TPR (recall)",
    "fnr": "FNR",
    "fpr": "FPR",
    "tnr": "TNR",
    "precision": "precision",
    "accuracy": "accuracy",
    "calibration": "calibration-in-the-large",
    "auc": "AUC",
}
MAX_NULL_PLOTS = 12
"""Permutation distributions drawn (smallest p-values first); the table lists every test."""


def permutation_view(method: dict[str, Any]) -> dict[str, Any]:
    """Every permutation test as a table row, and the null distributions of the most
    significant ones with the observed statistic marked."""
    details = method.get("details") or {}
    tests = list(details.get("tests") or [])
    rows = []
    for t in tests:
        ci = t.get("ci") or [None, None]
        p_iv = t.get("pvalue_interval") or [None, None]
        rows.append(
            {
                "attribute": str(t.get("attribute")),
                "pair": f"{t.get('group_a')} − {t.get('group_b')}",
                "metric": PERM_METRIC_LABELS.get(str(t.get("metric")), str(t.get("metric"))),
                "values": f"{fmt_number(t.get('value_a'))} vs {fmt_number(t.get('value_b'))}",
                "difference": fmt_number(t.get("difference")),
                "interval": fmt_interval(ci[0], ci[1]),
                "statistic": fmt_number(t.get("statistic")),
                "pvalue": fmt_pvalue(t.get("pvalue")),
                "pvalue_mc": f"± {fmt_number(t.get('pvalue_se'))} "
                f"{fmt_interval(p_iv[0], p_iv[1], fmt_pvalue)}",
                "n": f"{fmt_count(t.get('n_a'))} / {fmt_count(t.get('n_b'))}",
            }
        )
    ranked = sorted(tests, key=lambda t: as_float(t.get("pvalue")))
    plots = []
    for t in ranked[:MAX_NULL_PLOTS]:
        h = t.get("null_histogram") or {}
        if not h.get("counts"):
            continue
        title = (
            f"{PERM_METRIC_LABELS.get(str(t.get('metric')), t.get('metric'))}, "
            f"{t.get('attribute')}: {t.get('group_a')} − {t.get('group_b')}"
        )
        plots.append(
            {
                "title": title,
                "svg": Markup(
                    null_histogram_svg(title, h["edges"], h["counts"], h.get("observed"))
                ),
            }
        )
    skipped = [
        str(x) if not isinstance(x, dict) else short_json(x, 200)
        for x in details.get("skipped") or []
    ]
    return {
        "studentize": str(details.get("studentize") or DASH),
        "scheme": str(details.get("scheme") or DASH),
        "alternative": str(details.get("alternative") or DASH),
        "rows": rows,
        "plots": plots,
        "n_tests": len(tests),
        "skipped": skipped,
    }


def with_interval(r: dict[str, Any], fmt: Callable[[Any], str] = fmt_rate) -> str:
    """``estimate [low, high]`` of a ``{"estimate", "low", "high"}`` dict."""
    return f"{fmt(r.get('estimate'))} {fmt_interval(r.get('low'), r.get('high'), fmt)}"


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
    :data:`~tasks.report_plots.MAX_PLOT_GROUPS` groups. ``None`` without groups."""
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


def group_metrics_view(method: dict[str, Any]) -> dict[str, Any]:
    """Per attribute (and the intersection): group rates and performance with intervals (and a
    base-rate vs positive-rate plot), pairwise gaps and ratios with the four-fifths flag,
    distances from the reference, and the inequality indices over each benefit vector."""
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


def individual_fairness_view(method: dict[str, Any]) -> dict[str, Any]:
    """The two tests (loss ratio, error-rate ratio), the per-point ratio histogram, the lower
    bound as a function of the attack's steps, the points with the largest ratios and the
    per-group summary."""
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


FLIPSET_WORDS = {
    "positive": "F+ (advantaged: positive → negative)",
    "negative": "F− (disadvantaged: negative → positive)",
}


def fliptest_view(method: dict[str, Any]) -> dict[str, Any]:
    """Per group pair and direction: flipset sizes against both nulls, the transparency report
    (mean feature change with intervals, consistency, sign tests) as a table and bar chart, and
    the marginal distributions of flipset members versus their group."""
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


STRICT_VIEWS_ENV = "FAIRENGINE_STRICT_REPORT"
"""Set to 1 (the test suite does) to make a view that raises fail the report."""


class ReportViewError(RuntimeError):
    """A method's report view raised (only with :data:`STRICT_VIEWS_ENV` set)."""


def strict_views() -> bool:
    """Whether a view that raises fails the report (tests) instead of showing an error block."""
    return os.environ.get(STRICT_VIEWS_ENV, "") not in ("", "0", "false")


DETAIL_VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "fliptest": fliptest_view,
    "individual_fairness": individual_fairness_view,
    "group_metrics": group_metrics_view,
    "permutation_tests": permutation_view,
    "group_parity": group_parity_view,
    "intersectional": intersectional_view,
    "mitigation": mitigation_view,
}
"""Method name -> view builder; the template has a macro ``<name>_block`` for each."""


def method_view(method: dict[str, Any], index: int) -> dict[str, Any]:
    """The generic section of one method plus its dedicated block's view data, if any."""
    status = method.get("status") or "ok"
    name = str(method.get("method", ""))
    block: str | None = None
    view: dict[str, Any] | None = None
    warnings = [str(w) for w in method.get("warnings") or []]
    details = method.get("details") or {}
    view_error: str | None = None
    if status == "ok" and name in DETAIL_VIEWS and details:
        try:
            view = DETAIL_VIEWS[name](method)
            block = name
        except Exception as exc:
            if strict_views():  # the tests: a view that raises is a bug to fix, not to hide
                raise ReportViewError(f"the {name} view raised: {exc!r}") from exc
            # production: the report is still written, with a visible error block and the
            # method's raw details, and the error is logged
            log.error("could not draw the %s details block: %r", name, exc)
            view_error = f"{type(exc).__name__}: {exc}"
    raw_details = None
    if block is None and details:
        raw_details = json.dumps(details, indent=2, ensure_ascii=False, default=str)
        if len(raw_details) > RAW_DETAILS_LIMIT:
            raw_details = raw_details[:RAW_DETAILS_LIMIT] + "\n… (cut; see audit.json)"
    findings = [finding_view(f) for f in method.get("findings") or []]
    return {
        "method": name,
        "title": method.get("title") or name,
        "anchor": slug("method", index, name),
        "status": status,
        "status_label": STATUS_LABELS.get(status, str(status)),
        "reason": method.get("reason") or "",
        "warnings": warnings,
        "view_error": view_error,
        "seconds": fmt_seconds(method.get("seconds")),
        "parameters": [
            {"name": str(k), "value": fmt_value(v)}
            for k, v in (method.get("parameters") or {}).items()
        ],
        "findings": findings,
        "tested_findings": [f for f in findings if f["tested"]],
        "estimates": [f for f in findings if not f["tested"]],
        "n_tested": sum(1 for f in findings if f["tested"]),
        "n_rejected": sum(1 for f in findings if f["decision"] == "reject"),
        "block": block,
        "view": view,
        "raw_details": raw_details,
    }


def validation_view(validation: dict[str, Any] | None) -> dict[str, Any] | None:
    """Pre-formatted data-validation outcome (dict form); ``None`` when validation did not run."""
    if validation is None:
        return None
    rows = []
    for e in validation.get("expectations") or []:
        ok = bool(e.get("success"))
        examples = e.get("unexpected_examples") or []
        rows.append(
            {
                "success": ok,
                "status_label": "Pass" if ok else "Fail",
                "expectation": str(e.get("expectation", "")),
                "column": DASH if e.get("column") is None else str(e.get("column")),
                "description": str(e.get("description") or ""),
                "unexpected": fmt_count(e.get("unexpected_count")),
                "examples": ", ".join(short_json(x, 40) for x in examples[:5])
                + (" …" if len(examples) > 5 else ""),
                "observed": short_json(e.get("observed")),
            }
        )
    n_failed = sum(1 for r in rows if not r["success"])
    success = bool(validation.get("success"))
    return {
        "success": success,
        "status_label": "Passed" if success else "Failed",
        "engine": str(validation.get("engine") or DASH),
        "n_rows": fmt_count(validation.get("n_rows")),
        "n_expectations": len(rows),
        "n_failed": n_failed,
        "rows": rows,
    }


def header_view(d: dict[str, Any]) -> dict[str, Any]:
    """Identity of the audit: model, data, run; each item a ``{label, value, title, code}``."""
    model = d.get("model") or {}
    dataset = d.get("dataset") or {}
    meta = d.get("metadata") or {}
    roles = dataset.get("roles") or {}
    fingerprint = str(dataset.get("fingerprint") or "")

    def item(label: str, value: Any, title: str = "", code: bool = False) -> dict[str, Any]:
        return {"label": label, "value": fmt_value(value), "title": title, "code": code}

    threshold = model.get("threshold", dataset.get("threshold"))
    score_type = model.get("score_type", dataset.get("score_type"))
    if score_type == "label":
        prediction = "hard 0/1 predictions as given (no threshold; AUC-type metrics not applicable)"
    elif threshold is not None:
        prediction = f"{fmt_value(score_type)} scores, threshold {fmt_value(threshold)}"
    else:
        prediction = f"{fmt_value(score_type)} scores, no threshold (expected rates)"
    model_items = [
        item("Model", model.get("name") or "scores taken from the data"),
        item("Version", model.get("version")),
        item("Model URI", model.get("uri"), code=True),
        item("Predictions", prediction),
        item("Score source", (model.get("score_source") or {}).get("description")),
    ]
    data_items = [
        item("Dataset", dataset.get("name")),
        item("Source", dataset.get("source"), code=True),
        item("Fingerprint", fingerprint[:12] + "…" if fingerprint else None, fingerprint, True),
        item("Rows", fmt_count(dataset.get("n_rows"))),
        item("Protected", roles.get("protected")),
        item("Label / score", f"{fmt_value(roles.get('label'))} / {fmt_value(roles.get('score'))}"),
    ]
    run_items = [
        item("Date", fmt_datetime(d.get("created_at"))),
        item("Audit ID", d.get("audit_id"), code=True),
        item("FairEngine", meta.get("fairengine_version")),
        item("Seed", meta.get("seed")),
        item(
            "Significance",
            f"α = {fmt_value(d.get('alpha'))}, "
            f"{multiplicity_label(str(d.get('multiplicity')))} adjustment",
        ),
    ]
    versions = meta.get("versions") or {}
    return {
        "groups": [
            {"title": "Model", "items": model_items},
            {"title": "Data", "items": data_items},
            {"title": "Run", "items": run_items},
        ],
        "versions": [{"name": str(k), "version": fmt_value(v)} for k, v in versions.items()],
    }


def verdict_view(d: dict[str, Any]) -> dict[str, Any]:
    """The verdict banner: status word and symbol, summary and reasons."""
    v = d.get("verdict") or {}
    status = str(v.get("status", "incomplete"))
    word, symbol = VERDICT_LABELS.get(status, (status.upper(), "?"))
    return {
        "status": status if status in VERDICT_LABELS else "incomplete",
        "word": word,
        "symbol": symbol,
        "summary": str(v.get("summary") or ""),
        "reasons": [str(r) for r in v.get("reasons") or []],
    }


def config_text(config: dict[str, Any]) -> str:
    """The resolved configuration as YAML (JSON if YAML cannot represent it)."""
    try:
        return yaml.safe_dump(
            config, sort_keys=False, allow_unicode=True, default_flow_style=False, width=96
        ).rstrip()
    except yaml.YAMLError:
        return json.dumps(config, indent=2, ensure_ascii=False, default=str)


TREND_ROWS = 12
"""Findings shown in the trend table (rejections first, then by adjusted p-value)."""


def trend_view(d: dict[str, Any]) -> dict[str, Any] | None:
    """Headline estimates of this audit beside earlier audits of the same registered model.

    ``None`` when there is no earlier audit (``metadata.previous_audits`` from MLflow).
    """
    history = list((d.get("metadata") or {}).get("previous_audits") or [])
    if not history:
        return None
    history = history[::-1]  # oldest first, this audit last
    tested = [
        f
        for m in d.get("methods") or []
        if m.get("status") == "ok"
        for f in m.get("findings") or []
        if f.get("pvalue") is not None
    ]
    tested.sort(
        key=lambda f: (f.get("decision") != "reject", as_float(f.get("adjusted_pvalue") or 1.0))
    )
    columns = [
        {
            "label": f"v{h.get('model_version')}" if h.get("model_version") else DASH,
            "date": fmt_datetime(
                datetime.fromtimestamp(h["started_ms"] / 1000, UTC).isoformat()
                if h.get("started_ms")
                else None
            ),
            "verdict": str(h.get("verdict") or DASH).upper(),
        }
        for h in history
    ]
    model = d.get("model") or {}
    columns.append(
        {
            "label": f"v{model.get('version')} (this audit)"
            if model.get("version")
            else "this audit",
            "date": fmt_datetime(d.get("created_at")),
            "verdict": str((d.get("verdict") or {}).get("status", "")).upper(),
        }
    )
    rows = []
    for f in tested[:TREND_ROWS]:
        values = [fmt_number((h.get("estimates") or {}).get(f["key"])) for h in history]
        rows.append(
            {"label": f.get("label", f["key"]), "values": [*values, fmt_number(f.get("estimate"))]}
        )
    return {"columns": columns, "rows": rows, "n_previous": len(history)}


def report_context(result: AuditResult) -> dict[str, Any]:
    """Everything the template needs, as plain pre-formatted data (plus ``result``: the dict)."""
    d = result.to_dict()
    methods = [method_view(m, i) for i, m in enumerate(d["methods"])]
    ran = [m for m in methods if m["status"] == "ok"]
    verdict_rows = [f for m in ran for f in m["findings"] if f["counts"]]
    verdict_rows.sort(key=lambda f: DECISION_ORDER.get(f["decision"], 3))  # stable
    supporting_rows = [f for m in ran for f in m["findings"] if f["decision"] == "supporting"]
    decisions = d.get("decisions") or {}
    untested = sum(len(m["findings"]) - m["n_tested"] for m in ran)
    model = d.get("model") or {}
    dataset = d.get("dataset") or {}
    subject = model.get("name") or dataset.get("name") or ""
    if subject and model.get("version"):
        subject = f"{subject} v{model['version']}"
    meta = d.get("metadata") or {}
    return {
        "result": d,
        "page_title": " · ".join(
            p for p in ("FairEngine audit report", str(subject), str(d["audit_id"])) if p
        ),
        "subject": str(subject),
        "header": header_view(d),
        "verdict": verdict_view(d),
        "input_warnings": [str(w) for w in d.get("warnings") or []],
        "alpha": fmt_value(d.get("alpha")),
        "adjustment": multiplicity_label(str(d.get("multiplicity"))),
        "verdict_rows": verdict_rows,
        "supporting_rows": supporting_rows,
        "n_undetermined": sum(1 for f in verdict_rows if f["decision"] == "undetermined"),
        "gap_null": str(decisions.get("gap_null", "tolerance")),
        "resampling_risk": fmt_value(decisions.get("resampling_risk", 1e-3)),
        "resamples_drawn": f"{int(decisions.get('resamples_drawn', 0)):,}",
        "n_untested": untested,
        "methods": methods,
        "validation": validation_view(d.get("validation")),
        "trend": trend_view(d),
        "config_text": config_text(d.get("config") or {}),
        "timings": [
            {"step": str(k), "seconds": fmt_seconds(v)}
            for k, v in (meta.get("timings") or {}).items()
        ],
        "created": fmt_datetime(d.get("created_at")),
        "generated_by": f"FairEngine {fmt_value(meta.get('fairengine_version'))}",
    }


# --------------------------------------------------------------------------- rendering


def make_environment() -> Environment:
    """The report's Jinja2 environment: autoescaped, strict about undefined names."""
    return Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@functools.cache
def report_environment() -> Environment:
    """The shared environment of :func:`render_report` (made once: compiling the template
    costs about 50 ms; Jinja2 still recompiles it when the file changes on disk)."""
    return make_environment()


def render_report(result: AuditResult) -> str:
    """The audit's self-contained HTML report (one string, UTF-8 safe)."""
    template = report_environment().get_template(TEMPLATE_NAME)
    return template.render(**report_context(result))


def write_report(result: AuditResult, directory: Path) -> Path:
    """Render the report into ``directory/report.html`` (folder created) and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REPORT_FILENAME
    path.write_text(render_report(result), encoding="utf-8")
    return path


@task(name="render-report", cache_policy=NO_CACHE)
def render_report_task(result: AuditResult) -> str:
    """Prefect task around :func:`render_report`; returns the HTML string."""
    html = render_report(result)
    try:
        logger: Any = get_run_logger()
    except MissingContextError:  # called via .fn() outside a run
        logger = log
    logger.info("Rendered the audit report (%.1f KiB)", len(html.encode("utf-8")) / 1024)
    return html
