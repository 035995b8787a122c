"""One section per method: the generic part (status, findings, warnings) and the method's own
view.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fairengine.results import MethodDetails, MethodResult, NoDetails
from tasks.report.findings import (
    STATUS_LABELS,
    finding_attribute,
    finding_tolerance,
    finding_view,
)
from tasks.report.format import (
    fmt_seconds,
    fmt_value,
    slug,
)
from tasks.report.views import (
    fliptest,
    group_metrics,
    group_parity,
    individual_fairness,
    intersectional,
    mitigation,
    multiclass_metrics,
    permutation_tests,
    ranking_metrics,
    regression_metrics,
    subgroup_scan,
)

log = logging.getLogger(__name__)


STRICT_VIEWS_ENV = "FAIRENGINE_STRICT_REPORT"
"""Set to 1 (the test suite does) to make a view that raises fail the report."""


class ReportViewError(RuntimeError):
    """A method's report view raised (only with :data:`STRICT_VIEWS_ENV` set)."""


def strict_views() -> bool:
    """Whether a view that raises fails the report (tests) instead of showing an error block."""
    return os.environ.get(STRICT_VIEWS_ENV, "") not in ("", "0", "false")


RAW_DETAILS_LIMIT = 20_000
"""Characters of a method's details JSON shown when it has no view of its own."""


@dataclass(frozen=True)
class MethodView:
    """How the report draws one method's details: ``build(result)`` returns the pre-formatted
    values (strings, lists, :class:`~markupsafe.Markup` SVG) that the macro ``block(view)`` of
    the template ``template`` (a path under ``templates/``) lays out. ``details`` is the type
    of details the view reads; a result carrying other details (an older ``audit.json``) gets
    the generic section."""

    details: type[MethodDetails]
    build: Callable[[MethodResult], dict[str, Any]]
    template: str


VIEWS: dict[str, MethodView] = {}
"""Method name -> its view (:func:`register_view`); a method without one (a plugin) is drawn by
the generic section: status, parameters, findings, warnings and its details as JSON."""


def register_view(method: str, view: MethodView) -> None:
    """Draw ``method``'s details with ``view`` (replacing a view registered before)."""
    VIEWS[method] = view


BUILT_IN_VIEWS: tuple[ModuleType, ...] = (
    group_parity,
    group_metrics,
    permutation_tests,
    intersectional,
    fliptest,
    individual_fairness,
    mitigation,
    regression_metrics,
    multiclass_metrics,
    ranking_metrics,
    subgroup_scan,
)
"""The view modules of the built-in methods (each: ``METHOD``, ``DETAILS``, ``view``,
``TEMPLATE``)."""


def _register_built_in() -> None:
    for module in BUILT_IN_VIEWS:
        register_view(module.METHOD, MethodView(module.DETAILS, module.view, module.TEMPLATE))


def details_json(result: MethodResult) -> str | None:
    """The method's details as indented JSON (cut at :data:`RAW_DETAILS_LIMIT` characters)."""
    if isinstance(result.details, NoDetails):
        return None
    data = result.details.to_dict()
    if not data:
        return None
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if len(text) > RAW_DETAILS_LIMIT:
        text = text[:RAW_DETAILS_LIMIT] + "\n… (cut; see audit.json)"
    return text


def method_view(
    result: MethodResult, index: int, protected: tuple[str, ...] | list[str] = ()
) -> dict[str, Any]:
    """The generic section of one method plus its own view's data, if it has one
    (``protected``: the audit's protected attributes, to say which one each finding concerns)."""
    name = result.method
    block: str | None = None
    view: dict[str, Any] | None = None
    view_error: str | None = None
    spec = VIEWS.get(name)
    if result.status == "ok" and spec is not None and isinstance(result.details, spec.details):
        try:
            view = spec.build(result)
            block = spec.template
        except Exception as exc:
            if strict_views():  # the tests: a view that raises is a bug to fix, not to hide
                raise ReportViewError(f"the {name} view raised: {exc!r}") from exc
            # production: the report is still written, with a visible error block and the
            # method's raw details, and the error is logged
            log.error("could not draw the %s details block: %r", name, exc)
            view_error = f"{type(exc).__name__}: {exc}"
    raw_details = details_json(result) if block is None else None
    findings = [
        finding_view(
            f, finding_tolerance(f, result.parameters), finding_attribute(f, list(protected))
        )
        for f in result.findings
    ]
    return {
        "method": name,
        "title": result.title or name,
        "anchor": slug("method", index, name),
        "status": result.status,
        "status_label": STATUS_LABELS.get(result.status, str(result.status)),
        "reason": result.reason or "",
        "warnings": [str(w) for w in result.warnings],
        "view_error": view_error,
        "seconds": fmt_seconds(result.seconds),
        "parameters": [
            {"name": str(k), "value": fmt_value(v)} for k, v in result.parameters.items()
        ],
        "findings": findings,
        "tested_findings": [f for f in findings if f["tested"]],
        "estimates": [f for f in findings if not f["tested"]],
        "n_tested": sum(1 for f in findings if f["tested"]),
        "n_rejected": sum(1 for f in findings if f["decision"] == "reject"),
        "block": block,
        "view": view,
        "raw_details": raw_details,
    }


_register_built_in()
