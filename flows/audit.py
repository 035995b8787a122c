"""The audit flow: data -> model scores -> validation -> methods -> verdict -> report -> MLflow.

Runs with no server: with no ``PREFECT_API_URL`` Prefect starts its embedded (ephemeral) API
for the duration of the run. Required steps (data, model, validation, the dataset contract)
fail the run with a readable error and write nothing; an optional method that fails is recorded
as ``failed`` with its reason and the rest of the audit completes. Outputs are written in the
order JSON, HTML (PDF), MLflow, so a failure while logging leaves the local results in place.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from fairengine import progress
from fairengine.audit_context import AuditMetadata, DatasetSummary, ModelIdentity
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.decisions import Resampler, Resamplers, ResamplingSettings
from fairengine.errors import OrchestrationUnavailableError, ResultLoggingError
from fairengine.fliptest.resampler import FlipTestResampler
from fairengine.intersectional.resampler import IntersectionalResampler
from fairengine.multiclass.resampler import MulticlassResampler
from fairengine.permutation.method import CountsPermutationResampler, PermutationResampler
from fairengine.ranking.resampler import RankingResampler
from fairengine.regression.resampler import RegressionResampler
from fairengine.results import AuditResult, MethodResult, ValidationResult
from fairengine.subgroup_scan.resampler import SubgroupScanResampler
from fairengine.verdict import finalize_audit
from fairengine.work_bounds import check_work_bounds
from flows.method_steps import (
    cache_root,
    run_methods,
    run_methods_from_counts,
    warm_worker_processes,
)
from flows.runners import task_runner_for
from flows.startup import (
    EPHEMERAL_TIMEOUT,
    embedded_server_timeout_message,
    prepare_while_server_starts,
    validation_will_run,
)
from tasks.after_logging import AFTER_LOGGING, LoggedAudit
from tasks.audit_events import emit_audit_events
from tasks.audit_inputs import AuditInputs, split_storage_options
from tasks.caching import validation_cache_options
from tasks.data import build_dataset, load_data
from tasks.draw_cache import DRAW_FOLDER, CachedDraws, draw_identity
from tasks.mlflow_log import log_to_mlflow, previous_audits_task
from tasks.mlflow_store import check_tracking_store
from tasks.model import first_line, resolve_scores
from tasks.outputs import write_outputs, write_pdf_output
from tasks.settings import default_report_dir, default_tracking_uri
from tasks.stream_data import (
    STREAMED_ENGINES,
    RowSample,
    StreamedData,
    check_streamed_group_sizes,
    data_engine,
    pass_step,
    stream_audit_data,
)
from tasks.validate import validate_data

VERSIONED_PACKAGES = (
    "fairengine",
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "torch",
    "pot",
    "prefect",
    "mlflow",
    "great-expectations",
    "jinja2",
    "matplotlib",
)


@dataclass
class AuditRun:
    """What an audit run produced: the result, local file paths and the MLflow run (if logged)."""

    result: AuditResult
    paths: dict[str, str]
    mlflow: dict[str, str] | None

    @property
    def report_path(self) -> str:
        return self.paths["report"]


def package_versions() -> dict[str, str]:
    """Installed versions of the packages an audit depends on."""
    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


T = TypeVar("T")


def unvisited(value: T) -> T:
    """``value`` wrapped in Prefect's :class:`~prefect.utilities.annotations.quote` for a task
    call: the task receives ``value`` itself, but Prefect does not walk it for upstream futures
    and states before the call (walking a cold Adult audit's result, 293 findings, took
    0.3-0.8 s of the flow's thread per task call, 2.5 s in all after the methods). For the
    results, reports and method outputs the flow hands to its tasks, which hold no futures.
    Typed as ``value``: that is what the task gets."""
    return cast(T, quote(value))


@task(name="assemble-audit", cache_policy=NO_CACHE)
def assemble_audit(**kwargs: Any) -> AuditResult:
    """One decision per question, the family's decisions (more permutations drawn where a
    Monte-Carlo decision is open) and the verdict (:func:`fairengine.verdict.finalize_audit`)."""
    start = time.perf_counter()
    progress.report("decide", "started")
    result = finalize_audit(**kwargs)
    seconds = time.perf_counter() - start
    result = dataclasses.replace(
        result, metadata=result.metadata.with_timing("decide", round(seconds, 4))
    )
    progress.report("decide", f"finished in {seconds:.1f} s")
    get_run_logger().info("Verdict: %s - %s", result.verdict.status.upper(), result.verdict.summary)
    return result


@flow(name="fairness-audit", log_prints=True)
def audit_flow(
    config: dict[str, Any],
    base_dir: str | None = None,
    run_tags: dict[str, str] | None = None,
    inputs: AuditInputs | None = None,
) -> AuditRun:
    """Audit a model (or scores in the data) as described by ``config`` (an audit YAML as a dict).

    ``base_dir`` resolves a relative ``data.path`` (the CLI passes the config file's folder);
    ``run_tags`` are set on the MLflow run when it is created (e.g. what triggered the audit);
    ``inputs``: a DataFrame and/or model object given from Python (``fairengine.audit``) in place
    of ``data.path``/``model.uri``.
    """
    cfg = AuditConfig.from_dict(config, base_dir=Path(base_dir) if base_dir else None)
    logger = get_run_logger()
    timings: dict[str, float] = {}
    tracking_uri = cfg.mlflow.tracking_uri or default_tracking_uri()

    def timed(step: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        progress.report(step, "started")
        try:
            return fn(*args, **kwargs)
        finally:
            timings[step] = round(time.perf_counter() - start, 4)
            progress.report(step, f"finished in {timings[step]:.1f} s")

    given = inputs or AuditInputs()
    if given.storage_options:  # kept out of the recorded parameters (split_storage_options)
        cfg.data.storage_options = dict(given.storage_options)
    frame: pd.DataFrame | None
    engine = data_engine(cfg, given.frame is not None, given.source)
    if engine in STREAMED_ENGINES:
        streamed = stream_audit_data(
            cfg, tracking_uri, timed, model_object=given.model, engine=engine,
            frame=given.source, cache_dir=cache_root(cfg),
        )  # fmt: skip
        if streamed.cached:  # reused: no pass in this run
            timings[f"{pass_step(engine)} (cached)"] = timings.pop(pass_step(engine))
        counts = streamed.counts
        roles, model_info, model = streamed.roles, streamed.model_info, streamed.handles
        # the rows the methods that need rows ran on (a step after logging reads them too)
        rows = streamed.rows
        frame = rows.subsample.frame if rows is not None and rows.subsample is not None else None
        input_warnings = list(streamed.warnings)
        model_info.update(score_type=cfg.score_type, threshold=cfg.threshold)
        validation = timed("validate_data", validate_streamed, streamed, cfg)
        check_streamed_group_sizes(counts, cfg.validation.min_group_size)
        check_work_bounds(cfg, {a: len(c) for a, c in counts.categories.items()})
        methods = run_methods_from_counts(
            cfg,
            counts,
            streamed.sample,
            logger,
            timings,
            rows=rows,
            model=model,
            model_info=model_info,
        )
        dataset_summary = DatasetSummary.from_json(
            {**streamed.source, **counts.summary(), "fingerprint": streamed.fingerprint()}
        )
        resampler: Resampler = Resamplers(
            CountsPermutationResampler(
                counts, cfg.methods.permutation_tests, seed=cfg.seed, sample=streamed.sample
            ),
            sample_fliptest_resampler(cfg, rows, methods, model),
        )
    else:
        loaded = timed("load_data", load_data, cfg, given.frame)
        frame, roles, source = loaded.frame, loaded.roles, loaded.source
        input_warnings = list(loaded.warnings)
        # one score source for every method: model (signature inputs, predict_proba) or data
        scored = resolve_scores(
            cfg, frame, roles, tracking_uri, timed=timed, model_object=given.model
        )
        frame, roles, model = scored.frame, scored.roles, scored.handles
        model_info = scored.model_info
        input_warnings += scored.warnings
        model_info.update(score_type=cfg.score_type, threshold=cfg.threshold)

        # the checks are cached like the method steps (key: data content, roles, settings, code)
        validator = validate_data.with_options(
            **validation_cache_options(cache_root(cfg), cfg.cache.expiration_days)
        )
        validation = timed(
            "validate_data",
            validator,
            frame,
            roles,
            score_type=cfg.score_type,
            positive_label=cfg.positive_label,
            min_group_size=cfg.validation.min_group_size,
        )
        dataset = timed("build_dataset", build_dataset, frame, roles, cfg)
        check_work_bounds(cfg, {a: g.n_groups for a, g in dataset.groups.items()})

        methods = run_methods(cfg, dataset, model, model_info, logger, timings)
        dataset_summary = DatasetSummary.from_json({**source, **dataset.summary()})
        resampler = decision_resampler(cfg, dataset, methods, model, model_info)

    result = assemble_audit(
        config=cfg.to_dict(),
        dataset=dataset_summary,
        model=ModelIdentity.from_json(model_info),
        validation=unvisited(validation),
        methods=unvisited(methods),
        alpha=cfg.alpha,
        multiplicity=cfg.multiplicity,
        gap_null=cfg.decisions.gap_null,
        resampling=ResamplingSettings(
            risk=cfg.decisions.resampling_risk,
            growth=cfg.decisions.growth,
            max_resamples=cfg.decisions.max_resamples,
        ),
        resampler=unvisited(resampler),
        warnings=input_warnings,
        metadata=AuditMetadata(
            versions=package_versions(),
            fairengine_version=package_versions()["fairengine"],
            seed=cfg.seed,
            timings=dict(timings),
        ),
    )
    store = check_tracking_store(tracking_uri) if cfg.mlflow.enabled else None
    if store is not None and store.reachable:
        previous = previous_audits_task(unvisited(result), tracking_uri, cfg.mlflow.experiment)
        metadata = dataclasses.replace(result.metadata, previous_audits=previous)
        result = dataclasses.replace(result, metadata=metadata)
    from tasks.report import render_report_task  # matplotlib, Jinja2: after the methods

    html = timed("render_report", render_report_task, unvisited(result))
    # the steps timed after the result was assembled (the report) join its timings
    metadata = dataclasses.replace(result.metadata, timings={**result.metadata.timings, **timings})
    result = dataclasses.replace(result, metadata=metadata)
    out_dir = Path(cfg.output.dir).expanduser() if cfg.output.dir else default_report_dir()
    paths = write_outputs(unvisited(result), unvisited(html), str(out_dir / result.audit_id))
    if cfg.report.pdf:  # not timed into the metadata: audit.json is written already
        progress.report("render_pdf", "started")
        paths.update(write_pdf_output(unvisited(html), paths["report"]))
        progress.report("render_pdf", "finished" if "pdf" in paths else "failed")
    mlflow_info = None
    if store is not None and not store.reachable:
        raise ResultLoggingError(
            f"the audit finished (verdict {result.verdict.status.upper()}) but the MLflow store "
            f"is not available: {store.reason}. The report and JSON are kept at "
            f"{paths['report']} and {paths['json']}; log them later with: "
            f"fairengine log --result {paths['json']}"
        )
    if cfg.mlflow.enabled:
        try:
            progress.report("log_to_mlflow", "started")
            mlflow_info = log_to_mlflow(
                unvisited(result),
                unvisited(html),
                tracking_uri,
                cfg.mlflow.experiment,
                cfg.mlflow.tag_model_version,
                approve_alias=cfg.mlflow.approve_alias,
                run_tags=run_tags,
                pdf=paths.get("pdf"),
            )
        except Exception as exc:
            raise ResultLoggingError(
                f"the audit finished (verdict {result.verdict.status.upper()}) but logging to "
                f"MLflow at {tracking_uri} failed: {type(exc).__name__}: {first_line(exc)}. "
                f"The report and JSON are kept at {paths['report']} and {paths['json']}; "
                f"log them later with: fairengine log --result {paths['json']}"
            ) from exc
        logged = LoggedAudit(
            cfg, result, model_info, roles, frame, tracking_uri, mlflow_info["run_id"]
        )
        for name, step in AFTER_LOGGING.items():  # declared per method (tasks/after_logging.py)
            if cfg.methods.section(name).enabled:
                outcome = step(logged)
                logged = dataclasses.replace(logged, result=outcome.result)
                mlflow_info = {**mlflow_info, **outcome.outputs}
        result = logged.result
    logger.info("Report: %s", paths["report"])
    # alerts: fairengine.audit.completed (and .failed on FAIL) for Prefect automations
    emit_audit_events(result, mlflow_info, paths, logger)
    return AuditRun(result=result, paths=paths, mlflow=mlflow_info)


def validate_streamed(streamed: StreamedData, cfg: AuditConfig) -> ValidationResult | None:
    """Great Expectations on the stream's stratified sample (the data contract itself was
    checked on every batch, and the group sizes on the exact counts); the result says so.
    Cached by the sample's content (:func:`tasks.caching.validation_cache_options`)."""
    if streamed.sample_frame is None:
        return None
    # cached like the in-memory validation: by the sample's content, roles and parameters
    validator = validate_data.with_options(
        **validation_cache_options(cache_root(cfg), cfg.cache.expiration_days)
    )
    checked = validator(
        streamed.sample_frame,
        streamed.sample_roles,
        score_type=streamed.sample.score_type if streamed.sample is not None else cfg.score_type,
        positive_label=cfg.positive_label,
        min_group_size=1,  # group sizes: on the exact counts (check_streamed_group_sizes)
    )
    n = streamed.counts.n_rows
    return dataclasses.replace(
        checked,
        engine=f"{checked.engine}, on a stratified sample of {checked.n_rows:,} of {n:,} rows "
        "(the data contract was checked on every batch of all rows)",
    )


