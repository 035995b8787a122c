"""Pipeline step: individual-fairness test (:mod:`fairengine.individual`, Maity et al. 2021)."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.dataset import AuditDataset
from fairengine.individual import IndividualConfig, run_individual_fairness
from fairengine.library_threads import follow_process_cap
from fairengine.results import MethodResult


@task(name="individual_fairness", cache_policy=NO_CACHE)
def individual_fairness_task(
    dataset: AuditDataset, params: IndividualConfig, seed: int = 0, model: Any = None
) -> MethodResult:
    """Run :func:`fairengine.individual.run_individual_fairness` with the configured parameters."""
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_individual_fairness(dataset, params, seed=seed, model=model)
    logger = get_run_logger()
    if result.status != "ok":
        logger.info("Individual fairness: %s (%s)", result.status, result.reason)
        return result
    lr = result.details["loss_ratio"]
    logger.info(
        "Individual fairness: mean loss ratio %.3f, lower bound %.3f vs delta %.2f on %d rows "
        "in %.2f s",
        lr["statistic"],
        lr["lower_bound"],
        result.details["delta"],
        result.details["n_audited"],
        result.seconds or 0.0,
    )
    return result
