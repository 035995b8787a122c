"""The report views of the regression, multiclass and ranking methods (issue "Beyond binary
classifiers": report views per task).

Each method runs on a small synthetic :class:`~fairengine.dataset.AuditDataset` (as
``tests/test_{regression,multiclass,ranking}_task.py`` build them) and its result is rendered in
a whole report (:func:`tasks.report.render_report` of :func:`fairengine.verdict.finalize_audit`)
with ``FAIRENGINE_STRICT_REPORT=1``, so a view that raises fails the test. Checked:

* every number of the view's tables is the typed details' value, formatted as the rest of the
  report formats it (:mod:`tasks.report.format`), cell by cell, read back from the HTML;
* every figure is well-formed XML, an image with alt text, drawn in the Okabe-Ito palette,
  with text no smaller than the report's minimum, inside the figure and never overlapping
  (the checks of ``tests/test_report_plots_readable.py``);
* the edge cases: a group absent from a top k (skew −∞), a weighted regression, K = 7 classes
  (the plot keeps 4 colours and draws the other classes as one), one list and no relevance;
* a result read back from its JSON draws the same report;
* in Chromium at 1,400 × 900 with every ``<details>`` open: nothing clipped, numbers never
  wrapped, the views' tables fit without scrolling (K = 7 classes included), every figure at
  least its 300 px minimum; screenshots under ``test-artifacts/report-task-view-*.png``.
"""

from __future__ import annotations

import html
import itertools
import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_report_browser import ARTIFACTS, CHROMIUM_FLAGS, chromium_path
from test_report_plots_readable import box, colors, texts, viewbox
from test_report_real_audits_browser import CLIPPING, OPEN_ALL, VIEWPORT

import fairengine.registry  # noqa: F401  (registers the methods' details types)
from fairengine.dataset import AuditDataset
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.method import run_multiclass_metrics
from fairengine.multiclass.result import MulticlassDetails
from fairengine.ranking.config import RankingConfig
from fairengine.ranking.method import run_ranking_metrics
from fairengine.ranking.result import RankingDetails
from fairengine.regression.config import RegressionConfig
from fairengine.regression.method import run_regression_metrics
from fairengine.regression.result import RegressionDetails
from fairengine.results import AuditResult, MethodResult
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit
from tasks.report import render_report
from tasks.report.format import fmt_count, fmt_interval, fmt_number, fmt_pvalue, fmt_rate
from tasks.report.methods import VIEWS
from tasks.report.plots import (
    FONT,
    MAX_PLOT_GROUPS,
    NEUTRALS,
    PALETTE,
    PART_COLORS,
    signed_bars_svg,
    stacked_shares_svg,
)
from tasks.report.views import multiclass_metrics, ranking_metrics, regression_metrics

LONG = "Native Hawaiian or Other Pacific Islander"
RACES = ("White", "Black", LONG)

# ----------------------------------------------------------------------------- results


def _regression(weighted: bool = False) -> MethodResult:
    rng = np.random.default_rng(11)
    n = 900
    race = rng.choice(RACES, size=n, p=[0.5, 0.3, 0.2])
    sex = rng.choice(["female", "male"], size=n)
    x = rng.normal(size=n)
    y = 2 * x + rng.normal(size=n) + 0.6 * (race == "Black")
    df = pd.DataFrame({"y": y, "pred": 2 * x, "race": race, "sex": sex})
    weight = None
    if weighted:
        df["w"] = rng.uniform(0.5, 2.0, size=n)
        weight = "w"
    roles = ColumnRoles(label="y", protected=("race", "sex"), score="pred", weight=weight)
    ds = AuditDataset.from_frame(df, roles, task="regression")
    cfg = RegressionConfig(n_permutations=99, loss_bound=1.1)
    res = run_regression_metrics(ds, cfg, seed=1)
    assert res.status == "ok", res.reason
    return res


