"""Figure 1 of Maity et al. (2021, §4.1 / App. E) and the type-I error of the whole pipeline."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fairengine.datasets import make_maity_simulation
from fairengine.individual import (
    DiscountedDirectionsMetric,
    TorchClassifier,
    gradient_flow,
    loss_ratio_test,
)
from fairengine.individual.figure1 import figure1_grid, fit_intercepts
from fairengine.individual.torch_models import LinearLogitModule


@pytest.mark.slow
def test_reference_values_with_the_authors_quirk() -> None:
    """The authors' stored 0° grid (notes §5.10, values read from their test_stat_0.npy):
    LB(0,0) = 1.0, LB(−4,−4) = 1.573606, LB(4,4) = 1.670564, LB(2,−2) = 1.378039. Reproduced
    with the doubled intercept (replicate_quirks=True); bisection tolerance 1e-7 leaves ~1e-7."""
    grid = np.array([-4.0, -2.0, 0.0, 2.0, 4.0])
    g = figure1_grid(0.0, replicate_quirks=True, grid=grid, num_threads=1)
    lb = g.lower_bound
    assert lb[2, 2] == pytest.approx(1.0, abs=1e-12)
    assert lb[0, 0] == pytest.approx(1.573606, abs=2e-6)
    assert lb[4, 4] == pytest.approx(1.670564, abs=2e-6)
    assert lb[3, 1] == pytest.approx(1.378039, abs=2e-6)


@pytest.mark.slow
def test_decision_pattern_without_the_quirk() -> None:
    """True metric, correct single intercept: reject iff |θ1| is large, whatever θ2 (Figure 1
    left). Rotating the metric by 10° keeps θ1 = 0 unrejected."""
    grid = np.array([-4.0, -2.0, 0.0, 2.0, 4.0])
    g = figure1_grid(0.0, grid=grid, num_threads=1)
    rej = g.reject(1.25)
    assert not rej[2].any()  # θ1 = 0: never rejected
    assert rej[[0, 4]].all()  # |θ1| = 4: always rejected
    assert all(len(set(row)) == 1 for row in rej)  # each θ1 row: same decision for every θ2
    g10 = figure1_grid(10.0, grid=np.array([-4.0, 0.0, 4.0]), num_threads=1)
    assert not g10.reject(1.25)[1, 1]


def test_intercept_solves_the_score_equation() -> None:
    ds = make_maity_simulation()
    X, y = ds.frame[["x1", "x2"]].to_numpy(), ds.frame["y"].to_numpy()
    th = np.array([[1.0, -2.0], [0.0, 0.0]])
    b = fit_intercepts(X, y, th)
    fitted = (1 / (1 + np.exp(-(X @ th.T + b)))).sum(0)
    np.testing.assert_allclose(fitted, y.sum(), atol=1e-4)


@pytest.mark.slow
def test_type_one_error_and_coverage_of_the_pipeline() -> None:
    """Whole pipeline (fixed logistic model θ = (1, 1), b = 0, on the 2-D simulation, true metric,
    λ = 10, η = 0.04, T = 50) with δ set to the audit value τ = E[r] itself, estimated on an
    independent 100,000-row sample (its SE is √(200/100000) ≈ 4.5 % of one audit's SE).
    R = 600 audits of n = 200 rows: the rejection rate must be ≤ α + 3 MC errors
    (MC error √(0.05·0.95/600) = 0.0089) and the two-sided CI coverage within 3 MC errors
    (0.0089) + 0.02 (τ's own error and the skew of r) of 0.95. An exactly fair model (θ1 = 0) is
    rejected at δ = 1.25 in none of the audits."""
    metric = DiscountedDirectionsMetric([[1.0, 0.0]]).fit()

    def ratios(theta: list[float], n: int, seed: int) -> np.ndarray:
        ds = make_maity_simulation(n=n, seed=seed)
        X, y = ds.frame[["x1", "x2"]].to_numpy(), ds.frame["y"].to_numpy()
        clf = TorchClassifier(LinearLogitModule(theta, 0.0))
        f = gradient_flow(clf, X, y, metric, lam=10.0, steps=50, eta=0.04, num_threads=1)
        return f.loss_mapped / f.loss_original

    tau = float(ratios([1.0, 1.0], 100_000, seed=101).mean())
    R, n = 600, 200
    r = ratios([1.0, 1.0], R * n, seed=202).reshape(R, n)
    res = [loss_ratio_test(np.ones(n), r[i], delta=tau) for i in range(R)]
    mc = math.sqrt(0.05 * 0.95 / R)
    rate = np.mean([x.reject for x in res])
    assert rate <= 0.05 + 3 * mc
    cover = np.mean([lo <= tau <= hi for lo, hi in (x.confidence_interval(0.95) for x in res)])
    assert abs(cover - 0.95) <= 3 * mc + 0.02
    fair = ratios([0.0, 1.0], R * n, seed=303).reshape(R, n)
    assert not any(loss_ratio_test(np.ones(n), fair[i]).reject for i in range(R))
