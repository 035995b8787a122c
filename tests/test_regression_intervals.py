"""Coverage of the per-group intervals of fairengine.regression (t for the mean residual and
the mean prediction, Hall's 1992 transformed t for MAE and MSE) by simulation: with residuals
e ~ N(0.3, 1) and predictions ŷ ~ N(1, 4), the share of 95 % intervals that contain the true
value lies in the 99.9 % binomial band of 0.95 at n = 50 and n = 500; and the one-sided bounds
of bounded group loss and their test agree."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fairengine.regression.bounded_loss import bounded_group_loss
from fairengine.regression.mean_intervals import (
    hall_bounds,
    hall_interval,
    hall_pvalue_above,
    mean_moments,
    t_interval,
)
from fairengine.regression.summaries import summarize_group

REPS = 2000
MU, SIGMA = 0.3, 1.0
TRUE = {
    "mean_prediction": 1.0,
    "mean_residual": MU,
    # E|N(μ, σ²)| = σ√(2/π)·exp(−μ²/2σ²) + μ(1 − 2Φ(−μ/σ))
    "mae": SIGMA * math.sqrt(2 / math.pi) * math.exp(-(MU**2) / (2 * SIGMA**2))
    + MU * (1 - 2 * stats.norm.cdf(-MU / SIGMA)),
    "mse": MU**2 + SIGMA**2,
}


def _band(level: float, reps: int) -> tuple[float, float]:
    lo = stats.binom.ppf(0.0005, reps, level) / reps
    hi = stats.binom.ppf(0.9995, reps, level) / reps
    return float(lo), float(hi)


@pytest.mark.parametrize("n", [50, 500])
def test_interval_coverage_within_monte_carlo_error(n: int) -> None:
    rng = np.random.default_rng(20260 + n)
    hits = dict.fromkeys(TRUE, 0)
    for _ in range(REPS):
        pred = rng.normal(1.0, 2.0, n)
        y = pred + rng.normal(MU, SIGMA, n)
        g = summarize_group(y, pred, None, group="g", code=0)
        for q, truth in TRUE.items():
            iv = g.estimate(q).interval
            hits[q] += iv.low <= truth <= iv.high
    lo, hi = _band(0.95, REPS)
    coverage = {q: h / REPS for q, h in hits.items()}
    for q, c in coverage.items():
        assert lo <= c <= hi, (q, n, coverage, (lo, hi))


def test_hall_reduces_to_t_without_skewness() -> None:
    a = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    mm = mean_moments(a)
    assert mm.skew == 0.0
    assert hall_interval(mm, 0.95) == pytest.approx(t_interval(mm, 0.95))


def test_mse_t_interval_would_undercover_at_n50() -> None:
    """Why MAE/MSE use Hall's interval: the plain t interval of the MSE misses more often."""
    rng = np.random.default_rng(7)
    t_hits = hall_hits = 0
    for _ in range(REPS):
        e2 = rng.normal(MU, SIGMA, 50) ** 2
        mm = mean_moments(e2)
        lo, hi = t_interval(mm, 0.95)
        t_hits += lo <= TRUE["mse"] <= hi
        lo, hi = hall_interval(mm, 0.95)
        hall_hits += lo <= TRUE["mse"] <= hi
    assert t_hits < hall_hits
    assert t_hits / REPS < _band(0.95, REPS)[0]


def test_bounded_loss_bounds_and_test_agree() -> None:
    rng = np.random.default_rng(3)
    n = 400
    codes = np.repeat([0, 1], n // 2)
    pred = rng.normal(size=n)
    y = pred + rng.normal(size=n) * np.where(codes == 0, 1.0, 1.5)
    for zeta in (0.8, 1.0, 1.2, 2.0, 2.5):
        res = bounded_group_loss(y, pred, codes, ["a", "b"], bound=zeta, confidence_level=0.95)
        for g in res.groups:
            rows = codes == ["a", "b"].index(g.group)
            assert g.mean_loss == pytest.approx(np.mean((y - pred)[rows] ** 2), rel=1e-12)
            # p ≤ α exactly when the lower one-sided bound exceeds ζ
            assert (g.pvalue <= 0.05) == (g.lower > zeta)
            assert g.lower < g.mean_loss < g.upper
    mm = mean_moments(np.abs(y - pred))
    lo, _ = hall_bounds(mm, 0.95)
    assert hall_pvalue_above(mm, lo) == pytest.approx(0.05, abs=1e-9)


def test_bounded_loss_upper_bound_coverage() -> None:
    """The one-sided 95 % upper bound of the absolute loss covers the true MAE ~95 % of the
    time (n = 100), so "upper ≤ ζ" certifies the bound at about the stated confidence."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(REPS):
        e = rng.normal(MU, SIGMA, 100)
        _, hi = hall_bounds(mean_moments(np.abs(e)), 0.95)
        hits += TRUE["mae"] <= hi
    lo, up = _band(0.95, REPS)
    assert lo <= hits / REPS <= up