def _multiclass(k: int = 3) -> MethodResult:
    rng = np.random.default_rng(12)
    n = 300 * k
    classes = ["High", "Low", "Medium"] if k == 3 else [f"grade {c}" for c in range(k)]
    race = rng.choice(RACES, size=n, p=[0.5, 0.3, 0.2])
    truth = rng.choice(classes, size=n)
    keep = rng.random(n) < 0.6
    pred = np.where(keep, truth, rng.choice(classes, size=n))
    pred = np.where((race == "Black") & (rng.random(n) < 0.2), classes[0], pred)
    df = pd.DataFrame({"truth": truth, "pred": pred, "race": race})
    roles = ColumnRoles(label="truth", protected=("race",), score="pred")
    ds = AuditDataset.from_frame(df, roles, task="multiclass")
    res = run_multiclass_metrics(ds, MulticlassConfig(n_permutations=49), seed=2)
    assert res.status == "ok", res.reason
    return res


def _ranking(lists: bool = True, ties: str = "order") -> MethodResult:
    """20 lists of 30 items; the group "Absent" always ranks last, so it has no place in the
    top 10% (skew −∞) of any list."""
    rng = np.random.default_rng(13)
    n = 600
    group = rng.choice(["A", LONG, "Absent"], size=n, p=[0.6, 0.3, 0.1])
    score = rng.normal(size=n) - 0.5 * (group == LONG) - 10.0 * (group == "Absent")
    df = pd.DataFrame(
        {
            "query": np.repeat([f"q{i}" for i in range(20)], 30),
            "group": group,
            "score": score,
            "clicked": (score + rng.normal(size=n) > 0.3).astype(int),
        }
    )
    roles = ColumnRoles(
        label="clicked" if lists else None,
        protected=("group",),
        score="score",
        list_id="query" if lists else None,
    )
    ds = AuditDataset.from_frame(df, roles, task="ranking")
    res = run_ranking_metrics(ds, RankingConfig(n_permutations=49, ties=ties), seed=3)
    assert res.status == "ok", res.reason
    return res


def _render(result: MethodResult) -> str:
    audit = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[result])
    page = render_report(audit)
    assert "could not draw" not in page
    assert "Details (raw JSON)" not in page  # the method's own view drew it
    return page


@pytest.fixture(scope="module", autouse=True)
def strict(request: pytest.FixtureRequest) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("FAIRENGINE_STRICT_REPORT", "1")  # a view that raises fails the report
    request.addfinalizer(mp.undo)


@pytest.fixture(scope="module")
def regression() -> tuple[MethodResult, str]:
    res = _regression()
    return res, _render(res)


@pytest.fixture(scope="module")
def multiclass() -> tuple[MethodResult, str]:
    res = _multiclass()
    return res, _render(res)


@pytest.fixture(scope="module")
def ranking() -> tuple[MethodResult, str]:
    res = _ranking()
    return res, _render(res)


# ----------------------------------------------------------------------------- reading HTML


