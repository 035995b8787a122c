"""Small matplotlib figures for the HTML report, returned as inline SVG strings.

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, so no global
figure registry and no GUI backend is ever touched; the figure is released when this module is
done with it) and saved as SVG with ``svg.fonttype="none"``: text stays text, so it is small,
searchable and takes the report's font. The XML prolog, DOCTYPE and the per-element ids that
matplotlib numbers the same way in every figure are stripped, so several SVGs can sit inline in
one HTML document. Every text matplotlib writes is XML-escaped by its SVG backend; group names
are drawn with ``parse_math=False`` (a ``$`` in a name is not mathtext).

Readable at the report's width
------------------------------
**No text in any figure is smaller than** :data:`MIN_FONT_PX` **= 11 CSS pixels as the report
shows it.** The SVG is scaled by CSS to its figure's width, so a text's effective size is its
font size × displayed width / viewBox width. The report's CSS (``templates/report.css``) lays
a figure out as ``figure.plot { flex: 1 1 300px; max-width: 380px }``: it is never narrower
than its 300 px flex basis (:data:`FIGURE_MIN_PX`) in any window at least 364 px wide (at
1,400 px the figures are 360 to 380 px wide). Every figure is therefore drawn
:data:`FIGURE_WIDTH` = 300 units wide (its viewBox; one unit is one CSS pixel at the narrowest
width) and sets no text below 11 units: 11 px at 300 px, 13.2 px at the usual 360 px.
``tests/test_report_plots_readable.py`` checks both the SVGs (every ``<text>`` against the CSS)
and the rendered report in Chromium.

Many groups make a figure taller, never its text smaller: one row per group; a group label
wider than :data:`LABEL_SHARE` of the figure wraps onto a second line (after ``×``, ``&``,
spaces, hyphens), and what still does not fit is cut with "…", the full name kept in a
``<title>`` (the browser's tooltip); titles wrap the same way; an x axis drops ticks until its
labels fit side by side. At most :data:`MAX_PLOT_GROUPS` groups are drawn (the tables list all).

Direct labels: a line chart names each line at its end (:func:`curve_svg`); plots with several
series on one row carry a key right under the title, a swatch drawn like the mark it stands for.

Colours
-------
One colour-blind-safe palette, Okabe and Ito's (:data:`OKABE_ITO`, plus its grey), for every
plot: data series take :data:`SERIES_COLORS` in order (blue, reddish purple, black, sky blue),
which leaves the colours of decisions (:data:`DECISION_COLORS`: rejected vermillion, not
rejected bluish green, undetermined orange, not tested grey) to mean decisions only, in the
plots and (the same hex values) in the report's CSS. Axes, grid and text are neutral greys
(:data:`NEUTRALS`). Text in a series' colour is avoided (reddish purple and sky blue are below
4.5:1 on white): keys and line labels are dark text beside a coloured swatch.

Alt text: every ``<svg>`` carries ``role="img"`` and an ``aria-label`` saying what it shows (the
metric, the attribute, the number of groups or rows, the series; for a group's rates the lowest
and highest) — generated from the figure's data unless the caller passes ``alt``.

Speed
-----
A full every-method report draws about 50 figures and must render in well under 2 s
(``benchmarks/report_render.py``), so each figure is kept to a few artists:

* margins are set from estimated text widths (:func:`text_width`, DejaVu Sans advance widths)
  instead of ``tight_layout``, which measures every text by drawing the figure an extra time;
  the SVG keeps text as text and the browser draws it in the page's font, so matplotlib's
  measurements would be estimates of the final widths anyway;
* axes draw no matplotlib ``Tick`` objects (five artists each): tick marks are one marker line,
  grid lines one collection and each label one text; keys are a swatch and a text per series
  (no :meth:`Axes.legend`);
* repeated marks are single artists: one ``errorbar`` call, one ``hlines`` collection per
  series, filled ``stairs`` instead of one bar patch per histogram bin.
"""

from __future__ import annotations

import functools
import html
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import TICKDOWN, TICKLEFT
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

# --------------------------------------------------------------------------- palette

OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#e69f00",
    "sky_blue": "#56b4e9",
    "bluish_green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish_purple": "#cc79a7",
}
"""Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2008)."""
OKABE_ITO_GREY = "#999999"
"""The grey that commonly completes the palette (for "not tested")."""

DECISION_COLORS: dict[str, str] = {
    "reject": OKABE_ITO["vermillion"],
    "fail_to_reject": OKABE_ITO["bluish_green"],
    "undetermined": OKABE_ITO["orange"],
    "not_tested": OKABE_ITO_GREY,
    "supporting": OKABE_ITO_GREY,
}
"""The colour of each decision (keys as in ``Finding.decision``), for the plots and the CSS."""

