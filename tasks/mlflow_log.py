"""Record an audit in MLflow: params, flat metrics, the JSON result, the HTML report (and its
PDF when one was made), the findings as a table and the methods' own artifact files.

The audit run is linked to the audited model version by tags on both sides (names in
:data:`TAGS`): the run carries ``fairness.model_name``/``fairness.model_version``; the model
version carries ``fairness.verdict``, ``fairness.audit_run_id``, ``fairness.audit_id`` and
``fairness.report_uri``.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.audit_context import PreviousAudit
from fairengine.results import AuditResult, MethodResult
from tasks.findings_table import FINDINGS_COLUMNS, findings_rows
from tasks.settings import default_artifact_root, default_tracking_uri

MLFLOW_PARAM_LIMIT = 6000  # characters per param value in MLflow 3


@dataclass(frozen=True)
class AuditTags:
    """The MLflow tag names FairEngine writes and reads: one set, used by the flow, the
    deployments' idempotency check, the trend table and the tests.

    On the audited **model version**: ``verdict``, ``audit_run_id``, ``audit_id``,
    ``report_uri``. On the **audit run**: ``audit_id``, ``verdict``, ``kind``, ``model_name``,
    ``model_version``, ``model_uri`` and, for deployment-triggered audits, ``trigger``,
    ``trigger_source``, ``trigger_alias``, ``trigger_key``, ``prefect_flow_run_id``.
    """

    verdict: str = "fairness.verdict"
    audit_run_id: str = "fairness.audit_run_id"
    audit_id: str = "fairness.audit_id"
    report_uri: str = "fairness.report_uri"
    kind: str = "fairness.kind"
    model_name: str = "fairness.model_name"
    model_version: str = "fairness.model_version"
    model_uri: str = "fairness.model_uri"
    trigger: str = "fairness.trigger"
    trigger_source: str = "fairness.trigger_source"
    trigger_alias: str = "fairness.trigger_alias"
    trigger_key: str = "fairness.trigger_key"
    prefect_flow_run_id: str = "fairness.prefect_flow_run_id"


TAGS = AuditTags()
"""The tag names (``TAGS.verdict == "fairness.verdict"``, ...)."""

METHOD_ARTIFACTS_DIR = "artifacts"
"""Method artifact files are logged under ``artifacts/<method>/<name>`` of the audit run."""

REPORT_ARTIFACT = "audit/report.html"
"""The HTML report on the audit run (what ``fairness.report_uri`` points to)."""
PDF_ARTIFACT = "audit/report.pdf"
"""The report's PDF on the audit run, when the audit made one (``report.pdf: true``)."""
FINDINGS_TABLE = "audit/findings.json"
"""The findings table on the audit run (``mlflow.log_table``; read it with
``mlflow.load_table("audit/findings.json", run_ids=[...])``)."""


def _warn(message: str, *args: Any) -> None:
    """A warning in the Prefect run log inside a flow, in the ``logging`` tree outside one."""
    try:
        logger: Any = get_run_logger()
    except Exception:  # no active flow/task run (e.g. ``fairengine log``)
        logger = logging.getLogger(__name__)
    logger.warning(message, *args)


def _artifact_name(name: str, source: Path) -> str | None:
    """The artifact's relative name (``name`` or the file's name); ``None`` if unsafe."""
    name = name or source.name
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if not parts or PurePosixPath(name).is_absolute() or any(p in ("..", ".") for p in parts):
        return None
    return "/".join(parts)


def stage_method_artifacts(methods: Sequence[MethodResult], staging: Path) -> dict[str, list[str]]:
    """Copy each method's :attr:`~fairengine.results.MethodResult.artifacts` to
    ``staging/<method>/<name>``.

    An artifact that names a missing file or an unsafe name (absolute or with ``..``) is skipped
    with a warning: a lost artifact must not lose the audit record. Returns the staged names
    per method.
    """
    staged: dict[str, list[str]] = {}
    for method in methods:
        for artifact in method.artifacts:
            source = Path(artifact.path).expanduser()
            if not source.is_file():
                _warn("%s: artifact file %s does not exist; skipped", method.method, source)
                continue
            name = _artifact_name(artifact.name, source)
            if name is None:
                _warn(
                    "%s: artifact name %r must be a relative path without '..'; skipped",
                    method.method,
                    artifact.name,
                )
                continue
            target = staging / method.method / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            staged.setdefault(method.method, []).append(name)
    return staged


