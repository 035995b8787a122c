"""The typed details of ``group_metrics``, the LiFT suite
(:func:`fairengine.group_metrics.method.run_group_metrics`): per encoding (a protected attribute,
or the intersection of all of them), the groups' rates and performance, the pairwise gaps, the
distances of the prediction and label distributions from the reference, and the inequality
indices of the benefit vectors.

With ``lift_compat`` the rates and pairs also carry LiFT's rounded numbers (:class:`LiftRate`,
:class:`LiftRatePair`, :class:`LiftPredictionPair`). Fields that only some settings fill are
``None`` otherwise: the prediction rates, their pairs and the performance (only at the model
level), the base-rate pairs (only at the dataset level), a distance not among
``distance_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from fairengine.group_parity.result import PairNumbers
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class GroupRate:
    """A rate of one group with its interval (Wilson on the counts; Wald with weights or
    expected counts); NaN where the group has no row with the conditioning label."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class LiftRate(GroupRate):
    """A rate of one group with ``lift_compat``: also the rate as LiFT reports it (rounded
    half-up to 5 decimals)."""

    lift: float


@dataclass(frozen=True)
class MetricEstimate:
    """A performance metric of one group (PRECISION, RECALL, TNR, FNR, FPR, ACCURACY) with its
    interval (:mod:`fairengine.group_performance`)."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class AucEstimate:
    """The AUC of the score within one group with its interval and DeLong standard error
    ``se``; ``error_bound`` bounds the error of a binned AUC (0 when exact); ``n_pos`` and
    ``n_neg`` count the group's rows of each label."""

    estimate: float
    low: float
    high: float
    se: float
    error_bound: float
    n_pos: int
    n_neg: int


@dataclass(frozen=True)
class CustomEstimate:
    """A user-defined metric (``custom_metrics``) of one group."""

    estimate: float


Performance: TypeAlias = AucEstimate | MetricEstimate | CustomEstimate
"""One performance entry of a group (by metric name): the AUC, a built-in rate or a custom
metric."""


@dataclass(frozen=True)
class MetricsGroup:
    """One group of an encoding (an intersection cell for the intersection): its rows ``n``,
    their total ``weight``, the label base rate P(y=1), the prediction rates (model level) and
    the performance metrics by name (None when none is computed)."""

    group: str
    n: int
    weight: float
    base_rate: GroupRate | LiftRate
    positive_rate: GroupRate | LiftRate | None = None
    tpr: GroupRate | LiftRate | None = None
    fpr: GroupRate | LiftRate | None = None
    performance: dict[str, Performance] | None = None


@dataclass(frozen=True, kw_only=True)
class RatePair(PairNumbers):
    """A pair (a, b) of groups (a before b) for one rate: group parity's
    :class:`~fairengine.group_parity.result.PairNumbers` (gap, ratio, impact ratio, four-fifths
    flag)."""

    def reported_gap(self, lift_compat: bool) -> float:
        """The |gap| the suite reports: LiFT's with ``lift_compat``, else the exact one."""
        if not lift_compat:
            return self.abs_gap
        if not isinstance(self, LiftRatePair | LiftPredictionPair):
            raise TypeError(f"pair {self.a!r}, {self.b!r} has no LiFT gap")
        return self.lift_gap


@dataclass(frozen=True, kw_only=True)
class LiftRatePair(RatePair):
    """A pair of groups with ``lift_compat``: also LiFT's gap (the |difference| of the rates
    rounded half-up to 5 decimals, rounded again)."""

    lift_gap: float


@dataclass(frozen=True, kw_only=True)
class PredictionPair(RatePair):
    """A pair of groups for a prediction rate (positive rate, TPR, FPR): also the p-value of
    H0: gap = 0 (Newcombe inversion, or Wald for expected counts)."""

    pvalue: float


@dataclass(frozen=True, kw_only=True)
class LiftPredictionPair(PredictionPair):
    """A pair of groups for a prediction rate with ``lift_compat``: also LiFT's gap."""

    lift_gap: float


