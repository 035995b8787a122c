"""The result contract: typed, JSON-serialisable results of every method and of a whole audit.

The JSON produced by :meth:`AuditResult.to_dict` is the source of truth; the HTML report and the
MLflow metrics are renderings of it. Every number a user may act on is a :class:`Finding`: a point
estimate with its interval and, when it is tested, its p-value, multiplicity-adjusted p-value and
decision at the audit's level ``alpha``.

Non-finite floats are encoded as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` so the
output is strict JSON (``json.dumps(..., allow_nan=False)`` succeeds); :func:`decode_float`
reverses that.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from fairengine.audit_context import AuditMetadata, DatasetSummary, ModelIdentity
from fairengine.errors import FairEngineError
from fairengine.finding_keys import FindingKeyError, flat_names
from fairengine.result_codec import (
    JSONLike,
    JSONObject,
    JSONValue,
    ResultFormatError,
    decode,
    encode,
)

Decision = Literal["reject", "fail_to_reject", "undetermined", "supporting", "not_tested"]
"""``reject``/``fail_to_reject``: the audit's decision on the adjusted p-value; ``undetermined``:
a Monte-Carlo p-value whose decision the resamples could not settle (never read as "not
rejected"); ``supporting``: tested, but another finding answers the same question (``decided_by``)
and only that one counts in the verdict; ``not_tested``: no p-value."""
MethodStatus = Literal["ok", "failed", "not_run"]
VerdictStatus = Literal["pass", "fail", "incomplete"]

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_float(x: float | None) -> float | str | None:
    """Encode a float for strict JSON: finite floats unchanged, non-finite as strings."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def decode_float(x: float | str | None) -> float | None:
    """Inverse of :func:`encode_float`."""
    if x is None:
        return None
    if isinstance(x, str):
        return _NONFINITE[x]
    return float(x)


def freeze_sequences(obj: object, *names: str) -> None:
    """Store the sequence fields ``names`` of the frozen dataclass ``obj`` as tuples: a result
    may be built from lists (the methods build them so), and is not changed through them after.
    The fields are typed ``Sequence`` so that a type checker refuses ``append`` on them too."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, tuple):
            object.__setattr__(obj, name, tuple(value))


def to_jsonable(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays, tuples and dataclasses to strict JSON values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return encode_float(float(obj))
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


@dataclass(frozen=True)
class Interval:
    """A confidence (or credible) interval ``[low, high]`` at ``level`` computed by ``method``."""

    low: float
    high: float
    level: float = 0.95
    method: str = ""

    def to_dict(self) -> JSONObject:
        return {
            "low": encode_float(self.low),
            "high": encode_float(self.high),
            "level": self.level,
            "method": self.method,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Interval:
        return cls(
            low=decode_float(d["low"]),  # type: ignore[arg-type]
            high=decode_float(d["high"]),  # type: ignore[arg-type]
            level=float(d.get("level", 0.95)),
            method=str(d.get("method", "")),
        )


def gap_question(metric: str, attribute: str, group_a: str, group_b: str) -> str:
    """The identity of the question "how does ``metric`` differ between two groups": findings of
    different methods with the same question are answered by one deciding test
    (:func:`fairengine.verdict.assign_questions`). ``metric`` uses the canonical rate names
    (``positive_rate``, ``tpr``, ``fpr``, ``auc``, …); groups in the dataset's category order."""
    return json.dumps([metric, str(attribute), str(group_a), str(group_b)], ensure_ascii=False)


@dataclass(frozen=True)
class ResamplingPart:
    """One Monte-Carlo estimate behind a p-value: ``exceedances`` S of ``resamples`` n resampled
    statistics at least as extreme as the observed one, so p̂ = (S + 1)/(n + 1). ``name`` says
    which null was resampled (``permutation``, ``self-map``)."""

    name: str
    exceedances: int
    resamples: int

    def to_dict(self) -> JSONObject:
        return {"name": self.name, "exceedances": self.exceedances, "resamples": self.resamples}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResamplingPart:
        return cls(str(d["name"]), int(d["exceedances"]), int(d["resamples"]))


@dataclass(frozen=True)
class JointEvidence:
    """A test's place in a joint permutation block (one permutation of an attribute's group
    codes shared by all its pairs and ratio metrics), used by ``multiplicity: maxt``: ``block``
    names it, ``rank`` is the test's position in the block's step-down order, and ``part`` counts
    the permutations whose maximum over the tests at or after it is at least as extreme."""

    block: str
    rank: int
    part: ResamplingPart

    def to_dict(self) -> JSONObject:
        return {"block": self.block, "rank": self.rank, "part": self.part.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JointEvidence:
        return cls(str(d["block"]), int(d["rank"]), ResamplingPart.from_dict(d["part"]))


@dataclass(frozen=True)
class Finding:
    """One estimated quantity: estimate, interval, and (when tested) p-values and decision.

    ``key`` is a flat, MLflow-safe metric name such as ``dp_gap.sex.female_male``; ``label`` is the
    human-readable name; ``reading`` is a one-line plain-language reading for the verdict table.
    ``adjusted_pvalue`` is filled by the audit's multiplicity adjustment and ``decision`` is taken
    on it (``reject`` means the null hypothesis ``null_hypothesis`` is rejected at ``alpha``).

    ``resampling`` lists the Monte-Carlo estimates behind a resampling p-value (empty for an exact
    one; p = max over the parts); the audit may draw more, and then records the final counts,
    the Monte-Carlo interval ``pvalue_bounds`` of the ideal p-value and, for an ``undetermined``
    decision, ``resamples_needed`` (:mod:`fairengine.decisions`). ``question`` names the quantity
    tested (``tpr.sex.female_male``) and ``null_kind`` the kind of null (``tolerance``: |gap| ≤
    τ; ``zero``: no difference); findings answering the same question get one deciding test, the
    others are ``supporting`` with ``decided_by`` naming it.
    """

    key: str
    label: str
    estimate: float
    interval: Interval | None = None
    pvalue: float | None = None
    adjusted_pvalue: float | None = None
    null_hypothesis: str = ""
    decision: Decision = "not_tested"
    reading: str = ""
    resampling: Sequence[ResamplingPart] = ()
    pvalue_bounds: tuple[float, float] | None = None
    resamples_needed: float | None = None
    question: str | None = None
    null_kind: str = ""
    decided_by: str | None = None
    joint: JointEvidence | None = None

    def __post_init__(self) -> None:
        freeze_sequences(self, "resampling")

    @property
    def tested(self) -> bool:
        return self.pvalue is not None

    @property
    def counts(self) -> bool:
        """Whether this finding's decision counts in the verdict (tested and not supporting)."""
        return self.pvalue is not None and self.decision != "supporting"

    def to_dict(self) -> JSONObject:
        return {
            "key": self.key,
            "label": self.label,
            "estimate": encode_float(self.estimate),
            "interval": self.interval.to_dict() if self.interval else None,
            "pvalue": encode_float(self.pvalue),
            "adjusted_pvalue": encode_float(self.adjusted_pvalue),
            "null_hypothesis": self.null_hypothesis,
            "decision": self.decision,
            "reading": self.reading,
            "resampling": [p.to_dict() for p in self.resampling],
            "pvalue_bounds": (
                None
                if self.pvalue_bounds is None
                else [encode_float(v) for v in self.pvalue_bounds]
            ),
            "resamples_needed": encode_float(self.resamples_needed),
            "question": self.question,
            "null_kind": self.null_kind,
            "decided_by": self.decided_by,
            "joint": self.joint.to_dict() if self.joint else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            key=d["key"],
            label=d["label"],
            estimate=decode_float(d["estimate"]),  # type: ignore[arg-type]
            interval=Interval.from_dict(d["interval"]) if d.get("interval") else None,
            pvalue=decode_float(d.get("pvalue")),
            adjusted_pvalue=decode_float(d.get("adjusted_pvalue")),
            null_hypothesis=d.get("null_hypothesis", ""),
            decision=d.get("decision", "not_tested"),
            reading=d.get("reading", ""),
            resampling=[ResamplingPart.from_dict(p) for p in d.get("resampling") or []],
            pvalue_bounds=(
                None
                if d.get("pvalue_bounds") is None
                else (
                    float(decode_float(d["pvalue_bounds"][0])),  # type: ignore[arg-type]
                    float(decode_float(d["pvalue_bounds"][1])),  # type: ignore[arg-type]
                )
            ),
            resamples_needed=decode_float(d.get("resamples_needed")),
            question=d.get("question"),
            null_kind=d.get("null_kind", ""),
            decided_by=d.get("decided_by"),
            joint=JointEvidence.from_dict(d["joint"]) if d.get("joint") else None,
        )


@dataclass(frozen=True)
class MethodDetails:
    """Base of every method's typed details: what its report view draws (per-group tables,
    null distributions, flipsets...), beyond its :class:`Finding` list.

    A method declares its own frozen dataclass (nested frozen dataclasses for its tables) and
    names it in its :class:`~fairengine.registry.MethodSpec`; :meth:`to_dict` and
    :meth:`from_dict` are the lossless JSON round trip of :mod:`fairengine.result_codec`.
    """

    _custom_json: ClassVar[bool] = False

    def to_dict(self) -> dict[str, JSONValue]:
        out = encode(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> MethodDetails:
        result: MethodDetails = decode(cls, d, "details")
        return result


@dataclass(frozen=True)
class NoDetails(MethodDetails):
    """The details of a method that failed or did not run (nothing to draw)."""


@dataclass(frozen=True)
class UnknownDetails(MethodDetails):
    """Details kept verbatim because no type reads them: a method registered outside this
    package and not imported by the reading process, or an ``audit.json`` of an older format
    whose details do not match today's type (``note`` says which). The report shows them as
    JSON; writing them back gives the same JSON."""

    data: dict[str, JSONValue]
    note: str = ""
    _custom_json: ClassVar[bool] = True

    def to_dict(self) -> dict[str, JSONValue]:
        return dict(self.data)

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> UnknownDetails:
        return cls(data=dict(d))


_DETAIL_TYPES: dict[str, type[MethodDetails]] = {}


def register_details(method: str, details: type[MethodDetails]) -> None:
    """Read the details of results of ``method`` as ``details`` (done by
    :class:`~fairengine.registry.MethodSpec` for every registered method)."""
    _DETAIL_TYPES[method] = details


def details_type(method: str) -> type[MethodDetails] | None:
    """The details type registered for ``method`` (None: read as :class:`UnknownDetails`).
    The built-in methods register theirs when :mod:`fairengine.registry` is imported;
    :func:`fairengine.audit_file.read_audit` does that before reading a file."""
    return _DETAIL_TYPES.get(method)


@dataclass(frozen=True)
class Artifact:
    """A file a method produced for the MLflow run (``path`` on this machine), logged as
    ``artifacts/<method>/<name>``."""

    path: str
    name: str


@dataclass(frozen=True)
class MethodResult:
    """The result of one audit method (e.g. ``group_parity``).

    ``details`` is the method's typed details (:class:`MethodDetails`; :class:`NoDetails` when
    it did not run). ``status`` is ``failed`` (with ``reason``) when an optional step failed,
    ``not_run`` when the method was not requested or not applicable (with ``reason``).
    Frozen: the audit's decision step (:func:`fairengine.verdict.apply_decisions`) returns
    new results with the findings decided (adjusted p-values, decisions).
    """

    method: str
    title: str
    status: MethodStatus = "ok"
    parameters: dict[str, JSONLike] = field(default_factory=dict)
    findings: Sequence[Finding] = ()
    details: MethodDetails = field(default_factory=NoDetails)
    reason: str | None = None
    warnings: Sequence[str] = ()
    seconds: float | None = None
    artifacts: Sequence[Artifact] = ()

    def __post_init__(self) -> None:
        freeze_sequences(self, "findings", "warnings", "artifacts")
        if not isinstance(self.details, MethodDetails):
            raise TypeError(
                f"method {self.method!r}: details must be a MethodDetails (a frozen dataclass "
                f"declared by the method), got {type(self.details).__name__}"
            )

    def to_dict(self) -> JSONObject:
        return {
            "method": self.method,
            "title": self.title,
            "status": self.status,
            "parameters": to_jsonable(self.parameters),
            "findings": [f.to_dict() for f in self.findings],
            "details": self.details.to_dict(),
            "reason": self.reason,
            "warnings": list(self.warnings),
            "seconds": self.seconds,
            "artifacts": [{"path": a.path, "name": a.name} for a in self.artifacts],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, strict: bool = True) -> MethodResult:
        """Read one method's JSON. Its details are read as the type registered for the method;
        one that does not match raises :class:`ResultFormatError` (``strict``, the current
        format) or is kept as :class:`UnknownDetails` with the reason (older formats)."""
        name = d["method"]
        raw = d.get("details") or {}
        details: MethodDetails
        kind = details_type(name)
        if not raw:  # a method that did not run, or wrote no details
            details = NoDetails()
        elif kind is None:
            details = UnknownDetails(
                data=raw,
                note=f"no details type registered for {name!r} (fairengine.audit_file."
                "read_audit reads a file with every built-in method's type)",
            )
        else:
            try:
                details = kind.from_dict(raw)
            except ResultFormatError as exc:
                if strict:
                    raise ResultFormatError(f"method {name!r}: {exc}") from exc
                details = UnknownDetails(data=raw, note=f"older format: {exc}")
        return cls(
            method=name,
            title=d.get("title", name),
            status=d.get("status", "ok"),
            parameters=d.get("parameters", {}),
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            details=details,
            reason=d.get("reason"),
            warnings=list(d.get("warnings", [])),
            seconds=d.get("seconds"),
            artifacts=[Artifact(str(a["path"]), str(a["name"])) for a in d.get("artifacts", [])],
        )


@dataclass(frozen=True)
class ExpectationOutcome:
    """One data-validation check: what was expected, on which column, and what was found."""

    expectation: str
    column: str | None
    success: bool
    description: str
    unexpected_count: int | None = None
    unexpected_examples: Sequence[JSONValue] = ()
    observed: JSONValue = None

    def __post_init__(self) -> None:
        freeze_sequences(self, "unexpected_examples")

    def to_dict(self) -> JSONObject:
        return to_jsonable(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExpectationOutcome:
        # A JSON payload: values are taken as stored (a missing key gives None).
        fields: dict[str, Any] = {f.name: d.get(f.name) for f in dataclasses.fields(cls)}
        return cls(**fields)


@dataclass(frozen=True)
class ValidationResult:
    """The outcome of data validation: overall success and every check's outcome."""

    success: bool
    engine: str
    n_rows: int
    expectations: Sequence[ExpectationOutcome] = ()

    def __post_init__(self) -> None:
        freeze_sequences(self, "expectations")

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success]

    def to_dict(self) -> JSONObject:
        return {
            "success": self.success,
            "engine": self.engine,
            "n_rows": self.n_rows,
            "expectations": [e.to_dict() for e in self.expectations],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValidationResult:
        return cls(
            success=bool(d["success"]),
            engine=d.get("engine", ""),
            n_rows=int(d.get("n_rows", 0)),
            expectations=[ExpectationOutcome.from_dict(e) for e in d.get("expectations", [])],
        )


@dataclass(frozen=True)
class Verdict:
    """The audit's overall verdict.

    ``fail``: at least one tested finding rejects its null hypothesis after multiplicity
    adjustment. ``incomplete``: no rejection, but a requested method failed. ``pass``: every
    requested method ran and no test rejected (absence of evidence of disparity at ``alpha``,
    not proof of fairness).
    """

    status: VerdictStatus
    summary: str
    reasons: Sequence[str] = ()

    def __post_init__(self) -> None:
        freeze_sequences(self, "reasons")

    def to_dict(self) -> JSONObject:
        return {"status": self.status, "summary": self.summary, "reasons": list(self.reasons)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(status=d["status"], summary=d["summary"], reasons=list(d.get("reasons", [])))


@dataclass(frozen=True)
class DecisionRecord:
    """How the audit's decisions were taken (:func:`fairengine.verdict.apply_decisions`): which
    null decides a gap, the resampling settings, and the counts behind the verdict."""

    gap_null: str = "tolerance"
    resampling_risk: float = 1e-3
    max_resamples: int = 99_999
    growth: float = 2.0
    n_tests: int = 0
    n_rejected: int = 0
    n_not_rejected: int = 0
    n_undetermined: int = 0
    n_supporting: int = 0
    resamples_drawn: int = 0
    looks: int = 0

    def to_dict(self) -> JSONObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecisionRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


AUDIT_SCHEMA = "fairengine.audit/2"
"""The format of ``audit.json`` this version writes (2: typed method details, artifacts listed
per method)."""
AUDIT_SCHEMAS = ("fairengine.audit/0", "fairengine.audit/1", AUDIT_SCHEMA)
"""The formats it reads. 0 (files from before the format was named) and 1 have the same
fields; their method details are read as today's types where they match and kept verbatim
(:class:`UnknownDetails`) where they do not, so their findings and verdicts still feed the
report's trend section."""


class AuditFormatError(FairEngineError):
    """An ``audit.json`` in a format this version does not read."""


@dataclass(frozen=True)
class AuditResult:
    """Everything one audit produced: config, data/model identity, validation, methods, verdict.

    ``config`` is the audit's settings as JSON (:meth:`fairengine.config.AuditConfig.to_dict`);
    ``dataset``, ``model`` and ``metadata`` are typed (:mod:`fairengine.audit_context`).
    """

    audit_id: str
    created_at: str
    config: JSONObject
    dataset: DatasetSummary
    model: ModelIdentity
    validation: ValidationResult | None
    methods: Sequence[MethodResult]
    alpha: float
    multiplicity: str
    verdict: Verdict
    metadata: AuditMetadata = field(default_factory=AuditMetadata)
    warnings: Sequence[str] = ()
    """Input warnings a reader must see next to the verdict (data cleaning applied, score
    source caveats, ...); each is one sentence naming the column or setting."""
    decisions: DecisionRecord | None = None

    def __post_init__(self) -> None:
        freeze_sequences(self, "methods", "warnings")

    def method(self, name: str) -> MethodResult:
        """The result of method ``name``; raises ``KeyError`` naming the available ones."""
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(f"no method {name!r} in this audit; have {[m.method for m in self.methods]}")

    def findings(self) -> list[Finding]:
        return [f for m in self.methods for f in m.findings]

    def to_dict(self) -> JSONObject:
        return {
            "schema": AUDIT_SCHEMA,
            "audit_id": self.audit_id,
            "created_at": self.created_at,
            "config": encode(self.config),
            "dataset": self.dataset.to_dict(),
            "model": self.model.to_dict(),
            "validation": self.validation.to_dict() if self.validation else None,
            "methods": [m.to_dict() for m in self.methods],
            "alpha": self.alpha,
            "multiplicity": self.multiplicity,
            "verdict": self.verdict.to_dict(),
            "metadata": self.metadata.to_dict(),
            "warnings": list(self.warnings),
            "decisions": self.decisions.to_dict() if self.decisions else None,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditResult:
        """Read an ``audit.json`` dictionary. Files written before the format was named (no
        ``schema``) read as format 0, which has the same fields; a format this version does
        not know is an :class:`AuditFormatError` naming it and the formats it reads."""
        schema = d.get("schema", "fairengine.audit/0")
        if schema not in AUDIT_SCHEMAS:
            raise AuditFormatError(
                f"audit result format {schema!r} is not one this FairEngine reads "
                f"({list(AUDIT_SCHEMAS)}); it was written by another version"
            )
        return cls(
            audit_id=d["audit_id"],
            created_at=d["created_at"],
            config=dict(d.get("config") or {}),
            dataset=DatasetSummary.from_dict(d.get("dataset") or {}, "dataset"),
            model=ModelIdentity.from_dict(d.get("model") or {}, "model"),
            validation=ValidationResult.from_dict(d["validation"]) if d.get("validation") else None,
            methods=[
                MethodResult.from_dict(m, strict=schema == AUDIT_SCHEMA)
                for m in d.get("methods", [])
            ],
            alpha=float(d["alpha"]),
            multiplicity=d.get("multiplicity", "holm"),
            verdict=Verdict.from_dict(d["verdict"]),
            metadata=AuditMetadata.from_dict(d.get("metadata") or {}, "metadata"),
            warnings=list(d.get("warnings", [])),
            decisions=DecisionRecord.from_dict(d["decisions"]) if d.get("decisions") else None,
        )

    @classmethod
    def from_json(cls, text: str) -> AuditResult:
        return cls.from_dict(json.loads(text))

    def flat_metrics(self) -> dict[str, float]:
        """Flat ``{name: value}`` metrics for MLflow: estimate, interval ends and p-values.

        Names are the findings' keys (``dp_gap.sex.female_male``) with suffixes ``.ci_low``,
        ``.ci_high``, ``.pvalue``, ``.pvalue_adj``; non-finite values are left out. Raises
        :class:`~fairengine.finding_keys.FindingKeyError` if two findings would produce the same
        name (whether or not its value is finite) rather than let one value overwrite another.
        """
        out: dict[str, float] = {}
        owner: dict[str, str] = {}
        for f in self.findings():
            low, high = (f.interval.low, f.interval.high) if f.interval else (None, None)
            values = (f.estimate, low, high, f.pvalue, f.adjusted_pvalue)
            for name, value in zip(flat_names(f.key), values, strict=True):
                if name in owner:
                    raise FindingKeyError(
                        f"internal error (a FairEngine bug, please report it): metric name "
                        f"{name!r} is produced by both {owner[name]!r} and {f.label!r}"
                    )
                owner[name] = f.label
                if value is not None and math.isfinite(value):
                    out[name] = float(value)
        return out
