"""Configuration of the regression method (``methods.regression_metrics`` in the audit YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairengine.errors import ConfigError
from fairengine.setting_checks import require_alternative, require_integers, require_level

#: The group differences the method can test (:data:`fairengine.regression.DIFFERENCE_METRICS`).
REGRESSION_DIFFERENCES = ("mean_prediction", "mean_residual", "mae", "mse")
#: The losses of the bounded-group-loss check (:data:`fairengine.regression.LOSSES`).
REGRESSION_LOSSES = ("squared", "absolute")


@dataclass
class RegressionConfig:
    """Fairness of a regression model (``task: regression``;
    :func:`fairengine.regression.method.run_regression_metrics`).

    ``metrics``: the group differences tested for every pair of groups of each protected
    attribute (studentized permutation tests, DiCiccio et al. 2020): ``mean_prediction``,
    ``mean_residual`` (bias, y − ŷ), ``mae``, ``mse``. ``distance_tests``: also test the
    Kolmogorov–Smirnov and Wasserstein-1 distances between the groups' predictions.
    ``n_permutations``: permutations per pair (shared by its tests; default 1,999).
    ``max_pairs``: at most this many pairs per attribute (the largest groups first; default
    15). ``loss_bound``: ζ of bounded group loss (Agarwal, Dudík & Wu 2019) — each group's
    mean ``loss`` is tested against it (null: loss ≤ ζ); ``None`` (default) skips the check.
    ``confidence_level``: of every interval (default 0.95). ``alternative``: ``two-sided``,
    ``greater`` or ``less``.
    """

    enabled: bool = True
    metrics: list[str] = field(default_factory=lambda: list(REGRESSION_DIFFERENCES))
    distance_tests: bool = True
    n_permutations: int = 1999
    max_pairs: int = 15
    loss_bound: float | None = None
    loss: str = "squared"
    confidence_level: float = 0.95
    alternative: str = "two-sided"

    def __post_init__(self) -> None:
        unknown = [m for m in self.metrics if m not in REGRESSION_DIFFERENCES]
        if unknown or not self.metrics:
            raise ConfigError(
                f"methods.regression_metrics.metrics must list some of "
                f"{list(REGRESSION_DIFFERENCES)}, got {self.metrics!r}"
            )
        where = "methods.regression_metrics"
        require_integers(where, self, (("n_permutations", 19), ("max_pairs", 1)))
        if self.loss_bound is not None and not float(self.loss_bound) >= 0:
            raise ConfigError(
                f"methods.regression_metrics.loss_bound must be >= 0 or null, "
                f"got {self.loss_bound!r}"
            )
        if self.loss not in REGRESSION_LOSSES:
            raise ConfigError(
                f"methods.regression_metrics.loss must be one of {list(REGRESSION_LOSSES)}, "
                f"got {self.loss!r}"
            )
        require_level(where, "confidence_level", self.confidence_level)
        require_alternative(where, self.alternative)
