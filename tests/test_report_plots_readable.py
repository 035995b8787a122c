"""The report's plots are readable at the width the report shows them (issue 19).

:mod:`tasks.report.plots` states the rule: no text of any figure is shown smaller than
:data:`~tasks.report.plots.MIN_FONT_PX` (11 CSS px). A figure's SVG is scaled by CSS to the
figure's width, so a text's effective size is its font size × displayed width / viewBox width;
the displayed width assumed is the narrowest the report's CSS lets a figure be, the flex basis of
``figure.plot`` in ``templates/report.css`` (checked here against
:data:`~tasks.report.plots.FIGURE_MIN_PX`).

Checked on every figure function with realistic inputs (24 groups with long intersection names
as COMPAS and Adult give them, 45 groups, the methods' metric and feature names, histograms with
the observed value inside and beyond, a line chart, overlaid marginals):

* every ``<text>`` at least the minimum at the narrowest displayed width, and set in px with no
  scaling transform (so the arithmetic above is the whole story);
* every text inside the figure and no two texts overlapping (estimated from DejaVu Sans widths,
  the widest common sans-serif), so x axes drop ticks instead of crowding them;
* long group labels wrap or keep their full name in a ``<title>`` tooltip, and many groups make
  the figure taller, not its text smaller;
* ``role="img"`` and an ``aria-label`` naming the metric, the attribute and the number of groups;
* colours from the Okabe-Ito palette only (plus neutral greys for axes and text), decisions'
  colours kept apart from the data series'.

Then in real Chromium (as ``test_report_browser.py`` starts it), on a report of the real COMPAS
data (race × sex: group parity, the LiFT suite, permutation tests, intersectional fairness) and on
the every-method report (:mod:`report_full_audit`, for the line chart and marginal plots): every
``<text>`` of every plot, all ``<details>`` opened, is drawn at least the minimum size (computed
font size × the SVG's screen scale, and the glyph box's height), and every colour the figures use
is the palette's. Screenshots go to ``test-artifacts/report-plots-*.png``.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tasks.report import plots
from tasks.report.plots import (
    DECISION_COLORS,
    FIGURE_MIN_PX,
    FIGURE_WIDTH,
    MIN_FONT_PX,
    NEUTRALS,
    OKABE_ITO,
    PALETTE,
    SERIES_COLORS,
    SVG_SIZE_BUDGET,
    curve_svg,
    fitting_ticks,
    group_rates_svg,
    interval_forest_svg,
    marginal_overlay_svg,
    null_histogram_svg,
    text_width,
)

REPO = Path(__file__).resolve().parents[1]
CSS = REPO / "templates" / "report.css"

# ----------------------------------------------------------------------------- realistic inputs

COMPAS_RACES = (
    "African-American",
    "Asian",
    "Caucasian",
    "Hispanic",
    "Native American",
    "Other",
)
ADULT_RACES = ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")
LONG_GROUPS: list[str] = (
    [f"{r} × {s}" for r in COMPAS_RACES for s in ("Female", "Male")]
    + [f"{r} & {s}" for r in ADULT_RACES for s in ("Female", "Male")]
    + [
        "Native Hawaiian or Other Pacific Islander × Non-binary",
        "Zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",  # one unbreakable word: cut, full in <title>
    ]
)
assert len(LONG_GROUPS) == 24
METRICS = [
    "Empirical lift (labels)",
    "Impact ratio, slift (labels)",
    "Statistical parity (predictions)",
    "TPR parity (predictions)",
    "FPR parity (predictions)",
    "Equalized odds (predictions)",
]


def parity_groups(names: list[str]) -> list[dict[str, Any]]:
    """Groups in the JSON form of group parity's ``ParityGroup`` (one undefined TPR)."""
    groups = []
    for i, name in enumerate(names):
        p = 0.15 + 0.7 * ((i * 37) % 24) / 24
        w = 0.02 + 0.1 * (i % 5) / 4
        tpr: tuple[Any, Any, Any] = ("NaN", "NaN", "NaN") if i == 5 else (p, p - w, p + w)
        groups.append(
            {
                "group": name,
                "n": 40 + 97 * ((i * 11) % 24),
                "rates": {
                    "positive_rate": {"estimate": p, "low": max(p - w, 0), "high": min(p + w, 1)},
                    "tpr": dict(zip(("estimate", "low", "high"), tpr, strict=True)),
                    "fpr": {"estimate": p / 3, "low": "NaN", "high": "NaN"},
                },
            }
        )
    return groups


