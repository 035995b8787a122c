"""Intervals, the tolerance test and multiplicity: closed forms, published values, exact
enumeration of binomial outcomes, and cross-checks against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fairengine import counts
from fairengine.counts import GroupLabelMoments, binary_cell_counts, index_dtype, label_cell_sums
from fairengine.intervals import newcombe_interval, wald_interval, wilson_interval
from fairengine.multiplicity import adjust_pvalues
from fairengine.rate_gap import rate_gaps, tolerance_pvalue


# ---------------------------------------------------------------- Wilson / Newcombe
@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (17, 250), (499, 1000)])
def test_wilson_matches_scipy(k: int, n: int) -> None:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    low, high = wilson_interval(k, n, 0.95)
    assert low == pytest.approx(ci.low, abs=1e-12)
    assert high == pytest.approx(ci.high, abs=1e-12)


@pytest.mark.parametrize(
    "counts,expected",
    [  # Newcombe (1998) Stat Med 17:873, Table II, method 10
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((10, 10, 0, 20), (0.6791, 1.0000)),
    ],
)
def test_newcombe_published_values(counts, expected) -> None:
    low, high = newcombe_interval(*counts)
    assert (round(float(low), 4), round(float(high), 4)) == expected


def _binomial_grid(n1: int, n2: int, p1: float, p2: float):
    k1, k2 = np.meshgrid(np.arange(n1 + 1), np.arange(n2 + 1), indexing="ij")
    prob = np.outer(
        stats.binom.pmf(np.arange(n1 + 1), n1, p1), stats.binom.pmf(np.arange(n2 + 1), n2, p2)
    )
    return k1.ravel(), k2.ravel(), prob.ravel()


@pytest.mark.parametrize(
    "n1,n2,p1,p2", [(60, 90, 0.3, 0.2), (200, 150, 0.1, 0.1), (40, 40, 0.5, 0.35)]
)
def test_newcombe_exact_coverage(n1, n2, p1, p2) -> None:
    """Exact coverage (sum over all binomial outcomes, no Monte Carlo) is close to 95 %."""
    k1, k2, prob = _binomial_grid(n1, n2, p1, p2)
    low, high = newcombe_interval(k1, n1, k2, n2, 0.95)
    cover = prob[(low <= p1 - p2) & (p1 - p2 <= high)].sum()
    assert 0.935 <= cover <= 0.975, cover


@pytest.mark.parametrize(
    "n1,n2,p1,tol", [(300, 400, 0.3, 0.0), (300, 400, 0.35, 0.05), (500, 500, 0.5, 0.1)]
)
def test_tolerance_test_exact_size_at_the_null_boundary(n1, n2, p1, tol) -> None:
    """At |Δ| = τ (least favourable null) the rejection rate of the level-5 % test is ≈ 5 %
    for τ = 0 and ≈ 2.5 % for τ ≫ se (the p-value inverts the two-sided interval, so each
    one-sided test runs at α/2), computed exactly over all outcomes with the moment
    variances."""
    p2 = p1 - tol
    k1, k2, prob = _binomial_grid(n1, n2, p1, p2)
    r1, r2 = k1 / n1, k2 / n2
    se = np.sqrt(r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2)
    pv = tolerance_pvalue(r1 - r2, se, tol)
    size = prob[pv <= 0.05].sum()
    expected = 0.05 if tol == 0 else 0.025
    assert abs(size - expected) <= 0.01, size


def test_tolerance_pvalue_closed_forms() -> None:
    # tau = 0: two-sided Wald test
    assert tolerance_pvalue(0.1, 0.05, 0.0) == pytest.approx(2 * stats.norm.sf(2.0))
    # inside the tolerance the p-value is large; far outside it is tiny
    assert tolerance_pvalue(0.01, 0.01, 0.05) > 0.99
    assert tolerance_pvalue(0.30, 0.01, 0.05) < 1e-12
    # zero standard error: no valid test (NaN, untested), never p = 0
    assert np.isnan(tolerance_pvalue(0.2, 0.0, 0.05))
    assert np.isnan(tolerance_pvalue(0.0, 0.0, 0.05))
    assert np.isnan(tolerance_pvalue(np.nan, 0.1, 0.05))


def test_tolerance_test_type_one_error_expected_counts_simulation() -> None:
    """Expected-count mode (rates are mean probabilities): simulate R audits with equal mean
    scores in both groups and τ = 0; the rejection rate is 5 % within Monte-Carlo error."""
    rng = np.random.default_rng(20261122)
    reps, n = 2000, 150
    rejections = 0
    codes = np.repeat([0, 1], n)
    label = rng.integers(0, 2, 2 * n)
    for _ in range(reps):
        p = np.concatenate([rng.beta(2, 5, n), rng.beta(2, 5, n)])
        mom = GroupLabelMoments.from_arrays("g", ("a", "b"), codes, label, p, hard=False)
        m, var, cnt = mom.rate((0, 1))
        gaps = rate_gaps(m, var, cnt, tolerance=0.0, binomial=False)
        rejections += int(gaps.pvalue[0] <= 0.05)
    rate = rejections / reps
    mc_se = np.sqrt(0.05 * 0.95 / reps)
    assert abs(rate - 0.05) < 4 * mc_se, (rate, mc_se)


def test_wald_interval_clipping() -> None:
    low, high = wald_interval(0.99, 0.05, 0.95, bounds=(0.0, 1.0))
    assert high == 1.0 and low == pytest.approx(0.99 - 1.959964 * 0.05, rel=1e-6)


# ---------------------------------------------------------------- moments
def test_moments_closed_forms_unweighted_and_weighted() -> None:
    rng = np.random.default_rng(1)
    n = 500
    codes = rng.integers(0, 3, n)
    y = rng.integers(0, 2, n)
    p = rng.random(n)
    w = rng.uniform(0.5, 2.0, n)
    mom = GroupLabelMoments.from_arrays("g", ("a", "b", "c"), codes, y, p, w, hard=False)
    m, var, cnt = mom.rate((1,))
    for g in range(3):
        sel = (codes == g) & (y == 1)
        mean = np.average(p[sel], weights=w[sel])
        assert m[g] == pytest.approx(mean)
        assert var[g] == pytest.approx(
            np.sum(w[sel] ** 2 * (p[sel] - mean) ** 2) / w[sel].sum() ** 2
        )
        assert cnt[g] == sel.sum()
    # unweighted hard predictions: binomial variance r(1-r)/n
    hard = (p > 0.5).astype(float)
    mom = GroupLabelMoments.from_arrays("g", ("a", "b", "c"), codes, y, hard, hard=True)
    m, var, cnt = mom.rate((0, 1))
    np.testing.assert_allclose(var, m * (1 - m) / cnt)
    # LiFT count table C[g, y, yhat]
    c = mom.counts
    assert c[1, 0, 1] == np.sum((codes == 1) & (y == 0) & (hard == 1))
    assert c.sum() == n


def test_moments_merge_across_partitions() -> None:
    rng = np.random.default_rng(2)
    n = 1000
    codes, y, p = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.random(n)
    whole = GroupLabelMoments.from_arrays("g", ("a", "b"), codes, y, p, hard=False)
    parts = [
        GroupLabelMoments.from_arrays("g", ("a", "b"), codes[s], y[s], p[s], hard=False)
        for s in (slice(0, 300), slice(300, 1000))
    ]
    merged = parts[0] + parts[1]
    for name in ("n", "w", "wp", "w2", "w2p", "w2p2"):
        np.testing.assert_allclose(getattr(merged, name), getattr(whole, name))


def _reference_sums(codes, levels, y, p, w, score, bins):
    """The six sums per (joint cell, label) and the score histograms, one bincount each."""
    j = np.ravel_multi_index([c.astype(np.intp) for c in codes], levels) * 2 + y
    size = 2 * int(np.prod(levels))
    w1 = np.ones(y.size) if w is None else w
    sums = {
        k: np.bincount(j, weights=v, minlength=size).reshape(-1, 2)
        for k, v in (
            ("n", None),
            ("w", w1),
            ("wp", w1 * p),
            ("w2", w1 * w1),
            ("w2p", w1 * w1 * p),
            ("w2p2", w1 * w1 * p * p),
        )
    }
    h = j * bins + np.minimum((score * bins).astype(np.intp), bins - 1)
    hist = np.bincount(h, weights=w, minlength=size * bins).reshape(-1, 2, bins)
    hist2 = np.bincount(h, weights=w1 * w1, minlength=size * bins).reshape(-1, 2, bins)
    return sums, hist, hist2


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_blockwise_row_pass_equals_one_bincount_per_sum(monkeypatch, hard, weighted) -> None:
    """The row pass in blocks (7 rows, so that blocks, cells and bins all straddle block
    borders) gives the sums of one bincount over all rows: counts exactly, weighted sums up to
    rounding; codes of mixed dtypes; hard predictions as (cell, y, ŷ) counts."""
    monkeypatch.setattr(counts, "CHUNK_ROWS", 7)
    rng = np.random.default_rng(5)
    n, levels, bins = 101, (3, 2, 4), 5
    codes = [
        rng.integers(0, levels[0], n).astype(np.uint8),
        rng.integers(0, levels[1], n),
        rng.integers(0, levels[2], n).astype(np.int32),
    ]
    y = rng.integers(0, 2, n).astype(np.int8)
    score = rng.random(n)
    p = (score > 0.5).astype(float) if hard else score
    w = rng.uniform(0.2, 2.0, n) if weighted else None
    sums, hist, hist2 = label_cell_sums(
        list(zip(codes, levels, strict=True)), y, p, w, hard=hard, score=score, bins=bins
    )
    ref, ref_hist, ref_hist2 = _reference_sums(codes, levels, y, p, w, score, bins)
    np.testing.assert_array_equal(sums["n"], ref["n"])
    for k in ("w", "wp", "w2", "w2p", "w2p2"):
        np.testing.assert_allclose(sums[k], ref[k], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hist, ref_hist, rtol=1e-12)
    np.testing.assert_allclose(hist2, ref_hist2, rtol=1e-12)


@pytest.mark.parametrize(
    "dtypes",
    [(bool, np.int8, np.int8), (np.int64, bool, np.float64), (np.uint8, np.float64, np.int16)],
)
def test_binary_cell_counts_match_bincount(monkeypatch, dtypes) -> None:
    monkeypatch.setattr(counts, "CHUNK_ROWS", 16)
    rng = np.random.default_rng(6)
    g, y, p = (rng.integers(0, 2, 203).astype(d) for d in dtypes)
    a, b = binary_cell_counts(g, y, p)
    code = 2 * y.astype(int) + p.astype(int)
    np.testing.assert_array_equal(a, np.bincount(code[g != 0], minlength=4))
    np.testing.assert_array_equal(b, np.bincount(code[g == 0], minlength=4))


def test_index_dtype_is_the_smallest_unsigned_type_bincount_takes() -> None:
    assert [index_dtype(v) for v in (0, 255, 256, 65535, 65536, 2**32 - 1, 2**32)] == [
        np.uint8,
        np.uint8,
        np.uint16,
        np.uint16,
        np.uint32,
        np.uint32,
        np.intp,
    ]


# ---------------------------------------------------------------- multiplicity
def test_holm_hand_computed() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*.005, 3*.01, 2*.03, 1*.04 -> running max
    np.testing.assert_allclose(
        adjust_pvalues([0.01, 0.04, 0.03, 0.005], "holm"), [0.03, 0.06, 0.06, 0.02]
    )


def test_bh_matches_scipy() -> None:
    p = np.random.default_rng(3).uniform(0, 0.2, 25)
    np.testing.assert_allclose(
        adjust_pvalues(p, "bh"), stats.false_discovery_control(p, method="bh")
    )


def test_multiplicity_ignores_nan_and_validates() -> None:
    out = adjust_pvalues([0.01, np.nan, 0.02], "holm")
    np.testing.assert_allclose(out[[0, 2]], [0.02, 0.02])
    assert np.isnan(out[1])
    with pytest.raises(ValueError, match="multiplicity method"):
        adjust_pvalues([0.1], "bonferonni")


# ---------------------------------------------------------------- ratios (issue 3)
def test_rate_ratio_katz_interval_and_four_fifths() -> None:
    from fairengine.rate_gap import rate_ratios

    # Katz et al. (1978): se(log RR) = sqrt((1-p1)/k1 + (1-p2)/k2)
    k1, n1, k2, n2 = 30, 100, 45, 90
    p = np.array([k1 / n1, k2 / n2])
    var = p * (1 - p) / np.array([n1, n2])
    r = rate_ratios(p, var, level=0.95)
    se = np.sqrt((1 - p[0]) / k1 + (1 - p[1]) / k2)
    z = stats.norm.ppf(0.975)
    assert r.estimate[0] == pytest.approx(0.6)
    assert r.low[0] == pytest.approx(0.6 * np.exp(-z * se))
    assert r.high[0] == pytest.approx(0.6 * np.exp(z * se))
    assert r.impact[0] == pytest.approx(0.6) and bool(r.four_fifths[0])
    r2 = rate_ratios(np.array([0.5, 0.45]), np.array([1e-4, 1e-4]))
    assert r2.impact[0] == pytest.approx(0.9) and not r2.four_fifths[0]
    r0 = rate_ratios(np.array([0.0, 0.4]), np.array([0.0, 1e-3]))
    assert r0.estimate[0] == 0.0 and np.isnan(r0.low[0]) and r0.four_fifths[0]


@pytest.mark.parametrize("n1,n2,p1,p2", [(200, 200, 0.3, 0.25), (150, 300, 0.5, 0.4)])
def test_rate_ratio_interval_exact_coverage(n1, n2, p1, p2) -> None:
    """Exact coverage of the log-ratio interval, summed over every binomial outcome with
    probability > 1e-10 (the rest has total mass < 1e-5; no Monte Carlo)."""
    from fairengine.rate_gap import rate_ratios

    k1, k2, prob = _binomial_grid(n1, n2, p1, p2)
    keep = prob > 1e-10
    assert prob[~keep].sum() < 1e-5
    k1, k2, prob = k1[keep], k2[keep], prob[keep]
    r1, r2 = k1 / n1, k2 / n2
    cover = 0.0
    rates = np.stack([r1, r2], axis=1)
    var = rates * (1 - rates) / np.array([n1, n2])
    for i in range(rates.shape[0]):  # one 2-group table per outcome
        if k1[i] == 0 or k2[i] == 0:
            continue
        rr = rate_ratios(rates[i], var[i])
        cover += prob[i] * (rr.low[0] <= p1 / p2 <= rr.high[0])
    assert 0.935 <= cover <= 0.965, cover


def test_round_half_up_is_java_math_round() -> None:
    from fairengine.rate_gap import round_half_up

    assert round_half_up(0.333333) == 0.33333
    assert round_half_up(1 / 6) == 0.16667
    assert round_half_up(0.5) == 0.5
    # Python's round is half-to-even; Java's Math.round rounds halves up: 2.5 -> 3 at 0 digits
    assert round_half_up(2.5, 0) == 3.0 and round(2.5) == 2
    assert round_half_up(-2.5, 0) == -2.0  # floor(-2.5 + 0.5)
    assert round_half_up(float("nan")) == 0.0
