"""Record an audit in MLflow: params, flat metrics, the JSON result and the HTML report.

The audit run is linked to the audited model version by tags on both sides:
the run carries ``fairengine.model_name``/``fairengine.model_version``; the model version carries
``fairengine.verdict``, ``fairengine.audit_run_id`` and ``fairengine.audit_id``.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.results import AuditResult
from tasks.settings import default_artifact_root, default_tracking_uri

MLFLOW_PARAM_LIMIT = 6000  # characters per param value in MLflow 3


def flatten_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"methods.group_parity.tolerance": "0.05", ...}`` from a nested config."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten_params(value, f"{name}."))
        else:
            out[name] = str(value)[:MLFLOW_PARAM_LIMIT]
    return out


def ensure_experiment(client: Any, name: str, tracking_uri: str) -> str:
    """The experiment id of ``name``, creating it (with artifacts under the FairEngine home when
    the store is the default local one)."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    location = None
    if tracking_uri == default_tracking_uri() and tracking_uri.startswith("sqlite:"):
        location = (default_artifact_root() / name).as_uri()
    return client.create_experiment(name, artifact_location=location)


def log_audit(
    result: AuditResult,
    html: str,
    *,
    tracking_uri: str,
    experiment: str,
    tag_model_version: bool = True,
    approve_alias: str | None = None,
    run_tags: dict[str, str] | None = None,
) -> dict[str, str]:
    """Create the audit run and log everything; returns run id, experiment id and artifact URI.

    The audited model version (when there is one) is tagged ``fairengine.verdict``,
    ``fairengine.audit_run_id``, ``fairengine.audit_id`` and ``fairengine.report_uri``; with
    ``approve_alias`` and a ``pass`` verdict the alias is moved to that version. ``run_tags``
    are added to the run when it is created (e.g. what triggered the audit).
    """
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp_id = ensure_experiment(client, experiment, tracking_uri)
    model = result.model
    tags = {
        "fairengine.audit_id": result.audit_id,
        "fairengine.verdict": result.verdict.status,
        "fairengine.kind": "audit",
        **(run_tags or {}),
    }
    if model.get("name"):
        tags["fairengine.model_name"] = str(model["name"])
        tags["fairengine.model_version"] = str(model.get("version"))
    if model.get("uri"):
        tags["fairengine.model_uri"] = str(model["uri"])
    run_name = (
        f"audit-{model.get('name') or result.dataset.get('name') or 'data'}-{result.audit_id}"
    )
    run = client.create_run(exp_id, run_name=run_name, tags=tags)
    run_id = run.info.run_id
    try:
        params = flatten_params(result.config)
        items = list(params.items())
        for i in range(0, len(items), 100):
            client.log_batch(
                run_id, params=[mlflow.entities.Param(k, v) for k, v in items[i : i + 100]]
            )
        metrics = result.flat_metrics()
        metrics["verdict_fail"] = float(result.verdict.status == "fail")
        ts = int(time.time() * 1000)
        entries = [mlflow.entities.Metric(k, v, ts, 0) for k, v in sorted(metrics.items())]
        for i in range(0, len(entries), 500):
            client.log_batch(run_id, metrics=entries[i : i + 500])
        client.log_dict(run_id, result.to_dict(), "audit/audit.json")
        client.log_text(run_id, html, "audit/report.html")
        client.set_terminated(run_id, "FINISHED")
    except Exception:
        client.set_terminated(run_id, "FAILED")
        raise
    artifact_uri = client.get_run(run_id).info.artifact_uri
    name, version = model.get("name"), model.get("version")
    if tag_model_version and name and version:
        for key, value in {
            "fairengine.verdict": result.verdict.status,
            "fairengine.audit_run_id": run_id,
            "fairengine.audit_id": result.audit_id,
            "fairengine.report_uri": f"{artifact_uri}/audit/report.html",
        }.items():
            client.set_model_version_tag(name, str(version), key, value)
    if approve_alias and name and version and result.verdict.status == "pass":
        client.set_registered_model_alias(name, approve_alias, str(version))
    return {
        "run_id": run_id,
        "experiment_id": exp_id,
        "artifact_uri": artifact_uri,
        "tracking_uri": tracking_uri,
    }


@task(name="log-to-mlflow", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=3)
def log_to_mlflow(
    result: AuditResult,
    html: str,
    tracking_uri: str,
    experiment: str,
    tag_model_version: bool = True,
    approve_alias: str | None = None,
    run_tags: dict[str, str] | None = None,
) -> dict[str, str]:
    """Prefect task around :func:`log_audit` (retried: the store may be a remote server)."""
    info = log_audit(
        result,
        html,
        tracking_uri=tracking_uri,
        experiment=experiment,
        tag_model_version=tag_model_version,
        approve_alias=approve_alias,
        run_tags=run_tags,
    )
    get_run_logger().info("Logged audit to MLflow run %s (%s)", info["run_id"], tracking_uri)
    return info


def previous_audits(
    tracking_uri: str,
    experiment: str,
    model_name: str,
    keys: list[str],
    limit: int = 5,
) -> list[dict[str, Any]]:
    """The last ``limit`` finished audits of registered model ``model_name`` (newest first).

    Each entry: run id, audit id, model version, verdict, start time and the estimates of the
    findings ``keys`` that run logged (missing keys are left out). ``[]`` when there is none.
    """
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    quoted = model_name.replace("\\", "\\\\").replace("'", "\\'")
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=(
            f"tags.`fairengine.model_name` = '{quoted}' and attributes.status = 'FINISHED'"
        ),
        order_by=["attributes.start_time DESC"],
        max_results=limit,
    )
    wanted = set(keys)
    return [
        {
            "run_id": r.info.run_id,
            "audit_id": r.data.tags.get("fairengine.audit_id"),
            "model_version": r.data.tags.get("fairengine.model_version"),
            "verdict": r.data.tags.get("fairengine.verdict"),
            "started_ms": r.info.start_time,
            "estimates": {k: v for k, v in r.data.metrics.items() if k in wanted},
        }
        for r in runs
    ]


@task(name="previous-audits", cache_policy=NO_CACHE)
def previous_audits_task(
    result: AuditResult, tracking_uri: str, experiment: str, limit: int = 5
) -> list[dict[str, Any]]:
    """Earlier audits of the same registered model, for the report's trend table.

    Never fails the audit: an unreachable store gives ``[]`` and a warning.
    """
    name = result.model.get("name")
    if not name:
        return []
    keys = [f.key for f in result.findings() if f.pvalue is not None]
    try:
        history = previous_audits(tracking_uri, experiment, str(name), keys, limit)
    except Exception as exc:
        get_run_logger().warning("Could not read earlier audits of %s: %s", name, exc)
        return []
    get_run_logger().info("Found %d earlier audit(s) of %s", len(history), name)
    return history
