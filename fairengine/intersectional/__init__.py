"""Intersectional fairness: ε-differential fairness over all intersections of protected attributes.

Audit half of Morina, Oliinyk, Waton, Marušić & Georgatzis, "Auditing and achieving
intersectional fairness in classification problems" (arXiv:1911.01468), on Foulds, Islam, Keya &
Pan's differential fairness (ICDE 2020). Implementation spec: notes ``intersectional.md`` §4.

Public API:

* :func:`table_from_arrays`, :class:`IntersectionTable` — the count table C[s, y, ŷ] (one pass).
* :func:`differential_fairness`, :func:`epsilon_from_counts`, :func:`pairwise_epsilon`,
  :func:`elift_epsilon`, :func:`rate_counts`, :func:`smoothed_rates` — metrics of a count table.
* :func:`bootstrap_epsilon`, :func:`posterior_epsilon`, :func:`bootstrap_statistics`,
  :func:`posterior_epsilons`, :class:`EpsilonDistribution` — the estimators.
* :class:`IntersectionalConfig`, :func:`run_intersectional`, :func:`intersection_table` — the
  audit method (``methods.intersectional``).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.intersectional.cells import (
        IntersectionTable,
        auditable_mask,
        check_levels,
        collapse_counts,
        support_status,
        table_from_arrays,
    )
    from fairengine.intersectional.config import IntersectionalConfig
    from fairengine.intersectional.estimators import (
        EpsilonDistribution,
        bootstrap_counts,
        bootstrap_epsilon,
        bootstrap_statistics,
        posterior_epsilon,
        posterior_epsilons,
    )
    from fairengine.intersectional.method import (
        intersection_table,
        run_intersectional,
        run_intersectional_from_counts,
    )
    from fairengine.intersectional.metrics import (
        DATA_METRICS,
        METRICS,
        MODEL_METRICS,
        DifferentialFairness,
        differential_fairness,
        elift_epsilon,
        epsilon_from_counts,
        overall_rate,
        pairwise_epsilon,
        rate_counts,
        smoothed_rates,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "IntersectionTable": "cells",
        "auditable_mask": "cells",
        "check_levels": "cells",
        "collapse_counts": "cells",
        "support_status": "cells",
        "table_from_arrays": "cells",
        "IntersectionalConfig": "config",
        "EpsilonDistribution": "estimators",
        "bootstrap_counts": "estimators",
        "bootstrap_epsilon": "estimators",
        "bootstrap_statistics": "estimators",
        "posterior_epsilon": "estimators",
        "posterior_epsilons": "estimators",
        "intersection_table": "method",
        "run_intersectional": "method",
        "run_intersectional_from_counts": "method",
        "DATA_METRICS": "metrics",
        "METRICS": "metrics",
        "MODEL_METRICS": "metrics",
        "DifferentialFairness": "metrics",
        "differential_fairness": "metrics",
        "elift_epsilon": "metrics",
        "epsilon_from_counts": "metrics",
        "overall_rate": "metrics",
        "pairwise_epsilon": "metrics",
        "rate_counts": "metrics",
        "smoothed_rates": "metrics",
    },
)

__all__ = [
    "DATA_METRICS",
    "METRICS",
    "MODEL_METRICS",
    "DifferentialFairness",
    "EpsilonDistribution",
    "IntersectionTable",
    "IntersectionalConfig",
    "auditable_mask",
    "bootstrap_counts",
    "bootstrap_epsilon",
    "bootstrap_statistics",
    "check_levels",
    "collapse_counts",
    "differential_fairness",
    "elift_epsilon",
    "epsilon_from_counts",
    "intersection_table",
    "overall_rate",
    "pairwise_epsilon",
    "posterior_epsilon",
    "posterior_epsilons",
    "rate_counts",
    "run_intersectional",
    "run_intersectional_from_counts",
    "smoothed_rates",
    "support_status",
    "table_from_arrays",
]
