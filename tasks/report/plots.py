"""Small matplotlib figures for the HTML report, returned as inline SVG strings.

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, so no global
figure registry and no GUI backend is ever touched; the figure is released when this module is
done with it) and saved as SVG with ``svg.fonttype="none"``: text stays text, so it is small,
searchable and takes the report's font. The XML prolog, DOCTYPE and the per-element ids that
matplotlib numbers the same way in every figure are stripped, so several SVGs can sit inline in
one HTML document. Every text matplotlib writes is XML-escaped by its SVG backend; group names
are drawn with ``parse_math=False`` (a ``$`` in a name is not mathtext).

Speed. A full every-method report draws about 50 figures and must render in well under 2 s
(``benchmarks/report_render.py``), so each figure is kept to a few artists:

* margins are set from estimated text widths (:func:`_place`) instead of ``tight_layout``, which
  measures every text by drawing the figure an extra time (and then makes ``savefig`` draw once
  more). The SVG keeps text as text and the browser draws it in the page's font, so matplotlib's
  measurements were estimates of the final widths anyway;
* axes draw no matplotlib ``Tick`` objects (five artists each, about 1.3 ms per tick): tick
  marks are one marker line, grid lines one collection and each label one text
  (:func:`_value_axis`, :func:`_category_labels`); legends are coloured text lines beside the
  title (:func:`_heading`);
* repeated marks are single artists: one ``errorbar`` call, one ``hlines`` collection per
  series, filled ``stairs`` instead of one bar patch per histogram bin.

Measured on the full report (51 figures, ``benchmarks/results/report_render.md``): about 19 ms
of CPU per figure, 2.9x less than with ``tight_layout``, tick objects and legends.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.markers import TICKDOWN, TICKLEFT
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

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

PT = 1 / 72
"""Inches per point."""
TICK_SPACE = 7.0
"""Points between an axis and its tick labels (tick length 3.5 plus pad 3.5)."""
TICK_LENGTH = 3.5
INK = "#374151"
"""Tick labels and secondary text."""
LABEL_INK = "#111827"
"""Category labels (group names, metric names)."""
AXIS_COLOR = "#9ca3af"
GRID_COLOR = "#e5e7eb"
MUTED = "#6b7280"

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


# --------------------------------------------------------------------------- layout helpers


@functools.cache
def _font() -> Any:
    """matplotlib's bundled DejaVu Sans at 1 em = 72 px (for advance widths)."""
    from matplotlib import font_manager, ft2font

    font = ft2font.FT2Font(font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans")))
    font.set_size(72, 72)
    return font


@functools.cache
def _glyph_em(char: str) -> float:
    """Advance width of ``char`` in ems in DejaVu Sans (0.6 when it cannot be read)."""
    try:
        return _font().load_char(ord(char)).horiAdvance / 64 / 72
    except (RuntimeError, OSError, ValueError):
        return 0.6


def text_width(text: str, fontsize: float) -> float:
    """Estimated width of ``text`` in inches at ``fontsize`` points: the sum of its glyphs'
    advance widths in DejaVu Sans (no kerning). The browser draws SVG text in the page's font;
    DejaVu Sans is the widest common sans-serif, so the estimate errs on the roomy side."""
    return sum(_glyph_em(ch) for ch in text) * fontsize * PT


def tick_values(lo: float, hi: float, nbins: int = 5) -> list[float]:
    """'Nice' tick positions inside ``[lo, hi]`` (matplotlib's :class:`MaxNLocator`)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return []
    values = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    tol = 1e-9 * (hi - lo)
    return [float(v) for v in values if lo - tol <= v <= hi + tol]


def tick_text(value: float) -> str:
    """A tick label: shortest form (``0.25``, ``-10``, ``1e-05``) with a typographic minus."""
    v = round(value, 12)
    return "0" if v == 0 else f"{v:g}".replace("-", "−")


def _offset(fig: Figure, transform: Any, dx: float = 0.0, dy: float = 0.0) -> Any:
    """``transform`` shifted by (``dx``, ``dy``) points."""
    return transform + ScaledTranslation(dx * PT, dy * PT, fig.dpi_scale_trans)


def _value_axis(
    fig: Figure,
    ax: Any,
    which: str,
    lo: float,
    hi: float,
    *,
    fontsize: float = 7.5,
    nbins: int = 5,
    grid: bool = False,
) -> float:
    """A numeric axis on the bottom (``which="x"``) or left (``"y"``) of ``ax`` over
    ``[lo, hi]``: limits fixed, tick marks as one marker line, optional grid lines as one
    collection, one text per label. Returns the widest label's estimated width (inches)."""
    values = tick_values(lo, hi, nbins)
    labels = [tick_text(v) for v in values]
    if which == "x":
        ax.set_xlim(lo, hi)
        ax.set_xticks([])
        tr = ax.get_xaxis_transform()  # x: data, y: axes
        if grid and values:
            ax.vlines(values, 0, 1, transform=tr, colors=GRID_COLOR, linewidth=0.8, zorder=0)
        ax.plot(values, [0.0] * len(values), transform=tr, marker=TICKDOWN, **_TICK_STYLE)
        shifted = _offset(fig, tr, dy=-TICK_SPACE)
        for v, text in zip(values, labels, strict=True):
            ax.text(v, 0, text, transform=shifted, ha="center", va="top", **_tick_font(fontsize))
    else:
        ax.set_ylim(lo, hi)
        ax.set_yticks([])
        tr = ax.get_yaxis_transform()  # x: axes, y: data
        if grid and values:
            ax.hlines(values, 0, 1, transform=tr, colors=GRID_COLOR, linewidth=0.8, zorder=0)
        ax.plot([0.0] * len(values), values, transform=tr, marker=TICKLEFT, **_TICK_STYLE)
        shifted = _offset(fig, tr, dx=-TICK_SPACE)
        for v, text in zip(values, labels, strict=True):
            ax.text(0, v, text, transform=shifted, ha="right", va="center", **_tick_font(fontsize))
    return max((text_width(t, fontsize) for t in labels), default=0.0)


_TICK_STYLE: dict[str, Any] = {
    "linestyle": "none",
    "markersize": TICK_LENGTH,
    "markeredgewidth": 0.8,
    "color": AXIS_COLOR,
    "clip_on": False,
}


def _tick_font(fontsize: float) -> dict[str, Any]:
    return {"fontsize": fontsize, "color": INK, "clip_on": False, "parse_math": False}


def _category_labels(
    fig: Figure, ax: Any, positions: Sequence[float], labels: Sequence[str], fontsize: float = 8
) -> float:
    """Row labels left of ``ax`` at data heights ``positions``; returns the widest label's
    estimated width (inches)."""
    ax.set_yticks([])
    shifted = _offset(fig, ax.get_yaxis_transform(), dx=-4)
    for y, text in zip(positions, labels, strict=True):
        ax.text(
            0,
            y,
            text,
            transform=shifted,
            ha="right",
            va="center",
            fontsize=fontsize,
            color=LABEL_INK,
            clip_on=False,
            parse_math=False,
        )
    return max((text_width(t, fontsize) for t in labels), default=0.0)


def _place(
    fig: Figure,
    ax: Any,
    *,
    left: float,
    bottom: float,
    top: float,
    right: float = 0.16,
) -> None:
    """Set the axes' margins in inches (the cheap replacement of ``tight_layout``)."""
    w, h = fig.get_size_inches()
    left = min(left, 0.5 * w)
    ax.set_position(
        [left / w, bottom / h, max(w - left - right, 0.1 * w) / w, max(h - top - bottom, 0.1) / h]
    )


def _heading(
    fig: Figure, title: str, fontsize: float, key: Sequence[tuple[str, str]] = ()
) -> float:
    """The figure's title, left-aligned across the full width, and its key: ``"— name"``
    lines in each series' colour, right-aligned on the title's line when they fit beside it,
    else on lines of their own below it (outside the axes, so they never cover data; far
    cheaper than :meth:`Axes.legend`). Returns the top margin (inches) they need."""
    w, h = fig.get_size_inches()
    edge = 4 * PT
    fig.text(
        edge / w,
        1 - 3 * PT / h,
        title,
        fontsize=fontsize,
        ha="left",
        va="top",
        color=LABEL_INK,
        parse_math=False,
    )
    line = 1.25 * fontsize * PT
    top = 3 * PT + line
    key_fs = 7.0
    gap = 9 * PT
    items = [(f"— {name}", color, text_width(f"— {name}", key_fs)) for name, color in key]
    total = sum(width for _, _, width in items) + gap * max(len(items) - 1, 0)
    if items:
        rows: list[list[tuple[str, str, float]]] = []
        if text_width(title, fontsize) + gap + total <= w - 2 * edge:
            rows, y = [items], 3 * PT + 0.1 * fontsize * PT  # beside the title
        else:
            y = top + 2 * PT
            for item in items:  # greedy wrap, right-aligned lines
                used = sum(x[2] for x in rows[-1]) + gap * len(rows[-1]) if rows else math.inf
                if used + item[2] > w - 2 * edge:
                    rows.append([])
                rows[-1].append(item)
            top = y + len(rows) * 1.25 * key_fs * PT
        for r, row in enumerate(rows):
            x = w - edge
            for text, color, width in reversed(row):
                fig.text(
                    x / w,
                    1 - (y + r * 1.25 * key_fs * PT) / h,
                    text,
                    fontsize=key_fs,
                    ha="right",
                    va="top",
                    color=color,
                    parse_math=False,
                )
                x -= width + gap
    return top + 6 * PT


def _bottom(fontsize: float, xlabel: bool = False) -> float:
    """Bottom margin (inches) for x tick labels at ``fontsize`` (and an axis label)."""
    space = TICK_SPACE + 1.25 * fontsize + 3
    if xlabel:
        space += 1.25 * fontsize + 4
    return space * PT


def _blank_figure(width: float, height: float) -> tuple[Figure, Any]:
    """A transparent figure with one transparent, tick-less axes showing only its bottom
    spine (no pyplot; 72 dpi)."""
    fig = Figure(figsize=(width, height), dpi=72)
    fig.patch.set_alpha(0.0)
    ax = fig.add_subplot()
    ax.set_facecolor("none")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color(AXIS_COLOR)
    return fig, ax


def largest_groups(groups: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` groups with the most rows, in their original order."""
    if len(groups) <= limit:
        return list(groups)
    ranked = sorted(range(len(groups)), key=lambda i: -as_float(groups[i].get("n", 0)))
    keep = sorted(ranked[:limit])
    return [groups[i] for i in keep]


def _span(values: Sequence[float], pad: float = 0.08, minimum: float = 1e-9) -> tuple[float, float]:
    """``[min, max]`` of the finite ``values`` widened by ``pad`` of the range (``(0, 1)``
    when there is none; a point gets ±0.5)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi - lo < minimum:
        return lo - 0.5, hi + 0.5
    margin = pad * (hi - lo)
    return lo - margin, hi + margin


# --------------------------------------------------------------------------- figures


def group_rates_svg(attr: str, groups: list[dict[str, Any]], rate: str) -> str:
    """A dot plot of one rate per group of ``attr``, with its interval as an error bar.

    ``groups``: one dict per group in the JSON form of group parity's
    :class:`~fairengine.group_parity.result.ParityGroup` (``group``, ``n``, ``rates``; values
    may be the strings ``"NaN"``/``"Infinity"``); ``rate`` is ``positive_rate``,
    ``tpr`` or ``fpr``. Undefined estimates are marked "undefined" instead of drawn; an
    undefined interval draws the point alone. At most :data:`MAX_PLOT_GROUPS` (the largest)
    groups are drawn. Returns an ``<svg>`` element without XML prolog or DOCTYPE.
    """
    shown = largest_groups(groups, MAX_PLOT_GROUPS)
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

    fig, ax = _blank_figure(3.6, 0.75 + 0.26 * max(n, 1))
    ys = list(range(n))[::-1]  # first group on top
    drawn = [i for i in range(n) if math.isfinite(est[i])]
    if drawn:
        ax.errorbar(
            [est[i] for i in drawn],
            [ys[i] for i in drawn],
            xerr=[
                [max(est[i] - low[i], 0.0) for i in drawn],
                [max(high[i] - est[i], 0.0) for i in drawn],
            ],
            fmt="o",
            color=color,
            ecolor=color,
            elinewidth=1.6,
            capsize=3,
            markersize=5,
        )
    for i in range(n):
        if not math.isfinite(est[i]):
            ax.text(
                x0 + 0.02 * (x1 - x0),
                ys[i],
                "undefined",
                va="center",
                ha="left",
                fontsize=8,
                fontstyle="italic",
                color=MUTED,
                parse_math=False,
            )
    ax.set_ylim(-0.7, n - 0.3 if n else 0.7)
    _value_axis(fig, ax, "x", x0, x1, grid=True)
    label_w = _category_labels(fig, ax, ys, [plot_label(g.get("group", "")) for g in shown])
    suffix = f" (largest {n} of {len(groups)} groups)" if n < len(groups) else ""
    top = _heading(fig, f"{title} by {plot_label(attr, 30)}{suffix}", 9)
    _place(fig, ax, left=label_w + 8 * PT, bottom=_bottom(7.5), top=top)
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
    Several series on a row are offset vertically, with a key. Returns an inline ``<svg>``.
    """
    n = len(labels)
    k = max(len(series), 1)
    values = [
        v
        for s in series
        for key in ("estimate", "low", "high")
        for v in (as_float(x) for x in s.get(key) or [])
    ]
    if reference is not None:
        values.append(reference)
    x0, x1 = _span(values, minimum=1e-6)
    fig, ax = _blank_figure(5.4, 0.9 + 0.32 * max(n, 1) * (1 + 0.35 * (k - 1)))
    step = 0.6 / k
    for j, s in enumerate(series):
        offset = (j - (k - 1) / 2) * step
        est = [as_float(x) for x in s.get("estimate") or [math.nan] * n]
        low = [as_float(x) for x in s.get("low") or [math.nan] * n]
        high = [as_float(x) for x in s.get("high") or [math.nan] * n]
        ys = [(n - 1 - i) - offset for i in range(n)]
        spans = [i for i in range(n) if math.isfinite(low[i]) and math.isfinite(high[i])]
        if spans:
            ax.hlines(
                [ys[i] for i in spans],
                [low[i] for i in spans],
                [high[i] for i in spans],
                color=s["color"],
                linewidth=2.0,
            )
        points = [i for i in range(n) if math.isfinite(est[i])]
        if points:
            ax.plot(
                [est[i] for i in points],
                [ys[i] for i in points],
                "o",
                color=s["color"],
                markersize=4.5,
            )
    if reference is not None:
        ax.axvline(reference, color=MUTED, linestyle="--", linewidth=1)
    ax.set_ylim(-0.7, n - 0.3 if n else 0.7)
    _value_axis(fig, ax, "x", x0, x1, nbins=6, grid=True)
    label_w = _category_labels(fig, ax, list(range(n))[::-1], [plot_label(x, 30) for x in labels])
    key = [(str(s["name"]), s["color"]) for s in series] if len(series) > 1 else []
    top = _heading(fig, plot_label(title, 70), 9, key)
    _place(fig, ax, left=label_w + 8 * PT, bottom=_bottom(7.5), top=top)
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
    x0, x1 = 0.0, 1.0
    if len(e) == len(c) + 1 and c:
        ax.stairs(c, e, fill=True, color="#9db4cc", linewidth=0)
        ax.stairs(c, e, color="#2f5d8a", linewidth=0.6)
        lo, hi = e[0], e[-1]
        x0, x1 = _span([lo, hi], pad=0.02)
        peak = max((v for v in c if math.isfinite(v)), default=0.0)
        ax.set_ylim(0, 1.05 * peak if peak > 0 else 1)
        if math.isfinite(obs):
            inside = lo <= obs <= hi
            x = obs if inside else (hi if obs > hi else lo)
            ax.axvline(x, color="#a4502a", linewidth=1.6)
            arrow = "" if inside else (" →" if obs > hi else " ←")
            ax.text(
                x,
                peak * 0.95 if peak > 0 else 1,
                f"{marker_label} {obs:.3g}{arrow}",
                color="#a4502a",
                fontsize=7.5,
                ha="right" if x >= (lo + hi) / 2 else "left",
                va="top",
                parse_math=False,
            )
    _value_axis(fig, ax, "x", x0, x1, fontsize=7)
    top = _heading(fig, plot_label(title, 60), 8.5)
    _place(fig, ax, left=0.2, bottom=_bottom(7), top=top, right=0.2)
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
    ys: list[float] = []
    for s in series:
        values = [as_float(v) for v in s["values"]]
        ys += values
        ax.plot(xs, values, color=s["color"], linewidth=1.6, marker="o", markersize=2.5)
    if hline is not None:
        ys.append(hline)
        ax.axhline(hline, color=MUTED, linestyle="--", linewidth=1)
        if hline_label:
            ax.text(
                xs[0] if xs else 0,
                hline,
                f" {hline_label}",
                fontsize=7,
                va="bottom",
                color=MUTED,
                parse_math=False,
            )
    ax.spines["left"].set_visible(True)
    ax.spines["left"].set_color(AXIS_COLOR)
    _value_axis(fig, ax, "x", *_span(xs, pad=0.04), fontsize=7, grid=True)
    label_w = _value_axis(fig, ax, "y", *_span(ys), fontsize=7, nbins=4, grid=True)
    if xlabel:
        ax.text(
            0.5,
            0,
            xlabel,
            transform=_offset(fig, ax.transAxes, dy=-(TICK_SPACE + 1.25 * 7 + 3)),
            ha="center",
            va="top",
            fontsize=7.5,
            color=INK,
            parse_math=False,
        )
    key = [(str(s["name"]), s["color"]) for s in series] if len(series) > 1 else []
    top = _heading(fig, plot_label(title, 60), 8.5, key)
    left = label_w + (TICK_SPACE + 4) * PT
    _place(fig, ax, left=left, bottom=_bottom(7, bool(xlabel)), top=top, right=0.2)
    return _figure_svg(fig, salt=f"fairengine-curve-{title}")


def marginal_overlay_svg(title: str, edges: list[Any], series: list[dict[str, Any]]) -> str:
    """Binned marginal distributions drawn as normalised step lines on shared bins
    (``series`` items: ``{"name", "color", "counts"}``), e.g. a group versus its flipset."""
    e = [as_float(x) for x in edges]
    fig, ax = _blank_figure(3.4, 1.9)
    key = []
    peak = 0.0
    for s in series:
        c = [as_float(x) for x in s["counts"]]
        total = sum(x for x in c if math.isfinite(x))
        if total <= 0 or len(e) != len(c) + 1:
            continue
        share = [x / total for x in c]
        peak = max(peak, *(v for v in share if math.isfinite(v)))
        ax.stairs(share, e, color=s["color"], linewidth=1.6)
        key.append((f"{s['name']} (n={total:,.0f})", s["color"]))
    ax.set_ylim(0, 1.05 * peak if peak > 0 else 1)
    _value_axis(fig, ax, "x", *_span(e, pad=0.0), fontsize=7)
    top = _heading(fig, plot_label(title, 50), 8.5, key)
    _place(fig, ax, left=0.2, bottom=_bottom(7), top=top, right=0.2)
    return _figure_svg(fig, salt=f"fairengine-marginal-{title}")
