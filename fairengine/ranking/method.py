"""The ranking method of an audit (``task: ranking``): per protected attribute, each group's
mean position-discounted exposure (Singh & Joachims 2018, §3), its share of the top k with
skew@k and NDKL (Geyik, Ambler & Kenthapadi 2019, §3), precision@k and recall@k when relevance
is given, and studentized within-list permutation tests of the pairwise differences in
exposure and in top-k rates: the statistics are :mod:`fairengine.ranking`'s; this module picks
the pairs (the largest groups first, at most ``max_pairs``) and assembles the result.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.finding_keys import check_unique_keys
from fairengine.group_pairs import pair_seed, planned_pairs, untested_pairs_warning
from fairengine.ranking.config import RankingConfig
from fairengine.ranking.permutation import RankPairTests, pair_permutation_tests
from fairengine.ranking.result import RankingAttribute, RankingDetails
from fairengine.ranking.statistics import ranking_statistics
from fairengine.results import Finding, MethodResult
from fairengine.setting_checks import config_parameters

METHOD = "ranking_metrics"
TITLE = "Ranking fairness (exposure and top-k representation by group)"


def pair_tests(
    dataset: AuditDataset,
    config: RankingConfig,
    attr: str,
    codes: np.ndarray,
    a: int,
    b: int,
    *,
    n_permutations: int,
    seed: np.random.SeedSequence,
) -> RankPairTests:
    """The within-list permutation tests of one pair of groups of ``attr`` (the method's and
    the sequential decisions' draws: :class:`fairengine.ranking.resampler.RankingResampler`)."""
    assert dataset.prediction is not None
    return pair_permutation_tests(
        dataset.prediction,
        codes,
        dataset.groups[attr].categories,
        group_a=a,
        group_b=b,
        lists=dataset.lists,
        k=tuple(config.k),
        exposure=config.exposure_test,
        n_permutations=n_permutations,
        alternative=config.alternative,
        studentize=config.studentize,
        confidence_level=config.confidence_level,
        seed=seed,
        attribute=attr,
        ties=config.ties,
    )


def run_ranking_metrics(
    dataset: AuditDataset, config: RankingConfig, *, seed: int = 0
) -> MethodResult:
    """The ranking audit of ``dataset`` (a ``task="ranking"`` dataset: ``prediction`` holds the
    ranking scores, ``lists`` the list ids, ``relevance`` the optional relevance). Findings:
    :func:`fairengine.ranking.ranking_findings` (``rank_exposure.<attr>.<a>_<b>`` and
    ``rank_topk_rate_<k>.<attr>.<a>_<b>`` tested; null: group labels exchangeable within
    lists), the others estimates."""
    start = time.perf_counter()
    if dataset.task != "ranking" or dataset.prediction is None:
        raise DataContractError(
            f"{METHOD} audits rankings: build the dataset with task='ranking' and a score column"
        )
    attributes: list[RankingAttribute] = []
    findings: list[Finding] = []
    warnings: list[str] = []
    stream = 0
    n_lists = 1
    for attr, enc in dataset.groups.items():
        codes = enc.codes.astype(np.intp)
        stats = ranking_statistics(
            dataset.prediction,
            codes,
            enc.categories,
            lists=dataset.lists,
            relevance=dataset.relevance,
            k=tuple(config.k),
            threshold=config.relevance_threshold,
            n_permutations=0,
            ties=config.ties,
            attribute=attr,
        )
        n_lists = stats.n_lists
        possible = enc.n_groups * (enc.n_groups - 1) // 2
        pairs = []
        for a, b in planned_pairs(enc.sizes(), config.max_pairs):
            pairs.append(
                pair_tests(
                    dataset,
                    config,
                    attr,
                    codes,
                    a,
                    b,
                    n_permutations=config.n_permutations,
                    seed=pair_seed(seed, stream),
                )
            )
            stream += 1
        warning = untested_pairs_warning(attr, len(pairs), enc.n_groups, METHOD)
        warnings += [warning] if warning else []
        stats = dataclasses.replace(stats, pairs=tuple(pairs))
        attributes.append(RankingAttribute(attr, stats, len(pairs), possible))
        findings += stats.findings()
    check_unique_keys(findings)
    cutoffs = attributes[0].statistics.topk if attributes else ()
    details = RankingDetails(
        attributes=tuple(attributes),
        n_items=dataset.n_rows,
        n_lists=n_lists,
        relevance=dataset.relevance is not None,
        cutoffs=tuple(t.cutoff.label for t in cutoffs),
        n_permutations=config.n_permutations,
        confidence_level=config.confidence_level,
    )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters=config_parameters(config),
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=round(time.perf_counter() - start, 4),
    )