def log_findings_table(client: Any, run_id: str, result: AuditResult) -> None:
    """Log :func:`findings_rows` as the table artifact :data:`FINDINGS_TABLE` of ``run_id``.

    The file has the layout of ``MlflowClient.log_table`` (pandas' JSON ``split``: ``columns``
    and ``data``) and is listed, as ``log_table`` lists its tables, in the run's
    ``mlflow.loggedArtifacts`` tag: the MLflow UI then offers "View as table" and
    ``mlflow.load_table`` finds it. It is written here rather than by ``log_table``, whose
    pandas writer keeps 10 decimal places (a p-value of 3e-15 would read 0.0): every number
    is written exactly. ``mlflow.load_table`` reads it with pandas' default JSON parser (exact
    to about 12 significant digits) and infers column types, so a group named ``"1"`` reads back as
    the number 1.
    """
    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    rows = findings_rows(result)
    table = {
        "columns": list(FINDINGS_COLUMNS),
        "data": [[row[c] for c in FINDINGS_COLUMNS] for row in rows],
    }
    with tempfile.TemporaryDirectory(prefix="fairengine-findings-") as tmp:
        source = Path(tmp) / "findings.json"
        source.write_text(json.dumps(table, ensure_ascii=False, allow_nan=False), "utf-8")
        _log_file_as(client, run_id, source, FINDINGS_TABLE)
    tags = client.get_run(run_id).data.tags
    listed = json.loads(tags.get(MLFLOW_LOGGED_ARTIFACTS) or "[]")
    entry = {"path": FINDINGS_TABLE, "type": "table"}
    if entry not in listed:
        client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps([*listed, entry]))


def _log_file_as(client: Any, run_id: str, source: Path, artifact: str) -> None:
    """Log the file ``source`` as the artifact path ``artifact`` (``folder/name``), whatever
    the file's own name."""
    folder, name = artifact.rsplit("/", 1)
    with tempfile.TemporaryDirectory(prefix="fairengine-artifact-") as tmp:
        staged = Path(tmp) / name
        shutil.copyfile(source, staged)
        client.log_artifact(run_id, str(staged), folder)


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
    the store is the default local one). Two audits that start together (a new version and its
    alias) may both find no experiment and both create it: the one that loses the race
    (``RESOURCE_ALREADY_EXISTS``) reads the experiment the other created."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    location = None
    if tracking_uri == default_tracking_uri() and tracking_uri.startswith("sqlite:"):
        location = (default_artifact_root() / name).as_uri()
    elif tracking_uri.startswith("sqlite:///"):
        # MLflow's default for a SQLite store is ./mlruns, relative to whatever folder the
        # command ran in; keep the artifacts beside the database instead.
        db = Path(tracking_uri.split("sqlite:///", 1)[1]).expanduser().resolve()
        location = (db.parent / "mlartifacts" / name).as_uri()
    try:
        return client.create_experiment(name, artifact_location=location)
    except Exception as exc:
        if "RESOURCE_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
            raise
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def discard_partial_run(client: Any, run_id: str) -> None:
    """Mark a run whose logging failed ``FAILED`` and move it to MLflow's trash (``delete_run``).

    No half-logged audit stays visible (run searches, the UI, the trend table, the deployments'
    idempotency check); ``mlflow runs restore --run-id <id>`` brings it back for debugging.
    Errors here are logged, not raised: the store may be what failed.
    """
    for step in ("set_terminated", "delete_run"):
        try:
            if step == "set_terminated":
                client.set_terminated(run_id, "FAILED")
            else:
                client.delete_run(run_id)
        except Exception as exc:
            _warn("could not %s partial MLflow run %s: %s", step, run_id, exc)


