"""Simultaneous maxT bounds for the contrasts, the bounds on Δ, their p-values and their
Monte-Carlo error (the formulas are in :mod:`fairengine.comparison.compare`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, norm

#: A contrast whose bootstrap SD is at most this is constant under resampling (e.g. c_{+,+}
#: of two identical models): its bounds are its estimate and it is left out of the maximum.
SE_FLOOR = 1e-12


@dataclass(frozen=True)
class Band:
    """The maxT band of K contrasts from B defined resamples: estimates ``c`` and SDs ``se``
    (K,), ``rel_se_error`` the Monte-Carlo half-width of se/se (K,), the maxima ``t_star``
    (B,) sorted, the critical value ``q`` and its Monte-Carlo interval [``q_low``, ``q_high``]."""

    c: np.ndarray
    se: np.ndarray
    rel_se_error: np.ndarray
    t_star: np.ndarray
    q: float
    q_low: float
    q_high: float

    @property
    def n(self) -> int:
        return int(self.t_star.size)

    def pvalue(self, t: float) -> float:
        """(1 + #{b : T*_b ≥ t}) / (B + 1): the smallest α whose q(α) is below t."""
        ge = self.n - int(np.searchsorted(self.t_star, t, side="left"))
        return (1.0 + ge) / (self.n + 1.0)


def band(draws: np.ndarray, observed: np.ndarray, alpha: float, mc_error: float) -> Band:
    """maxT band of ``observed`` (K,) contrasts from ``draws`` (B, K) without NaN.

    ``mc_error`` is the probability allowed for the Monte-Carlo intervals of this look: half
    for the order-statistic interval of q, half (Bonferroni over K) for the SDs.
    """
    b, k = draws.shape
    se = draws.std(axis=0, ddof=1)
    moving = se > SE_FLOOR
    z = np.zeros(b)
    if moving.any():
        dev = np.abs(draws[:, moving] - observed[moving]) / se[moving]
        z = dev.max(axis=1)
    t_star = np.sort(z)
    rank = math.ceil((1.0 - alpha) * (b + 1))  # 1-indexed order statistic
    q = float(t_star[rank - 1]) if rank <= b else math.inf
    # Distribution-free interval for the ideal (1 − α) quantile ξ of T*: P(T*_(l) > ξ) =
    # P(Bin(B, 1 − α) < l) ≤ e/2 and P(T*_(u) < ξ) = P(Bin(B, 1 − α) ≥ u) ≤ e/2.
    e = mc_error / 2.0
    lo_rank = int(binom.ppf(e / 2.0, b, 1.0 - alpha))
    hi_rank = int(binom.ppf(1.0 - e / 2.0, b, 1.0 - alpha)) + 1
    q_low = float(t_star[lo_rank - 1]) if lo_rank >= 1 else 0.0
    q_high = float(t_star[hi_rank - 1]) if hi_rank <= b else math.inf
    # SD's relative Monte-Carlo error: sd(ŝe)/se ≈ sqrt((κ − 1) / (4B)), κ the kurtosis.
    centred = draws - draws.mean(axis=0)
    m2 = np.mean(centred**2, axis=0)
    m4 = np.mean(centred**4, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurt = np.where(moving, m4 / np.where(moving, m2, 1.0) ** 2, 1.0)
    zq = float(norm.ppf(1.0 - e / (2.0 * k)))
    rel = np.where(moving, zq * np.sqrt(np.maximum(kurt - 1.0, 0.0) / (4.0 * b)), 0.0)
    return Band(c=observed, se=se, rel_se_error=rel, t_star=t_star, q=q, q_low=q_low, q_high=q_high)


@dataclass(frozen=True)
class Side:
    """One decision of one question: the bound, its p-value and Monte-Carlo state."""

    bound: float
    pvalue: float
    settled: bool | None  # True: reject H0 for sure; False: not; None: within MC error


def _ratio(num: float, se: float, rel: float) -> tuple[float, float, float]:
    """t = num/se with its Monte-Carlo range from se·(1 ± rel); ±∞ for a constant contrast."""
    if se <= SE_FLOOR:
        t = math.inf if num > 0 else -math.inf
        return t, t, t
    t = num / se
    a = num / (se * (1.0 + rel))
    c = num / (se * (1.0 - rel)) if rel < 1.0 else math.copysign(math.inf, num)
    return t, min(a, c), max(a, c)


def _decide(bd: Band, t: float, t_lo: float, t_hi: float) -> tuple[float, bool | None]:
    """p-value of "q(α) < t" and whether it holds for sure (True), not (False) or within the
    Monte-Carlo error (None)."""
    p = bd.pvalue(t)
    if bd.q_high < t_lo:
        return p, True
    if bd.q_low >= t_hi:
        return p, False
    return p, None


def upper(bd: Band, constructions: list[list[int]], delta: float) -> Side:
    """U = min over ``constructions`` of max over its columns of ĉ + q·se (each construction is
    a valid upper bound on the coverage event), and the non-inferiority decision U < δ, which
    holds iff q < t = max_constructions min_columns (δ − ĉ)/se; p = P*(T* ≥ t)."""
    bound = min(max(_one_bound(bd, j, +1) for j in cols) for cols in constructions)
    t, t_lo, t_hi = _best(
        [
            [_ratio(delta - bd.c[j], bd.se[j], bd.rel_se_error[j]) for j in cols]
            for cols in constructions
        ]
    )
    p, settled = _decide(bd, t, t_lo, t_hi)
    return Side(bound, p, settled)


def lower(bd: Band, constructions: list[list[int]]) -> Side:
    """L = max over ``constructions`` of min over its columns of ĉ − q·se, and the decision
    L > 0, which holds iff q < t = max_constructions min_columns ĉ/se."""
    bound = max(min(_one_bound(bd, j, -1) for j in cols) for cols in constructions)
    t, t_lo, t_hi = _best(
        [[_ratio(bd.c[j], bd.se[j], bd.rel_se_error[j]) for j in cols] for cols in constructions]
    )
    p, settled = _decide(bd, t, t_lo, t_hi)
    return Side(bound, p, settled)


def _best(ratios: list[list[tuple[float, float, float]]]) -> tuple[float, float, float]:
    """(t, t_lo, t_hi) of max over constructions of min over columns (monotone in each)."""
    return (
        max(min(r[0] for r in cols) for cols in ratios),
        max(min(r[1] for r in cols) for cols in ratios),
        max(min(r[2] for r in cols) for cols in ratios),
    )


def _one_bound(bd: Band, j: int, sign: int) -> float:
    if bd.se[j] <= SE_FLOOR:
        return float(bd.c[j])
    if math.isinf(bd.q):
        return sign * math.inf
    return float(bd.c[j] + sign * bd.q * bd.se[j])
