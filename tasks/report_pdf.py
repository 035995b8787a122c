"""The report as a PDF, printed by headless Chromium (``--print-to-pdf``).

For reviewers who file documents: ``report.pdf`` beside ``report.html`` (config
``report.pdf: true``, ``fairengine audit --pdf``, or ``fairengine report --pdf`` for an audit
already on disk), logged to the audit's MLflow run as ``audit/report.pdf``.

The PDF is the same report with every ``<details>`` block open: a filed document cannot be
clicked, so nothing the HTML holds behind a summary is left out. Chromium prints it with the
report's print stylesheet, without the browser's header and footer lines; the page is loaded
from a private copy in a temporary folder with a throwaway browser profile, so nothing of the
user's browser profile is read or changed.

The browser is the first of :data:`BROWSER_NAMES` on ``PATH``, or the executable named by
``$FAIRENGINE_CHROMIUM``; without one, :class:`ReportPdfError` says what is missing and how to
install it (``.ci/run`` installs Debian's ``chromium`` package).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from fairengine.errors import FairEngineError

BROWSER_ENV = "FAIRENGINE_CHROMIUM"
"""Environment variable naming the Chromium (or Chrome) executable to print with."""
BROWSER_NAMES: tuple[str, ...] = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
)
"""Executables looked up on ``PATH``, in this order."""
PDF_FILENAME = "report.pdf"
DEFAULT_TIMEOUT_S = 120.0
"""Seconds Chromium may take to print one report (the COMPAS report prints in a few)."""

_DETAILS_TAG = re.compile(r"<details(?=[\s>])")


class ReportPdfError(FairEngineError):
    """The report could not be printed to PDF: no browser found, or the browser failed."""


def find_browser() -> str:
    """The Chromium executable to print with: ``$FAIRENGINE_CHROMIUM`` if set (it must exist),
    else the first of :data:`BROWSER_NAMES` on ``PATH``; :class:`ReportPdfError` naming what
    is missing otherwise."""
    named = os.environ.get(BROWSER_ENV)
    if named:
        found = shutil.which(named)
        if found is None:
            raise ReportPdfError(
                f"{BROWSER_ENV}={named!r} is not an executable; the report's PDF needs a "
                "Chromium or Google Chrome browser (headless --print-to-pdf)"
            )
        return found
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ReportPdfError(
        "the report's PDF (report.pdf: true, --pdf) needs a Chromium or Google Chrome browser, "
        f"printed headless with --print-to-pdf, and none is installed: none of "
        f"{', '.join(BROWSER_NAMES)} is on PATH. Install one (Debian/Ubuntu: "
        f"apt-get install chromium), or set {BROWSER_ENV} to its executable, or turn the "
        "PDF off (report.pdf: false)"
    )


def printable_html(html: str) -> str:
    """``html`` with every ``<details>`` element open (the report's HTML holds no literal
    ``<details`` outside its own tags: user text and SVG text are escaped; an ``open`` given
    twice is the same as once)."""
    return _DETAILS_TAG.sub("<details open", html)


def _browser_args(browser: str, profile: Path, page: Path, pdf: Path) -> list[str]:
    args = [
        browser,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--mute-audio",
        f"--user-data-dir={profile}",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf}",
        page.as_uri(),
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Chromium refuses to run as root without
        args.insert(1, "--no-sandbox")
    return args


def _run_browser(args: list[str], browser: str, timeout: float) -> tuple[int, str]:
    """Run the browser in its own process group; its exit status and output (stderr, else
    stdout). On a timeout or an interruption the whole group (Chromium's helper processes
    too) is killed."""
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise ReportPdfError(f"could not start {browser} to print the report: {exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as exc:
        _kill_group(proc)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise ReportPdfError(
                f"{browser} did not print the report to PDF within {timeout:.0f} s"
            ) from None
        raise
    return proc.returncode, err or out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups here
            proc.kill()
    except ProcessLookupError:
        pass
    proc.communicate()


def write_pdf(
    html: str, pdf_path: Path, *, browser: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> Path:
    """Print the report ``html`` to ``pdf_path`` with headless Chromium; returns the path.

    The file is written only when Chromium made a PDF: a failure (no browser, a crash, a
    timeout, no output) raises :class:`ReportPdfError` with Chromium's last output lines and
    leaves no partial ``pdf_path``.
    """
    browser = browser or find_browser()
    pdf_path = Path(pdf_path)
    with tempfile.TemporaryDirectory(prefix="fairengine-pdf-") as tmp:
        work = Path(tmp)
        page = work / "report.html"
        page.write_text(printable_html(html), encoding="utf-8")
        printed = work / PDF_FILENAME
        args = _browser_args(browser, work / "profile", page, printed)
        returncode, output = _run_browser(args, browser, timeout)
        made = printed.is_file() and printed.read_bytes()[:5] == b"%PDF-"
        if returncode != 0 or not made:
            tail = "\n".join(output.strip().splitlines()[-8:])
            raise ReportPdfError(
                f"{browser} could not print the report to PDF (exit status {returncode}"
                + ("" if made else ", no PDF written")
                + (f"):\n{tail}" if tail else ")")
            )
        pdf_path.parent.mkdir(parents=True, exist_ok=True)
        partial = pdf_path.with_name(pdf_path.name + ".partial")
        shutil.copyfile(printed, partial)
        partial.replace(pdf_path)
    return pdf_path


def write_report_pdf(
    report_html: Path,
    pdf_path: Path | None = None,
    *,
    browser: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Path:
    """Print the report file ``report_html`` to ``pdf_path`` (default: ``report.pdf`` beside
    it); see :func:`write_pdf`."""
    report_html = Path(report_html)
    if not report_html.is_file():
        raise ReportPdfError(f"{str(report_html)!r} does not exist; give an audit's report.html")
    target = pdf_path or report_html.with_name(PDF_FILENAME)
    html = report_html.read_text(encoding="utf-8")
    return write_pdf(html, target, browser=browser, timeout=timeout)