_OPEN_RUNS: dict[str, Any] = {}
"""Runs :func:`log_audit` has created and not yet finished (run id -> client)."""


def discard_open_runs() -> list[str]:
    """Discard every run still being logged (the process is about to end: SIGTERM); returns
    their ids. Called from the CLI's signal path, so that no partial audit run is left."""
    discarded = []
    for run_id, client in list(_OPEN_RUNS.items()):
        discard_partial_run(client, run_id)
        _OPEN_RUNS.pop(run_id, None)
        discarded.append(run_id)
    return discarded


def log_audit(
    result: AuditResult,
    html: str,
    *,
    tracking_uri: str,
    experiment: str,
    tag_model_version: bool = True,
    approve_alias: str | None = None,
    run_tags: dict[str, str] | None = None,
    pdf: Path | None = None,
) -> dict[str, str]:
    """Create the audit run and log everything; returns run id, experiment id and artifact URI.

    Artifacts: ``audit/audit.json``, ``audit/report.html``, ``audit/report.pdf`` (the file
    ``pdf``, when given), the findings table ``audit/findings.json``
    (:func:`log_findings_table`) and every file in a method's ``artifacts`` under
    ``artifacts/<method>/`` (see :func:`stage_method_artifacts`).
    If logging fails after the run was created, the run is discarded
    (:func:`discard_partial_run`) and the error re-raised: a retry starts a fresh run.
    The audited model version (when there is one) is tagged ``fairness.verdict``,
    ``fairness.audit_run_id``, ``fairness.audit_id`` and ``fairness.report_uri``; with
    ``approve_alias`` and a ``pass`` verdict the alias is moved to that version. ``run_tags``
    are added to the run when it is created (e.g. what triggered the audit).
    """
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp_id = ensure_experiment(client, experiment, tracking_uri)
    model = result.model
    existing = logged_audit_run(client, exp_id, result.audit_id)
    if existing is not None:  # idempotent: one audit id, one finished run
        _warn("audit %s is already logged as MLflow run %s", result.audit_id, existing)
        artifact_uri = client.get_run(existing).info.artifact_uri
        tag_audited_version(client, result, existing, artifact_uri, tag_model_version)
        return {
            "run_id": existing,
            "experiment_id": exp_id,
            "artifact_uri": artifact_uri,
            "tracking_uri": tracking_uri,
            "already_logged": "true",
        }
    tags = {
        TAGS.audit_id: result.audit_id,
        TAGS.verdict: result.verdict.status,
        TAGS.kind: "audit",
        **(run_tags or {}),
    }
    if model.name:
        tags[TAGS.model_name] = str(model.name)
        tags[TAGS.model_version] = str(model.version)
    if model.uri:
        tags[TAGS.model_uri] = str(model.uri)
    run_name = f"audit-{model.name or result.dataset.name or 'data'}-{result.audit_id}"
    run = client.create_run(exp_id, run_name=run_name, tags=tags)
    run_id = run.info.run_id
    _OPEN_RUNS[run_id] = client
    try:
        params = flatten_params(result.config)
        items = list(params.items())
        for i in range(0, len(items), 100):
            client.log_batch(
                run_id, params=[mlflow.entities.Param(k, v) for k, v in items[i : i + 100]]
            )
        log_audit_record(client, run_id, result, html, pdf=pdf)
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        discard_partial_run(client, run_id)
        raise
    finally:
        _OPEN_RUNS.pop(run_id, None)
    artifact_uri = run.info.artifact_uri  # as created (a read now would build every metric)
    name, version = model.name, model.version
    tag_audited_version(client, result, run_id, artifact_uri, tag_model_version)
    if approve_alias and name and version and result.verdict.status == "pass":
        repeat_lost_race(
            lambda: client.set_registered_model_alias(name, approve_alias, str(version))
        )
    return {
        "run_id": run_id,
        "experiment_id": exp_id,
        "artifact_uri": artifact_uri,
        "tracking_uri": tracking_uri,
    }