def rate_series(names: list[str]) -> list[dict[str, Any]]:
    base = [0.2 + 0.6 * ((i * 7) % 24) / 24 for i in range(len(names))]
    pos = [b * (0.8 + 0.03 * (i % 9)) for i, b in enumerate(base)]
    return [
        {
            "name": "base rate (labels)",
            "color": SERIES_COLORS[1],
            "estimate": base,
            "low": [b - 0.05 for b in base],
            "high": [b + 0.05 for b in base],
        },
        {
            "name": "positive rate (predictions)",
            "color": SERIES_COLORS[0],
            "estimate": pos,
            "low": [p - 0.04 for p in pos],
            "high": [p + 0.04 for p in pos],
        },
    ]


def null_counts(center: float) -> tuple[list[float], list[int]]:
    edges = [center - 3 + 0.3 * i for i in range(21)]
    counts = [int(400 * math.exp(-(((e - center + 2.85) / 0.9) ** 2))) for e in edges[:-1]]
    return edges, counts


def cases() -> dict[str, str]:
    """Every figure function on realistic inputs, by a readable name."""
    many = parity_groups(LONG_GROUPS)
    out = {
        f"group_rates {rate}, 24 long groups": group_rates_svg("race × sex", many, rate)
        for rate in ("positive_rate", "tpr", "fpr")
    }
    out["group_rates, 45 groups (30 drawn)"] = group_rates_svg(
        "zip_code", parity_groups([f"ZIP {10000 + 37 * i}" for i in range(45)]), "positive_rate"
    )
    out["group_rates, 2 groups"] = group_rates_svg("sex", parity_groups(["Female", "Male"]), "fpr")
    out["forest, 24 intersections x 2 series"] = interval_forest_svg(
        "Base rate and positive rate by race & sex (largest 24 of 30)",
        LONG_GROUPS,
        rate_series(LONG_GROUPS),
        salt="t-forest-24",
        rows="groups",
    )
    eps = [0.4 + 0.5 * i for i in range(6)]
    out["forest, epsilon by metric"] = interval_forest_svg(
        "ε by metric over race × sex × age_cat",
        METRICS,
        [
            {
                "name": "bootstrap",
                "estimate": eps,
                "low": [e - 0.2 for e in eps],
                "high": [e + 0.3 for e in eps],
            },
            {"name": "Bayesian", "low": [e - 0.25 for e in eps], "high": [e + 0.2 for e in eps]},
        ],
        salt="t-eps",
        rows="metrics",
    )
    out["forest, feature changes with reference"] = interval_forest_svg(
        "Mean change in F+ (advantaged: positive → negative), race: African-American → Caucasian",
        ["priors_count", "juv_fel_count", "age", "c_charge_degree_M", "days_b_screening_arrest"],
        [
            {
                "name": "mean difference",
                "estimate": [-2.1, 0.3, 4.5, -0.05, 12.0],
                "low": [-2.6, 0.1, 3.9, -0.1, 8.0],
                "high": [-1.7, 0.5, 5.2, 0.0, 15.5],
            }
        ],
        reference=0.0,
        salt="t-ft",
        rows="features",
    )
    out["forest, mitigation models"] = interval_forest_svg(
        "held-out ε (eo) before and after, target 0.2000",
        [
            "audited model",
            "randomization_only",
            "thresholds_only",
            "sequential",
            "overall (deployed)",
        ],
        [
            {
                "name": "posterior 95%",
                "estimate": [3.1, 0.3, 1.1, 1.0, 1.4],
                "low": [2.0, 0.1, 0.8, 0.7, 0.9],
                "high": [4.7, 1.5, 3.6, 3.5, 2.9],
            }
        ],
        reference=0.2,
        salt="t-mit",
    )
    edges, counts = null_counts(0.0)
    out["null histogram, observed inside"] = null_histogram_svg(
        "positive-prediction rate, race: African-American − Caucasian", edges, counts, 1.2
    )
    out["null histogram, observed far beyond"] = null_histogram_svg(
        "FPR, race × sex: Native American × Female − Other × Male", edges, counts, -65.5
    )
    out["null histogram, large numbers"] = null_histogram_svg(
        "Per-point loss ratio", [1 + 675 * i for i in range(21)], [900] + [4] * 19, 1.25, "δ"
    )
    steps = [0, 5, 10, 20, 30, 45, 75, 125, 200]
    out["curve, two series and a reference"] = curve_svg(
        "Loss ratio vs attack steps",
        steps,
        [
            {"name": "mean ratio", "values": [1 + s**1.4 / 1.0 for s in steps]},
            {"name": "lower bound", "values": [1 + s**1.4 / 1.1 for s in steps]},
        ],
        xlabel="steps of the gradient flow",
        hline=1.25,
        hline_label="δ",
    )
    bins = [-1.6 + 0.17 * i for i in range(21)]
    out["marginal overlay, three series"] = marginal_overlay_svg(
        "priors_count: African-American vs its flipsets",
        bins,
        [
            {"name": "African-American", "counts": [5 + (i * 7) % 13 for i in range(20)]},
            {"name": "F+", "counts": [2 + (i * 5) % 11 for i in range(20)]},
            {"name": "F−", "counts": [1 + (i * 3) % 7 for i in range(20)]},
        ],
    )
    return out