SERIES_COLORS: tuple[str, ...] = (
    OKABE_ITO["blue"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["black"],
    OKABE_ITO["sky_blue"],
)
"""Data series in order (none of them a decision's colour)."""

INK = "#374151"
"""Tick labels and secondary text."""
LABEL_INK = "#111827"
"""Titles, category labels (group names, metric names), keys."""
AXIS_COLOR = "#9ca3af"
GRID_COLOR = "#e5e7eb"
MUTED = "#6b7280"
"""Notes ("undefined") and reference lines."""
NEUTRALS: tuple[str, ...] = (INK, LABEL_INK, AXIS_COLOR, GRID_COLOR, MUTED)
"""The greys of axes, grid lines and text (no data is encoded in them)."""
PALETTE: frozenset[str] = frozenset({*OKABE_ITO.values(), OKABE_ITO_GREY})
"""Every colour a figure may encode data with."""

RATE_LABELS: dict[str, str] = {
    "positive_rate": "Positive-prediction rate",
    "tpr": "True-positive rate (TPR)",
    "fpr": "False-positive rate (FPR)",
}
"""Human-readable names of the per-group rates of ``group_parity``."""

RATE_COLORS: dict[str, str] = {rate: SERIES_COLORS[0] for rate in RATE_LABELS}
"""A group's rate is the primary series wherever it is drawn."""

# --------------------------------------------------------------------------- sizes

FIGURE_WIDTH = 300.0
"""Width of every figure in SVG units (its viewBox; points at 72 dpi)."""
FIGURE_MIN_PX = 300.0
"""The narrowest a figure is shown, in CSS pixels: the flex basis of ``figure.plot``."""
MIN_FONT_PX = 11.0
"""No text of a figure is shown smaller than this (CSS pixels) at :data:`FIGURE_MIN_PX`."""
FONT = MIN_FONT_PX * FIGURE_WIDTH / FIGURE_MIN_PX
"""Font size (units) of tick labels, group labels, keys and notes: the minimum."""
TITLE_FONT = FONT + 1.0
LINE = 1.2
"""Line height in ems."""
LABEL_SHARE = 0.45
"""Group labels may take this share of the figure's width before they wrap."""
ROW = 18.0
"""Units per row of a one-series row plot (a one-line label is 13.2 units tall)."""
SUB_ROW = 9.0
"""Units between two series on one row."""
EDGE = 4.0
"""Units between the figure's border and a title, key or label."""

MAX_PLOT_GROUPS = 30
"""At most this many groups are drawn (the largest by ``n``); the table lists them all."""

SVG_SIZE_BUDGET = 40_000
"""Bytes; a single plot is expected to stay below this (checked by the tests)."""

PT = 1 / 72
"""Inches per point (one SVG unit)."""
TICK_SPACE = 7.0
"""Units between an axis and its tick labels (tick length 3.5 plus pad 3.5)."""
TICK_LENGTH = 3.5

_PROLOG = re.compile(r"^\s*<\?xml[^>]*\?>\s*", re.S)
_DOCTYPE = re.compile(r"<!DOCTYPE[^>]*>\s*", re.S)
_AUTO_IDS = re.compile(r'\s+id="(?:[A-Za-z][A-Za-z0-9.]*_\d+)"')
_FONT_FAMILY = re.compile(r"\s*font-family:[^;\"]*;?")
_COMMENTS = re.compile(r"<!--.*?-->", re.S)
_NO_ROTATION = re.compile(r'\s+transform="rotate\(-?0 [^")]*\)"')
_TIP_GROUP = re.compile(r'<g id="fe-tip-(\d+)-\d+">')
_BREAK_AFTER = re.compile(r"(?<=[\s\-_/,])")


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


def figure_svg(fig: Figure, salt: str, alt: str, tips: Sequence[str] = ()) -> str:
    """Render ``fig`` to a cleaned inline SVG string labelled ``alt`` (``role="img"``); the
    texts drawn with a tip id (:class:`Tooltips`) get their full text as a ``<title>``."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(
            buf,
            format="svg",
            metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
        )
    svg = clean_svg(buf.getvalue())
    if tips:
        svg = _TIP_GROUP.sub(
            lambda m: f"<g><title>{html.escape(tips[int(m.group(1))], quote=False)}</title>", svg
        )
    label = html.escape(" ".join(alt.split()), quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


# --------------------------------------------------------------------------- text fitting


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


def label_width(text: str, fontsize: float = FONT) -> float:
    """:func:`text_width` in units."""
    return text_width(text, fontsize) / PT


def _cut(text: str, fontsize: float, width: float) -> str:
    """``text``, or its longest prefix that fits ``width`` units with "…" appended."""
    if label_width(text, fontsize) <= width:
        return text
    n = len(text)
    while n > 1 and label_width(text[:n].rstrip() + "…", fontsize) > width:
        n -= 1
    return text[:n].rstrip() + "…"


def fit_lines(
    text: Any, fontsize: float, width: float, max_lines: int = 2
) -> tuple[list[str], bool]:
    """``text`` as at most ``max_lines`` lines of at most ``width`` units: broken after
    spaces, hyphens, underscores, slashes and commas (so ``"A × B"`` breaks after ``×``), the
    last line cut with "…" when the rest does not fit. Returns the lines and whether they
    show the whole text."""
    s = " ".join(str(text).split())
    if label_width(s, fontsize) <= width:
        return [s], True
    rest = [t for t in _BREAK_AFTER.split(s) if t]
    lines: list[str] = []
    while len(lines) < max_lines - 1 and rest:
        line, k = "", 0
        while k < len(rest) and label_width((line + rest[k]).rstrip(), fontsize) <= width:
            line, k = line + rest[k], k + 1
        if k == 0:  # the next word alone is too wide: it is cut on the last line
            break
        lines.append(line.rstrip())
        rest = rest[k:]
    last = "".join(rest).strip()
    complete = True
    if last:
        shown = _cut(last, fontsize, width)
        complete = shown == last
        lines.append(shown)
    return lines, complete


@dataclass
class Tooltips:
    """Full texts of cut labels, shown as ``<title>`` tooltips (see :func:`figure_svg`)."""

    texts: list[str] = field(default_factory=list)

    def gid(self, full: str) -> str:
        self.texts.append(" ".join(str(full).split()))
        return f"fe-tip-{len(self.texts) - 1}"


def _draw_lines(
    tips: Tooltips,
    draw: Any,
    lines: Sequence[str],
    complete: bool,
    full: Any,
    fontsize: float,
    *,
    center: bool,
) -> None:
    """Draw ``lines`` one text each by calling ``draw(line, dy)`` (``dy``: units upwards from
    the anchor; centred on it when ``center``, else downwards from it); cut lines carry the
    full text as a tooltip."""
    gid = None if complete else tips.gid(full)
    step = LINE * fontsize
    for j, line in enumerate(lines):
        dy = ((len(lines) - 1) / 2 - j) * step if center else -j * step
        artist = draw(line, dy)
        if gid is not None:
            artist.set_gid(f"{gid}-{j}")


# --------------------------------------------------------------------------- layout


@dataclass
class _Heading:
    """A planned title (wrapped lines) and key (rows of ``(name, color, marker)`` items)."""

    lines: list[str]
    complete: bool
    full: str
    key_rows: list[list[tuple[str, str, str, float]]]
    height: float


SWATCH = 16.0
"""Units of a key's swatch (a short line, with the series' marker in the middle)."""


def plan_heading(title: str, key: Sequence[tuple[str, str, str]] = ()) -> _Heading:
    """The title wrapped to two lines across the full width and, under it, the key's items
    (swatch + name) in left-aligned rows. ``height``: the top margin (units) they need."""
    avail = FIGURE_WIDTH - 2 * EDGE
    lines, complete = fit_lines(title, TITLE_FONT, avail)
    height = 3 + len(lines) * LINE * TITLE_FONT
    rows: list[list[tuple[str, str, str, float]]] = []
    if key:
        gap = 12.0
        used = math.inf
        for name, color, marker in key:
            shown = _cut(" ".join(str(name).split()), FONT, avail - SWATCH - 4)
            width = SWATCH + 4 + label_width(shown)
            if used + gap + width > avail:
                rows.append([])
                used = -gap
            rows[-1].append((shown, color, marker, width))
            used += gap + width
        height += 2 + len(rows) * LINE * FONT
    return _Heading(lines, complete, title, rows, height + 6)


def draw_heading(fig: Figure, head: _Heading, tips: Tooltips) -> None:
    """Draw a planned heading at the top of ``fig``."""
    w, h = FIGURE_WIDTH, fig.get_size_inches()[1] / PT

    def title_line(line: str, dy: float) -> Any:
        return fig.text(
            EDGE / w,
            1 - (3 - dy) / h,
            line,
            fontsize=TITLE_FONT,
            ha="left",
            va="top",
            color=LABEL_INK,
            parse_math=False,
        )

    _draw_lines(tips, title_line, head.lines, head.complete, head.full, TITLE_FONT, center=False)
    y = 3 + len(head.lines) * LINE * TITLE_FONT + 2
    for row in head.key_rows:
        x = EDGE
        mid = y + 0.62 * FONT  # the middle of the text's x-height
        for name, color, marker, width in row:
            fig.add_artist(
                Line2D(
                    [x / w, (x + SWATCH / 2) / w, (x + SWATCH) / w],
                    [1 - mid / h] * 3,
                    color=color,
                    linewidth=2.0,
                    marker=marker or None,
                    markevery=[1],
                    markersize=4.5,
                    solid_capstyle="butt",
                )
            )
            fig.text(
                (x + SWATCH + 4) / w,
                1 - y / h,
                name,
                fontsize=FONT,
                ha="left",
                va="top",
                color=LABEL_INK,
                parse_math=False,
            )
            x += width + 12
        y += LINE * FONT


def row_labels(labels: Sequence[Any]) -> tuple[list[tuple[list[str], bool]], float, int]:
    """Each label fitted to :data:`LABEL_SHARE` of the width; the widest line (units) and the
    most lines of any label."""
    fitted = [fit_lines(t, FONT, LABEL_SHARE * FIGURE_WIDTH) for t in labels]
    widest = max((label_width(line) for lines, _ in fitted for line in lines), default=0.0)
    most = max((len(lines) for lines, _ in fitted), default=1)
    return fitted, widest, most


def row_pitch(label_lines: int, series: int = 1) -> float:
    """Units per row: room for ``series`` marks and for the labels' lines."""
    return max(ROW + SUB_ROW * (series - 1), label_lines * LINE * FONT + 5)


