"""A challenger-vs-champion comparison as one record: which models, which rows, the paired
result (:class:`~fairengine.comparison.result.ComparisonResult`) and one verdict.

The verdict answers one question, "is the candidate not worse than the baseline by more than
δ on every tested gap?", under the comparison's family-wise level α (single-step maxT over all
questions, :mod:`fairengine.comparison.compare`):

* ``not_worse`` — every tested question is ``not_worse`` (U < δ): non-inferiority shown;
* ``worse`` — at least one question is ``worse`` (L > 0) without being within the margin;
* ``inconclusive`` — neither: some question is undetermined (the data cannot place Δ on either
  side of δ, or Monte-Carlo resolution could not), none shown worse.

A non-inferiority gate passes only on ``not_worse`` (absence of a shown deterioration is not
shown non-inferiority); ``worse`` is what alerts fire on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fairengine.comparison.result import ComparisonResult
from fairengine.result_codec import decode, encode

COMPARISON_SCHEMA = "fairengine.comparison/1"
VerdictStatus = Literal["not_worse", "worse", "inconclusive"]


@dataclass(frozen=True)
class ComparedModel:
    """One side of the comparison: its URI (``models:/name/7``, ``python:<name>`` for a Python
    object), registry name and version when it has them, and where its scores came from."""

    uri: str | None
    name: str | None
    version: str | None
    score_source: str

    @property
    def label(self) -> str:
        if self.name and self.version:
            return f"{self.name} v{self.version}"
        return self.uri or self.score_source


@dataclass(frozen=True)
class ComparisonVerdict:
    """The comparison's one decision (module docstring) and its counts."""

    status: VerdictStatus
    summary: str
    n_not_worse: int
    n_worse: int
    n_undetermined: int
    n_not_tested: int


def comparison_verdict(result: ComparisonResult) -> ComparisonVerdict:
    """The verdict of ``result`` (module docstring)."""
    decisions = [q.decision for q in result.questions]
    n_nw = decisions.count("not_worse")
    n_w = decisions.count("worse")
    n_nt = decisions.count("not_tested")
    n_u = len(decisions) - n_nw - n_w - n_nt
    tested = n_nw + n_w + n_u
    delta = f"δ = {result.delta:g}"
    if tested == 0:
        status: VerdictStatus = "inconclusive"
        summary = "no question could be tested (every rate undefined in some group)"
    elif n_w:
        status = "worse"
        summary = (
            f"the candidate is more unequal than the baseline, beyond the margin {delta}, on "
            f"{n_w} of {tested} tested gap(s) (family-wise α = {result.alpha:g})"
        )
    elif n_u:
        status = "inconclusive"
        summary = (
            f"non-inferiority (not worse by more than {delta}) shown on {n_nw} of {tested} "
            f"tested gap(s); {n_u} undetermined, none shown worse"
        )
    else:
        status = "not_worse"
        summary = (
            f"the candidate is not worse than the baseline by more than {delta} on all {tested} "
            f"tested gap(s) (family-wise α = {result.alpha:g})"
        )
    return ComparisonVerdict(status, summary, n_nw, n_w, n_u, n_nt)


@dataclass(frozen=True)
class ModelComparison:
    """Everything one comparison produced: identity, data, both models, the paired result,
    the verdict, the settings it ran with (``config``: the audit config's dict) and the input
    warnings. Written as ``comparison.json`` (format :data:`COMPARISON_SCHEMA`)."""

    comparison_id: str
    created_at: str
    data_source: str
    n_rows: int
    baseline: ComparedModel
    candidate: ComparedModel
    result: ComparisonResult
    verdict: ComparisonVerdict
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = encode(self)
        assert isinstance(out, dict)
        return {"schema": COMPARISON_SCHEMA, **out}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelComparison:
        body = dict(data)
        schema = body.pop("schema", None)
        if schema != COMPARISON_SCHEMA:
            from fairengine.results import AuditFormatError

            raise AuditFormatError(
                f"comparison format {schema!r} is not one this FairEngine reads "
                f"({COMPARISON_SCHEMA!r})"
            )
        return decode(cls, body)
