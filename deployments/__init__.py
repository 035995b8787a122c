"""Deployments: audits fired by model-registry events and by schedules.

How the pieces fit (details, commands and settings: ``docs/deployments.md``)::

    MLflow server --webhook--> webhook_receiver --Prefect event--+
    (model_version.created,    (HMAC, size, replay checks)       |
     model_version_alias.created)                                v
    MLflow registry <--poll-- registry_sensor --Prefect event--> DeploymentEventTrigger
                                                                 |
    cron schedule ---------------------------------------------->+--> registry_audit_flow
                                                                       (idempotent per model
                                                                        version and event)
                                                                       -> flows.audit.audit_flow

- :mod:`deployments.registry_events`: the one event vocabulary shared by the receiver and the
  sensor (names, resource labels, deterministic event ids) and the dispatchers that hand an event
  to Prefect (an event, or a deployment run).
- :mod:`deployments.webhook_receiver`: the HTTP receiver for MLflow 3 webhooks.
- :mod:`deployments.registry_sensor`: the polling fallback (watermark in a Prefect Variable).
- :mod:`deployments.registry_audit`: the flow that audits one registered model version.
- :mod:`deployments.serve`: serves the audit deployment (cron + event trigger) and the sensor;
  ``deployments/prefect.yaml`` is the same as a work-pool project.

Importing this package is cheap: Prefect and MLflow are imported inside the functions that need
them.
"""

from deployments.registry_events import (
    AUDITED_EVENTS,
    RegistryEvent,
)

__all__ = ["AUDITED_EVENTS", "RegistryEvent"]
