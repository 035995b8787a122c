"""The HTML report: content, number formatting, escaping, self-containment, structure, plots.

Fast and server-free: :func:`tasks.report.render_report` and ``render_report_task.fn`` are
called directly on an :class:`AuditResult` built by hand.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fairengine.audit_context import AuditMetadata, DatasetSummary, ModelIdentity
from fairengine.audit_file import read_audit
from fairengine.group_parity.result import (
    AttributeParity,
    ExactSettings,
    GroupParityDetails,
    GroupRates,
    ParityGroup,
    RateEstimate,
    RatePairs,
)
from fairengine.results import (
    AuditResult,
    ExpectationOutcome,
    Finding,
    Interval,
    MethodDetails,
    MethodResult,
    ValidationResult,
    Verdict,
    register_details,
)
from tasks.report import (
    fmt_count,
    fmt_interval,
    fmt_level,
    fmt_number,
    fmt_pvalue,
    fmt_rate,
    render_report,
    render_report_task,
    report_context,
    write_report,
)
from tasks.report.plots import (
    SVG_SIZE_BUDGET,
    curve_svg,
    group_rates_svg,
    interval_forest_svg,
    marginal_overlay_svg,
    null_histogram_svg,
    text_width,
    tick_text,
    tick_values,
)

EVIL = "<script>alert(1)</script>\"'"
EVIL_ATTR = f"race{EVIL}"
FINGERPRINT = "ab12cd34ef56" + "0" * 52


def rates(pr: tuple[float, float, float], tpr: tuple, fpr: tuple) -> dict:
    """The ``rates`` dict of one group from (estimate, low, high) triples."""
    return {
        name: dict(zip(("estimate", "low", "high"), t, strict=True))
        for name, t in (("positive_rate", pr), ("tpr", tpr), ("fpr", fpr))
    }


def parity_group(group: str, n: int, pr: tuple, tpr: tuple, fpr: tuple) -> ParityGroup:
    """One group of hand-built ``group_parity`` details from (estimate, low, high) triples."""

    def rate(t: tuple) -> RateEstimate:
        return RateEstimate(*(float(v) for v in t))

    return ParityGroup(group, n, float(n), GroupRates(rate(pr), rate(tpr), rate(fpr)))


def parity_details(
    prediction: str, threshold: float | None, attributes: dict[str, list[ParityGroup]]
) -> GroupParityDetails:
    """Hand-built ``group_parity`` details with these groups (and no pairs)."""
    return GroupParityDetails(
        prediction=prediction,
        threshold=threshold,
        tolerance=0.05,
        exact=ExactSettings(mode="auto", max_rows=200, max_cells=4_000_000),
        attributes={
            name: AttributeParity(tuple(groups), RatePairs((), (), ()))
            for name, groups in attributes.items()
        },
    )


def gap(
    key: str,
    label: str,
    est: float,
    low: float,
    high: float,
    p: float | None,
    adj: float | None,
    decision: str,
) -> Finding:
    return Finding(
        key=key,
        label=label,
        estimate=est,
        interval=Interval(low, high, 0.95, "newcombe"),
        pvalue=p,
        adjusted_pvalue=adj,
        null_hypothesis="|gap| ≤ 0.05",
        decision=decision,  # type: ignore[arg-type]
        reading=f"Reading of {label}.",
    )


@pytest.fixture()
def audit() -> AuditResult:
    """A hand-built audit: group_parity over 2 attributes, a failed and a not-run method,
    validation with one failure, and user strings that try to inject markup."""
    sex_groups = [
        parity_group(
            "female", 5000, (0.3127, 0.2999, 0.3258), (0.6123, 0.59, 0.634), (0.1034, 0.09, 0.117)
        ),
        parity_group(
            "male", 4800, (0.4289, 0.415, 0.4429), (0.7011, 0.68, 0.72), (0.1512, 0.14, 0.163)
        ),
    ]
    race_groups = [
        parity_group("white", 7000, (0.39, 0.378, 0.402), (0.66, 0.64, 0.68), (0.13, 0.12, 0.14)),
        parity_group(EVIL, 2800, (0.335, 0.318, 0.353), (0.62, 0.59, 0.65), ("NaN",) * 3),
    ]
    group_parity = MethodResult(
        method="group_parity",
        title="Demographic parity and equalized odds",
        parameters={
            "tolerance": 0.05,
            "confidence_level": 0.95,
            "attributes": ["sex", EVIL_ATTR],
            "threshold": 0.5,
            "prediction": "hard",
        },
        findings=[
            gap(
                "dp_gap.sex.female_male",
                "Demographic parity gap, sex: female − male",
                -0.11623,
                -0.13541,
                -0.09712,
                1.234e-7,
                6.17e-7,
                "reject",
            ),
            gap(
                "tpr_gap.sex.female_male",
                "True-positive-rate gap, sex: female − male",
                -0.0888,
                -0.1181,
                -0.0594,
                0.02346,
                0.0703,
                "fail_to_reject",
            ),
            gap(
                "fpr_gap.sex.female_male",
                "False-positive-rate gap, sex: female − male",
                -0.0478,
                -0.0651,
                -0.0304,
                0.61,
                1.0,
                "fail_to_reject",
            ),
            gap(
                "dp_gap.race.white_evil",
                f"Demographic parity gap, {EVIL_ATTR}: white − {EVIL}",
                0.055,
                0.0339,
                0.0761,
                0.3212,
                0.9636,
                "fail_to_reject",
            ),
            Finding(
                key="fpr_gap.race.white_evil",
                label=f"False-positive-rate gap, {EVIL_ATTR}: white − {EVIL}",
                estimate=math.nan,
                interval=Interval(math.nan, math.nan, 0.95, "newcombe"),
                null_hypothesis="|gap| ≤ 0.05",
            ),
        ],
        details=parity_details("hard", 0.5, {"sex": sex_groups, EVIL_ATTR: race_groups}),
        warnings=[f"fpr_gap for {EVIL_ATTR} is undefined: no negatives in group {EVIL}"],
        seconds=0.0421,
    )
    failed = MethodResult(
        method="permutation_test",
        title="Studentized permutation tests",
        status="failed",
        parameters={"n_permutations": 9999},
        reason="ValueError: the AUC needs both labels in every group",
    )
    not_run = MethodResult(
        method="fliptest",
        title="FlipTest",
        status="not_run",
        reason="disabled in the config (methods.fliptest.enabled)",
    )
    validation = ValidationResult(
        success=False,
        engine="great_expectations 1.24.1",
        n_rows=9800,
        expectations=[
            ExpectationOutcome("expect_column_to_exist", "label", True, "Column 'label' exists"),
            ExpectationOutcome(
                "expect_column_values_to_not_be_null",
                EVIL_ATTR,
                True,
                f"No nulls in protected attribute {EVIL_ATTR}",
                0,
            ),
            ExpectationOutcome(
                "expect_column_values_to_be_between",
                "score",
                True,
                "Scores lie in [0, 1]",
                0,
                observed={"min": 0.001, "max": 0.998},
            ),
            ExpectationOutcome(
                "expect_group_size_at_least",
                "sex",
                False,
                "Every group of sex has at least 30 rows",
                3,
                ["nonbinary", EVIL],
            ),
        ],
    )
    return AuditResult(
        audit_id="a1b2c3d4e5f6",
        created_at="2026-11-22T10:54:03+00:00",
        config={
            "data": {"path": "scored.csv"},
            "columns": {"label": "label", "protected": ["sex", EVIL_ATTR], "score": "score"},
            "threshold": 0.5,
            "alpha": 0.05,
            "multiplicity": "holm",
            "methods": {"group_parity": {"enabled": True, "tolerance": 0.05}},
        },
        dataset=DatasetSummary.from_dict(
            {
                "name": "credit",
                "source": "/data/scored.csv",
                "n_rows": 9800,
                "fingerprint": FINGERPRINT,
                "roles": {"label": "label", "protected": ["sex", EVIL_ATTR], "score": "score"},
                "groups": {
                    "sex": {"female": 5000, "male": 4800},
                    EVIL_ATTR: {"white": 7000, EVIL: 2800},
                },
            }
        ),
        model=ModelIdentity(
            uri="models:/credit-scorer/3",
            name="credit-scorer",
            version="3",
            score_type="probability",
            threshold=0.5,
        ),
        validation=validation,
        methods=[group_parity, failed, not_run],
        alpha=0.05,
        multiplicity="holm",
        verdict=Verdict(
            "fail",
            "1 of 4 tests show a disparity beyond tolerance at α=0.05.",
            [
                "Demographic parity gap, sex: female − male: -0.1162 (adjusted p=<0.0001)",
                "Studentized permutation tests failed: ValueError: the AUC needs both labels",
            ],
        ),
        metadata=AuditMetadata(
            versions={"python": "3.11.7", "numpy": "2.1.0", "jinja2": "3.1.6"},
            fairengine_version="0.1.0",
            seed=20261122,
            timings={"load_data": 0.1234, "group_parity": 0.0421},
        ),
    )


@pytest.fixture()
def html(audit: AuditResult) -> str:
    return render_report(audit)


class StructureChecker(HTMLParser):
    """Checks that every end tag closes the innermost open element; counts tags and ids."""

    VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.seen: dict[str, int] = {}
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen[tag] = self.seen.get(tag, 0) + 1
        self.ids += [v for k, v in attrs if k == "id" and v]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen[tag] = self.seen.get(tag, 0) + 1
        self.ids += [v for k, v in attrs if k == "id" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            if tag in self.stack:
                while self.stack and self.stack.pop() != tag:
                    pass
        else:
            self.stack.pop()


# ----------------------------------------------------------------------------- content


def test_report_shows_header_verdict_and_every_finding(audit: AuditResult, html: str) -> None:
    assert "FairEngine audit report" in html
    for text in (
        "credit-scorer",
        "models:/credit-scorer/3",
        "/data/scored.csv",
        FINGERPRINT[:12],
        "9,800",
        "a1b2c3d4e5f6",
        "2026-11-22 10:54:03 UTC",
        "0.1.0",
        "20261122",
        "numpy 2.1.0",
        "jinja2 3.1.6",
    ):
        assert text in html, text
    assert FINGERPRINT in html  # the full hash sits in the fingerprint's tooltip
    # verdict banner: the word (prints in B/W), summary and reasons
    assert "FAIL" in html and "banner-fail" in html
    assert "1 of 4 tests show a disparity beyond tolerance" in html
    for reason in audit.verdict.reasons:
        assert escape(reason) in html
    for f in audit.findings():
        assert escape(f.label) in html, f.label
        assert escape(f.key) in html


def test_report_formats_the_computed_numbers(html: str) -> None:
    # finding estimates, intervals with level and method, p-values (tiny -> <0.0001)
    assert "-0.1162" in html
    assert "[-0.1354, -0.0971]" in html
    assert "95% · newcombe" in html
    assert "&lt;0.0001" in html  # raw p 1.234e-7 and adjusted 6.17e-7
    assert "0.0235" in html and "0.0703" in html and "1.0000" in html
    assert "Adjusted p (Holm)" in html
    # per-group rates with intervals, and group sizes
    assert "0.3127" in html and "[0.2999, 0.3258]" in html
    assert "0.4289" in html and "[0.4150, 0.4429]" in html
    assert "5,000" in html and "4,800" in html
    # decisions
    assert "Rejected" in html and "Not rejected" in html
    assert "<h4>Estimates</h4>" in html  # untested findings: a compact estimates table
    assert "Rates use hard predictions (score &gt; 0.5)." in html


def test_verdict_table_lists_tested_findings_rejections_first(audit: AuditResult) -> None:
    ctx = report_context(audit)
    rows = ctx["verdict_rows"]
    assert [r["key"] for r in rows] == [
        "dp_gap.sex.female_male",
        "tpr_gap.sex.female_male",
        "fpr_gap.sex.female_male",
        "dp_gap.race.white_evil",
    ]  # the untested NaN finding is left to the method section
    assert ctx["n_untested"] == 1
    assert rows[0]["reading"] == "Reading of Demographic parity gap, sex: female − male."


def test_report_sections_appear_in_order(html: str) -> None:
    marks = [
        "<h1>FairEngine audit report</h1>",
        'id="verdict"',
        'id="findings"',
        "<h3>Demographic parity and equalized odds</h3>",
        "<h3>Studentized permutation tests</h3>",
        "<h3>FlipTest</h3>",
        'id="validation"',
        'id="configuration"',
    ]
    positions = [html.index(m) for m in marks]
    assert positions == sorted(positions)


def test_failed_and_not_run_methods_show_their_reasons(html: str) -> None:
    assert "ValueError: the AUC needs both labels in every group" in html
    assert "disabled in the config (methods.fliptest.enabled)" in html
    assert "badge-failed" in html and "Not run" in html
    assert "n_permutations" in html and "9999" in html


def test_group_parity_block_has_tables_plots_and_warnings(html: str) -> None:
    assert html.count("<svg") == 6  # 2 attributes x 3 rates
    assert "Groups of sex" in html
    assert f"Groups of {escape(EVIL_ATTR)}" in html
    assert "Warning: fpr_gap for" in html
    assert "Positive-prediction rate" in html and "True-positive rate (TPR)" in html


def test_validation_and_configuration_are_rendered(html: str) -> None:
    assert "great_expectations 1.24.1" in html
    for text in (
        "Column &#39;label&#39; exists",
        "Scores lie in [0, 1]",
        "Every group of sex has at least 30 rows",
        "expect_group_size_at_least",
        "4 expectation(s), 1 failed",
    ):
        assert text in html, text
    assert html.count('class="badge badge-fail">Fail<') == 1
    assert html.count('class="badge badge-pass">Pass<') == 3
    # the config, YAML-like, inside <pre>
    config = re.search(r'<pre class="config">(.*?)</pre>', html, re.S)
    assert config is not None
    assert "path: scored.csv" in config.group(1)
    assert "multiplicity: holm" in config.group(1)
    assert "tolerance: 0.05" in config.group(1)


# ----------------------------------------------------------------------------- safety


def test_user_text_is_escaped_and_there_is_no_script(html: str) -> None:
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # quotes in user text are escaped too (Jinja2 escapes " and ' in text and attributes)
    assert "&lt;/script&gt;&#34;&#39;" in html
    assert "alert(1)</script>" not in html


def test_no_external_urls_only_svg_namespaces(html: str) -> None:
    urls = re.findall(r"https?://[^\s\"'<>)]*", html)
    namespaces = re.findall(r'xmlns(?::\w+)?="(https?://[^"]*)"', html)
    outside = [u for u in urls if u not in namespaces and not u.startswith("http://www.w3.org/")]
    assert outside == []
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html, re.I)
    assert "@import" not in html and "url(http" not in html
    assert "<style>" in html and "@media print" in html


def test_html_parses_with_balanced_tags(html: str) -> None:
    checker = StructureChecker()
    checker.feed(html)
    checker.close()
    assert checker.problems == []
    assert checker.stack == []
    for tag in ("html", "head", "body", "header", "main", "footer", "table", "svg"):
        assert checker.seen.get(tag), tag
    assert checker.seen["html"] == checker.seen["body"] == checker.seen["main"] == 1
    assert len(checker.ids) == len(set(checker.ids)), "duplicate element ids"
    assert html.lstrip().startswith("<!DOCTYPE html>")


def test_report_is_small(html: str) -> None:
    assert len(html.encode("utf-8")) < 2_000_000


# ----------------------------------------------------------------------------- robustness


@dataclass(frozen=True)
class CurveDetails(MethodDetails):
    """Details of a method without a report view of its own (a plugin's)."""

    curve: tuple[float, ...]


def test_nan_and_infinity_render_as_text() -> None:
    register_details("custom_metric", CurveDetails)
    odd = MethodResult(  # a method without a dedicated block: its details show as raw JSON
        method="custom_metric",
        title="A custom metric",
        parameters={"epsilon_cap": math.inf, "smoothing": math.nan, "levels": [0.9, None]},
        findings=[
            Finding("eps", "ε-differential fairness", math.inf, Interval(1.5, math.inf, 0.9)),
            Finding("gap", "A gap", math.nan, Interval(math.nan, math.nan), pvalue=math.nan),
            Finding("tiny", "A tiny gap", 3.21e-5, None, pvalue=0.5, adjusted_pvalue=0.5),
        ],
        details=CurveDetails((math.nan, math.inf, -math.inf, 0.5)),
    )
    gp = MethodResult(
        method="group_parity",
        title="Demographic parity and equalized odds",
        details=parity_details(
            "expected",
            None,
            {
                "g": [
                    parity_group("a", 0, ("NaN",) * 3, ("NaN",) * 3, ("NaN",) * 3),
                    parity_group("b", 10, (0.5, "NaN", "NaN"), (1.0, 0.7, 1.0), (0.0, 0.0, 0.3)),
                ]
            },
        ),
    )
    result = AuditResult(
        audit_id="nan",
        created_at="not a date",
        config={"x": math.inf},
        dataset=DatasetSummary(),
        model=ModelIdentity(),
        validation=None,
        methods=[odd, gp],
        alpha=0.05,
        multiplicity="bh",
        verdict=Verdict("pass", "Nothing rejected."),
        metadata=AuditMetadata(),
    )
    html = render_report(read_audit(result.to_json()))  # through the JSON form
    assert "[1.5000, ∞]" in html
    assert "[NaN, NaN]" in html
    assert "3.210e-05" in html
    assert "Adjusted p (Benjamini–Hochberg)" in html
    assert "Rates are expected rates" in html
    assert "Details (raw JSON)" in html and "Infinity" in html  # a method without a block
    assert "Data validation did not run" in html
    assert "not a date" in html
    checker = StructureChecker()
    checker.feed(html)
    assert checker.problems == [] and checker.stack == []


@pytest.mark.parametrize(
    ("fn", "value", "text"),
    [
        (fmt_number, -0.116234, "-0.1162"),
        (fmt_number, 0.0, "0.0000"),
        (fmt_number, 3.21e-5, "3.210e-05"),
        (fmt_number, "NaN", "NaN"),
        (fmt_number, "Infinity", "∞"),
        (fmt_number, -math.inf, "-∞"),
        (fmt_number, None, "—"),
        (fmt_rate, 0.31, "0.3100"),
        (fmt_rate, "NaN", "NaN"),
        (fmt_pvalue, 1e-9, "<0.0001"),
        (fmt_pvalue, 0.0001, "0.0001"),
        (fmt_pvalue, 0.04999, "0.0500"),
        (fmt_pvalue, None, "—"),
        (fmt_pvalue, math.nan, "NaN"),
        (fmt_level, 0.95, "95%"),
        (fmt_level, 0.975, "97.5%"),
        (fmt_count, 12345, "12,345"),
    ],
)
def test_number_formatting(fn: object, value: object, text: str) -> None:
    assert fn(value) == text  # type: ignore[operator]


def test_interval_formatting() -> None:
    assert fmt_interval(0.1, 0.2) == "[0.1000, 0.2000]"
    assert fmt_interval("NaN", "Infinity") == "[NaN, ∞]"


# ----------------------------------------------------------------------------- plots


def test_group_plot_is_small_clean_and_nan_safe() -> None:
    groups = [
        {
            "group": f"group {i} {EVIL}",
            "n": 100 + i,
            "rates": rates(
                (i / 50, max(i / 50 - 0.03, 0), min(i / 50 + 0.03, 1)),
                ("NaN", "NaN", "NaN") if i % 7 == 0 else (0.5, 0.4, 0.6),
                (0.1, "NaN", "NaN"),
            ),
        }
        for i in range(45)
    ]
    for rate in ("positive_rate", "tpr", "fpr"):
        svg = group_rates_svg(f"attr {EVIL}", groups, rate)
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert "<?xml" not in svg and "DOCTYPE" not in svg
        assert "<script" not in svg
        assert len(svg.encode()) < SVG_SIZE_BUDGET, len(svg)
    assert "largest 30 of 45 groups" in svg
    assert "undefined" in group_rates_svg("a", [{"group": "x", "n": 0, "rates": {}}], "tpr")


def test_tick_values_and_labels() -> None:
    values = tick_values(0.13, 0.58)
    assert values and all(0.13 <= v <= 0.58 for v in values)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1  # evenly spaced "nice" ticks
    assert tick_values(1.0, 1.0) == [] and tick_values(math.nan, 1.0) == []
    assert [tick_text(v) for v in (-10.0, 0.25, 1e-17, 3.0, 1.5e-5)] == [
        "−10",
        "0.25",
        "0",
        "3",
        "1.5e−05",
    ]


@pytest.mark.parametrize("text", ["woman", "Statistical parity (predictio…", "WWW", "iiii", "<30"])
def test_text_width_estimate_never_underestimates_dejavu(text: str) -> None:
    """Margins are sized from :func:`text_width` instead of a layout pass; the estimate must
    cover the width matplotlib measures for DejaVu Sans (the widest common sans-serif)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    width, _, _ = TextToPath().get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=8), ismath=False
    )
    estimate = text_width(text, 8) * 72  # points
    assert estimate >= 0.98 * width, (estimate, width)
    assert estimate <= 1.15 * width + 1  # and is not wildly generous


def test_every_plot_kind_is_clean_inline_svg() -> None:
    """Each figure function: one inline <svg>, user text as escaped text, no fonts or scripts."""
    svgs = [
        interval_forest_svg(
            f"forest {EVIL}",
            ["a", EVIL],
            [
                {
                    "name": "s1",
                    "color": "#000",
                    "estimate": [0.1, 0.2],
                    "low": [0, 0.1],
                    "high": [0.2, 0.3],
                },
                {"name": "s2", "color": "#111", "low": [0, "NaN"], "high": [0.5, "NaN"]},
            ],
            reference=0.0,
        ),
        null_histogram_svg(f"null {EVIL}", [0, 1, 2, 3], [5, 9, 2], 7.5),
        curve_svg(
            f"curve {EVIL}",
            [1, 2, 3],
            [{"name": "m", "color": "#000", "values": [1, 2, "NaN"]}],
            xlabel="steps",
            hline=1.25,
            hline_label="δ",
        ),
        marginal_overlay_svg(
            f"marginal {EVIL}",
            [0, 1, 2],
            [
                {"name": EVIL, "color": "#000", "counts": [3, 4]},
                {"name": "F+", "color": "#111", "counts": [0, 0]},
            ],
        ),
    ]
    for svg in svgs:
        assert svg.startswith("<svg") and svg.endswith("</svg>") and svg.count("<svg") == 1
        assert "<script" not in svg and "font-family" not in svg
        assert "&lt;script&gt;" in svg  # the title's markup is text
        assert len(svg.encode()) < SVG_SIZE_BUDGET
    assert "observed 7.5 →" in svgs[1]  # an observed value beyond the histogram is not lost
    assert ">s1</text>" in svgs[0] and ">s2</text>" in svgs[0]  # the key names both series


def test_plots_do_not_leak_figures() -> None:
    import matplotlib.pyplot as plt

    before = len(plt.get_fignums())
    group_rates_svg("a", [{"group": "x", "n": 1, "rates": rates(*[(0.2, 0.1, 0.3)] * 3)}], "fpr")
    assert len(plt.get_fignums()) == before


# ----------------------------------------------------------------------------- entry points


def test_task_fn_and_write_report(audit: AuditResult, tmp_path: Path) -> None:
    html = render_report_task.fn(audit)
    assert html == render_report(audit)
    path = write_report(audit, tmp_path / "out")
    assert path == tmp_path / "out" / "report.html"
    assert path.read_text(encoding="utf-8") == html


def escape(text: str) -> str:
    """What Jinja2's autoescape makes of ``text``."""
    from markupsafe import escape as _escape

    return str(_escape(text))


def test_intersectional_block_shows_estimators_pair_and_smallest_cells() -> None:
    """The intersectional panel renders from a real ``run_intersectional`` result."""
    import numpy as np
    import pandas as pd

    from fairengine.dataset import AuditDataset
    from fairengine.intersectional import IntersectionalConfig, run_intersectional
    from fairengine.roles import ColumnRoles
    from fairengine.verdict import finalize_audit

    rng = np.random.default_rng(0)
    n = 4000
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["f", "m"], n),
            "race": rng.choice(["a", "b", "<c>"], n, p=[0.6, 0.35, 0.05]),
            "y": rng.binomial(1, 0.4, n),
        }
    )
    frame["score"] = np.clip(rng.normal(0.3 + 0.3 * frame["y"], 0.2), 0, 1)
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("sex", "race"), score="score"), threshold=0.5
    )
    m = run_intersectional(ds, IntersectionalConfig(n_bootstrap=200, n_posterior=500))
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[m])
    )
    assert "could not draw" not in html
    assert "ε over sex_x_race" in html or "ε over sex × race" in html or "ε over" in html
    assert "Bootstrap 95%" in html and "Bayesian 95%" in html
    assert "Smallest intersections" in html
    assert "&lt;c&gt;" in html and "<c>" not in html
    eps = m.findings[0].estimate
    assert f"{eps:.4f}" in html


