"""The ranking method's typed details: per protected attribute, every ranking statistic and the
pair tests (what its report view draws; a lossless JSON round trip through
:mod:`fairengine.result_codec`)."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.ranking.statistics import RankingStatistics
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class RankingAttribute:
    """One protected attribute: its ranking statistics (pairs tested: ``pairs_planned`` of
    ``pairs_possible``; the others exceed ``max_pairs``)."""

    attribute: str
    statistics: RankingStatistics
    pairs_planned: int
    pairs_possible: int


@dataclass(frozen=True)
class RankingDetails(MethodDetails):
    """Details of :func:`fairengine.ranking.method.run_ranking_metrics`."""

    attributes: tuple[RankingAttribute, ...]
    n_items: int
    n_lists: int
    relevance: bool
    cutoffs: tuple[str, ...]
    n_permutations: int
    confidence_level: float
