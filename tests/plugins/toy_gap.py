"""A toy audit method, the README's "a new method" recipe: one module (config + run) and one
registry line (:data:`SPEC`, registered with :func:`fairengine.registry.register`).

It tests whether the mean score of the first group of each protected attribute differs from
the rest's by more than ``margin`` (a Welch z-test of H0: |mean_a − mean_rest| ≤ margin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from fairengine.dataset import AuditDataset
from fairengine.registry import MethodSpec, RunContext
from fairengine.results import Finding, MethodDetails, MethodResult

CALLS: list[float] = []
"""Margins of every run (the tests count runs to check caching)."""


@dataclass
class ToyGapConfig:
    enabled: bool = True
    margin: float = 0.0


@dataclass(frozen=True)
class GroupMeans:
    """Mean score of the attribute's first group and of the rest, with their sizes."""

    first: str
    mean_first: float
    mean_rest: float
    n_first: int
    n_rest: int


@dataclass(frozen=True)
class ToyGapDetails(MethodDetails):
    """What the toy method found per protected attribute."""

    attributes: dict[str, GroupMeans]


def run_toy_gap(dataset: AuditDataset, config: ToyGapConfig, context: RunContext) -> MethodResult:
    CALLS.append(config.margin)
    score = dataset.probability if dataset.probability is not None else dataset.prediction
    assert score is not None
    findings = []
    means = {}
    for attr, enc in dataset.groups.items():
        first = enc.codes == 0
        a, b = score[first], score[~first]
        means[attr] = GroupMeans(str(enc.categories[0]), a.mean(), b.mean(), len(a), len(b))
        diff = float(a.mean() - b.mean())
        se = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
        p = float(min(1.0, 2 * norm.sf((abs(diff) - config.margin) / se)))
        findings.append(
            Finding(
                key=f"toy_gap.{attr}",
                label=f"Toy mean-score gap, {attr}: {enc.categories[0]} - rest",
                estimate=diff,
                pvalue=p if abs(diff) > config.margin else 1.0,
                null_hypothesis=f"|mean gap| <= {config.margin:g}",
            )
        )
    return MethodResult(
        "toy_gap",
        "Toy mean-score gap",
        parameters={"margin": config.margin, "seed": context.seed},
        findings=findings,
        details=ToyGapDetails(attributes=means),
    )


SPEC = MethodSpec("toy_gap", "Toy mean-score gap", ToyGapConfig, run_toy_gap, details=ToyGapDetails)
