"""Representation in the top k: shares, skew@k, MinSkew@k and MaxSkew@k (Geyik et al. 2019).

Geyik, Ambler & Kenthapadi ("Fairness-aware ranking in search & recommendation systems with
application to LinkedIn talent search", KDD 2019, §3.1) compare the proportion of group a_i in
the top k of a ranking τ with a desired proportion p_{q,a_i}:

    Skew_{a_i}@k(τ) = ln( p_{τ^k, a_i} / p_{q, a_i} ),
    MinSkew@k = min_i Skew_{a_i}@k,      MaxSkew@k = max_i Skew_{a_i}@k.

Here the top k of list l holds its k_l best-ranked items (:class:`~.inputs.Cutoff`: a count, or
⌈f · n_l⌉ for a fraction f), and over L lists the shares are pooled:

    share_top(g)      = Σ_l #{i ∈ g : r_i ≤ k_l} / Σ_l k_l,
    share_expected(g) = Σ_l k_l · n_{l,g}/n_l / Σ_l k_l,

so the desired proportion is the group's share of its lists (the population distribution of
Geyik et al.), weighted by the top-k sizes: exactly the expected top-k share when the items of
each list are ordered at random. With one list it is n_g/N. A group absent from the top k has
skew −∞; skew 0 means proportional representation. The permutation test of the difference in
top-k rates #{i ∈ g : r_i ≤ k_l}/n_g between two groups (equal rates ⇔ equal skews in one list)
is in :mod:`.permutation`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.json_result import JsonResult
from fairengine.ranking.inputs import Cutoff, RankingInputs, check_inputs, resolve_cutoffs


@dataclass(frozen=True)
class GroupShare(JsonResult):
    """One group in the top k: its items there (``n_top`` of ``n``), ``share_top``,
    ``share_expected`` and ``skew`` = ln(share_top/share_expected); ``rate`` = n_top/n."""

    group: str
    code: int
    n: int
    n_top: int
    share_top: float
    share_expected: float
    skew: float
    rate: float


@dataclass(frozen=True)
class TopKShares(JsonResult):
    """Top-k representation of every group of ``attribute`` at ``cutoff`` (``n_top`` items in
    the top k of ``n_lists`` lists), with MinSkew@k and MaxSkew@k and the groups attaining them."""

    attribute: str
    cutoff: Cutoff
    n_lists: int
    n_top: int
    groups: tuple[GroupShare, ...]
    min_skew: float
    max_skew: float
    min_group: str
    max_group: str

    def group(self, name: str) -> GroupShare:
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; have {[g.group for g in self.groups]}")


def in_top(data: RankingInputs, cutoff: Cutoff) -> np.ndarray:
    """Boolean per item: r_i ≤ k_l of its list."""
    return np.asarray(data.ranks <= cutoff.per_list(data.list_sizes)[data.lists])


def shares_at(data: RankingInputs, cutoff: Cutoff, attribute: str = "group") -> TopKShares:
    """:func:`topk_shares` on checked inputs at one cutoff."""
    n_groups = len(data.categories)
    k = cutoff.per_list(data.list_sizes).astype(np.float64)
    top = in_top(data, cutoff)
    n_top_total = float(k.sum())
    counts = np.bincount(data.codes, minlength=n_groups)
    n_top = np.bincount(data.codes[top], minlength=n_groups)
    per_list = np.zeros((data.n_lists, n_groups))
    np.add.at(per_list, (data.lists, data.codes), 1.0)
    expected = (k[:, None] * per_list / data.list_sizes[:, None]).sum(axis=0) / n_top_total
    groups = []
    for g, cat in enumerate(data.categories):
        share = n_top[g] / n_top_total
        skew = math.log(share / expected[g]) if share > 0 else -math.inf
        groups.append(
            GroupShare(
                cat,
                g,
                int(counts[g]),
                int(n_top[g]),
                float(share),
                float(expected[g]),
                skew,
                float(n_top[g] / counts[g]),
            )
        )
    skews = [g.skew for g in groups]
    lo, hi = int(np.argmin(skews)), int(np.argmax(skews))
    return TopKShares(
        attribute,
        cutoff,
        data.n_lists,
        int(n_top_total),
        tuple(groups),
        skews[lo],
        skews[hi],
        data.categories[lo],
        data.categories[hi],
    )


def topk_shares(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    k: object = (0.1, 0.2),
    lists: object | None = None,
    ties: str = "order",
    attribute: str = "group",
) -> tuple[TopKShares, ...]:
    """Top-k shares, skew@k, MinSkew@k and MaxSkew@k (module docstring) at every cutoff of
    ``k`` (an int: items per list; a float in (0, 1]: fraction of each list; or a sequence)."""
    data = check_inputs(scores, groups, categories, lists=lists, ties=ties)
    cuts = resolve_cutoffs(k, data.list_sizes, list_ids=data.list_ids)
    return tuple(shares_at(data, c, attribute) for c in cuts)
