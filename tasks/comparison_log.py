"""Record a challenger-vs-champion comparison: an MLflow run of its own, a tag on the
candidate model version, and Prefect events for alerts.

The run (``fairness.kind`` = ``comparison``) carries the verdict and both models as tags,
flat metrics a ``MetricThreshold`` or ``mlflow.search_runs`` can gate on (the counts, and per
question ``cmp_<metric>.<attribute>.<a>_<b>`` = Δ̂ = |g_cand| − |g_base| with ``.low``,
``.high`` and ``.p_not_worse``), and ``comparison/comparison.json`` and
``comparison/comparison.html``. The candidate version (when it is a registry version) is tagged
``fairness.comparison`` (the verdict), ``fairness.comparison_run_id`` and
``fairness.comparison_baseline``. Events: ``fairengine.comparison.completed`` after every
comparison; when the verdict is ``worse``, ``fairengine.comparison.worse`` and
``fairengine.audit.failed`` (so that the audit alert's automation fires for it too: the payload
has the audit payload's verdict, counts, mlflow and report_uri fields, plus ``kind:
comparison``); resource = the candidate model version.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from pathlib import Path
from typing import Any

from fairengine.comparison.record import ModelComparison
from fairengine.finding_keys import key_token, pair_token
from tasks.audit_events import AUDIT_FAILED
from tasks.mlflow_log import ensure_experiment, set_version_tag

COMPARISON_COMPLETED = "fairengine.comparison.completed"
COMPARISON_WORSE = "fairengine.comparison.worse"
COMPARISON_DIR = "comparison"
METRIC_PREFIX = {"selection_rate": "cmp_dp", "tpr": "cmp_tpr", "fpr": "cmp_fpr"}
TAG_VERDICT = "fairness.comparison"
TAG_RUN = "fairness.comparison_run_id"
TAG_BASELINE = "fairness.comparison_baseline"

log = logging.getLogger(__name__)


def comparison_metrics(comparison: ModelComparison) -> dict[str, float]:
    """The flat MLflow metrics of a comparison (module docstring); values that are not finite
    (a question not tested) are left out."""
    v = comparison.verdict
    out = {
        "comparison_not_worse": float(v.n_not_worse),
        "comparison_worse": float(v.n_worse),
        "comparison_undetermined": float(v.n_undetermined),
        "comparison_not_tested": float(v.n_not_tested),
        "comparison_verdict_worse": float(v.status == "worse"),
        "comparison_verdict_not_worse": float(v.status == "not_worse"),
    }
    for q in comparison.result.questions:
        key = (
            f"{METRIC_PREFIX[q.metric]}.{key_token(q.attribute)}.{pair_token(q.group_a, q.group_b)}"
        )
        for suffix, value in (
            ("", q.difference),
            (".low", q.low),
            (".high", q.high),
            (".p_not_worse", q.pvalue_not_worse),
        ):
            if value is not None and math.isfinite(value):
                out[key + suffix] = float(value)
    return out


def log_comparison(
    comparison: ModelComparison,
    html: str,
    *,
    tracking_uri: str,
    experiment: str,
    tag_model_version: bool = True,
) -> dict[str, str]:
    """Log ``comparison`` as a run of ``experiment``; tag the candidate version. Returns
    ``{"run_id", "experiment_id", "artifact_uri", "tracking_uri"}``."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    experiment_id = ensure_experiment(client, experiment, tracking_uri)
    c = comparison
    tags = {
        "fairness.kind": "comparison",
        "fairness.comparison_id": c.comparison_id,
        TAG_VERDICT: c.verdict.status,
        "fairness.baseline_uri": str(c.baseline.uri),
        "fairness.candidate_uri": str(c.candidate.uri),
        "mlflow.runName": f"comparison {c.candidate.label} vs {c.baseline.label}"[:250],
    }
    if c.candidate.name and c.candidate.version:
        tags["fairness.model_name"] = c.candidate.name
        tags["fairness.model_version"] = str(c.candidate.version)
    run = client.create_run(experiment_id, tags=tags)
    run_id = run.info.run_id
    try:
        params = {
            "alpha": f"{c.result.alpha:g}",
            "delta": f"{c.result.delta:g}",
            "n_rows": str(c.n_rows),
            "n_resamples": str(c.result.n_resamples),
            "metrics": ",".join(sorted({q.metric for q in c.result.questions})),
        }
        metrics = comparison_metrics(c)
        now = int(run.info.start_time)
        items = [Metric(k, v, now, 0) for k, v in metrics.items()]
        for i in range(0, len(items), 900):  # MLflow's batch limit is 1,000 metrics
            client.log_batch(
                run_id,
                metrics=items[i : i + 900],
                params=[Param(k, v) for k, v in params.items()] if i == 0 else [],
                tags=[RunTag("fairness.comparison_summary", c.verdict.summary[:5000])]
                if i == 0
                else [],
            )
        with tempfile.TemporaryDirectory(prefix="fairengine-comparison-") as tmp:
            folder = Path(tmp)
            (folder / "comparison.json").write_text(
                json.dumps(c.to_dict(), indent=2, ensure_ascii=False, allow_nan=False), "utf-8"
            )
            (folder / "comparison.html").write_text(html, "utf-8")
            client.log_artifacts(run_id, str(folder), COMPARISON_DIR)
        client.set_terminated(run_id, "FINISHED")
    except Exception:
        client.set_terminated(run_id, "FAILED")
        raise
    if tag_model_version and c.candidate.name and c.candidate.version:
        for key, value in {
            TAG_VERDICT: c.verdict.status,
            TAG_RUN: run_id,
            TAG_BASELINE: str(c.baseline.uri),
        }.items():
            set_version_tag(client, c.candidate.name, str(c.candidate.version), key, value)
    return {
        "run_id": run_id,
        "experiment_id": str(experiment_id),
        "artifact_uri": str(run.info.artifact_uri),
        "tracking_uri": tracking_uri,
    }


