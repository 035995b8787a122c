"""Typed details of a multiclass audit step: per protected attribute, the groups' rates, the
pair tests and ε (what a report view draws; a lossless JSON round trip through
:mod:`fairengine.result_codec`). The method that fills them (config, registry) is wired
elsewhere; these types only fix the contract."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.multiclass.permutation import PairTests
from fairengine.multiclass.rates import ClassRates
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class MulticlassAttribute:
    """One protected attribute: its groups' rates, the pairs tested (``pairs_planned`` of
    ``pairs_possible``; the others exceed the audit's pair cap) and ε over the K outcomes."""

    attribute: str
    rates: ClassRates
    pairs: tuple[PairTests, ...]
    pairs_planned: int
    pairs_possible: int
    epsilon: MulticlassEpsilon | None = None


@dataclass(frozen=True)
class MulticlassDetails(MethodDetails):
    """Details of a multiclass audit step: ``classes`` in code order, how a probability matrix
    was read (``probabilities``), the permutation count and the metrics tested."""

    attributes: tuple[MulticlassAttribute, ...]
    classes: tuple[str, ...]
    probabilities: str
    n_permutations: int
    confidence_level: float
    metrics: tuple[str, ...]
