"""Held-out estimates of the mitigation step: a point estimate with its interval, and ε of one
metric with its upper bound (shared by the registration rule and the typed result)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its two-sided interval ``[low, high]`` (level: the evaluation's)."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class EpsilonEstimate:
    """Held-out ε of one metric (nats): smoothed point estimate, exact-posterior interval and
    one-sided upper bound at the confidence level, P(ε ≤ target) (None without a target), the
    pair of intersections (flat ids) and the rate (``component``) attaining ε, and the mean and
    interval of the realised ε over drawn decisions (None when not drawn, e.g. with weights);
    notes ``intersectional.md`` §4.8."""

    metric: str
    estimate: float
    low: float
    high: float
    upper_bound: float
    prob_below_target: float | None
    pair: tuple[int, int]
    component: str
    realised_mean: float | None = None
    realised_low: float | None = None
    realised_high: float | None = None
