"""Intervals, bounds and one-sided tests for a (weighted) group mean.

Every per-group quantity of :mod:`fairengine.regression` is a mean m = Σ w_i a_i / Σ w_i of a
per-row value a_i (ŷ, y, y − ŷ, |y − ŷ|, (y − ŷ)²). With d_i = a_i − m, W = Σ w_i and n rows,

    se² = n/(n − 1) · Σ w_i² d_i² / W²            (linearisation / ratio-estimator variance;
                                                   n: rows of positive weight),
    n_eff = W² / Σ w_i²                           (Kish's effective sample size),
    s = se · √n_eff,   γ̂ = (Σ w_i d_i³ / W) / s³  (skewness),

which for unit weights are the textbook s²/n (ddof 1), n and the sample skewness. Two intervals:

* **t** (means of ŷ, y and y − ŷ): m ± t_{n_eff−1, 1−α/2} · se.
* **Hall's transformed t** (MAE and MSE: means of |y − ŷ| and (y − ŷ)², right-skewed). The
  Studentized mean T = (m − μ)/se has an Edgeworth expansion whose n^{-1/2} term is driven by γ;
  Hall (1992, "On the removal of skewness by transformation", JRSS-B 54:221–228, eq. (2.4))
  removes it with the monotone transformation

      g(T) = T + a T² + a² T³/3 + b,   a = γ̂/(3√n_eff),  b = γ̂/(6√n_eff),

  and inverts g(T) ∈ [−q, q] (q = t_{n_eff−1, 1−α/2}):

      [m − se · g⁻¹(q),  m − se · g⁻¹(−q)],   g⁻¹(x) = ((1 + 3a(x − b))^{1/3} − 1)/a.

  As γ̂ → 0 it is the t interval. Simulated coverage (tests/test_regression_intervals.py) at
  n = 50 with normal residuals: MSE 94.6 % (t interval: 92.1 %), MAE 95.3 %. Zhou & Dinh (2005,
  "Nonparametric confidence intervals for the one- and two-sample problems", Biostatistics
  6:187–200) compare it with the t and bootstrap intervals for skewed data.

One-sided bounds at level 1 − α use q = t_{1−α}; the test of H0: μ ≤ ζ rejects for large
T = (m − ζ)/se with p = 1 − F_t(g(T)), which is the inversion of the lower bound (p ≤ α exactly
when the lower 1 − α bound exceeds ζ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Below this |γ̂| the transformation is replaced by its first-order limit (no cancellation).
_SMALL_SKEW = 1e-8


@dataclass(frozen=True)
class MeanMoments:
    """Mean ``m``, its standard error ``se``, Kish's ``n_eff`` and the skewness ``skew`` of a
    per-row value (module docstring); ``n`` rows, total weight ``weight``."""

    m: float
    se: float
    n_eff: float
    skew: float
    n: int
    weight: float


def mean_moments(values: np.ndarray, weights: np.ndarray | None = None) -> MeanMoments:
    """The moments of the module docstring for the rows ``values`` (weights: None or ≥ 0)."""
    a = np.asarray(values, dtype=np.float64)
    n = int(a.size)
    if weights is None:
        m = float(a.mean())
        d = a - m
        ss = float(d @ d)
        var = ss / (n - 1) / n
        se = math.sqrt(var)
        third = float(np.mean(d * d * d))
        s = math.sqrt(ss / (n - 1))
        skew = third / s**3 if s > 0 else 0.0
        return MeanMoments(m, se, float(n), skew, n, float(n))
    w = np.asarray(weights, dtype=np.float64)
    n = int(np.count_nonzero(w))  # rows of zero weight do not count in n/(n − 1)
    total = float(w.sum())
    m = float(w @ a) / total
    d = a - m
    wd = w * d
    se = math.sqrt(n / (n - 1) * float(wd @ wd) / total**2)
    n_eff = total**2 / float(w @ w)
    s = se * math.sqrt(n_eff)
    skew = (float(wd @ (d * d)) / total) / s**3 if s > 0 else 0.0
    return MeanMoments(m, se, n_eff, skew, n, total)


def t_quantile(probability: float, n_eff: float) -> float:
    """Student-t quantile with n_eff − 1 degrees of freedom (normal above 1e7)."""
    df = max(n_eff - 1.0, 1.0)
    return float(stats.t.ppf(probability, df))


def t_interval(mm: MeanMoments, level: float) -> tuple[float, float]:
    """m ± t_{n_eff−1, 1−α/2} · se."""
    q = t_quantile(0.5 + level / 2, mm.n_eff)
    return mm.m - q * mm.se, mm.m + q * mm.se


def _ginv(x: float, mm: MeanMoments) -> float:
    """g⁻¹(x) of Hall's transformation for the skewness and n_eff of ``mm``."""
    sq = math.sqrt(mm.n_eff)
    b = mm.skew / (6 * sq)
    if abs(mm.skew) < _SMALL_SKEW or not math.isfinite(mm.skew):
        return x - b if math.isfinite(b) else x
    a = mm.skew / (3 * sq)
    return (np.cbrt(1 + 3 * a * (x - b)) - 1) / a


def _g(t: float, mm: MeanMoments) -> float:
    """Hall's g(T) = T + aT² + a²T³/3 + b."""
    sq = math.sqrt(mm.n_eff)
    a, b = mm.skew / (3 * sq), mm.skew / (6 * sq)
    return t + a * t * t + a * a * t**3 / 3 + b


def hall_interval(mm: MeanMoments, level: float) -> tuple[float, float]:
    """Two-sided Hall (1992) interval [m − se·g⁻¹(q), m − se·g⁻¹(−q)], q = t_{1−α/2}."""
    q = t_quantile(0.5 + level / 2, mm.n_eff)
    return mm.m - mm.se * float(_ginv(q, mm)), mm.m - mm.se * float(_ginv(-q, mm))


def hall_bounds(mm: MeanMoments, level: float) -> tuple[float, float]:
    """One-sided lower and upper bounds, each at level ``level`` (q = t_{level})."""
    q = t_quantile(level, mm.n_eff)
    return mm.m - mm.se * float(_ginv(q, mm)), mm.m - mm.se * float(_ginv(-q, mm))


def hall_pvalue_above(mm: MeanMoments, bound: float) -> float:
    """p-value of H0: μ ≤ ``bound`` against μ > ``bound``: 1 − F_t(g((m − bound)/se))."""
    if mm.se == 0:
        return 0.0 if mm.m > bound else 1.0
    t = (mm.m - bound) / mm.se
    return float(stats.t.sf(_g(t, mm), max(mm.n_eff - 1.0, 1.0)))
