"""Loss-ratio and error-rate-ratio tests of Maity et al. (2021) §3 (eq. 3.4-3.12, App. C)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy.stats import norm

from fairengine.errors import DataContractError
from fairengine.individual import error_rate_ratio_test, loss_ratio_test

Z95 = 1.6448536269514722  # Φ⁻¹(0.95)


def test_loss_ratio_hand_computed() -> None:
    """r = (2,4,6,8)/(2,2,2,2) = 1..4: S = 2.5, V (ddof 1) = stdev, LB = S − z V/√n (eq. 3.10)."""
    res = loss_ratio_test([2, 2, 2, 2], [2, 4, 6, 8], delta=1.25, alpha=0.05)
    v = statistics.stdev([1, 2, 3, 4])
    se = v / 2
    assert res.statistic == pytest.approx(2.5)
    assert res.standard_error == pytest.approx(se)
    assert res.lower_bound == pytest.approx(2.5 - Z95 * se)
    assert res.pvalue == pytest.approx(1 - norm.cdf((2.5 - 1.25) / se))
    lo, hi = res.confidence_interval()
    assert (lo, hi) == pytest.approx((2.5 - 1.959964 * se, 2.5 + 1.959964 * se), rel=1e-6)
    assert res.reject == (res.lower_bound > 1.25) == (res.pvalue < 0.05)
    # the paper's code: ddof 0 (np.std)
    res0 = loss_ratio_test([2, 2, 2, 2], [2, 4, 6, 8], ddof=0)
    assert res0.standard_error == pytest.approx(statistics.pstdev([1, 2, 3, 4]) / 2)


def test_loss_floor_and_nonfinite() -> None:
    """r = (ℓ1 + ε)/(ℓ0 + ε); with ε = 0 a zero original loss gives a dropped non-finite ratio."""
    l0 = np.array([0.0, 1.0, 2.0, 1.0])
    l1 = np.array([0.0, 2.0, 2.0, 3.0])
    res = loss_ratio_test(l0, l1, eps=0.0)
    assert res.n_dropped == 1 and res.n == 3
    assert res.statistic == pytest.approx(np.mean([2.0, 1.0, 3.0]))
    floored = loss_ratio_test(l0, l1, eps=1e-4)
    assert floored.n == 4 and floored.ratios[0] == pytest.approx(1.0)
    assert floored.diagnostics["n_below_floor"] == 1
    with pytest.raises(DataContractError, match="not finite"):
        loss_ratio_test(l0, l1, eps=0.0, drop_nonfinite=False)


def test_degenerate_cases_never_say_fair_on_nan() -> None:
    few = loss_ratio_test([1.0], [2.0])
    assert few.status == "too_few_rows" and math.isnan(few.pvalue) and not few.reject
    const = loss_ratio_test([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert const.status == "zero_variance" and math.isnan(const.pvalue) and not const.reject
    const_low = loss_ratio_test([1.0, 1.0], [1.0, 1.0])
    assert math.isnan(const_low.pvalue) and not const_low.reject
    none = error_rate_ratio_test([0, 0, 0], [1, 0, 1])
    assert none.status == "no_errors_at_original_points" and math.isnan(none.statistic)
    assert none.error_rate_mapped == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": -1.0}, "delta"),
        ({"alpha": 1.5}, "alpha"),
        ({"eps": -1e-3}, "eps"),
        ({"ddof": 2}, "ddof"),
    ],
)
def test_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(DataContractError, match=match):
        loss_ratio_test([1.0, 2.0], [1.0, 2.0], **kwargs)


def test_bad_inputs() -> None:
    with pytest.raises(DataContractError, match="same length"):
        loss_ratio_test([1.0, 2.0], [1.0])
    with pytest.raises(DataContractError, match=">= 0"):
        loss_ratio_test([1.0, -2.0], [1.0, 1.0])
    with pytest.raises(DataContractError, match="0/1"):
        error_rate_ratio_test([0, 2], [1, 0])


def test_error_rate_ratio_hand_computed() -> None:
    """τ̂ = ē1/ē0, Var = (ē1² s00 + ē0² s11 − 2 ē0 ē1 s01)/(n ē0⁴) with np.cov (ddof 1)."""
    e0 = np.array([1, 0, 1, 0, 0, 1, 0, 0])
    e1 = np.array([1, 1, 1, 0, 1, 1, 0, 0])
    res = error_rate_ratio_test(e0, e1)
    c = np.cov(np.vstack([e1, e0]))  # rows: mapped, original
    a, b, n = e1.mean(), e0.mean(), e0.size
    var = (a * a * c[1, 1] + b * b * c[0, 0] - 2 * a * b * c[0, 1]) / (n * b**4)
    assert res.statistic == pytest.approx(a / b)
    assert res.standard_error == pytest.approx(math.sqrt(var))
    assert res.lower_bound == pytest.approx(a / b - Z95 * math.sqrt(var))


def test_delta_method_se_matches_simulation() -> None:
    """Delta-method SE vs the Monte-Carlo sd of τ̂ over R = 2,000 samples of n = 2,000 pairs.

    Pairs: e0 ~ Bernoulli(0.2); e1 = e0 OR Bernoulli(0.15) (so e1 ≥ e0, correlated). The MC
    relative error of an sd from R = 2,000 replicates is 1/√(2R) ≈ 1.6 %; tolerance 6 %.
    """
    rng = np.random.default_rng(11)
    R, n = 2000, 2000
    e0 = rng.random((R, n)) < 0.2
    e1 = e0 | (rng.random((R, n)) < 0.15)
    tau = e1.mean(1) / e0.mean(1)
    se = np.array([error_rate_ratio_test(e0[r], e1[r]).standard_error for r in range(200)])
    assert np.mean(se) == pytest.approx(np.std(tau, ddof=1), rel=0.06)


@pytest.mark.slow
def test_type_one_error_at_the_boundary_and_coverage() -> None:
    """Ratios with mean exactly δ (1 + Gamma(2, 0.125)): rejection rate ≤ α + 3 MC errors and
    two-sided 95 % CI coverage within 3 MC errors of 0.95 (R = 4,000, n = 400; MC error of a
    rate near 0.05 is 0.0034, near 0.95 also 0.0034)."""
    rng = np.random.default_rng(5)
    R, n = 4000, 400
    r = 1.0 + rng.gamma(2.0, 0.125, size=(R, n))  # E r = 1.25
    res = [loss_ratio_test(np.ones(n), r[i], delta=1.25) for i in range(R)]
    rate = np.mean([x.reject for x in res])
    mc = math.sqrt(0.05 * 0.95 / R)
    assert rate <= 0.05 + 3 * mc
    assert rate >= 0.05 - 6 * mc  # not trivially conservative (right skew lowers it slightly)
    cover = np.mean([lo <= 1.25 <= hi for lo, hi in (x.confidence_interval(0.95) for x in res)])
    assert abs(cover - 0.95) <= 3 * mc + 0.005
