"""Pipeline step: any registered audit method (:mod:`fairengine.registry`), as one Prefect task.

The flow runs each enabled method through :func:`method_task`, renamed per method with
``method_task.with_options(name=<method>)`` (Prefect's own pattern for one task used in several
roles), and with the audit's cache options (:mod:`tasks.caching`: the key covers the data, the
model, the method's name and settings, the seed, the store folder and the code). The task holds
no method-specific code: the registry says what each method needs and how it logs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from fairengine.dataset import AuditDataset
from fairengine.library_threads import follow_process_cap
from fairengine.registry import CountsContext, RunContext, method_spec
from fairengine.results import MethodResult

STORE_FOLDERS = {"fliptest": "fliptest-maps"}
"""The folder, in the audit's cache directory, of a method that keeps artifacts across runs
(its ``store``); the name keeps FlipTest's map cache where earlier versions wrote it."""


def store_folder(name: str) -> str:
    """The cache sub-folder of method ``name``'s store: ``<name>-store`` unless listed in
    :data:`STORE_FOLDERS`."""
    return STORE_FOLDERS.get(name, f"{name}-store")


def _logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a run; this module's logger otherwise (``.fn``)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


@task(name="method", cache_policy=NO_CACHE)
def method_task(
    dataset: AuditDataset,
    name: str,
    params: Any,
    seed: int = 0,
    model: Any = None,
    store: str | None = None,
) -> MethodResult:
    """Run the registered method ``name`` on ``dataset`` with its config ``params``.

    ``model``: what the method's ``needs`` names (None when it needs none); ``store``: its
    folder in the audit's cache (None when the cache is off). The numeric libraries follow the
    flow's thread cap (one level of parallelism)."""
    spec = method_spec(name)
    context = RunContext(seed=seed, model=model, store=Path(store) if store else None)
    with follow_process_cap():
        result = spec.run(dataset, params, context)
    if result.status == "ok" and not isinstance(result.details, spec.details):
        raise TypeError(
            f"method {name!r} returned details of type {type(result.details).__name__}; its "
            f"MethodSpec declares {spec.details.__name__} (the type audit.json is read as)"
        )
    logger = _logger()
    if result.status != "ok":
        logger.info("%s: %s (%s)", spec.title, result.status, result.reason)
    elif spec.summary is not None:
        logger.info("%s", spec.summary(result, params))
    return result


@task(name="method-from-counts", cache_policy=NO_CACHE)
def counts_method_task(
    counts: Any, name: str, params: Any, seed: int = 0, sample: AuditDataset | None = None
) -> MethodResult:
    """Run the registered method ``name`` from the count tables of a streamed audit
    (``spec.run_counts``; ``counts``: :class:`fairengine.streaming.StreamedCounts`)."""
    spec = method_spec(name)
    if spec.run_counts is None:
        raise ValueError(f"method {name!r} has no count-table path (run_counts)")
    with follow_process_cap():
        result = spec.run_counts(counts, params, CountsContext(seed=seed, sample=sample))
    logger = _logger()
    if result.status != "ok":
        logger.info("%s: %s (%s)", spec.title, result.status, result.reason)
    elif spec.summary is not None:
        logger.info("%s", spec.summary(result, params))
    return result
