"""The typed details of a ``permutation_tests`` result (:func:`run_permutation_tests`).

Their JSON (:meth:`~fairengine.results.MethodDetails.to_dict`) is the ``details`` object of the
method in ``audit.json``: the settings of the tests, the method's own multiplicity family, one
record per test run and one per test skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fairengine.results import MethodDetails


@dataclass(frozen=True)
class NullHistogram:
    """Histogram of the finite permuted statistics (``counts`` per bin between ``edges``) and
    the observed statistic; ``n_nonfinite`` permuted statistics were undefined (None where no
    permuted statistic was finite: then ``edges`` and ``counts`` are empty)."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    observed: float
    n_nonfinite: int | None = None


@dataclass(frozen=True)
class PermutationTestRecord:
    """One test of a pair of groups on one metric: the observed statistic (Z = Δ/se when
    studentized, Δ otherwise), its permutation p-value (1 + n_extreme)/(1 + n_permutations)
    with Monte-Carlo se √(p(1−p)/T) and Wilson interval at ``pvalue_interval_level``, the
    difference Δ = metric(group_a) − metric(group_b) with se and interval ``ci``, and the
    p-value adjusted within the method's family. The optional fields are path-specific: the
    (TN, FP, FN, TP) cell counts of the ``cells`` path, the DeLong variances of the AUC paths,
    the pooled-bootstrap SD of ``lift_compat``."""

    attribute: str
    group_a: str
    group_b: str
    metric: str
    key: str
    statistic: float
    pvalue: float
    pvalue_se: float
    pvalue_interval: tuple[float, float]
    difference: float
    se: float
    ci: tuple[float, float]
    ci_method: str
    value_a: float
    value_b: float
    n_a: int
    n_b: int
    n_permutations: int
    n_extreme: int
    n_undefined: int
    alternative: str
    studentize: str
    scheme: str
    path: str
    null_histogram: NullHistogram
    pvalue_interval_level: float
    pvalue_adjusted_family: float
    decision_family: Literal["reject", "fail_to_reject"]
    cell_counts_a: tuple[int, ...] | None = None
    cell_counts_b: tuple[int, ...] | None = None
    variance_a: float | None = None
    variance_b: float | None = None
    bootstrap_sd: float | None = None


@dataclass(frozen=True)
class SkippedTest:
    """A planned test that was not run, and why."""

    attribute: str
    group_a: str
    group_b: str
    metric: str
    key: str
    reason: str


@dataclass(frozen=True)
class PermutationFamily:
    """The method's own multiplicity family: raw and ``multiplicity``-adjusted p-values of the
    tests ``keys`` (in order), and how many are rejected at ``alpha`` (the audit adjusts the
    findings across all methods on its own)."""

    multiplicity: str
    alpha: float
    keys: tuple[str, ...]
    raw_pvalues: tuple[float, ...]
    adjusted_pvalues: tuple[float, ...]
    n_rejected: int


@dataclass(frozen=True)
class PermutationDetails(MethodDetails):
    """Details of ``permutation_tests``: the prediction mode and threshold, the test settings,
    the within-method family, every test run (in attribute, metric, pair order) and skipped."""

    prediction: str
    threshold: float | None
    studentize: str
    scheme: str
    alternative: str
    family: PermutationFamily
    tests: tuple[PermutationTestRecord, ...]
    skipped: tuple[SkippedTest, ...]


__all__ = [
    "NullHistogram",
    "PermutationDetails",
    "PermutationFamily",
    "PermutationTestRecord",
    "SkippedTest",
]
