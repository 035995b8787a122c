"""Configuration of the multiclass method (``methods.multiclass_metrics`` in the audit YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairengine.errors import ConfigError
from fairengine.multiclass.inputs import PROBABILITY_MODES
from fairengine.setting_checks import require_alternative, require_integers, require_level

#: The per-class rates the method can test (:data:`fairengine.multiclass.RATE_METRICS`).
MULTICLASS_RATES = ("selection", "tpr", "fpr")


@dataclass
class MulticlassConfig:
    """Fairness of a multiclass classifier (``task: multiclass``;
    :func:`fairengine.multiclass.method.run_multiclass_metrics`).

    ``metrics``: the one-vs-rest rates compared, for every class and every pair of groups of
    each protected attribute, by studentized permutation tests: ``selection`` (P(ŷ = c)),
    ``tpr`` (P(ŷ = c | y = c)), ``fpr`` (P(ŷ = c | y ≠ c)). ``distance_tests``: also test the
    total variation, Jensen–Shannon and Hellinger distances between the groups' predicted-class
    distributions. ``n_permutations``: per pair (shared by its tests; default 1,999).
    ``max_pairs``: at most this many pairs per attribute (largest groups first; default 15).
    ``concentration``: the Dirichlet smoothing of ε-differential fairness over the K outcomes
    (α = concentration / K per outcome; default 1). ``confidence_level`` (default 0.95),
    ``alternative`` (``two-sided``, ``greater``, ``less``). ``probabilities``: how class
    probabilities (``columns.class_scores``, or a model with ``predict_proba``) are read:
    ``argmax`` (default; the predicted class, hard counts) or ``expected`` (expected counts
    Σ P_ic in place of 1{ŷ_i = c}: LiFT's generalized prediction counts; needs probabilities).
    """

    enabled: bool = True
    metrics: list[str] = field(default_factory=lambda: list(MULTICLASS_RATES))
    distance_tests: bool = True
    n_permutations: int = 1999
    max_pairs: int = 15
    concentration: float = 1.0
    confidence_level: float = 0.95
    alternative: str = "two-sided"
    probabilities: str = "argmax"

    def __post_init__(self) -> None:
        where = "methods.multiclass_metrics"
        unknown = [m for m in self.metrics if m not in MULTICLASS_RATES]
        if unknown or not self.metrics:
            raise ConfigError(
                f"{where}.metrics must list some of {list(MULTICLASS_RATES)}, got {self.metrics!r}"
            )
        require_integers(where, self, (("n_permutations", 19), ("max_pairs", 1)))
        if not float(self.concentration) >= 0:
            raise ConfigError(f"{where}.concentration must be >= 0, got {self.concentration!r}")
        require_level(where, "confidence_level", self.confidence_level)
        require_alternative(where, self.alternative)
        if self.probabilities not in PROBABILITY_MODES:
            raise ConfigError(
                f"{where}.probabilities must be one of {list(PROBABILITY_MODES)}, got "
                f"{self.probabilities!r}"
            )
