"""Small matplotlib figures for the HTML report, returned as inline SVG strings.

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, so no global
figure registry and no GUI backend is ever touched; the figure is released when this module is
done with it) and saved as SVG with ``svg.fonttype="none"``: text stays text, so it is small,
searchable and takes the report's font. The XML prolog, DOCTYPE and the per-element ids that
matplotlib numbers the same way in every figure are stripped, so several SVGs can sit inline in
one HTML document. Every text matplotlib writes is XML-escaped by its SVG backend; group names
are drawn with ``parse_math=False`` (a ``$`` in a name is not mathtext).
"""

from __future__ import annotations

import io
import itertools
import math
import re
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, StrMethodFormatter

RATE_LABELS: dict[str, str] = {
    "positive_rate": "Positive-prediction rate",
    "tpr": "True-positive rate (TPR)",
    "fpr": "False-positive rate (FPR)",
}
"""Human-readable names of the per-group rates of ``group_parity``."""

RATE_COLORS: dict[str, str] = {
    "positive_rate": "#2f5d8a",
    "tpr": "#1f7a5a",
    "fpr": "#a4502a",
}

MAX_PLOT_GROUPS = 30
"""At most this many groups are drawn (the largest by ``n``); the table lists them all."""

MAX_LABEL_CHARS = 22
SVG_SIZE_BUDGET = 40_000
"""Bytes; a single plot is expected to stay below this (checked by the tests)."""

_PROLOG = re.compile(r"^\s*<\?xml[^>]*\?>\s*", re.S)
_DOCTYPE = re.compile(r"<!DOCTYPE[^>]*>\s*", re.S)
_AUTO_IDS = re.compile(r'\s+id="(?:[A-Za-z][A-Za-z0-9.]*_\d+)"')
_FONT_FAMILY = re.compile(r"\s*font-family:[^;\"]*;?")
_COMMENTS = re.compile(r"<!--.*?-->", re.S)
_NO_ROTATION = re.compile(r'\s+transform="rotate\(-?0 [^")]*\)"')


def as_float(value: Any) -> float:
    """A float from a result value: numbers, ``"NaN"``/``"Infinity"`` strings, ``None`` -> NaN."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        try:
            return float(value)  # accepts "NaN", "Infinity", "-Infinity"
        except ValueError:
            return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def plot_label(text: Any, limit: int = MAX_LABEL_CHARS) -> str:
    """``text`` as a string shortened to ``limit`` characters (with an ellipsis)."""
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def clean_svg(svg: str) -> str:
    """Strip the XML prolog, DOCTYPE, comments, per-figure numbered ids, font families
    and identity rotations.

    Hash-based ids that ``clip-path``/``xlink:href`` refer to are kept (they are made unique per
    figure by ``svg.hashsalt``); the font family is left to the surrounding page's CSS.
    """
    svg = _PROLOG.sub("", svg)
    svg = _DOCTYPE.sub("", svg)
    svg = _COMMENTS.sub("", svg)
    svg = _AUTO_IDS.sub("", svg)
    svg = _FONT_FAMILY.sub("", svg)
    svg = _NO_ROTATION.sub("", svg)
    return svg.strip()


def _figure_svg(fig: Figure, salt: str) -> str:
    """Render ``fig`` to a cleaned inline SVG string."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(
            buf,
            format="svg",
            metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
        )
    return clean_svg(buf.getvalue())


def _blank_figure(width: float, height: float) -> tuple[Figure, Any]:
    """A transparent figure with one transparent axes (no pyplot; 72 dpi)."""
    fig = Figure(figsize=(width, height), dpi=72)
    fig.patch.set_alpha(0.0)
    ax = fig.add_subplot()
    ax.set_facecolor("none")
    return fig, ax