CASES = cases()

# ----------------------------------------------------------------------------- SVG reading

_TEXT = re.compile(r"<text\b([^>]*)>(.*?)</text>", re.S)
_FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")
_ANCHOR = re.compile(r"text-anchor:\s*(start|middle|end)")
_XY = re.compile(r'\b(x|y)="([-\d.e]+)"')
_TRANSFORM = re.compile(r'\btransform="([^"]*)"')
_TRANSLATE = re.compile(r"translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)")
_VIEWBOX = re.compile(r'viewBox="([-\d.e]+) ([-\d.e]+) ([-\d.e]+) ([-\d.e]+)"')
_STYLE_COLORS = re.compile(r'(?:style="[^"]*"|(?:fill|stroke)="[^"]*")')
_HEX = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
_ROOT = re.compile(r"<svg\b[^>]*>")


def viewbox(svg: str) -> tuple[float, float]:
    m = _VIEWBOX.search(svg)
    assert m, "every figure has a viewBox"
    return float(m.group(3)), float(m.group(4))


def texts(svg: str) -> list[dict[str, Any]]:
    """Every ``<text>``: its font size (units), anchor, position and text."""
    out = []
    for attrs, body in _TEXT.findall(svg):
        size = _FONT_SIZE.search(attrs)
        assert size, f"a text without a px font size: {attrs}"
        xy = dict(_XY.findall(attrs))
        transform = _TRANSFORM.search(attrs)
        if transform:
            assert "scale" not in transform.group(1) and "matrix" not in transform.group(1)
            assert "rotate" not in transform.group(1), "no rotated text"
            t = _TRANSLATE.search(transform.group(1))
            if t:
                xy = {"x": t.group(1), "y": t.group(2)}
        anchor = _ANCHOR.search(attrs)
        out.append(
            {
                "size": float(size.group(1)),
                "anchor": anchor.group(1) if anchor else "start",
                "x": float(xy.get("x", 0)),
                "y": float(xy.get("y", 0)),
                "text": html.unescape(body),
            }
        )
    return out


def box(t: dict[str, Any]) -> tuple[float, float, float, float]:
    """Estimated extent (left, top, right, bottom) of a text, in units: DejaVu Sans advance
    widths (the widest common sans-serif), ascent 0.76 em and descent 0.24 em from the
    baseline."""
    width = text_width(t["text"], t["size"]) * 72
    left = {"start": t["x"], "middle": t["x"] - width / 2, "end": t["x"] - width}[t["anchor"]]
    return left, t["y"] - 0.76 * t["size"], left + width, t["y"] + 0.24 * t["size"]


