"""The challenger-vs-champion comparison page: one self-contained HTML page rendered from a
:class:`~fairengine.comparison.record.ModelComparison` (issue 20, item 3).

The page reads summary first, like the audit report (:mod:`tasks.report.page`), and uses its
stylesheet (``templates/report.css``, inlined, plus ``templates/comparison.css``). The first
screen (1,400 x 900) holds the verdict (``not_worse`` / ``worse`` / ``inconclusive``, in the
decision colours, with its summary sentence), the question it answers with α, δ and the family,
the identity of both models and of the data, the counts, and the top questions
(:data:`TOP_QUESTIONS`, ranked by :func:`question_rank`: worse first, then undetermined, then
by the largest Δ̂). Then every question grouped by attribute (closed ``<details>``), a plot of
the Δ intervals per attribute against 0 and δ, the method in words and the warnings.

Group and attribute names are user data: the template is autoescaped and the plots'
text is XML-escaped by matplotlib's SVG backend. No scripts; the only unescaped markup is the
SVG made here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from fairengine.comparison.record import ModelComparison
from fairengine.comparison.result import ComparisonQuestion, ComparisonResult
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_datetime,
    fmt_interval,
    fmt_number,
    fmt_pvalue,
    fmt_value,
    slug,
)
from tasks.report.page import make_environment
from tasks.report.plots import (
    DECISION_COLORS,
    FIGURE_WIDTH,
    FONT,
    LINE,
    MUTED,
    Tooltips,
    alt_number,
    bottom_margin,
    draw_axis,
    draw_heading,
    draw_row_labels,
    figure_svg,
    label_width,
    new_figure,
    offset_by,
    place_axes,
    plan_heading,
    row_labels,
    row_pitch,
    value_span,
    x_layout,
)

TEMPLATE_NAME = "comparison.html.j2"
COMPARISON_FILENAME = "comparison.html"
TOP_QUESTIONS = 8
"""Questions in the summary's top-questions table (the rest: in the full table)."""
PLOT_ROWS = 30
"""At most this many questions per attribute are drawn (the highest ranked); the table lists
them all."""

VERDICT_VIEW: dict[str, tuple[str, str, str]] = {  # status -> (word, symbol, banner class)
    "not_worse": ("NOT WORSE", "✓", "pass"),
    "worse": ("WORSE", "✗", "fail"),
    "inconclusive": ("INCONCLUSIVE", "?", "incomplete"),
}
"""The verdict's word, symbol and colour (the audit's pass / fail / incomplete banners)."""


@dataclass(frozen=True)
class _Decision:
    """How a question's decision is shown: label, short label, the audit's CSS decision class
    (so the colours are the audit report's), a symbol, its rank in the tables and its
    matplotlib marker in the plot."""

    label: str
    short: str
    css: str
    mark: str
    rank: int
    marker: str


DECISIONS: dict[str, _Decision] = {
    "worse": _Decision("Worse", "Worse", "reject", "✗", 0, "s"),
    "undetermined": _Decision("Undetermined", "Undetermined", "undetermined", "?", 1, "D"),
    "undetermined (Monte-Carlo resolution)": _Decision(
        "Undetermined (Monte-Carlo resolution)", "Undetermined (MC)", "undetermined", "?", 1, "D"
    ),
    "not_worse": _Decision("Not worse", "Not worse", "fail_to_reject", "✓", 2, "o"),
    "not_tested": _Decision("Not tested", "Not tested", "not_tested", "–", 3, ""),
}
METRIC_LABELS: dict[str, str] = {
    "selection_rate": "Selection rate",
    "tpr": "TPR",
    "fpr": "FPR",
}
_INTERVAL_NOTE = re.compile(r"\s*\(Δ = \|g_cand\| − \|g_base\| in \[[^\]]*\]\)")


def _decision(q: ComparisonQuestion) -> _Decision:
    return DECISIONS.get(q.decision, DECISIONS["undetermined"])


def question_rank(q: ComparisonQuestion) -> tuple[int, float, float]:
    """Sort key of the tables: worse first, then undetermined, then not worse, then not
    tested; within each, the largest Δ̂ first (then the largest upper bound U)."""
    d = -q.difference if math.isfinite(q.difference) else math.inf
    u = -q.high if math.isfinite(q.high) else math.inf
    return (_decision(q).rank, d, u)


