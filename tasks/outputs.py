"""Local copies of an audit's outputs: ``audit.json`` (the source of truth) and ``report.html``."""

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
