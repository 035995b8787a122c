"""The regression method's typed details: per protected attribute, the groups' summaries, the
pair tests and the bounded group loss (what its report view draws; a lossless JSON round trip
through :mod:`fairengine.result_codec`)."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.regression.bounded_loss import BoundedGroupLoss
from fairengine.regression.permutation import PairTests
from fairengine.regression.summaries import GroupSummaries
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class RegressionAttribute:
    """One protected attribute: its groups' summaries, the pairs tested (``pairs_planned`` of
    all pairs; the others exceed ``max_pairs``) and, with a loss bound, each group's loss."""

    attribute: str
    summaries: GroupSummaries
    pairs: tuple[PairTests, ...]
    pairs_planned: int
    pairs_possible: int
    bounded: BoundedGroupLoss | None = None


@dataclass(frozen=True)
class RegressionDetails(MethodDetails):
    """Details of :func:`fairengine.regression.method.run_regression_metrics`."""

    attributes: tuple[RegressionAttribute, ...]
    n_permutations: int
    confidence_level: float
    metrics: tuple[str, ...]
    loss_bound: float | None = None
    loss: str = "squared"
    epsilon: tuple[MulticlassEpsilon, ...] = ()
    """ε of the binned predictions per attribute and over their intersection (last), each
    with the bins as its classes (:mod:`fairengine.regression.binned_epsilon`)."""
