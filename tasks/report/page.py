"""The whole report: header, verdict, top findings, overview matrix, findings by attribute,
trend, methods, validation, identity, configuration; rendering.

The page reads summary first: the first screen (1,400 x 900) holds the verdict with its counts,
a one-line identity of model and data, and the top findings (:data:`TOP_FINDINGS`, ranked by
:func:`tasks.report.findings.rank_key`: rejected first, then by effect size relative to the
tolerance). The overview matrix (:mod:`tasks.report.overview`) follows; then every tested
finding grouped by the attribute it concerns, each group and each method section a closed
``<details>`` (no scripts), so a long audit stays a few screens tall until a reader opens what
they need."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from fairengine.result_codec import JSONValue
from fairengine.results import AuditResult, DecisionRecord, ValidationResult, Verdict
from tasks.report.findings import (
    DECISION_LABELS,
    DECISION_ORDER,
    VERDICT_LABELS,
    intersection_name,
    multiplicity_label,
    rank_key,
)
from tasks.report.format import (
    DASH,
    fmt_count,
    fmt_datetime,
    fmt_number,
    fmt_seconds,
    fmt_value,
    short_json,
    slug,
)
from tasks.report.methods import method_view
from tasks.report.overview import overview_view
from templates import TEMPLATE_DIR

TEMPLATE_NAME = "report.html.j2"
REPORT_FILENAME = "report.html"
TOP_FINDINGS = 10
"""Findings in the summary's top-findings table (the rest: "N more" in the full table)."""
WHOLE_MODEL = "Whole model"
"""The findings-table group of findings that concern no single attribute (individual fairness,
...)."""

log = logging.getLogger(__name__)


def validation_view(validation: ValidationResult | None) -> dict[str, Any] | None:
    """Pre-formatted data-validation outcome; ``None`` when validation did not run."""
    if validation is None:
        return None
    rows = []
    for e in validation.expectations:
        examples = list(e.unexpected_examples or [])
        rows.append(
            {
                "success": e.success,
                "status_label": "Pass" if e.success else "Fail",
                "expectation": e.expectation,
                "column": DASH if e.column is None else str(e.column),
                "description": e.description or "",
                "unexpected": fmt_count(e.unexpected_count),
                "examples": ", ".join(short_json(x, 40) for x in examples[:5])
                + (" …" if len(examples) > 5 else ""),
                "observed": short_json(e.observed),
            }
        )
    n_failed = sum(1 for r in rows if not r["success"])
    return {
        "success": validation.success,
        "status_label": "Passed" if validation.success else "Failed",
        "engine": validation.engine or DASH,
        "n_rows": fmt_count(validation.n_rows),
        "n_expectations": len(rows),
        "n_failed": n_failed,
        "rows": rows,
    }


def _prediction_settings(result: AuditResult) -> tuple[str | None, float | None]:
    """Score type and threshold: the audit's, recorded with the model; the data summary's in a
    result whose model record has none (files and tests without a model section)."""
    if result.model.score_type is not None:
        return result.model.score_type, result.model.threshold
    return result.dataset.score_type, result.dataset.threshold


def header_view(result: AuditResult) -> dict[str, Any]:
    """Identity of the audit: model, data, run; each item a ``{label, value, title, code}``."""
    model, dataset, meta = result.model, result.dataset, result.metadata
    roles = dataset.roles
    fingerprint = dataset.fingerprint or ""

    def item(label: str, value: Any, title: str = "", code: bool = False) -> dict[str, Any]:
        return {"label": label, "value": fmt_value(value), "title": title, "code": code}

    score_type, threshold = _prediction_settings(result)
    if score_type == "label":
        prediction = "hard 0/1 predictions as given (no threshold; AUC-type metrics not applicable)"
    elif score_type == "value" and result.dataset.task == "ranking":
        prediction = "ranking scores (higher ranks higher; task: ranking)"
    elif score_type == "value":
        prediction = "a regression model's predictions (real values; task: regression)"
    elif score_type == "class":
        prediction = "predicted classes (task: multiclass)"
    elif threshold is not None:
        prediction = f"{fmt_value(score_type)} scores, threshold {fmt_value(threshold)}"
    else:
        prediction = f"{fmt_value(score_type)} scores, no threshold (expected rates)"
    model_items = [
        item("Model", model.name or model.uri or "scores taken from the data"),
        item("Version", model.version),
        item("Model URI", model.uri, code=True),
        item("Predictions", prediction),
        item("Score source", model.score_description),
    ]
    data_items = [
        item("Dataset", dataset.name),
        item("Source", dataset.source, code=True),
        item("Fingerprint", fingerprint[:12] + "…" if fingerprint else None, fingerprint, True),
        item("Rows", fmt_count(dataset.n_rows)),
        item("Protected", list(roles.protected)),
        item("Label / score", f"{fmt_value(roles.label)} / {fmt_value(roles.score)}"),
    ]
    run_items = [
        item("Date", fmt_datetime(result.created_at)),
        item("Audit ID", result.audit_id, code=True),
        item("FairEngine", meta.fairengine_version),
        item("Seed", meta.seed),
        item(
            "Significance",
            f"α = {fmt_value(result.alpha)}, "
            f"{multiplicity_label(str(result.multiplicity))} adjustment",
        ),
    ]
    versions = meta.versions
    return {
        "groups": [
            {"title": "Model", "items": model_items},
            {"title": "Data", "items": data_items},
            {"title": "Run", "items": run_items},
        ],
        "versions": [{"name": str(k), "version": fmt_value(v)} for k, v in versions.items()],
    }


