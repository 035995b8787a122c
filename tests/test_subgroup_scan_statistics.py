"""Tests of fairengine.subgroup_scan's search space, statistics and null draws against direct
per-row computations (closed forms) and simulations with known moments:

* every subgroup's sums from the cell cube equal the sums over its rows (pandas), and the
  search space holds exactly the conjunctions with >= min_size rows;
* the hypergeometric null moments E_A = n_A π, V_A = n_A π(1 − π)(N − n_A)/(N − 1) equal
  scipy's, and the multivariate-hypergeometric draws have that mean and variance;
* the exact calibration null has Cov(Z_A, Z_B) = V_{A∩B}/√(V_A V_B) (the Gaussian mode's
  covariance), within Monte-Carlo error; the Gaussian mode draws the same matrix;
* MDSS's Bernoulli score is the maximum over q of the log-likelihood ratio (grid search) and q̂
  solves the score equation.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import hypergeom

import fairengine.subgroup_scan.null as null_module
from fairengine.subgroup_scan import (
    NullDraws,
    SubgroupScanError,
    bernoulli_score,
    build_search_space,
    cell_outcomes,
    code_features,
    moments,
    null_covariance,
    observed_scan,
    z_statistics,
)


def _data(n: int = 3000, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], n),
            "race": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
            "age": rng.integers(18, 80, n),
            "region": rng.integers(0, 4, n),
        }
    )
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p).astype(float)
    yhat = (rng.random(n) < 0.4).astype(float)
    return frame, p, y, yhat


def test_numeric_features_are_binned_at_quantiles_with_readable_rules() -> None:
    frame, *_ = _data()
    coded = code_features(frame, ["age", "region"], levels=5)
    age = coded.features[0]
    assert len(age.labels) == 5 and age.labels[0].startswith("age < ")
    counts = np.bincount(coded.codes[:, 0])
    assert counts.min() > 0.15 * len(frame)  # quantile bins: about n/5 rows each
    # region has 4 distinct values <= levels: kept as categories
    assert coded.features[1].labels == tuple(f"region = {v}" for v in range(4))
    with pytest.raises(SubgroupScanError, match="'race' has 3 categories"):
        code_features(frame, ["race"], levels=2)
    with pytest.raises(SubgroupScanError, match="'nope' is not a column"):
        code_features(frame, ["nope"])


def test_subgroup_sums_from_cells_equal_row_sums_and_min_size_is_exact() -> None:
    frame, p, y, _ = _data()
    feats = ["sex", "race", "age", "region"]
    coded = code_features(frame, feats, levels=4)
    space = build_search_space(coded, depth=2, min_size=100)
    cells = cell_outcomes(space, "calibration", y, p)
    scan = observed_scan(space, cells, "two-sided")
    codes = pd.DataFrame(coded.codes, columns=feats)
    expected_rules = 0
    for k in (1, 2):
        for combo in itertools.combinations(range(4), k):
            sizes = codes.groupby([feats[f] for f in combo]).size()
            expected_rules += int((sizes >= 100).sum())
    assert space.n_subgroups == expected_rules
    for s, g in enumerate(space.subgroups):
        rows = space.rows_in(s)
        assert rows.sum() >= 100 and space.sizes[s] == rows.sum()
        assert scan.observed[s] == pytest.approx(y[rows].sum())
        assert scan.moments.expected[s] == pytest.approx(p[rows].sum())
        assert scan.moments.variance[s] == pytest.approx((p * (1 - p))[rows].sum())
        z = (y[rows].sum() - p[rows].sum()) / np.sqrt((p * (1 - p))[rows].sum())
        assert scan.z[s] == pytest.approx(z)
        assert g.rule == " and ".join(
            coded.features[f].labels[v] for f, v in zip(g.features, g.values, strict=True)
        )


@pytest.mark.parametrize("kind", ["positive_rate", "tpr", "fpr"])
def test_permutation_moments_are_hypergeometric(kind: str) -> None:
    frame, _, y, yhat = _data()
    space = build_search_space(code_features(frame, ["sex", "race"]), depth=2, min_size=20)
    cells = cell_outcomes(space, kind, y, decision=yhat)
    mom = moments(space, cells)
    stratum = {"positive_rate": np.ones(len(y), bool), "tpr": y == 1, "fpr": y == 0}[kind]
    big_n, k = int(stratum.sum()), int(yhat[stratum].sum())
    for s in range(space.n_subgroups):
        n_a = int((space.rows_in(s) & stratum).sum())
        assert mom.n[s] == n_a
        assert mom.expected[s] == pytest.approx(hypergeom.mean(big_n, k, n_a))
        assert mom.variance[s] == pytest.approx(hypergeom.var(big_n, k, n_a))


def test_permutation_null_draws_have_the_hypergeometric_mean_and_variance() -> None:
    frame, _, y, yhat = _data(n=1500)
    space = build_search_space(code_features(frame, ["sex", "race"]), depth=2, min_size=20)
    cells = cell_outcomes(space, "tpr", y, decision=yhat)
    mom = moments(space, cells)
    draws = NullDraws(space, cells, "exact").subgroup_sums(np.random.default_rng(1), 4000)
    z = z_statistics(draws, mom)
    defined = mom.variance > 0
    # standardized draws: mean 0 (MC error 1/sqrt(4000) ≈ 0.016), variance 1
    assert np.all(np.abs(z[defined].mean(axis=1)) < 5 / np.sqrt(4000))
    assert np.all(np.abs(z[defined].var(axis=1) - 1) < 5 * np.sqrt(2 / 4000))
    # the whole stratum's total is fixed by a permutation
    assert np.all(draws.sum(axis=0) == draws.sum(axis=0)[0])


@pytest.mark.parametrize("kind", ["calibration", "fpr"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_null_covariance_matrix_equals_the_row_level_formula(kind: str, depth: int) -> None:
    """null_covariance (U-way marginal tables) = Σ_i v_i 1[i ∈ A] 1[i ∈ B] (calibration) and
    s²(n_{A∩B} − n_A n_B/N) (permutation), computed from the rows."""
    frame, p, y, yhat = _data(n=1500)
    space = build_search_space(code_features(frame, ["sex", "race", "age", "region"]), depth, 20)
    cells = cell_outcomes(space, kind, y, p, yhat)
    masks = np.array([space.rows_in(s) for s in range(space.n_subgroups)], dtype=float)
    if kind == "calibration":
        brute = (masks * (p * (1 - p))) @ masks.T
    else:
        masks = masks * (y == 0)
        big_n, k = (y == 0).sum(), yhat[y == 0].sum()
        pi = k / big_n
        n_a = masks.sum(axis=1)
        brute = pi * (1 - pi) * big_n / (big_n - 1) * (masks @ masks.T - np.outer(n_a, n_a) / big_n)
    assert np.allclose(null_covariance(space, cells), brute, atol=1e-9)


@pytest.mark.parametrize("per_cell", [False, True])
def test_calibration_null_covariance_is_v_intersection_over_root_va_vb(
    per_cell: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if per_cell:  # the per-cell Gaussian draws (used above COVARIANCE_MAX_SUBGROUPS)
        monkeypatch.setattr(null_module, "COVARIANCE_MAX_SUBGROUPS", 0)
    frame, p, y, _ = _data(n=2000)
    space = build_search_space(code_features(frame, ["sex", "race", "region"]), 2, min_size=60)
    cells = cell_outcomes(space, "calibration", y, p)
    mom = moments(space, cells)
    masks = np.array([space.rows_in(s) for s in range(space.n_subgroups)], dtype=float)
    v_inter = (masks * (p * (1 - p))) @ masks.T
    formula = v_inter / np.sqrt(np.outer(mom.variance, mom.variance))
    b = 6000
    for mode in ("exact", "gaussian"):
        sums = NullDraws(space, cells, mode).subgroup_sums(np.random.default_rng(2), b)
        emp = np.corrcoef(z_statistics(sums, mom))
        # sampling sd of a correlation r is about (1 - r²)/sqrt(b) <= 0.013
        assert np.abs(emp - formula).max() < 5 / np.sqrt(b), mode


def test_bernoulli_score_is_the_maximum_likelihood_ratio_over_q() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(0.05, 0.95, 400)
    y = (rng.random(400) < 1.5 * p / (1 - p + 1.5 * p)).astype(float)
    o = y.sum()
    res = bernoulli_score(o, p, "positive")
    assert res.q_hat > 1
    assert np.sum(res.q_hat * p / (1 - p + res.q_hat * p)) == pytest.approx(o)
    grid = np.exp(np.linspace(0, 2, 20001))
    f = o * np.log(grid) - np.log1p(np.outer(grid - 1, p)).sum(axis=1)
    assert res.score == pytest.approx(f.max(), abs=1e-6)
    # the other direction: q <= 1 is the boundary q = 1, score 0
    assert bernoulli_score(o, p, "negative").score == pytest.approx(0.0)
    # no positives: q̂ = 0 and score −Σ log(1 − p)
    zero = bernoulli_score(0.0, p, "negative")
    assert zero.q_hat == 0.0 and zero.score == pytest.approx(-np.log1p(-p).sum())


@pytest.mark.parametrize("mode", ["exact", "gaussian", "gaussian per cell"])
def test_permutation_null_covariance_is_hypergeometric(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cov(O_A, O_B) = π(1 − π) N/(N − 1) (n_{A∩B} − n_A n_B / N) for ŷ permuted within the
    stratum, by the exact (multivariate hypergeometric) and the Gaussian draws alike."""
    frame, _, y, yhat = _data(n=2000)
    space = build_search_space(code_features(frame, ["sex", "race", "region"]), 2, min_size=60)
    cells = cell_outcomes(space, "fpr", y, decision=yhat)
    mom = moments(space, cells)
    stratum = (y == 0).astype(float)
    masks = np.array([space.rows_in(s) for s in range(space.n_subgroups)], dtype=float) * stratum
    big_n, k = stratum.sum(), yhat[y == 0].sum()
    pi = k / big_n
    cov = pi * (1 - pi) * big_n / (big_n - 1) * (masks @ masks.T - np.outer(mom.n, mom.n) / big_n)
    assert np.allclose(np.diag(cov), mom.variance)
    if mode == "gaussian per cell":
        monkeypatch.setattr(null_module, "COVARIANCE_MAX_SUBGROUPS", 0)
    b = 6000
    sums = NullDraws(space, cells, mode.split()[0]).subgroup_sums(np.random.default_rng(3), b)
    emp = np.corrcoef(z_statistics(sums, mom))
    formula = cov / np.sqrt(np.outer(mom.variance, mom.variance))
    assert np.abs(emp - formula).max() < 5 / np.sqrt(b)


