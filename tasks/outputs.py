"""Local copies of an audit's outputs: ``audit.json`` (the source of truth), ``report.html``
and, when asked for (``report.pdf: true``), ``report.pdf``."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.results import AuditResult


def write_local_outputs(result: AuditResult, html: str, directory: Path) -> dict[str, str]:
    """Write ``audit.json`` then ``report.html`` into ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "audit.json"
    json_path.write_text(result.to_json(), encoding="utf-8")
    report_path = directory / "report.html"
    report_path.write_text(html, encoding="utf-8")
    return {"json": str(json_path), "report": str(report_path)}


@task(name="write-outputs", cache_policy=NO_CACHE)
def write_outputs(result: AuditResult, html: str, directory: str) -> dict[str, str]:
    """Prefect task around :func:`write_local_outputs`."""
    paths = write_local_outputs(result, html, Path(directory))
    get_run_logger().info("Wrote %s and %s", paths["json"], paths["report"])
    return paths


@task(name="write-report-pdf", cache_policy=NO_CACHE)
def write_pdf_output(html: str, report_path: str) -> dict[str, str]:
    """Print the report to ``report.pdf`` beside ``report_path`` (:mod:`tasks.report_pdf`).

    Returns ``{"pdf": path}``, or ``{"pdf_error": reason}`` with a warning when Chromium could
    not print it: the audit's JSON and HTML are written already and its MLflow run is still
    logged (without the PDF); ``fairengine report --pdf`` prints it again later. A missing
    browser is caught before the audit starts (:func:`flows.preflight.preflight`).
    """
    from tasks.report_pdf import PDF_FILENAME, ReportPdfError, write_pdf

    target = Path(report_path).with_name(PDF_FILENAME)
    try:
        write_pdf(html, target)
    except ReportPdfError as exc:
        get_run_logger().warning("report.pdf not written: %s", exc)
        return {"pdf_error": str(exc)}
    get_run_logger().info("Wrote %s", target)
    return {"pdf": str(target)}
