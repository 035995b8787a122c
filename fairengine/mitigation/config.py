"""Configuration of the mitigation step (``methods.mitigation`` in the audit YAML).

Every field has a documented default; :meth:`MitigationConfig.__post_init__` raises
:class:`~fairengine.errors.ConfigError` naming ``methods.mitigation.<field>``. Defaults marked
"ours" are FairEngine's choices (the seed paper's are not available, notes §1.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fairengine.errors import ConfigError
from fairengine.intersectional.config import check_attributes_and_bins
from fairengine.mitigation.postprocessor import VARIANTS, RTDPPostProcessor
from fairengine.mitigation.registration import REGISTER_POLICIES
from fairengine.setting_checks import require_integers

WHERE = "methods.mitigation"


@dataclass
class MitigationConfig:
    """Post-processing to an intersectional ε target with the RTDP (:func:`run_mitigation`).

    enabled : run the step. Default False (it proposes a new model; it does not audit).
    attributes : attributes whose intersections are constrained; None = all protected ones.
        A numeric column may be named when ``bins`` bins it (e.g. age).
    bins : ``{column: [edges...]}`` right-closed bins for numeric attributes. Default {}.
    constraints : metrics whose ε is bounded, any of sp, tpr, fpr, eo. Default [eo].
    epsilon : target ε (ratio e^{−ε} between any two intersections' rates). Default 0.2 (ours).
    variants : RTDP variants fitted and compared: randomization_only, thresholds_only,
        sequential, overall. Default all four.
    deploy : the variant whose rule becomes the mitigated model. Default overall.
    cost_fp, cost_fn : costs of false positives / negatives. Default 1, 1 (accuracy).
    outcomes : positive (default) or both (Foulds' DF: also 1 − rate).
    smoothing_alpha, smoothing_beta : α, β of the smoothed rates reported on held-out data.
        Default 0.5 (as the intersectional audit).
    fit_smoothing : α = β of the rates the LP constrains on the calibration split. Default 0
        (empirical rates): smoothing there lets the LP make a small intersection all-negative
        while its smoothed rate α/(d + 2α) still fits the window.
    n_thresholds : candidate thresholds per intersection (score quantiles). Default 50.
    rate_floor : smallest allowed constrained rate δ. Default 0.001.
    monotone : require p ≤ q per intersection. Default True.
    min_support, exclude_sparse : intersections with fewer rows than ``min_support`` in a rate's
        denominator are flagged; with ``exclude_sparse`` left unconstrained. Default 30, False.
    robust_draws : posterior scenarios of the robust constraint (0 = off). Default 0.
    test_size : share of rows held out for evaluation; the rest is the calibration (fitting)
        split. Stratified by (intersection, label). Default 0.5.
    n_posterior : posterior draws for held-out ε intervals. Default 4000.
    n_realised : realised-decision draws for the realised ε. Default 200.
    confidence_level : level of intervals and one-sided bounds. Default 0.95.
    max_sweeps, max_seconds : limits of the overall variant's search. Default 5, 60.
    fallback : rule of intersections unseen at fit time: parent (default) or global.
    compare_fairlearn : also fit fairlearn's ThresholdOptimizer on one attribute and compare
        (needs fairlearn installed; skipped with a warning otherwise). Default True.
    compare_attribute : the attribute of that comparison. Default: the first of ``attributes``.
    register : register the deployed rule wrapped around the audited model as a new version of
        the registered model (needs ``model.uri`` as ``models:/name/version`` or an alias).
        Default False.
    register_if : when the mitigated model is registered (:mod:`.registration`): upper_bound
        (the held-out ε's one-sided ``confidence_level`` upper bound ≤ ``epsilon`` for every
        constrained metric), point (the held-out point estimate ≤ ``epsilon``) or always.
        Default upper_bound (ours: a registered model is certified on held-out data).
    max_intersections : cap on the number of intersections. Default 10000.
    """

    enabled: bool = False
    attributes: list[str] | None = None
    bins: dict[str, Any] = field(default_factory=dict)
    constraints: list[str] = field(default_factory=lambda: ["eo"])
    epsilon: float = 0.2
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    deploy: str = "overall"
    cost_fp: float = 1.0
    cost_fn: float = 1.0
    outcomes: str = "positive"
    smoothing_alpha: float = 0.5
    smoothing_beta: float = 0.5
    fit_smoothing: float = 0.0
    n_thresholds: int = 50
    rate_floor: float = 0.001
    monotone: bool = True
    min_support: int = 30
    exclude_sparse: bool = False
    robust_draws: int = 0
    test_size: float = 0.5
    n_posterior: int = 4000
    n_realised: int = 200
    confidence_level: float = 0.95
    max_sweeps: int = 5
    max_seconds: float = 60.0
    fallback: str = "parent"
    compare_fairlearn: bool = True
    compare_attribute: str | None = None
    register: bool = False
    register_if: str = "upper_bound"
    max_intersections: int = 10_000

    def __post_init__(self) -> None:
        def bad(key: str, what: str) -> ConfigError:
            return ConfigError(f"{WHERE}.{key} must be {what}, got {getattr(self, key)!r}")

        check_attributes_and_bins(WHERE, self.attributes, self.bins)
        if isinstance(self.epsilon, int | float) and math.isinf(self.epsilon):
            raise bad("epsilon", "a finite number >= 0")
        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise bad("variants", f"a non-empty list from {list(VARIANTS)}")
        if self.deploy not in self.variants:
            raise ConfigError(
                f"{WHERE}.deploy must be one of the fitted variants {self.variants}, "
                f"got {self.deploy!r}"
            )
        for key in ("smoothing_alpha", "smoothing_beta", "fit_smoothing"):
            v = getattr(self, key)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and v >= 0)
            ):
                raise bad(key, "a finite number >= 0")
        # the estimator's own checks, with this section's key names
        try:
            self.postprocessor(self.deploy)._check_params()
        except ConfigError as exc:
            raise ConfigError(f"{WHERE}.{exc}") from None
        require_integers(
            WHERE,
            self,
            (("min_support", 1), ("n_posterior", 10), ("n_realised", 0), ("max_intersections", 2)),
        )
        if not 0.05 <= self.test_size <= 0.95:
            raise bad("test_size", "in [0.05, 0.95]")
        if not 0.5 <= self.confidence_level < 1:
            raise bad("confidence_level", "in [0.5, 1)")
        if not isinstance(self.register_if, str) or self.register_if not in REGISTER_POLICIES:
            raise bad("register_if", f"one of {list(REGISTER_POLICIES)}")

    def postprocessor(
        self,
        variant: str,
        *,
        base_threshold: float = 0.5,
        seed: int = 0,
        epsilon: float | None = None,
    ) -> RTDPPostProcessor:
        """The :class:`RTDPPostProcessor` of ``variant`` with this section's settings."""
        return RTDPPostProcessor(
            constraints=tuple(self.constraints),
            epsilon=self.epsilon if epsilon is None else epsilon,
            variant=variant,
            cost_fp=self.cost_fp,
            cost_fn=self.cost_fn,
            outcomes=self.outcomes,
            smoothing_alpha=self.fit_smoothing,
            smoothing_beta=self.fit_smoothing,
            base_threshold=base_threshold,
            n_thresholds=self.n_thresholds,
            rate_floor=self.rate_floor,
            monotone=self.monotone,
            min_support=self.min_support,
            exclude_sparse=self.exclude_sparse,
            robust_draws=self.robust_draws,
            max_sweeps=self.max_sweeps,
            max_seconds=self.max_seconds,
            fallback=self.fallback,
            random_state=seed,
        )
