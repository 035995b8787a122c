"""The registry events that start audits, and how they are handed to Prefect.

One vocabulary for both sources (the webhook receiver and the polling sensor), so that a
deployment trigger matches either and the same model-version event always maps to the same
Prefect event id.

An MLflow 3 webhook body is ``{"entity", "action", "timestamp", "data"}``; the audited kinds are
``model_version.created`` (data: name, version, source, run_id, tags, description) and
``model_version_alias.created`` (data: name, alias, version), sent to Prefect as the events
``mlflow.model_version.created`` and ``mlflow.model_version_alias.created``.

The Prefect event's resource is ``mlflow.registered_model.<name>`` with the labels
``mlflow.model_name``, ``mlflow.model_version``, ``mlflow.alias`` (empty for a new version) and
``fairengine.source`` (``webhook`` or ``sensor``); the deployment trigger templates the flow's
parameters from them (:data:`TRIGGER_PARAMETERS`).

Idempotency starts here: the event id is a UUID5 of (model name, version, event, alias), so a
duplicate delivery, a retried delivery with a new delivery id, or the sensor seeing a version the
webhook already reported, all give *the same* event id. Prefect's trigger evaluation ignores an
event id it has already seen (an in-memory window of 15 minutes in Prefect 3.8); the audit flow
then guards against anything older (:mod:`deployments.registry_audit`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

#: MLflow webhook events that start an audit (``entity.action``).
AUDITED_EVENTS: frozenset[str] = frozenset({"model_version.created", "model_version_alias.created"})

#: Prefix of the Prefect event names (``mlflow.model_version.created``).
EVENT_PREFIX = "mlflow."

#: Namespace of the deterministic event ids.
EVENT_NAMESPACE = uuid.UUID("5b0f6c1e-3f0e-5d3a-9f6c-6661697265ee")

#: Flow and deployment that audit a registered model version.
AUDIT_FLOW_NAME = "fairengine-registry-audit"
AUDIT_DEPLOYMENT_NAME = "registry-audit"
AUDIT_DEPLOYMENT = f"{AUDIT_FLOW_NAME}/{AUDIT_DEPLOYMENT_NAME}"

#: Parameters of the audit deployment, templated from the triggering event (Jinja, rendered by
#: the Prefect server's RunDeployment action; every label is a string).
TRIGGER_PARAMETERS: dict[str, str] = {
    "model_name": "{{ event.resource['mlflow.model_name'] }}",
    "model_version": "{{ event.resource['mlflow.model_version'] }}",
    "alias": "{{ event.resource['mlflow.alias'] }}",
    "reason": "{{ event.event }}",
    "source": "{{ event.resource['fairengine.source'] }}",
}

#: The MLflow ``test_webhook`` example payloads (``mlflow.webhooks.types.*Payload.example()``):
#: a test delivery carries nothing else that marks it as a test, so it is recognised by content.
EXAMPLE_PAYLOADS: dict[str, dict[str, Any]] = {
    "model_version.created": {
        "name": "example_model",
        "version": "1",
        "source": "models:/123",
        "run_id": "abcd1234abcd5678",
        "tags": {"example_key": "example_value"},
        "description": "An example model version",
    },
    "model_version_alias.created": {
        "name": "example_model",
        "alias": "example_alias",
        "version": "1",
    },
}


class MalformedEvent(ValueError):
    """A signed delivery whose body is not a usable MLflow registry event."""


def audit_key(model_name: str, model_version: str, reason: str, alias: str = "") -> str:
    """The idempotency key of one audit: sha256 of ``[name, version, reason, alias]`` (hex, 32).

    ``reason`` is the Prefect event name (``mlflow.model_version.created``), ``schedule@<time>``
    for a scheduled run, or anything a caller passes for a manual run.
    """
    raw = json.dumps([str(model_name), str(model_version), str(reason), str(alias or "")])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RegistryEvent:
    """One registry event that should start an audit.

    ``kind`` is the MLflow ``entity.action``; ``source`` says who saw it (``webhook`` or
    ``sensor``); ``delivery_id`` is the MLflow delivery id (webhooks only).
    """

    kind: str
    model_name: str
    model_version: str
    alias: str = ""
    source: str = "webhook"
    delivery_id: str = ""
    occurred: str | None = None
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in AUDITED_EVENTS:
            raise MalformedEvent(f"event {self.kind!r} is not one of {sorted(AUDITED_EVENTS)}")
        if not self.model_name or not str(self.model_version).isdigit():
            raise MalformedEvent(
                f"event {self.kind!r} needs a model name and a numeric version, got "
                f"name={self.model_name!r} version={self.model_version!r}"
            )
        if self.kind == "model_version_alias.created" and not self.alias:
            raise MalformedEvent("event 'model_version_alias.created' needs an alias")

    @property
    def event_name(self) -> str:
        """The Prefect event name, e.g. ``mlflow.model_version.created``."""
        return EVENT_PREFIX + self.kind

    @property
    def key(self) -> str:
        """The audit's idempotency key (:func:`audit_key`)."""
        return audit_key(self.model_name, self.model_version, self.event_name, self.alias)

    @property
    def event_id(self) -> uuid.UUID:
        """Deterministic Prefect event id: the same model-version event gives the same id."""
        return uuid.uuid5(EVENT_NAMESPACE, self.key)

    def resource(self) -> dict[str, str]:
        return {
            "prefect.resource.id": f"mlflow.registered_model.{self.model_name}",
            "prefect.resource.name": self.model_name,
            "mlflow.model_name": self.model_name,
            "mlflow.model_version": str(self.model_version),
            "mlflow.alias": self.alias,
            "fairengine.source": self.source,
        }

    def related(self) -> list[dict[str, str]]:
        return [
            {
                "prefect.resource.id": (
                    f"mlflow.model_version.{self.model_name}.{self.model_version}"
                ),
                "prefect.resource.role": "model-version",
            }
        ]

    def payload(self) -> dict[str, Any]:
        return {"delivery_id": self.delivery_id, "source": self.source, "data": self.data}

    def flow_parameters(self) -> dict[str, str]:
        """The audit deployment's parameters for this event (as the trigger would render them)."""
        return {
            "model_name": self.model_name,
            "model_version": str(self.model_version),
            "alias": self.alias,
            "reason": self.event_name,
            "source": self.source,
        }

    @classmethod
    def from_webhook(cls, body: Mapping[str, Any], delivery_id: str = "") -> RegistryEvent:
        """Parse an MLflow webhook body; raises :class:`MalformedEvent`."""
        if not isinstance(body, Mapping):
            raise MalformedEvent("the webhook body must be a JSON object")
        kind = f"{body.get('entity')}.{body.get('action')}"
        data = body.get("data")
        if not isinstance(data, Mapping):
            raise MalformedEvent("the webhook body has no 'data' object")
        if kind not in AUDITED_EVENTS:
            raise MalformedEvent(f"event {kind!r} does not start an audit")
        for name in ("name", "version") + (("alias",) if "alias" in kind else ()):
            if not isinstance(data.get(name), str | int) or isinstance(data.get(name), bool):
                raise MalformedEvent(f"webhook data field {name!r} is missing or not a string")
        occurred = body.get("timestamp")
        return cls(
            kind=kind,
            model_name=str(data["name"]),
            model_version=str(data["version"]),
            alias=str(data.get("alias") or ""),
            source="webhook",
            delivery_id=delivery_id,
            occurred=occurred if isinstance(occurred, str) else None,
            data=dict(data),
        )


