"""Jinja2 templates of the HTML audit report (presentation only; rendered by ``tasks.report``)."""

from __future__ import annotations

from pathlib import Path

TEMPLATE_DIR: Path = Path(__file__).parent
"""Folder holding ``report.html.j2`` and ``report.css`` (shipped as package data)."""

__all__ = ["TEMPLATE_DIR"]
