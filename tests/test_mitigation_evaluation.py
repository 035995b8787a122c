"""Held-out evaluation of a rule: closed forms and coverage of the exact-posterior ε interval on
the synthetic generator with known population rates (notes §5; §4.8)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fairengine.datasets import make_intersectional_synthetic
from fairengine.datasets.intersectional_synthetic import DEFAULT_MU0, DEFAULT_MU1
from fairengine.mitigation.evaluation import evaluate_rule, rule_cells
from fairengine.mitigation.split import stratified_split

TAU = np.array([0.4, 0.5, 0.6, 0.5])
P = np.array([0.05, 0.10, 0.0, 0.20])
Q = np.array([0.90, 0.80, 1.0, 0.70])


def _groups(frame):
    return ((frame.attr_a == "a1").astype(int) * 2 + (frame.attr_b == "b1").astype(int)).to_numpy()


def true_epsilons() -> dict[str, float]:
    """Population TPR/FPR of the rule: z | y, s ~ N(μ, 1), score σ(z) > τ ⇔ z > logit τ."""
    logit = np.log(TAU / (1 - TAU))
    above1 = stats.norm.sf(logit - np.array(DEFAULT_MU1))
    above0 = stats.norm.sf(logit - np.array(DEFAULT_MU0))
    tpr = P + (Q - P) * above1
    fpr = P + (Q - P) * above0
    e_tpr = float(np.log(tpr.max() / tpr.min()))
    e_fpr = float(np.log(fpr.max() / fpr.min()))
    return {"tpr": e_tpr, "fpr": e_fpr, "eo": max(e_tpr, e_fpr)}


def test_point_estimates_are_the_affine_rates_and_loss_matches_rows() -> None:
    d = make_intersectional_synthetic(n=5000, seed=4).frame
    g, y, f = _groups(d), d.y.to_numpy(), d.score.to_numpy()
    cells, rows = rule_cells(g, y, f, TAU)
    ev = evaluate_rule(cells, rows, P, Q, metrics=["sp", "eo"], alpha=0.0, beta=0.0,
                       n_draws=200, n_realised=0)
    pi = np.where(f > TAU[g], Q[g], P[g])
    for s in range(4):
        sel = g == s
        assert ev.group_rates["selection_rate"][s] == pytest.approx(pi[sel].mean())
        assert ev.group_rates["tpr"][s] == pytest.approx(pi[sel & (y == 1)].mean())
    assert ev.loss.estimate == pytest.approx(np.mean(np.where(y == 1, 1 - pi, pi)))
    assert ev.accuracy.estimate == pytest.approx(1 - ev.loss.estimate)
    assert ev.loss.low < ev.loss.estimate < ev.loss.high


def test_posterior_interval_covers_the_true_epsilon() -> None:
    truth = true_epsilons()
    reps, cover, below = 200, {m: 0 for m in truth}, {m: 0 for m in truth}
    rng = np.random.default_rng(0)
    for r in range(reps):
        d = make_intersectional_synthetic(n=20_000, seed=100 + r).frame
        cells, rows = rule_cells(_groups(d), d.y.to_numpy(), d.score.to_numpy(), TAU)
        ev = evaluate_rule(cells, rows, P, Q, metrics=["tpr", "fpr", "eo"], n_draws=2000,
                           n_realised=0, rng=rng)
        for m, e in ev.epsilon.items():
            cover[m] += e.low <= truth[m] <= e.high
            below[m] += truth[m] <= e.upper_bound
    # 95 % intervals; Monte-Carlo sd of a coverage over 200 reps is 0.015: allow 4 sd
    for m in truth:
        assert abs(cover[m] / reps - 0.95) <= 0.062, (m, cover[m] / reps)
        assert abs(below[m] / reps - 0.95) <= 0.062, (m, below[m] / reps)


def test_realised_epsilon_centres_on_the_expected_one() -> None:
    d = make_intersectional_synthetic(n=200_000, seed=9).frame
    cells, rows = rule_cells(_groups(d), d.y.to_numpy(), d.score.to_numpy(), TAU)
    ev = evaluate_rule(cells, rows, P, Q, metrics=["sp"], n_draws=500, n_realised=200)
    e = ev.epsilon["sp"]
    assert e.realised_low <= e.estimate <= e.realised_high
    assert abs(e.realised_mean - e.estimate) < 0.03


def test_stratified_split_keeps_every_stratum_on_both_sides() -> None:
    rng = np.random.default_rng(0)
    strata = np.repeat(np.arange(6), [2, 3, 10, 100, 1, 50])
    fit, test = stratified_split(strata, 0.5, rng)
    assert np.intersect1d(fit, test).size == 0 and fit.size + test.size == strata.size
    for s in (0, 1, 2, 3, 5):
        assert (strata[fit] == s).any() and (strata[test] == s).any()
    assert abs((strata[test] == 3).sum() - 50) <= 1
