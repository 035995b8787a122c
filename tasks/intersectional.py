"""Pipeline step: intersectional differential fairness (:mod:`fairengine.intersectional`)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.dataset import AuditDataset
from fairengine.intersectional import IntersectionalConfig, run_intersectional
from fairengine.library_threads import follow_process_cap
from fairengine.results import MethodResult


@task(name="intersectional", cache_policy=NO_CACHE)
def intersectional_task(
    dataset: AuditDataset, params: IntersectionalConfig, seed: int = 0
) -> MethodResult:
    """Run :func:`fairengine.intersectional.run_intersectional` with the configured parameters."""
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_intersectional(dataset, params, seed=seed)
    details = result.details
    get_run_logger().info(
        "Intersectional: %d findings over %d intersections of %s (%d warning(s)) in %.2f s",
        len(result.findings),
        details["n_intersections"],
        " x ".join(details["attributes"]),
        len(result.warnings),
        result.seconds or 0.0,
    )
    return result
