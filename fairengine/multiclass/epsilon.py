"""ε-differential fairness of a multiclass prediction over its K outcomes.

Foulds, Islam, Keya & Pan (2020), "An intersectional definition of fairness", ICDE (the
definition of ε-differential fairness; notes ``intersectional.md``): a mechanism is
ε-differentially fair for groups s ∈ S when, for every outcome c and every pair s, s',

    e^(−ε) ≤ P(ŷ = c | s) / P(ŷ = c | s') ≤ e^ε,

so the smallest such ε is

    ε = max_c max_{s, s'} |ln P(ŷ = c | s) − ln P(ŷ = c | s')|
      = max_c (max_s ln r_sc − min_s ln r_sc).

The definition is stated for any finite outcome set; Morina, Oliinyk, Waton, Marusic &
Georgatzis (2019, arXiv:1911.01468) note the categorical case. Estimators
(as :mod:`fairengine.intersectional` for two outcomes):

* **empirical**: r_sc = N_sc / N_s (∞ when a group never gets a class another group gets);
* **smoothed** (Foulds et al. 2020's smoothed empirical estimator, the Dirichlet posterior
  mean): r̃_sc = (N_sc + α)/(N_s + Kα) with α = ``concentration``/K (concentration 1 by
  default, so K = 2 gives the intersectional package's α = β = ½);
* **Bayesian** (optional, ``n_draws`` > 0): θ_s ~ Dirichlet(N_s· + α) independently per group
  (the conjugate posterior of a multinomial), ε per draw; the posterior mean, median, equal-tailed
  credible interval and one-sided upper bound.

N_sc counts rows of group s predicted c (expected counts Σ P_ic with ``probabilities=
"expected"``); with weights they are weight sums on the row scale (weights normalised to mean 1,
as the intersectional package does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairengine.errors import DataContractError
from fairengine.json_result import JsonResult
from fairengine.multiclass.class_sums import group_sums
from fairengine.multiclass.inputs import MulticlassInputs, check_inputs
from fairengine.results import Interval


@dataclass(frozen=True)
class EpsilonPosterior(JsonResult):
    """Posterior of ε from ``n_draws`` Dirichlet draws: mean, median, the equal-tailed
    ``interval`` and the one-sided upper bound at the interval's level."""

    n_draws: int
    mean: float
    median: float
    interval: Interval
    upper_bound: float


@dataclass(frozen=True)
class MulticlassEpsilon(JsonResult):
    """ε-differential fairness over K outcomes (module docstring): the smoothed ``epsilon``,
    attained at class ``class_label`` between ``group_high`` (larger rate) and ``group_low``;
    ``epsilon_empirical`` (no smoothing); ``per_class[c]`` the smoothed ε of class c alone;
    ``counts[s][c]`` the (weighted) counts N_sc."""

    attribute: str
    classes: tuple[str, ...]
    groups: tuple[str, ...]
    concentration: float
    epsilon: float
    epsilon_empirical: float
    class_label: str
    group_high: str
    group_low: str
    per_class: tuple[float, ...]
    counts: tuple[tuple[float, ...], ...]
    posterior: EpsilonPosterior | None = None


def epsilon_of_counts(counts: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """ε per class (..., K) and overall (...) from counts (..., G, K) with pseudo-count α per
    class: ln((N_sc + α)/(N_s + Kα)) spread over groups s."""
    n = np.asarray(counts, dtype=np.float64) + alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        logr = np.log(n) - np.log(n.sum(-1, keepdims=True))
        spread = logr.max(-2) - logr.min(-2)
    spread = np.where(np.isnan(spread), np.inf, spread)  # −∞ − (−∞): a class never predicted
    all_zero = (n == 0).all(-2)
    per_class = np.where(all_zero, 0.0, spread)
    return per_class, per_class.max(-1)


def differential_fairness(
    y: object,
    prediction: object,
    groups: object,
    categories: Sequence[object],
    classes: Sequence[object],
    *,
    weights: object | None = None,
    probabilities: str = "argmax",
    concentration: float = 1.0,
    n_draws: int = 0,
    confidence_level: float = 0.95,
    seed: int | np.random.SeedSequence | None = 0,
    attribute: str = "group",
) -> MulticlassEpsilon:
    """ε-differential fairness of the predicted class over ``groups`` (module docstring).

    ``y`` is checked (codes 0..K−1) but not used: ε is about the predictions alone. Pass
    intersection codes as ``groups`` for intersectional ε. ``n_draws`` > 0 adds the Dirichlet
    posterior of ε.
    """
    if not np.isfinite(concentration) or concentration < 0:
        raise DataContractError(f"concentration must be a finite number >= 0, got {concentration}")
    if isinstance(n_draws, bool) or not isinstance(n_draws, int) or n_draws < 0:
        raise DataContractError(f"n_draws must be an integer >= 0, got {n_draws!r}")
    if not 0 < confidence_level < 1:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {confidence_level}")
    data = check_inputs(
        y, prediction, groups, categories, classes, weights, probabilities=probabilities
    )
    return epsilon_of(data, concentration, n_draws, confidence_level, seed, attribute)


def predicted_counts(data: MulticlassInputs) -> np.ndarray:
    """N_sc (G, K): rows (weight on the row scale, expected counts) of group s predicted c."""
    k = data.n_classes
    s = group_sums(data)[..., 2 : 2 + k].sum(-2)
    if data.weights is not None:
        total = float(data.weights.sum())
        s = s * (data.y.size / total) if total > 0 else s
    return s


def epsilon_of(
    data: MulticlassInputs,
    concentration: float,
    n_draws: int,
    level: float,
    seed: int | np.random.SeedSequence | None,
    attribute: str,
) -> MulticlassEpsilon:
    """:func:`differential_fairness` of checked inputs."""
    counts = predicted_counts(data)
    k = data.n_classes
    alpha = concentration / k
    per_class, eps = epsilon_of_counts(counts, alpha)
    _, eps_emp = epsilon_of_counts(counts, 0.0)
    c = int(np.argmax(per_class))
    r = (counts[:, c] + alpha) / (counts.sum(-1) + k * alpha)
    posterior = None
    if n_draws > 0:
        if alpha <= 0 and np.any(counts == 0):
            raise DataContractError(
                "the Dirichlet posterior needs concentration > 0 when a group has a class "
                "with no predictions"
            )
        rng = np.random.default_rng(seed)
        theta = rng.gamma(counts + alpha, size=(n_draws, *counts.shape))
        theta /= theta.sum(-1, keepdims=True)
        _, draws = epsilon_of_counts(theta, 0.0)
        g = (1 - level) / 2
        posterior = EpsilonPosterior(
            n_draws,
            float(draws.mean()),
            float(np.median(draws)),
            Interval(
                float(np.quantile(draws, g)),
                float(np.quantile(draws, 1 - g)),
                level,
                "equal-tailed Dirichlet posterior",
            ),
            float(np.quantile(draws, level)),
        )
    return MulticlassEpsilon(
        attribute,
        data.classes,
        data.categories,
        float(concentration),
        float(eps),
        float(eps_emp),
        data.classes[c],
        data.categories[int(np.argmax(r))],
        data.categories[int(np.argmin(r))],
        tuple(float(v) for v in per_class),
        tuple(tuple(float(v) for v in row) for row in counts),
        posterior,
    )
