"""Pipeline step: demographic parity and equalized-odds gaps (:mod:`fairengine.parity`)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.config import GroupParityConfig
from fairengine.dataset import AuditDataset
from fairengine.parity import group_parity
from fairengine.results import MethodResult


@task(name="group-parity", cache_policy=NO_CACHE)
def group_parity_task(dataset: AuditDataset, params: GroupParityConfig) -> MethodResult:
    """Run :func:`fairengine.parity.group_parity` with the configured parameters."""
    result = group_parity(
        dataset, tolerance=params.tolerance, confidence_level=params.confidence_level
    )
    get_run_logger().info(
        "Group parity: %d gaps over %d attribute(s) in %.2f s",
        len(result.findings),
        len(result.parameters["attributes"]),
        result.seconds or 0.0,
    )
    return result
