"""Audit one registered model version: the flow behind the registry-event and cron deployments.

``registry_audit_flow(model_name, model_version, reason, base_config)`` takes a base audit
config (a YAML path or a dict: data source, columns, methods; its ``model`` section is replaced),
points it at ``models:/<name>/<version>`` and runs :func:`flows.audit.audit_flow` as a subflow,
which logs the audit run and tags the model version with ``fairness.verdict`` /
``fairness.audit_run_id`` (tag names: :data:`tasks.mlflow_log.TAGS`). When the config names
``comparison.baseline`` (``@champion``: an alias of the same model, or any model URI), the new
version is then compared with it (:func:`compare_with_baseline`, :mod:`flows.compare`).

Idempotent per (model name, version, event): an audit that already ran for that key is not
re-run, whoever asks (a duplicate webhook delivery, the sensor seeing the same version, a
re-triggered automation). Two records, checked in order:

1. MLflow: a run in the audit experiment tagged ``fairness.trigger_key = <key>``
   (the tag is written once the audit run has been logged; it survives a Prefect reset);
2. a Prefect Variable ``fairengine-audit-<key>``, *created* atomically before auditing (the
   server refuses a second create with 409, so two concurrent flow runs cannot both audit). It
   holds ``{"state": "running" | "done", ...}``; a failed audit deletes it so that a retry can
   run; a ``running`` claim older than ``claim_ttl_seconds`` (a crashed run) is taken over.

The key is :func:`deployments.registry_events.audit_key` of (name, version, reason, alias).
Scheduled runs (``reason="schedule"``) are periodic by design: their key includes the run's
scheduled time, so each tick audits once.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from deployments.registry_events import AUDIT_FLOW_NAME, audit_key
from tasks.mlflow_log import TAGS

CONFIG_ENV = "FAIRENGINE_AUDIT_CONFIG"
CLAIM_PREFIX = "fairengine-audit-"
TRIGGER_KEY_TAG = TAGS.trigger_key
DEFAULT_CLAIM_TTL_SECONDS = 3 * 3600.0


def load_base_config(base_config: str | dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """The base audit config as a dict and the folder its relative paths resolve against.

    ``None`` reads the path in ``$FAIRENGINE_AUDIT_CONFIG``.
    """
    import os

    from fairengine.config import read_config_file
    from fairengine.errors import ConfigError

    if base_config is None:
        base_config = os.environ.get(CONFIG_ENV)
        if not base_config:
            raise ConfigError(
                "no base audit config: pass base_config (a YAML path or a dict) or set "
                f"${CONFIG_ENV}"
            )
    if isinstance(base_config, dict):
        return copy.deepcopy(base_config), None
    path = Path(str(base_config)).expanduser()
    raw = read_config_file(path, "base_config")
    return raw, str(path.resolve().parent)


def config_for_version(base: dict[str, Any], model_uri: str) -> dict[str, Any]:
    """``base`` pointed at ``model_uri``: ``model.uri`` replaced, ``columns.score`` dropped (the
    model scores the data)."""
    cfg = copy.deepcopy(base)
    cfg["model"] = {**(cfg.get("model") or {}), "uri": model_uri}
    if isinstance(cfg.get("columns"), dict):
        cfg["columns"].pop("score", None)
    return cfg


def claim_name(key: str) -> str:
    return f"{CLAIM_PREFIX}{key}"


def claim_audit(key: str, info: dict[str, Any], ttl_seconds: float) -> tuple[bool, dict | None]:
    """Atomically claim ``key`` (create the Variable); returns ``(claimed, existing value)``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import VariableCreate, VariableUpdate
    from prefect.exceptions import ObjectAlreadyExists

    name = claim_name(key)
    value = {**info, "state": "running", "claimed_at": time.time()}
    with get_client(sync_client=True) as client:
        try:
            client.create_variable(VariableCreate(name=name, value=value))
            return True, None
        except ObjectAlreadyExists:
            existing = client.read_variable_by_name(name)
        current = existing.value if existing is not None else None
        if existing is None:  # deleted between the two calls: try once more
            try:
                client.create_variable(VariableCreate(name=name, value=value))
                return True, None
            except ObjectAlreadyExists:
                return False, None
        if not isinstance(current, dict):
            return False, None
        stale = (
            current.get("state") == "running"
            and time.time() - float(current.get("claimed_at", 0)) > ttl_seconds
        )
        if stale:
            client.update_variable(VariableUpdate(name=name, value=value))
            return True, current
        return False, current


