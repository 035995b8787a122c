"""Per-group one-vs-rest rates of every class, with confidence intervals.

For group g and class c (definitions and sums in :mod:`.class_sums`):

* selection rate  P(ŷ = c | g)  — the group's predicted-class distribution;
* true-positive rate  P(ŷ = c | y = c, g)  (recall of class c);
* false-positive rate  P(ŷ = c | y ≠ c, g).

Each is a ratio estimate m̂ = Σ w q_c / Σ w over its conditioning rows with the linearisation
variance Var m̂ ≈ Σ w²(q_c − m̂)² / (Σ w)² (:mod:`fairengine.counts`). Intervals, as the binary
group rates of :func:`fairengine.group_parity.rates.group_rates`:

* unweighted hard predictions: Wilson score interval on the counts (Wilson 1927);
* weighted hard predictions: Wilson on the effective counts m̂·n_eff with
  n_eff = min(n, m̂(1 − m̂)/Var m̂) (Korn & Graubard 1998;
  :func:`fairengine.rate_gap.effective_sample_size`);
* expected counts (``probabilities="expected"``): Wald m̂ ± z·se clipped to [0, 1].

A rate with no conditioning rows (no row of true class c in the group, for the TPR) is NaN
with a NaN interval. With unit weights the estimates are exactly those of
``fairlearn.metrics.MetricFrame`` with ``selection_rate``, ``true_positive_rate`` and
``false_positive_rate`` on the one-vs-rest labels (tests/test_multiclass_rates.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.intervals import wald_interval, wilson_interval
from fairengine.json_result import JsonResult
from fairengine.multiclass.class_sums import RATE_METRICS, group_sums, rate_sums
from fairengine.multiclass.inputs import MulticlassInputs, check_inputs
from fairengine.permutation.metrics import ratio_value_variance
from fairengine.rate_gap import effective_sample_size
from fairengine.results import Interval

WILSON = "wilson"
WILSON_EFFECTIVE = "wilson (effective counts)"
WALD = "wald (expected counts)"


@dataclass(frozen=True)
class RateEstimate(JsonResult):
    """One rate: ``value`` with its linearisation ``se``, ``n`` conditioning rows,
    ``n_effective`` (the count the interval used: n, or the effective count when weighted) and
    the ``interval``."""

    value: float
    se: float
    n: int
    n_effective: float
    interval: Interval


@dataclass(frozen=True)
class GroupClassRates(JsonResult):
    """One group's rates: ``selection[c]``, ``tpr[c]`` and ``fpr[c]`` for every class c (in
    class order); ``n`` rows, ``weight_total`` their weight."""

    group: str
    code: int
    n: int
    weight_total: float
    selection: tuple[RateEstimate, ...]
    tpr: tuple[RateEstimate, ...]
    fpr: tuple[RateEstimate, ...]

    def rate(self, metric: str, class_code: int) -> RateEstimate:
        """The ``metric`` (one of :data:`~.class_sums.RATE_METRICS`) of class ``class_code``."""
        if metric not in RATE_METRICS:
            raise KeyError(f"unknown metric {metric!r}; have {list(RATE_METRICS)}")
        values: tuple[RateEstimate, ...] = getattr(self, metric)
        return values[class_code]


@dataclass(frozen=True)
class ClassRates(JsonResult):
    """The one-vs-rest rates of every group of one attribute (groups in category order).
    ``prediction`` is ``"classes"`` (predicted codes), ``"argmax"`` or ``"expected"``."""

    attribute: str
    classes: tuple[str, ...]
    weighted: bool
    prediction: str
    confidence_level: float
    groups: tuple[GroupClassRates, ...]

    def group(self, name: str) -> GroupClassRates:
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; have {[g.group for g in self.groups]}")

    def values(self, metric: str) -> np.ndarray:
        """The (G, K) array of ``metric`` values (groups × classes)."""
        k = len(self.classes)
        return np.array([[g.rate(metric, c).value for c in range(k)] for g in self.groups])


def stratum_rows(data: MulticlassInputs) -> np.ndarray:
    """Row counts (G, K) per (group, true class) stratum (rows of positive weight count)."""
    g, k = len(data.categories), data.n_classes
    keep = None if data.weights is None else data.weights > 0
    idx = data.codes * k + data.y
    if keep is not None:
        idx = idx[keep]
    return np.bincount(idx, minlength=g * k).reshape(g, k)


def rate_rows(rows: np.ndarray) -> np.ndarray:
    """Conditioning row counts (..., 3, K) of (selection, tpr, fpr) from stratum rows (..., K)."""
    total = np.broadcast_to(rows.sum(-1, keepdims=True), rows.shape)
    return np.stack([total, rows, total - rows], axis=-2)


def rate_intervals(
    sums: np.ndarray, rows: np.ndarray, hard: bool, weighted: bool, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """Value, variance, effective size and interval limits of rates from their five sums
    (..., 5) and conditioning rows (module docstring), with the interval's method name."""
    m, var = ratio_value_variance(sums)
    n = rows.astype(np.float64)
    if hard and not weighted:
        low, high = wilson_interval(np.round(m * n), n, level)
        return m, var, n, low, high, WILSON
    if hard:
        n_eff = effective_sample_size(m, var, n, sums[..., 1], sums[..., 4])
        low, high = wilson_interval(m * n_eff, n_eff, level)
        return m, var, n_eff, low, high, WILSON_EFFECTIVE
    low, high = wald_interval(m, np.sqrt(var), level, bounds=(0.0, 1.0))
    return m, var, n, low, high, WALD


