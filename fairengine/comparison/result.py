"""Result types of :func:`fairengine.comparison.compare_models` (frozen dataclasses that
round-trip through :mod:`fairengine.result_codec`: :meth:`ComparisonResult.to_dict` and
:meth:`ComparisonResult.from_dict`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fairengine.comparison.settings import ComparisonResampling
from fairengine.result_codec import decode, encode

MetricName = Literal["selection_rate", "tpr", "fpr"]
Decision = Literal[
    "not_worse", "worse", "undetermined", "undetermined (Monte-Carlo resolution)", "not_tested"
]


@dataclass(frozen=True)
class ComparisonQuestion:
    """One question: how the gap of ``metric`` between ``group_a`` and ``group_b`` (category
    order, as the audit's two-group gap questions; ``question`` is
    :func:`fairengine.results.gap_question`'s identity) changes from baseline to candidate.

    ``gap_baseline`` and ``gap_candidate`` are the signed gaps g = r_a − r_b; ``difference`` is
    Δ̂ = |g_cand| − |g_base| (positive: the candidate is more unequal); [``low``, ``high``] is the
    simultaneous (1 − α) interval [L, U] for Δ. ``pvalue_not_worse`` is the maxT-adjusted
    p-value of H0: Δ ≥ δ (the smallest α with U < δ) and ``pvalue_worse`` that of H0: Δ ≤ 0
    (the smallest α with L > 0). ``not_worse`` (U < δ) and ``worse`` (L > 0) are both reported
    (both can hold); each is ``None`` where the Monte-Carlo error of the bound straddles its
    threshold after the last look, or where the question is not tested. ``n_a``/``n_b`` are the
    rows in each group's denominator of the rate (group size, positives or negatives).
    ``reason`` says why a question is not tested.
    """

    question: str
    metric: MetricName
    attribute: str
    group_a: str
    group_b: str
    n_a: int
    n_b: int
    gap_baseline: float
    gap_candidate: float
    difference: float
    low: float
    high: float
    pvalue_not_worse: float
    pvalue_worse: float
    not_worse: bool | None
    worse: bool | None
    decision: Decision
    reading: str
    reason: str | None = None


@dataclass(frozen=True)
class ComparisonDiagnostics:
    """How the bounds were resampled: ``n_resamples`` used (drawn minus ``n_undefined``, the
    resamples where a tested rate had a zero denominator and were left out), ``looks`` the
    cumulative drawn resamples at each look, ``quantile`` q (the maxT critical value) with its
    Monte-Carlo interval [``quantile_low``, ``quantile_high``], the settings and the seed."""

    n_resamples: int
    n_drawn: int
    n_undefined: int
    looks: tuple[int, ...]
    quantile: float
    quantile_low: float
    quantile_high: float
    resampling: ComparisonResampling
    seed: int | None


@dataclass(frozen=True)
class ComparisonResult:
    """Paired comparison of a candidate model against a baseline scored on the same rows: one
    :class:`ComparisonQuestion` per (attribute, pair of groups, metric), the family's level
    ``alpha`` and non-inferiority margin ``delta``, the rows, the resamples used, the method in
    words (``confidence_method``) and ``warnings``."""

    questions: tuple[ComparisonQuestion, ...]
    alpha: float
    delta: float
    n_rows: int
    n_resamples: int
    confidence_method: str
    warnings: tuple[str, ...]
    diagnostics: ComparisonDiagnostics

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form (:func:`fairengine.result_codec.encode`)."""
        out = encode(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ComparisonResult:
        """The result :meth:`to_dict` wrote (:func:`fairengine.result_codec.decode`)."""
        return decode(cls, data)

    def question(
        self, metric: str, attribute: str, group_a: str, group_b: str
    ) -> ComparisonQuestion:
        """The question of ``metric`` for the pair (``group_a``, ``group_b``) of ``attribute``."""
        for q in self.questions:
            if (q.metric, q.attribute, q.group_a, q.group_b) == (
                metric,
                attribute,
                group_a,
                group_b,
            ):
                return q
        raise KeyError((metric, attribute, group_a, group_b))
