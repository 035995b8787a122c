"""Statistical validity of fairengine.permutation: simulations with known truth (DiCiccio et al.
2020 §4), exactness of the fast paths against exhaustive enumeration of row permutations, and
sample-size planning against simulated power."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare, multivariate_hypergeom

from fairengine.delong import auc_delong
from fairengine.errors import DataContractError
from fairengine.permutation import (
    correlation_permutation_test,
    minimum_detectable_difference,
    permutation_test,
    plan_sample_size,
)


def fnr_example(rng: np.random.Generator, n_a: int = 500, n_b: int = 500):
    """Paper §4.2: group A 80% positives, group B 20%; TPR = TNR = 0.8 in both (fair FNR)."""
    g = np.r_[np.ones(n_a, bool), np.zeros(n_b, bool)]
    y = rng.binomial(1, np.where(g, 0.8, 0.2))
    correct = rng.random(g.size) < 0.8
    yhat = np.where(correct, y, 1 - y)
    return y, yhat, g


@pytest.mark.slow
def test_fnr_example_studentized_is_valid_unstudentized_is_not() -> None:
    """Type-I error at α = 0.05 over S = 3000 datasets of 1000 rows per group, T = 199
    permutations (an exact-level test then rejects with probability 10/200 = 0.05). Monte-Carlo
    SE of a rate near 0.05 is √(0.05·0.95/3000) = 0.004: the studentized rate must lie in
    [0.035, 0.065] (±3.75 SE; our 4000-dataset runs gave 0.053 at 500 and 0.052 at 1000 rows
    per group). The un-studentized test's asymptotic rejection rate is 2Φ(−1.96/√1.5625) =
    0.117 (sampling variance ∝ 1/0.8 + 1/0.2 vs permutation variance ∝ 4/(0.8+0.2)); we require
    ≥ 0.085 (SE 0.006, a 5-SE margin)."""
    rng = np.random.default_rng(2020)
    s = 3000
    rej = {"per_permutation": 0, "none": 0}
    for _ in range(s):
        y, yhat, g = fnr_example(rng, 1000, 1000)
        for mode in rej:
            res = permutation_test(
                y, yhat, g, metric="fnr", studentize=mode, n_permutations=199, seed=rng
            )
            rej[mode] += res.pvalue <= 0.05
    stud, raw = rej["per_permutation"] / s, rej["none"] / s
    assert 0.035 <= stud <= 0.065, stud
    assert raw >= 0.085, raw


@pytest.mark.slow
def test_within_outcome_permutations_are_exact_for_hard_fnr() -> None:
    """Within-outcome permutations keep each group's positives, so for hard predictions with
    equal TPR the permuted FNR differences are exchangeable with the observed one: even the
    un-studentized test has level 0.05 (S = 1000, SE 0.0069, bound [0.03, 0.07])."""
    rng = np.random.default_rng(7)
    s = 1000
    rejections = 0
    for _ in range(s):
        y, yhat, g = fnr_example(rng, 400, 400)
        res = permutation_test(
            y,
            yhat,
            g,
            metric="fnr",
            studentize="none",
            scheme="within_outcome",
            n_permutations=199,
            seed=rng,
        )
        rejections += res.pvalue <= 0.05
    assert 0.03 <= rejections / s <= 0.07


def _rejection(gen, n: int, sims: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    stud = raw = 0
    for _ in range(sims):
        x, e = gen(rng, n)
        stud += correlation_permutation_test(x, e, n_permutations=199, seed=rng).pvalue <= 0.05
        raw += (
            correlation_permutation_test(
                x, e, n_permutations=199, studentize=False, seed=rng
            ).pvalue
            <= 0.05
        )
    return stud / sims, raw / sims


@pytest.mark.slow
def test_table1_uncorrelated_but_dependent() -> None:
    """Paper Table 1, row "uncorrelated": X ~ U(0.01, 1), E = Z/X (Z ~ N(0,1)), n = 200:
    corr(X, E) = 0 but E depends on X. S = 600 datasets, T = 199: the studentized test must
    hold its level ([0.02, 0.08], ±3.4 SE of 0.0089) while FairTest's un-studentized test
    rejects far too often (≈ 0.25 in our 1500-dataset run; we require ≥ 0.15, SE ≈ 0.018).
    (The paper reports 0.0428 vs 0.7508 for its uniform design, whose constants the seed text
    lost; see docs/permutation_tests.md.)"""
    stud, raw = _rejection(
        lambda r, n: ((x := r.uniform(0.01, 1.0, n)), r.standard_normal(n) / x), 200, 600, 11
    )
    assert 0.02 <= stud <= 0.08, stud
    assert raw >= 0.15, raw


@pytest.mark.slow
def test_table1_independence_row() -> None:
    """Paper Table 1, row "independence": X = 1 + Exp(1), E = Z/X (dependent, uncorrelated).
    The paper: 0.0501 (Algorithm 1) vs 0.0099 (FairTest); the asymptotic un-studentized rate is
    2Φ(−1.96/√κ) = 0.0094 with κ = E[(X−2)²/X²]/E[1/X²] = 0.57. S = 600, T = 199: studentized in
    [0.02, 0.08], un-studentized ≤ 0.03 (SE ≈ 0.004)."""
    stud, raw = _rejection(
        lambda r, n: ((x := 1.0 + r.exponential(1.0, n)), r.standard_normal(n) / x), 200, 600, 12
    )
    assert 0.02 <= stud <= 0.08, stud
    assert raw <= 0.03, raw


# ----------------------------------------------------------------------------- exactness


def _all_masks(n: int, k: int, strata: list[np.ndarray] | None, ks: list[int] | None):
    """Every group-A mask of the permutation scheme (all rows, or within strata)."""
    if strata is None:
        for combo in itertools.combinations(range(n), k):
            m = np.zeros(n, bool)
            m[list(combo)] = True
            yield m
        return
    for combos in itertools.product(
        *[itertools.combinations(rows.tolist(), kk) for rows, kk in zip(strata, ks, strict=True)]
    ):
        m = np.zeros(n, bool)
        for c in combos:
            m[list(c)] = True
        yield m


def _z(diff: float, se: float) -> float:
    if np.isnan(diff) or np.isnan(se):
        return np.nan
    if se > 0:
        return diff / se
    return 0.0 if diff == 0 else np.sign(diff) * np.inf


def _brute_fnr(y, yhat, m) -> float:
    """Studentized FNR difference computed directly from the rows of each pseudo-group."""
    out = []
    for grp in (m, ~m):
        pos = y[grp] == 1
        if pos.sum() == 0:
            return np.nan
        f = np.mean(yhat[grp][pos] == 0)
        out.append((f, f * (1 - f) / pos.sum()))
    return _z(out[0][0] - out[1][0], np.sqrt(out[0][1] + out[1][1]))


def _brute_weighted_tpr(y, p, w, m) -> float:
    out = []
    for grp in (m, ~m):
        a, b = (w * p * y)[grp], (w * y)[grp]
        if b.sum() == 0:
            return np.nan
        r = a.sum() / b.sum()
        out.append((r, np.sum((a - r * b) ** 2) / b.sum() ** 2))
    return _z(out[0][0] - out[1][0], np.sqrt(out[0][1] + out[1][1]))


def _brute_auc(y, s, m) -> float:
    vals = []
    for grp in (m, ~m):
        try:
            e = auc_delong(y[grp], s[grp])
        except DataContractError:
            return np.nan
        vals.append(e)
    return _z(vals[0].auc - vals[1].auc, np.sqrt(vals[0].variance + vals[1].variance))


def _compare(fast: np.ndarray, exact: np.ndarray) -> float:
    """Chi-square p-value of the fast path's permuted statistics against the exact permutation
    distribution (categories = distinct exact values, NaN its own; sparse ones pooled)."""
    key_f = np.where(np.isnan(fast), np.inf, np.round(fast, 9))
    key_e = np.where(np.isnan(exact), np.inf, np.round(exact, 9))
    cats, exact_counts = np.unique(key_e, return_counts=True)
    assert np.isin(key_f, cats).all(), "fast path produced a value no permutation can give"
    obs = np.array([(key_f == c).sum() for c in cats])
    expected = exact_counts / exact_counts.sum() * fast.size
    order = np.argsort(expected)
    obs, expected = obs[order], expected[order]
    # pool the smallest categories until each pooled one expects >= 5
    o_pool, e_pool, o_acc, e_acc = [], [], 0.0, 0.0
    for o, e in zip(obs, expected, strict=True):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            o_pool.append(o_acc)
            e_pool.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc:
        o_pool[-1] += o_acc
        e_pool[-1] += e_acc
    return float(chisquare(o_pool, e_pool).pvalue)


def _check_exact(res, exact: np.ndarray) -> None:
    assert _compare(res.null_distribution, exact) > 1e-4
    obs = res.statistic
    with np.errstate(invalid="ignore"):
        extreme = (np.abs(exact) >= abs(obs) - 1e-9) | np.isnan(exact)
    p_exact = extreme.mean()
    t = res.n_permutations
    se = np.sqrt(max(p_exact * (1 - p_exact), 1e-4) / t)
    assert abs(res.n_extreme / t - p_exact) < 4.5 * se


@pytest.mark.parametrize("scheme", ["all_rows", "within_outcome"])
def test_cell_path_equals_row_permutation_distribution(scheme: str) -> None:
    """FNR on 13 rows with hard predictions: the hypergeometric cell draws give the same
    distribution of the studentized statistic as permuting rows (all C(13,5) = 1287 subsets, or
    all within-outcome ones, enumerated), and the Monte-Carlo p-value matches the exact one
    within 4.5 Monte-Carlo SE (T = 20000)."""
    y = np.array([1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1])
    yhat = np.array([1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1])
    g = np.array([1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0], bool)
    strata = ks = None
    if scheme == "within_outcome":
        strata = [np.flatnonzero(y == 0), np.flatnonzero(y == 1)]
        ks = [int(g[r].sum()) for r in strata]
    exact = np.array([_brute_fnr(y, yhat, m) for m in _all_masks(13, 5, strata, ks)])
    res = permutation_test(y, yhat, g, metric="fnr", scheme=scheme, n_permutations=20_000, seed=5)
    assert res.path == "cells"
    assert res.statistic == pytest.approx(_brute_fnr(y, yhat, g))
    _check_exact(res, exact)


@pytest.mark.parametrize(("metric", "scheme"), [("fnr", "all_rows"), ("precision", "all_rows")])
def test_cell_path_null_is_the_exact_hypergeometric_law(metric: str, scheme: str) -> None:
    """The permuted statistics of the cell path (numpy's multivariate hypergeometric over the
    cells the metric tells apart, here 3 of the 4) against their exact law: the pmf of group
    A's (y, ŷ) cell counts under permutation, enumerated; chi-square goodness of fit of
    T = 100,000 draws (p > 1e-4)."""
    from fairengine.permutation.metrics import RATIO_METRICS, cell_values, studentized_difference

    rng = np.random.default_rng(1)
    n = 40
    g = rng.random(n) < 0.35
    y = rng.binomial(1, np.where(g, 0.55, 0.35))
    yhat = np.where(rng.random(n) < np.where(g, 0.7, 0.8), y, 1 - y)
    res = permutation_test(y, yhat, g, metric=metric, n_permutations=100_000, seed=3)
    assert res.path == "cells"
    code = 2 * y + yhat
    pooled, n_a = np.bincount(code, minlength=4), int(g.sum())
    values = cell_values(RATIO_METRICS[metric])
    law: dict[float, float] = {}
    for xa in itertools.product(*(range(min(c, n_a) + 1) for c in pooled[:3])):
        x = np.array([*xa, n_a - sum(xa)])
        if x[3] < 0 or x[3] > pooled[3]:
            continue
        _, _, z = studentized_difference(x @ values, (pooled - x) @ values)
        key = np.inf if np.isnan(z) else round(float(z), 9)  # NaN (undefined) as its own value
        law[key] = law.get(key, 0.0) + multivariate_hypergeom.pmf(x, pooled, n_a)
    z = res.null_distribution
    keys = np.array(sorted(law))
    drawn = np.where(np.isnan(z), np.inf, np.round(z, 9))
    assert np.isin(drawn, keys).all()
    observed = np.array([np.count_nonzero(drawn == k) for k in keys], dtype=float)
    expected = np.array([law[k] for k in keys]) * z.size
    big = expected >= 5
    f_obs = np.append(observed[big], observed[~big].sum())
    f_exp = np.append(expected[big], expected[~big].sum())
    f_exp *= f_obs.sum() / f_exp.sum()
    assert chisquare(f_obs, f_exp).pvalue > 1e-4


def test_row_path_equals_row_permutation_distribution() -> None:
    """Weighted expected-count TPR on 11 rows (row path): all C(11,4) = 330 subsets."""
    rng = np.random.default_rng(9)
    y = np.array([1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1])
    p = rng.uniform(0, 1, 11).round(2)
    w = rng.integers(1, 4, 11).astype(float)
    g = np.zeros(11, bool)
    g[[0, 2, 5, 9]] = True
    exact = np.array([_brute_weighted_tpr(y, p, w, m) for m in _all_masks(11, 4, None, None)])
    res = permutation_test(y, p, g, metric="tpr", weights=w, n_permutations=20_000, seed=6)
    assert res.path == "rows"
    assert res.statistic == pytest.approx(_brute_weighted_tpr(y, p, w, g))
    _check_exact(res, exact)


def test_auc_path_equals_row_permutation_distribution() -> None:
    """Studentized AUC difference on 12 rows with a tie: all C(12,5) = 792 subsets by
    fairengine.delong on each pseudo-group versus the batched sorted-once path."""
    y = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1])
    s = np.array([0.9, 0.2, 0.4, 0.7, 0.4, 0.1, 0.8, 0.6, 0.3, 0.5, 0.35, 0.65])
    g = np.zeros(12, bool)
    g[[0, 1, 4, 6, 9]] = True
    exact = np.array([_brute_auc(y, s, m) for m in _all_masks(12, 5, None, None)])
    res = permutation_test(y, s, g, metric="auc", n_permutations=20_000, seed=8)
    assert res.statistic == pytest.approx(_brute_auc(y, s, g))
    _check_exact(res, exact)


# ----------------------------------------------------------------------------- sample size


def test_sample_size_closed_form_and_inverse() -> None:
    """N = (z_{.975} + z_{.8})² [rA(1−rA)/(πA βA) + rB(1−rB)/(πB βB)]/δ², computed by hand,
    and minimum_detectable_difference inverts it."""
    plan = plan_sample_size("fnr", 0.2, 0.3, base_rate_a=0.5, base_rate_b=0.3, share_a=0.6)
    v = 0.2 * 0.8 / (0.6 * 0.5) + 0.3 * 0.7 / (0.4 * 0.3)
    expected = (1.959963984540054 + 0.8416212335729143) ** 2 * v / 0.01
    assert plan.n_total == int(np.ceil(expected))
    assert plan.n_a == int(np.ceil(plan.n_total * 0.6))
    assert "rows" in plan.summary()
    mdd = minimum_detectable_difference("positive_rate", 0.5, 2000)
    back = plan_sample_size("positive_rate", 0.5 + mdd / 2, 0.5 - mdd / 2)
    assert back.n_total == pytest.approx(2000, rel=0.01)
    auc_plan = plan_sample_size("auc", 0.80, 0.75, base_rate_a=0.3, base_rate_b=0.3)
    assert auc_plan.n_total > 1000
    with pytest.raises(DataContractError, match="base_rate"):
        plan_sample_size("tpr", 0.7, 0.8)
    with pytest.raises(DataContractError, match="power"):
        plan_sample_size("accuracy", 0.7, 0.8, power=1.5)


@pytest.mark.slow
def test_sample_size_plan_achieves_its_power() -> None:
    """At the planned N, the studentized permutation test (T = 199) detects the planned TPR
    difference with the planned power 0.8: S = 500 simulated audits, SE = 0.018, accepted
    range [0.72, 0.88] (±4.4 SE; the normal approximation is the plan's only error)."""
    plan = plan_sample_size("tpr", 0.75, 0.65, base_rate_a=0.4, base_rate_b=0.25, share_a=0.5)
    rng = np.random.default_rng(21)
    hits = 0
    s = 500
    for _ in range(s):
        g = np.r_[np.ones(plan.n_a, bool), np.zeros(plan.n_b, bool)]
        y = rng.binomial(1, np.where(g, 0.4, 0.25))
        tpr = np.where(g, 0.75, 0.65)
        yhat = np.where(y == 1, rng.random(g.size) < tpr, rng.random(g.size) < 0.2)
        res = permutation_test(y, yhat.astype(int), g, metric="tpr", n_permutations=199, seed=rng)
        hits += res.pvalue <= 0.05
    assert 0.72 <= hits / s <= 0.88, hits / s