class _Tables(HTMLParser):
    """Every ``<table>``: its class and its body rows as lists of cell texts (the texts of a
    cell's parts joined by one space: ``0.1234 [0.1000, 0.1500]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join(" ".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1][1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and data.strip():
            self._cell.append(data.strip())


def tables(page: str, css_class: str) -> list[list[list[str]]]:
    """The body rows of every table whose class list holds ``css_class``, in page order."""
    parser = _Tables()
    parser.feed(page)
    return [rows for cls, rows in parser.tables if css_class in cls.split()]


def svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, re.S)


def with_iv(value: float, low: float, high: float, fmt: Any = fmt_number) -> str:
    return f"{fmt(value)} {fmt_interval(low, high, fmt)}"


def check_figure(svg: str) -> None:
    """Well-formed, an image with alt text, palette colours, readable text that stays inside
    the figure and never overlaps (``tests/test_report_plots_readable.py``'s rules)."""
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert root.get("role") == "img" and len(root.get("aria-label") or "") > 20
    used = colors(svg)
    assert used & PALETTE and used <= PALETTE | set(NEUTRALS), used - PALETTE - set(NEUTRALS)
    width, height = viewbox(svg)
    found = texts(svg)
    assert found and min(t["size"] for t in found) >= FONT
    boxes = [(t["text"], box(t)) for t in found]
    for text, (left, top, right, bottom) in boxes:
        assert -0.5 <= left and right <= width + 0.5, f"{text!r} sticks out sideways"
        assert -0.5 <= top and bottom <= height + 0.5, f"{text!r} sticks out vertically"
    for (a, (l1, t1, r1, b1)), (b, (l2, t2, r2, b2)) in itertools.combinations(boxes, 2):
        assert min(r1, r2) - max(l1, l2) <= 0.5 or min(b1, b2) - max(t1, t2) <= 0.5, (a, b)


def alt(svg: str) -> str:
    m = re.search(r'aria-label="([^"]+)"', svg)
    assert m
    return html.unescape(m.group(1))


def shown_text(svg: str) -> str:
    return " ".join(t["text"] for t in texts(svg))


# ----------------------------------------------------------------------------- registry


def test_the_three_methods_have_views_registered() -> None:
    for name, module, details in (
        ("regression_metrics", regression_metrics, RegressionDetails),
        ("multiclass_metrics", multiclass_metrics, MulticlassDetails),
        ("ranking_metrics", ranking_metrics, RankingDetails),
    ):
        assert module.METHOD == name and VIEWS[name].details is details
        assert VIEWS[name].template == f"methods/{name}.html.j2"


# ----------------------------------------------------------------------------- regression


def test_regression_group_tables_show_the_details(regression) -> None:
    res, page = regression
    d = res.details
    assert isinstance(d, RegressionDetails)
    shown = tables(page, "reg-groups")
    assert len(shown) == len(d.attributes) == 2
    for a, rows in zip(d.attributes, shown, strict=True):
        assert len(rows) == len(a.summaries.groups)
        for g, row in zip(a.summaries.groups, rows, strict=True):
            expected = [g.group, fmt_count(g.n)] + [
                with_iv(e.value, e.interval.low, e.interval.high)
                for e in (g.estimate(q) for q, _ in regression_metrics.COLUMNS)
            ]
            assert row == expected
    assert LONG in page and "Groups of race" in page and "Groups of sex" in page


def test_regression_bounded_group_loss_table(regression) -> None:
    res, page = regression
    d = res.details
    assert isinstance(d, RegressionDetails)
    shown = tables(page, "reg-bounded")
    assert len(shown) == 2
    readings = set()
    for a, rows in zip(d.attributes, shown, strict=True):
        assert a.bounded is not None
        for g, row in zip(a.bounded.groups, rows, strict=True):
            assert row[:6] == [
                g.group,
                fmt_count(g.n),
                fmt_number(g.mean_loss),
                fmt_number(g.lower),
                fmt_number(g.upper),
                fmt_pvalue(g.pvalue),
            ]
            # the reading follows the bounds: certified, exceeded, or open
            if g.upper <= a.bounded.bound:
                assert row[6].startswith("within ζ")
            elif g.lower > a.bounded.bound:
                assert row[6].startswith("exceeds ζ")
            else:
                assert row[6].startswith("not settled")
            readings.add(row[6].split(" (")[0])
    assert f"against ζ = {1.1:g}" in page
    assert len(readings) >= 2  # the fixture's bound sits among the groups' losses


def test_regression_plots_show_the_bias_with_intervals(regression) -> None:
    res, page = regression
    d = res.details
    assert isinstance(d, RegressionDetails)
    figures = svgs(page)
    assert len(figures) == 2 * len(d.attributes)
    for svg in figures:
        check_figure(svg)
    race = d.attributes[0].summaries
    bias = next(s for s in figures if "Bias (target − prediction) by race" in alt(s))
    black = race.group("Black").mean_residual.value
    assert black > 0.3  # the fixture's shift (0.6), well outside the others' intervals
    assert f"highest Black {black:.3g}" in alt(bias) and "with intervals" in alt(bias)
    assert LONG.split()[0] in shown_text(bias)  # the long name is drawn (wrapped)
    means = next(s for s in figures if "Mean target and mean prediction by race" in alt(s))
    assert "mean target and mean prediction on each" in alt(means)


def test_a_weighted_regression_shows_weights_and_effective_sizes() -> None:
    res = _regression(weighted=True)
    d = res.details
    assert isinstance(d, RegressionDetails) and d.attributes[0].summaries.weighted
    rows = tables(_render(res), "reg-groups")[0]
    for g, row in zip(d.attributes[0].summaries.groups, rows, strict=True):
        assert row[1:4] == [
            fmt_count(g.n),
            fmt_count(g.weight_total),
            fmt_count(round(g.n_effective, 1)),
        ]
        assert g.n_effective < g.n  # unequal weights lose effective size
        assert row[6] == with_iv(
            g.mean_residual.value, g.mean_residual.interval.low, g.mean_residual.interval.high
        )


# ----------------------------------------------------------------------------- multiclass


def test_multiclass_rate_tables_show_every_class(multiclass) -> None:
    res, page = multiclass
    d = res.details
    assert isinstance(d, MulticlassDetails)
    shown = tables(page, "mc-rates")
    assert len(shown) == 3 * len(d.attributes)
    rates = d.attributes[0].rates
    for (metric, _, _), rows in zip(multiclass_metrics.RATES, shown, strict=True):
        for g, row in zip(rates.groups, rows, strict=True):
            cells = [
                with_iv(r.value, r.interval.low, r.interval.high, fmt_rate)
                for r in getattr(g, metric)
            ]
            assert row == [g.group, fmt_count(g.n), *cells]
    # the selection rates are each group's predicted-class distribution
    for g in rates.groups:
        assert math.isclose(sum(r.value for r in g.selection), 1.0, abs_tol=1e-12)
    assert "Wilson score intervals" in page


def test_multiclass_epsilon_table(multiclass) -> None:
    res, page = multiclass
    d = res.details
    assert isinstance(d, MulticlassDetails)
    eps = d.attributes[0].epsilon
    assert eps is not None
    (row,) = tables(page, "mc-epsilon")[0]
    assert row[0] == fmt_number(eps.epsilon) and row[1] == fmt_number(eps.epsilon_empirical)
    assert (
        row[2]
        == f"class {eps.class_label}: {eps.group_high} (most often predicted) vs {eps.group_low}"
    )
    assert row[3:] == [fmt_number(v) for v in eps.per_class]
    assert eps.epsilon == max(eps.per_class)


def test_multiclass_plot_stacks_the_predicted_classes(multiclass) -> None:
    res, page = multiclass
    d = res.details
    assert isinstance(d, MulticlassDetails)
    (svg,) = svgs(page)
    check_figure(svg)
    drawn = shown_text(svg)
    for c in d.classes:
        assert c in drawn  # the key names every class
    assert set(PART_COLORS[: len(d.classes)]) <= colors(svg)
    black = d.attributes[0].rates.group("Black").selection[0].value
    assert f"{d.classes[0]}: lowest" in alt(svg) and f"highest Black {black:.3g}" in alt(svg)


def test_seven_classes_stay_readable() -> None:
    res = _multiclass(k=7)
    d = res.details
    assert isinstance(d, MulticlassDetails) and len(d.classes) == 7
    page = _render(res)
    for rows in tables(page, "mc-rates"):
        assert all(len(row) == 2 + 7 for row in rows)
    (svg,) = svgs(page)
    check_figure(svg)
    used = colors(svg) & PALETTE
    assert used == set(PART_COLORS)  # five colours: four classes and "other"
    assert "other (3: " in shown_text(svg)


# ----------------------------------------------------------------------------- ranking


def test_ranking_group_table_shows_shares_skews_and_exposure(ranking) -> None:
    res, page = ranking
    d = res.details
    assert isinstance(d, RankingDetails) and d.n_lists == 20 and d.relevance
    s = d.attributes[0].statistics
    (rows,) = tables(page, "rank-groups")
    for gi, (g, row) in enumerate(zip(s.exposure.groups, rows, strict=True)):
        expected = [g.group, fmt_count(g.n), fmt_rate(g.n / s.n_items)]
        for t in s.topk:
            share = t.groups[gi]
            expected += [
                f"{fmt_rate(share.share_top)} {fmt_count(share.n_top)} of {fmt_count(t.n_top)}",
                fmt_rate(share.share_expected),  # 20 lists: the expected share is shown
                fmt_number(share.skew),
            ]
        expected += [
            fmt_number(g.mean_exposure),
            fmt_number(g.mean_relevance),
            fmt_number(g.exposure_per_relevance),
        ]
        assert row == expected
    absent = s.topk[0].group("Absent")
    assert absent.n_top == 0 and absent.skew == -math.inf
    assert fmt_number(absent.skew) == "-∞" and "-∞" in next(r for r in rows if r[0] == "Absent")
    assert "20 lists" in page and "ranked in row order" in page
    assert f"NDKL {fmt_number(s.ndkl.value)}" in page
    assert f"range {fmt_number(s.ndkl.min_list)} to {fmt_number(s.ndkl.max_list)}" in page


def test_ranking_precision_and_recall(ranking) -> None:
    res, page = ranking
    d = res.details
    assert isinstance(d, RankingDetails)
    s = d.attributes[0].statistics
    (rows,) = tables(page, "rank-precision")
    assert len(rows) == len(s.exposure.groups) + 1 and rows[-1][0] == "All items"
    for i, row in enumerate(rows):
        cells = []
        for p in s.precision:
            g = p.overall if i == len(rows) - 1 else p.groups[i]
            cells += [
                f"{fmt_rate(g.precision)} {fmt_count(g.n_relevant_top)} of {fmt_count(g.n_top)}",
                f"{fmt_rate(g.recall)} {fmt_count(g.n_relevant_top)} of {fmt_count(g.n_relevant)}",
            ]
        assert row[1:] == cells


def test_ranking_skew_plot_diverges_around_zero(ranking) -> None:
    res, page = ranking
    d = res.details
    assert isinstance(d, RankingDetails)
    (svg,) = svgs(page)
    check_figure(svg)
    drawn = shown_text(svg)
    assert "−∞" in drawn  # the absent group's bar runs off the axis, with its value written
    for label in d.cutoffs:
        assert label in drawn  # the key names each cutoff
    assert "Bar chart from 0" in alt(svg) and "lowest (top 10%) Absent −∞" in alt(svg)


def test_one_list_without_relevance_and_the_error_tie_policy() -> None:
    res = _ranking(lists=False, ties="error")
    d = res.details
    assert isinstance(d, RankingDetails) and d.n_lists == 1 and not d.relevance
    page = _render(res)
    assert "600 items in 1 list (one ranking of all items)" in page
    assert "tied scores within a list are refused" in page
    assert not tables(page, "rank-precision")
    (rows,) = tables(page, "rank-groups")
    s = d.attributes[0].statistics
    assert len(rows[0]) == 3 + 2 * len(s.topk) + 1  # no expected-share or relevance columns
    assert "NDKL" in page and "one list" in page


# ----------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("which", ["regression", "multiclass", "ranking"])
def test_a_result_read_back_from_json_draws_the_same_report(
    which: str, request: pytest.FixtureRequest
) -> None:
    res, _ = request.getfixturevalue(which)
    audit = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[res])
    again = AuditResult.from_json(audit.to_json())
    assert type(again.methods[0].details) is type(res.details)
    assert again.methods[0].details.to_dict() == res.details.to_dict()
    assert render_report(again) == render_report(audit)


