"""Difference of two group rates: estimate, interval and a test against a tolerance.

For groups a and b with rates r_a, r_b (independent samples) the gap Δ = r_a − r_b is estimated
by Δ̂ = r̂_a − r̂_b with standard error se = √(Var r̂_a + Var r̂_b) (variances from
:mod:`fairengine.counts`).

Test of H0: |Δ| ≤ τ against H1: |Δ| > τ (τ ≥ 0 is the tolerated gap). With Δ̂ ≈ N(Δ, se²) the
rejection probability P_Δ(|Δ̂| ≥ a) increases in |Δ|, so the least-favourable null is |Δ| = τ
and the p-value of an observed a = |Δ̂| is

    p = Φ((τ − a)/se) + Φ((−τ − a)/se),

which for τ = 0 is the two-sided Wald test 2Φ(−a/se).

Interval: Newcombe's hybrid score interval (method 10) for unweighted hard predictions,
the Wald interval Δ̂ ± z·se otherwise (weighted rates, expected counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from fairengine.intervals import newcombe_interval, wald_interval


def tolerance_pvalue(
    diff: np.ndarray | float, se: np.ndarray | float, tolerance: float
) -> np.ndarray:
    """p-value of H0: |Δ| ≤ τ given Δ̂ and its standard error (see module docstring).

    With se = 0 the data are deterministic: p = 0 if |Δ̂| > τ, else 1. NaN in, NaN out.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    d = np.asarray(diff, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    a = np.abs(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = norm.cdf((tolerance - a) / s) + norm.cdf((-tolerance - a) / s)
    p = np.where(s > 0, p, np.where(a > tolerance, 0.0, 1.0))
    return np.where(np.isfinite(d) & np.isfinite(s), np.clip(p, 0.0, 1.0), np.nan)


@dataclass(frozen=True)
class RateGaps:
    """Gaps r_a − r_b for a list of group pairs, with standard errors, intervals and p-values."""

    pairs: list[tuple[int, int]]
    estimate: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    pvalue: np.ndarray
    interval_method: str


def rate_gaps(
    rate: np.ndarray,
    var: np.ndarray,
    n: np.ndarray,
    *,
    tolerance: float,
    level: float = 0.95,
    binomial: bool,
) -> RateGaps:
    """All pairwise gaps i < j of per-group ``rate`` (with ``var`` and row counts ``n``).

    ``binomial=True`` (unweighted hard predictions) uses Newcombe's interval on the counts
    k = rate·n; otherwise the Wald interval.
    """
    g = rate.shape[0]
    i, j = np.triu_indices(g, k=1)
    est = rate[i] - rate[j]
    se = np.sqrt(var[i] + var[j])
    if binomial:
        k = np.round(rate * n)
        low, high = newcombe_interval(k[i], n[i], k[j], n[j], level)
        method = "newcombe hybrid score"
    else:
        low, high = wald_interval(est, se, level, bounds=(-1.0, 1.0))
        method = "wald (linearised variance)"
    return RateGaps(
        pairs=list(zip(i.tolist(), j.tolist(), strict=True)),
        estimate=est,
        se=se,
        low=low,
        high=high,
        pvalue=tolerance_pvalue(est, se, tolerance),
        interval_method=method,
    )


FOUR_FIFTHS = 0.8


@dataclass(frozen=True)
class RateRatios:
    """Ratios r_a / r_b for a list of group pairs, with log-scale (delta-method) intervals.

    ``impact`` is the disparate-impact ratio min(r_a, r_b) / max(r_a, r_b) ∈ [0, 1] and
    ``four_fifths`` flags pairs with impact < 0.8 (the EEOC four-fifths rule of thumb, 29 CFR
    §1607.4(D), meant for selection rates).
    """

    pairs: list[tuple[int, int]]
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    impact: np.ndarray
    four_fifths: np.ndarray
    interval_method: str = "log ratio (delta method)"


def rate_ratios(rate: np.ndarray, var: np.ndarray, *, level: float = 0.95) -> RateRatios:
    """All pairwise ratios i < j of per-group ``rate`` with variances ``var``.

    Interval: exp(log(r_a/r_b) ± z·se) with se² = Var r_a / r_a² + Var r_b / r_b² (delta
    method; for unweighted counts this is Katz et al. 1978's risk-ratio interval,
    se² = (1−r_a)/k_a + (1−r_b)/k_b). A zero rate gives a ratio of 0 or ∞ and an undefined
    interval (NaN); 0/0 is NaN.
    """
    g = rate.shape[0]
    i, j = np.triu_indices(g, k=1)
    ra, rb = rate[i], rate[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = ra / rb
        se = np.sqrt(var[i] / ra**2 + var[j] / rb**2)
        log_r = np.log(ratio)
        low, high = wald_interval(log_r, se, level)
        low, high = np.exp(low), np.exp(high)
        impact = np.minimum(ra, rb) / np.maximum(ra, rb)
    bad = ~(np.isfinite(log_r) & np.isfinite(se))
    low = np.where(bad, np.nan, low)
    high = np.where(bad, np.nan, high)
    impact = np.where((ra == 0) & (rb == 0), np.nan, impact)
    return RateRatios(
        pairs=list(zip(i.tolist(), j.tolist(), strict=True)),
        estimate=ratio,
        low=low,
        high=high,
        impact=impact,
        four_fifths=np.where(np.isfinite(impact), impact < FOUR_FIFTHS, False),
    )


def round_half_up(x: np.ndarray | float, digits: int = 5) -> np.ndarray:
    """LiFT's rounding: Java ``Math.round(x·10^d) / 10^d`` = floor(x·10^d + ½) / 10^d.

    Unlike Python's ``round`` (half to even), halves round up; like Java, NaN rounds to 0.
    """
    scale = 10.0**digits
    v = np.floor(np.asarray(x, dtype=np.float64) * scale + 0.5) / scale
    return np.where(np.isnan(v), 0.0, v)
