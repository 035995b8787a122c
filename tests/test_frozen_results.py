"""The audit's result objects are immutable: deciding an audit builds new findings and method
results (``dataclasses.replace``) and leaves the methods' own results as they were."""

from __future__ import annotations

import dataclasses

import pytest

from fairengine.results import (
    DecisionRecord,
    ExpectationOutcome,
    Finding,
    MethodResult,
    ValidationResult,
    Verdict,
)
from fairengine.verdict import apply_decisions, assign_questions, finalize_audit


def _methods() -> list[MethodResult]:
    tolerance = Finding(
        "dp_gap.sex.a_b", "gap", 0.2, pvalue=0.001, question="q", null_kind="tolerance"
    )
    zero = Finding("perm.sex.a_b", "perm", 0.2, pvalue=0.002, question="q", null_kind="zero")
    untested = Finding("rate.sex.a", "rate", 0.4)
    return [
        MethodResult("group_parity", "Group parity", findings=[tolerance, untested]),
        MethodResult("permutation_tests", "Permutation tests", findings=[zero]),
    ]


@pytest.mark.parametrize(
    "value",
    [
        Finding("k", "l", 0.1),
        MethodResult("m", "M"),
        Verdict("pass", "s"),
        DecisionRecord(),
        ValidationResult(True, "pandas", 3),
        ExpectationOutcome("e", None, True, "d"),
    ],
)
def test_result_objects_are_frozen(value: object) -> None:
    name = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, name, None)


def test_deciding_builds_new_results_and_leaves_the_inputs_unchanged() -> None:
    methods = _methods()
    before = [m.to_dict() for m in methods]
    marked, deciding = assign_questions(methods)
    assert [f.key for f in deciding] == ["dp_gap.sex.a_b"]
    assert marked[1].findings[0].decision == "supporting"
    assert marked[1].findings[0].decided_by == "dp_gap.sex.a_b"
    assert marked[0] is methods[0]  # nothing changed there: the same object
    decided, family = apply_decisions(methods, 0.05, "holm")
    assert len(family.decisions) == 1
    assert decided[0].findings[0].decision == "reject"
    assert decided[0].findings[1] is methods[0].findings[1]  # untested: as it was
    audit = finalize_audit(
        config={}, dataset={}, model={}, validation=None, methods=methods, multiplicity="holm"
    )
    assert audit.verdict.status == "fail"
    assert [m.to_dict() for m in methods] == before
