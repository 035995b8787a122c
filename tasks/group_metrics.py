"""Pipeline steps: demographic parity and equalized-odds gaps (:mod:`fairengine.parity`) and
LiFT's group-metric suite (:mod:`fairengine.group_metrics`)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.config import GroupParityConfig
from fairengine.dataset import AuditDataset
from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
from fairengine.library_threads import follow_process_cap
from fairengine.parity import group_parity
from fairengine.results import MethodResult


@task(name="group-parity", cache_policy=NO_CACHE)
def group_parity_task(dataset: AuditDataset, params: GroupParityConfig) -> MethodResult:
    """Run :func:`fairengine.parity.group_parity` with the configured parameters."""
    result = group_parity(
        dataset,
        tolerance=params.tolerance,
        confidence_level=params.confidence_level,
        exact=params.exact,
        exact_max_rows=params.exact_max_rows,
    )
    get_run_logger().info(
        "Group parity: %d gaps over %d attribute(s) in %.2f s",
        len(result.findings),
        len(result.parameters["attributes"]),
        result.seconds or 0.0,
    )
    return result


@task(name="group_metrics", cache_policy=NO_CACHE)
def group_metrics_task(
    dataset: AuditDataset, params: GroupMetricsConfig, seed: int = 0
) -> MethodResult:
    """Run :func:`fairengine.group_metrics.run_group_metrics` (LiFT's group-metric suite)."""
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_group_metrics(dataset, params, seed=seed)
    get_run_logger().info(
        "Group metrics (LiFT suite%s): %d findings over %d attribute(s)%s in %.2f s",
        ", lift_compat" if params.lift_compat else "",
        len(result.findings),
        len(result.parameters["attributes"]),
        " + intersection" if result.parameters["intersection"] else "",
        result.seconds or 0.0,
    )
    return result