def draw_row_labels(
    fig: Figure,
    ax: Any,
    ys: Sequence[float],
    fitted: Sequence[tuple[list[str], bool]],
    labels: Sequence[Any],
    tips: Tooltips,
) -> None:
    """Row labels right-aligned left of ``ax`` at data heights ``ys``, one text per line."""
    base = ax.get_yaxis_transform()  # x: axes, y: data
    for y, (lines, complete), full in zip(ys, fitted, labels, strict=True):

        def row_line(line: str, dy: float, y: float = y) -> Any:
            return ax.text(
                0,
                y,
                line,
                transform=offset_by(fig, base, dx=-5, dy=dy),
                ha="right",
                va="center",
                fontsize=FONT,
                color=LABEL_INK,
                clip_on=False,
                parse_math=False,
            )

        _draw_lines(tips, row_line, lines, complete, full, FONT, center=True)


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


def fitting_ticks(
    lo: float, hi: float, length: float, *, vertical: bool = False, most: int = 6
) -> tuple[list[float], list[str]]:
    """The most 'nice' ticks (at most ``most`` intervals) over ``[lo, hi]`` whose labels fit
    an axis ``length`` units long: side by side with 12 units between them (x), or one line
    apart plus 4 units (y)."""
    values: list[float] = []
    for nbins in range(most, 0, -1):
        values = tick_values(lo, hi, nbins)
        labels = [tick_text(v) for v in values]
        if len(values) < 2:
            return values, labels
        spacing = (values[1] - values[0]) / (hi - lo) * length
        need = (LINE * FONT + 4) if vertical else max(label_width(t) for t in labels) + 12
        if need <= spacing:
            return values, labels
    ends = [values[0], values[-1]] if values else []
    return ends, [tick_text(v) for v in ends]


def offset_by(fig: Figure, transform: Any, dx: float = 0.0, dy: float = 0.0) -> Any:
    """``transform`` shifted by (``dx``, ``dy``) units."""
    return transform + ScaledTranslation(dx * PT, dy * PT, fig.dpi_scale_trans)


_TICK_STYLE: dict[str, Any] = {
    "linestyle": "none",
    "markersize": TICK_LENGTH,
    "markeredgewidth": 0.8,
    "color": AXIS_COLOR,
    "clip_on": False,
}


def _tick_font() -> dict[str, Any]:
    return {"fontsize": FONT, "color": INK, "clip_on": False, "parse_math": False}


def draw_axis(
    fig: Figure,
    ax: Any,
    which: str,
    lo: float,
    hi: float,
    ticks: tuple[list[float], list[str]],
    *,
    grid: bool = False,
) -> None:
    """A numeric axis on the bottom (``which="x"``) or left (``"y"``) of ``ax`` over
    ``[lo, hi]``: limits fixed, tick marks as one marker line, optional grid lines as one
    collection, one text per label."""
    values, labels = ticks
    if which == "x":
        ax.set_xlim(lo, hi)
        tr = ax.get_xaxis_transform()  # x: data, y: axes
        if grid and values:
            ax.vlines(values, 0, 1, transform=tr, colors=GRID_COLOR, linewidth=0.8, zorder=0)
        ax.plot(values, [0.0] * len(values), transform=tr, marker=TICKDOWN, **_TICK_STYLE)
        shifted = offset_by(fig, tr, dy=-TICK_SPACE)
        for v, text in zip(values, labels, strict=True):
            ax.text(v, 0, text, transform=shifted, ha="center", va="top", **_tick_font())
    else:
        ax.set_ylim(lo, hi)
        tr = ax.get_yaxis_transform()  # x: axes, y: data
        if grid and values:
            ax.hlines(values, 0, 1, transform=tr, colors=GRID_COLOR, linewidth=0.8, zorder=0)
        ax.plot([0.0] * len(values), values, transform=tr, marker=TICKLEFT, **_TICK_STYLE)
        shifted = offset_by(fig, tr, dx=-TICK_SPACE)
        for v, text in zip(values, labels, strict=True):
            ax.text(0, v, text, transform=shifted, ha="right", va="center", **_tick_font())


