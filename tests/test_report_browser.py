"""The report in a real browser: headless Chromium (Debian's package) driven by Playwright.

A report computed from real data, whose protected-attribute column name and group values carry
markup and quotes, is opened from disk. Checked: no console errors or page errors, no dialog
(an injected ``alert`` would fire one), no script element, the user text shown as text, key
elements present, headings in order, every table with header cells, the verdict carried by text
(not colour alone). A full-page screenshot is saved under ``test-artifacts/``.

``.ci/run`` installs Chromium; on a developer machine without it the tests are skipped with
that reason (visible in the summary). Under CI (``CI`` set) a missing browser is a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.group_parity import group_parity
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit
from tasks.report import write_report

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
EVIL_COLUMN = "race<script>alert('col')</script>\"'"
EVIL_GROUP = "<img src=x onerror=alert(1)>"
QUOTED_GROUP = 'O\'Brien "q"'
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed; .ci/run installs Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install chromium); CI installs it")
    return path


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    n = 3000
    group = rng.choice(["a", EVIL_GROUP, QUOTED_GROUP], n)
    sex = rng.choice(["female", "male"], n)
    y = rng.binomial(1, 0.4, n)
    score = np.clip(rng.normal(0.35 + 0.25 * y + 0.1 * (group == "a"), 0.2), 0, 1)
    frame = pd.DataFrame({EVIL_COLUMN: group, "sex": sex, "y": y, "score": score})
    roles = ColumnRoles(label="y", protected=(EVIL_COLUMN, "sex"), score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.5)
    result = finalize_audit(
        config={"columns": {"protected": [EVIL_COLUMN, "sex"]}},
        dataset={**ds.summary(), "name": "browser-test"},
        model={"name": "model<script>", "version": "1"},
        validation=None,
        methods=[group_parity(ds, tolerance=0.02)],
    )
    return write_report(result, tmp_path_factory.mktemp("report"))


PAGE_DATA = """() => ({
  title: document.title,
  h1: document.querySelector('h1')?.textContent,
  headings: [...document.querySelectorAll('h1,h2,h3,h4,h5,h6')]
      .map(h => Number(h.tagName[1])),
  scripts: document.querySelectorAll('script').length,
  imgs: document.querySelectorAll('img').length,
  tables: [...document.querySelectorAll('table')].map(t => ({
      th: t.querySelectorAll('th').length,
      rows: t.querySelectorAll('tr').length})),
  verdictText: document.querySelector('#verdict')?.innerText || '',
  bodyText: document.body.innerText,
  svgs: document.querySelectorAll('svg').length,
  sections: [...document.querySelectorAll('section[id]')].map(s => s.id),
})"""


def load_in_chromium(
    path: Path, screenshot: Path, script: str, print_script: str | None = None
) -> dict:
    """Open ``path`` in headless Chromium (1280 px wide), save a full-page ``screenshot`` and
    return what ``script`` evaluates to, plus the console errors, page errors, dialogs and
    requests seen while loading; ``print_script`` is evaluated again under print media."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    console_errors: list[str] = []
    page_errors: list[str] = []
    dialogs: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on(
                "console",
                lambda m: console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri(), wait_until="load")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            data = page.evaluate(script)
            if print_script is not None:
                page.emulate_media(media="print")
                data["print"] = page.evaluate(print_script)
        finally:
            browser.close()
    data.update(
        console_errors=console_errors,
        page_errors=page_errors,
        dialogs=dialogs,
        requests=requests,
        screenshot=screenshot,
    )
    return data


@pytest.fixture(scope="module")
def page_data(report_file: Path) -> dict:
    return load_in_chromium(report_file, ARTIFACTS / "report-browser.png", PAGE_DATA)


def test_report_opens_without_errors_and_saves_a_screenshot(page_data: dict) -> None:
    assert page_data["console_errors"] == []
    assert page_data["page_errors"] == []
    assert page_data["dialogs"] == []  # no injected alert() ran
    assert page_data["screenshot"].stat().st_size > 10_000
    # self-contained: the only request is the file itself (no fonts, scripts, images, CSS)
    assert all(u.startswith("file://") for u in page_data["requests"]), page_data["requests"]


def test_key_elements_are_present(page_data: dict) -> None:
    assert page_data["h1"] == "FairEngine audit report"
    sections = page_data["sections"]
    assert sections[:2] == ["verdict", "top-findings"]  # summary first
    assert sections.index("findings") < sections.index("methods")
    assert "configuration" in page_data["sections"]
    assert page_data["svgs"] >= 3  # per-group rate plots
    assert "Positive-rate gap" in page_data["bodyText"]  # the top findings, one line each


def test_user_text_is_text_never_markup(page_data: dict) -> None:
    assert page_data["scripts"] == 0 and page_data["imgs"] == 0
    text = page_data["bodyText"]
    assert EVIL_GROUP in text  # shown literally
    assert QUOTED_GROUP in text
    assert "race<script>alert('col')</script>" in text
    assert "model<script>" in page_data["title"]


def test_accessibility_basics(page_data: dict) -> None:
    levels = page_data["headings"]
    assert levels[0] == 1 and levels.count(1) == 1
    for before, after in itertools.pairwise(levels):
        assert after <= before + 1, f"heading jumps from h{before} to h{after}: {levels}"
    for table in page_data["tables"]:
        assert table["th"] > 0, "every table needs header cells"
    # the verdict is carried by words, not only by the banner's colour
    assert any(w in page_data["verdictText"] for w in ("PASS", "FAIL", "INCOMPLETE"))
    assert any(w in page_data["bodyText"] for w in ("Rejected", "Not rejected"))
