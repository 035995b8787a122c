"""Every ranking statistic of one protected attribute in one call, checked and ranked once.

:func:`ranking_statistics` computes the group exposure (:mod:`.exposure`), the top-k shares and
skews (:mod:`.topk`) and NDKL (:mod:`.discounted_kl`); with relevance, precision@k and recall@k
(:mod:`.precision`); with ``n_permutations`` > 0, the within-list permutation tests of every
pair of groups (:mod:`.permutation`, pair i seeded by ``pair_seed(seed, i)``). Its
:meth:`RankingStatistics.findings` is :func:`.findings.ranking_findings` of all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairengine.finding_keys import check_unique_keys
from fairengine.json_result import JsonResult
from fairengine.ranking.discounted_kl import NDKL, ndkl_at
from fairengine.ranking.exposure import GroupExposures, group_exposure
from fairengine.ranking.findings import ranking_findings
from fairengine.ranking.inputs import check_inputs, resolve_cutoffs
from fairengine.ranking.permutation import RankPairTests, all_pair_tests
from fairengine.ranking.precision import PrecisionAtK, precision_at
from fairengine.ranking.topk import TopKShares, shares_at
from fairengine.results import Finding


@dataclass(frozen=True)
class RankingStatistics(JsonResult):
    """The ranking statistics of ``attribute`` (module docstring); ``precision`` is empty
    without relevance, ``pairs`` without permutation tests."""

    attribute: str
    n_items: int
    n_lists: int
    exposure: GroupExposures
    topk: tuple[TopKShares, ...]
    ndkl: NDKL
    precision: tuple[PrecisionAtK, ...]
    pairs: tuple[RankPairTests, ...]

    def findings(self) -> list[Finding]:
        """:func:`~fairengine.ranking.findings.ranking_findings` of every statistic."""
        out = ranking_findings(self.exposure, self.topk, self.ndkl, self.precision, self.pairs)
        check_unique_keys(out)
        return out


def ranking_statistics(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    lists: object | None = None,
    relevance: object | None = None,
    k: object = (0.1, 0.2),
    threshold: float | None = None,
    n_permutations: int = 1999,
    seed: int = 0,
    ties: str = "order",
    attribute: str = "group",
    **test_options: object,
) -> RankingStatistics:
    """All ranking statistics of one attribute (module docstring); ``test_options`` go to
    :func:`~fairengine.ranking.permutation.pair_permutation_tests` (``alternative``,
    ``studentize``, ``confidence_level``)."""
    data = check_inputs(scores, groups, categories, lists=lists, relevance=relevance, ties=ties)
    cuts = resolve_cutoffs(k, data.list_sizes, list_ids=data.list_ids)
    exposure = group_exposure(
        scores,
        groups,
        categories,
        lists=lists,
        relevance=relevance,
        ties=ties,
        attribute=attribute,
    )
    topk = tuple(shares_at(data, c, attribute) for c in cuts)
    precision = (
        ()
        if data.relevance is None
        else tuple(precision_at(data, c, threshold, attribute) for c in cuts)
    )
    pairs = (
        all_pair_tests(
            scores,
            groups,
            categories,
            lists=lists,
            k=cuts,
            n_permutations=n_permutations,
            seed=seed,
            ties=ties,
            attribute=attribute,
            **test_options,
        )
        if n_permutations > 0 and len(data.categories) > 1
        else ()
    )
    return RankingStatistics(
        attribute,
        int(data.scores.size),
        data.n_lists,
        exposure,
        topk,
        ndkl_at(data, attribute),
        precision,
        pairs,
    )