def verdict_view(verdict: Verdict) -> dict[str, Any]:
    """The verdict banner: status word and symbol, summary and reasons."""
    status = str(verdict.status)
    word, symbol = VERDICT_LABELS.get(status, (status.upper(), "?"))
    return {
        "status": status if status in VERDICT_LABELS else "incomplete",
        "word": word,
        "symbol": symbol,
        "summary": verdict.summary,
        "reasons": [str(r) for r in verdict.reasons],
    }


def config_text(config: Mapping[str, JSONValue]) -> str:
    """The resolved configuration as YAML (JSON if YAML cannot represent it)."""
    try:
        return yaml.safe_dump(
            config, sort_keys=False, allow_unicode=True, default_flow_style=False, width=96
        ).rstrip()
    except yaml.YAMLError:
        return json.dumps(config, indent=2, ensure_ascii=False, default=str)


def identity_view(result: AuditResult) -> list[dict[str, str]]:
    """The one-line identity under the title: model, data, protected attributes, predictions,
    run and significance; each ``{label, value, title}`` (``title``: the full text on hover)."""
    model, dataset, meta = result.model, result.dataset, result.metadata
    roles = dataset.roles
    name = model.name
    if name:
        model_text = f"{name} v{model.version}" if model.version else str(name)
    elif model.uri:  # a Python object (python:<class>@<hash>) or a path / runs:/ URI
        model_text = str(model.uri)
    else:
        model_text = f"scores from the data column {fmt_value(roles.score)}"
    source = dataset.source or ""
    data_name = dataset.name or (Path(source).name if source else DASH)
    fingerprint = dataset.fingerprint or ""
    data_text = f"{data_name}, {fmt_count(dataset.n_rows)} rows"
    score_type, threshold = _prediction_settings(result)
    if score_type == "label":
        prediction = "hard 0/1 labels"
    elif score_type == "value" and result.dataset.task == "ranking":
        prediction = "ranking scores"
    elif score_type == "value":
        prediction = "values (regression)"
    elif score_type == "class":
        prediction = "classes (multiclass)"
    elif threshold is not None:
        prediction = f"{fmt_value(score_type)} > {fmt_value(threshold)}"
    else:
        prediction = f"{fmt_value(score_type)}, expected rates"
    return [
        {"label": "Model", "value": model_text, "title": model.uri or ""},
        {
            "label": "Data",
            "value": data_text,
            "title": " · ".join(p for p in (source, fingerprint) if p),
        },
        {"label": "Protected", "value": fmt_value(list(roles.protected)), "title": ""},
        {"label": "Label", "value": fmt_value(roles.label), "title": ""},
        {"label": "Predictions", "value": prediction, "title": ""},
        {
            "label": "Significance",
            "value": f"α = {fmt_value(result.alpha)}, "
            f"{multiplicity_label(str(result.multiplicity))}",
            "title": "",
        },
        {
            "label": "Run",
            "value": f"{fmt_datetime(result.created_at)} · {fmt_value(result.audit_id)}",
            "title": f"FairEngine {fmt_value(meta.fairengine_version)}, "
            f"seed {fmt_value(meta.seed)}",
        },
    ]


def decision_counts(
    result: AuditResult, deciding: list[dict[str, Any]], n_supporting: int, n_untested: int
) -> list[dict[str, Any]]:
    """The verdict's counts: rejected, not rejected, undetermined, not tested (estimates
    without a test), and supporting tests; from the audit's decision record where it has one."""
    record = result.decisions
    by = {d: sum(1 for f in deciding if f["decision"] == d) for d in DECISION_ORDER}
    n_rejected = record.n_rejected if record else by["reject"]
    n_not = record.n_not_rejected if record else by["fail_to_reject"]
    n_undetermined = record.n_undetermined if record else by["undetermined"]
    items = [
        ("reject", n_rejected, "rejected"),
        ("fail_to_reject", n_not, "not rejected"),
        ("undetermined", n_undetermined, "undetermined"),
        ("not_tested", n_untested, "not tested (estimates)"),
    ]
    out = [{"decision": d, "count": f"{n:,}", "label": label} for d, n, label in items]
    if n_supporting:
        out.append({"decision": "supporting", "count": f"{n_supporting:,}", "label": "supporting"})
    return out