def question_view(q: ComparisonQuestion) -> dict[str, Any]:
    """One question, pre-formatted for the tables."""
    d = _decision(q)
    tested = q.decision != "not_tested"
    metric = METRIC_LABELS.get(q.metric, q.metric)
    groups = f"{q.group_a} − {q.group_b}"
    return {
        "key": q.question,
        "metric": metric,
        "attribute": q.attribute,
        "groups": groups,
        "label": f"{metric} gap, {q.attribute}: {groups}",
        "n": f"{fmt_count(q.n_a)} / {fmt_count(q.n_b)}",
        "gap_baseline": fmt_number(q.gap_baseline),
        "gap_candidate": fmt_number(q.gap_candidate),
        "difference": fmt_number(q.difference),
        "interval": fmt_interval(q.low, q.high) if tested else DASH,
        "p_not_worse": fmt_pvalue(q.pvalue_not_worse) if tested else DASH,
        "p_worse": fmt_pvalue(q.pvalue_worse) if tested else DASH,
        "decision": q.decision,
        "css": d.css,
        "decision_label": d.label,
        "decision_short": d.short,
        "mark": d.mark,
        "reading": q.reading,
        "short_reading": _INTERVAL_NOTE.sub("", q.reading),
    }


def questions_by_attribute(result: ComparisonResult) -> list[dict[str, Any]]:
    """Every question grouped by attribute (in the result's order), each group ranked by
    :func:`question_rank`, with its counts."""
    groups: dict[str, list[ComparisonQuestion]] = {}
    for q in result.questions:
        groups.setdefault(q.attribute, []).append(q)
    out = []
    for i, (name, members) in enumerate(groups.items()):
        ranked = sorted(members, key=question_rank)
        counts: dict[str, int] = {}
        for q in ranked:
            short = _decision(q).short.split(" (")[0]
            counts[short] = counts.get(short, 0) + 1
        out.append(
            {
                "name": name,
                "anchor": slug("questions", i, name),
                "rows": [question_view(q) for q in ranked],
                "n": len(ranked),
                "summary": ", ".join(f"{n} {label.lower()}" for label, n in counts.items()),
            }
        )
    return out


# --------------------------------------------------------------------------- the plot


_PLOT_CLASSES = ("worse", "undetermined", "not_worse")


def _plot_class(decision: str) -> str:
    """The plot's class of a decision: ``worse``, ``undetermined`` (either kind) or
    ``not_worse``."""
    return decision if decision in ("worse", "not_worse") else "undetermined"


def _reference_labels(
    x0: float, x1: float, left: float, right: float, delta: float
) -> list[tuple[float, str, str, int]]:
    """Where the labels of the lines at 0 and δ go above the axes: ``(x, text, ha, line)``.
    "0" is centred on its line; "δ = …" sits right of its line, or left of it where the
    figure's edge is too close; where the two would overlap, "0" moves one line up."""
    axes_w = max(FIGURE_WIDTH - min(left, 0.6 * FIGURE_WIDTH) - right, 0.1 * FIGURE_WIDTH)

    def units(x: float) -> float:  # from the axes' left edge
        return (x - x0) / (x1 - x0) * axes_w

    text = f"δ = {delta:g}"
    w_d, w_0 = label_width(text), label_width("0")
    at_d, at_0 = units(delta), units(0.0)
    if at_d + 2 + w_d <= axes_w + right - 2:
        ha, d_lo, d_hi = "left", at_d, at_d + 2 + w_d
    else:
        ha, d_lo, d_hi = "right", at_d - 2 - w_d, at_d
    overlap = at_0 + w_0 / 2 + 3 > d_lo and at_0 - w_0 / 2 - 3 < d_hi
    return [(0.0, "0", "center", 1 if overlap else 0), (delta, text, ha, 0)]


