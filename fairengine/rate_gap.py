"""Difference of two group rates: estimate, interval and a test against a tolerance.

For groups a and b with rates r_a, r_b (independent samples) the gap Δ = r_a − r_b is estimated
by Δ̂ = r̂_a − r̂_b, with the linearised standard error se = √(Var r̂_a + Var r̂_b) (variances
from :mod:`fairengine.counts`).

**Test of H0: |Δ| ≤ τ against H1: |Δ| > τ** (τ ≥ 0 the tolerated gap), by inverting the
reported two-sided interval: the p-value is the smallest α for which the (1 − α) interval lies
entirely outside the tolerance band [−τ, τ],

    p = inf{α : L_{1−α} > τ  or  U_{1−α} < −τ},

so at α = 1 − level the test rejects exactly when the reported interval excludes [−τ, τ]
(a raw p-value; the audit's multiplicity adjustment comes after). Each of the two one-sided
tests (H0: Δ ≤ τ and H0: Δ ≥ −τ) runs at α/2: the size at the boundary |Δ| = τ is about α for
τ = 0 (the usual two-sided test) and about α/2 when τ is large against se, the price of a
decision that always agrees with the interval.

Intervals, and so tests:

* **Hard predictions** (counts): Newcombe's hybrid score interval with continuity-corrected
  Wilson limits (Newcombe 1998, method 11; :mod:`fairengine.intervals`), on the counts
  k = r̂·n, or, with sample weights, on effective counts k = r̂·n_eff
  (:func:`effective_sample_size`). Wilson limits never collapse, so a group whose rows are all
  predicted negative (Var r̂ = 0) still carries its sampling uncertainty, and the p-value is
  never 0 for a lack of variance. The inversion has no closed form: the limits are monotone in
  the normal quantile z, and z* where the nearer limit meets the band is found by bisection;
  p = 2·(1 − Φ(z*)), and p = 1 when even the z = 0 interval meets the band (the estimate lies
  inside it, or less than the half-count continuity correction outside).
* **Expected counts** (mean probabilities, no threshold): no binomial form; the Wald interval
  Δ̂ ± z·se and its inversion p = min(1, 2Φ(−(|Δ̂| − τ)/se)) (τ = 0: the two-sided Wald test).
  When a group's linearised variance is 0 (all its predictions are equal) se misses that
  group's sampling error, so the pair is **not tested** (p, interval NaN; ``zero_variance``).

Why not Wald for counts: with k = 0 of n the Wald variance is 0 and the test degenerates
(p ≈ 0 from one all-negative group); at |Δ| = τ its exact size is 0.47 for 30 rows against 300
at rate 0.02 (τ = 0), 0.32 for 10 against 300 at 0.01, and 1 for one row against 200 at 0.1,
where this test stays below 0.025 (tests/test_parity_degenerate.py). The continuity
correction is what holds the level for small groups and rare rates (plain Wilson limits, method
10, reach 0.08 for 10 rows against 300); it costs some power for small groups and fades as 1/n
(coverage 95.5–95.6 % at 400–1000 rows per group). Limitation: the approximation is least
accurate far in the tail, where multiplicity-adjusted thresholds look: at α = 10⁻³ the exact
size reaches about 6× nominal for 30 rows against 3000 at rate 0.005 and 13× for one row
against 1000 (the Wald test: 760× and 1000×). The exact unconditional test of
:mod:`fairengine.exact_tolerance` holds the level there (its size is computed by full
enumeration in tests/test_exact_tolerance.py); group parity uses it for small groups
(:mod:`fairengine.group_parity`, option ``exact``).

Newcombe RG (1998), Interval estimation for the difference between independent proportions:
comparison of eleven methods. Stat Med 17:873–890.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from fairengine.intervals import newcombe_interval, newcombe_limits, wald_interval

#: Bisection steps on z for the interval inversion (relative precision 2⁻⁶⁰ of the bracket).
_BISECTIONS = 60


def tolerance_pvalue(
    diff: np.ndarray | float, se: np.ndarray | float, tolerance: float
) -> np.ndarray:
    """p-value of H0: |Δ| ≤ τ by inverting the Wald interval Δ̂ ± z·se (module docstring):
    p = min(1, 2Φ(−(|Δ̂| − τ)/se)), which is 1 when |Δ̂| ≤ τ.

    NaN when se is 0 or not finite (no sampling variance to test with) or Δ̂ is NaN.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    d = np.asarray(diff, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    excess = np.abs(d) - tolerance
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2.0 * norm.sf(excess / s))
    ok = np.isfinite(d) & np.isfinite(s) & (s > 0)
    return np.where(ok, np.where(excess > 0, p, 1.0), np.nan)