def prediction_kind(prediction: object, probabilities: str) -> str:
    return probabilities if np.ndim(np.asarray(prediction)) == 2 else "classes"


def group_class_rates(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    classes: Sequence[object],
    *,
    weights: object | None = None,
    probabilities: str = "argmax",
    confidence_level: float = 0.95,
    attribute: str = "group",
) -> ClassRates:
    """Selection rate, TPR and FPR of every class in every group, with intervals (module
    docstring).

    ``y``: true class codes 0..K−1 into ``classes``; ``prediction``: predicted class codes or an
    (n, K) probability matrix (``probabilities``: ``"argmax"`` or ``"expected"``,
    :mod:`.inputs`); ``groups``: codes 0..G−1 into ``categories``; ``weights`` optional, ≥ 0.
    """
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    data = check_inputs(
        y, prediction, groups, categories, classes, weights, probabilities=probabilities
    )
    return rates_of(data, confidence_level, attribute, prediction_kind(prediction, probabilities))


def rates_of(data: MulticlassInputs, level: float, attribute: str, kind: str) -> ClassRates:
    """:func:`group_class_rates` of checked inputs."""
    table = group_sums(data)  # (G, K, 2+3K)
    sums = rate_sums(table)  # (G, 3, K, 5)
    rows = rate_rows(stratum_rows(data))  # (G, 3, K)
    weighted = data.weights is not None
    m, var, n_eff, low, high, method = rate_intervals(sums, rows, data.hard, weighted, level)
    se = np.sqrt(var)
    out = []
    for gi, name in enumerate(data.categories):
        per_metric = []
        for j in range(len(RATE_METRICS)):
            per_metric.append(
                tuple(
                    RateEstimate(
                        float(m[gi, j, c]),
                        float(se[gi, j, c]),
                        int(rows[gi, j, c]),
                        float(n_eff[gi, j, c]),
                        Interval(float(low[gi, j, c]), float(high[gi, j, c]), level, method),
                    )
                    for c in range(data.n_classes)
                )
            )
        out.append(
            GroupClassRates(
                name,
                gi,
                int(rows[gi, 0, 0]),
                float(table[gi, :, 0].sum()),
                *per_metric,
            )
        )
    return ClassRates(attribute, data.classes, weighted, kind, level, tuple(out))
