"""Prefect events for an audit's outcome, for Prefect automations to act on (alerts).

Every audit emits ``fairengine.audit.completed``; an audit whose verdict is FAIL also emits
``fairengine.audit.failed``. Both concern the same resource: the audited MLflow model version
(``mlflow.model-version.<name>.<version>``) or, when the audit scored a column of the data
(no registered model), the audited data (``fairengine.audit-data.<fingerprint>``). The payload
carries the verdict (status, summary, reasons), the counts behind it, the MLflow run and the
report's URI, so that an automation's action can template a message from the event alone
(``{{ event.payload.verdict.summary }}``, ``{{ event.resource.name }}``); see
``docs/deployments.md`` for an automation that posts to a Slack-compatible webhook.

The events are sent with Prefect's :func:`prefect.events.emit_event` to the Prefect API the
audit reports to (a ``prefect server``, Prefect Cloud, or the embedded server, where no
automation runs). Emitting never fails an audit: an event that cannot be built or sent is a
warning in the run's log.
"""

from __future__ import annotations

import logging
from typing import Any

from fairengine.results import AuditResult

AUDIT_COMPLETED = "fairengine.audit.completed"
"""Emitted after every audit (any verdict)."""
AUDIT_FAILED = "fairengine.audit.failed"
"""Emitted after an audit whose verdict is FAIL."""

MODEL_VERSION_RESOURCE = "mlflow.model-version"
"""Resource id prefix of an audited model version: ``mlflow.model-version.<name>.<version>``."""
DATA_RESOURCE = "fairengine.audit-data"
"""Resource id prefix of the audited data when there is no registered model:
``fairengine.audit-data.<first 16 hex digits of the data's fingerprint>``."""

MAX_REASONS = 10
"""The verdict's reasons carried in the payload (the first ones; ``reasons_total`` counts all)."""

log = logging.getLogger(__name__)


def audit_resource(result: AuditResult) -> dict[str, str]:
    """The event's resource: the audited model version, else the audited data.

    Labels (all strings): ``prefect.resource.id``, ``prefect.resource.name``,
    ``fairengine.verdict``, ``fairengine.audit_id`` and, for a model version,
    ``mlflow.model.name`` and ``mlflow.model.version``.
    """
    name, version = result.model.name, result.model.version
    labels = {
        "fairengine.verdict": result.verdict.status,
        "fairengine.audit_id": result.audit_id,
    }
    if name and version is not None:
        return {
            "prefect.resource.id": f"{MODEL_VERSION_RESOURCE}.{name}.{version}",
            "prefect.resource.name": f"{name} version {version}",
            "mlflow.model.name": str(name),
            "mlflow.model.version": str(version),
            **labels,
        }
    fingerprint = str(result.dataset.fingerprint or result.audit_id)
    data_name = str(result.dataset.name or "data")
    return {
        "prefect.resource.id": f"{DATA_RESOURCE}.{fingerprint[:16]}",
        "prefect.resource.name": data_name,
        **labels,
    }


