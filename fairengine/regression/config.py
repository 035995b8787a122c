"""Configuration of the regression method (``methods.regression_metrics`` in the audit YAML)."""

from __future__ import annotations

import itertools
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
    ``epsilon_bins``: ε-differential fairness of the binned predictions per attribute and over
    their intersection (:mod:`fairengine.regression.binned_epsilon`): the number of quantile
    bins (default 5) or the bin edges; ``null`` skips it. ``concentration``: its Dirichlet
    smoothing (α = concentration / bins per bin; default 1); ``epsilon_draws``: posterior draws
    for its interval (default 1,000; 0: none).
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
    epsilon_bins: int | list[float] | None = 5
    concentration: float = 1.0
    epsilon_draws: int = 1000
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
        bins = self.epsilon_bins
        if bins is not None and not (
            (isinstance(bins, int) and not isinstance(bins, bool) and bins >= 2)
            or (
                isinstance(bins, list)
                and bins
                and all(isinstance(e, int | float) and not isinstance(e, bool) for e in bins)
                and all(a < b for a, b in itertools.pairwise(bins))
            )
        ):
            raise ConfigError(
                f"{where}.epsilon_bins must be a whole number >= 2 (quantile bins), a list of "
                f"increasing bin edges, or null, got {bins!r}"
            )
        if not float(self.concentration) >= 0:
            raise ConfigError(f"{where}.concentration must be >= 0, got {self.concentration!r}")
        require_integers(where, self, (("epsilon_draws", 0),))
        require_level(where, "confidence_level", self.confidence_level)
        require_alternative(where, self.alternative)
