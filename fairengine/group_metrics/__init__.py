"""LiFT's group-metric suite on sufficient statistics (distances, parity, performance and
inequality indices per attribute and their intersection; :mod:`.method` describes it).

* :func:`run_group_metrics` / :class:`GroupMetricsConfig` — the audit method
  (``methods.group_metrics``).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.group_metrics.config import GroupMetricsConfig
    from fairengine.group_metrics.method import METHOD, run_group_metrics

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GroupMetricsConfig": "config",
        "METHOD": "method",
        "run_group_metrics": "method",
    },
)

__all__ = ["METHOD", "GroupMetricsConfig", "run_group_metrics"]
