"""The audit's method steps: every registered method, run together.

The methods are those of :data:`fairengine.registry.METHODS` (in report order), each run by
the one generic Prefect task :func:`tasks.method_task.method_task` over the validated
:class:`~fairengine.dataset.AuditDataset`, configured by ``methods.<name>`` of the audit
config. Enabled methods are submitted together to the flow's task runner (the thread pool by
default: numpy and torch release the GIL), so independent methods run concurrently. A method
that raises is recorded as ``failed`` with its reason and the other methods complete; a
disabled method is listed as ``not_run``; a method that needs the model (FlipTest, the
individual-fairness test) is ``not_run`` with the reason when the audit scores come from a data
column.

A streamed audit (:func:`run_methods_from_counts`) runs the methods with a count-table path
from the counts, and the others — the methods that need rows — through the same method task on
the self-weighting subsample of the stream's sample (:class:`tasks.stream_data.RowSample`),
with the model's handles; their findings and warnings say that they come from that sample and
its size.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from prefect.futures import as_completed

from fairengine import progress, worker_processes
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.fliptest.method import pair_modules
from fairengine.library_threads import concurrent_tasks_single_threaded, single_threaded
from fairengine.prediction_task import not_applicable_reason
from fairengine.registry import METHODS, MethodSpec
from fairengine.result_codec import JSONLike
from fairengine.results import MethodResult
from tasks.caching import (
    counts_cache_policy,
    counts_identity,
    method_cache_policy,
    persisted_cache_options,
)
from tasks.method_task import counts_method_task, method_task, store_folder
from tasks.settings import default_cache_dir
from tasks.stream_data import RowSample


def method_config(cfg: AuditConfig, name: str) -> Any:
    """The ``methods.<name>`` section of the config."""
    return cfg.methods.section(name)


def _call_kwargs(spec: MethodSpec, cfg: AuditConfig, model: Any) -> dict[str, Any]:
    """The keywords of the method task besides the dataset and the config: the method's name,
    the seed, the model in the form the method needs, and its store folder in the audit's
    cache (passed, not recovered from the task's run context; absent when the cache is off)."""
    kwargs: dict[str, Any] = {"name": spec.name, "seed": cfg.seed}
    if spec.needs != "none":
        kwargs["model"] = model
    root = cache_root(cfg)
    if root is not None:
        kwargs["store"] = str(root / store_folder(spec.name))
    return kwargs


def cache_root(cfg: AuditConfig) -> Path | None:
    """The audit's cache directory (``cache.dir``, default ``$FAIRENGINE_HOME/cache``); ``None``
    when caching is off."""
    if not cfg.cache.enabled:
        return None
    return Path(cfg.cache.dir).expanduser() if cfg.cache.dir else default_cache_dir()


def step_cache(cfg: AuditConfig, dataset: AuditDataset, model_info: dict[str, Any]) -> dict:
    """Task options that cache method steps across runs (``cache`` config); ``{}`` when off.

    The data fingerprint is computed once here and shared by every step's key.
    """
    root = cache_root(cfg)
    if root is None:
        return {}
    policy = method_cache_policy(dataset, model_info, root / "keys")
    return persisted_cache_options(policy, root, cfg.cache.expiration_days)


def warm_worker_processes(cfg: AuditConfig, model_given: bool) -> None:
    """Start the worker processes that FlipTest's refits (and the decision step's large
    permutation batches) run in (:mod:`fairengine.worker_processes`) and import what they
    need, without waiting: called
    before the flow starts, so the imports overlap Prefect's server start and the data steps
    instead of delaying FlipTest. Nothing when FlipTest is off or has no model."""
    if not (cfg.methods.fliptest.enabled and (model_given or cfg.model.uri)):
        return
    # not MLflow: a scikit-learn model's handle reaches the workers as the estimator alone
    # (fairengine.model_scores.RawModelScores); a custom pyfunc's imports MLflow when unpickled
    modules = ["fairengine.fliptest.resampler", *pair_modules(cfg.methods.fliptest)]
    if cfg.methods.permutation_tests.enabled:  # the decision step's large batches
        modules.append("fairengine.permutation")
    worker_processes.warm_up(tuple(modules))


def run_methods(
    cfg: AuditConfig,
    dataset: AuditDataset,
    model: Any,
    model_info: dict[str, Any],
    logger: Any,
    timings: dict[str, float],
) -> list[MethodResult]:
    """Submit every enabled method, wait for all, and return their results in report order.

    ``model`` is the loaded model handle (see :func:`tasks.model.model_handles`) or ``None`` when
    the scores come from the data; ``model_info`` its registry identity (for cache keys).
    ``timings`` receives each method's compute time (``"<name> (cached)": 0`` for a method whose
    result came from the cache). When the enabled methods are at least as many as the cores,
    the numeric libraries run single-threaded meanwhile
    (:func:`fairengine.library_threads.single_threaded`): on 2 cores, nested BLAS/torch pools
    made FlipTest's small products 3-16x slower.
    """
    enabled = sum(
        bool(method_config(cfg, m.name).enabled) and m.applies_to(dataset.task) for m in METHODS
    )
    # one level of parallelism: methods that fill the cores together keep BLAS, OpenMP and
    # torch single-threaded (nested pools on the same cores wait on each other)
    with single_threaded() if concurrent_tasks_single_threaded(enabled) else nullcontext():
        cache_options = step_cache(cfg, dataset, model_info)
        submitted: dict[str, tuple[Any, float]] = {}
        results: dict[str, MethodResult] = {}
        for spec in METHODS:
            params = method_config(cfg, spec.name)
            if not spec.applies_to(dataset.task):
                results[spec.name] = MethodResult(
                    spec.name,
                    spec.title,
                    status="not_run",
                    reason=not_applicable_reason(spec.title, spec.tasks, dataset.task),
                )
                continue
            if not params.enabled:
                results[spec.name] = MethodResult(
                    spec.name,
                    spec.title,
                    status="not_run",
                    reason=f"disabled in the config (methods.{spec.name}.enabled)",
                )
                continue
            handle = None
            if spec.needs != "none":
                handle = None if model is None else model.get(spec.needs)
                if handle is None:
                    results[spec.name] = MethodResult(
                        spec.name,
                        spec.title,
                        status="not_run",
                        reason=NEEDS_MODEL_REASON,
                    )
                    continue
            task = method_task.with_options(name=spec.name, **cache_options)
            kwargs = _call_kwargs(spec, cfg, handle)
            progress.report(spec.name, "started")
            submitted[spec.name] = (
                task.submit(dataset, params=params, **kwargs),
                time.perf_counter(),
            )

        collect(submitted, results, logger, timings)
        return [results[m.name] for m in METHODS]


def collect(
    submitted: dict[str, tuple[Any, float]],
    results: dict[str, MethodResult],
    logger: Any,
    timings: dict[str, float],
) -> None:
    """Wait for the submitted method tasks (name -> (future, start time)) and put their
    results in ``results``: a method that raised is recorded as ``failed`` with its reason (an
    optional method: the audit finishes); ``timings`` gets each method's compute time
    (``"<name> (cached)": 0`` for a result reused from the cache)."""
    names = {id(future): name for name, (future, _) in submitted.items()}
    for future in as_completed([future for future, _ in submitted.values()]):
        name = names[id(future)]
        started = submitted[name][1]
        spec = next(m for m in METHODS if m.name == name)
        try:
            results[name] = future.result()
        except Exception as exc:  # an optional method: record the failure, finish the audit
            logger.error("%s failed: %s: %s", spec.title, type(exc).__name__, exc)
            results[name] = MethodResult(
                name, spec.title, status="failed", reason=f"{type(exc).__name__}: {exc}"
            )
        if getattr(future.state, "name", "") == "Cached":  # reused: no compute in this run
            timings[f"{name} (cached)"] = 0.0
            progress.report(name, "finished (cached result reused)")
            continue
        own = results[name].seconds  # the method's own compute time, when it reports one
        timings[name] = round(own if own is not None else time.perf_counter() - started, 4)
        outcome = "failed" if results[name].status == "failed" else "finished"
        progress.report(name, f"{outcome} in {timings[name]:.1f} s")


NEEDS_ROWS_REASON = (
    "needs the rows of the data: a streamed audit (data.engine: stream) runs it on the "
    "self-weighting subsample of its stratified sample, and there is none"
)

NEEDS_MODEL_REASON = (
    "needs the model itself (set model.uri); the audit scores came from a data column"
)


def run_methods_from_counts(
    cfg: AuditConfig,
    counts: Any,
    sample: AuditDataset | None,
    logger: Any,
    timings: dict[str, float],
    rows: RowSample | None = None,
    model: Any = None,
    model_info: dict[str, Any] | None = None,
) -> list[MethodResult]:
    """The methods of a streamed audit, in report order, submitted together: those with a
    count-table path (``MethodSpec.run_counts``) from ``counts`` (``sample``: the stratified
    sample as a dataset, for their parts that need rows); the others (FlipTest, individual
    fairness, mitigation) by the in-memory audit's method task on ``rows``, the self-weighting
    subsample, with ``model`` (the model's handles, :class:`tasks.model.ModelHandles`; None
    for a score column). A row method is ``not_run`` with the reason when there is no
    subsample (or it cannot be one, :attr:`RowSample.problem`), when it needs the model and
    the scores are a column, or when the subsample has fewer rows of a group than the method's
    ``min_group_rows`` while the data has enough. A method that raises is recorded as
    ``failed``. The row methods' results say that they come from the sample, and its size
    (:func:`from_sample`). With the cache on, each count step is cached by the content of
    ``counts`` and ``sample`` (:func:`tasks.caching.counts_identity`), its parameters and the
    code, and each row step as the in-memory audit's steps are (:func:`step_cache`: the
    subsample's content and ``model_info``)."""
    results: dict[str, MethodResult] = {}
    submitted: dict[str, tuple[Any, float]] = {}
    on_rows: list[str] = []
    root = cache_root(cfg)
    cache_options: dict[str, Any] = {}
    if root is not None:  # keyed by the content of the count tables and the sample
        policy = counts_cache_policy(counts_identity(counts, sample), root / "keys")
        cache_options = persisted_cache_options(policy, root, cfg.cache.expiration_days)
    row_cache: dict[str, Any] = {}
    if rows is not None and rows.dataset is not None:
        row_cache = step_cache(cfg, rows.dataset, model_info or {})
    for spec in METHODS:
        params = method_config(cfg, spec.name)
        reason = None
        if not spec.applies_to(cfg.task):
            reason = not_applicable_reason(spec.title, spec.tasks, cfg.task)
        elif not params.enabled:
            reason = f"disabled in the config (methods.{spec.name}.enabled)"
        elif spec.run_counts is None:
            reason = _row_method_problem(spec, params, counts, rows, model)
            if reason is None:
                assert rows is not None and rows.dataset is not None
                handle = None if spec.needs == "none" else model.get(spec.needs)
                progress.report(spec.name, "started")
                row_task = method_task.with_options(name=spec.name, **row_cache)
                kwargs = _call_kwargs(spec, cfg, handle)
                future = row_task.submit(rows.dataset, params=params, **kwargs)
                submitted[spec.name] = (future, time.perf_counter())
                on_rows.append(spec.name)
                continue
        if reason is not None:
            results[spec.name] = MethodResult(spec.name, spec.title, "not_run", reason=reason)
            continue
        task = counts_method_task.with_options(name=spec.name, **cache_options)
        progress.report(spec.name, "started")
        future = task.submit(counts, spec.name, params, seed=cfg.seed, sample=sample)
        submitted[spec.name] = (future, time.perf_counter())
    collect(submitted, results, logger, timings)
    for name in on_rows:
        assert rows is not None
        results[name] = from_sample(results[name], rows)
    return [results[m.name] for m in METHODS]


def _row_method_problem(
    spec: MethodSpec, params: Any, counts: Any, rows: RowSample | None, model: Any
) -> str | None:
    """Why a method that needs rows cannot run on the streamed audit's subsample (None: it
    can; :func:`run_methods_from_counts`)."""
    if rows is None:
        return NEEDS_ROWS_REASON
    if rows.problem is not None or rows.dataset is None or rows.subsample is None:
        return f"needs the rows of the data: {rows.problem or 'no self-weighting subsample'}"
    if spec.needs != "none" and (model is None or model.get(spec.needs) is None):
        return NEEDS_MODEL_REASON
    if spec.min_group_rows is None:
        return None
    need = int(spec.min_group_rows(params))
    short = []
    used = getattr(params, "attributes", None)  # the attributes the method audits (None: all)
    for attr, enc in rows.dataset.groups.items():
        if used is not None and attr not in used:
            continue
        in_data = dict(zip(counts.categories[attr], counts.group_sizes(attr), strict=True))
        for cat, n in zip(enc.categories, enc.sizes(), strict=True):
            if n < need <= in_data[cat]:
                short.append(f"{attr}={cat!r} has {int(n):,} rows in it ({int(in_data[cat]):,} "
                             "in the data)")  # fmt: skip
    if not short:
        return None
    sub = rows.subsample
    return (
        f"the self-weighting sample of {sub.n_rows:,} rows (f = {sub.fraction:.4g}) is too small "
        f"for it: {'; '.join(short[:4])}{' …' if len(short) > 4 else ''}, below the {need:,} "
        "rows per group it needs; raise data.sample_rows"
    )


def from_sample(result: MethodResult, rows: RowSample) -> MethodResult:
    """``result`` of a method run on the streamed audit's self-weighting subsample, saying so:
    each finding's label and reading name the sample and its size (as the permutation tests
    computed on the stratified sample do), a warning says it for the method (and, for
    mitigation, that its thresholds were fitted on the sample), and ``parameters["sample"]``
    holds its size, fraction and seed. A subsample that holds every row is said to be all
    rows."""
    sub = rows.subsample
    assert sub is not None  # only methods run on it come here
    note = sub.describe()
    everything = sub.n_rows == sub.total_rows
    warnings = [
        f"computed {note}: a streamed audit (data.sample_rows at least the row count)"
        if everything
        else f"computed {note}, not from all {sub.total_rows:,} rows: a streamed audit runs "
        "the methods that need rows on a sample that includes every row with the same "
        "probability f"
    ]
    if result.method == "mitigation" and result.status == "ok":
        warnings.append(
            f"its thresholds were fitted {note}"
            + ("" if everything else ", and its held-out ε and costs measured on that sample")
            + "; the deployed rule is that fit"
        )
    findings = result.findings
    if not everything:
        short = f"sample of {sub.n_rows:,} rows, f = {sub.fraction:.4g}"
        findings = [
            dataclasses.replace(
                f,
                label=f"{f.label} ({short})",
                reading=f"{f.reading} Computed {note}, not from all rows.".lstrip(),
            )
            for f in result.findings
        ]
    sample: JSONLike = {
        "kind": "self-weighting",
        "rows": sub.n_rows,
        "of_rows": sub.total_rows,
        "fraction": sub.fraction,
        "seed": sub.seed,
    }
    parameters: dict[str, JSONLike] = {**result.parameters, "sample": sample}
    return dataclasses.replace(
        result, findings=findings, warnings=[*result.warnings, *warnings], parameters=parameters
    )