def audit_metrics(result: AuditResult) -> dict[str, float]:
    """The audit's MLflow metrics: :meth:`~fairengine.results.AuditResult.flat_metrics`, plus
    ``verdict_fail`` (1 for a FAIL verdict, else 0) and the counts behind the verdict
    (``tests_rejected``, ``tests_not_rejected``, ``tests_undetermined``: deciding tests only)."""
    metrics = result.flat_metrics()
    metrics["verdict_fail"] = float(result.verdict.status == "fail")
    if result.decisions is not None:
        metrics["tests_rejected"] = float(result.decisions.n_rejected)
        metrics["tests_not_rejected"] = float(result.decisions.n_not_rejected)
        metrics["tests_undetermined"] = float(result.decisions.n_undetermined)
    return metrics


def log_audit_record(
    client: Any,
    run_id: str,
    result: AuditResult,
    html: str,
    *,
    pdf: Path | None = None,
    metric_prefix: str = "",
) -> dict[str, float]:
    """Log the audit into the existing run ``run_id``: :func:`audit_metrics` (each name after
    ``metric_prefix``), ``audit/audit.json``, :data:`REPORT_ARTIFACT`, :data:`PDF_ARTIFACT`
    (the file ``pdf``, when given), the findings table (:func:`log_findings_table`) and the
    methods' artifact files (:func:`stage_method_artifacts`). Used by :func:`log_audit` and by
    the MLflow evaluator (``flows/mlflow_evaluator.py``); returns the metrics as logged."""
    import mlflow

    # the files first: MLflow reads the run (the artifact location, the tags) for them, and a
    # run read after its ~1,500 metrics were logged builds every metric (0.25 s a read)
    client.log_dict(run_id, result.to_dict(), "audit/audit.json")
    client.log_text(run_id, html, REPORT_ARTIFACT)
    log_findings_table(client, run_id, result)
    if pdf is not None:
        _log_file_as(client, run_id, pdf, PDF_ARTIFACT)
    with tempfile.TemporaryDirectory(prefix="fairengine-artifacts-") as tmp:
        for method in stage_method_artifacts(result.methods, Path(tmp)):
            client.log_artifacts(
                run_id, str(Path(tmp) / method), f"{METHOD_ARTIFACTS_DIR}/{method}"
            )
    metrics = {f"{metric_prefix}{k}": v for k, v in audit_metrics(result).items()}
    ts = int(time.time() * 1000)
    entries = [mlflow.entities.Metric(k, v, ts, 0) for k, v in sorted(metrics.items())]
    for i in range(0, len(entries), 500):
        client.log_batch(run_id, metrics=entries[i : i + 500])
    return metrics


def logged_audit_run(client: Any, experiment_id: str, audit_id: str) -> str | None:
    """The id of a FINISHED run of ``experiment_id`` tagged with ``audit_id``, if any."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{TAGS.audit_id}` = '{audit_id}' and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def tag_audited_version(
    client: Any, result: AuditResult, run_id: str, artifact_uri: str, enabled: bool
) -> None:
    """Tag the audited model version (when there is one) with the audit's verdict and run."""
    name, version = result.model.name, result.model.version
    if not (enabled and name and version):
        return
    for key, value in {
        TAGS.verdict: result.verdict.status,
        TAGS.audit_run_id: run_id,
        TAGS.audit_id: result.audit_id,
        TAGS.report_uri: f"{artifact_uri}/{REPORT_ARTIFACT}",
    }.items():
        set_version_tag(client, name, str(version), key, value)


CONCURRENT_TAG_WRITE = ("UNIQUE constraint failed", "duplicate key value violates unique")
"""Messages of a tag insert that lost a race: MLflow's SQL store sets a model-version tag by
select-then-insert (``session.merge``), so two audits of the same version (a webhook and a
sensor, a duplicate delivery) finishing together can both insert; the loser's server answers
BAD_REQUEST with the database's unique-constraint error (SQLite, PostgreSQL wording)."""


