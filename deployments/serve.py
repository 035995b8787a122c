"""Serve the audit deployment (cron schedule + registry-event trigger) and the polling sensor.

Needs a standing Prefect server (schedules and triggers do not run on the ephemeral one)::

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    export MLFLOW_TRACKING_URI=http://127.0.0.1:5000
    python -m deployments.serve --base-config audit.yaml \\
        --model-name credit-scorer --alias champion --cron "0 3 * * 1" \\
        [--sensor-interval 60]

This creates, on the Prefect server:

- ``fairengine-registry-audit/registry-audit``: :func:`registry_audit_flow` with

  - a cron schedule (``--cron``, ``--timezone``): a periodic audit of ``models:/<model>@<alias>``
    on the data source named in the base config (``reason="schedule"``);
  - a ``DeploymentEventTrigger`` on ``mlflow.model_version.created`` and
    ``mlflow.model_version_alias.created`` (from the webhook receiver or the sensor) whose
    parameters are templated from the event (:data:`registry_events.TRIGGER_PARAMETERS`);
- ``fairengine-registry-sensor/registry-sensor`` (with ``--sensor-interval`` > 0): the polling
  fallback on an interval.

The process runs each flow run in a subprocess (``--limit`` at a time). SIGTERM pauses the
schedules; restarting resumes them. ``deployments/prefect.yaml`` describes the same deployments
for a work pool (``prefect deploy``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deployments.registry_events import (
    AUDIT_DEPLOYMENT_NAME,
    AUDITED_EVENTS,
    EVENT_PREFIX,
    TRIGGER_PARAMETERS,
)

SENSOR_DEPLOYMENT_NAME = "registry-sensor"


def registry_trigger(watch_models: list[str] | None = None) -> Any:
    """The trigger that runs the audit deployment on a registry event.

    ``watch_models``: only these registered models (default: any).
    """
    from prefect.events import DeploymentEventTrigger

    resource = (
        [f"mlflow.registered_model.{m}" for m in watch_models]
        if watch_models
        else "mlflow.registered_model.*"
    )
    return DeploymentEventTrigger(
        name="fairengine-audit-on-registry-event",
        description="Audit a model version when MLflow registers it or moves an alias to it",
        expect={EVENT_PREFIX + kind for kind in AUDITED_EVENTS},
        match={"prefect.resource.id": resource},
        parameters=dict(TRIGGER_PARAMETERS),
    )


def build_deployments(
    base_config: str,
    *,
    model_name: str | None = None,
    alias: str = "champion",
    cron: str | None = None,
    timezone: str = "UTC",
    watch_models: list[str] | None = None,
    sensor_interval: float = 0,
    sensor_models: list[str] | None = None,
) -> list[Any]:
    """The runner deployments :func:`main` serves (not yet registered with the server)."""
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    from deployments.registry_audit import registry_audit_flow
    from deployments.registry_sensor import SENSOR_FLOW_NAME, registry_sensor_flow

    if cron and not model_name:
        raise ValueError("--cron needs --model-name (the model whose alias is audited)")
    # the schedule carries its own parameters, so that triggered and manual runs do not inherit
    # the scheduled model/alias as defaults
    schedule_params = {"model_name": model_name, "alias": alias, "reason": "schedule"}
    audit = registry_audit_flow.to_deployment(
        name=AUDIT_DEPLOYMENT_NAME,
        schedules=(
            [Cron(cron, timezone=timezone, parameters={**schedule_params, "source": "schedule"})]
            if cron
            else None
        ),
        parameters={"base_config": str(Path(base_config).expanduser().resolve())},
        triggers=[registry_trigger(watch_models)],
        entrypoint_type=EntrypointType.MODULE_PATH,
        tags=["fairengine", "audit"],
        description=(
            "FairEngine audit of a registered model version; started by registry events and on "
            "a schedule"
        ),
    )
    deployments = [audit]
    if sensor_interval and sensor_interval > 0:
        deployments.append(
            registry_sensor_flow.to_deployment(
                name=SENSOR_DEPLOYMENT_NAME,
                interval=sensor_interval,
                parameters={"model_names": sensor_models or None},
                entrypoint_type=EntrypointType.MODULE_PATH,
                concurrency_limit=1,
                tags=["fairengine", "sensor"],
                description=f"Polls the MLflow registry ({SENSOR_FLOW_NAME})",
            )
        )
    return deployments


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deployments.serve",
        description="Serve the FairEngine audit deployments (needs PREFECT_API_URL).",
    )
    parser.add_argument("--base-config", required=True, help="audit YAML (data, columns, methods)")
    parser.add_argument("--model-name", default=None, help="model audited on the schedule")
    parser.add_argument("--alias", default="champion", help="alias audited on the schedule")
    parser.add_argument("--cron", default=None, help='e.g. "0 3 * * 1" (none: no schedule)')
    parser.add_argument("--timezone", default="UTC")
    parser.add_argument(
        "--watch-model", action="append", default=None, help="trigger only for these models"
    )
    parser.add_argument("--sensor-interval", type=float, default=0, help="seconds; 0: off")
    parser.add_argument("--sensor-model", action="append", default=None)
    parser.add_argument("--limit", type=int, default=2, help="concurrent flow runs")
    args = parser.parse_args(argv)

    from tasks.settings import apply_offline_defaults

    apply_offline_defaults()
    import os

    if not os.environ.get("PREFECT_API_URL"):
        from prefect.settings import PREFECT_API_URL

        if not PREFECT_API_URL.value():
            parser.error(
                "PREFECT_API_URL is not set: schedules and event triggers need a standing "
                "Prefect server (prefect server start), not the ephemeral one"
            )
    from prefect import serve

    deployments = build_deployments(
        args.base_config,
        model_name=args.model_name,
        alias=args.alias,
        cron=args.cron,
        timezone=args.timezone,
        watch_models=args.watch_model,
        sensor_interval=args.sensor_interval,
        sensor_models=args.sensor_model,
    )
    serve(*deployments, limit=args.limit)


if __name__ == "__main__":
    main()
