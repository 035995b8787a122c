"""The typed details of an ``intersectional`` result (:func:`run_intersectional`).

Their JSON (:meth:`~fairengine.results.MethodDetails.to_dict`) is the ``details`` object of the
method in ``audit.json``. Groupings are keyed by their token (``sex_x_race`` for the
intersection, ``sex`` for a marginal), metrics by their name (``sp``, ``slift``, ...), rates by
theirs (``selection_rate``, ``base_rate``, ``tpr``, ``fpr``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.intersectional.metrics import EpsilonConventions
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class IntersectionalEstimators:
    """The estimators' settings: smoothing (α, β) of the point estimate, Beta prior (α, β) of
    the posterior, bootstrap replicates and scheme, posterior draws, interval level, which
    interval is the headline (``auto``, ``bootstrap``, ``bayesian``) and the seed."""

    smoothing: tuple[float, float]
    prior: tuple[float, float]
    n_bootstrap: int
    bootstrap_scheme: str
    n_posterior: int
    confidence_level: float
    headline: str
    seed: int


@dataclass(frozen=True)
class SmallestIntersection:
    """One of the smallest intersections: its name, (weighted) rows and positive labels, and
    support status (``empty``, ``sparse``: fewer than ``min_support`` rows, ``ok``)."""

    group: str
    n: float
    positives: float
    status: str


@dataclass(frozen=True)
class EpsilonPair:
    """The pair that attains ε: the intersection with the larger rate and the one with the
    smaller rate (``overall`` for elift), their smoothed rates, the outcome side (``positive``:
    r, ``negative``: 1 − r) and the rate (``component``) that attains it."""

    high: str
    low: str
    rate_high: float
    rate_low: float
    side: str
    component: str


@dataclass(frozen=True)
class SmoothedEstimate:
    """The smoothed point estimate of ε."""

    estimate: float


@dataclass(frozen=True)
class EpsilonSummary:
    """A distribution of ε (bootstrap replicates or posterior draws): equal-tailed interval,
    one-sided upper bound, mean, median, bias (mean − point estimate), number of draws and,
    with ``target_epsilon``, the share of draws with ε ≤ target (None without one)."""

    low: float
    high: float
    upper_bound: float
    mean: float
    median: float
    bias: float
    n_draws: int
    prob_at_most_target: float | None = None


@dataclass(frozen=True)
class EpsilonEstimators:
    """ε of one metric by the three estimators."""

    smoothed: SmoothedEstimate
    bootstrap: EpsilonSummary
    bayesian: EpsilonSummary


@dataclass(frozen=True)
class MetricEpsilon:
    """ε of one metric over one grouping: smoothed ε (configured ``outcomes``), the ratio
    e^−ε, the empirical (α = β = 0) ε, the headline estimator, the pair that attains it, the
    smallest auditable denominator (rows), the three estimators, the intersections left out
    (``excluded``) and flagged sparse per rate, and ε under both conventions (``convention``).

    ``epsilon_positive`` or ``epsilon_both`` is the smoothed ε under the other convention than
    ``outcomes`` (the other one is None); ``overall_rate`` is the overall rate elift compares
    with (None for the other metrics)."""

    epsilon: float
    ratio: float
    epsilon_empirical: float
    outcomes: str
    headline: str
    pair: EpsilonPair
    min_denominator: float
    estimators: EpsilonEstimators
    excluded: dict[str, tuple[str, ...]]
    sparse: dict[str, tuple[str, ...]]
    convention: EpsilonConventions
    epsilon_positive: float | None = None
    epsilon_both: float | None = None
    overall_rate: float | None = None


@dataclass(frozen=True)
class RateColumns:
    """One rate per intersection (in the order of the grouping's ``group``): numerator and
    denominator counts (weighted), smoothed rate, Beta-posterior credible interval (rounded to
    6 decimals) and support status."""

    k: tuple[float, ...]
    d: tuple[float, ...]
    rate: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    status: tuple[str, ...]


@dataclass(frozen=True)
class GroupingRates:
    """The rates ε compares over one grouping: intersection names, their (weighted) sizes, the
    grouping's attributes and each rate the audited metrics use (None: no metric used it)."""

    group: tuple[str, ...]
    n: tuple[float, ...]
    attributes: tuple[str, ...]
    base_rate: RateColumns | None = None
    selection_rate: RateColumns | None = None
    tpr: RateColumns | None = None
    fpr: RateColumns | None = None


@dataclass(frozen=True)
class BiasAmplification:
    """DF bias amplification ε_sp − ε_slift over the full intersection (Foulds et al. 2020):
    estimate, percentile-bootstrap interval and bootstrap mean under the configured convention,
    and the estimate under the other one."""

    estimate: float
    low: float
    high: float
    bootstrap_mean: float
    outcomes: str
    convention: str
    other_convention: str
    estimate_other: float


@dataclass(frozen=True)
class IntersectionalDetails(MethodDetails):
    """Details of ``intersectional``: the audited attributes and their levels, table size,
    prediction mode, outcome convention, groupings (token -> attributes), estimator settings,
    the smallest intersections, ε per metric and grouping, per-intersection rates (groupings of
    at most 200 intersections), notes, and the bias amplification (None unless both sp and
    slift ran on the full intersection)."""

    attributes: tuple[str, ...]
    levels: dict[str, tuple[str, ...]]
    n_intersections: int
    n_rows: int
    prediction: str
    threshold: float | None
    weighted: bool
    outcomes: str
    convention: str
    other_convention: str
    groupings: dict[str, tuple[str, ...]]
    estimators: IntersectionalEstimators
    smallest: tuple[SmallestIntersection, ...]
    metrics: dict[str, dict[str, MetricEpsilon]]
    rates: dict[str, GroupingRates]
    notes: tuple[str, ...]
    bias_amplification: BiasAmplification | None = None


__all__ = [
    "BiasAmplification",
    "EpsilonEstimators",
    "EpsilonPair",
    "EpsilonSummary",
    "GroupingRates",
    "IntersectionalDetails",
    "IntersectionalEstimators",
    "MetricEpsilon",
    "RateColumns",
    "SmallestIntersection",
    "SmoothedEstimate",
]