def assert_device_rows(html: str, device: str, requested: str) -> None:
    """The method's parameters table shows the device it ran on and the requested one."""
    assert device in ("cpu", "cuda") or device.startswith("cuda:")
    assert f'<th scope="row">device</th><td>{device}</td>' in html
    assert f'<th scope="row">device_requested</th><td>{requested}</td>' in html


def test_group_metrics_and_permutation_blocks_render_real_results() -> None:
    """The LiFT-suite and permutation-test blocks render from real method results."""
    import numpy as np
    import pandas as pd

    from fairengine.dataset import AuditDataset
    from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
    from fairengine.permutation import PermutationConfig, run_permutation_tests
    from fairengine.permutation.result import PermutationDetails
    from fairengine.roles import ColumnRoles
    from fairengine.verdict import finalize_audit

    rng = np.random.default_rng(1)
    n = 3000
    frame = pd.DataFrame(
        {"sex": rng.choice(["f", "m"], n), "race": rng.choice(["a", "b"], n), "y": 0}
    )
    frame["y"] = rng.binomial(1, 0.4, n)
    frame["score"] = np.clip(rng.normal(0.3 + 0.3 * frame["y"], 0.2), 0, 1)
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("sex", "race"), score="score"), threshold=0.5
    )
    gm = run_group_metrics(ds, GroupMetricsConfig())
    pt = run_permutation_tests(ds, PermutationConfig(n_permutations=199))
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[gm, pt])
    )
    assert "could not draw" not in html
    assert "Four-fifths rule" in html and "Total variation" in html
    assert "Permutation distribution of the statistic" in html
    assert_device_rows(html, pt.parameters["device"], "auto")
    assert '<th scope="row">backend_requested</th><td>auto</td>' in html
    assert isinstance(pt.details, PermutationDetails)
    test = pt.details.tests[0]
    assert f"{test.difference:.4f}" in html
    assert html.count("<svg") >= min(len(pt.details.tests), 12)