def sample_fliptest_resampler(
    cfg: AuditConfig, rows: RowSample | None, methods: list[MethodResult], model: Any
) -> FlipTestResampler | None:
    """FlipTest's null refits for a streamed audit's decisions, on the self-weighting sample
    FlipTest ran on (None when it did not run there)."""
    flip = next((m for m in methods if m.method == "fliptest"), None)
    if flip is None or flip.status != "ok" or rows is None or rows.dataset is None:
        return None
    return FlipTestResampler(
        rows.dataset,
        cfg.methods.fliptest,
        flip,
        predict_proba=None if model is None else model.get("predict_proba"),
        seed=cfg.seed,
    )


def decision_resampler(
    cfg: AuditConfig,
    dataset: AuditDataset,
    methods: list[MethodResult],
    model: Any,
    model_info: dict[str, Any],
) -> Resampler:
    """What draws more resamples where a decision is open: the permutation tests' permutations,
    FlipTest's null refits and the intersectional target tests' draws, kept in the audit's
    cache (``<cache dir>/draws``) when caching is on, so that a re-run from the cache does not
    draw them again."""
    result = {m.method: m for m in methods}  # every registered method has a result
    resampler = Resamplers(
        PermutationResampler(dataset, cfg.methods.permutation_tests, seed=cfg.seed),
        FlipTestResampler(
            dataset,
            cfg.methods.fliptest,
            result["fliptest"],
            predict_proba=None if model is None else model.get("predict_proba"),
            seed=cfg.seed,
        ),
        IntersectionalResampler(
            dataset, cfg.methods.intersectional, result["intersectional"], seed=cfg.seed
        ),
        RegressionResampler(dataset, cfg.methods.regression_metrics, seed=cfg.seed),
        MulticlassResampler(dataset, cfg.methods.multiclass_metrics, seed=cfg.seed),
        RankingResampler(dataset, cfg.methods.ranking_metrics, seed=cfg.seed),
        SubgroupScanResampler(dataset, cfg.methods.subgroup_scan, seed=cfg.seed),
    )
    root = cache_root(cfg)
    if root is None:
        return resampler
    settings = {
        "permutation_tests": cfg.methods.permutation_tests,
        "fliptest": cfg.methods.fliptest,
        "intersectional": cfg.methods.intersectional,
    }
    if dataset.task == "regression":
        settings["regression_metrics"] = cfg.methods.regression_metrics
    if dataset.task == "multiclass":
        settings["multiclass_metrics"] = cfg.methods.multiclass_metrics
    if dataset.task == "ranking":
        settings["ranking_metrics"] = cfg.methods.ranking_metrics
    if cfg.methods.subgroup_scan.enabled:
        settings["subgroup_scan"] = cfg.methods.subgroup_scan
    identity = draw_identity(dataset, model_info, settings, cfg.seed)
    return CachedDraws(resampler, root / DRAW_FOLDER, identity)


