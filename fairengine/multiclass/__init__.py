"""Fairness statistics of multiclass classifiers (issue 22), as pure functions on numpy arrays.

Inputs everywhere: true class codes ``y`` in 0..K−1 with their ``classes``, a prediction as
predicted class codes or an (n, K) probability matrix (``probabilities="argmax"``: the
predicted class, ties to the lowest code; ``"expected"``: expected counts), integer group codes
0..G−1 with their ``categories``, optional non-negative ``weights`` (:mod:`.inputs`).

* :func:`group_class_rates` — per group and class, the one-vs-rest selection rate, TPR and FPR
  with Wilson intervals (:mod:`.rates`, sums in :mod:`.class_sums`).
* :func:`pair_permutation_tests`, :func:`all_pair_tests` — studentized permutation tests of the
  per-class rate differences between two groups, and permutation tests of the total variation,
  Jensen–Shannon and Hellinger distances between their predicted-class distributions, on shared
  permutations (exact cell-count draws for unweighted hard predictions; :mod:`.permutation`,
  :mod:`.distances`).
* :func:`differential_fairness` — ε-differential fairness over the K outcomes, empirical,
  smoothed (Dirichlet) and optionally its posterior (:mod:`.epsilon`).
* :func:`multiclass_findings` — the :class:`~fairengine.results.Finding` list of all of the
  above (:mod:`.findings`); :class:`MulticlassDetails` — the typed details of an audit step
  (:mod:`.result`).

Every result is a frozen dataclass with a lossless ``to_dict``/``from_dict``.
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.multiclass.class_sums import RATE_METRICS
    from fairengine.multiclass.distances import DISTANCES, class_distances
    from fairengine.multiclass.epsilon import (
        EpsilonPosterior,
        MulticlassEpsilon,
        differential_fairness,
    )
    from fairengine.multiclass.findings import multiclass_findings
    from fairengine.multiclass.inputs import PROBABILITY_MODES, MulticlassInputs, check_inputs
    from fairengine.multiclass.permutation import (
        ClassDistanceTest,
        PairTests,
        RateDifferenceTest,
        all_pair_tests,
        pair_permutation_tests,
        pair_seed,
    )
    from fairengine.multiclass.rates import (
        ClassRates,
        GroupClassRates,
        RateEstimate,
        group_class_rates,
    )
    from fairengine.multiclass.result import MulticlassAttribute, MulticlassDetails

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RATE_METRICS": "class_sums",
        "DISTANCES": "distances",
        "class_distances": "distances",
        "EpsilonPosterior": "epsilon",
        "MulticlassEpsilon": "epsilon",
        "differential_fairness": "epsilon",
        "multiclass_findings": "findings",
        "PROBABILITY_MODES": "inputs",
        "MulticlassInputs": "inputs",
        "check_inputs": "inputs",
        "ClassDistanceTest": "permutation",
        "PairTests": "permutation",
        "RateDifferenceTest": "permutation",
        "all_pair_tests": "permutation",
        "pair_permutation_tests": "permutation",
        "pair_seed": "permutation",
        "MulticlassAttribute": "result",
        "MulticlassDetails": "result",
        "ClassRates": "rates",
        "GroupClassRates": "rates",
        "RateEstimate": "rates",
        "group_class_rates": "rates",
    },
)

__all__ = [
    "DISTANCES",
    "PROBABILITY_MODES",
    "RATE_METRICS",
    "ClassDistanceTest",
    "ClassRates",
    "EpsilonPosterior",
    "GroupClassRates",
    "MulticlassAttribute",
    "MulticlassDetails",
    "MulticlassEpsilon",
    "MulticlassInputs",
    "PairTests",
    "RateDifferenceTest",
    "RateEstimate",
    "all_pair_tests",
    "check_inputs",
    "class_distances",
    "differential_fairness",
    "group_class_rates",
    "multiclass_findings",
    "pair_permutation_tests",
    "pair_seed",
]