@pytest.mark.parametrize("kind", ["calibration", "tpr"])
def test_many_blocks_give_the_same_sums_and_null_moments(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With blocks of 20 cells (the 1M-row path: membership built per block, hypergeometric
    draws in two stages), sums equal the one-block sums and the null draws keep their
    mean 0 and variance 1 (MC error)."""
    import fairengine.subgroup_scan.search_space as search_space

    frame, p, y, yhat = _data(n=2000)
    space = build_search_space(code_features(frame, ["sex", "race", "age", "region"]), 2, 40)
    cells = cell_outcomes(space, kind, y, p, yhat)
    one_block = moments(space, cells)
    monkeypatch.setattr(search_space, "BLOCK_CELLS", 20)
    assert len(space.blocks()) > 5
    many = moments(space, cells)
    assert np.allclose(many.observed, one_block.observed)
    assert np.allclose(many.variance, one_block.variance)
    b = 3000
    z = z_statistics(
        NullDraws(space, cells, "exact").subgroup_sums(np.random.default_rng(4), b), many
    )
    ok = many.variance > 0
    assert np.all(np.abs(z[ok].mean(axis=1)) < 5 / np.sqrt(b))
    assert np.all(np.abs(z[ok].var(axis=1) - 1) < 5 * np.sqrt(2 / b))