def run_audit(
    config: dict[str, Any], base_dir: str | None = None, inputs: AuditInputs | None = None
) -> AuditRun:
    """Run :func:`audit_flow` on the task runner the config's ``runner`` section names.

    This is the entry point of the CLI and of ``fairengine.audit``; calling ``audit_flow``
    directly uses the thread pool. Without a Prefect server, Prefect's embedded server is
    started before the flow, and the steps' imports run while it starts
    (:func:`flows.startup.prepare_while_server_starts`).
    """
    cfg = AuditConfig.from_dict(config, base_dir=Path(base_dir) if base_dir else None)
    runner = task_runner_for(cfg)
    config, inputs = split_storage_options(config, inputs)  # credentials: not a parameter
    # Prefect's embedded server starts now. A first audit with this cache (or none) computes
    # its methods: the worker processes for FlipTest start meanwhile, and the steps import
    # their modules themselves (importing them here too would only compete with the server and
    # the workers for the cores: the cold Adult audit's methods started 1.4-2.9 s later). A
    # likely re-run (cache keys exist) reads its methods from the cache: no workers, and the
    # steps' imports run here while the server starts.
    first = validation_will_run(cfg)
    model_given = inputs is not None and inputs.model is not None
    prepare_while_server_starts(
        cfg,
        extra=[lambda: warm_worker_processes(cfg, model_given)] if first else [],
        warm_imports=not first,
    )
    try:
        return audit_flow.with_options(task_runner=runner)(
            config=config, base_dir=base_dir, inputs=inputs
        )
    except RuntimeError as exc:
        if EPHEMERAL_TIMEOUT not in str(exc):
            raise
        raise OrchestrationUnavailableError(embedded_server_timeout_message()) from None