def comparison_resource(comparison: ModelComparison) -> dict[str, str]:
    """The events' resource: the candidate model version (else its URI)."""
    cand = comparison.candidate
    labels = {
        "fairengine.comparison": comparison.verdict.status,
        "fairengine.comparison_id": comparison.comparison_id,
    }
    if cand.name and cand.version:
        return {
            "prefect.resource.id": f"mlflow.model-version.{cand.name}.{cand.version}",
            "prefect.resource.name": f"{cand.name} version {cand.version}",
            "mlflow.model.name": cand.name,
            "mlflow.model.version": str(cand.version),
            **labels,
        }
    return {
        "prefect.resource.id": f"fairengine.model.{key_token(cand.uri or 'candidate')}",
        "prefect.resource.name": cand.label,
        **labels,
    }


def emit_comparison_events(
    comparison: ModelComparison,
    mlflow_info: dict[str, str] | None,
    paths: dict[str, str],
    logger: Any = log,
) -> list[str]:
    """Emit :data:`COMPARISON_COMPLETED` (and :data:`COMPARISON_WORSE` on a ``worse``
    verdict); never raises (a warning in the log instead). Returns the names emitted."""
    names = [COMPARISON_COMPLETED]
    if comparison.verdict.status == "worse":
        names += [COMPARISON_WORSE, AUDIT_FAILED]
    v = comparison.verdict
    report_uri = None
    if mlflow_info and mlflow_info.get("artifact_uri"):
        report_uri = f"{mlflow_info['artifact_uri']}/{COMPARISON_DIR}/comparison.html"
    elif paths.get("report"):
        report_uri = Path(paths["report"]).resolve().as_uri()
    payload = {
        "kind": "comparison",
        "comparison_id": comparison.comparison_id,
        "verdict": {"status": v.status, "summary": v.summary},
        # the audit alert's fields too (its message template reads counts.rejected and
        # counts.undetermined): a gap shown worse is the comparison's rejection
        "counts": {
            "not_worse": v.n_not_worse,
            "worse": v.n_worse,
            "rejected": v.n_worse,
            "undetermined": v.n_undetermined,
            "not_tested": v.n_not_tested,
        },
        "report_uri": report_uri,
        "baseline": {"uri": comparison.baseline.uri, "label": comparison.baseline.label},
        "candidate": {"uri": comparison.candidate.uri, "label": comparison.candidate.label},
        "delta": comparison.result.delta,
        "alpha": comparison.result.alpha,
        "mlflow": mlflow_info,
        "report_path": paths.get("report"),
    }
    try:
        from prefect.events import emit_event

        for name in names:
            emit_event(event=name, resource=comparison_resource(comparison), payload=payload)
    except Exception as exc:  # an alert must never fail the comparison
        logger.warning("Comparison events not emitted: %s: %s", type(exc).__name__, exc)
        return []
    logger.info("Emitted Prefect event(s) %s", ", ".join(names))
    return names
