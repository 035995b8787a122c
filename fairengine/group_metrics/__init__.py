"""LiFT's group-metric suite on sufficient statistics: distances, parity, performance and
inequality indices per protected attribute and their intersection (:mod:`.method` describes it).

* :func:`run_group_metrics` / :class:`GroupMetricsConfig` — the audit method
  (``methods.group_metrics``), its details :class:`GroupMetricsDetails` (:mod:`.result`).
* What it computes per encoding (:mod:`.encoding`): rates and pairs (:mod:`.rates`), distances
  from the reference (:mod:`.distances`), performance and AUC (:mod:`.performance`), and the
  benefit vectors' inequality indices (:mod:`.benefits`).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.group_metrics.config import GroupMetricsConfig
    from fairengine.group_metrics.method import (
        METHOD,
        run_group_metrics,
        run_group_metrics_from_counts,
    )
    from fairengine.group_metrics.result import GroupMetricsDetails

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GroupMetricsConfig": "config",
        "METHOD": "method",
        "run_group_metrics": "method",
        "run_group_metrics_from_counts": "method",
        "GroupMetricsDetails": "result",
    },
)

__all__ = [
    "METHOD",
    "GroupMetricsConfig",
    "GroupMetricsDetails",
    "run_group_metrics",
    "run_group_metrics_from_counts",
]
