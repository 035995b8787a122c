"""Demographic parity and equalized odds gaps for every pair of groups, with uncertainty.

* :func:`group_parity` / :class:`GroupParityConfig` — the audit method
  (``methods.group_parity``; the statistics are described in :mod:`.method`), its details
  :class:`GroupParityDetails` (:mod:`.result`).
* :func:`group_rates`, :func:`pair_numbers` — per-group rates with intervals and the pairwise
  gaps and ratios, from the sufficient statistics of :mod:`fairengine.counts` (also used by the
  LiFT suite, :mod:`fairengine.group_metrics`).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.group_parity.config import GROUP_PARITY_EXACT, GroupParityConfig
    from fairengine.group_parity.method import (
        METHOD,
        group_parity,
        group_parity_from_counts,
        metric_token,
    )
    from fairengine.group_parity.rates import RATES, group_rates, pair_numbers
    from fairengine.group_parity.result import GroupParityDetails

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GROUP_PARITY_EXACT": "config",
        "GroupParityConfig": "config",
        "METHOD": "method",
        "group_parity": "method",
        "group_parity_from_counts": "method",
        "metric_token": "method",
        "RATES": "rates",
        "group_rates": "rates",
        "pair_numbers": "rates",
        "GroupParityDetails": "result",
    },
)

__all__ = [
    "GROUP_PARITY_EXACT",
    "METHOD",
    "RATES",
    "GroupParityConfig",
    "GroupParityDetails",
    "group_parity",
    "group_parity_from_counts",
    "group_rates",
    "metric_token",
    "pair_numbers",
]