def colors(svg: str) -> set[str]:
    """Every hex colour the figure's drawing uses (styles and fill/stroke attributes)."""
    return {c.lower() for attr in _STYLE_COLORS.findall(svg) for c in _HEX.findall(attr)}


def css_rules(css: str) -> dict[str, dict[str, str]]:
    """Top-level rules of ``css`` (``@media`` blocks left out): selector -> declarations."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules: dict[str, dict[str, str]] = {}
    depth, start, selector = 0, 0, ""
    for i, ch in enumerate(css):
        if ch == "{":
            if depth == 0:
                selector = css[start:i].strip()
                start = i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                body = css[start:i]
                if not selector.startswith("@"):
                    decls = {}
                    for part in body.split(";"):
                        if ":" in part:
                            key, value = part.split(":", 1)
                            decls[key.strip()] = value.strip()
                    for sel in selector.split(","):
                        rules.setdefault(" ".join(sel.split()), {}).update(decls)
                start = i + 1
    return rules


def px(value: str) -> float:
    m = re.fullmatch(r"\s*([\d.]+)px\s*", value)
    assert m, f"expected a px length, got {value!r}"
    return float(m.group(1))


def figure_min_width() -> float:
    """The narrowest width (px) the report's CSS shows a figure at: ``figure.plot``'s flex
    basis (the SVG fills the figure's width)."""
    rules = css_rules(CSS.read_text(encoding="utf-8"))
    figure = rules.get("figure.plot")
    assert figure, "templates/report.css lays figures out with a figure.plot rule"
    basis = figure.get("flex-basis") or figure.get("flex", "").split()[-1]
    assert rules.get("figure.plot svg", {}).get("width") == "100%", "the SVG fills its figure"
    return px(basis)


# ----------------------------------------------------------------------------- static checks


def test_the_css_shows_figures_at_least_as_wide_as_the_plots_assume() -> None:
    narrowest = figure_min_width()
    assert narrowest == FIGURE_MIN_PX, (
        f"report.css's figure.plot flex basis is {narrowest}px; plots.FIGURE_MIN_PX "
        f"({FIGURE_MIN_PX}) states the narrowest width the font sizes are chosen for"
    )
    figure = css_rules(CSS.read_text(encoding="utf-8"))["figure.plot"]
    if "max-width" in figure:
        assert px(figure["max-width"]) >= narrowest


@pytest.mark.parametrize("name", list(CASES))
def test_every_text_is_at_least_the_minimum_at_the_narrowest_width(name: str) -> None:
    svg = CASES[name]
    width, _ = viewbox(svg)
    assert width == FIGURE_WIDTH
    found = texts(svg)
    assert found and len(found) == svg.count("<text")
    shown = figure_min_width()
    smallest = min(found, key=lambda t: t["size"])
    effective = smallest["size"] * shown / width
    assert effective >= MIN_FONT_PX - 1e-9, (
        f"{smallest['text']!r} is {effective:.1f}px at {shown:.0f}px wide (minimum {MIN_FONT_PX}px)"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_texts_stay_inside_the_figure_and_never_overlap(name: str) -> None:
    svg = CASES[name]
    width, height = viewbox(svg)
    boxes = [(t["text"], box(t)) for t in texts(svg)]
    for text, (left, top, right, bottom) in boxes:
        assert left >= -0.5 and right <= width + 0.5, f"{text!r} sticks out sideways"
        assert top >= -0.5 and bottom <= height + 0.5, f"{text!r} sticks out vertically"
    for (a, (l1, t1, r1, b1)), (b, (l2, t2, r2, b2)) in itertools.combinations(boxes, 2):
        overlap_x = min(r1, r2) - max(l1, l2)
        overlap_y = min(b1, b2) - max(t1, t2)
        assert overlap_x <= 0.5 or overlap_y <= 0.5, f"{a!r} overlaps {b!r}"
    assert len(svg.encode()) < SVG_SIZE_BUDGET


def test_long_group_labels_wrap_or_keep_their_full_name_in_a_title() -> None:
    svg = CASES["group_rates positive_rate, 24 long groups"]
    shown = [t["text"] for t in texts(svg)]
    titles = {html.unescape(t) for t in _TITLE.findall(svg)}
    for name in LONG_GROUPS:
        if name in shown:
            continue
        if name in titles:  # cut: the tooltip carries the whole name
            assert any(s.endswith("…") and s[:-1] in name for s in shown), name
            continue
        # wrapped: two consecutive lines make the name (broken after a space or a hyphen)
        assert any(name in (f"{a} {b}", a + b) for a, b in itertools.pairwise(shown)), (
            f"{name!r} is neither shown whole, nor wrapped, nor in a <title>"
        )
    assert "African-American ×" in shown and "Female" in shown  # broken after the ×
    assert LONG_GROUPS[-1] in titles  # the unbreakable word is cut, with its full name


def test_many_groups_make_a_taller_figure_not_smaller_text() -> None:
    few = CASES["group_rates, 2 groups"]
    many = CASES["group_rates positive_rate, 24 long groups"]
    assert viewbox(many)[0] == viewbox(few)[0]
    assert viewbox(many)[1] > 8 * viewbox(few)[1] / 2
    assert {t["size"] for t in texts(many)} == {t["size"] for t in texts(few)}
    capped = CASES["group_rates, 45 groups (30 drawn)"]
    assert "(largest 30 of 45 groups)" in " ".join(t["text"] for t in texts(capped))


def test_x_axes_drop_ticks_rather_than_crowd_them() -> None:
    """Five-digit tick labels on a short axis: fewer ticks, never fewer than two, and the
    labels of the drawn ones apart (the overlap test above checks every figure)."""
    wide, _ = fitting_ticks(0, 13_500, 260)
    narrow, labels = fitting_ticks(0, 13_500, 90)
    assert 2 <= len(narrow) < len(wide)
    spacing = (narrow[1] - narrow[0]) / 13_500 * 90
    assert max(text_width(t, plots.FONT) * 72 for t in labels) + 12 <= spacing


@pytest.mark.parametrize("name", list(CASES))
def test_every_plot_is_an_image_with_alt_text(name: str) -> None:
    root = _ROOT.search(CASES[name])
    assert root
    assert 'role="img"' in root.group(0)
    label = re.search(r'aria-label="([^"]+)"', root.group(0))
    assert label and len(html.unescape(label.group(1))) > 20


def test_alt_text_names_the_metric_the_attribute_and_the_groups() -> None:
    def label(name: str) -> str:
        root = _ROOT.search(CASES[name])
        assert root
        m = re.search(r'aria-label="([^"]+)"', root.group(0))
        assert m
        return html.unescape(m.group(1))

    tpr = label("group_rates tpr, 24 long groups")
    assert "true-positive rate" in tpr and "race × sex" in tpr and "24 groups" in tpr
    assert "undefined for 1 groups" in tpr
    capped = label("group_rates, 45 groups (30 drawn)")
    assert "30 groups (the largest of 45)" in capped
    forest = label("forest, 24 intersections x 2 series")
    assert "24 groups" in forest and "base rate (labels) and positive rate" in forest
    assert "6 metrics" in label("forest, epsilon by metric")
    assert "observed −65.5" in label("null histogram, observed far beyond") or (
        "observed -65.5" in label("null histogram, observed far beyond")
    )
    assert "outside the histogram's range" in label("null histogram, observed far beyond")
    assert "mean ratio and lower bound" in label("curve, two series and a reference")
    assert "<" not in CASES["forest, epsilon by metric"].split(">", 1)[0].split("aria-label")[1]
    # the caller's own words win
    own = group_rates_svg("sex", parity_groups(["a", "b"]), "tpr", alt="Custom <alt> text")
    assert 'aria-label="Custom &lt;alt&gt; text"' in own


def test_the_palette_is_okabe_ito_and_decisions_keep_their_own_colours() -> None:
    assert set(OKABE_ITO.values()) == {
        "#000000",
        "#e69f00",
        "#56b4e9",
        "#009e73",
        "#f0e442",
        "#0072b2",
        "#d55e00",
        "#cc79a7",
    }
    assert PALETTE == {*OKABE_ITO.values(), "#999999"}
    assert DECISION_COLORS["reject"] == "#d55e00"  # vermillion
    assert DECISION_COLORS["fail_to_reject"] == "#009e73"  # bluish green
    assert DECISION_COLORS["undetermined"] == "#e69f00"  # orange
    assert DECISION_COLORS["not_tested"] == "#999999"  # grey
    main = [DECISION_COLORS[d] for d in ("reject", "fail_to_reject", "undetermined", "not_tested")]
    assert len(set(main)) == 4
    assert set(DECISION_COLORS.values()) <= PALETTE
    assert set(SERIES_COLORS) <= PALETTE
    assert not set(SERIES_COLORS) & set(DECISION_COLORS.values())  # a series is no decision
    assert not set(NEUTRALS) & PALETTE


@pytest.mark.parametrize("name", list(CASES))
def test_every_plot_draws_with_the_palette_only(name: str) -> None:
    used = colors(CASES[name])
    assert used, "a figure draws something in colour"
    assert used <= PALETTE | set(NEUTRALS), used - PALETTE - set(NEUTRALS)
    assert used & PALETTE, "data is drawn in palette colours"


def test_series_colours_default_to_the_palette_in_order() -> None:
    svg = interval_forest_svg(
        "t",
        ["a", "b"],
        [
            {"name": "one", "estimate": [0.1, 0.2], "low": [0, 0.1], "high": [0.2, 0.3]},
            {"name": "two", "estimate": [0.3, 0.4], "low": [0.2, 0.3], "high": [0.4, 0.5]},
        ],
    )
    assert set(SERIES_COLORS[:2]) <= colors(svg)
    assert plots.RATE_COLORS["tpr"] == SERIES_COLORS[0]


# ----------------------------------------------------------------------------- real Chromium

BROWSER_DATA = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  return [...document.querySelectorAll('svg')].map(svg => {
    const rect = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].map(t => {
      const m = t.getScreenCTM();
      const scale = m ? Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)) : 0;
      const size = parseFloat(getComputedStyle(t).fontSize) * scale;
      const bbox = t.getBoundingClientRect();
      return {text: t.textContent, size, height: bbox.height, width: bbox.width};
    });
    return {
      width: rect.width,
      inFigure: !!svg.closest('figure.plot'),
      role: svg.getAttribute('role'),
      label: svg.getAttribute('aria-label') || '',
      texts,
    };
  });
}"""


@pytest.fixture(scope="module")
def real_reports(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> dict[str, Path]:
    """Reports of the real COMPAS data (race × sex) and of the every-method audit."""
    import pandas as pd
    from report_full_audit import build_full_audit

    from fairengine.config import AuditConfig
    from fairengine.dataset import AuditDataset
    from fairengine.group_metrics import run_group_metrics
    from fairengine.group_parity import group_parity
    from fairengine.intersectional import run_intersectional
    from fairengine.permutation import run_permutation_tests
    from fairengine.roles import ColumnRoles
    from fairengine.verdict import finalize_audit
    from tasks.report import write_report

    frame = pd.read_csv(shared_dir / "data" / "compas" / "compas-scores-two-years.csv.gz")
    frame = frame.loc[:, ~frame.columns.duplicated()]
    frame = frame[["sex", "race", "decile_score", "two_year_recid"]].copy()
    frame["score"] = frame["decile_score"] / 10
    roles = ColumnRoles(label="two_year_recid", protected=("race", "sex"), score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.45)
    cfg = AuditConfig.from_dict(
        {
            "name": "compas-race-sex",
            "data": {"path": "compas-scores-two-years.csv.gz"},
            "columns": {"label": "two_year_recid", "protected": ["race", "sex"], "score": "score"},
            "threshold": 0.45,
            "methods": {
                "permutation_tests": {"n_permutations": 199},
                "intersectional": {
                    "attributes": ["race", "sex"],
                    "n_bootstrap": 200,
                    "n_posterior": 400,
                },
            },
            "mlflow": {"enabled": False},
        }
    )
    m = cfg.methods
    compas = finalize_audit(
        config=cfg.to_dict(),
        dataset={**ds.summary(), "name": "COMPAS two-year recidivism"},
        model={"name": "COMPAS decile score", "version": "1"},
        validation=None,
        methods=[
            group_parity(ds, tolerance=0.05),
            run_group_metrics(ds, m.group_metrics, seed=0),
            run_permutation_tests(ds, m.permutation_tests, seed=0),
            run_intersectional(ds, m.intersectional, seed=0),
        ],
    )
    out = tmp_path_factory.mktemp("plots-readable")
    gallery = out / "gallery.html"
    gallery.write_text(gallery_page(), encoding="utf-8")
    return {
        "compas": write_report(compas, out / "compas"),
        "full": write_report(build_full_audit("small", seed=0, validate=False), out / "full"),
        "gallery": gallery,
    }


def gallery_page() -> str:
    """The realistic cases above laid out as the report lays out figures (its CSS, ``.plots``
    rows of ``figure.plot``), in a page as wide as the report's."""
    figures = "\n".join(
        f'<figure class="plot">{svg}<figcaption>{html.escape(name)}</figcaption></figure>'
        for name, svg in CASES.items()
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>plots</title>'
        f'<style>{CSS.read_text(encoding="utf-8")}</style></head><body><div class="page">'
        f'<div class="plots">{figures}</div></div></body></html>'
    )


