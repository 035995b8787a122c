"""precision@k and recall@k per group, when relevance labels are given.

An item is relevant when its relevance u_i > 0 (0/1 labels: u_i = 1), or u_i ≥ ``threshold``
when one is given (graded labels). With T the items in the top k of their lists (r_i ≤ k_l,
:class:`~.inputs.Cutoff`) and R the relevant items, for group g, pooled over lists,

    precision@k(g) = |g ∩ T ∩ R| / |g ∩ T|      (how many of the group's shown items are relevant),
    recall@k(g)    = |g ∩ T ∩ R| / |g ∩ R|      (how many of the group's relevant items are shown),

NaN when the denominator is 0; and the same over all items. These are the per-group ranking
metrics of LinkedIn's LiFT (Vasudevan & Kenthapadi 2020, "LiFT: a scalable framework for
measuring fairness in ML applications", CIKM 2020, report ranking metrics such as
precision@k by protected group): a lower precision means the ranking shows the group's less
relevant items; a lower recall means it hides the group's relevant ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.json_result import JsonResult
from fairengine.ranking.inputs import Cutoff, RankingInputs, check_inputs, resolve_cutoffs
from fairengine.ranking.topk import in_top


@dataclass(frozen=True)
class GroupPrecision(JsonResult):
    """One group's items in the top k (``n_top``), relevant ones there (``n_relevant_top``),
    relevant items in all (``n_relevant``), precision@k and recall@k."""

    group: str
    code: int
    n_top: int
    n_relevant_top: int
    n_relevant: int
    precision: float
    recall: float


@dataclass(frozen=True)
class PrecisionAtK(JsonResult):
    """precision@k and recall@k of every group of ``attribute`` and of all items
    (``overall``) at ``cutoff``; ``threshold`` None: relevant means relevance > 0."""

    attribute: str
    cutoff: Cutoff
    threshold: float | None
    groups: tuple[GroupPrecision, ...]
    overall: GroupPrecision

    def group(self, name: str) -> GroupPrecision:
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; have {[g.group for g in self.groups]}")


def _div(a: int, b: int) -> float:
    return a / b if b else float("nan")


def _row(name: str, code: int, top: np.ndarray, rel: np.ndarray) -> GroupPrecision:
    n_top, n_rt, n_r = int(top.sum()), int((top & rel).sum()), int(rel.sum())
    return GroupPrecision(name, code, n_top, n_rt, n_r, _div(n_rt, n_top), _div(n_rt, n_r))


def relevant_items(data: RankingInputs, threshold: float | None = None) -> np.ndarray:
    """Boolean per item: relevant (module docstring)."""
    if data.relevance is None:
        raise DataContractError("relevance is required for precision@k and recall@k")
    if threshold is None:
        return np.asarray(data.relevance > 0)
    return np.asarray(data.relevance >= threshold)


def precision_at(
    data: RankingInputs, cutoff: Cutoff, threshold: float | None = None, attribute: str = "group"
) -> PrecisionAtK:
    """:func:`precision_recall_at_k` on checked inputs at one cutoff."""
    rel = relevant_items(data, threshold)
    top = in_top(data, cutoff)
    rows = tuple(
        _row(cat, g, top[data.codes == g], rel[data.codes == g])
        for g, cat in enumerate(data.categories)
    )
    return PrecisionAtK(attribute, cutoff, threshold, rows, _row("all", -1, top, rel))


def precision_recall_at_k(
    scores: object,
    groups: object,
    categories: Sequence[object],
    relevance: object,
    *,
    k: object = (0.1, 0.2),
    lists: object | None = None,
    threshold: float | None = None,
    ties: str = "order",
    attribute: str = "group",
) -> tuple[PrecisionAtK, ...]:
    """precision@k and recall@k per group at every cutoff of ``k`` (module docstring)."""
    if relevance is None:
        raise DataContractError("relevance is required for precision@k and recall@k")
    if threshold is not None and not np.isfinite(threshold):
        raise DataContractError(f"threshold must be a finite number, got {threshold!r}")
    data = check_inputs(scores, groups, categories, lists=lists, relevance=relevance, ties=ties)
    cuts = resolve_cutoffs(k, data.list_sizes, list_ids=data.list_ids)
    return tuple(precision_at(data, c, threshold, attribute) for c in cuts)
