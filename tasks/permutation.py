"""Pipeline step: studentized permutation tests of metric differences
(:mod:`fairengine.permutation`)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.dataset import AuditDataset
from fairengine.library_threads import follow_process_cap
from fairengine.permutation import PermutationConfig, run_permutation_tests
from fairengine.results import MethodResult


@task(name="permutation_tests", cache_policy=NO_CACHE)
def permutation_tests_task(
    dataset: AuditDataset, params: PermutationConfig, seed: int = 0
) -> MethodResult:
    """Run :func:`fairengine.permutation.run_permutation_tests` with the configured parameters."""
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_permutation_tests(dataset, params, seed=seed)
    family = result.details.get("family", {})
    get_run_logger().info(
        "Permutation tests: %d tests (%d skipped), %d rejected at alpha=%g within the method "
        "(%s), %d permutations each, in %.2f s",
        len(result.findings),
        len(result.details.get("skipped", [])),
        family.get("n_rejected", 0),
        params.alpha,
        params.family_multiplicity,
        params.n_permutations,
        result.seconds or 0.0,
    )
    return result
