"""Normalized discounted KL divergence, NDKL (Geyik, Ambler & Kenthapadi 2019, §3.1, eq. (3)).

For a list τ of n items, D_{τ^i} the distribution of the groups among its top i items and D the
desired distribution (here the groups' distribution over the whole list),

    NDKL(τ) = (1/Z) Σ_{i=1}^{n} (1/log2(i + 1)) · d_KL(D_{τ^i} ‖ D),
    Z = Σ_{i=1}^{n} 1/log2(i + 1),
    d_KL(P ‖ Q) = Σ_g P_g ln(P_g / Q_g)      (0 · ln 0 = 0; natural logarithm),

so NDKL ≥ 0, and 0 only when every prefix has the list's group distribution. Over several lists
the value reported is the unweighted mean of the lists' NDKL (each query counts once), with the
smallest and largest list value. Vectorized: one cumulative sum of one-hot group indicators
over the items in (list, rank) order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.json_result import JsonResult
from fairengine.ranking.inputs import RankingInputs, check_inputs


@dataclass(frozen=True)
class NDKL(JsonResult):
    """NDKL of ``attribute``: the mean over ``n_lists`` lists and its range over lists."""

    attribute: str
    value: float
    n_lists: int
    min_list: float
    max_list: float


def list_ndkl(data: RankingInputs) -> np.ndarray:
    """NDKL of every list (float64, one per list)."""
    n_groups = len(data.categories)
    order = np.lexsort((data.ranks, data.lists))
    ls, codes, ranks = data.lists[order], data.codes[order], data.ranks[order]
    onehot = np.zeros((ls.size, n_groups))
    onehot[np.arange(ls.size), codes] = 1.0
    cum = np.cumsum(onehot, axis=0)
    starts = np.r_[0, np.cumsum(data.list_sizes)[:-1]]
    before = np.vstack([np.zeros((1, n_groups)), cum[starts[1:] - 1]])  # counts before each list
    prefix = cum - before[ls]
    p = prefix / ranks[:, None]
    totals = prefix[starts + data.list_sizes - 1]
    q = (totals / data.list_sizes[:, None])[ls]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p / q), 0.0)
    kl = terms.sum(axis=1)
    disc = 1.0 / np.log2(1.0 + ranks)
    num = np.add.reduceat(disc * kl, starts)
    z = np.add.reduceat(disc, starts)
    return np.asarray(num / z)


def ndkl_at(data: RankingInputs, attribute: str = "group") -> NDKL:
    """:func:`ndkl` on checked inputs."""
    values = list_ndkl(data)
    return NDKL(
        attribute, float(values.mean()), data.n_lists, float(values.min()), float(values.max())
    )


def ndkl(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    lists: object | None = None,
    ties: str = "order",
    attribute: str = "group",
) -> NDKL:
    """Normalized discounted KL divergence of the groups' distribution over the prefixes of each
    list (module docstring)."""
    data = check_inputs(scores, groups, categories, lists=lists, ties=ties)
    return ndkl_at(data, attribute)
