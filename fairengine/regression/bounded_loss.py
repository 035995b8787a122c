"""Bounded group loss: is each group's expected loss below a bound ζ?

Agarwal, Dudík & Wu (2019, "Fair regression: quantitative definitions and reduction-based
algorithms", ICML, §2, Definition "bounded group loss") call a predictor f fair at level ζ when
for every group a

    L_a(f) = E[ℓ(Y, f(X)) | A = a] ≤ ζ,

with ℓ the squared loss (y − ŷ)² or the absolute loss |y − ŷ| (their §2 also allows the
logistic loss for y ∈ [0, 1]). The audit estimates L_a by the (weighted) group mean of ℓ and
reports, at confidence level 1 − α:

* the one-sided **upper** bound U_a (with probability ≈ 1 − α, L_a ≤ U_a): U_a ≤ ζ certifies the
  bound for that group;
* the one-sided **lower** bound L_a⁻ and the p-value of H0: L_a ≤ ζ against L_a > ζ (p ≤ α
  exactly when L_a⁻ > ζ): a rejection is evidence that the group's loss exceeds the bound.

Both are Hall's (1992) skewness-corrected t bounds of :mod:`.mean_intervals` (losses are
right-skewed: the plain t bound under-covers, see tests/test_regression_intervals.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.json_result import JsonResult
from fairengine.regression.inputs import check_inputs
from fairengine.regression.mean_intervals import hall_bounds, hall_pvalue_above, mean_moments

#: Losses ℓ(y, ŷ) of the bounded-group-loss check.
LOSSES: tuple[str, ...] = ("squared", "absolute")


@dataclass(frozen=True)
class GroupLoss(JsonResult):
    """One group's mean loss ``mean_loss`` (se ``se``), its one-sided ``lower``/``upper``
    bounds at the result's confidence level, and ``pvalue`` of H0: loss ≤ bound."""

    group: str
    n: int
    mean_loss: float
    se: float
    lower: float
    upper: float
    pvalue: float

    def certified(self, bound: float) -> bool:
        """Whether the upper bound is at most ``bound``."""
        return self.upper <= bound


@dataclass(frozen=True)
class BoundedGroupLoss(JsonResult):
    """Bounded group loss of one attribute: ``loss`` (``squared``/``absolute``), the bound ζ
    (``bound``), the one-sided ``confidence_level`` and every group's :class:`GroupLoss`."""

    attribute: str
    loss: str
    bound: float
    confidence_level: float
    weighted: bool
    groups: tuple[GroupLoss, ...]

    @property
    def worst(self) -> GroupLoss:
        """The group with the largest mean loss (the constraint that binds)."""
        return max(self.groups, key=lambda g: g.mean_loss)


def bounded_group_loss(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    *,
    bound: float,
    loss: str = "squared",
    weights: object | None = None,
    confidence_level: float = 0.95,
    attribute: str = "group",
) -> BoundedGroupLoss:
    """Per-group mean loss against ``bound`` ζ with one-sided bounds and the test of
    H0: L_a ≤ ζ (module docstring)."""
    if loss not in LOSSES:
        raise DataContractError(f"loss must be one of {list(LOSSES)}, got {loss!r}")
    if not (isinstance(bound, int | float) and np.isfinite(bound) and bound >= 0):
        raise DataContractError(f"bound must be a finite number >= 0, got {bound!r}")
    if not 0.5 < confidence_level < 1:
        raise DataContractError(f"confidence_level must lie in (0.5, 1), got {confidence_level}")
    data = check_inputs(y, prediction, groups, categories, weights)
    e = data.y - data.prediction
    values = e * e if loss == "squared" else np.abs(e)
    out = []
    for code, name in enumerate(data.categories):
        rows = data.rows(code)
        mm = mean_moments(values[rows], None if data.weights is None else data.weights[rows])
        lower, upper = hall_bounds(mm, confidence_level)
        out.append(
            GroupLoss(name, mm.n, mm.m, mm.se, lower, upper, hall_pvalue_above(mm, float(bound)))
        )
    return BoundedGroupLoss(
        attribute, loss, float(bound), confidence_level, data.weights is not None, tuple(out)
    )