def audit_payload(
    result: AuditResult,
    mlflow_info: dict[str, str] | None,
    paths: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The event's payload: what an alert says without reading anything else.

    ``verdict`` (status, summary, the first :data:`MAX_REASONS` reasons and ``reasons_total``),
    ``counts`` (``tests``, ``rejected``, ``not_rejected``, ``undetermined``, ``supporting``;
    empty when the audit took no decisions), ``audit_id``, ``model`` (name, version, uri),
    ``data`` (name, rows, fingerprint), ``mlflow`` (``run_id``, ``experiment_id``,
    ``tracking_uri``; ``null`` when the audit was not logged), ``report_uri`` (the report
    artifact on the MLflow run, else the local ``report.html``) and ``report_path`` (the local
    file).
    """
    decisions = result.decisions
    counts = (
        {
            "tests": decisions.n_tests,
            "rejected": decisions.n_rejected,
            "not_rejected": decisions.n_not_rejected,
            "undetermined": decisions.n_undetermined,
            "supporting": decisions.n_supporting,
        }
        if decisions is not None
        else {}
    )
    report_path = (paths or {}).get("report")
    report_uri = None
    run = None
    if mlflow_info and mlflow_info.get("run_id"):
        from tasks.mlflow_log import REPORT_ARTIFACT

        run = {
            "run_id": mlflow_info["run_id"],
            "experiment_id": mlflow_info.get("experiment_id"),
            "tracking_uri": mlflow_info.get("tracking_uri"),
        }
        if mlflow_info.get("artifact_uri"):
            report_uri = f"{mlflow_info['artifact_uri']}/{REPORT_ARTIFACT}"
    if report_uri is None and report_path:
        from pathlib import Path

        report_uri = Path(report_path).resolve().as_uri()
    model = result.model
    return {
        "audit_id": result.audit_id,
        "verdict": {
            "status": result.verdict.status,
            "summary": result.verdict.summary,
            "reasons": list(result.verdict.reasons[:MAX_REASONS]),
            "reasons_total": len(result.verdict.reasons),
        },
        "counts": counts,
        "model": {
            "name": model.name,
            "version": None if model.version is None else str(model.version),
            "uri": model.uri,
        },
        "data": {
            "name": result.dataset.name,
            "rows": result.dataset.n_rows,
            "fingerprint": result.dataset.fingerprint,
        },
        "mlflow": run,
        "report_uri": report_uri,
        "report_path": report_path,
    }


def audit_related(mlflow_info: dict[str, str] | None) -> list[dict[str, str]]:
    """Related resources: the MLflow run that recorded the audit, when there is one."""
    if not (mlflow_info and mlflow_info.get("run_id")):
        return []
    return [
        {
            "prefect.resource.id": f"mlflow.run.{mlflow_info['run_id']}",
            "prefect.resource.role": "mlflow-run",
        }
    ]


def audit_event_names(result: AuditResult) -> list[str]:
    """The events an audit with this verdict emits: ``completed``, plus ``failed`` on FAIL."""
    return [AUDIT_COMPLETED] + ([AUDIT_FAILED] if result.verdict.status == "fail" else [])


def emit_audit_events(
    result: AuditResult,
    mlflow_info: dict[str, str] | None,
    paths: dict[str, str] | None = None,
    logger: Any = None,
) -> list[str]:
    """Emit :func:`audit_event_names` for ``result`` (Prefect's ``emit_event``); returns the
    names of the events handed to Prefect's events worker. Never raises: a failure is a
    warning on ``logger`` (the flow's run logger, else this module's)."""
    logger = logger or log
    sent: list[str] = []
    try:
        from prefect.events import emit_event

        resource = audit_resource(result)
        payload = audit_payload(result, mlflow_info, paths)
        related = audit_related(mlflow_info)
        for name in audit_event_names(result):
            event = emit_event(
                event=name, resource=resource, related=related or None, payload=payload
            )
            if event is not None:
                sent.append(name)
    except Exception as exc:  # an alert that cannot be sent must not lose the audit
        logger.warning("Could not emit the audit's Prefect events: %s: %s", type(exc).__name__, exc)
        return sent
    if sent:
        logger.info(
            "Emitted Prefect event(s) %s for %s", ", ".join(sent), resource["prefect.resource.id"]
        )
    return sent


SLACK_TEXT_TEMPLATE = (
    '{"text": {{ ("FairEngine audit " ~ event.payload.verdict.status | upper ~ ": "'
    ' ~ event.resource["prefect.resource.name"] ~ " - " ~ event.payload.verdict.summary'
    ' ~ " (rejected " ~ event.payload.counts.rejected ~ ", undetermined "'
    ' ~ event.payload.counts.undetermined ~ "; MLflow run " ~ event.payload.mlflow.run_id'
    ' ~ "; report " ~ event.payload.report_uri ~ ")") | tojson }}}'
)
"""The webhook body of :func:`create_alert_automation`: Slack-compatible JSON ``{"text": ...}``
rendered by Prefect's automation templating from the event (``tojson`` keeps quotes in the
summary valid JSON)."""


def create_alert_automation(
    webhook_url: str,
    *,
    name: str = "fairengine-audit-failed",
    event: str = AUDIT_FAILED,
    block_name: str = "fairengine-alerts",
    resource_prefix: str | None = None,
) -> str:
    """Create (with Prefect's Python API, against the Prefect API this process uses:
    ``PREFECT_API_URL``) a Webhook block posting to ``webhook_url`` and an automation that
    calls it with :data:`SLACK_TEXT_TEMPLATE` each time ``event`` arrives; returns the
    automation's id.

    ``resource_prefix`` (e.g. ``"mlflow.model-version.credit-model."``) limits the automation to
    matching resources; by default every audit's event triggers it.
    """
    from prefect.automations import Automation
    from prefect.blocks.webhook import Webhook
    from prefect.events.actions import CallWebhook
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.types import SecretDict
    from pydantic import SecretStr

    block = Webhook(
        method="POST",
        url=SecretStr(webhook_url),
        headers=SecretDict({"Content-Type": "application/json"}),
    )
    block_id = block.save(block_name, overwrite=True)
    automation = Automation(
        name=name,
        description=f"Post a Slack-compatible message when {event} arrives",
        trigger=EventTrigger(
            expect={event},
            match={"prefect.resource.id": f"{resource_prefix or ''}*"},
            posture=Posture.Reactive,
            threshold=1,
        ),
        actions=[CallWebhook(block_document_id=block_id, payload=SLACK_TEXT_TEMPLATE)],
    ).create()
    if not isinstance(automation, Automation):  # Prefect's sync/async dual API: sync here
        raise TypeError(f"Automation.create returned {type(automation).__name__}")
    return str(automation.id)
