"""The full every-method report in a real browser (headless Chromium driven by Playwright).

The audit is built once per module from the demo's hiring data with every method run by its
pure function (:mod:`report_full_audit`, small resampling counts: a few seconds), plus a failed
and a not-run method, real Great Expectations validation and run metadata. Its report is opened
from disk and checked for: no console or page errors, no request beyond the file itself and
nothing wider than the window; every audit method (:data:`fairengine.registry.BUILT_IN`) with
its section, heading, status and at least one inline plot (methods with a report block); the
failed and not-run methods with their reasons; the verdict banner, the top findings, the
overview matrix and the findings tables (grouped by attribute) before any method; headings in
order; header cells in every table; verdicts and decisions carried by words as well as colour;
the identity items (header line and "About this audit"); the print stylesheet. A full-page
screenshot is saved as ``test-artifacts/report-full-browser.png``.

Chromium is Debian's package (``.ci/run`` installs it); without it the tests skip locally and
fail under CI, as in ``test_report_browser.py``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from report_full_audit import build_full_audit
from test_report_browser import ARTIFACTS, load_in_chromium

from fairengine.registry import built_in_for
from fairengine.results import AuditResult
from tasks.report import VIEWS, write_report

BUILT_IN = built_in_for("binary")  # the methods of a binary audit

SCREENSHOT = ARTIFACTS / "report-full-browser.png"
PRINT_DATA = """() => ({
  toc: getComputedStyle(document.querySelector('nav.toc')).display,
  figure: getComputedStyle(document.querySelector('figure.plot')).maxWidth,
})"""

PAGE_DATA = """() => {
  const text = el => (el ? el.innerText.trim() : '');
  const main = document.querySelector('main');
  return {
    headings: [...document.querySelectorAll('h1,h2,h3,h4,h5,h6')].map(h => ({
        level: Number(h.tagName[1]), text: h.textContent.trim()})),
    mainSections: [...main.children].filter(e => e.tagName === 'SECTION').map(s => s.id),
    firstTable: main.querySelector('table')?.className || '',
    firstMethodTop: document.querySelector('section.method')?.getBoundingClientRect().top,
    findingsTop: document.querySelector('#findings')?.getBoundingClientRect().top,
    verdictTables: [...document.querySelectorAll('table.verdict-table')].map(t =>
        [...t.querySelectorAll('tbody tr')].map(r => ({
            cls: r.className,
            decision: r.querySelector('.badge')?.textContent.trim() || ''}))),
    topRows: [...document.querySelectorAll('table.top-findings tbody tr')].map(r => ({
        cls: r.className, decision: text(r.querySelector('.badge'))})),
    identity: text(document.querySelector('#identity')),
    methods: [...document.querySelectorAll('section.method')].map(s => ({
        id: s.id,
        code: text(s.querySelector('.method-head code')),
        heading: text(s.querySelector('h3')),
        status: text(s.querySelector('.method-head .badge')),
        reason: text(s.querySelector('.reason')),
        svgs: s.querySelectorAll('svg').length,
        figures: s.querySelectorAll('figure.plot').length,
        raw: !!s.querySelector('details.raw')})),
    tables: [...document.querySelectorAll('table')].map(t => ({
        cls: t.className,
        headTh: t.querySelectorAll('thead th').length,
        rowTh: t.querySelectorAll('tbody th[scope="row"]').length,
        rows: t.querySelectorAll('tbody tr').length})),
    badges: [...document.querySelectorAll('.badge, .badge-big')].map(b => b.textContent.trim()),
    verdict: text(document.querySelector('#verdict')),
    header: text(document.querySelector('header.report-header')),
    bodyText: document.body.innerText,
    scripts: document.querySelectorAll('script').length,
    svgs: document.querySelectorAll('svg').length,
    pageWidth: document.documentElement.scrollWidth,
    viewportWidth: window.innerWidth,
  };
}"""


@pytest.fixture(scope="module")
def full_audit() -> AuditResult:
    return build_full_audit("small", seed=0)


@pytest.fixture(scope="module")
def report(full_audit: AuditResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(full_audit, tmp_path_factory.mktemp("full-report"))


@pytest.fixture(scope="module")
def page_data(report: Path) -> dict:
    return load_in_chromium(report, SCREENSHOT, PAGE_DATA, PRINT_DATA)


def test_the_audit_ran_every_method(full_audit: AuditResult) -> None:
    """The fixture is what the report claims to show: every method of the audit succeeded."""
    status = {m.method: m.status for m in full_audit.methods if m.status == "ok"}
    for name in BUILT_IN:
        assert status.get(name) == "ok", f"{name} did not run in the fixture"
    assert {m.status for m in full_audit.methods} == {"ok", "failed", "not_run"}
    assert full_audit.validation is not None and full_audit.validation.expectations


def test_opens_without_errors_or_requests_and_saves_a_screenshot(page_data: dict) -> None:
    assert page_data["console_errors"] == []
    assert page_data["page_errors"] == []
    assert all(u.startswith("file://") for u in page_data["requests"]), page_data["requests"]
    assert page_data["scripts"] == 0
    assert SCREENSHOT.stat().st_size > 50_000
    # nothing runs off the side: wide tables scroll inside their wrapper, text wraps
    assert page_data["pageWidth"] <= page_data["viewportWidth"]


def test_every_method_has_its_section_heading_and_a_plot(
    full_audit: AuditResult, page_data: dict
) -> None:
    sections = {s["code"]: s for s in page_data["methods"] if s["status"] == "OK"}
    for name in BUILT_IN:
        section = sections.get(name)
        assert section is not None, f"no section for {name}"
        assert section["heading"] == full_audit.method(name).title
        assert section["svgs"] == section["figures"]  # every plot sits in a captioned figure
        if name in VIEWS:
            assert section["svgs"] >= 1, f"{name} has no inline plot"
        else:  # a method whose report block is still to be written: its raw details at least
            assert section["raw"], f"{name} shows neither a report block nor its details"
    assert page_data["svgs"] == sum(s["svgs"] for s in page_data["methods"])


def test_failed_and_not_run_methods_say_why(full_audit: AuditResult, page_data: dict) -> None:
    shown = {(s["status"], s["heading"]): s for s in page_data["methods"]}
    for m in full_audit.methods:
        if m.status == "ok":
            continue
        word = {"failed": "Failed", "not_run": "Not run"}[m.status]
        section = shown[(word, m.title)]
        assert section["reason"].startswith(f"{word}:")
        assert m.reason and m.reason[:60] in section["reason"]
    assert len(page_data["methods"]) == len(full_audit.methods)  # all listed, not-run too


def test_verdict_comes_first_and_lists_every_test(full_audit: AuditResult, page_data: dict) -> None:
    """Summary first (verdict, top findings, the groups' overview), then every deciding test in
    the findings tables grouped by attribute (rejections first in each), then the methods."""
    sections = page_data["mainSections"]
    assert sections[:4] == ["verdict", "top-findings", "overview", "findings"]
    assert sections.index("findings") < sections.index("methods")
    assert page_data["mainSections"][-3:] == ["validation", "identity", "configuration"]
    assert "top-findings" in page_data["firstTable"]
    assert page_data["findingsTop"] < page_data["firstMethodTop"]
    deciding = [f for f in full_audit.findings() if f.counts]
    rows = [r for t in page_data["verdictTables"] for r in t]
    assert len(rows) == len(deciding)
    order = {
        "Rejected": 0,
        "Undetermined (Monte-Carlo resolution)": 1,
        "Not rejected": 2,
    }
    for table in page_data["verdictTables"]:
        ranks = [order[r["decision"]] for r in table]
        assert ranks == sorted(ranks)
    decisions = sorted(r["decision"] for r in rows)
    assert decisions == sorted(
        {"reject": "Rejected", "undetermined": "Undetermined (Monte-Carlo resolution)"}.get(
            f.decision, "Not rejected"
        )
        for f in deciding
    )
    top = [r["decision"] for r in page_data["topRows"]]
    assert 0 < len(top) <= 10
    short = {"Rejected": 0, "Undetermined": 1, "Not rejected": 2}
    assert [short[d] for d in top] == sorted(short[d] for d in top)  # rejections first


def test_headings_in_order_and_tables_with_headers(page_data: dict) -> None:
    levels = [h["level"] for h in page_data["headings"]]
    assert levels[0] == 1 and levels.count(1) == 1
    for before, after in itertools.pairwise(levels):
        assert after <= before + 1, f"heading jumps from h{before} to h{after}"
    assert all(h["text"] for h in page_data["headings"]), "empty heading"
    for table in page_data["tables"]:
        assert table["headTh"] > 0 or table["rowTh"] == table["rows"] > 0, table


def test_verdict_and_decisions_are_words_not_only_colour(
    full_audit: AuditResult, page_data: dict
) -> None:
    word = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}[full_audit.verdict.status]
    assert word in page_data["verdict"]
    assert full_audit.verdict.summary in page_data["verdict"]
    assert all(page_data["badges"]), "a badge without text"
    words = {
        "row-reject": "Rejected",
        "row-undetermined": "Undetermined (Monte-Carlo resolution)",
        "row-fail_to_reject": "Not rejected",
    }
    for row in (r for t in page_data["verdictTables"] for r in t):
        assert row["decision"] == words[row["cls"]]
    short = {"row-reject": "Rejected", "row-undetermined": "Undetermined"}
    for row in page_data["topRows"]:
        assert row["decision"] == short.get(row["cls"], "Not rejected")


def test_header_identifies_model_data_and_run(full_audit: AuditResult, page_data: dict) -> None:
    assert f"{full_audit.model.name} v{full_audit.model.version}" in page_data["header"]
    header = page_data["identity"]  # the full identity: "About this audit"
    assert full_audit.model.uri in header
    assert full_audit.dataset.fingerprint[:12] in header
    assert full_audit.created_at[:10] in header
    assert f"Seed\n{full_audit.metadata.seed}\n" in header
    for name in ("numpy", "torch", "matplotlib", "prefect"):
        assert f"{name} {full_audit.metadata.versions[name]}" in header
    timings = next(t for t in page_data["tables"] if t["cls"] == "kv timings")
    assert timings["rows"] == len(full_audit.metadata.timings)
    body = page_data["bodyText"]
    # "<", ">" in group names shown as text (the overview matrix's intersection)
    assert "man & <30" in body and "woman & >50" in body


def test_print_stylesheet_applies(page_data: dict) -> None:
    assert page_data["print"]["toc"] == "none"
    assert page_data["print"]["figure"] == "48%"  # two per row: plot text >= 11 px on A4


def test_report_file_is_small(report: Path) -> None:
    assert report.stat().st_size < 2_000_000