def finish_claim(key: str, info: dict[str, Any]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import VariableUpdate

    with get_client(sync_client=True) as client:
        client.update_variable(
            VariableUpdate(
                name=claim_name(key), value={**info, "state": "done", "done_at": time.time()}
            )
        )


def release_claim(key: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.delete_variable_by_name(claim_name(key))
        except ObjectNotFound:
            pass


def find_audit_run(client: Any, experiment: str, key: str) -> str | None:
    """Id of a completely logged (``FINISHED``) audit run tagged with ``key``, if any."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{TRIGGER_KEY_TAG}` = '{key}' and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def resolve_version(client: Any, model_name: str, model_version: str, alias: str) -> str:
    """The registered version to audit (``model_version``, else the one ``alias`` points at)."""
    from fairengine.errors import ConfigError, ModelLoadError

    try:
        if model_version:
            return str(client.get_model_version(model_name, str(model_version)).version)
        if alias:
            return str(client.get_model_version_by_alias(model_name, alias).version)
    except Exception as exc:
        what = f"version {model_version}" if model_version else f"alias {alias!r}"
        raise ModelLoadError(
            f"registered model {model_name!r} has no {what}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    raise ConfigError("give model_version, or an alias to resolve (e.g. 'champion')")


def _reason_key(reason: str) -> str:
    if reason != "schedule":
        return reason
    from prefect.runtime import flow_run

    return f"schedule@{flow_run.scheduled_start_time.isoformat()}"


@flow(name=AUDIT_FLOW_NAME, log_prints=True)
def registry_audit_flow(
    model_name: str,
    model_version: str = "",
    reason: str = "manual",
    base_config: str | dict[str, Any] | None = None,
    alias: str = "",
    source: str = "manual",
    claim_ttl_seconds: float = DEFAULT_CLAIM_TTL_SECONDS,
) -> dict[str, Any]:
    """Audit ``models:/<model_name>/<model_version>`` (or the version ``alias`` points at) once
    per (name, version, reason, alias).

    ``reason``: what asked for the audit (the Prefect event name, ``schedule`` or ``manual``).
    ``source``: who saw the event (``webhook``, ``sensor``, ``schedule``, ``manual``), recorded
    as a tag. Returns ``{"status": "audited" | "skipped", ...}``.
    """
    from mlflow import MlflowClient

    from fairengine.config import AuditConfig
    from tasks.settings import default_tracking_uri

    logger = get_run_logger()
    base, base_dir = load_base_config(base_config)
    tracking_uri = (base.get("mlflow") or {}).get("tracking_uri") or default_tracking_uri()
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    version = resolve_version(client, model_name, model_version, alias)
    model_uri = f"models:/{model_name}/{version}"
    config = config_for_version(base, model_uri)
    experiment = AuditConfig.from_dict(config).mlflow.experiment
    reason_key = _reason_key(reason)
    key = audit_key(model_name, version, reason_key, alias)
    summary: dict[str, Any] = {
        "model_name": model_name,
        "model_version": version,
        "model_uri": model_uri,
        "reason": reason_key,
        "alias": alias,
        "source": source,
        "key": key,
    }

    previous = find_audit_run(client, experiment, key)
    if previous is not None:
        logger.info("Already audited %s for %s (run %s): skipped", model_uri, reason, previous)
        return {**summary, "status": "skipped", "run_id": previous, "why": "mlflow"}

    from prefect.runtime import flow_run

    claimed, holder = claim_audit(key, {**summary, "flow_run_id": flow_run.id}, claim_ttl_seconds)
    if not claimed:
        logger.info("Audit of %s for %s already claimed (%s): skipped", model_uri, reason, holder)
        return {
            **summary,
            "status": "skipped",
            "run_id": (holder or {}).get("run_id"),
            "why": "claimed",
        }
    try:
        from flows.audit import audit_flow  # heavy imports only when there is an audit to run

        run = audit_flow(
            config,
            base_dir,
            run_tags={
                TRIGGER_KEY_TAG: key,
                TAGS.trigger: reason_key,
                TAGS.trigger_source: source,
                TAGS.trigger_alias: alias or "",
                TAGS.prefect_flow_run_id: str(flow_run.id),
            },
        )
    except BaseException:
        release_claim(key)  # nothing was audited: a retry may run
        raise
    run_id = run.mlflow["run_id"] if run.mlflow else None
    result = {
        **summary,
        "status": "audited",
        "run_id": run_id,
        "verdict": run.result.verdict.status,
        "audit_id": run.result.audit_id,
        "report": run.report_path,
    }
    # the audit ran: record it before anything else can fail
    finish_claim(key, {k: v for k, v in result.items() if isinstance(v, str | None)})
    logger.info("Audited %s (%s): verdict %s", model_uri, reason_key, result["verdict"])
    baseline = AuditConfig.from_dict(config).comparison.baseline
    if baseline:
        result["comparison"] = compare_with_baseline(
            config, base_dir, baseline, model_name, version, client
        )
    return result


def baseline_uri(baseline: str, model_name: str) -> str:
    """``comparison.baseline`` as a model URI: ``@champion`` (an alias of the audited model)
    is ``models:/<model_name>@champion``; a URI is used as it is."""
    return f"models:/{model_name}{baseline}" if baseline.startswith("@") else baseline


def compare_with_baseline(
    config: dict[str, Any],
    base_dir: str | None,
    baseline: str,
    model_name: str,
    version: str,
    client: Any,
) -> dict[str, Any]:
    """After the audit of a new version: compare it with ``comparison.baseline`` (the
    champion), which tags the version ``fairness.comparison`` and emits
    ``fairengine.comparison.worse`` when it is worse. Skipped when the baseline is this very
    version; a comparison that fails is reported in the result, never undoing the audit."""
    logger = get_run_logger()
    uri = baseline_uri(baseline, model_name)
    candidate = f"models:/{model_name}/{version}"
    try:
        from tasks.model import describe_model_uri

        info = describe_model_uri(uri, client.tracking_uri)
        if info.get("name") == model_name and str(info.get("version")) == str(version):
            logger.info("Comparison skipped: the baseline %s is this version", uri)
            return {"status": "skipped", "why": f"the baseline {uri} is this version"}
        from flows.compare import compare_flow

        run = compare_flow(config, baseline=uri, candidate=candidate, base_dir=base_dir)
    except Exception as exc:
        logger.warning("Comparison with %s failed: %s: %s", uri, type(exc).__name__, exc)
        return {"status": "failed", "baseline": uri, "reason": f"{type(exc).__name__}: {exc}"}
    c = run.comparison
    logger.info("Compared %s with %s: %s", candidate, uri, c.verdict.status)
    return {
        "status": "compared",
        "baseline": uri,
        "verdict": c.verdict.status,
        "comparison_id": c.comparison_id,
        "run_id": run.mlflow["run_id"] if run.mlflow else None,
        "report": run.paths["report"],
    }
