"""Confidence intervals for proportions and their differences (vectorized over groups).

* Wilson score interval for a binomial proportion (Wilson 1927):
  (k + z²/2)/(n + z²) ± z √(k(n−k)/n + z²/4) / (n + z²).
* Newcombe's hybrid score interval for p₁ − p₂ (Newcombe 1998, method 10): with Wilson limits
  (l_i, u_i), [d − √((p₁−l₁)² + (u₂−p₂)²), d + √((u₁−p₁)² + (p₂−l₂)²)].
* Wald interval est ± z·se, used for weighted rates and expected counts (no binomial form).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def z_value(level: float) -> float:
    """Two-sided standard-normal quantile z_{1−(1−level)/2}."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(norm.ppf(0.5 + level / 2.0))


def wilson_interval(
    k: np.ndarray | float, n: np.ndarray | float, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (NaN where n = 0)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = z_value(level)
    z2 = z * z
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = (k + z2 / 2) / (n + z2)
        half = z * np.sqrt(np.maximum(k * (n - k) / n, 0.0) + z2 / 4) / (n + z2)
        low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
        high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return low, high


def newcombe_interval(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe hybrid score interval for p₁ − p₂ (method 10 of Newcombe 1998)."""
    k1, n1, k2, n2 = (np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, level)
    l2, u2 = wilson_interval(k2, n2, level)
    d = p1 - p2
    low = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return low, high


def wald_interval(
    estimate: np.ndarray | float,
    se: np.ndarray | float,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Wald interval estimate ± z·se, optionally clipped to ``bounds``."""
    z = z_value(level)
    est = np.asarray(estimate, dtype=np.float64)
    s = np.asarray(se, dtype=np.float64)
    low, high = est - z * s, est + z * s
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return low, high
