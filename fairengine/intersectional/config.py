"""Configuration of the intersectional differential-fairness audit (``methods.intersectional``).

Every field has a documented default; :meth:`IntersectionalConfig.__post_init__` raises
:class:`~fairengine.errors.ConfigError` naming the key path ``methods.intersectional.<field>``.
Defaults marked "ours" are FairEngine's choices (the seed paper's are not available, notes §1.1).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from fairengine.errors import ConfigError
from fairengine.intersectional.metrics import METRICS, OUTCOMES
from fairengine.setting_checks import require_integers

WHERE = "methods.intersectional"
HEADLINES: tuple[str, ...] = ("auto", "bootstrap", "bayesian")
SCHEMES: tuple[str, ...] = ("auto", "multinomial", "bayesian")


def check_attributes_and_bins(where: str, attributes: list[str] | None, bins: Any) -> None:
    """Shared checks of ``<where>.attributes`` (distinct names or null) and ``<where>.bins``
    (``{column: [at least 3 increasing numbers]}``); raises :class:`ConfigError`."""
    if attributes is not None and (not attributes or len(set(attributes)) != len(attributes)):
        raise ConfigError(
            f"{where}.attributes must be a non-empty list of distinct column names or null, "
            f"got {attributes!r}"
        )
    if not isinstance(bins, dict):
        raise ConfigError(f"{where}.bins must be a mapping {{column: [edges]}}, got {bins!r}")
    for col, edges in bins.items():
        ok = isinstance(edges, list | tuple) and len(edges) >= 3
        ok = ok and all(isinstance(e, int | float) and not isinstance(e, bool) for e in edges)
        if not ok or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ConfigError(
                f"{where}.bins.{col} must be a list of at least 3 increasing numbers, got {edges!r}"
            )


@dataclass
class IntersectionalConfig:
    """Differential-fairness ε over all intersections of the protected attributes.

    Fields
    ------
    enabled : run the method. Default ``True``.
    attributes : attributes whose intersections are audited; ``None`` = all protected
        attributes. A column that is not protected may be named when ``bins`` bins it.
    bins : ``{column: [edges...]}`` to bin a numeric column (right-closed intervals, ``pd.cut``;
        e.g. ``{age: [0, 25, 45, 200]}``). Default ``{}``.
    metrics : which ε to compute: ``elift``, ``slift`` (on the labels) and ``sp``, ``tpr``,
        ``fpr``, ``eo`` (on the model's predictions; skipped with a warning without scores).
        Default all six.
    outcomes : ``positive`` (default; Morina-style, the positive outcome only) or ``both``
        (Foulds' differential fairness, also 1 − rate). The other mode is always reported too.
    smoothing_alpha, smoothing_beta : α, β of the smoothed estimator (k + α)/(d + α + β).
        Default 0.5 each (= Foulds'/AIF360's Dirichlet concentration 1). 0 = empirical.
    prior_alpha, prior_beta : the Beta(α₀, β₀) prior of the Bayesian estimator. Default 0.5
        (Jeffreys), must be > 0.
    n_bootstrap : bootstrap replicates B. Default 2000.
    bootstrap_scheme : ``auto`` (multinomial over the cells for unweighted hard predictions,
        the Bayesian bootstrap with weights or expected counts), ``multinomial`` or ``bayesian``.
    n_posterior : posterior Monte-Carlo draws M. Default 4000.
    confidence_level : level of intervals and one-sided bounds. Default 0.95.
    headline : which interval a finding carries: ``auto`` (Bayesian when the smallest auditable
        denominator has fewer than ``min_support`` rows, where the percentile bootstrap
        under-covers; else bootstrap), ``bootstrap`` or ``bayesian``.
    min_support : rows below which an intersection is flagged ``sparse``. Default 30.
    exclude_sparse : drop sparse intersections from the headline ε (they are still listed).
        Default ``False``.
    include_empty : keep empty/unsupported intersections in ε (prior-only rates; only
        meaningful for the Bayesian estimator). Default ``False``.
    marginals : also report ε over each single attribute. Default ``True``.
    target_epsilon : when set, each finding tests H0: ε ≤ target_epsilon (p-value from the
        headline estimator's draws); ``None`` (default) leaves findings untested.
    max_levels : cap on one attribute's levels. Default 64.
    max_intersections : cap on the number of intersections K. Default 10000.
    n_smallest : how many of the smallest intersections are listed in the details. Default 5.
    """

    enabled: bool = True
    attributes: list[str] | None = None
    bins: dict[str, Any] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=lambda: list(METRICS))
    outcomes: str = "positive"
    smoothing_alpha: float = 0.5
    smoothing_beta: float = 0.5
    prior_alpha: float = 0.5
    prior_beta: float = 0.5
    n_bootstrap: int = 2000
    bootstrap_scheme: str = "auto"
    n_posterior: int = 4000
    confidence_level: float = 0.95
    headline: str = "auto"
    min_support: int = 30
    exclude_sparse: bool = False
    include_empty: bool = False
    marginals: bool = True
    target_epsilon: float | None = None
    max_levels: int = 64
    max_intersections: int = 10_000
    n_smallest: int = 5

    def __post_init__(self) -> None:
        def bad(key: str, what: str, value: Any) -> ConfigError:
            return ConfigError(f"{WHERE}.{key} must be {what}, got {value!r}")

        check_attributes_and_bins(WHERE, self.attributes, self.bins)
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics or len(set(self.metrics)) != len(self.metrics):
            raise bad(
                "metrics", f"a non-empty list of distinct values from {list(METRICS)}", self.metrics
            )
        if self.outcomes not in OUTCOMES:
            raise bad("outcomes", f"one of {list(OUTCOMES)}", self.outcomes)
        for key in ("smoothing_alpha", "smoothing_beta"):
            v = getattr(self, key)
            if not (math.isfinite(v) and v >= 0):
                raise bad(key, "a finite number >= 0", v)
        for key in ("prior_alpha", "prior_beta"):
            v = getattr(self, key)
            if not (math.isfinite(v) and v > 0):
                raise bad(key, "a finite number > 0", v)
        require_integers(
            WHERE,
            self,
            (
                ("n_bootstrap", 10),
                ("n_posterior", 10),
                ("max_levels", 2),
                ("max_intersections", 2),
                ("min_support", 1),
                ("n_smallest", 0),
            ),
        )
        if self.bootstrap_scheme not in SCHEMES:
            raise bad("bootstrap_scheme", f"one of {list(SCHEMES)}", self.bootstrap_scheme)
        if not 0.5 <= self.confidence_level < 1:
            raise bad("confidence_level", "in [0.5, 1)", self.confidence_level)
        if self.headline not in HEADLINES:
            raise bad("headline", f"one of {list(HEADLINES)}", self.headline)
        if self.target_epsilon is not None and not (
            math.isfinite(self.target_epsilon) and self.target_epsilon >= 0
        ):
            raise bad("target_epsilon", "a finite number >= 0 or null", self.target_epsilon)