def findings_by_attribute(rows: list[dict[str, Any]], protected: list[str]) -> list[dict[str, Any]]:
    """The deciding findings grouped by the attribute (or intersection) they concern: the
    audit's attributes in order, then intersections and other names, then the whole model; in
    each group rejections first, then undetermined, then the rest, each by effect size."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in rows:
        groups.setdefault(f["attribute"] or WHOLE_MODEL, []).append(f)
    order = [intersection_name(a, protected) for a in protected]
    names = sorted(
        groups,
        key=lambda n: (
            order.index(n) if n in order else len(order) + (n == WHOLE_MODEL),
            " × " not in n,
            n,
        ),
    )
    out = []
    for i, name in enumerate(names):
        members = sorted(groups[name], key=rank_key)
        counts = {d: sum(1 for f in members if f["decision"] == d) for d in DECISION_ORDER}
        out.append(
            {
                "name": name,
                "anchor": slug("findings", i, name),
                "rows": members,
                "n": len(members),
                "summary": ", ".join(
                    f"{counts[d]} {DECISION_LABELS[d].split(' (')[0].lower()}"
                    for d in DECISION_ORDER
                    if counts[d]
                ),
                "has_rejection": counts["reject"] > 0,
            }
        )
    return out


TREND_ROWS = 12
"""Findings shown in the trend's estimates table (rejections first, then by adjusted
p-value)."""


def trend_view(result: AuditResult) -> dict[str, Any] | None:
    """Headline estimates of this audit beside earlier audits of the same registered model, and
    first the findings whose decision changed since the previous audit.

    ``None`` when there is no earlier audit (``metadata.previous_audits`` from MLflow, newest
    first). An entry's ``decisions`` (finding key -> decision) is absent in histories collected
    before decisions were recorded: then only the estimates are compared.
    """
    history = list(result.metadata.previous_audits or [])
    if not history:
        return None
    previous = history[0]
    history = history[::-1]  # oldest first, this audit last
    tested = [
        f for m in result.methods if m.status == "ok" for f in m.findings if f.pvalue is not None
    ]
    tested.sort(
        key=lambda f: (
            f.decision != "reject",
            1.0 if f.adjusted_pvalue is None else f.adjusted_pvalue,
        )
    )
    columns = [
        {
            "label": _version_label(h.model_version),
            "date": fmt_datetime(
                datetime.fromtimestamp(h.started_ms / 1000, UTC).isoformat()
                if h.started_ms
                else None
            ),
            "verdict": str(h.verdict or DASH).upper(),
        }
        for h in history
    ]
    version = result.model.version
    columns.append(
        {
            "label": f"v{version} (this audit)" if version else "this audit",
            "date": fmt_datetime(result.created_at),
            "verdict": str(result.verdict.status).upper(),
        }
    )
    rows = []
    for f in tested[:TREND_ROWS]:
        values = [fmt_number(h.estimates.get(f.key)) for h in history]
        rows.append({"label": f.label or f.key, "values": [*values, fmt_number(f.estimate)]})
    before = previous.decisions
    changed: list[dict[str, Any]] = []
    n_compared = 0
    if isinstance(before, dict):
        for f in tested:
            if not f.counts or f.key not in before:
                continue
            n_compared += 1
            old = str(before[f.key])
            if old != f.decision:
                changed.append(
                    {
                        "label": f.label or f.key,
                        "key": f.key,
                        "before": DECISION_LABELS.get(old, old),
                        "before_decision": old,
                        "after": DECISION_LABELS.get(f.decision, str(f.decision)),
                        "after_decision": f.decision,
                        "estimate_before": fmt_number(previous.estimates.get(f.key)),
                        "estimate_after": fmt_number(f.estimate),
                    }
                )
        changed.sort(
            key=lambda c: (c["after_decision"] != "reject", c["before_decision"] != "reject")
        )
    return {
        "columns": columns,
        "rows": rows,
        "n_previous": len(history),
        "previous_label": _version_label(previous.model_version),
        "has_decisions": isinstance(before, dict),
        "changed": changed,
        "n_compared": n_compared,
    }


def _version_label(version: Any) -> str:
    return f"v{version}" if version else DASH


NA = "not applicable to a "
"""How a method's not-run reason starts when it is not defined for the audit's task
(:func:`fairengine.prediction_task.not_applicable_reason`)."""


def _inapplicable_words(views: list[dict[str, Any]]) -> str:
    """"not applicable to a regression audit (defined for binary classifiers)" from the
    methods' reasons; each group of methods defined for the same tasks is named once."""
    if not views:
        return ""
    head = views[0]["reason"].split(":", 1)[0]
    defined = sorted(
        {v["reason"].split(" is defined for ", 1)[-1].split(" (task", 1)[0] for v in views}
    )
    return f"{head} (defined for {'; '.join(defined)})"


