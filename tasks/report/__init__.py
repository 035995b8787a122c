"""The HTML audit report: one self-contained page rendered from an
:class:`~fairengine.results.AuditResult`.

The package turns the typed result into plain, pre-formatted view data (strings, lists, dicts)
plus inline SVG plots, and ``templates/report.html.j2`` lays it out. The templates do no
arithmetic and no formatting; they are autoescaped, and the only markup they print unescaped
is the SVG made by :mod:`tasks.report.plots` (whose text matplotlib XML-escapes).

* :mod:`tasks.report.format`: how every number, interval, p-value, time and id is printed;
* :mod:`tasks.report.plots`: the figures (inline SVG);
* :mod:`tasks.report.findings`: labels and the view of one finding;
* :mod:`tasks.report.views`: one module per method, ``view(result) -> dict`` reading that
  method's typed details, with its template ``templates/methods/<method>.html.j2``;
* :mod:`tasks.report.methods`: each method's section: the generic part (status, parameters,
  findings, warnings), then its view (:data:`~tasks.report.methods.VIEWS`); a method without
  a view (a plugin) shows its details as JSON; a view that raises fails under the tests
  (``FAIRENGINE_STRICT_REPORT=1``) and shows a visible error block in production;
* :mod:`tasks.report.overview`: the overview matrix (groups x rates with intervals, each cell
  marked by the decisions of the tests that concern it), per attribute and intersection;
* :mod:`tasks.report.page`: the page, summary first (verdict with its counts, one-line
  identity, top findings), then the overview, the findings grouped by attribute, the trend
  (decisions changed since the previous audit first), the methods (each a closed
  ``<details>``), validation, identity and configuration; rendering and the Prefect task.

The HTML is self-contained: inline CSS (``templates/report.css``), inline SVG, no scripts, no
external URLs or fonts, and a print stylesheet. Details are on demand with ``<details>`` (no
scripts); every table fits the page or scrolls inside its own box, and numbers never wrap.
``benchmarks/report_render.py`` measures the render time and size of a full every-method
report.

A report view for a new method: a module with ``view(result) -> dict`` and a template whose
macro ``block(view)`` lays it out, registered with
:func:`~tasks.report.methods.register_view`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tasks.report.format import (
        fmt_count,
        fmt_interval,
        fmt_level,
        fmt_number,
        fmt_pvalue,
        fmt_rate,
    )
    from tasks.report.methods import (
        STRICT_VIEWS_ENV,
        VIEWS,
        MethodView,
        ReportViewError,
        method_view,
        register_view,
    )
    from tasks.report.page import (
        REPORT_FILENAME,
        TEMPLATE_NAME,
        render_report,
        render_report_task,
        report_context,
        write_report,
    )

_EXPORTS = {
    **dict.fromkeys(
        ["fmt_count", "fmt_interval", "fmt_level", "fmt_number", "fmt_pvalue", "fmt_rate"],
        "format",
    ),
    **dict.fromkeys(
        [
            "STRICT_VIEWS_ENV",
            "VIEWS",
            "MethodView",
            "ReportViewError",
            "method_view",
            "register_view",
        ],
        "methods",
    ),
    **dict.fromkeys(
        [
            "REPORT_FILENAME",
            "TEMPLATE_NAME",
            "render_report",
            "render_report_task",
            "report_context",
            "write_report",
        ],
        "page",
    ),
}
# lazy (PEP 562): a worker process rendering one view's figures imports that view, matplotlib
# and the formatting, not the page (Jinja2) and its Prefect task
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "REPORT_FILENAME",
    "STRICT_VIEWS_ENV",
    "TEMPLATE_NAME",
    "VIEWS",
    "MethodView",
    "ReportViewError",
    "fmt_count",
    "fmt_interval",
    "fmt_level",
    "fmt_number",
    "fmt_pvalue",
    "fmt_rate",
    "method_view",
    "register_view",
    "render_report",
    "render_report_task",
    "report_context",
    "write_report",
]
