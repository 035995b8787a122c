"""The typed details of a FlipTest result (:class:`FlipTestDetails`, method ``fliptest``).

One :class:`PairDetails` per tested group pair, each with both directions a → b and b → a
(:class:`DirectionDetails`): flipset sizes and their tests (:class:`FlipsetSummary`), the
transparency reports (:class:`TransparencySummary`), marginal histograms, the held-out map
validation and the map files. Rates are shares of the source group's sample; transparency
differences are in pooled standard deviations of the pair (``fliptest_ot.md`` §4). The JSON is
the one :func:`~fairengine.fliptest.run_fliptest` has always written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fairengine.results import MethodDetails


@dataclass(frozen=True)
class NullQuantiles:
    """Mean and 5 %, 50 %, 95 % quantiles of a null distribution of flip rates."""

    mean: float
    q05: float
    q50: float
    q95: float


@dataclass(frozen=True)
class FlipsetSummary:
    """One flipset (F+ or F−) of one direction: ``count`` = |F|, ``rate`` = |F|/n with its
    bootstrap-refit interval ``ci``, the intersection-union ``pvalue`` = max(permutation,
    self-map), the two nulls' quantiles (None when not drawn), ``excess_flips`` = count − the
    larger null mean count, the smallest rate that would reject at α, and the bootstrap flip
    frequency (expected size Σ frequency, members flipped in ≥ ``stable_threshold`` of the
    refits, a 10-bin histogram of the non-zero frequencies); None without bootstrap refits."""

    count: int
    rate: float
    ci: tuple[float, float]
    pvalue: float
    pvalue_permutation: float
    pvalue_selfmap: float
    permutation_null: NullQuantiles | None
    selfmap_null: NullQuantiles | None
    excess_flips: float
    minimum_detectable_rate: float
    expected_size: float | None
    stable_count: int | None
    flip_frequency_histogram: tuple[int, ...]


@dataclass(frozen=True)
class FlipsetSummaries:
    """The flipsets of one direction: F+ (advantaged) and F− (disadvantaged) of a binary or
    regression audit, or ``changed`` (the predicted class changes) of a multiclass audit
    (:mod:`fairengine.fliptest.outcomes`); the others are None."""

    positive: FlipsetSummary | None = None
    negative: FlipsetSummary | None = None
    changed: FlipsetSummary | None = None

    def items(self) -> tuple[tuple[str, FlipsetSummary], ...]:
        """``(kind, flipset)`` for ``positive``, ``negative`` then ``changed``, those present."""
        return _present(self)


@dataclass(frozen=True)
class FeatureChange:
    """One feature of a transparency report (Definition 4.3): mean change T(x) − x over the
    flipset and the mean of its sign (consistency), each with a bootstrap interval, and the
    sign test's p-value, raw and Benjamini-Hochberg adjusted over the pair's sign tests."""

    feature: str
    mean_difference: float
    mean_difference_ci: tuple[float, float]
    consistency: float
    consistency_ci: tuple[float, float]
    sign_pvalue: float
    sign_pvalue_bh: float


@dataclass(frozen=True)
class TransparencySummary:
    """The transparency report of one flipset of ``n`` members: the feature rankings by |mean
    difference| and |consistency|, the share of bootstrap refits with the same top feature, and
    the ``top_features`` features by |mean difference| (empty rankings for an empty flipset)."""

    n: int
    ranking_mean_difference: tuple[str, ...]
    ranking_consistency: tuple[str, ...]
    rank_stability_mean_difference: float
    rank_stability_consistency: float
    features: tuple[FeatureChange, ...]


@dataclass(frozen=True)
class TransparencySummaries:
    """The transparency reports of the flipsets of one direction (as
    :class:`FlipsetSummaries`: F+ and F−, or ``changed``)."""

    positive: TransparencySummary | None = None
    negative: TransparencySummary | None = None
    changed: TransparencySummary | None = None

    def items(self) -> tuple[tuple[str, TransparencySummary], ...]:
        """``(kind, report)`` for ``positive``, ``negative`` then ``changed``, those present."""
        return _present(self)


def _present(obj: object) -> tuple[tuple[str, Any], ...]:
    return tuple(
        (kind, getattr(obj, kind))
        for kind in ("positive", "negative", "changed")
        if getattr(obj, kind) is not None
    )


@dataclass(frozen=True)
class MarginalHistogram:
    """Counts of one feature over ``edges`` (the source group's range): the whole source
    sample (``group``) and the members of each flipset (None for a kind the audit's task does
    not have)."""

    edges: tuple[float, ...]
    group: tuple[int, ...]
    positive: tuple[int, ...] | None = None
    negative: tuple[int, ...] | None = None
    changed: tuple[int, ...] | None = None


@dataclass(frozen=True)
class PredictionShift:
    """A regression direction compared with ``delta``: the mean prediction of the source
    sample, of its images under the map and of the target sample, the mean change
    f(T x) − f(x) and the share of individuals that change by less than ``delta`` either
    way."""

    delta: float
    mean_source: float
    mean_mapped: float
    mean_target: float
    mean_change: float
    unchanged_rate: float


@dataclass(frozen=True)
class ClassFlips:
    """A multiclass direction: per (from-class, to-class) pair the number of source
    individuals predicted ``from`` whose counterpart is predicted ``to`` (``transitions[i][j]``,
    the diagonal the unchanged), each class's predicted counts in the source sample, among
    the images and in the target sample, and per class the one-vs-rest flipsets: ``flipped_out``
    = #{f(x) = k ≠ f(T x)} and ``flipped_in`` = #{f(x) ≠ k = f(T x)}."""

    classes: tuple[str, ...]
    transitions: tuple[tuple[int, ...], ...]
    source_counts: tuple[int, ...]
    mapped_counts: tuple[int, ...]
    target_counts: tuple[int, ...]
    flipped_out: tuple[int, ...]
    flipped_in: tuple[int, ...]


@dataclass(frozen=True)
class BootstrapRefits:
    """How the bootstrap refits of the map were solved: together in one batch or one by one."""

    batched: int
    refitted_one_by_one: int


@dataclass(frozen=True)
class MapValidationReport:
    """Held-out validation of one stratum's map (:class:`~fairengine.transport.validation.
    MapValidation`, §4.3): sample sizes, per-feature KS statistics with their permutation null,
    energy distance, regression-MSE ratios, cost ratio to exact OT, monotonicity violations,
    decision-rate gap, agreement with the exact bijection, cycle error, the warnings (``passed``
    when none) and the ε of the refits (None for maps without ε)."""

    n_fit: tuple[int, int]
    n_test: tuple[int, int]
    features: tuple[str, ...]
    ks: tuple[float, ...]
    ks_null_q95: tuple[float, ...]
    ks_pvalue: tuple[float, ...]
    energy: float
    energy_pvalue: float
    mse_ratio: tuple[float | None, ...]
    cost_ratio: float
    monotonicity_violation: float
    positive_rate_gap: float | None
    positive_rate_gap_ci: tuple[float, float] | None
    exact_agreement: float | None
    cycle_error: float | None
    warnings: tuple[str, ...]
    passed: bool
    epsilon_used: float | None


@dataclass(frozen=True)
class MapValidationFailure:
    """A stratum whose validation refits did not converge at any ε tried: the solver's error."""

    error: str | None
    passed: bool
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class MapEntry:
    """One stratum's observed map: its estimator, artifact name and, with a map cache, its file,
    cache key (the file's stem) and whether it was loaded instead of fitted."""

    stratum: str
    estimator: str
    artifact: str
    path: str | None
    cache_key: str | None
    loaded_from_cache: bool | None


@dataclass(frozen=True)
class DirectionDetails:
    """One direction source → target of a pair: sizes, the relative ε per stratum (None for
    maps without ε), positive decisions before and after transport, the target's positive rate,
    net flips |F+| − |F−| beside the demographic-parity count gap (decisions: binary audits and
    regression with a threshold; None otherwise, net flips also for regression with δ), the
    flipsets, transparency reports, feature marginals (features heading either ranking), the map
    validation per stratum (None when ``validate`` is off), the map files, and for a regression
    audit with δ the prediction shift, for a multiclass audit the class flips."""

    source: str
    target: str
    n_source: int
    epsilon: dict[str, float] | None
    source_positive: int | None
    mapped_positive: int | None
    target_positive_rate: float | None
    net_flips: int | None
    dp_count_gap: float | None
    permutation_null_from_reverse_refits: bool
    bootstrap_refits: BootstrapRefits
    flipsets: FlipsetSummaries
    transparency: TransparencySummaries
    histograms: dict[str, MarginalHistogram]
    validation: dict[str, MapValidationReport | MapValidationFailure] | None = None
    maps: tuple[MapEntry, ...] = ()
    prediction_shift: PredictionShift | None = None
    class_flips: ClassFlips | None = None


@dataclass(frozen=True)
class ForwardReverseCounts:
    """Forward/reverse consistency of a pair: (|F+(a→b)|, |F−(b→a)|) and
    (|F−(a→b)|, |F+(b→a)|); for a multiclass audit (|F(a→b)|, |F(b→a)|) of the changed
    classes instead."""

    positive_vs_reverse_negative: tuple[int, int] | None = None
    negative_vs_reverse_positive: tuple[int, int] | None = None
    changed_vs_reverse_changed: tuple[int, int] | None = None


@dataclass(frozen=True)
class PairDetails:
    """One tested pair of groups of ``attribute``: the groups (a, b), their sample sizes, the
    directions a → b and b → a, and their forward/reverse flipset counts."""

    attribute: str
    groups: tuple[str, str]
    n: tuple[int, int]
    directions: tuple[DirectionDetails, DirectionDetails]
    forward_reverse_counts: ForwardReverseCounts


@dataclass(frozen=True)
class MapCacheUse:
    """The audit's map cache for the run: its folder, whether it is kept across runs, and how
    many maps were loaded from it and fitted (and saved)."""

    folder: str | None
    reused_across_runs: bool
    loaded: int
    fitted: int


@dataclass(frozen=True)
class FlipTestDetails(MethodDetails):
    """FlipTest's details: the map estimator, mode, decision threshold (on P(y = 1); on the
    prediction of a regression audit with a threshold; None for a regression audit with δ and
    a multiclass audit), features, the note on the flipset/demographic-parity identity, the
    transparency units, every pair, (set by the audit, None for a direct call) the map cache's
    use, the audit's task, what a flip is (``flip``: ``decision``, ``value`` or ``class``;
    :mod:`fairengine.fliptest.outcomes`), δ of a regression audit and the classes of a
    multiclass audit."""

    estimator: str
    mode: str
    threshold: float | None
    features: tuple[str, ...]
    identity_note: str
    units: str
    pairs: tuple[PairDetails, ...]
    map_cache: MapCacheUse | None = None
    task: str = "binary"
    flip: str = "decision"
    delta: float | None = None
    classes: tuple[str, ...] = ()