def test_individual_fairness_block_renders_a_real_result() -> None:
    """Tests table, ratio histogram, lower bound vs steps and the largest ratios render from a
    real ``run_individual_fairness`` result (Maity et al.'s simulation, a logistic model)."""
    import dataclasses

    from sklearn.linear_model import LogisticRegression

    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_maity_simulation
    from fairengine.individual import IndividualConfig, run_individual_fairness
    from fairengine.individual.result import IndividualFairnessDetails
    from fairengine.verdict import finalize_audit

    data = make_maity_simulation(n=400, seed=1)
    frame = data.frame.copy()
    model = LogisticRegression().fit(frame[["x1", "x2"]], frame["y"])
    frame["score"] = model.predict_proba(frame[["x1", "x2"]])[:, 1]
    roles = dataclasses.replace(data.roles, score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.5)
    m = run_individual_fairness(ds, IndividualConfig(steps=50), model=model)
    assert m.status == "ok", m.reason
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[m])
    )
    assert "could not draw" not in html
    assert "Points with the largest loss ratios" in html
    assert "Loss ratio vs attack steps" in html
    assert isinstance(m.details, IndividualFairnessDetails)
    assert fmt_number(m.details.loss_ratio.statistic) in html
    assert_device_rows(html, m.parameters["device"], "auto")