def _x_overhang(ticks: tuple[list[float], list[str]]) -> tuple[float, float]:
    """Units the first and last x tick labels reach beyond their ticks (half their widths)."""
    labels = ticks[1]
    if not labels:
        return 0.0, 0.0
    return label_width(labels[0]) / 2, label_width(labels[-1]) / 2


def bottom_margin(xlabel: bool = False) -> float:
    """Bottom margin (units) for x tick labels (and an axis label)."""
    space = TICK_SPACE + LINE * FONT + 3
    if xlabel:
        space += LINE * FONT + 3
    return space


def new_figure(height: float) -> tuple[Figure, Any]:
    """A transparent :data:`FIGURE_WIDTH` × ``height``-unit figure with one transparent,
    tick-less axes showing only its bottom spine (no pyplot; 72 dpi)."""
    fig = Figure(figsize=(FIGURE_WIDTH * PT, height * PT), dpi=72)
    fig.patch.set_alpha(0.0)
    ax = fig.add_subplot()
    ax.set_facecolor("none")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color(AXIS_COLOR)
    return fig, ax


def place_axes(
    fig: Figure, ax: Any, *, left: float, bottom: float, top: float, right: float
) -> None:
    """Set the axes' margins in units (the cheap replacement of ``tight_layout``)."""
    w = FIGURE_WIDTH
    h = fig.get_size_inches()[1] / PT
    left = min(left, 0.6 * w)
    ax.set_position(
        [left / w, bottom / h, max(w - left - right, 0.1 * w) / w, max(h - top - bottom, 1) / h]
    )


