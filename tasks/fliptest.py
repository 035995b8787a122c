"""Pipeline step: FlipTest with transport maps and statistics (:mod:`fairengine.fliptest`).

The fitted maps are pipeline artifacts. Every observed map (one per direction, group pair and
label stratum) is saved in a content-addressed map cache (:class:`fairengine.transport.MapCache`:
key = data content, estimator and all its parameters (cost, ε, seed ...), estimator code) and
listed in ``result.details["artifacts"]`` as ``{"path", "name"}`` for the MLflow edge to log
under ``artifacts/fliptest/``. A later run whose step is not cached as a whole (e.g. only
``n_bootstrap`` changed) loads these maps instead of refitting them.

Where the maps go (:func:`resolve_map_folder`):

1. ``map_cache_dir`` when the caller passes it: the audit flow passes
   ``<cache dir>/fliptest-maps`` when the audit's ``cache`` is on
   (:func:`flows.method_steps.run_methods`);
2. else (caching off, or the task called on its own) a fresh temporary folder: the maps are
   still saved for the run's artifacts, but never reused.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from fairengine.dataset import AuditDataset
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.library_threads import follow_process_cap
from fairengine.results import MethodResult
from fairengine.transport import MapCache

MAP_FOLDER = "fliptest-maps"


def _logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a run; this module's logger otherwise (``.fn``)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def resolve_map_folder(explicit: str | Path | None = None) -> tuple[Path, bool]:
    """(folder for the fitted maps, reused across runs?): ``explicit`` (the flow passes
    ``<cache dir>/fliptest-maps`` when the audit's cache is on), else a fresh temporary folder
    whose maps are saved for the run's artifacts but never reused."""
    if explicit is not None:
        return Path(explicit).expanduser(), True
    return Path(tempfile.mkdtemp(prefix="fairengine-fliptest-maps-")), False


def map_artifacts(result: MethodResult) -> list[dict[str, str]]:
    """``[{"path": local map file, "name": artifact file name}]`` of a FlipTest result."""
    out = []
    for pair in result.details.get("pairs", []):
        for direction in pair["directions"]:
            for entry in direction.get("maps", []):
                if entry.get("path"):
                    out.append({"path": entry["path"], "name": entry["artifact"]})
    return out


@task(name="fliptest", cache_policy=NO_CACHE)
def fliptest_task(
    dataset: AuditDataset,
    params: FlipTestConfig,
    seed: int = 0,
    predict_proba: Callable[[Any], Any] | None = None,
    map_cache_dir: str | None = None,
) -> MethodResult:
    """Run :func:`fairengine.fliptest.run_fliptest` with the configured parameters, saving (or
    reusing) the fitted maps and listing them in ``details["artifacts"]``."""
    logger = _logger()
    cache, folder, reused = None, None, False
    if predict_proba is not None and params.enabled:
        folder, reused = resolve_map_folder(map_cache_dir)
        cache = MapCache(folder)
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_fliptest(
            dataset, params, seed=seed, predict_proba=predict_proba, map_cache=cache
        )
    if result.status != "ok":
        logger.info("FlipTest %s: %s", result.status, result.reason)
        return result
    result.details["artifacts"] = map_artifacts(result)
    logger.info(
        "FlipTest (%s map, %s): %d flipset findings over %d group pair(s) in %.2f s; "
        "%d map(s) loaded from %s, %d fitted and saved%s",
        params.estimator,
        params.mode,
        len(result.findings),
        len(result.details.get("pairs", [])),
        result.seconds or 0.0,
        cache.hits if cache else 0,
        folder,
        cache.misses if cache else 0,
        "" if reused else " (not reused: step caching is off)",
    )
    return result
