"""Assemble an audit: one decision per question, one family, decisions and the verdict.

Tested findings that answer the same question (the same gap tested against a tolerance and
against zero) get one deciding test (:func:`assign_questions`); the deciding tests of all
methods form one family, decided together at level ``alpha`` under the audit's multiplicity
procedure (Holm by default, Benjamini–Hochberg optionally; :mod:`fairengine.multiplicity`).
Monte-Carlo p-values are decided through their resampling intervals, drawing more resamples
where a decision is open, and are ``undetermined`` when the resamples cannot settle them
(:mod:`fairengine.decisions`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from fairengine.audit_context import AuditMetadata, DatasetSummary, ModelIdentity
from fairengine.decisions import (
    FamilyResult,
    FamilyTest,
    Resampler,
    ResamplingSettings,
    TestDecision,
    decide_family,
)
from fairengine.finding_keys import check_unique_keys
from fairengine.multiplicity import AUDIT_PROCEDURES as METHODS
from fairengine.result_codec import JSONObject, JSONValue, encode
from fairengine.results import (
    AuditResult,
    DecisionRecord,
    Finding,
    JointEvidence,
    MethodResult,
    ResamplingPart,
    ValidationResult,
    Verdict,
)

MULTIPLICITY_NAMES = {
    "holm": "Holm",
    "bh": "Benjamini–Hochberg",
    "none": "no",
    "maxt": "Holm/maxT",
}
_R = TypeVar("_R", DatasetSummary, ModelIdentity, AuditMetadata)

GAP_NULLS: tuple[str, ...] = ("tolerance", "zero")
#: Among tests of the same null kind, which method's test decides (exact small-sample tests first).
_METHOD_RANK = {"permutation_tests": 0, "group_parity": 1, "group_metrics": 2}


_Position = tuple[int, int]
"""A finding's place: (index of its method, index in the method's findings)."""


def assign_questions(
    methods: list[MethodResult], gap_null: str = "tolerance"
) -> tuple[list[MethodResult], list[Finding]]:
    """One deciding test per question: the methods with the other tests of each question marked
    ``supporting`` (new objects; ``methods`` is left as it was), and the deciding tested
    findings (in the methods' order).

    Tested findings with the same ``question`` (e.g. the TPR gap of one pair of groups, tested by
    group parity against |gap| ≤ τ and by a permutation test against no difference) get one
    deciding test: the one whose ``null_kind`` is ``gap_null`` (``tolerance``, the default,
    since that is what "beyond tolerance" means; or ``zero``), exact permutation tests before
    score/Wald tests. The others are marked ``supporting`` with ``decided_by`` set; they are
    shown as evidence and do not count in the verdict or in the multiplicity family.
    """
    decided, deciding = _assign(methods, gap_null)
    return decided, [decided[i].findings[j] for i, j in deciding]


def _assign(
    methods: list[MethodResult], gap_null: str
) -> tuple[list[MethodResult], list[_Position]]:
    """:func:`assign_questions`, with the deciding findings given by their places."""
    if gap_null not in GAP_NULLS:
        raise ValueError(f"decisions.gap_null must be one of {list(GAP_NULLS)}, got {gap_null!r}")
    tested = _tested(methods)
    by_question: dict[str, list[tuple[str, _Position]]] = {}
    for method, at, f in tested:
        if f.question is not None:
            by_question.setdefault(f.question, []).append((method, at))
    found = {at: f for _, at, f in tested}
    changed: dict[_Position, Finding] = {}
    for group in by_question.values():
        if len(group) < 2:
            continue
        ranked = sorted(
            group,
            key=lambda ma: (found[ma[1]].null_kind != gap_null, _METHOD_RANK.get(ma[0], 9)),
        )
        decider = found[ranked[0][1]]
        for _, at in ranked[1:]:
            f = found[at]
            changed[at] = dataclasses.replace(
                f,
                decision="supporting",
                decided_by=decider.key,
                adjusted_pvalue=None,
                reading=(
                    f"{f.reading} Supporting evidence (not counted in the verdict): "
                    f"p={_p(f.pvalue)} against {f.null_hypothesis}; this question is decided by "
                    f"{decider.label} against {decider.null_hypothesis}."
                ).strip(),
            )
    return _with_findings(methods, changed), [at for _, at, _ in tested if at not in changed]


def _tested(methods: list[MethodResult]) -> list[tuple[str, _Position, Finding]]:
    """The tested findings of the methods that ran, with their method's name and place."""
    return [
        (m.method, (i, j), f)
        for i, m in enumerate(methods)
        if m.status == "ok"
        for j, f in enumerate(m.findings)
        if f.pvalue is not None
    ]


def _with_findings(
    methods: list[MethodResult], changed: dict[_Position, Finding]
) -> list[MethodResult]:
    """``methods`` with the findings at the ``changed`` places replaced (new method results
    where a finding changed, the same objects elsewhere)."""
    out = []
    for i, m in enumerate(methods):
        if not any((i, j) in changed for j in range(len(m.findings))):
            out.append(m)
            continue
        findings = [changed.get((i, j), f) for j, f in enumerate(m.findings)]
        out.append(dataclasses.replace(m, findings=findings))
    return out


def _family_test(f: Finding, procedure: str) -> FamilyTest:
    if procedure == "maxt" and f.joint is not None:
        return FamilyTest(f.key, parts=(f.joint.part,), block=f.joint.block, rank=f.joint.rank)
    if f.resampling:
        return FamilyTest(f.key, parts=tuple(f.resampling))
    assert f.pvalue is not None
    return FamilyTest(f.key, pvalue=min(1.0, max(0.0, float(f.pvalue))))


def _what_rejected(f: Finding) -> str:
    if f.null_kind == "tolerance":
        return f"the difference exceeds the tolerance ({f.null_hypothesis} rejected)"
    if f.null_kind == "zero":
        return f"the difference is not zero ({f.null_hypothesis} rejected)"
    return f"rejects {f.null_hypothesis}"


def apply_decisions(
    methods: list[MethodResult],
    alpha: float,
    multiplicity: str = "maxt",
    *,
    gap_null: str = "tolerance",
    settings: ResamplingSettings | None = None,
    resampler: Resampler | None = None,
) -> tuple[list[MethodResult], FamilyResult]:
    """Decide every deciding tested finding of the methods that ran: the methods with their
    findings decided (new objects; ``methods`` is left as it was) and the family's result.

    One deciding test per question (:func:`assign_questions`); then the family is decided by
    :func:`fairengine.decisions.decide_family`: exact p-values as they are, Monte-Carlo p-values
    through their resampling intervals (more resamples drawn by ``resampler`` where a decision is
    open). Sets ``adjusted_pvalue``, ``decision`` (reject / fail_to_reject / undetermined), the
    Monte-Carlo fields, and completes each finding's ``reading`` with a sentence naming the null.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if multiplicity not in METHODS:
        raise ValueError(f"multiplicity must be one of {list(METHODS)}, got {multiplicity!r}")
    methods, deciding = _assign(methods, gap_null)
    family = [((i, j), methods[i].findings[j]) for i, j in deciding]
    result = decide_family(
        [_family_test(f, multiplicity) for _, f in family],
        alpha,
        multiplicity,
        settings,
        resampler,
    )
    changed = {
        at: _decided(f, d, alpha, multiplicity)
        for (at, f), d in zip(family, result.decisions, strict=True)
    }
    return _with_findings(methods, changed), result


def _decided(f: Finding, d: TestDecision, alpha: float, multiplicity: str) -> Finding:
    """``f`` with the family's decision ``d`` on it and the reading completed."""
    name = MULTIPLICITY_NAMES[multiplicity]
    update: dict[str, Any] = {"adjusted_pvalue": d.adjusted_pvalue, "decision": d.decision}
    if d.parts and multiplicity == "maxt" and f.joint is not None:
        # the decision used the block's maxT counts; the raw (marginal) p-value stays
        update.update(
            joint=JointEvidence(f.joint.block, f.joint.rank, d.parts[0]),
            pvalue_bounds=(d.pvalue_low, d.pvalue_high),
            resamples_needed=d.resamples_needed,
        )
    elif d.parts:
        update.update(
            resampling=list(d.parts),
            pvalue=d.pvalue,
            pvalue_bounds=(d.pvalue_low, d.pvalue_high),
            resamples_needed=d.resamples_needed,
        )
    adj = f"{name}-adjusted p={_p(d.adjusted_pvalue)}"
    if d.decision == "reject":
        sentence = f"Rejected at α={alpha:g}: {_what_rejected(f)} ({adj})."
    elif d.decision == "fail_to_reject":
        sentence = f"Not rejected: {f.null_hypothesis} is not rejected at α={alpha:g} ({adj})."
    elif not d.parts:
        sentence = (
            f"Undetermined (Monte-Carlo resolution): this exact test's decision on "
            f"{f.null_hypothesis} at α={alpha:g} depends on where undetermined Monte-Carlo "
            f"tests fall in the {name} order ({adj})."
        )
    else:
        sentence = (
            f"Undetermined (Monte-Carlo resolution): after {_drawn_words(d.parts)} the "
            f"p-value lies in [{_bound(d.pvalue_low)}, {_bound(d.pvalue_high)}], which does "
            f"not settle its decision on {f.null_hypothesis} at α={alpha:g} ({adj}); "
            + _needed_words(d.resamples_needed, _unit(d.parts))
            + _cap_words(d.resamples_needed, d.resample_cap, d.cap_setting)
        )
    update["reading"] = f"{f.reading} {sentence}".strip()
    return dataclasses.replace(f, **update)


def _unit(parts: Sequence[ResamplingPart]) -> str:
    """What one resample is: a map refit (FlipTest's nulls), a draw, or a permutation."""
    names = {p.name for p in parts}
    if "self-map" in names:
        return "refits of each null"
    if names & {"bootstrap", "posterior"}:
        return "draws"
    return "permutations" if names else "resamples"


def _drawn_words(parts: tuple[ResamplingPart, ...]) -> str:
    return " and ".join(f"{p.resamples:,} {p.name} resamples" for p in parts)


def _cap_words(needed: float | None, cap: int, setting: str) -> str:
    """Where the cap stopped the draws: the setting that bounds them (the resampler's)."""
    if needed is None or not cap or needed <= cap:
        return ""
    return f" The audit draws at most {cap:,} ({setting})."


def _needed_words(needed: float | None, unit: str = "resamples") -> str:
    if needed is None or not np.isfinite(needed):
        return f"the estimate sits on its critical value, so no number of {unit} settles it."
    return f"about {needed:,.0f} {unit} would settle it."


def decide_verdict(methods: list[MethodResult], alpha: float) -> Verdict:
    """``fail`` if a deciding finding is rejected; else ``incomplete`` if a decision is
    undetermined (Monte-Carlo resolution) or a method failed; else ``pass``."""
    deciding = [f for m in methods if m.status == "ok" for f in m.findings if f.counts]
    rejected = [f for f in deciding if f.decision == "reject"]
    undetermined = [f for f in deciding if f.decision == "undetermined"]
    failed = [m for m in methods if m.status == "failed"]
    reasons = [
        f"{f.label}: {f.estimate:+.4g}, {_what_rejected(f)} (adjusted p={_p(f.adjusted_pvalue)})"
        for f in rejected
    ]
    reasons += [
        f"{f.label}: undetermined at Monte-Carlo resolution ({f.null_hypothesis}; "
        + _needed_words(f.resamples_needed, _unit(f.resampling)).rstrip(".")
        + ")"
        for f in undetermined
    ]
    reasons += [f"{m.title} failed: {m.reason}" for m in failed]
    n_tests = len(deciding)
    n_tol = sum(1 for f in rejected if f.null_kind == "tolerance")
    n_zero = sum(1 for f in rejected if f.null_kind == "zero")
    n_other = len(rejected) - n_tol - n_zero
    kinds = []
    if n_tol:
        kinds.append(f"{n_tol} beyond {'its' if n_tol == 1 else 'their'} tolerance")
    if n_zero:
        kinds.append(f"{n_zero} different from zero")
    if n_other:
        kinds.append(f"{n_other} against {'another null' if n_other == 1 else 'other nulls'}")
    undet = f" {len(undetermined)} undetermined at Monte-Carlo resolution." if undetermined else ""
    if rejected:
        return Verdict(
            "fail",
            f"{len(rejected)} of {n_tests} tests reject their null at α={alpha:g} "
            f"({', '.join(kinds)}).{undet}",
            reasons,
        )
    if undetermined or failed:
        parts = []
        if undetermined:
            parts.append(
                f"{len(undetermined)} test(s) undetermined at Monte-Carlo resolution (neither "
                "rejected nor not rejected)"
            )
        if failed:
            parts.append(f"{len(failed)} requested method(s) failed")
        return Verdict(
            "incomplete",
            f"No test rejected, but {' and '.join(parts)}; the audit is incomplete.",
            reasons,
        )
    return Verdict(
        "pass",
        f"None of {n_tests} tests rejects its null at α={alpha:g} "
        "(absence of evidence, not proof of fairness).",
        reasons,
    )


def finalize_audit(
    *,
    config: Mapping[str, JSONValue] | None = None,
    dataset: DatasetSummary | Mapping[str, JSONValue] | None = None,
    model: ModelIdentity | Mapping[str, JSONValue] | None = None,
    validation: ValidationResult | None,
    methods: list[MethodResult],
    alpha: float = 0.05,
    multiplicity: str = "maxt",
    metadata: AuditMetadata | Mapping[str, JSONValue] | None = None,
    audit_id: str | None = None,
    warnings: list[str] | None = None,
    gap_null: str = "tolerance",
    resampling: ResamplingSettings | None = None,
    resampler: Resampler | None = None,
) -> AuditResult:
    """Adjust p-values, take decisions, decide the verdict and wrap it all in an AuditResult.

    ``dataset``, ``model`` and ``metadata`` are the typed records of
    :mod:`fairengine.audit_context` or their JSON form (read with their ``from_json``).
    First checks the invariant that every finding key (and flat MLflow metric name) is unique
    and valid (:func:`fairengine.finding_keys.check_unique_keys`).
    """
    check_unique_keys(f for m in methods for f in m.findings)
    # decisions give new results: the methods' own results stay as they were, so an audit can
    # be re-decided (another gap_null or multiplicity) from the same method results
    methods, family = apply_decisions(
        methods,
        alpha,
        multiplicity,
        gap_null=gap_null,
        settings=resampling,
        resampler=resampler,
    )
    return AuditResult(
        audit_id=audit_id or uuid.uuid4().hex[:12],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        config=_json_object(config),
        dataset=_record(DatasetSummary, dataset),
        model=_record(ModelIdentity, model),
        validation=validation,
        methods=methods,
        alpha=alpha,
        multiplicity=multiplicity,
        verdict=decide_verdict(methods, alpha),
        metadata=_record(AuditMetadata, metadata),
        warnings=list(warnings or []),
        decisions=DecisionRecord(
            gap_null=gap_null,
            resampling_risk=family.settings.risk,
            max_resamples=family.settings.max_resamples,
            growth=family.settings.growth,
            n_tests=len(family.decisions),
            n_rejected=family.count("reject"),
            n_not_rejected=family.count("fail_to_reject"),
            n_undetermined=family.count("undetermined"),
            n_supporting=sum(1 for m in methods for f in m.findings if f.decision == "supporting"),
            resamples_drawn=family.resamples_drawn,
            looks=family.looks,
        ),
    )


def _json_object(value: Mapping[str, JSONValue] | None) -> JSONObject:
    """``value``'s strict JSON form (the config as :meth:`AuditConfig.to_dict` gives it)."""
    data = encode(dict(value or {}))
    assert isinstance(data, dict)
    return data


def _record(kind: type[_R], value: object) -> _R:
    """``value`` as ``kind``: itself, read from its JSON form, or the empty record."""
    if isinstance(value, kind):
        return value
    if value is None:
        return kind()
    assert isinstance(value, Mapping), type(value)
    return kind.from_json(value)


def _p(p: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _bound(p: float) -> str:
    """A Monte-Carlo interval end: 0 as 0, tiny values in scientific notation."""
    if p == 0:
        return "0"
    return f"{p:.2g}" if p < 1e-3 else f"{p:.4f}"