@dataclass(frozen=True)
class EncodingPairs:
    """Per rate, the pairs reported (the ``max_pairs_reported`` with the largest |gap|, in pair
    order) and ``<rate>_count``, the number of pairs in all. ``base_rate`` needs the dataset
    level, the prediction rates the model level (None without it); with ``lift_compat`` the
    pairs with a group without the conditioning label are left out, as in LiFT."""

    base_rate: tuple[RatePair | LiftRatePair, ...] | None = None
    base_rate_count: int | None = None
    positive_rate: tuple[PredictionPair | LiftPredictionPair, ...] | None = None
    positive_rate_count: int | None = None
    tpr: tuple[PredictionPair | LiftPredictionPair, ...] | None = None
    tpr_count: int | None = None
    fpr: tuple[PredictionPair | LiftPredictionPair, ...] | None = None
    fpr_count: int | None = None


@dataclass(frozen=True)
class SkewCategory:
    """One (group, outcome) category of a distribution: its observed and reference probability
    masses and its skew log(p̂/q̂) (smoothed; LiFT's form with ``lift_compat``)."""

    group: str
    outcome: int
    observed: float
    reference: float
    skew: float


@dataclass(frozen=True)
class LevelDistances:
    """The distances of one distribution over (group, outcome) from the reference
    (:mod:`fairengine.distribution_distance`; JS and KL in bits), each None when not among
    ``distance_metrics``; ``categories``: the skews (None without SKEWS)."""

    INF_NORM_DIST: float | None = None
    TOTAL_VAR_DIST: float | None = None
    JS_DIVERGENCE: float | None = None
    KL_DIVERGENCE: float | None = None
    categories: tuple[SkewCategory, ...] | None = None


@dataclass(frozen=True)
class EncodingDistances:
    """The distances of the prediction distribution (``model`` level) and of the label
    distribution (``dataset`` level); None for a level not audited."""

    model: LevelDistances | None = None
    dataset: LevelDistances | None = None


@dataclass(frozen=True)
class BenefitSummary:
    """The smallest, largest and mean finite entry of a long benefit vector (NaN without any)."""

    min: float
    max: float
    mean: float


@dataclass(frozen=True)
class ListedBenefit:
    """A benefit vector of at most 100 entries: its size, its inequality indices by name
    (:mod:`fairengine.inequality`) and its entries by label (a group, ``group|outcome``,
    ``a|b`` or ``a|b|rate``)."""

    n_entries: int
    aggregates: dict[str, float]
    entries: dict[str, float]


@dataclass(frozen=True)
class SummarizedBenefit:
    """A benefit vector of more than 100 entries (pairs of a large intersection): its size,
    its inequality indices by name and a summary of its entries."""

    n_entries: int
    aggregates: dict[str, float]
    summary: BenefitSummary


Benefit: TypeAlias = ListedBenefit | SummarizedBenefit
"""One benefit vector's details, listed or summarised."""


@dataclass(frozen=True)
class EncodingMetrics:
    """The suite for one encoding: a protected ``attribute`` or the ``intersection``; its
    groups, pairs, distances and benefit vectors (by tag: ``skews_pred``, ``dp_label``, ``eo``,
    ``auc``, a custom metric's name...)."""

    kind: Literal["attribute", "intersection"]
    groups: tuple[MetricsGroup, ...]
    pairs: EncodingPairs
    distances: EncodingDistances
    benefits: dict[str, Benefit]


@dataclass(frozen=True)
class AucSetup:
    """How the AUC was computed: ``exact`` (one sort of the scores) or ``binned`` (a
    ``bins``-bin score histogram), ranking the ``probability`` (or, with ``lift_compat``, the
    ``prediction``)."""

    method: Literal["binned", "exact"]
    bins: int | None
    score: Literal["prediction", "probability"]


@dataclass(frozen=True)
class AucNotApplicable:
    """The AUC is not computed, for the ``reason`` given (hard-label scores rank nothing)."""

    method: None
    applicable: bool
    reason: str


@dataclass(frozen=True)
class GroupMetricsDetails(MethodDetails):
    """The details of a ``group_metrics`` result: the mode (``lift_compat``), the prediction
    mode (``hard`` with a ``threshold``, ``expected``, or None without scores), the levels
    audited (``model``, ``dataset``), how the AUC was computed and the suite per encoding (by
    name: the attribute, or the intersection's, e.g. ``race & sex``)."""

    lift_compat: bool
    prediction: str | None
    threshold: float | None
    levels: tuple[str, ...]
    auc: AucSetup | AucNotApplicable
    encodings: dict[str, EncodingMetrics]