def newcombe_tolerance_pvalue(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    tolerance: float,
    *,
    continuity: bool = True,
) -> np.ndarray:
    """p-value of H0: |p₁ − p₂| ≤ τ by inverting Newcombe's hybrid interval (module docstring).

    p = 2·(1 − Φ(z*)) with z* = sup{z ≥ 0 : L(z) > τ or U(z) < −τ} for the hybrid limits
    (L, U)(z) of :func:`fairengine.intervals.newcombe_limits` (method 11 with ``continuity``,
    else method 10); p = 1 when no z ≥ 0 excludes the band. Then p ≤ α exactly when the
    (1 − α) interval lies outside [−τ, τ]. NaN where n₁ or n₂ is 0.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    k1, n1, k2, n2 = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    )
    valid = (n1 > 0) & (n2 > 0) & np.isfinite(k1 + k2 + n1 + n2)

    def excluded(z: np.ndarray) -> np.ndarray:
        low, high = newcombe_limits(k1, n1, k2, n2, z, continuity=continuity)
        return valid & ((low > tolerance) | (high < -tolerance))

    lo = np.zeros(k1.shape)
    hi = np.full(k1.shape, 8.0)
    for _ in range(64):  # grow the bracket until the interval at hi meets the band
        grow = excluded(hi)
        if not grow.any():
            break
        lo, hi = np.where(grow, hi, lo), np.where(grow, 2.0 * hi, hi)
    inside0 = ~excluded(lo)  # only where lo = 0: the band is met already at z = 0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ex = excluded(mid)
        lo, hi = np.where(ex, mid, lo), np.where(ex, hi, mid)
    p = np.where(inside0, 1.0, np.minimum(1.0, 2.0 * norm.sf(lo)))
    return np.where(valid, p, np.nan)


def effective_sample_size(
    rate: np.ndarray, var: np.ndarray, n: np.ndarray, w: np.ndarray, w2: np.ndarray
) -> np.ndarray:
    """Effective number of rows of a weighted rate, for binomial (Wilson/Newcombe) intervals.

    n_eff = min(n, r̂(1−r̂)/Var r̂) where 0 < r̂ < 1 and Var r̂ > 0: the binomial sample size
    with the same variance as the linearised one (Korn & Graubard 1998, Survey Methodology
    24:193–201), truncated at the row count n (design effect at least 1). Where r̂ ∈ {0, 1} the
    linearised variance is 0 and carries no design effect, so Kish's n_eff = W²/Σw² (Kish 1965,
    Survey Sampling §11.7) is used; it is ≤ n. Unit weights give n_eff = n in both branches.
    NaN where the rate is undefined (no rows).
    """
    rate, var, n, w, w2 = (np.asarray(a, dtype=np.float64) for a in (rate, var, n, w, w2))
    with np.errstate(invalid="ignore", divide="ignore"):
        kish = w * w / w2
        kg = np.minimum(n, rate * (1.0 - rate) / var)
    interior = (rate > 0) & (rate < 1) & (var > 0)
    out = np.where(interior, kg, kish)
    return np.where(np.isfinite(rate) & (n > 0), out, np.nan)


@dataclass(frozen=True)
class RateGaps:
    """Gaps r_a − r_b for a list of group pairs, with standard errors, intervals and p-values.

    ``pvalue`` is the tolerance test's (module docstring); NaN where the gap is undefined or,
    on the Wald path, where ``zero_variance`` flags a group with zero linearised variance (then
    the interval is NaN too: the pair is not tested).
    """

    pairs: list[tuple[int, int]]
    estimate: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    pvalue: np.ndarray
    interval_method: str
    zero_variance: np.ndarray


NEWCOMBE_METHOD = "newcombe hybrid score (continuity-corrected)"
NEWCOMBE_EFFECTIVE_METHOD = "newcombe hybrid score (continuity-corrected, effective counts)"
WALD_METHOD = "wald (linearised variance)"


def rate_gaps(
    rate: np.ndarray,
    var: np.ndarray,
    n: np.ndarray,
    *,
    tolerance: float,
    level: float = 0.95,
    binomial: bool,
    n_effective: np.ndarray | None = None,
) -> RateGaps:
    """All pairwise gaps i < j of per-group ``rate`` (with ``var`` and row counts ``n``).

    ``binomial=True`` (unweighted hard predictions): Newcombe's continuity-corrected hybrid
    interval on the counts k = round(rate·n) and its inversion as the tolerance test.
    ``n_effective`` (weighted hard predictions; :func:`effective_sample_size`): the same on
    effective counts k = rate·n_eff. Otherwise (expected counts) the Wald interval and test,
    with pairs that include a zero-variance group left untested (module docstring).
    """
    g = rate.shape[0]
    i, j = np.triu_indices(g, k=1)
    est = rate[i] - rate[j]
    se = np.sqrt(var[i] + var[j])
    zero_var = np.zeros(est.shape, dtype=bool)
    if binomial or n_effective is not None:
        size = np.asarray(n if binomial else n_effective, dtype=np.float64)
        k = np.round(rate * size) if binomial else rate * size
        low, high = newcombe_interval(k[i], size[i], k[j], size[j], level, continuity=True)
        pvalue = newcombe_tolerance_pvalue(k[i], size[i], k[j], size[j], tolerance)
        method = NEWCOMBE_METHOD if binomial else NEWCOMBE_EFFECTIVE_METHOD
    else:
        zero_var = np.isfinite(est) & ((var[i] <= 0) | (var[j] <= 0))
        low, high = wald_interval(est, se, level, bounds=(-1.0, 1.0))
        low, high = np.where(zero_var, np.nan, low), np.where(zero_var, np.nan, high)
        pvalue = np.where(zero_var, np.nan, tolerance_pvalue(est, se, tolerance))
        method = WALD_METHOD
    undefined = ~np.isfinite(est)
    return RateGaps(
        pairs=list(zip(i.tolist(), j.tolist(), strict=True)),
        estimate=est,
        se=se,
        low=np.where(undefined, np.nan, low),
        high=np.where(undefined, np.nan, high),
        pvalue=np.where(undefined, np.nan, pvalue),
        interval_method=method,
        zero_variance=zero_var,
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