def delta_intervals_svg(
    attribute: str, questions: Sequence[ComparisonQuestion], delta: float, alpha: float
) -> str:
    """A forest plot of Δ = |g_cand| − |g_base| for the tested ``questions`` of one
    ``attribute``: one row per question (metric and pair of groups), its simultaneous
    (1 − α) interval [L, U] and Δ̂, coloured and marked by its decision (the audit's
    decision colours, Okabe–Ito: worse vermillion squares, undetermined orange diamonds, not
    worse bluish-green dots), against a solid line at 0 and a dashed line at δ, each labelled
    at the top. Same sizes and fonts as :mod:`tasks.report.plots` (no text under 11 px at
    300 px). Returns an inline ``<svg>`` with ``role="img"`` and alt text."""
    rows = [q for q in questions if q.decision != "not_tested"][:PLOT_ROWS]
    n = len(rows)
    tips = Tooltips()
    labels = [f"{METRIC_LABELS.get(q.metric, q.metric)}: {q.group_a} − {q.group_b}" for q in rows]
    values = [v for q in rows for v in (q.low, q.high, q.difference)] + [0.0, delta]
    x0, x1 = value_span(values, minimum=1e-6)
    fitted, label_w, label_lines = row_labels(labels)
    pitch = row_pitch(label_lines)
    # one class per colour: both kinds of undetermined are drawn (and keyed) as one
    kinds = {q.decision: _plot_class(q.decision) for q in rows}
    present = [c for c in _PLOT_CLASSES if c in kinds.values()]
    key = [(DECISIONS[c].short, DECISION_COLORS[DECISIONS[c].css], DECISIONS[c].marker)
           for c in present]  # fmt: skip
    level = f"{1 - alpha:.0%}"
    title = f"{attribute}: Δ = |g_cand| − |g_base| with simultaneous {level} bounds"
    head = plan_heading(title, key)
    ticks, left, right = x_layout(x0, x1, label_w + 10)
    refs = _reference_labels(x0, x1, left, right, delta)
    refs_h = (max(r[3] for r in refs) + 1) * LINE * FONT + 2  # above the axes
    top = head.height + refs_h
    bottom = bottom_margin()
    fig, ax = new_figure(top + pitch * max(n, 1) + bottom)

    ys = [n - 1 - i for i in range(n)]
    for c in present:
        idx = [i for i, q in enumerate(rows) if kinds[q.decision] == c]
        color = DECISION_COLORS[DECISIONS[c].css]
        spans = [i for i in idx if math.isfinite(rows[i].low) and math.isfinite(rows[i].high)]
        if spans:
            ax.hlines(
                [ys[i] for i in spans],
                [rows[i].low for i in spans],
                [rows[i].high for i in spans],
                color=color,
                linewidth=2.0,
            )
        points = [i for i in idx if math.isfinite(rows[i].difference)]
        if points:
            ax.plot(
                [rows[i].difference for i in points],
                [ys[i] for i in points],
                DECISIONS[c].marker,
                color=color,
                markersize=5,
                markeredgecolor="white",
                markeredgewidth=0.6,
            )
    ax.axvline(0.0, color=MUTED, linewidth=1.0, zorder=0.5)
    ax.axvline(delta, color=MUTED, linestyle="--", linewidth=1.0, zorder=0.5)
    ax.set_ylim(-0.5, max(n, 1) - 0.5)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=True)
    tr = ax.get_xaxis_transform()
    for x, text, ha, line in refs:
        dx = {"left": 2.0, "right": -2.0, "center": 0.0}[ha]
        ax.text(
            x,
            1,
            text,
            transform=offset_by(fig, tr, dx=dx, dy=2 + line * LINE * FONT),
            ha=ha,
            va="bottom",
            fontsize=FONT,
            color=MUTED,
            clip_on=False,
            parse_math=False,
        )
    if n:
        draw_row_labels(fig, ax, ys, fitted, labels, tips)
    else:
        ax.text(
            0.5,
            0.5,
            "no tested question",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=FONT,
            color=MUTED,
        )
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=top, right=right)

    counts = ", ".join(
        f"{sum(kinds[q.decision] == c for q in rows)} {DECISIONS[c].short.lower()}" for c in present
    )
    alt = (
        f"{title}. Interval plot, {n} question(s) of {attribute}"
        + (f" ({counts})" if counts else "")
        + f"; solid line at 0 (no change), dashed line at the margin δ = {alt_number(delta)}."
    )
    if rows:
        top_q = max(rows, key=lambda q: q.high if math.isfinite(q.high) else -math.inf)
        alt += f" Highest upper bound: {labels[rows.index(top_q)]}, U = {alt_number(top_q.high)}."
    skipped = sum(q.decision != "not_tested" for q in questions) - n
    if skipped > 0:
        alt += f" {skipped} further question(s) not drawn."
    return figure_svg(fig, f"fairengine-comparison-{slug(attribute)}", alt, tips.texts)


def plot_views(result: ComparisonResult) -> list[dict[str, Any]]:
    """One plot per attribute with a tested question: ``{attribute, svg, n, n_drawn}``."""
    by: dict[str, list[ComparisonQuestion]] = {}
    for q in result.questions:
        by.setdefault(q.attribute, []).append(q)
    out = []
    for attribute, qs in by.items():
        tested = sorted((q for q in qs if q.decision != "not_tested"), key=question_rank)
        if not tested:
            continue
        svg = delta_intervals_svg(attribute, tested, result.delta, result.alpha)
        out.append(
            {
                "attribute": attribute,
                "svg": Markup(svg),
                "n": len(tested),
                "n_drawn": min(len(tested), PLOT_ROWS),
            }
        )
    return out


# --------------------------------------------------------------------------- the page


