"""Fairness statistics of regression models (issue 22), as pure functions on numpy arrays.

Inputs everywhere: target ``y`` (real or 0/1), prediction ``ŷ`` (real), integer group codes
0..G−1 with their ``categories``, optional non-negative ``weights`` (:mod:`.inputs`).

* :func:`group_summaries` — per-group n, mean prediction, mean target, mean residual (bias),
  MAE, MSE, RMSE with intervals (:mod:`.summaries`, :mod:`.mean_intervals`).
* :func:`pair_permutation_tests`, :func:`all_pair_tests` — studentized permutation tests of the
  differences in mean prediction, mean residual, MAE and MSE, and permutation tests of the
  Kolmogorov–Smirnov and Wasserstein-1 distances between the groups' predictions, on shared
  permutations (:mod:`.permutation`, :mod:`.distances`).
* :func:`bounded_group_loss` — per-group loss against a bound ζ (Agarwal, Dudík & Wu 2019) with
  confidence bounds and a one-sided test (:mod:`.bounded_loss`).
* :func:`regression_findings` — the :class:`~fairengine.results.Finding` list of all of the
  above (:mod:`.findings`).

Every result is a frozen dataclass with a lossless ``to_dict``/``from_dict``.
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.regression.bounded_loss import (
        LOSSES,
        BoundedGroupLoss,
        GroupLoss,
        bounded_group_loss,
    )
    from fairengine.regression.findings import regression_findings
    from fairengine.regression.inputs import RegressionInputs, check_inputs
    from fairengine.regression.permutation import (
        DIFFERENCE_METRICS,
        DifferenceTest,
        DistanceTest,
        PairTests,
        all_pair_tests,
        pair_permutation_tests,
        pair_seed,
    )
    from fairengine.regression.summaries import (
        SUMMARY_QUANTITIES,
        Estimate,
        GroupSummaries,
        GroupSummary,
        group_summaries,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LOSSES": "bounded_loss",
        "BoundedGroupLoss": "bounded_loss",
        "GroupLoss": "bounded_loss",
        "bounded_group_loss": "bounded_loss",
        "regression_findings": "findings",
        "RegressionInputs": "inputs",
        "check_inputs": "inputs",
        "DIFFERENCE_METRICS": "permutation",
        "DifferenceTest": "permutation",
        "DistanceTest": "permutation",
        "PairTests": "permutation",
        "all_pair_tests": "permutation",
        "pair_permutation_tests": "permutation",
        "pair_seed": "permutation",
        "SUMMARY_QUANTITIES": "summaries",
        "Estimate": "summaries",
        "GroupSummaries": "summaries",
        "GroupSummary": "summaries",
        "group_summaries": "summaries",
    },
)

__all__ = [
    "DIFFERENCE_METRICS",
    "LOSSES",
    "SUMMARY_QUANTITIES",
    "BoundedGroupLoss",
    "DifferenceTest",
    "DistanceTest",
    "Estimate",
    "GroupLoss",
    "GroupSummaries",
    "GroupSummary",
    "PairTests",
    "RegressionInputs",
    "all_pair_tests",
    "bounded_group_loss",
    "check_inputs",
    "group_summaries",
    "pair_permutation_tests",
    "pair_seed",
    "regression_findings",
]