@pytest.fixture(scope="module")
def rendered(real_reports: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Per report: every SVG's displayed width, role, label and texts' rendered sizes, read in
    headless Chromium at 1,400 × 900 with every ``<details>`` open; screenshots saved."""
    from playwright.sync_api import sync_playwright
    from test_report_browser import ARTIFACTS, CHROMIUM_FLAGS, chromium_path

    executable = chromium_path()
    data: dict[str, list[dict[str, Any]]] = {}
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for name, path in real_reports.items():
                page.goto(path.as_uri(), wait_until="load")
                data[name] = page.evaluate(BROWSER_DATA)
                figures = page.query_selector_all("figure.plot")
                if name == "gallery":
                    page.screenshot(
                        path=str(ARTIFACTS / "report-plots-gallery.png"), full_page=True
                    )
                    continue
                for i in (0, len(figures) // 2, len(figures) - 1) if figures else ():
                    figures[i].screenshot(path=str(ARTIFACTS / f"report-plots-{name}-{i}.png"))
        finally:
            browser.close()
    return data


@pytest.mark.parametrize("report", ["compas", "full", "gallery"])
def test_every_plot_text_renders_at_least_the_minimum_in_chromium(
    rendered: dict[str, list[dict[str, Any]]], report: str
) -> None:
    svgs = rendered[report]
    assert len(svgs) >= {"compas": 20, "full": 30, "gallery": len(CASES)}[report]
    smallest = min(
        ((t["size"], t["text"], s["label"]) for s in svgs for t in s["texts"]),
        default=None,
    )
    assert smallest is not None
    assert smallest[0] >= MIN_FONT_PX - 0.01, f"{smallest[1]!r} drawn at {smallest[0]:.2f}px"
    for s in svgs:
        if s["inFigure"]:  # the layout keeps figures at least as wide as the plots assume
            assert s["width"] >= FIGURE_MIN_PX - 0.5, f"a figure shown {s['width']}px wide"
        assert s["role"] == "img" and s["label"], "every plot is an image with alt text"
        for t in s["texts"]:
            if t["text"].strip():  # the drawn glyph box is as tall as the type size
                assert t["height"] >= MIN_FONT_PX - 0.01, (t, s["label"])


def test_real_reports_draw_their_plots_with_the_palette_only(
    real_reports: dict[str, Path],
) -> None:
    for path in (real_reports["compas"], real_reports["full"]):
        page = path.read_text(encoding="utf-8")
        svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
        assert svgs
        used = set().union(*(colors(s) for s in svgs))
        assert used <= PALETTE | set(NEUTRALS), used - PALETTE - set(NEUTRALS)


def test_the_compas_report_shows_its_intersections_whole(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """The race × sex plots name all 12 intersections, wrapped at most (none cut)."""
    shown = " ".join(t["text"] for s in rendered["compas"] for t in s["texts"])
    for race in COMPAS_RACES:
        assert race in shown
    labels = [s["label"] for s in rendered["compas"]]
    assert any("12 groups" in x or "12 intersections" in x for x in labels), labels