def largest_groups(groups: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` groups with the most rows, in their original order."""
    if len(groups) <= limit:
        return list(groups)
    ranked = sorted(range(len(groups)), key=lambda i: -as_float(groups[i].get("n", 0)))
    keep = sorted(ranked[:limit])
    return [groups[i] for i in keep]


def value_span(
    values: Sequence[float], pad: float = 0.08, minimum: float = 1e-9
) -> tuple[float, float]:
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


def alt_number(value: float) -> str:
    """A value for alt text: three significant digits."""
    return f"{value:.3g}" if math.isfinite(value) else "undefined"


def _series_color(s: dict[str, Any], j: int) -> str:
    """A series' colour: its own, else the ``j``-th of :data:`SERIES_COLORS`."""
    return str(s.get("color") or SERIES_COLORS[j % len(SERIES_COLORS)])


def x_layout(
    lo: float, hi: float, left: float, right: float = 8.0
) -> tuple[tuple[list[float], list[str]], float, float]:
    """Ticks fitting an x axis between margins ``left`` and ``right`` (units), and the margins
    widened so the end labels stay inside the figure."""
    ticks = fitting_ticks(lo, hi, FIGURE_WIDTH - left - max(right, 16.0))
    first, last = _x_overhang(ticks)
    return ticks, max(left, first + 2), max(right, last + 2)


# --------------------------------------------------------------------------- figures


def group_rates_svg(
    attr: str, groups: list[dict[str, Any]], rate: str, *, alt: str | None = None
) -> str:
    """A dot plot of one rate per group of ``attr``, with its interval as an error bar.

    ``groups``: one dict per group in the JSON form of group parity's
    :class:`~fairengine.group_parity.result.ParityGroup` (``group``, ``n``, ``rates``; values
    may be the strings ``"NaN"``/``"Infinity"``); ``rate`` is ``positive_rate``,
    ``tpr`` or ``fpr``. Undefined estimates are marked "undefined" instead of drawn; an
    undefined interval draws the point alone. At most :data:`MAX_PLOT_GROUPS` (the largest)
    groups are drawn. ``alt`` replaces the generated alt text. Returns an ``<svg>`` element
    without XML prolog or DOCTYPE.
    """
    shown = largest_groups(groups, MAX_PLOT_GROUPS)
    n = len(shown)
    color = RATE_COLORS.get(rate, SERIES_COLORS[0])
    name = RATE_LABELS.get(rate, rate)
    tips = Tooltips()

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

    names = [g.get("group", "") for g in shown]
    fitted, label_w, label_lines = row_labels(names)
    pitch = row_pitch(label_lines)
    suffix = f" (largest {n} of {len(groups)} groups)" if n < len(groups) else ""
    title = f"{name} by {attr}{suffix}"
    head = plan_heading(title)
    ticks, left, right = x_layout(x0, x1, label_w + 10)
    bottom = bottom_margin()
    fig, ax = new_figure(head.height + pitch * max(n, 1) + bottom)

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
                fontsize=FONT,
                fontstyle="italic",
                color=MUTED,
                parse_math=False,
            )
    ax.set_ylim(-0.5, max(n, 1) - 0.5)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=True)
    draw_row_labels(fig, ax, ys, fitted, names, tips)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        alt = f"Dot plot: {name[:1].lower()}{name[1:]} by {attr} for {n} groups"
        alt += f" (the largest of {len(groups)})" if suffix else ""
        alt += ", each with its interval"
        if drawn:
            lo_i = min(drawn, key=lambda i: est[i])
            hi_i = max(drawn, key=lambda i: est[i])
            alt += f"; lowest {names[lo_i]} {alt_number(est[lo_i])}"
            alt += f", highest {names[hi_i]} {alt_number(est[hi_i])}"
        if len(drawn) < n:
            alt += f"; undefined for {n - len(drawn)} groups"
        alt += "."
    return figure_svg(fig, f"fairengine-{attr}-{rate}", alt, tips.texts)


def interval_forest_svg(
    title: str,
    labels: list[str],
    series: list[dict[str, Any]],
    *,
    reference: float | None = None,
    salt: str = "forest",
    alt: str | None = None,
    rows: str = "rows",
) -> str:
    """A forest plot: one row per label, one interval (and point) per series on each row.

    ``series`` items: ``{"name", "color", "estimate": [...], "low": [...], "high": [...]}``
    (lists aligned with ``labels``; ``estimate`` may be omitted for an interval alone;
    ``color`` defaults to :data:`SERIES_COLORS` in order). Non-finite values are skipped.
    ``reference`` draws a vertical line (e.g. a target). Several series on a row are offset
    vertically, with a key under the title. ``rows`` names what the rows are in the alt text
    (``"groups"``, ``"metrics"``…). Returns an inline ``<svg>``.
    """
    n = len(labels)
    k = max(len(series), 1)
    tips = Tooltips()
    colors = [_series_color(s, j) for j, s in enumerate(series)]
    values = [
        v
        for s in series
        for key in ("estimate", "low", "high")
        for v in (as_float(x) for x in s.get(key) or [])
    ]
    if reference is not None:
        values.append(reference)
    x0, x1 = value_span(values, minimum=1e-6)
    fitted, label_w, label_lines = row_labels(labels)
    pitch = row_pitch(label_lines, k)
    key = [  # the swatch draws a point only for a series that has estimates
        (str(s["name"]), c, "o" if s.get("estimate") else "")
        for s, c in zip(series, colors, strict=True)
    ]
    head = plan_heading(title, key if len(series) > 1 else ())
    ticks, left, right = x_layout(x0, x1, label_w + 10)
    bottom = bottom_margin()
    fig, ax = new_figure(head.height + pitch * max(n, 1) + bottom)

    step = SUB_ROW / pitch  # data units between two series on a row
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
                color=colors[j],
                linewidth=2.0,
            )
        points = [i for i in range(n) if math.isfinite(est[i])]
        if points:
            ax.plot(
                [est[i] for i in points],
                [ys[i] for i in points],
                "o",
                color=colors[j],
                markersize=4.5,
            )
    if reference is not None:
        ax.axvline(reference, color=MUTED, linestyle="--", linewidth=1)
    ax.set_ylim(-0.5, max(n, 1) - 0.5)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=True)
    draw_row_labels(fig, ax, list(range(n))[::-1], fitted, labels, tips)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        alt = f"{title}. Interval plot, {n} {rows}"
        if len(series) > 1:
            alt += ", " + " and ".join(str(s["name"]) for s in series) + " on each"
        if reference is not None:
            alt += f"; dashed reference line at {alt_number(reference)}"
        alt += "."
    return figure_svg(fig, f"fairengine-{salt}", alt, tips.texts)


def null_histogram_svg(
    title: str,
    edges: list[Any],
    counts: list[Any],
    observed: Any,
    marker_label: str = "observed",
    *,
    alt: str | None = None,
    values: str = "values",
) -> str:
    """A histogram (e.g. a permutation distribution) with one value marked (the observed
    statistic, a tolerance δ, …) and labelled ``marker_label``.

    ``edges`` has one more entry than ``counts``. A marked value outside the histogram's range
    is drawn at the nearer edge with an arrow and its value, so it is never lost. ``values``
    names what is counted in the alt text (``"permuted statistics"``…).
    """
    e = [as_float(x) for x in edges]
    c = [as_float(x) for x in counts]
    obs = as_float(observed)
    tips = Tooltips()
    head = plan_heading(title)
    bottom = bottom_margin()
    plot_h = 110.0
    fig, ax = new_figure(head.height + plot_h + bottom)
    x0, x1 = 0.0, 1.0
    inside = True
    if len(e) == len(c) + 1 and c:
        ax.stairs(c, e, fill=True, color=SERIES_COLORS[0], alpha=0.3, linewidth=0)
        ax.stairs(c, e, color=SERIES_COLORS[0], linewidth=0.8)
        lo, hi = e[0], e[-1]
        x0, x1 = value_span([lo, hi], pad=0.02)
        peak = max((v for v in c if math.isfinite(v)), default=0.0)
        top = 1.3 * peak if peak > 0 else 1.0
        ax.set_ylim(0, top)
        if math.isfinite(obs):
            tol = 1e-6 * max(abs(lo), abs(hi), 1.0)  # edges are stored to 6 decimals
            inside = lo - tol <= obs <= hi + tol
            x = obs if inside else (hi if obs > hi else lo)
            ax.axvline(x, color=OKABE_ITO["black"], linewidth=1.6)
            arrow = "" if inside else (" →" if obs > hi else " ←")
            right_half = x >= (lo + hi) / 2
            ax.text(
                x,
                top,
                f"{marker_label} {tick_text(float(f'{obs:.3g}'))}{arrow}",
                transform=offset_by(fig, ax.transData, dx=-3 if right_half else 3, dy=-2),
                color=OKABE_ITO["black"],
                fontsize=FONT,
                ha="right" if right_half else "left",
                va="top",
                parse_math=False,
            )
    ticks, left, right = x_layout(x0, x1, 10.0, 10.0)
    draw_axis(fig, ax, "x", x0, x1, ticks)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        alt = f"{title}. Histogram"
        if len(e) == len(c) + 1 and c:
            total = sum(v for v in c if math.isfinite(v))
            alt += f" of {total:,.0f} {values} from {alt_number(e[0])} to {alt_number(e[-1])}"
        alt += f"; {marker_label} {alt_number(obs)}"
        alt += "" if inside else " (outside the histogram's range)"
        alt += "."
    return figure_svg(fig, f"fairengine-null-{title}", alt, tips.texts)


def curve_svg(
    title: str,
    x: list[Any],
    series: list[dict[str, Any]],
    *,
    xlabel: str = "",
    hline: float | None = None,
    hline_label: str = "",
    alt: str | None = None,
) -> str:
    """Lines over a common x (``series`` items: ``{"name", "color", "values"}``; ``color``
    defaults to :data:`SERIES_COLORS` in order), each named at its end, with an optional
    horizontal reference line (e.g. the tolerance δ)."""
    xs = [as_float(v) for v in x]
    tips = Tooltips()
    colors = [_series_color(s, j) for j, s in enumerate(series)]
    lines = [[as_float(v) for v in s["values"]] for s in series]
    ys = [v for values in lines for v in values]
    if hline is not None:
        ys.append(hline)
    y0, y1 = value_span(ys)
    plot_h = 130.0
    yticks = fitting_ticks(y0, y1, plot_h, vertical=True, most=4)
    label_w = max((label_width(t) for t in yticks[1]), default=0.0)
    ends: list[tuple[float, str, bool, str]] = []  # (height in units, shown, complete, name)
    for s, values in zip(series, lines, strict=True):
        last = [v for v in values if math.isfinite(v)]
        if last:
            name = str(s["name"])
            fitted, complete = fit_lines(name, FONT, 0.3 * FIGURE_WIDTH, max_lines=1)
            ends.append(((last[-1] - y0) / (y1 - y0) * plot_h, fitted[0], complete, name))
    ends.sort()
    for i in range(1, len(ends)):  # keep end labels a line apart
        if ends[i][0] < ends[i - 1][0] + LINE * FONT:
            ends[i] = (ends[i - 1][0] + LINE * FONT, *ends[i][1:])
    end_w = max((label_width(shown) for _, shown, _, _ in ends), default=0.0)
    head = plan_heading(title)
    bottom = bottom_margin(bool(xlabel))
    x0, x1 = value_span(xs, pad=0.04)
    ticks, left, right = x_layout(x0, x1, label_w + TICK_SPACE + 4, end_w + 8)
    fig, ax = new_figure(head.height + plot_h + bottom)

    for values, color in zip(lines, colors, strict=True):
        ax.plot(xs, values, color=color, linewidth=1.6, marker="o", markersize=2.5)
    if hline is not None:
        ax.axhline(hline, color=MUTED, linestyle="--", linewidth=1)
        if hline_label:
            ax.text(
                0,
                hline,
                hline_label,
                transform=offset_by(fig, ax.get_yaxis_transform(), dx=4, dy=1),
                fontsize=FONT,
                va="bottom",
                color=MUTED,
                parse_math=False,
            )
    ax.spines["left"].set_visible(True)
    ax.spines["left"].set_color(AXIS_COLOR)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=True)
    draw_axis(fig, ax, "y", y0, y1, yticks, grid=True)
    for height, shown, complete, name in ends:

        def end_label(line: str, dy: float, height: float = height) -> Any:
            return ax.text(
                1,
                height / plot_h,
                line,
                transform=offset_by(fig, ax.transAxes, dx=5, dy=dy),
                ha="left",
                va="center",
                fontsize=FONT,
                color=LABEL_INK,
                clip_on=False,
                parse_math=False,
            )

        _draw_lines(tips, end_label, [shown], complete, name, FONT, center=True)
    if xlabel:
        ax.text(
            0.5,
            0,
            xlabel,
            transform=offset_by(fig, ax.transAxes, dy=-(TICK_SPACE + LINE * FONT + 3)),
            ha="center",
            va="top",
            fontsize=FONT,
            color=INK,
            parse_math=False,
        )
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        names = " and ".join(str(s["name"]) for s in series)
        alt = f"{title}. Line chart of {names} over {xlabel or 'x'} ({len(xs)} points)"
        if hline is not None:
            alt += f"; dashed line at {hline_label or 'reference'} {alt_number(hline)}"
        alt += "."
    return figure_svg(fig, f"fairengine-curve-{title}", alt, tips.texts)


def marginal_overlay_svg(
    title: str, edges: list[Any], series: list[dict[str, Any]], *, alt: str | None = None
) -> str:
    """Binned marginal distributions drawn as normalised step lines on shared bins
    (``series`` items: ``{"name", "color", "counts"}``; ``color`` defaults to
    :data:`SERIES_COLORS` in order), e.g. a group versus its flipset."""
    e = [as_float(x) for x in edges]
    tips = Tooltips()
    drawn: list[tuple[list[float], str, str]] = []
    for j, s in enumerate(series):
        c = [as_float(x) for x in s["counts"]]
        total = sum(x for x in c if math.isfinite(x))
        if total <= 0 or len(e) != len(c) + 1:
            continue
        drawn.append(([x / total for x in c], _series_color(s, j), f"{s['name']} (n={total:,.0f})"))
    head = plan_heading(title, [(name, color, "") for _, color, name in drawn])
    bottom = bottom_margin()
    plot_h = 110.0
    x0, x1 = value_span(e, pad=0.0)
    ticks, left, right = x_layout(x0, x1, 10.0, 10.0)
    fig, ax = new_figure(head.height + plot_h + bottom)
    peak = 0.0
    for share, color, _ in drawn:
        peak = max(peak, *(v for v in share if math.isfinite(v)))
        ax.stairs(share, e, color=color, linewidth=1.6)
    ax.set_ylim(0, 1.05 * peak if peak > 0 else 1)
    draw_axis(fig, ax, "x", x0, x1, ticks)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        names = ", ".join(name for _, _, name in drawn) or "no data"
        alt = f"{title}. Normalised histograms over {max(len(e) - 1, 0)} shared bins: {names}."
    return figure_svg(fig, f"fairengine-marginal-{title}", alt, tips.texts)


def _keep_rows(labels: Sequence[Any], sizes: Sequence[Any] | None) -> tuple[list[int], str]:
    """The rows drawn (at most :data:`MAX_PLOT_GROUPS`, the largest by ``sizes``, in their
    order) and the title's suffix saying so."""
    n = len(labels)
    if sizes is None or n <= MAX_PLOT_GROUPS:
        return list(range(n)), ""
    ranked = sorted(range(n), key=lambda i: -as_float(sizes[i]))
    return sorted(ranked[:MAX_PLOT_GROUPS]), f" (largest {MAX_PLOT_GROUPS} of {n} groups)"


def _signed_text(value: float) -> str:
    """``+∞``/``−∞`` (typographic minus) for an infinite value, ``undefined`` for NaN."""
    if math.isnan(value):
        return "undefined"
    return "+∞" if value > 0 else "−∞"


def signed_bars_svg(
    title: str,
    labels: Sequence[Any],
    series: Sequence[dict[str, Any]],
    *,
    reference: float = 0.0,
    sizes: Sequence[Any] | None = None,
    salt: str = "bars",
    alt: str | None = None,
    rows: str = "groups",
) -> str:
    """A diverging bar chart: one row per label, on each row one bar per series from
    ``reference`` (0 by default) to its value, with an optional interval drawn over the bar.

    ``series`` items: ``{"name", "color", "values": [...], "low": [...], "high": [...]}``
    (lists aligned with ``labels``; ``low``/``high`` optional; ``color`` defaults to
    :data:`SERIES_COLORS` in order); several series on a row are offset vertically, with a key
    under the title. An infinite value (a group absent from a top k has skew −∞) is a bar to
    the plot's edge ending in an arrow, with ``−∞``/``+∞`` written on the other side of the
    reference line; a NaN value is written ``undefined``. ``sizes`` (e.g. the groups' ``n``)
    picks the :data:`MAX_PLOT_GROUPS` largest rows when there are more. Interval whiskers are
    drawn in a neutral ink, so they stay visible over the bar. ``rows`` names the rows in the
    alt text. Returns an inline ``<svg>``.
    """
    keep, suffix = _keep_rows(labels, sizes)
    names = [labels[i] for i in keep]
    n = len(names)
    k = max(len(series), 1)
    tips = Tooltips()
    colors = [_series_color(s, j) for j, s in enumerate(series)]

    def column(s: dict[str, Any], key: str) -> list[float]:
        given = s.get(key)
        if not given:
            return [math.nan] * n
        return [as_float(given[i]) for i in keep]

    vals = [column(s, "values") for s in series]
    lows = [column(s, "low") for s in series]
    highs = [column(s, "high") for s in series]
    finite = [v for block in (*vals, *lows, *highs) for v in block if math.isfinite(v)]
    x0, x1 = value_span([*finite, reference], minimum=1e-6)
    odd = [(j, i) for j in range(len(series)) for i in range(n) if not math.isfinite(vals[j][i])]
    notes = _row_notes(vals, n)
    note_w = max((label_width(text) for text, _, _ in notes.values()), default=0.0) + 8
    fitted, label_w, label_lines = row_labels(names)
    plot_w = FIGURE_WIDTH - (label_w + 10) - 16
    if odd:  # room for the notes beside the reference line, and a bar's arrow beyond the data
        share = min(note_w / plot_w, 0.45)
        span = x1 - x0
        if any(vals[j][i] < 0 or math.isnan(vals[j][i]) for j, i in odd):
            x1 = max(x1, reference + share * span / (1 - share))
        if any(vals[j][i] > 0 for j, i in odd):
            x0 = min(x0, reference - share * span / (1 - share))
        if any(vals[j][i] == -math.inf for j, i in odd):
            x0 -= 0.1 * (x1 - x0)
        if any(vals[j][i] == math.inf for j, i in odd):
            x1 += 0.1 * (x1 - x0)
    pitch = row_pitch(label_lines, k)
    key = [(str(s["name"]), c, "s") for s, c in zip(series, colors, strict=True)]
    head = plan_heading(title + suffix, key if len(series) > 1 else ())
    ticks, left, right = x_layout(x0, x1, label_w + 10)
    bottom = bottom_margin()
    fig, ax = new_figure(head.height + pitch * max(n, 1) + bottom)

    step = SUB_ROW / pitch  # data units between two series on a row
    thick = (SUB_ROW - 2 if k > 1 else 10.0) / pitch
    for j in range(len(series)):
        offset = (j - (k - 1) / 2) * step
        ys = [(n - 1 - i) - offset for i in range(n)]
        inset = 0.03 * (x1 - x0)  # an arrow at the edge stays clear of the row labels
        ends = [
            min(max(v, x0 + inset), x1 - inset) if not math.isnan(v) else reference for v in vals[j]
        ]
        drawn = [i for i in range(n) if not math.isnan(vals[j][i])]
        if drawn:
            ax.barh(
                [ys[i] for i in drawn],
                [ends[i] - reference for i in drawn],
                height=thick,
                left=reference,
                color=colors[j],
                linewidth=0,
            )
        spans = [
            i
            for i in range(n)
            if math.isfinite(lows[j][i]) and math.isfinite(highs[j][i]) and i in drawn
        ]
        if spans:
            ax.hlines(
                [ys[i] for i in spans],
                [lows[j][i] for i in spans],
                [highs[j][i] for i in spans],
                color=LABEL_INK,
                linewidth=1.2,
            )
            ax.plot(
                [v for i in spans for v in (lows[j][i], highs[j][i])],
                [ys[i] for i in spans for _ in (0, 1)],
                linestyle="none",
                marker="|",
                markersize=min(thick * pitch, 8.0),
                markeredgewidth=1.2,
                color=LABEL_INK,
            )
        for i in range(n):
            v = vals[j][i]
            if math.isinf(v):
                ax.plot(
                    [ends[i]],
                    [ys[i]],
                    marker="<" if v < 0 else ">",
                    markersize=6,
                    color=colors[j],
                    linestyle="none",
                    clip_on=False,
                )
    for i, (text, right_side, undefined) in notes.items():
        ax.text(
            reference,
            n - 1 - i,
            text,
            transform=offset_by(fig, ax.transData, dx=4 if right_side else -4),
            ha="left" if right_side else "right",
            va="center",
            fontsize=FONT,
            fontstyle="italic" if undefined else "normal",
            color=MUTED if undefined else LABEL_INK,
            parse_math=False,
        )
    ax.axvline(reference, color=MUTED, linewidth=1)
    ax.set_ylim(-0.5, max(n, 1) - 0.5)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=True)
    draw_row_labels(fig, ax, list(range(n))[::-1], fitted, names, tips)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        alt = f"{title}{suffix}. Bar chart from {alt_number(reference)}, {n} {rows}"
        if len(series) > 1:
            alt += ", " + " and ".join(str(s["name"]) for s in series) + " on each"
        if any(math.isfinite(lo) for block in lows for lo in block):
            alt += ", with intervals"
        for j, s in enumerate(series):
            shown = [i for i in range(n) if not math.isnan(vals[j][i])]
            if shown:
                lo_i = min(shown, key=lambda i: vals[j][i])
                hi_i = max(shown, key=lambda i: vals[j][i])
                what = f" ({s['name']})" if len(series) > 1 else ""
                alt += f"; lowest{what} {names[lo_i]} {_alt_signed(vals[j][lo_i])}"
                alt += f", highest {names[hi_i]} {_alt_signed(vals[j][hi_i])}"
        alt += "."
    return figure_svg(fig, f"fairengine-{salt}-{title}", alt, tips.texts)


def _row_notes(vals: Sequence[Sequence[float]], n: int) -> dict[int, tuple[str, bool, bool]]:
    """Row -> (its series' non-finite values in words, whether the note goes right of the
    reference line, whether all of them are undefined), for the rows that have one."""
    notes: dict[int, tuple[str, bool, bool]] = {}
    for i in range(n):
        row = [v[i] for v in vals if not math.isfinite(v[i])]
        if row:
            words = ", ".join(dict.fromkeys(_signed_text(v) for v in row))
            notes[i] = (words, not all(v > 0 for v in row), all(math.isnan(v) for v in row))
    return notes


def _alt_signed(value: float) -> str:
    return alt_number(value) if math.isfinite(value) else _signed_text(value)


_UNDEFINED_STYLE: dict[str, Any] = {"fontstyle": "italic", "color": MUTED, "parse_math": False}
"""How a figure writes "undefined" where a value cannot be drawn."""


PART_COLORS: tuple[str, ...] = (
    OKABE_ITO["blue"],
    OKABE_ITO["sky_blue"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["yellow"],
    OKABE_ITO["black"],
)
"""The parts of a stacked bar in order (:func:`stacked_shares_svg`): the palette less the
decisions' colours, neighbours differing in lightness or hue."""


def stacked_shares_svg(
    title: str,
    labels: Sequence[Any],
    parts: Sequence[Any],
    shares: Sequence[Sequence[Any]],
    *,
    sizes: Sequence[Any] | None = None,
    salt: str = "shares",
    alt: str | None = None,
    rows: str = "groups",
) -> str:
    """One horizontal bar per row split into its parts' shares (e.g. a group's
    predicted-class distribution), in the order of ``parts``, on a 0–1 axis, with a key under
    the title naming the parts.

    ``shares[i][c]``: row i's share of part c (rows with no finite share are written
    ``undefined``). Each part has its own colour (:data:`PART_COLORS`) while there are at most
    as many parts as colours; with more, the parts with the largest total share keep theirs
    and the rest are drawn as one segment "other (m)" in the last colour, named in the key and
    the alt text (the report's tables list every part). ``sizes`` picks the
    :data:`MAX_PLOT_GROUPS` largest rows when there are more. Returns an inline ``<svg>``.
    """
    keep, suffix = _keep_rows(labels, sizes)
    names = [labels[i] for i in keep]
    n = len(names)
    tips = Tooltips()
    table = [[as_float(v) for v in shares[i]] for i in keep]
    m = len(parts)
    if m <= len(PART_COLORS):
        groups_of_parts = [[c] for c in range(m)]
        part_names = [str(p) for p in parts]
    else:
        total = [sum(row[c] for row in table if math.isfinite(row[c])) for c in range(m)]
        top = sorted(sorted(range(m), key=lambda c: -total[c])[: len(PART_COLORS) - 1])
        rest = [c for c in range(m) if c not in top]
        groups_of_parts = [[c] for c in top] + [rest]
        part_names = [str(parts[c]) for c in top]
        part_names.append(f"other ({len(rest)}: " + ", ".join(str(parts[c]) for c in rest) + ")")
    colors = list(PART_COLORS[: len(groups_of_parts)])
    fitted, label_w, label_lines = row_labels(names)
    pitch = row_pitch(label_lines)
    head = plan_heading(
        title + suffix, [(p, c, "s") for p, c in zip(part_names, colors, strict=True)]
    )
    x0, x1 = 0.0, 1.0
    ticks, left, right = x_layout(x0, x1, label_w + 10)
    bottom = bottom_margin()
    fig, ax = new_figure(head.height + pitch * max(n, 1) + bottom)

    ys = [n - 1 - i for i in range(n)]
    start = [0.0] * n
    for part, color in zip(groups_of_parts, colors, strict=True):
        width = [sum(table[i][c] for c in part if math.isfinite(table[i][c])) for i in range(n)]
        drawn = [i for i in range(n) if width[i] > 0]
        if drawn:
            ax.barh(
                [ys[i] for i in drawn],
                [width[i] for i in drawn],
                height=10.0 / pitch,
                left=[start[i] for i in drawn],
                color=color,
                linewidth=0,
            )
        start = [s + w for s, w in zip(start, width, strict=True)]
    undefined = [ys[i] for i in range(n) if not any(math.isfinite(v) for v in table[i])]
    for y in undefined:  # a row without shares (no rows of the group) says so in words
        ax.text(0.02, y, "undefined", va="center", fontsize=FONT, **_UNDEFINED_STYLE)
    ax.set_ylim(-0.5, max(n, 1) - 0.5)
    draw_axis(fig, ax, "x", x0, x1, ticks, grid=False)
    draw_row_labels(fig, ax, ys, fitted, names, tips)
    draw_heading(fig, head, tips)
    place_axes(fig, ax, left=left, bottom=bottom, top=head.height, right=right)

    if alt is None:
        alt = f"{title}{suffix}. Stacked bars, {n} {rows}, each split into "
        alt += ", ".join(part_names) + " in that order"
        for j, name in enumerate(part_names):
            part = groups_of_parts[j]
            row_share = [sum(table[i][c] for c in part) for i in range(n)]
            shown = [i for i in range(n) if math.isfinite(row_share[i])]
            if shown and n > 1:
                lo_i = min(shown, key=lambda i: row_share[i])
                hi_i = max(shown, key=lambda i: row_share[i])
                alt += f"; {name}: lowest {names[lo_i]} {alt_number(row_share[lo_i])}"
                alt += f", highest {names[hi_i]} {alt_number(row_share[hi_i])}"
        alt += "."
    return figure_svg(fig, f"fairengine-{salt}-{title}", alt, tips.texts)