def method_view(result: ComparisonResult) -> dict[str, Any]:
    """The method in words: its one-line description and the resampling diagnostics."""
    d = result.diagnostics
    n_tested = sum(q.decision != "not_tested" for q in result.questions)
    return {
        "confidence_method": result.confidence_method,
        "n_tested": n_tested,
        "n_contrasts": 4 * n_tested,
        "level": f"{1 - result.alpha:.0%}",
        "items": [
            {"label": "Resamples used (B)", "value": fmt_count(d.n_resamples)},
            {"label": "Resamples drawn", "value": fmt_count(d.n_drawn)},
            {"label": "Left out (a tested rate undefined)", "value": fmt_count(d.n_undefined)},
            {"label": "Looks (cumulative draws)", "value": fmt_value(list(d.looks))},
            {"label": "maxT critical value q", "value": fmt_number(d.quantile)},
            {
                "label": "Monte-Carlo interval of q",
                "value": fmt_interval(d.quantile_low, d.quantile_high),
            },
            {
                "label": "First look / growth",
                "value": f"{d.resampling.first:,} / ×{d.resampling.growth:g}",
            },
            {
                "label": "Resample cap (max_resamples)",
                "value": fmt_count(d.resampling.max_resamples),
            },
            {"label": "Resampling risk ε", "value": fmt_value(d.resampling.risk)},
            {"label": "Seed", "value": fmt_value(d.seed)},
        ],
    }


def _fairengine_version() -> str:
    try:
        return importlib.metadata.version("fairengine")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def comparison_context(comparison: ModelComparison) -> dict[str, Any]:
    """Everything ``comparison.html.j2`` needs, as plain pre-formatted data."""
    c = comparison
    r = c.result
    v = c.verdict
    word, symbol, banner = VERDICT_VIEW.get(v.status, ("INCONCLUSIVE", "?", "incomplete"))
    ranked = sorted(r.questions, key=question_rank)
    tested = [q for q in ranked if q.decision != "not_tested"]
    models = [
        {
            "role": role,
            "label": m.label,
            "uri": m.uri or DASH,
            "score_source": m.score_source,
            "name": fmt_value(m.name),
            "version": fmt_value(m.version),
        }
        for role, m in (("Baseline", c.baseline), ("Candidate", c.candidate))
    ]
    return {
        "page_title": " · ".join(
            ("FairEngine comparison", f"{c.candidate.label} vs {c.baseline.label}", c.comparison_id)
        ),
        "subject": f"{c.candidate.label} (candidate) vs {c.baseline.label} (baseline)",
        "models": models,
        "data_source": c.data_source,
        "n_rows": fmt_count(c.n_rows),
        "created": fmt_datetime(c.created_at),
        "comparison_id": c.comparison_id,
        "verdict": {
            "status": v.status,
            "banner": banner,
            "word": word,
            "symbol": symbol,
            "summary": (v.summary[:1].upper() + v.summary[1:]).rstrip("."),
        },
        "counts": [
            {"css": "fail_to_reject", "count": f"{v.n_not_worse:,}", "label": "not worse"},
            {"css": "reject", "count": f"{v.n_worse:,}", "label": "worse"},
            {"css": "undetermined", "count": f"{v.n_undetermined:,}", "label": "undetermined"},
            {"css": "not_tested", "count": f"{v.n_not_tested:,}", "label": "not tested"},
        ],
        "alpha": f"{r.alpha:g}",
        "delta": f"{r.delta:g}",
        "level": f"{1 - r.alpha:.0%}",
        "n_questions": len(r.questions),
        "n_tested": len(tested),
        "top_questions": [question_view(q) for q in tested[:TOP_QUESTIONS]],
        "n_more": max(len(tested) - TOP_QUESTIONS, 0),
        "question_groups": questions_by_attribute(r),
        "plots": plot_views(r),
        "method": method_view(r),
        "warnings": [str(w) for w in (*c.warnings, *r.warnings)],
        "generated_by": f"FairEngine {_fairengine_version()}",
    }


@functools.cache
def comparison_environment() -> Any:
    """The audit report's Jinja2 environment (autoescaped, strict), made once."""
    return make_environment()


def render_comparison(comparison: ModelComparison) -> str:
    """The comparison's self-contained HTML page (one string, no scripts)."""
    template = comparison_environment().get_template(TEMPLATE_NAME)
    return str(template.render(**comparison_context(comparison)))


def write_comparison_report(comparison: ModelComparison, directory: Path) -> Path:
    """Render the page into ``directory/comparison.html`` (folder created); its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / COMPARISON_FILENAME
    path.write_text(render_comparison(comparison), encoding="utf-8")
    return path