def test_fliptest_block_renders_a_real_result() -> None:
    """Flipset table, transparency report and marginals from a real ``run_fliptest`` result
    (Lipton hiring data, a logistic model given as a function); empty flipsets get no report."""
    import dataclasses

    from sklearn.linear_model import LogisticRegression

    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_lipton_hiring
    from fairengine.fliptest import FlipTestConfig, run_fliptest
    from fairengine.verdict import finalize_audit

    data = make_lipton_hiring(n_per_group=400, seed=0)
    frame = data.frame.copy()
    features = list(data.roles.features or ())
    model = LogisticRegression().fit(frame[features], frame[data.roles.label])
    frame["score"] = model.predict_proba(frame[features])[:, 1]
    ds = AuditDataset.from_frame(
        frame, dataclasses.replace(data.roles, score="score"), threshold=0.5
    )
    cfg = FlipTestConfig(
        enabled=True, n_permutations=4, n_selfmap=4, n_bootstrap=4, max_per_group=300
    )
    m = run_fliptest(ds, cfg, predict_proba=lambda X: model.predict_proba(X[features])[:, 1])
    assert m.status == "ok", m.reason
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[m])
    )
    assert "could not draw" not in html
    assert "Transparency report" in html and "vs its flipsets" in html
    assert "NaN [NaN, NaN]" not in html
    assert_device_rows(html, m.parameters["device"], "auto")


