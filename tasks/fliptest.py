"""Pipeline step: FlipTest with transport maps and statistics (:mod:`fairengine.fliptest`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.dataset import AuditDataset
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.results import MethodResult


@task(name="fliptest", cache_policy=NO_CACHE)
def fliptest_task(
    dataset: AuditDataset,
    params: FlipTestConfig,
    seed: int = 0,
    predict_proba: Callable[[Any], Any] | None = None,
) -> MethodResult:
    """Run :func:`fairengine.fliptest.run_fliptest` with the configured parameters."""
    result = run_fliptest(dataset, params, seed=seed, predict_proba=predict_proba)
    logger = get_run_logger()
    if result.status != "ok":
        logger.info("FlipTest %s: %s", result.status, result.reason)
    else:
        logger.info(
            "FlipTest (%s map, %s): %d flipset findings over %d group pair(s) in %.2f s",
            params.estimator,
            params.mode,
            len(result.findings),
            len(result.details.get("pairs", [])),
            result.seconds or 0.0,
        )
    return result