def _style_row_axes(ax: Any) -> None:
    """Rows of points with intervals: light x grid, unmarked y ticks, bottom spine only."""
    ax.tick_params(axis="x", labelsize=7.5, colors="#374151")
    ax.tick_params(axis="y", length=0, colors="#111827")
    ax.grid(axis="x", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color("#9ca3af")


def _largest_groups(groups: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` groups with the most rows, in their original order."""
    if len(groups) <= limit:
        return list(groups)
    ranked = sorted(range(len(groups)), key=lambda i: -as_float(groups[i].get("n", 0)))
    keep = sorted(ranked[:limit])
    return [groups[i] for i in keep]


def group_rates_svg(attr: str, groups: list[dict[str, Any]], rate: str) -> str:
    """A dot plot of one rate per group of ``attr``, with its interval as an error bar.

    ``groups`` is ``details["attributes"][attr]["groups"]`` of a ``group_parity`` result (dict
    form: values may be the strings ``"NaN"``/``"Infinity"``); ``rate`` is ``positive_rate``,
    ``tpr`` or ``fpr``. Undefined estimates are marked "undefined" instead of drawn; an
    undefined interval draws the point alone. At most :data:`MAX_PLOT_GROUPS` (the largest)
    groups are drawn. Returns an ``<svg>`` element without XML prolog or DOCTYPE.
    """
    shown = _largest_groups(groups, MAX_PLOT_GROUPS)
    n = len(shown)
    color = RATE_COLORS.get(rate, "#444444")
    title = RATE_LABELS.get(rate, rate)

    est: list[float] = []
    low: list[float] = []
    high: list[float] = []
    for g in shown:
        r = (g.get("rates") or {}).get(rate) or {}
        e = as_float(r.get("estimate"))
        lo = as_float(r.get("low"))
        hi = as_float(r.get("high"))
        est.append(e)
        low.append(lo if math.isfinite(lo) else e)
        high.append(hi if math.isfinite(hi) else e)

    finite = [v for v in (*est, *low, *high) if math.isfinite(v)]
    if finite:
        lo_lim, hi_lim = min(finite), max(finite)
        span = max(hi_lim - lo_lim, 0.1)
        pad = 0.08 * span
        x0 = max(0.0, lo_lim - pad)
        x1 = min(1.0, hi_lim + pad)
        if x1 - x0 < 0.1:  # keep a readable minimum width inside [0, 1]
            mid = (x0 + x1) / 2
            x0, x1 = max(0.0, mid - 0.05), min(1.0, mid + 0.05)
    else:
        x0, x1 = 0.0, 1.0

    height = 0.75 + 0.26 * max(n, 1)
    fig, ax = _blank_figure(3.6, height)
    ys = list(range(n))[::-1]  # first group on top
    for y, e, lo, hi in zip(ys, est, low, high, strict=True):
        if math.isfinite(e):
            ax.errorbar(
                [e],
                [y],
                xerr=[[max(e - lo, 0.0)], [max(hi - e, 0.0)]],
                fmt="o",
                color=color,
                ecolor=color,
                elinewidth=1.6,
                capsize=3,
                markersize=5,
            )
        else:
            ax.text(
                x0 + 0.02 * (x1 - x0),
                y,
                "undefined",
                va="center",
                ha="left",
                fontsize=8,
                fontstyle="italic",
                color="#6b7280",
                parse_math=False,
            )
    ax.set_yticks(ys, [plot_label(g.get("group", "")) for g in shown], fontsize=8, parse_math=False)
    ax.set_ylim(-0.7, n - 0.3 if n else 0.7)
    ax.set_xlim(x0, x1)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    _style_row_axes(ax)
    suffix = f" (largest {n} of {len(groups)} groups)" if n < len(groups) else ""
    ax.set_title(
        f"{title} by {plot_label(attr, 30)}{suffix}", fontsize=9, loc="left", parse_math=False
    )
    fig.tight_layout(pad=0.4)
    return _figure_svg(fig, salt=f"fairengine-{attr}-{rate}")


def interval_forest_svg(
    title: str,
    labels: list[str],
    series: list[dict[str, Any]],
    *,
    reference: float | None = None,
    salt: str = "forest",
) -> str:
    """A forest plot: one row per label, one interval (and point) per series on each row.

    ``series`` items: ``{"name", "color", "estimate": [...], "low": [...], "high": [...]}``
    (lists aligned with ``labels``; ``estimate`` may be omitted for an interval alone).
    Non-finite values are skipped. ``reference`` draws a vertical line (e.g. a target).
    Several series on a row are offset vertically, with a legend. Returns an inline ``<svg>``.
    """
    n = len(labels)
    k = max(len(series), 1)
    values = [
        v
        for s in series
        for key in ("estimate", "low", "high")
        for v in (as_float(x) for x in s.get(key) or [])
        if math.isfinite(v)
    ]
    if reference is not None:
        values.append(reference)
    x0, x1 = (min(values), max(values)) if values else (0.0, 1.0)
    pad = 0.08 * max(x1 - x0, 1e-9)
    x0, x1 = x0 - pad, x1 + pad
    if x1 - x0 < 1e-6:
        x0, x1 = x0 - 0.5, x1 + 0.5
    fig, ax = _blank_figure(5.4, 0.9 + 0.32 * max(n, 1) * (1 + 0.35 * (k - 1)))
    step = 0.6 / k
    for j, s in enumerate(series):
        offset = (j - (k - 1) / 2) * step
        est = [as_float(x) for x in s.get("estimate") or [math.nan] * n]
        low = [as_float(x) for x in s.get("low") or [math.nan] * n]
        high = [as_float(x) for x in s.get("high") or [math.nan] * n]
        for i in range(n):
            y = (n - 1 - i) - offset
            if math.isfinite(low[i]) and math.isfinite(high[i]):
                ax.plot([low[i], high[i]], [y, y], color=s["color"], linewidth=2.0)
            if math.isfinite(est[i]):
                ax.plot([est[i]], [y], "o", color=s["color"], markersize=4.5)
        ax.plot([], [], color=s["color"], linewidth=2.0, label=str(s["name"]))
    if reference is not None:
        ax.axvline(reference, color="#6b7280", linestyle="--", linewidth=1)
    ax.set_yticks(
        list(range(n))[::-1], [plot_label(x, 30) for x in labels], fontsize=8, parse_math=False
    )
    ax.set_ylim(-0.7, n - 0.3 if n else 0.7)
    ax.set_xlim(x0, x1)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
    _style_row_axes(ax)
    if len(series) > 1:
        ax.legend(fontsize=7.5, frameon=False, loc="lower right")
    ax.set_title(plot_label(title, 70), fontsize=9, loc="left", parse_math=False)
    fig.tight_layout(pad=0.4)
    return _figure_svg(fig, salt=f"fairengine-{salt}")


def null_histogram_svg(
    title: str,
    edges: list[Any],
    counts: list[Any],
    observed: Any,
    marker_label: str = "observed",
) -> str:
    """A histogram (e.g. a permutation distribution) with one value marked (the observed
    statistic, a tolerance δ, …) and labelled ``marker_label``.

    ``edges`` has one more entry than ``counts``. A marked value outside the histogram's range
    is drawn at the nearer edge with an arrow and its value, so it is never lost.
    """
    e = [as_float(x) for x in edges]
    c = [as_float(x) for x in counts]
    obs = as_float(observed)
    fig, ax = _blank_figure(3.6, 1.9)
    if len(e) == len(c) + 1 and c:
        widths = [b - a for a, b in itertools.pairwise(e)]
        ax.bar(
            e[:-1],
            c,
            width=widths,
            align="edge",
            color="#9db4cc",
            edgecolor="#2f5d8a",
            linewidth=0.4,
        )
        lo, hi = e[0], e[-1]
        if math.isfinite(obs):
            inside = lo <= obs <= hi
            x = obs if inside else (hi if obs > hi else lo)
            ax.axvline(x, color="#a4502a", linewidth=1.6)
            arrow = "" if inside else (" →" if obs > hi else " ←")
            label = f"{marker_label} {obs:.3g}{arrow}"
            ax.text(
                x,
                max(c) * 0.95 if max(c) > 0 else 1,
                label,
                color="#a4502a",
                fontsize=7.5,
                ha="right" if x >= (lo + hi) / 2 else "left",
                va="top",
                parse_math=False,
            )
    ax.tick_params(axis="both", labelsize=7, colors="#374151")
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color("#9ca3af")
    ax.set_title(plot_label(title, 60), fontsize=8.5, loc="left", parse_math=False)
    fig.tight_layout(pad=0.4)
    return _figure_svg(fig, salt=f"fairengine-null-{title}")


def curve_svg(
    title: str,
    x: list[Any],
    series: list[dict[str, Any]],
    *,
    xlabel: str = "",
    hline: float | None = None,
    hline_label: str = "",
) -> str:
    """Lines over a common x (``series`` items: ``{"name", "color", "values"}``), with an
    optional horizontal reference line (e.g. the tolerance δ)."""
    xs = [as_float(v) for v in x]
    fig, ax = _blank_figure(4.2, 2.2)
    for s in series:
        ax.plot(
            xs,
            [as_float(v) for v in s["values"]],
            color=s["color"],
            linewidth=1.6,
            marker="o",
            markersize=2.5,
            label=str(s["name"]),
        )
    if hline is not None:
        ax.axhline(hline, color="#6b7280", linestyle="--", linewidth=1)
        if hline_label:
            ax.text(
                xs[0] if xs else 0,
                hline,
                f" {hline_label}",
                fontsize=7,
                va="bottom",
                color="#6b7280",
                parse_math=False,
            )
    ax.tick_params(axis="both", labelsize=7, colors="#374151")
    ax.grid(color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=7.5, parse_math=False)
    if len(series) > 1:
        ax.legend(fontsize=7, frameon=False)
    ax.set_title(plot_label(title, 60), fontsize=8.5, loc="left", parse_math=False)
    fig.tight_layout(pad=0.4)
    return _figure_svg(fig, salt=f"fairengine-curve-{title}")


def marginal_overlay_svg(title: str, edges: list[Any], series: list[dict[str, Any]]) -> str:
    """Binned marginal distributions drawn as normalised step lines on shared bins
    (``series`` items: ``{"name", "color", "counts"}``), e.g. a group versus its flipset."""
    e = [as_float(x) for x in edges]
    fig, ax = _blank_figure(3.4, 1.9)
    for s in series:
        c = [as_float(x) for x in s["counts"]]
        total = sum(x for x in c if math.isfinite(x))
        if total <= 0 or len(e) != len(c) + 1:
            continue
        ax.stairs(
            [x / total for x in c],
            e,
            color=s["color"],
            linewidth=1.6,
            label=f"{s['name']} (n={total:,.0f})",
        )
    ax.tick_params(axis="both", labelsize=7, colors="#374151")
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=6.5, frameon=False)
    ax.set_title(plot_label(title, 50), fontsize=8.5, loc="left", parse_math=False)
    fig.tight_layout(pad=0.4)
    return _figure_svg(fig, salt=f"fairengine-marginal-{title}")