# ----------------------------------------------------------------------------- the plot helpers


def test_signed_bars_draw_infinite_and_undefined_values_in_words() -> None:
    svg = signed_bars_svg(
        "Skew@k by race × sex",
        ["African-American × Female", "Caucasian × Male", LONG + " × Non-binary", "Other"],
        [
            {"name": "top 10%", "values": [-math.inf, 0.2, math.nan, math.inf]},
            {"name": "top 20%", "values": [-1.5, 0.1, 0.3, 0.8]},
        ],
    )
    check_figure(svg)
    drawn = [t["text"] for t in texts(svg)]
    assert "−∞" in drawn and "+∞" in drawn and "undefined" in drawn
    assert "African-American ×" in drawn  # long names wrap after the ×


def test_signed_bars_keep_the_largest_groups() -> None:
    names = [f"ZIP {10000 + 37 * i}" for i in range(MAX_PLOT_GROUPS + 5)]
    values = [0.01 * (i - 17) for i in range(len(names))]
    svg = signed_bars_svg(
        "Bias by zip code",
        names,
        [
            {
                "name": "bias",
                "values": values,
                "low": [v - 0.05 for v in values],
                "high": [v + 0.05 for v in values],
            }
        ],
        sizes=list(range(len(names))),  # the last ones are the largest
    )
    check_figure(svg)
    drawn = shown_text(svg)
    assert f"(largest {MAX_PLOT_GROUPS} of {len(names)} groups)" in drawn
    assert names[-1] in drawn and names[0] not in drawn


