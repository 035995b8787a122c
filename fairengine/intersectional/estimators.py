"""Estimators of ε with uncertainty: multinomial bootstrap and Beta-posterior draws.

Morina et al. (arXiv:1911.01468, §4: smoothed empirical, bootstrap and Bayesian estimation);
implementation spec in notes ``intersectional.md`` §1.4 and §4.4.

* **Smoothed empirical** (E1): r̃_s = (k_s + α)/(d_s + α + β), then ε on r̃
  (:func:`fairengine.intersectional.metrics.differential_fairness`).
* **Bootstrap** (E2): every metric depends on the rows only through the cell counts, so
  resampling N rows with replacement is exactly one Multinomial(N, C/N) draw over the 4K cells
  ``(s, y, ŷ)``. ``rng.multinomial(N, p, size=B)`` replaces B passes over the data; each replicate
  is scored with the smoothed estimator, with the auditable set S* fixed from the original data.
  Report: the point estimate on the original data (not the bootstrap mean, which is biased up
  by the max), the percentile interval [q_{γ/2}, q_{1−γ/2}], the one-sided upper bound q_{1−γ},
  and the bootstrap bias mean(ε*) − ε̂. With weights, or with expected counts (no threshold),
  rows are not exchangeable unit counts, so the **Bayesian bootstrap** is used instead: cell
  totals are scaled by Gamma(rows_c, 1)/rows_c draws (Rubin 1981; exact for equal weights within
  a cell, it ignores the dispersion of weights inside a cell).
* **Bayesian** (E3): r_s^{(m)} ~ Beta(α₀ + k_s, β₀ + d_s − k_s) independently over s (the
  conjugate posterior of a Binomial rate), M draws, ε^{(m)} per draw; report the posterior mean
  and median, the equal-tailed credible interval, the one-sided upper bound and P(ε ≤ ε₀).
  Equalized odds uses the TPR and FPR draws jointly: under a Dirichlet posterior over each
  intersection's four (y, ŷ) cells, TPR_s = θ₁₁/(θ₁₀+θ₁₁) and FPR_s = θ₀₁/(θ₀₀+θ₀₁) are exactly
  these independent Betas. For elift the overall rate is r̄^{(m)} = Σ_s π_s^{(m)} r_s^{(m)} with
  π ~ Dirichlet(d_s + ½) over S*.

Weighted counts are on the row scale (weights normalised to mean 1), so the Beta posteriors
treat them as counts (exact without weights). Everything is vectorised over replicates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fairengine.errors import DataContractError
from fairengine.intersectional.cells import IntersectionTable
from fairengine.intersectional.metrics import (
    METRIC_RATES,
    check_metric,
    check_outcomes,
    elift_epsilon,
    epsilon_from_counts,
    pairwise_epsilon,
    rate_counts,
)

BootstrapScheme = Literal["auto", "multinomial", "bayesian"]
SCHEMES: tuple[str, ...] = ("auto", "multinomial", "bayesian")
#: Cells (replicates × 4K) processed per chunk: bounds memory at ~32 MB per array.
CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class ConfidenceInterval:
    low: float
    high: float


@dataclass
class EpsilonDistribution:
    """Bootstrap replicates or posterior draws of ε, with ``scipy.stats``-like accessors.

    ``statistic`` is the smoothed point estimate on the original data; ``draws`` the B bootstrap
    replicates or M posterior draws; ``estimator`` is ``"bootstrap"`` or ``"bayesian"``.
    """

    estimator: str
    statistic: float
    draws: np.ndarray
    confidence_level: float = 0.95
    scheme: str = ""

    @property
    def n(self) -> int:
        return int(self.draws.shape[0])

    @property
    def mean(self) -> float:
        return float(np.mean(self.draws)) if self.n else float("nan")

    @property
    def median(self) -> float:
        return _quantile(self.draws, 0.5)

    @property
    def standard_error(self) -> float:
        finite = self.draws[np.isfinite(self.draws)]
        return float(np.std(finite, ddof=1)) if finite.size > 1 else float("nan")

    @property
    def bias(self) -> float:
        """mean(draws) − statistic (the bootstrap bias estimate; for draws, posterior − plug-in)."""
        return self.mean - self.statistic

    def confidence_interval(self, confidence_level: float | None = None) -> ConfidenceInterval:
        """Equal-tailed percentile (bootstrap) or credible (Bayesian) interval."""
        level = self.confidence_level if confidence_level is None else confidence_level
        _check_level(level)
        g = (1.0 - level) / 2.0
        return ConfidenceInterval(_quantile(self.draws, g), _quantile(self.draws, 1.0 - g))

    def upper_bound(self, confidence_level: float | None = None) -> float:
        """One-sided upper bound: the ``confidence_level`` quantile of the draws."""
        level = self.confidence_level if confidence_level is None else confidence_level
        _check_level(level)
        return _quantile(self.draws, level)

    def prob_at_most(self, target: float) -> float:
        """Share of draws with ε ≤ ``target`` (posterior P(ε ≤ target) for the Bayesian one)."""
        return float(np.mean(self.draws <= target)) if self.n else float("nan")

    def pvalue(self, target: float) -> float:
        """p-value of H0: ε ≤ ``target`` by inverting the one-sided lower bound.

        The one-sided (1 − a) lower bound q_a of the draws exceeds ``target`` exactly when fewer
        than a·n draws are ≤ ``target``, so p = (1 + #{ε* ≤ target}) / (1 + n). For the Bayesian
        draws this is (up to the +1) the posterior probability of H0.
        """
        return float((1 + np.sum(self.draws <= target)) / (1 + self.n))


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise DataContractError(f"confidence_level must lie in (0, 1), got {level!r}")


def _quantile(x: np.ndarray, q: float) -> float:
    """Order-statistic quantile (no interpolation, so ±∞ draws stay well defined)."""
    if x.size == 0 or np.isnan(x).all():
        return float("nan")
    return float(np.quantile(x[~np.isnan(x)], q, method="inverted_cdf"))


def resolve_scheme(table: IntersectionTable, scheme: str = "auto") -> str:
    """``multinomial`` for unweighted hard (or label-only) counts, else ``bayesian``."""
    if scheme not in SCHEMES:
        raise DataContractError(f"bootstrap scheme must be one of {list(SCHEMES)}, got {scheme!r}")
    integral = not table.weighted and table.prediction != "expected"
    if scheme == "multinomial" and not integral:
        raise DataContractError(
            "the multinomial bootstrap needs unweighted hard (0/1) predictions; use "
            "scheme='bayesian' (the Bayesian bootstrap) for weights or expected counts"
        )
    if scheme == "auto":
        return "multinomial" if integral else "bayesian"
    return scheme


def bootstrap_counts(
    table: IntersectionTable,
    n_resamples: int,
    rng: np.random.Generator,
    *,
    scheme: str = "auto",
    chunk_cells: int = CHUNK_CELLS,
) -> Iterator[np.ndarray]:
    """Yield resampled count arrays ``(b, K, 2, 2)`` in chunks totalling ``n_resamples``.

    ``multinomial``: C* ~ Multinomial(N, C/N) over the 4K cells (= resampling the N rows).
    ``bayesian``: C*_c = C_c · G_c / rows_c with G_c ~ Gamma(rows_c, 1), rescaled to total N.
    """
    if n_resamples < 1:
        raise DataContractError(f"n_resamples must be >= 1, got {n_resamples}")
    kind = resolve_scheme(table, scheme)
    rows = table.rows.ravel()
    cells = rows.size
    shape = table.counts.shape
    per_chunk = max(1, min(n_resamples, chunk_cells // max(cells, 1)))
    done = 0
    if kind == "multinomial":
        n = round(rows.sum())
        p = rows / rows.sum()
        while done < n_resamples:
            b = min(per_chunk, n_resamples - done)
            yield rng.multinomial(n, p, size=b).astype(np.float64).reshape(b, *shape)
            done += b
        return
    live = rows > 0
    scale = np.zeros_like(rows)
    scale[live] = table.counts.ravel()[live] / rows[live]
    total = table.counts.sum()
    while done < n_resamples:
        b = min(per_chunk, n_resamples - done)
        g = np.zeros((b, cells))
        g[:, live] = rng.gamma(rows[live], 1.0, size=(b, int(live.sum())))
        c = g * scale
        c *= total / c.sum(axis=1, keepdims=True)
        yield c.reshape(b, *shape)
        done += b


def bootstrap_statistics(
    table: IntersectionTable,
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    n_resamples: int = 2000,
    *,
    rng: np.random.Generator,
    scheme: str = "auto",
) -> dict[str, np.ndarray]:
    """Replicates of several statistics of the counts, all from the same resampled tables.

    Each statistic maps a count array ``(b, K, 2, 2)`` to ``(b,)``. Returns name → ``(B,)``.
    """
    out: dict[str, list[np.ndarray]] = {name: [] for name in statistics}
    for chunk in bootstrap_counts(table, n_resamples, rng, scheme=scheme):
        for name, f in statistics.items():
            out[name].append(np.asarray(f(chunk), dtype=np.float64))
    return {name: np.concatenate(v) for name, v in out.items()}


def bootstrap_epsilon(
    table: IntersectionTable,
    metric: str,
    masks: Mapping[str, np.ndarray],
    *,
    statistic: float,
    n_resamples: int = 2000,
    alpha: float = 0.5,
    beta: float = 0.5,
    outcomes: str = "positive",
    confidence_level: float = 0.95,
    rng: np.random.Generator | None = None,
    scheme: str = "auto",
) -> EpsilonDistribution:
    """Bootstrap distribution of the smoothed ε of one metric (see the module docstring).

    ``masks`` are the auditable intersections per rate (``DifferentialFairness.masks``) and
    ``statistic`` the point estimate on the original data.
    """
    check_metric(metric)
    rng = np.random.default_rng() if rng is None else rng
    masks = dict(masks)
    reps = bootstrap_statistics(
        table,
        {
            metric: lambda c: epsilon_from_counts(
                c, metric, masks, alpha=alpha, beta=beta, outcomes=outcomes
            )
        },
        n_resamples,
        rng=rng,
        scheme=scheme,
    )[metric]
    return EpsilonDistribution(
        "bootstrap", statistic, reps, confidence_level, resolve_scheme(table, scheme)
    )


def posterior_rate_draws(
    table: IntersectionTable,
    rate: str,
    mask: np.ndarray,
    n_draws: int,
    *,
    prior: tuple[float, float] = (0.5, 0.5),
    rng: np.random.Generator,
) -> np.ndarray:
    """``(M, K)`` draws r_s ~ Beta(α₀ + k_s, β₀ + d_s − k_s) for masked s (NaN elsewhere)."""
    a0, b0 = prior
    if not (a0 > 0 and b0 > 0):
        raise DataContractError(f"the Beta prior needs alpha0, beta0 > 0, got {prior}")
    k, d = rate_counts(table.counts, rate)
    idx = np.flatnonzero(mask)
    out = np.full((n_draws, k.shape[0]), np.nan)
    kk, dd = k[idx], d[idx]
    out[:, idx] = rng.beta(a0 + kk, b0 + np.maximum(dd - kk, 0.0), size=(n_draws, idx.size))
    return out


def posterior_epsilons(
    table: IntersectionTable,
    metrics: Sequence[str],
    masks: Mapping[str, np.ndarray],
    n_draws: int = 4000,
    *,
    prior: tuple[float, float] = (0.5, 0.5),
    outcomes: str = "positive",
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Posterior draws ``(M,)`` of ε for each metric, sharing the rate draws between metrics.

    ``masks[rate]`` is the auditable set of each rate (the same for every metric using it).
    """
    check_outcomes(outcomes)
    if n_draws < 1:
        raise DataContractError(f"n_draws must be >= 1, got {n_draws}")
    for m in metrics:
        check_metric(m)
    needed = sorted({r for m in metrics for r in METRIC_RATES[m]})
    draws = {
        r: posterior_rate_draws(table, r, masks[r], n_draws, prior=prior, rng=rng) for r in needed
    }
    out: dict[str, np.ndarray] = {}
    for m in metrics:
        if m == "elift":
            mask = masks["base_rate"]
            _, d = rate_counts(table.counts, "base_rate")
            idx = np.flatnonzero(mask)
            g = rng.gamma(d[idx] + 0.5, 1.0, size=(n_draws, idx.size))
            pi = g / g.sum(axis=1, keepdims=True)
            rbar = np.einsum("mk,mk->m", pi, draws["base_rate"][:, idx])
            out[m] = elift_epsilon(draws["base_rate"], rbar, mask, outcomes)[0]
        elif m == "eo":
            out[m] = np.maximum(
                pairwise_epsilon(draws["tpr"], masks["tpr"], outcomes)[0],
                pairwise_epsilon(draws["fpr"], masks["fpr"], outcomes)[0],
            )
        else:
            r = METRIC_RATES[m][0]
            out[m] = pairwise_epsilon(draws[r], masks[r], outcomes)[0]
    return out


def posterior_epsilon(
    table: IntersectionTable,
    metric: str,
    masks: Mapping[str, np.ndarray],
    *,
    statistic: float,
    n_draws: int = 4000,
    prior: tuple[float, float] = (0.5, 0.5),
    outcomes: str = "positive",
    confidence_level: float = 0.95,
    rng: np.random.Generator | None = None,
) -> EpsilonDistribution:
    """Posterior distribution of ε for one metric (see the module docstring)."""
    rng = np.random.default_rng() if rng is None else rng
    draws = posterior_epsilons(
        table, [metric], masks, n_draws, prior=prior, outcomes=outcomes, rng=rng
    )[metric]
    return EpsilonDistribution("bayesian", statistic, draws, confidence_level, "beta-posterior")
