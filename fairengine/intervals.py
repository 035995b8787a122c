"""Confidence intervals for proportions and their differences (vectorized over groups).

* Wilson score interval for a binomial proportion p̂ = k/n (Wilson 1927):
  (k + z²/2)/(n + z²) ± z √(k(n−k)/n + z²/4) / (n + z²).
* Wilson interval with continuity correction (Newcombe 1998a, method 4; Fleiss 1981):

      L = [2np̂ + z² − 1 − z √(z² − 2 − 1/n + 4p̂(n(1−p̂) + 1))] / (2(n + z²)),  L = 0 if p̂ = 0,
      U = [2np̂ + z² + 1 + z √(z² + 2 − 1/n + 4p̂(n(1−p̂) − 1))] / (2(n + z²)),  U = 1 if p̂ = 1.

* Newcombe's hybrid score interval for p₁ − p₂ (Newcombe 1998b, methods 10 and 11): with the
  single-proportion limits (l_i, u_i) (Wilson for method 10, continuity-corrected Wilson for
  method 11) and d = p̂₁ − p̂₂,

      [d − √((p̂₁−l₁)² + (u₂−p̂₂)²),  d + √((u₁−p̂₁)² + (p̂₂−l₂)²)].

  Neither interval ever has zero width for n ≥ 1, also when k ∈ {0, n} (where the Wald
  interval collapses to a point).
* Wald interval est ± z·se, used where no binomial form exists (rates of expected counts).

Counts may be non-integer (effective counts k = p̂·n_eff of weighted data); the formulas are
used as they stand.

Newcombe RG (1998a), Two-sided confidence intervals for the single proportion: comparison of
seven methods. Stat Med 17:857–872. Newcombe RG (1998b), Interval estimation for the difference
between independent proportions: comparison of eleven methods. Stat Med 17:873–890.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.stats import norm


def z_value(level: float) -> float:
    """Two-sided standard-normal quantile z_{1−(1−level)/2}."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return _z_value(float(level))


@functools.lru_cache(maxsize=64)
def _z_value(level: float) -> float:
    """The quantile, computed once per level (``norm.ppf`` costs ~0.1 ms a call, and every
    interval of every group asks for it)."""
    return float(norm.ppf(0.5 + level / 2.0))


def wilson_limits(
    k: np.ndarray | float,
    n: np.ndarray | float,
    z: np.ndarray | float,
    *,
    continuity: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson limits for k successes in n trials at the normal quantile ``z`` ≥ 0 (module
    docstring). NaN where n = 0.

    ``continuity=True``: the continuity-corrected limits, which are the Wilson lower limit of
    k − ½ and upper limit of k + ½ (expanding the square roots gives the closed form of the
    module docstring), with L = 0 for k ≤ ½ and U = 1 for k ≥ n − ½. Written this way both
    limits stay monotone in z also for the non-integer effective counts of weighted data.
    """
    k, n, z = (np.asarray(a, dtype=np.float64) for a in (k, n, z))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip(k / n, 0.0, 1.0)
        if continuity:
            low = np.where(k > 0.5, _wilson(k - 0.5, n, z)[0], 0.0)
            high = np.where(k < n - 0.5, _wilson(k + 0.5, n, z)[1], 1.0)
        else:
            low, high = _wilson(k, n, z)
        # the limits bracket p̂ (clipping only guards rounding)
        low = np.where(n > 0, np.clip(low, 0.0, p), np.nan)
        high = np.where(n > 0, np.clip(high, p, 1.0), np.nan)
    return low, high


def _wilson(k: np.ndarray, n: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unclipped Wilson limits (k + z²/2)/(n + z²) ± z √(k(n−k)/n + z²/4)/(n + z²)."""
    z2 = z * z
    centre = (k + z2 / 2) / (n + z2)
    half = z * np.sqrt(np.maximum(k * (n - k) / n, 0.0) + z2 / 4) / (n + z2)
    return centre - half, centre + half


def wilson_interval(
    k: np.ndarray | float,
    n: np.ndarray | float,
    level: float = 0.95,
    *,
    continuity: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (NaN where n = 0)."""
    return wilson_limits(k, n, z_value(level), continuity=continuity)


def newcombe_limits(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    z: np.ndarray | float,
    *,
    continuity: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's hybrid limits for p₁ − p₂ at the normal quantile ``z`` (module docstring):
    method 10, or method 11 with ``continuity=True``. Both limits move monotonically away
    from d as z grows, which :func:`fairengine.rate_gap.newcombe_tolerance_pvalue` inverts."""
    k1, n1, k2, n2 = (np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_limits(k1, n1, z, continuity=continuity)
    l2, u2 = wilson_limits(k2, n2, z, continuity=continuity)
    d = p1 - p2
    low = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return low, high


def newcombe_interval(
    k1: np.ndarray | float,
    n1: np.ndarray | float,
    k2: np.ndarray | float,
    n2: np.ndarray | float,
    level: float = 0.95,
    *,
    continuity: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe hybrid score interval for p₁ − p₂: method 10 of Newcombe (1998b), or with
    ``continuity=True`` method 11 (continuity-corrected Wilson limits)."""
    return newcombe_limits(k1, n1, k2, n2, z_value(level), continuity=continuity)


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
