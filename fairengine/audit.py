"""Assemble an audit: multiplicity adjustment across all tests, decisions, and the verdict.

All tested findings of all methods that ran form one family; their p-values are adjusted
together (Holm by default, Benjamini–Hochberg optionally, see :mod:`fairengine.multiplicity`)
and each decision is taken on the adjusted p-value at level ``alpha``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np

from fairengine.finding_keys import check_unique_keys
from fairengine.multiplicity import METHODS, adjust_pvalues
from fairengine.results import (
    AuditResult,
    Finding,
    MethodResult,
    ValidationResult,
    Verdict,
)

MULTIPLICITY_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no"}


def apply_multiplicity(
    methods: list[MethodResult], alpha: float, multiplicity: str = "holm"
) -> list[Finding]:
    """Adjust the p-values of every tested finding of the methods that ran, in place.

    Sets ``adjusted_pvalue``, ``decision`` and completes each finding's plain-language
    ``reading``. Returns the tested findings.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if multiplicity not in METHODS:
        raise ValueError(f"multiplicity must be one of {list(METHODS)}, got {multiplicity!r}")
    tested = [f for m in methods if m.status == "ok" for f in m.findings if f.pvalue is not None]
    adjusted = adjust_pvalues([f.pvalue for f in tested], multiplicity)
    name = MULTIPLICITY_NAMES[multiplicity]
    for f, p in zip(tested, adjusted, strict=True):
        f.adjusted_pvalue = float(p)
        f.decision = "reject" if p <= alpha else "fail_to_reject"
        if f.decision == "reject":
            verdict = (
                f"Significant: rejects {f.null_hypothesis} at α={alpha:g} "
                f"({name}-adjusted p={_p(p)})."
            )
        else:
            verdict = (
                f"Not significant: {f.null_hypothesis} is not rejected at α={alpha:g} "
                f"({name}-adjusted p={_p(p)})."
            )
        f.reading = f"{f.reading} {verdict}".strip()
    return tested


def decide_verdict(methods: list[MethodResult], alpha: float) -> Verdict:
    """``fail`` if a finding is rejected, else ``incomplete`` if a method failed, else ``pass``."""
    rejected = [
        f for m in methods if m.status == "ok" for f in m.findings if f.decision == "reject"
    ]
    failed = [m for m in methods if m.status == "failed"]
    reasons = [
        f"{f.label}: {f.estimate:+.4g} (adjusted p={_p(f.adjusted_pvalue)})" for f in rejected
    ]
    reasons += [f"{m.title} failed: {m.reason}" for m in failed]
    n_tests = sum(1 for m in methods for f in m.findings if f.pvalue is not None)
    if rejected:
        return Verdict(
            "fail",
            f"{len(rejected)} of {n_tests} tests show a disparity beyond tolerance at α={alpha:g}.",
            reasons,
        )
    if failed:
        return Verdict(
            "incomplete",
            f"No test rejected, but {len(failed)} requested method(s) failed; the audit is "
            "incomplete.",
            reasons,
        )
    return Verdict(
        "pass",
        f"None of {n_tests} tests shows a disparity beyond tolerance at α={alpha:g} "
        "(absence of evidence, not proof of fairness).",
        reasons,
    )


def finalize_audit(
    *,
    config: dict[str, Any],
    dataset: dict[str, Any],
    model: dict[str, Any],
    validation: ValidationResult | None,
    methods: list[MethodResult],
    alpha: float = 0.05,
    multiplicity: str = "holm",
    metadata: dict[str, Any] | None = None,
    audit_id: str | None = None,
    warnings: list[str] | None = None,
) -> AuditResult:
    """Adjust p-values, take decisions, decide the verdict and wrap it all in an AuditResult.

    First checks the invariant that every finding key (and flat MLflow metric name) is unique
    and valid (:func:`fairengine.finding_keys.check_unique_keys`).
    """
    check_unique_keys(f for m in methods for f in m.findings)
    apply_multiplicity(methods, alpha, multiplicity)
    return AuditResult(
        audit_id=audit_id or uuid.uuid4().hex[:12],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        config=config,
        dataset=dataset,
        model=model,
        validation=validation,
        methods=methods,
        alpha=alpha,
        multiplicity=multiplicity,
        verdict=decide_verdict(methods, alpha),
        metadata=metadata or {},
        warnings=list(warnings or []),
    )


def _p(p: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"
