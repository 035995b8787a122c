"""Group exposure with position discounting (Singh & Joachims 2018).

Singh & Joachims ("Fairness of exposure in rankings", KDD 2018, §3–4) measure the attention a
ranking gives an item by its position bias v_r; with the DCG discount

    Exposure(i) = v(r_i) = 1 / log2(1 + r_i)        (r_i: the item's 1-based rank in its list)

and the exposure of group G is the mean over its items, pooled over all lists,

    Exposure(G) = (1/|G|) Σ_{i ∈ G} v(r_i).

For two groups A, B this module reports the difference Exposure(A) − Exposure(B) and the
ratio Exposure(A)/Exposure(B) (demographic parity of exposure, §4.1: ratio 1). With relevance
labels u_i, the mean utility U(G) = (1/|G|) Σ_{i∈G} u_i gives exposure per unit of relevance
Exposure(G)/U(G), and the **disparate treatment ratio** (§4.2, the ratio their constraint sets
to 1):

    DTR(A, B) = (Exposure(A)/U(A)) / (Exposure(B)/U(B)),

undefined (NaN) when a group's mean relevance is 0. The studentized permutation test of the
exposure difference is in :mod:`.permutation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.json_result import JsonResult
from fairengine.ranking.inputs import check_inputs


@dataclass(frozen=True)
class GroupExposure(JsonResult):
    """One group's item count, mean exposure per item and, with relevance, mean relevance and
    exposure per unit of mean relevance (NaN when the mean relevance is 0)."""

    group: str
    code: int
    n: int
    mean_exposure: float
    mean_relevance: float | None = None
    exposure_per_relevance: float | None = None


@dataclass(frozen=True)
class ExposurePair(JsonResult):
    """Exposure(A) − Exposure(B), Exposure(A)/Exposure(B) and, with relevance, the disparate
    treatment ratio (module docstring)."""

    group_a: str
    group_b: str
    difference: float
    ratio: float
    treatment_ratio: float | None = None


@dataclass(frozen=True)
class GroupExposures(JsonResult):
    """Exposure of every group of ``attribute`` and of every pair a < b (codes), over
    ``n_lists`` lists."""

    attribute: str
    n_lists: int
    with_relevance: bool
    groups: tuple[GroupExposure, ...]
    pairs: tuple[ExposurePair, ...]

    def group(self, name: str) -> GroupExposure:
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; have {[g.group for g in self.groups]}")

    def pair(self, a: str, b: str) -> ExposurePair:
        for p in self.pairs:
            if (p.group_a, p.group_b) == (a, b):
                return p
        raise KeyError(f"no pair {a!r}, {b!r}; have {[(p.group_a, p.group_b) for p in self.pairs]}")


def _ratio(x: float, y: float) -> float:
    if y == 0:
        return float("nan") if x == 0 else float("inf")
    return x / y


def group_exposure(
    scores: object,
    groups: object,
    categories: Sequence[object],
    *,
    lists: object | None = None,
    relevance: object | None = None,
    ties: str = "order",
    attribute: str = "group",
) -> GroupExposures:
    """Mean exposure per item of every group and the pairwise difference, ratio and (with
    ``relevance``) disparate treatment ratio (module docstring)."""
    data = check_inputs(scores, groups, categories, lists=lists, relevance=relevance, ties=ties)
    v = data.exposure()
    n_groups = len(data.categories)
    counts = np.bincount(data.codes, minlength=n_groups)
    mean_v = np.bincount(data.codes, weights=v, minlength=n_groups) / counts
    mean_u = (
        None
        if data.relevance is None
        else np.bincount(data.codes, weights=data.relevance, minlength=n_groups) / counts
    )
    per_u = (
        None
        if mean_u is None
        else [_ratio(float(e), float(u)) for e, u in zip(mean_v, mean_u, strict=True)]
    )
    out = tuple(
        GroupExposure(
            cat,
            g,
            int(counts[g]),
            float(mean_v[g]),
            None if mean_u is None else float(mean_u[g]),
            None if per_u is None else per_u[g],
        )
        for g, cat in enumerate(data.categories)
    )
    pairs = tuple(
        ExposurePair(
            data.categories[a],
            data.categories[b],
            float(mean_v[a] - mean_v[b]),
            _ratio(float(mean_v[a]), float(mean_v[b])),
            None if per_u is None else _ratio(per_u[a], per_u[b]),
        )
        for a in range(n_groups)
        for b in range(a + 1, n_groups)
    )
    return GroupExposures(attribute, data.n_lists, data.relevance is not None, out, pairs)