def report_context(result: AuditResult) -> dict[str, Any]:
    """Everything the template needs, as plain pre-formatted data (plus ``result``)."""
    protected = [str(a) for a in result.dataset.roles.protected]
    every = [method_view(m, i, protected) for i, m in enumerate(result.methods)]
    # methods not defined for the audit's task (e.g. binary-only methods in a regression audit)
    # are listed on one line, not as a section each
    inapplicable = [m for m in every if m["status"] == "not_run" and m["reason"].startswith(NA)]
    methods = [m for m in every if m not in inapplicable]
    ran = [m for m in methods if m["status"] == "ok"]
    verdict_rows = [f for m in ran for f in m["findings"] if f["counts"]]
    verdict_rows.sort(key=lambda f: DECISION_ORDER.get(f["decision"], 3))  # stable
    top = sorted(verdict_rows, key=rank_key)
    supporting_rows = [f for m in ran for f in m["findings"] if f["decision"] == "supporting"]
    decisions = result.decisions or DecisionRecord()
    untested = sum(len(m["findings"]) - m["n_tested"] for m in ran)
    subject = result.model.name or result.dataset.name or ""
    if subject and result.model.version:
        subject = f"{subject} v{result.model.version}"
    meta = result.metadata
    return {
        "result": result,
        "page_title": " · ".join(
            p for p in ("FairEngine audit report", str(subject), result.audit_id) if p
        ),
        "subject": str(subject),
        "identity": identity_view(result),
        "header": header_view(result),
        "verdict": verdict_view(result.verdict),
        "counts": decision_counts(result, verdict_rows, len(supporting_rows), untested),
        "input_warnings": [str(w) for w in result.warnings],
        "alpha": fmt_value(result.alpha),
        "adjustment": multiplicity_label(str(result.multiplicity)),
        "verdict_rows": verdict_rows,
        "top_findings": top[:TOP_FINDINGS],
        "n_more_findings": max(len(top) - TOP_FINDINGS, 0),
        "finding_groups": findings_by_attribute(verdict_rows, protected),
        "overview": overview_view(result),
        "supporting_rows": supporting_rows,
        "n_undetermined": sum(1 for f in verdict_rows if f["decision"] == "undetermined"),
        "gap_null": decisions.gap_null,
        "resampling_risk": fmt_value(decisions.resampling_risk),
        "resamples_drawn": f"{decisions.resamples_drawn:,}",
        "n_untested": untested,
        "methods": methods,
        "inapplicable_methods": [m["title"] for m in inapplicable],
        "inapplicable_reason": _inapplicable_words(inapplicable),
        "validation": validation_view(result.validation),
        "trend": trend_view(result),
        "config_text": config_text(result.config),
        "timings": [{"step": str(k), "seconds": fmt_seconds(v)} for k, v in meta.timings.items()],
        "created": fmt_datetime(result.created_at),
        "generated_by": f"FairEngine {fmt_value(meta.fairengine_version)}",
    }


# --------------------------------------------------------------------------- rendering


def make_environment() -> Environment:
    """The report's Jinja2 environment: autoescaped, strict about undefined names."""
    return Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@functools.cache
def report_environment() -> Environment:
    """The shared environment of :func:`render_report` (made once: compiling the template
    costs about 50 ms; Jinja2 still recompiles it when the file changes on disk)."""
    return make_environment()


def render_report(result: AuditResult) -> str:
    """The audit's self-contained HTML report (one string, UTF-8 safe)."""
    template = report_environment().get_template(TEMPLATE_NAME)
    return template.render(**report_context(result))


def write_report(result: AuditResult, directory: Path) -> Path:
    """Render the report into ``directory/report.html`` (folder created) and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REPORT_FILENAME
    path.write_text(render_report(result), encoding="utf-8")
    return path


@task(name="render-report", cache_policy=NO_CACHE)
def render_report_task(result: AuditResult) -> str:
    """Prefect task around :func:`render_report`; returns the HTML string."""
    html = render_report(result)
    try:
        logger: Any = get_run_logger()
    except MissingContextError:  # called via .fn() outside a run
        logger = log
    logger.info("Rendered the audit report (%.1f KiB)", len(html.encode("utf-8")) / 1024)
    return html
