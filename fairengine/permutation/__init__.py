"""Permutation tests of fairness that stay valid under the weak null (DiCiccio et al., KDD 2020).

Public API:

* :func:`permutation_test`, :class:`PermutationTestResult`, :func:`permutation_pvalue` — the
  two-group test of a metric difference (studentized per permutation, un-studentized, or
  LiFT-compatible; all-rows or within-outcome permutations); :func:`permutation_test_from_counts`
  the same test of a proportion metric from both groups' (y, ŷ) cell counts.
* :func:`correlation_permutation_test` — the studentized Pearson-correlation permutation test of
  the paper's §4.1 (Table 1).
* :func:`plan_sample_size`, :func:`minimum_detectable_difference`, :class:`SampleSizePlan` —
  sample-size planning (§5.1).
* :class:`PermutationConfig`, :func:`run_permutation_tests` — the audit method
  (``methods.permutation_tests``); :func:`run_permutation_tests_from_counts` the same from a
  streamed audit's count tables (:mod:`fairengine.streaming`).
* Building blocks: :mod:`.metrics` (ratio metrics and closed-form variances), :mod:`.cell_draws`
  (hypergeometric/multinomial draws over cells, random subsets of rows), :mod:`.auc` (batched AUC
  with DeLong variance per permutation).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.permutation.config import PermutationConfig
    from fairengine.permutation.correlation import (
        CorrelationTestResult,
        correlation_permutation_test,
    )
    from fairengine.permutation.method import (
        run_permutation_tests,
        run_permutation_tests_from_counts,
    )
    from fairengine.permutation.metrics import BUILTIN_METRICS, RATIO_METRICS, canonical_metric
    from fairengine.permutation.sample_size import (
        SampleSizePlan,
        minimum_detectable_difference,
        plan_sample_size,
    )
    from fairengine.permutation.two_group import (
        CustomMetricError,
        PermutationTestResult,
        permutation_pvalue,
        permutation_test,
        permutation_test_from_counts,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PermutationConfig": "config",
        "CorrelationTestResult": "correlation",
        "correlation_permutation_test": "correlation",
        "run_permutation_tests": "method",
        "run_permutation_tests_from_counts": "method",
        "BUILTIN_METRICS": "metrics",
        "RATIO_METRICS": "metrics",
        "canonical_metric": "metrics",
        "SampleSizePlan": "sample_size",
        "minimum_detectable_difference": "sample_size",
        "plan_sample_size": "sample_size",
        "CustomMetricError": "two_group",
        "PermutationTestResult": "two_group",
        "permutation_pvalue": "two_group",
        "permutation_test": "two_group",
        "permutation_test_from_counts": "two_group",
    },
)

__all__ = [
    "BUILTIN_METRICS",
    "RATIO_METRICS",
    "CorrelationTestResult",
    "CustomMetricError",
    "PermutationConfig",
    "PermutationTestResult",
    "SampleSizePlan",
    "canonical_metric",
    "correlation_permutation_test",
    "minimum_detectable_difference",
    "permutation_pvalue",
    "permutation_test",
    "permutation_test_from_counts",
    "plan_sample_size",
    "run_permutation_tests",
    "run_permutation_tests_from_counts",
]
