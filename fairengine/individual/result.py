"""The typed details of an individual-fairness result (method ``individual_fairness``).

:class:`IndividualFairnessDetails` is what a successful run of
:func:`~fairengine.individual.run_individual_fairness` keeps (Maity, Xue, Yurochkin & Sun,
ICLR 2021; notes ``individual.md`` §5): the model and fair-metric provenance, the attack's
settings, the loss-ratio test (eq. 3.4-3.10) and the error-rate-ratio test (eq. 3.11-3.12),
the per-row ratio histogram, T_n by number of steps, the top rows, displacement and per-group
summaries. A run whose attack diverged keeps only the attack's settings
(:class:`DivergedAttackDetails`). The JSON is the one the method has always written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, get_type_hints

from fairengine.result_codec import JSONValue, ResultFormatError, decode, encode
from fairengine.results import MethodDetails


@dataclass(frozen=True)
class ModelSummary:
    """The attacked model: its kind, description, whether its gradients are exact (False for
    surrogates and black-box gradients), the largest |P(y=1)| difference between the torch
    equivalent and the model on up to 2,000 rows (None when not checked) and the number of
    encoded (model-input) features."""

    kind: str
    description: str
    exact: bool
    max_abs_proba_difference: float | None
    n_encoded_features: int


@dataclass(frozen=True)
class SensitiveSubspaceProvenance:
    """The sensitive-subspace metric (the paper): span of the logistic regressions of the
    protected attributes plus the protected axes, fitted on ``n_fit_rows`` rows; ``fit`` is
    ``audit`` or ``holdout``."""

    metric: Literal["sensitive_subspace"]
    estimator: str
    n_fit_rows: int
    n_attributes: int
    protected_axes: tuple[int, ...]
    rank: int
    discount: float
    converged: bool
    fit: str


@dataclass(frozen=True)
class SVDProvenance:
    """The SVD sensitive-subspace metric: the top ``n_components`` right singular vectors of
    ``source`` (the stacked logistic coefficient vectors and axes) and their share of the
    squared singular values."""

    metric: Literal["svd_sensitive_subspace"]
    n_components: int
    n_fit_rows: int
    explained_share: float
    source: str
    fit: str


@dataclass(frozen=True)
class FACEProvenance:
    """The FACE metric: the top ``n_components`` principal directions of the within-group
    centred comparable sets (``n_groups`` of them)."""

    metric: Literal["face"]
    n_components: int
    n_fit_rows: int
    n_groups: int
    explained_share: float
    fit: str


@dataclass(frozen=True)
class EXPLOREProvenance:
    """The EXPLORE metric: fitted on ``n_pairs`` comparable/incomparable pairs by ``n_iter``
    steps of mini-batch gradient descent; ``final_nll`` the last negative log-likelihood."""

    metric: Literal["explore"]
    n_pairs: int
    n_iter: int
    batch_size: int
    init: str
    seed: int | None
    final_nll: float
    fit: str


@dataclass(frozen=True)
class MahalanobisProvenance:
    """A user-supplied Mahalanobis matrix Σ."""

    metric: Literal["mahalanobis"]
    source: str
    fit: str


@dataclass(frozen=True)
class DiscountedDirectionsProvenance:
    """Σ = I − (1 − discount) QQᵀ for ``n_directions`` user-given free directions."""

    metric: Literal["discounted_directions"]
    n_directions: int
    rank: int
    discount: float
    fit: str


MetricProvenance: TypeAlias = (
    SensitiveSubspaceProvenance
    | SVDProvenance
    | FACEProvenance
    | EXPLOREProvenance
    | MahalanobisProvenance
    | DiscountedDirectionsProvenance
)
"""How the fair metric was fitted (one type per metric, told apart by ``metric``)."""

_JSON_KEYS = {"lam": "lambda"}
"""Fields stored under another JSON key (``lambda`` is a Python keyword)."""

_Settings = TypeVar("_Settings", bound="AttackSettings")


@dataclass(frozen=True)
class AttackSettings:
    """The gradient-flow attack's settings (:func:`~fairengine.individual.attack.
    gradient_flow`): penalty λ (JSON key ``lambda``), steps, step size η and its schedule, total
    flow time Σ η_k, domain, device and dtype, σ_max of Σ and max η λ σ_max (< 1 for a stable
    Euler step), and the number of mutable and of all encoded features."""

    lam: float
    steps: int
    eta: float
    schedule: str
    power: float | None
    flow_time: float
    domain: str
    device: str
    dtype: str
    sigma_max: float
    max_eta_lambda_sigma: float
    n_mutable: int
    n_features: int

    _custom_json: ClassVar[bool] = True

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            _JSON_KEYS.get(f.name, f.name): encode(getattr(self, f.name))
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls: type[_Settings], d: dict[str, JSONValue]) -> _Settings:
        path = "details.attack"
        keys = {f.name: _JSON_KEYS.get(f.name, f.name) for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(keys.values()))
        if unknown:
            raise ResultFormatError(
                f"{path}: unknown key(s) {unknown} for {cls.__name__} "
                f"(known: {sorted(keys.values())})"
            )
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}  # each checked against its field's type by decode
        for name, key in keys.items():
            if key not in d:
                raise ResultFormatError(f"{path}.{key}: missing (a {cls.__name__} needs it)")
            values[name] = decode(hints[name], d[key], f"{path}.{key}")
        return cls(**values)


@dataclass(frozen=True)
class AttackRun(AttackSettings):
    """The attack's settings, its wall time in seconds and the audit's seed."""

    seconds: float
    seed: int


@dataclass(frozen=True)
class FloorDiagnostics:
    """§5.5 diagnostics of the loss floor ε: rows whose original loss is below it, the smallest
    original loss, the largest ratio, the share of the summed ratios carried by the top 1 % of
    rows and whether that share (> 0.2) makes the normal approximation unreliable."""

    eps: float
    n_below_floor: int
    min_loss_original: float
    max_ratio: float
    top1pct_share: float
    heavy_tail: bool


@dataclass(frozen=True)
class RatioTestSummary:
    """A one-sided ratio test of H0: ratio ≤ δ: the statistic, its standard error, the
    one-sided (1 − α) lower bound, the p-value, the two-sided (1 − α) interval (None when the
    statistic is not finite), the rows used, the status (``ok``, ``zero_variance``, …) and
    whether H0 is rejected before any multiplicity adjustment."""

    statistic: float
    standard_error: float
    lower_bound: float
    pvalue: float
    ci_low: float | None
    ci_high: float | None
    n: int
    status: str
    reject_unadjusted: bool


@dataclass(frozen=True)
class LossRatioSummary(RatioTestSummary):
    """The mean loss-ratio test (S_n, T_n; eq. 3.4-3.10), the non-finite ratios dropped and
    the loss floor's diagnostics."""

    n_dropped: int
    floor: FloorDiagnostics


@dataclass(frozen=True)
class ErrorRateRatioSummary(RatioTestSummary):
    """The error-rate-ratio test (τ̂ = ē1/ē0, eq. 3.11-3.12), the error rates at the original
    and at the attacked points, and whether its findings were reported (``error_rate_test``)."""

    error_rate_original: float
    error_rate_mapped: float
    enabled: bool


@dataclass(frozen=True)
class RatioHistogram:
    """Per-row loss ratios binned over ``edges`` (linear, up to the 99th percentile) and the
    number of ratios above the last edge."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    n_above: int


@dataclass(frozen=True)
class StepBound:
    """The loss-ratio test after ``step`` steps of the flow (flow time Σ η_k): S_n and T_n."""

    step: int
    flow_time: float
    statistic: float
    lower_bound: float


@dataclass(frozen=True)
class TopPoint:
    """One of the rows with the largest loss ratios: its index, label (0/1, a regression
    audit's target, a multiclass audit's class), ratio, losses and the model's output before
    and after the attack (P(y=1); a regression model's prediction; a multiclass model's
    probability of the row's class), squared fair distance moved, the original and attacked rows
    (table columns when the encoder can decode, else encoded features; numbers rounded to 6
    decimals) and the five largest changes of encoded features."""

    row: int
    label: int | float | str
    ratio: float
    loss_original: float
    loss_mapped: float
    proba_original: float
    proba_mapped: float
    sq_fair_distance: float
    original: dict[str, str | float]
    mapped: dict[str, str | float]
    largest_changes: dict[str, float]


@dataclass(frozen=True)
class Quantiles:
    """Mean and quantiles (min, 25 %, median, 75 %, 95 %, max) of a per-row quantity."""

    mean: float
    min: float
    q25: float
    median: float
    q75: float
    q95: float
    max: float


@dataclass(frozen=True)
class Displacement:
    """How far the attack moved the rows: squared fair distance and Euclidean distance (encoded
    space), and the share of the squared displacement inside the sensitive subspace (None for
    metrics without one: mahalanobis, explore)."""

    sq_fair_distance: Quantiles
    euclidean: Quantiles
    share_in_sensitive_subspace: float | None = None


@dataclass(frozen=True)
class GroupRatio:
    """One group of a protected attribute among the audited rows: its size, mean loss ratio and
    error rates before and after the attack (None for a group without audited rows)."""

    group: str
    n: int
    mean_ratio: float | None
    error_rate_original: float | None
    error_rate_mapped: float | None


@dataclass(frozen=True)
class IndividualFairnessDetails(MethodDetails):
    """The individual-fairness audit's details: tolerance δ and level α, rows audited, the
    model, the fair metric, the attack, both tests, the label flip rate (at 0.5; a multiclass
    audit: the share of rows whose predicted class the attack changes; None for regression) and
    mean losses, the ratio histogram (None when no ratio is finite), T_n by steps, the top rows,
    the displacement and the per-group summaries (attribute -> groups), and the audit's task,
    its loss on the model output (cross-entropy; the squared loss of a regression model; the
    softmax cross-entropy of a multiclass model: issue 22) and a multiclass audit's classes.
    A regression audit has no error-rate test (``error_rate_ratio.enabled`` is False)."""

    delta: float
    alpha: float
    n_audited: int
    model: ModelSummary
    metric: MetricProvenance
    attack: AttackRun
    loss_ratio: LossRatioSummary
    error_rate_ratio: ErrorRateRatioSummary
    label_flip_rate: float | None
    mean_loss_original: float
    mean_loss_mapped: float
    ratio_histogram: RatioHistogram | None
    lower_bound_by_steps: tuple[StepBound, ...]
    top_points: tuple[TopPoint, ...]
    displacement: Displacement
    per_group: dict[str, tuple[GroupRatio, ...]]
    task: str = "binary"
    loss: str = "cross-entropy"
    classes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> MethodDetails:
        """Read a successful run's details, or a diverged run's (only ``attack``) as
        :class:`DivergedAttackDetails`."""
        if set(d) == {"attack"}:
            diverged: DivergedAttackDetails = decode(DivergedAttackDetails, d, "details")
            return diverged
        details: IndividualFairnessDetails = decode(cls, d, "details")
        return details


@dataclass(frozen=True)
class DivergedAttackDetails(MethodDetails):
    """The details of a run whose attack diverged (status ``failed``): its settings."""

    attack: AttackSettings