def test_stacked_shares_merge_the_smallest_parts_beyond_five() -> None:
    parts = [f"class {c}" for c in range(8)]
    shares = [[0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05], [0.1] * 6 + [0.2, 0.2], [math.nan] * 8]
    svg = stacked_shares_svg("Predicted class by sex", ["female", "male", "unknown"], parts, shares)
    check_figure(svg)
    drawn = shown_text(svg)
    # the four parts with the largest total share keep their colours, in class order
    assert "class 0" in drawn and "class 1" in drawn and "class 6" in drawn and "class 7" in drawn
    assert "other (4: class 2, class 3, class 4, class 5)" in drawn
    assert "undefined" in drawn
    assert colors(svg) & PALETTE == set(PART_COLORS)


# ----------------------------------------------------------------------------- Chromium

FIGURES = """() => [...document.querySelectorAll('figure.plot')]
    .map(f => f.getBoundingClientRect().width)"""


BROWSER_VIEWS = ("regression", "multiclass", "multiclass7", "ranking")


@pytest.fixture(scope="module")
def in_chromium(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """Each view's report opened in one Chromium at 1,400 × 900, every ``<details>`` open:
    the clipping check, the figures' widths and a screenshot of the method's section."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    folder = tmp_path_factory.mktemp("task-views")
    ARTIFACTS.mkdir(exist_ok=True)
    out: dict[str, dict[str, Any]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            for which in BROWSER_VIEWS:
                if which == "multiclass7":
                    res = _multiclass(k=7)
                else:
                    res = request.getfixturevalue(which)[0]
                path = folder / f"{which}.html"
                path.write_text(_render(res), encoding="utf-8")
                page.goto(path.as_uri(), wait_until="load")
                page.evaluate(OPEN_ALL)
                out[which] = {
                    "clipping": page.evaluate(CLIPPING),
                    "widths": page.evaluate(FIGURES),
                }
                page.locator("section.method").screenshot(
                    path=str(ARTIFACTS / f"report-task-view-{which}.png")
                )
        finally:
            browser.close()
    return out


@pytest.mark.parametrize("which", BROWSER_VIEWS)
def test_nothing_is_clipped_at_1400px(which: str, in_chromium: dict[str, dict[str, Any]]) -> None:
    clipping = in_chromium[which]["clipping"]
    widths = in_chromium[which]["widths"]
    assert clipping["problems"] == []
    assert clipping["nowrap"] == 0  # numbers and intervals never wrap
    assert clipping["pageWidth"] <= clipping["viewportW"]
    scrolling = [b["table"] for b in clipping["scrollBoxes"] if "compact" in b["table"]]
    assert scrolling == [], f"the view's tables do not fit at 1,400 px: {scrolling}"
    assert widths and min(widths) >= 300 - 0.5, widths
