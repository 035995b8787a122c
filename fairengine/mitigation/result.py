"""The typed details of the mitigation step (:func:`fairengine.mitigation.run_mitigation`).

Frozen dataclasses read and written by :mod:`fairengine.result_codec`; their JSON is the
``details`` of the ``mitigation`` entry of ``audit.json``:

* :class:`MitigationDetails`: what every run keeps (the variants tried and the audited model's
  held-out evaluation); the details of a run whose deployed variant could not be fitted.
* :class:`DeployedMitigation`: a run whose deployed variant was fitted: the rule
  (:class:`DeployedRule`, what the registered MLflow model applies), held-out ε before and after,
  the registration decision, the per-intersection table and the fairlearn comparison.

:meth:`MitigationDetails.from_dict` reads either form (the fitted one carries
``postprocessor``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Literal

from fairengine.mitigation.estimates import EpsilonEstimate, Estimate
from fairengine.mitigation.registration import RegistrationDecision
from fairengine.result_codec import JSONValue, ResultFormatError, decode, encode
from fairengine.results import MethodDetails

RATES = ("fpr", "selection_rate", "tpr")
"""The rates a constraint bounds (:data:`fairengine.mitigation.rates.CONSTRAINT_RATES`)."""


@dataclass(frozen=True)
class SplitEvaluation:
    """One rule evaluated on one split: ε per constrained metric, and expected cost per row,
    accuracy, TPR, FPR and selection rate with normal intervals at ``confidence_level``
    (:func:`fairengine.mitigation.evaluation.evaluate_rule`)."""

    epsilon: dict[str, EpsilonEstimate]
    loss: Estimate
    accuracy: Estimate
    tpr: Estimate
    fpr: Estimate
    selection_rate: Estimate
    confidence_level: float


@dataclass(frozen=True, kw_only=True)
class BaseEvaluation:
    """The audited model (threshold τ₀ on its score) on the held-out split (``test``) and on
    the calibration split (``fit``; None when the deployed variant could not be fitted)."""

    fit: SplitEvaluation | None = None
    test: SplitEvaluation


@dataclass(frozen=True)
class VariantFit:
    """One RTDP variant fitted on the calibration split: its fit cost and ε there, its held-out
    evaluation, whether the held-out ε meets the target at the upper bound (``meets_target``) or
    at the point estimate, the LP solves, sweeps and worst LP constraint violation, whether
    thresholds alone were feasible (None: not searched), seconds, warnings, and whether it is
    the deployed variant (None when no variant was deployed)."""

    variant: str
    title: str
    status: Literal["ok"]
    fit_loss: float
    fit_epsilon: dict[str, float]
    test: SplitEvaluation
    meets_target: bool
    point_meets_target: bool
    n_lp_solves: int
    sweeps: int
    lp_max_violation: float
    thresholds_feasible: bool | None
    seconds: float
    warnings: tuple[str, ...]
    deployed: bool | None = None


@dataclass(frozen=True)
class VariantFailure:
    """One RTDP variant that could not be fitted (``infeasible``: no rule meets the target on the
    calibration split; ``failed``: the solver failed), with the reason."""

    variant: str
    title: str
    status: Literal["infeasible", "failed"]
    reason: str
    deployed: bool | None = None


@dataclass(frozen=True)
class Split:
    """The calibration (fitting) and held-out split: rows in each, the held-out share, and the
    strata of the stratified split."""

    fit_rows: int
    test_rows: int
    test_size: float
    stratified_by: str


@dataclass(frozen=True)
class ComparisonRow:
    """One rule on the comparison attribute's held-out rows: expected cost per row, accuracy,
    and smoothed ε per constrained metric."""

    name: str
    loss: float
    accuracy: float
    epsilon: dict[str, float]


@dataclass(frozen=True)
class Comparison:
    """RTDP (at the target ε and at 0) against fairlearn's ThresholdOptimizer on one attribute;
    ``fairlearn`` names the constraint fairlearn equalised (None: it was not run or failed)."""

    attribute: str
    rows: tuple[ComparisonRow, ...]
    fairlearn: str | None


@dataclass(frozen=True)
class IntersectionRule:
    """The deployed rule of one intersection: rows in each split, threshold τ, flip
    probabilities p (at or below τ) and q (above τ), the rule in words, the intersection whose
    rule it uses when it had no calibration rows, and the LP window sides it sits on."""

    intersection: str
    n_fit: int
    n_test: int
    threshold: float
    p: float
    q: float
    rule: str
    fallback_from: str | None
    binding: tuple[str, ...]


@dataclass(frozen=True)
class RateChange:
    """One rate of an intersection on the held-out split before and after mitigation (None: no
    rows in its denominator)."""

    before: float | None
    after: float | None


@dataclass(frozen=True)
class IntersectionRow(IntersectionRule):
    """A row of the per-intersection table: the intersection's rule and each constrained rate
    (:data:`RATES`) before and after. Its JSON keeps the rates as the flat keys
    ``<rate>_before`` and ``<rate>_after`` beside the rule's fields (format 1's shape), present
    for the constrained rates only."""

    rates: dict[str, RateChange]
    _custom_json: ClassVar[bool] = True

    def to_dict(self) -> dict[str, JSONValue]:
        out = {f.name: encode(getattr(self, f.name)) for f in fields(IntersectionRule)}
        for r, change in self.rates.items():
            out[f"{r}_before"] = encode(change.before)
            out[f"{r}_after"] = encode(change.after)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> IntersectionRow:
        fixed = dict(d)
        rates: dict[str, RateChange] = {}
        for r in RATES:
            keys = (f"{r}_before", f"{r}_after")
            if not any(k in fixed for k in keys):
                continue
            if not all(k in fixed for k in keys):
                raise ResultFormatError(f"intersection row: {r} needs both keys {list(keys)}")
            before: float | None = decode(float | None, fixed.pop(keys[0]), keys[0])
            after: float | None = decode(float | None, fixed.pop(keys[1]), keys[1])
            rates[r] = RateChange(before, after)
        rule: IntersectionRule = decode(IntersectionRule, fixed, "intersection row")
        return cls(**{f.name: getattr(rule, f.name) for f in fields(rule)}, rates=rates)


@dataclass(frozen=True)
class DeployedRule:
    """The deployed rule as plain data, as the MLflow pyfunc model stores it (JSON) and
    :func:`fairengine.mitigation.apply_rule` applies it: per intersection (flat index in the
    grid of ``attributes`` × ``levels``, numeric attributes binned by ``bins``) the threshold
    τ_s and flip probabilities p_s, q_s, whether it had calibration rows (``seen``) and whose
    rule it uses (``source``); unknown categories get the rule of ``global_source``. Also the
    fitted settings (constraints, ε, variant, outcomes) and the score type of the audit."""

    thresholds: tuple[float, ...]
    p: tuple[float, ...]
    q: tuple[float, ...]
    grid_shape: tuple[int, ...]
    seen: tuple[bool, ...]
    source: tuple[int, ...]
    global_source: int
    constraints: tuple[str, ...]
    epsilon: float
    variant: str
    outcomes: str
    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    bins: dict[str, tuple[float, ...]]
    score_type: str

    def to_dict(self) -> dict[str, JSONValue]:
        """The rule's JSON (strict: non-finite numbers as strings)."""
        out = encode(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> DeployedRule:
        result: DeployedRule = decode(cls, d, "postprocessor")
        return result


@dataclass(frozen=True)
class MitigationDetails(MethodDetails):
    """The variants tried (fitted or not) and the audited model's evaluation: the details of
    every mitigation run, and all of them when the deployed variant could not be fitted."""

    variants: tuple[VariantFit | VariantFailure, ...]
    base: BaseEvaluation

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> MitigationDetails:
        """Read the details as :class:`DeployedMitigation` when they hold a rule
        (``postprocessor``), else as :class:`MitigationDetails`."""
        kind = DeployedMitigation if cls is MitigationDetails and "postprocessor" in d else cls
        result: MitigationDetails = decode(kind, d, "details")
        return result


@dataclass(frozen=True)
class DeployedMitigation(MitigationDetails):
    """A mitigation run whose deployed variant was fitted: the intersections (attributes,
    levels, bins, grid shape), constraints and target ε, the base threshold τ₀, the split, the
    held-out evaluation of the deployed rule (``after``), whether ``register_if`` allows
    registering it, the deployed variant and its rule, the fairlearn comparison (None: off or
    skipped) and the per-intersection table (None over
    :data:`~fairengine.mitigation.method.DETAILS_MAX_INTERSECTIONS` intersections)."""

    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    bins: dict[str, tuple[float, ...]]
    grid_shape: tuple[int, ...]
    constraints: tuple[str, ...]
    target_epsilon: float
    base_threshold: float
    split: Split
    after: SplitEvaluation
    registration: RegistrationDecision
    deploy: str
    comparison: Comparison | None
    postprocessor: DeployedRule
    intersections: tuple[IntersectionRow, ...] | None = None