def test_input_warnings_are_shown_in_the_verdict_banner_before_the_reasons(
    audit: AuditResult,
) -> None:
    """Cleaning done on the way in (stripped whitespace, dropped rows, a ', ' delimiter) is part
    of what the verdict rests on: it is shown in the banner, escaped, above the reasons."""
    import dataclasses

    warned = dataclasses.replace(
        audit, warnings=["dropped 583 of 32561 rows <with '?'>", "column 'sex': stripped"]
    )
    page = render_report(warned)
    banner = page[
        page.index('<section id="verdict"') : page.index(
            "</section>", page.index('<section id="verdict"')
        )
    ]
    assert "Input warnings</strong> (2)" in banner
    assert "dropped 583 of 32561 rows &lt;with &#39;?&#39;&gt;" in banner
    if audit.verdict.reasons:
        assert banner.index("Input warnings") < banner.index('class="reasons"')
    assert "Input warnings" not in render_report(audit)


def test_undetermined_and_supporting_findings_are_shown_as_such() -> None:
    """An undetermined Monte-Carlo test reads 'Undetermined', never 'Not rejected'; a supporting
    test is in its own collapsed table and not counted among the deciding tests."""
    from fairengine.results import ResamplingPart, gap_question
    from fairengine.verdict import finalize_audit

    q = gap_question("tpr", "sex", "f", "m")
    tol = Finding(
        "tpr_gap.sex.f_m",
        "TPR gap, sex: f − m",
        0.02,
        pvalue=0.8,
        null_hypothesis="|gap| ≤ 0.05",
        question=q,
        null_kind="tolerance",
    )
    zero = Finding(
        "perm_tpr.sex.f_m",
        "TPR difference, sex: f − m",
        0.02,
        pvalue=0.0005,
        null_hypothesis="tpr(f) = tpr(m)",
        question=q,
        null_kind="zero",
        resampling=[ResamplingPart("permutation", 0, 1999)],
    )
    flip = Finding(
        "fliptest_pos.sex.f_m",
        "FlipTest F+ rate, sex: f -> m",
        0.425,
        pvalue=0.05,
        null_hypothesis="flipset no larger than map noise",
        resampling=[ResamplingPart("permutation", 0, 39), ResamplingPart("self-map", 0, 19)],
    )
    methods = [
        MethodResult("group_parity", "Group parity", findings=[tol]),
        MethodResult("permutation_tests", "Permutation tests", findings=[zero]),
        MethodResult("fliptest", "FlipTest", findings=[flip]),
    ]
    result = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=methods)
    decided = {f.key: f for f in result.findings()}
    assert flip.decision == "not_tested"  # the method's own result is left as it was
    assert decided[flip.key].decision == "undetermined"
    assert decided[zero.key].decision == "supporting"
    assert result.verdict.status == "incomplete" and "undetermined" in result.verdict.summary
    html = render_report(result)
    ctx = report_context(result)
    assert [f["key"] for f in ctx["verdict_rows"]] == [flip.key, tol.key]  # undetermined first
    assert [f["key"] for f in ctx["supporting_rows"]] == [zero.key]
    assert "badge-undetermined" in html and "Undetermined (Monte-Carlo resolution)" in html
    assert "39 permutation + 19 self-map resamples" in html
    assert '<details class="supporting">' in html and "1 supporting test(s)" in html
    assert "would settle it" in html
    row = html[html.index(flip.key) :].split("</tr>")[0]
    assert "Not rejected" not in row


def test_a_view_that_raises_fails_under_test_and_shows_an_error_block_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The suite runs with FAIRENGINE_STRICT_REPORT=1: a method view that raises fails the
    report. Without it (production) the report is still written, with a visible error block
    naming the error, the method's raw details, and an error in the log."""
    import tasks.report as report
    from fairengine.results import MethodResult, UnknownDetails

    def broken(result):
        raise KeyError("renamed_key")

    monkeypatch.setitem(
        report.VIEWS, "group_parity", report.MethodView(UnknownDetails, broken, "unused")
    )
    method = MethodResult(
        "group_parity", "Demographic parity", details=UnknownDetails({"pairs": [1, 2]})
    )
    with pytest.raises(report.ReportViewError, match="renamed_key"):
        report.method_view(method, 0)
    monkeypatch.setenv(report.STRICT_VIEWS_ENV, "0")
    view = report.method_view(method, 0)
    assert view["view_error"] == "KeyError: 'renamed_key'" and view["raw_details"]
