"""Per-group summaries of a regression model, each with a confidence interval.

For group g with rows i ∈ g (weights w_i, 1 when unweighted) and residual e_i = y_i − ŷ_i:

=====================  ================================  ==============================
quantity               estimate                          interval
=====================  ================================  ==============================
``mean_prediction``    Σ w ŷ / Σ w                       t
``mean_target``        Σ w y / Σ w                       t
``mean_residual``      Σ w e / Σ w   (bias; > 0: under-  t
                       prediction)
``mae``                Σ w |e| / Σ w                     Hall's transformed t
``mse``                Σ w e² / Σ w                      Hall's transformed t
``rmse``               √MSE                              √ of the MSE interval's ends
=====================  ================================  ==============================

The intervals and standard errors are those of :mod:`.mean_intervals` (linearisation variance
with Kish's effective size for weights; Hall 1992 for the skewed error means). The RMSE's se is
the delta method se(MSE)/(2·RMSE). With unit weights the estimates are exactly those of
``fairlearn.metrics.MetricFrame`` with ``mean_absolute_error``, ``mean_squared_error`` and the
mean prediction (tests/test_regression_summaries.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.json_result import JsonResult
from fairengine.regression.inputs import check_inputs
from fairengine.regression.mean_intervals import (
    MeanMoments,
    hall_interval,
    mean_moments,
    t_interval,
)
from fairengine.results import Interval

#: The summary quantities, in table order.
SUMMARY_QUANTITIES: tuple[str, ...] = (
    "mean_prediction",
    "mean_target",
    "mean_residual",
    "mae",
    "mse",
    "rmse",
)


@dataclass(frozen=True)
class Estimate(JsonResult):
    """A point estimate with its standard error and confidence interval."""

    value: float
    se: float
    interval: Interval


@dataclass(frozen=True)
class GroupSummary(JsonResult):
    """One group's row count ``n`` (rows of positive weight when weighted), total weight, Kish
    effective size and the six estimates."""

    group: str
    code: int
    n: int
    weight_total: float
    n_effective: float
    mean_prediction: Estimate
    mean_target: Estimate
    mean_residual: Estimate
    mae: Estimate
    mse: Estimate
    rmse: Estimate

    def estimate(self, quantity: str) -> Estimate:
        """The estimate named ``quantity`` (one of :data:`SUMMARY_QUANTITIES`)."""
        if quantity not in SUMMARY_QUANTITIES:
            raise KeyError(f"unknown quantity {quantity!r}; have {list(SUMMARY_QUANTITIES)}")
        value: Estimate = getattr(self, quantity)
        return value


@dataclass(frozen=True)
class GroupSummaries(JsonResult):
    """The summaries of every group of one attribute (groups in category order)."""

    attribute: str
    weighted: bool
    confidence_level: float
    groups: tuple[GroupSummary, ...]

    def group(self, name: str) -> GroupSummary:
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; have {[g.group for g in self.groups]}")


def _estimate(mm: MeanMoments, level: float, method: str) -> Estimate:
    low, high = t_interval(mm, level) if method == "t" else hall_interval(mm, level)
    return Estimate(mm.m, mm.se, Interval(float(low), float(high), level, method))


def _rmse(mse: Estimate) -> Estimate:
    value = math.sqrt(mse.value)
    se = mse.se / (2 * value) if value > 0 else float("nan")
    iv = mse.interval
    return Estimate(
        value,
        se,
        Interval(
            math.sqrt(max(iv.low, 0.0)),
            math.sqrt(max(iv.high, 0.0)),
            iv.level,
            f"square root of the MSE interval ({iv.method})",
        ),
    )


def summarize_group(
    y: np.ndarray,
    prediction: np.ndarray,
    weights: np.ndarray | None,
    *,
    group: str,
    code: int,
    confidence_level: float = 0.95,
) -> GroupSummary:
    """The summary of one group's (already checked) rows."""
    e = y - prediction
    moments = {
        "mean_prediction": (mean_moments(prediction, weights), "t"),
        "mean_target": (mean_moments(y, weights), "t"),
        "mean_residual": (mean_moments(e, weights), "t"),
        "mae": (mean_moments(np.abs(e), weights), "hall"),
        "mse": (mean_moments(e * e, weights), "hall"),
    }
    est = {k: _estimate(mm, confidence_level, how) for k, (mm, how) in moments.items()}
    mm = moments["mse"][0]
    return GroupSummary(
        group=group,
        code=code,
        n=mm.n,
        weight_total=mm.weight,
        n_effective=mm.n_eff,
        rmse=_rmse(est["mse"]),
        **est,
    )


def group_summaries(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    *,
    weights: object | None = None,
    confidence_level: float = 0.95,
    attribute: str = "group",
) -> GroupSummaries:
    """Per-group mean prediction, mean target, mean residual, MAE, MSE and RMSE with intervals
    (module docstring) for every category of one attribute.

    ``groups`` are integer codes 0..G−1 into ``categories``; ``weights`` optional, ≥ 0.
    """
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    data = check_inputs(y, prediction, groups, categories, weights)
    out = []
    for code, name in enumerate(data.categories):
        rows = data.rows(code)
        w = None if data.weights is None else data.weights[rows]
        out.append(
            summarize_group(
                data.y[rows],
                data.prediction[rows],
                w,
                group=name,
                code=code,
                confidence_level=confidence_level,
            )
        )
    return GroupSummaries(attribute, data.weights is not None, confidence_level, tuple(out))
