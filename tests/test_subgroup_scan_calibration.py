"""Statistical tests of the subgroup scan's selection-adjusted p-value (simulations with known
truth; every rate is compared within its Monte-Carlo error):

* **Type-I error** (Kulldorff 1997 / Zhang & Neill 2016 §4: the randomization test of the
  maximum is exact): a calibrated model (y ~ Bernoulli(p)), no bias, n = 5,000, 6 attributes of
  4 levels, depth 2 (264 subgroups): the calibrated maximum rejects at rate alpha ± 3 MC
  standard errors; the naive per-subgroup test (any unadjusted p < alpha) is reported beside it
  and rejects almost always (why the calibration matters). Also for the positive-rate scan under
  its permutation null.
* **Power**: an odds shift q planted in one depth-2 subgroup; the exact rule is recovered (top
  subgroup and step-down rejected) at least as often as a Bonferroni scan flags it; the
  simultaneous intervals cover every subgroup's true deviation at once in ≥ 95% of runs (MC).
* **Gaussian mode** (exact null covariance) gives the exact mode's p-value within MC error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairengine.subgroup_scan import (
    build_search_space,
    cell_outcomes,
    code_features,
    naive_pvalues,
    observed_scan,
    scan_space,
)

ALPHA = 0.05
N = 5000


@pytest.fixture(scope="module")
def world() -> tuple[pd.DataFrame, np.ndarray, object]:
    rng = np.random.default_rng(20261126)
    frame = pd.DataFrame({f"a{j}": rng.integers(0, 4, N) for j in range(6)})
    p = rng.beta(2, 3, N)
    space = build_search_space(code_features(frame, list(frame.columns)), depth=2, min_size=30)
    return frame, p, space


def _mc_band(rate: float, reps: int) -> float:
    return 3 * np.sqrt(rate * (1 - rate) / reps)


def test_calibrated_maximum_holds_alpha_where_the_naive_test_does_not(world, capsys) -> None:
    _, p, space = world
    assert space.n_subgroups == 6 * 4 + 15 * 16
    rng = np.random.default_rng(1)
    reps = 300
    rejected = naive = bonferroni = 0
    for r in range(reps):
        y = (rng.random(N) < p).astype(float)
        res = scan_space(
            space, cell_outcomes(space, "calibration", y, p), top_k=1, min_draws=0, seed=r
        )
        rejected += res.null.decision == "reject"
        naive += res.naive_min_pvalue < ALPHA
        bonferroni += res.bonferroni_pvalue <= ALPHA
    with capsys.disabled():
        print(
            f"\n[type-I, calibration, {reps} reps] calibrated max {rejected / reps:.3f}, "
            f"naive per-subgroup {naive / reps:.3f}, Bonferroni {bonferroni / reps:.3f}"
        )
    band = _mc_band(ALPHA, reps)
    assert abs(rejected / reps - ALPHA) <= band
    assert naive / reps > 0.9
    assert bonferroni / reps <= ALPHA + band


def test_positive_rate_scan_holds_alpha_under_its_permutation_null(world) -> None:
    _, p, space = world
    rng = np.random.default_rng(2)
    y = (rng.random(N) < p).astype(float)
    reps = 150
    rejected = 0
    for r in range(reps):
        yhat = (rng.random(N) < 0.3).astype(float)  # decisions independent of the subgroups
        cells = cell_outcomes(space, "positive_rate", y, decision=yhat)
        res = scan_space(space, cells, top_k=1, min_draws=0, seed=r)
        rejected += res.null.decision == "reject"
    assert rejected / reps <= ALPHA + _mc_band(ALPHA, reps)


def test_planted_subgroup_recovered_at_least_as_often_as_bonferroni_flags_it(world, capsys) -> None:
    frame, p, space = world
    planted_rule = "a0 = 1 and a1 = 2"
    planted = ((frame.a0 == 1) & (frame.a1 == 2)).to_numpy()
    s_planted = next(i for i, g in enumerate(space.subgroups) if g.rule == planted_rule)
    q = 1.7
    p_true = np.where(planted, q * p / (1 - p + q * p), p)
    rng = np.random.default_rng(3)
    reps = 60
    top1 = in_rejected = bonf_flags = bonf_top1 = covered = 0
    masks = np.array([space.rows_in(s) for s in range(space.n_subgroups)], dtype=float)
    true_dev = (masks @ (p_true - p)) / masks.sum(axis=1)
    for r in range(reps):
        y = (rng.random(N) < p_true).astype(float)
        cells = cell_outcomes(space, "calibration", y, p)
        res = scan_space(space, cells, top_k=5, min_draws=199, seed=r)
        # simultaneous intervals δ̂ ± c √V / n of every subgroup cover every true deviation
        mom = observed_scan(space, cells, "two-sided").moments
        half = res.null.critical_value * np.sqrt(mom.variance) / mom.n
        dev = (mom.observed - mom.expected) / mom.n
        covered += bool(np.all(np.abs(dev - true_dev) <= half))
        hit = [t for t in res.top if t.rule == planted_rule]
        top1 += res.top[0].rule == planted_rule and res.null.decision == "reject"
        in_rejected += bool(hit) and hit[0].adjusted_pvalue <= ALPHA
        scan = observed_scan(space, cells, "two-sided")
        bonf = naive_pvalues(scan.z, "two-sided") * space.n_subgroups <= ALPHA
        bonf_flags += bool(bonf[s_planted])
        bonf_top1 += bool(bonf[s_planted]) and scan.ranking[0] == s_planted
    with capsys.disabled():
        print(
            f"\n[power, q={q}, {reps} reps] exact rule top-1 and calibrated reject "
            f"{top1 / reps:.2f} (Bonferroni top-1 {bonf_top1 / reps:.2f}); rule among the "
            f"step-down rejections {in_rejected / reps:.2f} (Bonferroni flags it "
            f"{bonf_flags / reps:.2f}); simultaneous coverage {covered / reps:.2f}"
        )
    assert 0.2 < bonf_flags / reps < 0.95  # the setting has power to compare, not 0 or 1
    # simultaneous 95% coverage over all 264 subgroups (variance at the null: approximate)
    assert covered / reps >= 0.95 - _mc_band(0.95, reps)
    # the calibrated threshold is below Bonferroni's; allow the Monte-Carlo error of both
    slack = 2 / reps
    assert in_rejected / reps >= bonf_flags / reps - slack
    assert top1 / reps >= bonf_top1 / reps - slack


def test_gaussian_mode_pvalue_agrees_with_exact_mode(world) -> None:
    frame, p, space = world
    planted = ((frame.a2 == 0) & (frame.a3 == 3)).to_numpy()
    q = 1.35
    rng = np.random.default_rng(4)
    y = (rng.random(N) < np.where(planted, q * p / (1 - p + q * p), p)).astype(float)
    cells = cell_outcomes(space, "calibration", y, p)
    b = 3000
    exact = scan_space(space, cells, top_k=1, min_draws=b, mode="exact", seed=1)
    gauss = scan_space(space, cells, top_k=1, min_draws=b, mode="gaussian", seed=2)
    pe, pg = exact.pvalue, gauss.pvalue
    assert 0.005 < pe < 0.9  # an informative comparison, not both at the floor
    se = np.sqrt(pe * (1 - pe) * (1 / exact.null.draws + 1 / gauss.null.draws))
    assert abs(pe - pg) <= 4 * se
    # the null maxima agree in distribution (95% quantiles within a few percent)
    qe = np.quantile(exact.null.maxima, 0.95)
    qg = np.quantile(gauss.null.maxima, 0.95)
    assert abs(qe - qg) / qe < 0.05


def test_split_scan_estimates_are_valid_after_selection() -> None:
    """Under the null, the top rule's p-value on the estimation half is uniform (the rule was
    chosen on the other half), whereas its naive p-value on the discovery half is not."""
    from fairengine.subgroup_scan.split import split_scan

    rng = np.random.default_rng(7)
    n = 2000
    frame = pd.DataFrame({f"a{j}": rng.integers(0, 3, n) for j in range(4)})
    p = rng.beta(2, 3, n)
    reps = 120
    held_out = discovery = 0
    for r in range(reps):
        y = (rng.random(n) < p).astype(float)
        res = split_scan(
            frame, list(frame.columns), y, p, top_k=1, min_draws=0, min_size=30, seed=r
        )
        held_out += res.estimates[0].pvalue < ALPHA
        discovery += res.discovery.top[0].naive_pvalue < ALPHA
        assert res.discovery_rows == res.estimation_rows == n // 2
    assert held_out / reps <= ALPHA + _mc_band(ALPHA, reps)
    assert discovery / reps > 0.8
