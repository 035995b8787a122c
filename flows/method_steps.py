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
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect.futures import as_completed

from fairengine import progress
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.library_threads import concurrent_tasks_single_threaded, single_threaded
from fairengine.prediction_task import not_applicable_reason
from fairengine.registry import METHODS, MethodSpec
from fairengine.results import MethodResult
from tasks.caching import counts_cache_policy, counts_identity, method_cache_policy
from tasks.method_task import counts_method_task, method_task, store_folder
from tasks.settings import default_cache_dir


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
    return {
        "cache_policy": method_cache_policy(dataset, model_info, root / "keys"),
        "persist_result": True,
        "result_storage": root / "results",
        "cache_expiration": timedelta(days=cfg.cache.expiration_days),
    }


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
                        reason="needs the model itself (set model.uri); the audit scores came "
                        "from a data column",
                    )
                    continue
            task = method_task.with_options(name=spec.name, **cache_options)
            kwargs = _call_kwargs(spec, cfg, handle)
            progress.report(spec.name, "started")
            submitted[spec.name] = (
                task.submit(dataset, params=params, **kwargs),
                time.perf_counter(),
            )

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
        return [results[m.name] for m in METHODS]


NEEDS_ROWS_REASON = (
    "needs the rows of the data: a streamed audit (data.engine: stream) runs the count-based "
    "methods only; audit a sample or data that fits in memory with data.engine: pandas"
)


def run_methods_from_counts(
    cfg: AuditConfig,
    counts: Any,
    sample: AuditDataset | None,
    logger: Any,
    timings: dict[str, float],
) -> list[MethodResult]:
    """The methods of a streamed audit, in report order: those with a count-table path
    (``MethodSpec.run_counts``) run from ``counts`` (``sample``: the stratified sample as a
    dataset, for their parts that need rows), submitted together; the others are ``not_run``
    with the reason. A method that raises is recorded as ``failed``. With the cache on, each
    step is cached by the content of ``counts`` and ``sample``
    (:func:`tasks.caching.counts_identity`), its parameters and the code."""
    results: dict[str, MethodResult] = {}
    submitted: dict[str, tuple[Any, float]] = {}
    root = cache_root(cfg)
    cache_options: dict[str, Any] = {}
    if root is not None:  # keyed by the content of the count tables and the sample
        cache_options = {
            "cache_policy": counts_cache_policy(counts_identity(counts, sample), root / "keys"),
            "persist_result": True,
            "result_storage": root / "results",
            "cache_expiration": timedelta(days=cfg.cache.expiration_days),
        }
    for spec in METHODS:
        params = method_config(cfg, spec.name)
        reason = None
        if not spec.applies_to(cfg.task):
            reason = not_applicable_reason(spec.title, spec.tasks, cfg.task)
        elif not params.enabled:
            reason = f"disabled in the config (methods.{spec.name}.enabled)"
        elif spec.run_counts is None:
            reason = NEEDS_ROWS_REASON
        if reason is not None:
            results[spec.name] = MethodResult(spec.name, spec.title, "not_run", reason=reason)
            continue
        task = counts_method_task.with_options(name=spec.name, **cache_options)
        progress.report(spec.name, "started")
        future = task.submit(counts, spec.name, params, seed=cfg.seed, sample=sample)
        submitted[spec.name] = (future, time.perf_counter())
    names = {id(future): name for name, (future, _) in submitted.items()}
    for future in as_completed([future for future, _ in submitted.values()]):
        name = names[id(future)]
        spec = next(m for m in METHODS if m.name == name)
        try:
            results[name] = future.result()
        except Exception as exc:  # as run_methods: record the failure, finish the audit
            logger.error("%s failed: %s: %s", spec.title, type(exc).__name__, exc)
            results[name] = MethodResult(
                name, spec.title, status="failed", reason=f"{type(exc).__name__}: {exc}"
            )
        if getattr(future.state, "name", "") == "Cached":  # reused: no compute in this run
            timings[f"{name} (cached)"] = 0.0
            progress.report(name, "finished (cached result reused)")
            continue
        own = results[name].seconds
        timings[name] = round(
            own if own is not None else time.perf_counter() - submitted[name][1], 4
        )
        progress.report(name, f"finished in {timings[name]:.1f} s")
    return [results[m.name] for m in METHODS]
