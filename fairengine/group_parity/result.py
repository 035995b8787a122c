"""The typed details of ``group_parity`` (:func:`fairengine.group_parity.method.group_parity`):
per protected attribute, every group's rates with intervals and every pair's gaps and ratios.

Rates: ``positive_rate`` P(ŷ=1 | g) (demographic parity), ``tpr`` P(ŷ=1 | y=1, g) and ``fpr``
P(ŷ=1 | y=0, g) (equalized odds); hard or expected predictions (``prediction``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from fairengine.results import MethodDetails

RateName = Literal["positive_rate", "tpr", "fpr"]
"""The rates of :data:`fairengine.group_parity.rates.RATES`."""
RATE_NAMES: tuple[RateName, ...] = ("positive_rate", "tpr", "fpr")


@dataclass(frozen=True)
class RateEstimate:
    """One group's rate with its confidence interval (Wilson on the counts, or on the effective
    counts with weights; Wald for expected counts); NaN where the group has no row with the
    conditioning label."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class GroupRates:
    """The three rates of one group."""

    positive_rate: RateEstimate
    tpr: RateEstimate
    fpr: RateEstimate

    def of(self, rate: RateName) -> RateEstimate:
        """The rate named ``rate``."""
        return {"positive_rate": self.positive_rate, "tpr": self.tpr, "fpr": self.fpr}[rate]


@dataclass(frozen=True)
class ParityGroup:
    """One group of an attribute: its rows ``n``, their total ``weight`` (= n without weights)
    and its rates."""

    group: str
    n: int
    weight: float
    rates: GroupRates


@dataclass(frozen=True, kw_only=True)
class PairNumbers:
    """The numbers every pair table holds for a pair (a, b) of groups (a before b in category
    order) of one rate: the signed gap r_a − r_b with its interval, |gap|, the ratio r_a/r_b with
    its log (delta-method) interval, the disparate-impact ratio min/max and whether it is below
    0.8 (four-fifths rule); :func:`fairengine.group_parity.rates.pair_numbers` computes them."""

    a: str
    b: str
    gap: float
    abs_gap: float
    gap_low: float
    gap_high: float
    ratio: float
    ratio_low: float
    ratio_high: float
    impact_ratio: float
    four_fifths_violated: bool

    def numbers(self) -> dict[str, Any]:
        """These numbers as keyword arguments (to build a pair type that extends them; typed
        Any because each keyword has its own type, checked by the dataclass it builds)."""
        return {f.name: getattr(self, f.name) for f in fields(PairNumbers)}


@dataclass(frozen=True, kw_only=True)
class ParityPair(PairNumbers):
    """One pair of groups for one rate (:class:`PairNumbers`) with the tolerance p-value of
    H0: |gap| ≤ τ and the ``test`` that gave it (Newcombe inversion, Wald inversion or the
    exact unconditional test)."""

    pvalue: float
    test: str


@dataclass(frozen=True)
class RatePairs:
    """Every pair of groups of an attribute, per rate (in pair order)."""

    positive_rate: tuple[ParityPair, ...]
    tpr: tuple[ParityPair, ...]
    fpr: tuple[ParityPair, ...]

    def of(self, rate: RateName) -> tuple[ParityPair, ...]:
        """The pairs of the rate named ``rate``."""
        return {"positive_rate": self.positive_rate, "tpr": self.tpr, "fpr": self.fpr}[rate]


@dataclass(frozen=True)
class AttributeParity:
    """One protected attribute: its groups (category order) and their pairs."""

    groups: tuple[ParityGroup, ...]
    pairs: RatePairs


@dataclass(frozen=True)
class ExactSettings:
    """Where the exact unconditional test replaces the Newcombe inversion: ``mode`` (``auto``,
    ``always`` or ``never``), the auto rule's largest smaller-group size ``max_rows`` and the
    largest outcome table ``max_cells`` (:data:`fairengine.exact_tolerance.EXACT_MAX_CELLS`)."""

    mode: str
    max_rows: int
    max_cells: int


@dataclass(frozen=True)
class GroupParityDetails(MethodDetails):
    """The details of a ``group_parity`` result: the prediction mode (``hard`` with a
    ``threshold``, or ``expected``), the tolerance τ, the exact-test settings and, per protected
    attribute (by name), its groups and pairs."""

    prediction: str
    threshold: float | None
    tolerance: float
    exact: ExactSettings
    attributes: dict[str, AttributeParity]
