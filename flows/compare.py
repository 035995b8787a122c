"""Challenger vs champion: both models scored on the same rows, every gap compared with a
paired test, one verdict (:mod:`fairengine.comparison`).

The flow reads the audit config's data and columns exactly as an audit does
(:func:`tasks.data.load_data`), scores the rows with the baseline and with the candidate
(:func:`tasks.model.resolve_scores`: the same score-source rules as an audit; a model URI or a
Python model object), builds both audit datasets (the data contract, thresholded predictions
``ŷ = 1{p > threshold}``), compares them (:func:`fairengine.comparison.compare_models`:
simultaneous paired maxT bootstrap bounds on Δ = |g_cand| − |g_base| for every attribute, pair
of groups and rate in ``comparison.metrics``), and writes ``comparison.json`` and
``comparison.html`` to ``<output.dir>/<comparison id>/``; with MLflow on, the comparison is a
run of its own and the candidate version is tagged (:mod:`tasks.comparison_log`); Prefect
events are emitted for alerts. The data's Great Expectations suite is not run here (the audit
of each model runs it).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger

from fairengine import progress
from fairengine.comparison.compare import compare_models
from fairengine.comparison.record import (
    ComparedModel,
    ModelComparison,
    comparison_verdict,
)
from fairengine.comparison.settings import ComparisonResampling
from fairengine.config import AuditConfig, ModelConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, ResultLoggingError
from tasks.audit_inputs import ComparisonInputs
from tasks.comparison_log import emit_comparison_events, log_comparison
from tasks.data import build_dataset, load_data
from tasks.model import first_line, resolve_scores
from tasks.settings import default_report_dir, default_tracking_uri

RANDOMIZED_DECIDERS = ("MitigatedModel",)
"""Custom pyfuncs whose output is the probability of a positive decision, drawn per row
(:class:`tasks.mitigated_model.MitigatedModel`, the RTDP post-processed model)."""


@dataclass
class ComparisonRun:
    """What a comparison produced: the record, local paths and the MLflow run (if logged)."""

    comparison: ModelComparison
    paths: dict[str, str]
    mlflow: dict[str, str] | None


def _side(
    cfg: AuditConfig,
    frame: Any,
    roles: Any,
    tracking_uri: str,
    uri: str | None,
    obj: Any,
    which: str,
) -> tuple[AuditDataset, ComparedModel, list[str]]:
    if uri is None and obj is None:
        raise ConfigError(
            f"no {which} model: give --{which} (a model URI)"
            + (" or comparison.baseline in the config" if which == "baseline" else "")
        )
    side_cfg = dataclasses.replace(cfg, model=ModelConfig(uri=uri))
    progress.report(f"score_{which}", "started")
    scored = resolve_scores(side_cfg, frame, roles, tracking_uri, model_object=obj)
    dataset = build_dataset(scored.frame, scored.roles, side_cfg)
    progress.report(f"score_{which}", "finished")
    info = scored.model_info
    notes = list(scored.warnings)
    source = info.get("score_source") or {}
    if source.get("estimator") in RANDOMIZED_DECIDERS and dataset.probability is not None:
        # its output is P(decision = 1): it decides by a draw, so the comparison compares the
        # decisions it makes (one draw per row, seeded), not a threshold of that probability
        rng = np.random.default_rng([cfg.seed, 1 if which == "candidate" else 0])
        drawn = (rng.random(dataset.n_rows) < dataset.probability).astype(np.int8)
        dataset = dataclasses.replace(dataset, prediction=drawn)
        notes.append(
            f"{source.get('estimator')} outputs the probability of a positive decision; its "
            f"decisions were drawn from it (seed {cfg.seed}), as the model decides when deployed"
        )
    uri_shown = info.get("uri")
    if info.get("fingerprint"):  # a Python object: its content hash tells two of a kind apart
        uri_shown = f"{uri_shown}@{str(info['fingerprint'])[:8]}"
    model = ComparedModel(
        uri=uri_shown,
        name=info.get("name"),
        version=None if info.get("version") is None else str(info.get("version")),
        score_source=str((info.get("score_source") or {}).get("description") or ""),
    )
    return dataset, model, [f"{which}: {w}" for w in notes]


@flow(name="fairness-comparison", log_prints=True)
def compare_flow(
    config: dict[str, Any],
    baseline: str | None = None,
    candidate: str | None = None,
    base_dir: str | None = None,
    inputs: ComparisonInputs | None = None,
) -> ComparisonRun:
    """Compare ``candidate`` against ``baseline`` (model URIs, or the objects in ``inputs``)
    on the data of ``config`` (an audit YAML as a dict); see the module docstring."""
    cfg = AuditConfig.from_dict(config, base_dir=Path(base_dir) if base_dir else None)
    if cfg.columns.score:
        raise ConfigError(
            "columns.score: a comparison scores the rows with both models; remove columns.score"
        )
    if cfg.columns.weight:
        raise ConfigError("columns.weight: the comparison does not take sample weights yet")
    if cfg.threshold is None and cfg.score_type != "label":
        raise ConfigError("threshold: the comparison compares thresholded predictions; set one")
    logger = get_run_logger()
    given = inputs or ComparisonInputs()
    tracking_uri = cfg.mlflow.tracking_uri or default_tracking_uri()
    loaded = load_data(cfg, given.frame)
    base_uri = baseline if baseline is not None else cfg.comparison.baseline
    if given.baseline is not None:
        base_uri = None
    ds_b, model_b, notes_b = _side(
        cfg, loaded.frame, loaded.roles, tracking_uri, base_uri, given.baseline, "baseline"
    )
    ds_c, model_c, notes_c = _side(
        cfg, loaded.frame, loaded.roles, tracking_uri, candidate, given.candidate, "candidate"
    )
    if ds_b.prediction is None or ds_c.prediction is None:
        raise ConfigError("threshold: the comparison needs predictions; set a threshold")
    progress.report("compare", "started")
    result = compare_models(
        ds_b.label,
        ds_b.prediction,
        ds_c.prediction,
        ds_b.groups,
        metrics=tuple(cfg.comparison.metrics),
        alpha=cfg.alpha,
        delta=cfg.comparison.delta,
        seed=cfg.seed,
        resampling=ComparisonResampling(max_resamples=cfg.comparison.max_resamples),
    )
    progress.report("compare", "finished")
    comparison = ModelComparison(
        comparison_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        data_source=str(loaded.source.get("source") or ""),
        n_rows=int(ds_b.n_rows),
        baseline=model_b,
        candidate=model_c,
        result=result,
        verdict=comparison_verdict(result),
        warnings=(*loaded.warnings, *notes_b, *notes_c, *result.warnings),
    )
    logger.info(
        "Comparison: %s - %s", comparison.verdict.status.upper(), comparison.verdict.summary
    )
    from tasks.report.comparison import render_comparison  # Jinja2, matplotlib: at the end

    html = render_comparison(comparison)
    out_dir = Path(cfg.output.dir).expanduser() if cfg.output.dir else default_report_dir()
    paths = write_comparison(comparison, html, out_dir / f"comparison-{comparison.comparison_id}")
    mlflow_info = None
    if cfg.mlflow.enabled:
        try:
            mlflow_info = log_comparison(
                comparison,
                html,
                tracking_uri=tracking_uri,
                experiment=cfg.mlflow.experiment,
                tag_model_version=cfg.mlflow.tag_model_version,
            )
        except Exception as exc:
            raise ResultLoggingError(
                f"the comparison finished ({comparison.verdict.status}) but logging to MLflow at "
                f"{tracking_uri} failed: {type(exc).__name__}: {first_line(exc)}. The report "
                f"and JSON are kept at {paths['report']} and {paths['json']}"
            ) from exc
    emit_comparison_events(comparison, mlflow_info, paths, logger)
    return ComparisonRun(comparison, paths, mlflow_info)


def write_comparison(comparison: ModelComparison, html: str, directory: Path) -> dict[str, str]:
    """Write ``comparison.json`` then ``comparison.html`` into ``directory``."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "comparison.json"
    json_path.write_text(
        json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False, allow_nan=False), "utf-8"
    )
    report = directory / "comparison.html"
    report.write_text(html, "utf-8")
    return {"json": str(json_path), "report": str(report)}


def run_comparison(
    config: dict[str, Any],
    baseline: str | None,
    candidate: str | None,
    base_dir: str | None = None,
    inputs: ComparisonInputs | None = None,
) -> ComparisonRun:
    """The entry point of ``fairengine compare`` and ``fairengine.compare``."""
    return compare_flow(
        config=config, baseline=baseline, candidate=candidate, base_dir=base_dir, inputs=inputs
    )
