"""DeLong AUC (fairengine.delong): sklearn's AUC, a brute-force O(m·n) DeLong, closed forms,
weighted = replicated rows, histogram form, and the variance against simulation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from fairengine.delong import (
    auc_delong,
    auc_delong_from_histogram,
    auc_delong_interval,
    auc_interval,
    binned_auc_error_bound,
    delong_placements,
)
from fairengine.errors import DataContractError


def brute_force_delong(y: np.ndarray, s: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
    """DeLong et al. (1988) straight from the definition: the m×n kernel matrix ψ."""
    x, z = s[y == 1], s[y == 0]
    psi = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    auc = psi.mean()
    var = v10.var(ddof=1) / x.size + v01.var(ddof=1) / z.size
    return float(auc), float(var), v10, v01


def sample(n: int, seed: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.normal(0.8 * y, 1.0)
    if ties:
        s = np.round(s * 2) / 2  # heavy ties
    return y, s


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_and_sklearn(seed: int, ties: bool) -> None:
    y, s = sample(300, seed, ties)
    est = auc_delong(y, s)
    auc, var, v10, v01 = brute_force_delong(y, s)
    assert est.auc == pytest.approx(auc, abs=1e-13)
    assert est.auc == pytest.approx(roc_auc_score(y, s), abs=1e-13)
    assert est.variance == pytest.approx(var, rel=1e-10)
    assert est.se == pytest.approx(np.sqrt(var), rel=1e-10)
    assert (est.n_pos, est.n_neg) == (int(y.sum()), int((1 - y).sum()))
    pl = delong_placements(y, s)
    np.testing.assert_allclose(pl.v10, v10, atol=1e-14)
    np.testing.assert_allclose(pl.v01, v01, atol=1e-14)
    assert pl.auc == pytest.approx(auc)


def test_hand_computed_small_case() -> None:
    # positives 0.9, 0.1; negatives 0.9, 0.1: psi = [[.5, 1], [0, .5]] -> AUC 0.5
    # V10 = (.75, .25), V01 = (.25, .75): S10 = S01 = 0.125, Var = .125/2 + .125/2 = 0.125
    est = auc_delong([1, 0, 1, 0], [0.9, 0.9, 0.1, 0.1])
    assert est.auc == 0.5
    assert est.variance == pytest.approx(0.125)


def test_all_scores_equal_gives_half_with_zero_variance() -> None:
    est = auc_delong([0, 1, 1, 0, 1], np.full(5, 0.3))
    assert est.auc == 0.5 and est.variance == 0.0
    ci = est.confidence_interval()
    assert (ci.low, ci.high) == (0.5, 0.5)


def test_perfect_separation() -> None:
    est = auc_delong([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4])
    assert est.auc == 1.0 and est.variance == 0.0


def test_single_positive_gives_nan_variance() -> None:
    est = auc_delong([1, 0, 0, 0], [0.5, 0.1, 0.7, 0.2])
    assert est.auc == pytest.approx(2 / 3)
    assert np.isnan(est.variance)


def test_weighted_equals_replicated_rows_and_sklearn() -> None:
    y, s = sample(200, 7, ties=True)
    rng = np.random.default_rng(3)
    w = rng.integers(1, 5, y.size)
    est_w = auc_delong(y, s, w.astype(float))
    est_rep = auc_delong(np.repeat(y, w), np.repeat(s, w))
    assert est_w.auc == pytest.approx(est_rep.auc, abs=1e-13)
    assert est_w.auc == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-13)
    assert est_w.weight_pos == pytest.approx(float(w[y == 1].sum()))
    assert est_w.n_pos == int(y.sum())


def test_unit_weights_reduce_to_delong() -> None:
    y, s = sample(150, 11)
    a, b = auc_delong(y, s), auc_delong(y, s, np.ones(y.size))
    assert a.auc == pytest.approx(b.auc) and a.variance == pytest.approx(b.variance, rel=1e-12)


def test_weighted_variance_matches_simulation() -> None:
    """Random weights independent of the data: the linearised variance estimates the sampling
    variance of the weighted AUC. R = 800 replicates of m = n ≈ 150: the Monte-Carlo variance
    has relative s.e. √(2/R) ≈ 5 %, the mean estimate much less; we allow 20 %."""
    rng = np.random.default_rng(2024)
    reps, n = 800, 300
    aucs, vars_ = np.empty(reps), np.empty(reps)
    for r in range(reps):
        y = rng.integers(0, 2, n)
        s = rng.normal(1.0 * y, 1.0)
        w = rng.exponential(1.0, n)
        e = auc_delong(y, s, w)
        aucs[r], vars_[r] = e.auc, e.variance
    assert vars_.mean() == pytest.approx(aucs.var(ddof=1), rel=0.2)


def test_unweighted_variance_and_coverage_by_simulation() -> None:
    """Binormal model, true AUC = Φ(1/√2) ≈ 0.7602. R = 1000 replicates: the empirical variance
    has relative s.e. ≈ 4.5 %; coverage of the 95 % interval has MC s.e. ≈ 0.7 %."""
    from scipy.stats import norm

    rng = np.random.default_rng(99)
    true_auc = norm.cdf(1 / np.sqrt(2))
    reps = 1000
    aucs, vars_, cover = np.empty(reps), np.empty(reps), 0
    for r in range(reps):
        y = np.repeat([0, 1], 100)
        s = rng.normal(1.0 * y, 1.0)
        est, ci = auc_delong_interval(y, s)
        aucs[r], vars_[r] = est.auc, est.variance
        cover += ci.low <= true_auc <= ci.high
    assert aucs.mean() == pytest.approx(true_auc, abs=4 * aucs.std() / np.sqrt(reps))
    assert vars_.mean() == pytest.approx(aucs.var(ddof=1), rel=0.15)
    assert abs(cover / reps - 0.95) < 4 * np.sqrt(0.05 * 0.95 / reps)


def test_histogram_form_exact_on_distinct_scores_and_bounded_when_binned() -> None:
    y, s = sample(500, 5)
    exact = auc_delong(y, s)
    u, inv = np.unique(s, return_inverse=True)
    neg = np.bincount(inv[y == 0], minlength=u.size)
    pos = np.bincount(inv[y == 1], minlength=u.size)
    h = auc_delong_from_histogram(neg, pos)
    assert h.auc == pytest.approx(exact.auc) and h.variance == pytest.approx(exact.variance)
    # binned into 8 equal-width bins: within the stated error bound
    edges = np.linspace(s.min(), s.max() + 1e-9, 9)
    b = np.digitize(s, edges) - 1
    negb = np.bincount(b[y == 0], minlength=8)
    posb = np.bincount(b[y == 1], minlength=8)
    hb = auc_delong_from_histogram(negb, posb)
    bound = binned_auc_error_bound(negb, posb)
    assert 0 < abs(hb.auc - exact.auc) <= bound


def test_logit_interval_inside_unit_interval() -> None:
    ci = auc_interval(0.98, 0.02, 0.95, "logit")
    assert 0.0 < ci.low < 0.98 < ci.high < 1.0
    w = auc_interval(0.98, 0.02, 0.95, "wald")
    assert w.high == 1.0 and w.method == "delong wald"


@pytest.mark.parametrize(
    "y,s,w,match",
    [
        ([0, 0, 0], [0.1, 0.2, 0.3], None, "both classes"),
        ([0, 1, 2], [0.1, 0.2, 0.3], None, "0/1 labels"),
        ([0, 1], [0.1, np.nan], None, "missing or infinite"),
        ([0, 1], [0.1, 0.2, 0.3], None, "same length"),
        ([0, 1], [0.1, 0.2], [1.0, -1.0], "non-negative"),
        ([0, 1], [0.1, 0.2], [0.0, 1.0], "positive total weight"),
    ],
)
def test_bad_input(y, s, w, match) -> None:
    with pytest.raises(DataContractError, match=match):
        auc_delong(np.asarray(y), np.asarray(s), None if w is None else np.asarray(w))


def test_bad_interval_method() -> None:
    with pytest.raises(DataContractError, match="wald"):
        auc_interval(0.7, 0.05, 0.95, "exact")
