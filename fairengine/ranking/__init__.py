"""Fairness statistics of rankings (issue 22), as pure functions on numpy arrays.

Inputs everywhere: a ``score`` per item (higher = ranked higher), optional list/query ids
``lists`` (rankings are within lists; default one list), optional ``relevance`` labels (0/1 or
graded), integer group codes 0..G−1 with their ``categories`` (:mod:`.inputs`, which also states
the ties policy). Top-k cutoffs ``k`` are item counts (int) or fractions of each list (float).

* :func:`group_exposure` — mean position-discounted exposure 1/log2(1 + rank) per group, pairwise
  difference and ratio, and with relevance the disparate treatment ratio (Singh & Joachims 2018;
  :mod:`.exposure`).
* :func:`topk_shares` — each group's share of the top k, skew@k, MinSkew@k, MaxSkew@k (Geyik,
  Ambler & Kenthapadi 2019; :mod:`.topk`); :func:`ndkl` — normalized discounted KL divergence
  (:mod:`.discounted_kl`).
* :func:`precision_recall_at_k` — precision@k and recall@k per group (:mod:`.precision`).
* :func:`pair_permutation_tests`, :func:`all_pair_tests` — studentized permutation tests of the
  exposure difference and of top-k rate differences, permuting group labels within lists
  (:mod:`.permutation`; seeds by :func:`pair_seed`).
* :func:`ranking_statistics` — all of the above for one attribute (:mod:`.statistics`);
  :func:`ranking_findings` — their :class:`~fairengine.results.Finding` list (:mod:`.findings`).

Every result is a frozen dataclass with a lossless ``to_dict``/``from_dict``.
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.ranking.discounted_kl import NDKL, ndkl
    from fairengine.ranking.exposure import (
        ExposurePair,
        GroupExposure,
        GroupExposures,
        group_exposure,
    )
    from fairengine.ranking.findings import ranking_findings
    from fairengine.ranking.inputs import (
        TIES,
        Cutoff,
        RankingInputs,
        check_inputs,
        position_exposure,
        resolve_cutoff,
    )
    from fairengine.ranking.permutation import (
        RankPairTests,
        RankTest,
        all_pair_tests,
        pair_permutation_tests,
        pair_seed,
    )
    from fairengine.ranking.precision import GroupPrecision, PrecisionAtK, precision_recall_at_k
    from fairengine.ranking.statistics import RankingStatistics, ranking_statistics
    from fairengine.ranking.topk import GroupShare, TopKShares, topk_shares

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ExposurePair": "exposure",
        "GroupExposure": "exposure",
        "GroupExposures": "exposure",
        "group_exposure": "exposure",
        "ranking_findings": "findings",
        "TIES": "inputs",
        "Cutoff": "inputs",
        "RankingInputs": "inputs",
        "check_inputs": "inputs",
        "position_exposure": "inputs",
        "resolve_cutoff": "inputs",
        "NDKL": "discounted_kl",
        "ndkl": "discounted_kl",
        "RankPairTests": "permutation",
        "RankTest": "permutation",
        "all_pair_tests": "permutation",
        "pair_permutation_tests": "permutation",
        "pair_seed": "permutation",
        "GroupPrecision": "precision",
        "PrecisionAtK": "precision",
        "precision_recall_at_k": "precision",
        "RankingStatistics": "statistics",
        "ranking_statistics": "statistics",
        "GroupShare": "topk",
        "TopKShares": "topk",
        "topk_shares": "topk",
    },
)

__all__ = [
    "NDKL",
    "TIES",
    "Cutoff",
    "ExposurePair",
    "GroupExposure",
    "GroupExposures",
    "GroupPrecision",
    "GroupShare",
    "PrecisionAtK",
    "RankPairTests",
    "RankTest",
    "RankingInputs",
    "RankingStatistics",
    "TopKShares",
    "all_pair_tests",
    "check_inputs",
    "group_exposure",
    "ndkl",
    "pair_permutation_tests",
    "pair_seed",
    "position_exposure",
    "precision_recall_at_k",
    "ranking_findings",
    "ranking_statistics",
    "resolve_cutoff",
    "topk_shares",
]