def is_example_payload(body: Mapping[str, Any]) -> bool:
    """True for the payload MLflow's ``test_webhook`` sends (a connectivity check, not an event)."""
    kind = f"{body.get('entity')}.{body.get('action')}"
    example = EXAMPLE_PAYLOADS.get(kind)
    return example is not None and body.get("data") == example


def prefect_event(event: RegistryEvent) -> Any:
    """The :class:`prefect.events.Event` for ``event`` (deterministic id, labels, payload)."""
    from datetime import UTC, datetime

    from prefect.events import Event

    occurred = datetime.now(UTC)
    if event.occurred:
        try:
            occurred = datetime.fromisoformat(event.occurred)
        except ValueError:
            pass
    return Event(
        event=event.event_name,
        resource=event.resource(),
        related=event.related(),
        payload=event.payload(),
        id=event.event_id,
        occurred=occurred,
    )


class PrefectEventDispatcher:
    """Hands an event to Prefect: ``POST /api/events`` on the configured ``PREFECT_API_URL``.

    Same event as :func:`prefect.events.emit_event` would send, but synchronous: ``emit_event``
    queues on a background worker and never reports a failure, while a webhook must answer 5xx
    when Prefect is unreachable so that MLflow retries the delivery.
    """

    def __call__(self, event: RegistryEvent) -> str:
        from prefect.client.orchestration import get_client

        ev = prefect_event(event)
        with get_client(sync_client=True) as client:
            client.request("POST", "/events", json=[ev.model_dump(mode="json")])
        return str(ev.id)


class DeploymentRunDispatcher:
    """Starts the audit deployment directly (no automation needed).

    ``run_deployment(..., idempotency_key=event.key)``: Prefect returns the existing flow run for
    a key it has seen on that deployment, so duplicates create one run at most.
    """

    def __init__(self, deployment: str = AUDIT_DEPLOYMENT) -> None:
        self.deployment = deployment

    def __call__(self, event: RegistryEvent) -> str:
        from prefect.deployments import run_deployment

        run = run_deployment(
            self.deployment,
            parameters=event.flow_parameters(),
            timeout=0,
            idempotency_key=event.key,
            as_subflow=False,
            flow_run_name=f"{event.model_name}-v{event.model_version}-{event.kind}",
        )
        if isinstance(run, Coroutine):  # Prefect's async variant: called inside an event loop
            run.close()
            raise RuntimeError(
                "DeploymentRunDispatcher starts runs synchronously; call it outside an event loop "
                "(the webhook receiver calls it from its worker threads)"
            )
        return str(run.id)