def set_version_tag(
    client: Any, name: str, version: str, key: str, value: str, *, attempts: int = 3
) -> None:
    """``client.set_model_version_tag``, through :func:`repeat_lost_race`."""
    repeat_lost_race(lambda: client.set_model_version_tag(name, version, key, value), attempts)


def repeat_lost_race(write: Callable[[], object], attempts: int = 3) -> None:
    """Run a registry ``write``, repeated (at most ``attempts`` times) only when it lost a race
    with a concurrent write of the same row (:data:`CONCURRENT_TAG_WRITE`): the row exists by
    then, so the repeat updates it. Any other error is raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            write()
            return
        except Exception as exc:
            if attempt == attempts or not any(m in str(exc) for m in CONCURRENT_TAG_WRITE):
                raise
            time.sleep(0.05 * attempt)


@task(name="log-to-mlflow", cache_policy=NO_CACHE)
def log_to_mlflow(
    result: AuditResult,
    html: str,
    tracking_uri: str,
    experiment: str,
    tag_model_version: bool = True,
    approve_alias: str | None = None,
    run_tags: dict[str, str] | None = None,
    pdf: str | None = None,
) -> dict[str, str]:
    """Prefect task around :func:`log_audit` (``pdf``: the report's PDF to log, if any).

    Not retried by Prefect: the MLflow client already retries each HTTP call
    (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, bounded by :data:`tasks.settings.MLFLOW_CLIENT_DEFAULTS`),
    and retrying the whole logging on top made a stopped server block the CLI for 13 minutes.
    """
    info = log_audit(
        result,
        html,
        tracking_uri=tracking_uri,
        experiment=experiment,
        tag_model_version=tag_model_version,
        approve_alias=approve_alias,
        run_tags=run_tags,
        pdf=Path(pdf) if pdf else None,
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
    The newest entry also has ``decisions`` (finding key -> decision, from its ``audit.json``;
    ``None`` when unreadable: :func:`tasks.audit_history.logged_decisions`), for the report's
    list of decisions changed since the previous audit.
    """
    from mlflow import MlflowClient

    from tasks.audit_history import logged_decisions

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    quoted = model_name.replace("\\", "\\\\").replace("'", "\\'")
    runs = client.search_runs(
        [exp.experiment_id],
        # audits only: a comparison run of the same model (fairness.kind comparison) has no
        # audit id and no audit.json
        filter_string=f"tags.`{TAGS.model_name}` = '{quoted}' and attributes.status = 'FINISHED'"
        f" and tags.`{TAGS.audit_id}` IS NOT NULL",
        order_by=["attributes.start_time DESC"],
        max_results=limit,
    )
    wanted = set(keys)
    return [
        {
            "run_id": r.info.run_id,
            "audit_id": r.data.tags.get(TAGS.audit_id),
            "model_version": r.data.tags.get(TAGS.model_version),
            "verdict": r.data.tags.get(TAGS.verdict),
            "started_ms": r.info.start_time,
            "estimates": {k: v for k, v in r.data.metrics.items() if k in wanted},
            **({"decisions": logged_decisions(client, r.info.run_id, wanted)} if i == 0 else {}),
        }
        for i, r in enumerate(runs)
    ]


@task(name="previous-audits", cache_policy=NO_CACHE)
def previous_audits_task(
    result: AuditResult, tracking_uri: str, experiment: str, limit: int = 5
) -> list[PreviousAudit]:
    """Earlier audits of the same registered model, for the report's trend table.

    Never fails the audit: an unreachable store gives ``[]`` and a warning.
    """
    name = result.model.name
    if not name:
        return []
    keys = [f.key for f in result.findings() if f.pvalue is not None]
    try:
        history = previous_audits(tracking_uri, experiment, str(name), keys, limit)
    except Exception as exc:
        get_run_logger().warning("Could not read earlier audits of %s: %s", name, exc)
        return []
    get_run_logger().info("Found %d earlier audit(s) of %s", len(history), name)
    return [PreviousAudit.from_json(h) for h in history]
