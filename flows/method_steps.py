"""The audit's method steps: which methods exist, how each is called, and running them together.

Each method is one Prefect task (``tasks/<method>.py``) over the validated
:class:`~fairengine.dataset.AuditDataset`, configured by ``methods.<name>`` of the audit config.
Enabled methods are submitted together to the flow's task runner (the thread pool by default:
numpy and torch release the GIL), so independent methods run concurrently. A method that raises
is recorded as ``failed`` with its reason and the other methods complete; a disabled method is
listed as ``not_run``; a method that needs the model (FlipTest, the individual-fairness test)
is ``not_run`` with the reason when the audit scores come from a data column.
"""

from __future__ import annotations

import importlib
import inspect
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect.futures import as_completed

from fairengine import progress
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.library_threads import concurrent_tasks_single_threaded, single_threaded
from fairengine.results import MethodResult
from tasks.caching import method_cache_policy
from tasks.settings import default_cache_dir


@dataclass(frozen=True)
class MethodStep:
    """One audit method: its config key / result name, title, and task (``module:attribute``).

    ``model_arg`` names the keyword through which the task receives the model: ``"predict_proba"``
    (a function of a feature frame returning P(y=1)) or ``"model"`` (the underlying estimator or
    torch module, unwrapped from MLflow's pyfunc). ``None``: the method needs only the dataset.
    """

    name: str
    title: str
    task_ref: str
    model_arg: str | None = None

    def load_task(self) -> Any:
        module, attribute = self.task_ref.split(":")
        return getattr(importlib.import_module(module), attribute)


METHOD_STEPS: tuple[MethodStep, ...] = (
    MethodStep(
        "group_parity",
        "Demographic parity and equalized odds",
        "tasks.group_metrics:group_parity_task",
    ),
    MethodStep(
        "group_metrics", "Group metrics (LiFT suite)", "tasks.group_metrics:group_metrics_task"
    ),
    MethodStep(
        "permutation_tests",
        "Permutation tests",
        "tasks.permutation:permutation_tests_task",
    ),
    MethodStep(
        "intersectional",
        "Intersectional differential fairness",
        "tasks.intersectional:intersectional_task",
    ),
    MethodStep(
        "fliptest",
        "FlipTest (optimal-transport flipsets)",
        "tasks.fliptest:fliptest_task",
        model_arg="predict_proba",
    ),
    MethodStep(
        "individual_fairness",
        "Individual fairness (Maity et al. gradient-flow test)",
        "tasks.individual:individual_fairness_task",
        model_arg="model",
    ),
    MethodStep(
        "mitigation",
        "Mitigation (RTDP post-processing to an ε target)",
        "tasks.mitigation:mitigation_task",
    ),
)
"""Every method of an audit, in report order."""


def method_config(cfg: AuditConfig, name: str) -> Any:
    """The ``methods.<name>`` section of the config."""
    return getattr(cfg.methods, name)


def _call_kwargs(task: Any, cfg: AuditConfig, model_arg: str | None, model: Any) -> dict[str, Any]:
    """The keywords a method's task takes besides the dataset and its config: the seed, the
    model, and (FlipTest) the folder of its fitted maps in the audit's cache, passed rather
    than recovered from the task's run context."""
    accepted = inspect.signature(task.fn).parameters
    kwargs: dict[str, Any] = {}
    if "seed" in accepted:
        kwargs["seed"] = cfg.seed
    if model_arg is not None:
        kwargs[model_arg] = model
    root = cache_root(cfg)
    if "map_cache_dir" in accepted and root is not None:
        from tasks.fliptest import MAP_FOLDER  # loaded with the task already

        kwargs["map_cache_dir"] = str(root / MAP_FOLDER)
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
    enabled = sum(bool(method_config(cfg, s.name).enabled) for s in METHOD_STEPS)
    # one level of parallelism: methods that fill the cores together keep BLAS, OpenMP and
    # torch single-threaded (nested pools on the same cores wait on each other)
    with single_threaded() if concurrent_tasks_single_threaded(enabled) else nullcontext():
        cache_options = step_cache(cfg, dataset, model_info)
        submitted: dict[str, tuple[Any, float]] = {}
        results: dict[str, MethodResult] = {}
        for step in METHOD_STEPS:
            params = method_config(cfg, step.name)
            if not params.enabled:
                results[step.name] = MethodResult(
                    step.name,
                    step.title,
                    status="not_run",
                    reason=f"disabled in the config (methods.{step.name}.enabled)",
                )
                continue
            handle = None
            if step.model_arg is not None:
                handle = None if model is None else model.get(step.model_arg)
                if handle is None:
                    results[step.name] = MethodResult(
                        step.name,
                        step.title,
                        status="not_run",
                        reason="needs the model itself (set model.uri); the audit scores came "
                        "from a data column",
                    )
                    continue
            task = step.load_task()
            if cache_options:
                task = task.with_options(**cache_options)
            kwargs = _call_kwargs(task, cfg, step.model_arg, handle)
            progress.report(step.name, "started")
            submitted[step.name] = (task.submit(dataset, params, **kwargs), time.perf_counter())

        names = {id(future): name for name, (future, _) in submitted.items()}
        for future in as_completed([future for future, _ in submitted.values()]):
            name = names[id(future)]
            started = submitted[name][1]
            step = next(s for s in METHOD_STEPS if s.name == name)
            try:
                results[name] = future.result()
            except Exception as exc:  # an optional method: record the failure, finish the audit
                logger.error("%s failed: %s: %s", step.title, type(exc).__name__, exc)
                results[name] = MethodResult(
                    name, step.title, status="failed", reason=f"{type(exc).__name__}: {exc}"
                )
            if getattr(future.state, "name", "") == "Cached":  # reused: no compute in this run
                timings[f"{name} (cached)"] = 0.0
                progress.report(name, "finished (cached result reused)")
                continue
            own = results[name].seconds  # the method's own compute time, when it reports one
            timings[name] = round(own if own is not None else time.perf_counter() - started, 4)
            outcome = "failed" if results[name].status == "failed" else "finished"
            progress.report(name, f"{outcome} in {timings[name]:.1f} s")
        return [results[s.name] for s in METHOD_STEPS]
