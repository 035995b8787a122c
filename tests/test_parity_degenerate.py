"""Parity gaps of degenerate groups (issue 16, item 5): zero-variance groups, tiny groups, rates
near 0, and labels of one class only.

The tolerance test of a gap (fairengine.rate_gap) inverts Newcombe's hybrid score interval with
continuity-corrected Wilson limits (Newcombe 1998, method 11). Checked here: the two reported
cases, the p-value ↔ interval duality, size at the null boundary |Δ| = τ and coverage with
known truth (Monte Carlo and exact enumeration of binomial outcomes) against the old Wald
test, published values and statsmodels, and untested findings for undefined or repeated gaps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.exact_tolerance import exact_tolerance_pvalue
from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
from fairengine.group_parity import group_parity
from fairengine.group_parity.result import GroupParityDetails
from fairengine.intervals import newcombe_interval, newcombe_limits, wilson_interval
from fairengine.rate_gap import (
    effective_sample_size,
    newcombe_tolerance_pvalue,
    rate_gaps,
    tolerance_pvalue,
)
from fairengine.roles import ColumnRoles

ALPHA = 0.05
REPS = 2000
MC_SE = float(np.sqrt(ALPHA * (1 - ALPHA) / REPS))  # 0.0049


def old_wald_pvalue(k1, n1, k2, n2, tau):
    """The replaced test: least-favourable Wald p Φ((τ−a)/se) + Φ((−τ−a)/se), se from the
    estimates, p = 0 when se = 0 and |Δ̂| > τ."""
    r1, r2 = k1 / n1, k2 / n2
    a = np.abs(r1 - r2)
    se = np.sqrt(r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = stats.norm.cdf((tau - a) / se) + stats.norm.cdf((-tau - a) / se)
    return np.where(se > 0, p, np.where(a > tau, 0.0, 1.0))


def frame(groups: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """Rows of named groups from (labels, 0/1 predictions)."""
    parts = [
        pd.DataFrame({"g": name, "y": y, "s": pred.astype(float)})
        for name, (y, pred) in groups.items()
    ]
    return pd.concat(parts, ignore_index=True)


def parity(df: pd.DataFrame, tolerance: float = 0.05, threshold: float | None = 0.5, **kw):
    ds = AuditDataset.from_frame(
        df,
        ColumnRoles("y", ("g",), score="s", weight=kw.pop("weight", None)),
        threshold=threshold,
        min_group_size=1,
    )
    res = group_parity(ds, tolerance=tolerance, **kw)
    return res, {f.key.split(".")[0]: f for f in res.findings}


def big_group(n: int = 1000, positives: int = 144) -> tuple[np.ndarray, np.ndarray]:
    """n rows, half of each label, exactly ``positives`` predicted positive (rate 0.144)."""
    y = np.tile([0, 1], n // 2)
    pred = np.zeros(n)
    pred[np.linspace(0, n - 1, positives).astype(int)] = 1
    return y, pred


# ------------------------------------------------------------------ (a) the reported cases
def test_thirty_rows_all_predicted_negative_is_not_a_certain_disparity() -> None:
    """Issue case: 30 rows all predicted negative against a rate of 0.144. The old Wald test
    gave p ≈ 0 (group a's variance is 0) and rejected although its own interval reached into
    the tolerance band; now the interval keeps group a's uncertainty, p > 0 and the decision
    agrees with the interval."""
    _, f = parity(frame({"a": (np.tile([0, 1], 15), np.zeros(30)), "b": big_group()}))
    dp = f["dp_gap"]
    assert dp.estimate == pytest.approx(-0.144)
    old = old_wald_pvalue(0, 30, 144, 1000, 0.05)
    assert old < 1e-12  # the bug
    assert dp.pvalue > ALPHA
    lo, hi = dp.interval.low, dp.interval.high
    assert hi - lo > 0.1 and lo < -0.144 < hi
    assert hi > -0.05  # the interval meets the band [-τ, τ]: consistent with no rejection
    # Wilson's 0/30 upper limit (0.114) alone puts the gap's upper limit above -0.144 + 0.114
    assert hi > -0.144 + 0.11
    for key in ("tpr_gap", "fpr_gap"):
        assert 0 < f[key].pvalue <= 1 and f[key].interval.high > f[key].interval.low


def test_one_row_group_gives_a_wide_interval_and_no_rejection() -> None:
    res, f = parity(frame({"a": (np.array([1]), np.zeros(1)), "b": big_group()}))
    dp = f["dp_gap"]
    assert dp.pvalue == 1.0  # the interval covers the whole band
    assert dp.interval.low < -0.05 and dp.interval.high > 0.7
    assert f["tpr_gap"].pvalue == 1.0
    # one row with label 1: its FPR is undefined, not tested, with the reason
    fpr = f["fpr_gap"]
    assert np.isnan(fpr.estimate) and fpr.pvalue is None and fpr.interval is None
    assert "not tested: the gap is undefined" in fpr.reading
    assert any(w.startswith("fpr_gap for g 'a' vs 'b' is not tested") for w in res.warnings)
    # a single positive row against 0.144 is no evidence either
    _, f1 = parity(frame({"a": (np.array([1]), np.ones(1)), "b": big_group()}))
    assert f1["dp_gap"].pvalue > ALPHA


def test_pvalue_is_the_smallest_alpha_whose_interval_excludes_the_band() -> None:
    """Duality over random count tables, levels and tolerances (no ties in the random data):
    p ≤ 1 − level exactly when the interval at that level lies outside [−τ, τ]."""
    rng = np.random.default_rng(7)
    n1 = rng.integers(1, 400, 3000).astype(float)
    n2 = rng.integers(1, 400, 3000).astype(float)
    k1 = rng.binomial(n1.astype(int), rng.uniform(0, 1, 3000)).astype(float)
    k2 = rng.binomial(n2.astype(int), rng.uniform(0, 1, 3000)).astype(float)
    for tau in (0.0, 0.05, 0.1):
        p = newcombe_tolerance_pvalue(k1, n1, k2, n2, tau)
        assert np.all((p > 0) & (p <= 1))
        for level in (0.8, 0.95, 0.99):
            lo, hi = newcombe_interval(k1, n1, k2, n2, level, continuity=True)
            outside = (lo > tau) | (hi < -tau)
            np.testing.assert_array_equal(p <= 1 - level, outside)


def _margin(z: float, counts: tuple[float, ...], side: int, tau: float) -> float:
    """How far the lower (side 0) or upper (side 1) hybrid limit at z lies beyond the band."""
    limit = newcombe_limits(*counts, z, continuity=True)[side]
    return float(limit - tau if side == 0 else -tau - limit)


@pytest.mark.parametrize(
    "counts,tau",
    [
        ((0, 30, 144, 1000), 0.05),
        ((20, 40, 3, 50), 0.1),
        ((9, 10, 3, 10), 0.0),
        ((1, 1, 0, 300), 0.05),
        ((3, 400, 90, 400), 0.05),
    ],
)
def test_pvalue_matches_an_independent_root_finder(counts, tau) -> None:
    """z* from scipy's brentq on L(z) = τ (or U(z) = −τ) gives the same p to 1e-9."""
    k1, n1, k2, n2 = counts
    side = 0 if k1 / n1 > k2 / n2 else 1
    args = (counts, side, tau)
    inside = _margin(1e-12, *args) <= 0
    z_star = 0.0 if inside else optimize.brentq(_margin, 1e-12, 60.0, args=args, xtol=1e-14)
    expected = min(1.0, 2 * stats.norm.sf(z_star))
    got = float(newcombe_tolerance_pvalue(k1, n1, k2, n2, tau))
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_continuity_corrected_wilson_equals_the_closed_form() -> None:
    """The Wilson-of-k∓½ form used in the code equals Newcombe's (1998a) closed form for
    integer counts (method 4), over every k of several n and levels."""
    for n in (1, 2, 7, 30, 263):
        k = np.arange(n + 1.0)
        p = k / n
        for level in (0.9, 0.95, 0.99):
            z = stats.norm.ppf(0.5 + level / 2)
            z2 = z * z
            den = 2 * (n + z2)
            with np.errstate(invalid="ignore"):  # roots of k = 0 and k = n are not used
                root_lo = np.sqrt(z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))
                root_hi = np.sqrt(z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))
            lo = (2 * n * p + z2 - 1 - z * root_lo) / den
            hi = (2 * n * p + z2 + 1 + z * root_hi) / den
            lo, hi = np.where(k == 0, 0.0, lo), np.where(k == n, 1.0, hi)
            got = wilson_interval(k, n, level, continuity=True)
            np.testing.assert_allclose(got[0], lo, atol=1e-12)
            np.testing.assert_allclose(got[1], hi, atol=1e-12)


@pytest.mark.parametrize("continuity", [False, True])
def test_limits_move_away_from_the_estimate_as_z_grows(continuity: bool) -> None:
    """The premise of the bisection: L(z) non-increasing and U(z) non-decreasing in z, also
    for k ∈ {0, n}, n = 1 and non-integer (effective) counts."""
    k1 = np.array([0, 1, 0.3, 5, 29.5, 30, 1])
    n1 = np.array([30, 1, 2.7, 10, 30, 30, 300])
    k2 = np.array([144, 0, 1, 5, 0, 30, 300])
    n2 = np.array([1000, 300, 1, 56, 29, 30, 300])
    z = np.linspace(0, 12, 600)[:, None]
    lo, hi = newcombe_limits(k1, n1, k2, n2, z, continuity=continuity)
    assert np.all(np.diff(lo, axis=0) <= 1e-12) and np.all(np.diff(hi, axis=0) >= -1e-12)
    assert np.all(hi[1:] > lo[1:])  # never a point for z > 0


# ------------------------------------------------------------------ (b) known truth
# (n_a, n_b, p_a, p_b, τ): at the null boundary |p_a − p_b| = τ; small groups, rates near 0
BOUNDARY = [
    (30, 300, 0.02, 0.02, 0.0),
    (30, 30, 0.07, 0.02, 0.05),
    (30, 300, 0.05, 0.10, 0.05),
    (30, 300, 0.05, 0.00, 0.05),
    (10, 300, 0.01, 0.01, 0.0),
    (1, 200, 0.10, 0.10, 0.0),
    (200, 200, 0.30, 0.25, 0.05),
]
OLD_WALD_INVALID = {  # exact sizes of the old test: 0.47, 0.20, 0.32, 1.0
    (30, 300, 0.02, 0.02, 0.0),
    (30, 300, 0.05, 0.10, 0.05),
    (10, 300, 0.01, 0.01, 0.0),
    (1, 200, 0.1, 0.1, 0.0),
}


@pytest.mark.parametrize("case", BOUNDARY)
def test_type_one_error_at_the_boundary_simulated(case) -> None:
    """2000 simulated audits per configuration with true |p_a − p_b| = τ: the rejection rate
    at α = 5 % stays within α + 3 MC s.e.; the old Wald test exceeds it where flagged."""
    n_a, n_b, p_a, p_b, tau = case
    rng = np.random.default_rng([n_a, n_b, round(1000 * p_a), round(1000 * p_b), round(1000 * tau)])
    k_a = rng.binomial(n_a, p_a, REPS).astype(float)
    k_b = rng.binomial(n_b, p_b, REPS).astype(float)
    new = np.mean(newcombe_tolerance_pvalue(k_a, n_a, k_b, n_b, tau) <= ALPHA)
    old = np.mean(old_wald_pvalue(k_a, n_a, k_b, n_b, tau) <= ALPHA)
    assert new <= ALPHA + 3 * MC_SE, (case, new, old)
    if case in OLD_WALD_INVALID:
        assert old > ALPHA + 3 * MC_SE, (case, old)


def _grid(n1: int, n2: int, p1: float, p2: float):
    k1, k2 = np.meshgrid(np.arange(n1 + 1.0), np.arange(n2 + 1.0), indexing="ij")
    prob = np.outer(
        stats.binom.pmf(np.arange(n1 + 1), n1, p1), stats.binom.pmf(np.arange(n2 + 1), n2, p2)
    )
    return k1.ravel(), k2.ravel(), prob.ravel()


def test_exact_size_over_a_grid_of_small_groups_and_rare_rates() -> None:
    """Exact rejection probability (sum over all binomial outcomes, no Monte Carlo) at the
    boundary, for group sizes 1–300 and rates 0–0.5: never above α (the continuity-corrected
    Wilson limits hold their one-sided level where plain Wilson limits do not). The old Wald
    test reaches a size of 1 (one row against 200)."""
    worst_new, worst_old = 0.0, 0.0
    for n_a, n_b in [(1, 200), (3, 3), (10, 10), (10, 300), (30, 30), (30, 300), (100, 100)]:
        for tau in (0.0, 0.05, 0.1):
            for p_b in (0.0, 0.01, 0.02, 0.05, 0.1, 0.3, 0.5):
                for p_a in sorted({x for x in (p_b + tau, p_b - tau) if 0 <= x <= 1}):
                    k1, k2, prob = _grid(n_a, n_b, p_a, p_b)
                    new = prob[newcombe_tolerance_pvalue(k1, n_a, k2, n_b, tau) <= ALPHA].sum()
                    old = prob[old_wald_pvalue(k1, n_a, k2, n_b, tau) <= ALPHA].sum()
                    worst_new, worst_old = max(worst_new, new), max(worst_old, old)
    assert worst_new <= ALPHA + 1e-9, worst_new
    assert worst_old > 0.9, worst_old


@pytest.mark.parametrize(
    "n_a,n_b,p_a,p_b",
    [(30, 30, 0.02, 0.02), (30, 300, 0.07, 0.02), (10, 300, 0.0, 0.01), (100, 100, 0.3, 0.1)],
)
def test_interval_coverage_simulated(n_a, n_b, p_a, p_b) -> None:
    """Coverage of the 95 % interval with known truth: at least 95 % within 3 MC s.e. (the
    continuity correction makes it conservative for small groups, never below nominal)."""
    rng = np.random.default_rng(n_a * 1000 + n_b)
    k_a = rng.binomial(n_a, p_a, REPS)
    k_b = rng.binomial(n_b, p_b, REPS)
    lo, hi = newcombe_interval(k_a, n_a, k_b, n_b, 0.95, continuity=True)
    cover = np.mean((lo <= p_a - p_b) & (p_a - p_b <= hi))
    assert cover >= 0.95 - 3 * MC_SE, cover
    assert np.all(hi - lo > 0)


@pytest.mark.parametrize(
    "n_a,n_b,p_a,p_b", [(500, 500, 0.3, 0.2), (400, 600, 0.5, 0.45), (1000, 800, 0.1, 0.12)]
)
def test_interval_coverage_is_nominal_for_large_groups(n_a, n_b, p_a, p_b) -> None:
    """Exact coverage for large groups is 95 % ± 1 % (the correction fades as 1/n)."""
    k1, k2, prob = _grid(n_a, n_b, p_a, p_b)
    lo, hi = newcombe_interval(k1, n_a, k2, n_b, 0.95, continuity=True)
    cover = prob[(lo <= p_a - p_b) & (p_a - p_b <= hi)].sum()
    assert 0.945 <= cover <= 0.96, cover


# ------------------------------------------------------------------ (c) published values
@pytest.mark.parametrize(
    "counts,expected",
    [  # Newcombe (1998) Stat Med 17:873, Table II, method 11 (continuity-corrected)
        ((56, 70, 48, 80), (0.0428, 0.3422)),
        ((9, 10, 3, 10), (0.1013, 0.8387)),
        ((5, 56, 0, 29), (-0.0667, 0.2037)),
        ((0, 10, 0, 20), (-0.2005, 0.3445)),
        ((0, 10, 0, 10), (-0.3445, 0.3445)),
        ((10, 10, 0, 20), (0.6014, 1.0000)),
        ((10, 10, 0, 10), (0.5128, 1.0000)),
    ],
)
def test_continuity_corrected_newcombe_published_values(counts, expected) -> None:
    low, high = newcombe_interval(*counts, continuity=True)
    assert (round(float(low), 4), round(float(high), 4)) == expected


def test_newcombe_matches_statsmodels() -> None:
    """Method 10 (the uncorrected limits the corrected ones generalise) against statsmodels'
    ``newcomb`` to 1e-8. (statsmodels' ``score`` interval is not used as a reference: its
    constrained MLE for a non-zero difference is wrong, statsmodels issue #10269.)"""
    sm = pytest.importorskip("statsmodels.stats.proportion")
    for k1, n1, k2, n2 in [(0, 30, 144, 1000), (1, 1, 0, 300), (56, 70, 48, 80), (7, 34, 1, 34)]:
        low, high = sm.confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
        ours = newcombe_interval(k1, n1, k2, n2, 0.95)
        assert float(ours[0]) == pytest.approx(low, abs=1e-8)
        assert float(ours[1]) == pytest.approx(high, abs=1e-8)


# ------------------------------------------------------------------ pipeline paths
def test_group_parity_uses_the_inverted_interval_on_the_counts() -> None:
    rng = np.random.default_rng(3)
    df = frame(
        {
            "a": (rng.integers(0, 2, 80), rng.random(80) < 0.4),
            "b": (rng.integers(0, 2, 120), rng.random(120) < 0.2),
        }
    )
    _, f = parity(df, exact="never")
    yhat = df["s"] > 0.5
    k = [int(yhat[df.g == g].sum()) for g in "ab"]
    n = [int((df.g == g).sum()) for g in "ab"]
    assert f["dp_gap"].pvalue == pytest.approx(
        float(newcombe_tolerance_pvalue(k[0], n[0], k[1], n[1], 0.05))
    )
    lo, hi = newcombe_interval(k[0], n[0], k[1], n[1], 0.95, continuity=True)
    assert (f["dp_gap"].interval.low, f["dp_gap"].interval.high) == pytest.approx((lo, hi))
    # By default (exact="auto") groups of 80 and 120 rows (<= 200) take the exact unconditional
    # test's p-value instead (0.0138 here against Newcombe's 0.0066); the interval is unchanged.
    _, fa = parity(df)
    assert fa["dp_gap"].pvalue == pytest.approx(
        exact_tolerance_pvalue(k[0], n[0], k[1], n[1], 0.05), rel=1e-12
    )
    assert fa["dp_gap"].pvalue != pytest.approx(f["dp_gap"].pvalue, rel=0.1)
    assert fa["dp_gap"].interval == f["dp_gap"].interval


def test_constant_weights_give_the_unweighted_result() -> None:
    """Weighted hard predictions use effective counts; constant weights give n_eff = n."""
    rng = np.random.default_rng(4)
    df = frame({"a": (rng.integers(0, 2, 30), np.zeros(30)), "b": big_group(400, 60)})
    df["w"] = 2.5
    # exact="never": unweighted groups of 30 rows would otherwise take the exact test's p-value
    # (dp_gap 0.132 against Newcombe's 0.138), which weighted data never use.
    _, fu = parity(df, exact="never")
    resw, fw = parity(df, weight="w")
    for key in ("dp_gap", "tpr_gap", "fpr_gap"):
        assert fw[key].pvalue == pytest.approx(fu[key].pvalue, rel=1e-9)
        assert fw[key].interval.low == pytest.approx(fu[key].interval.low, rel=1e-9)
        assert "effective counts" in fw[key].interval.method
    assert isinstance(resw.details, GroupParityDetails)
    groups = resw.details.attributes["g"].groups
    assert groups[0].rates.positive_rate.high > 0.05  # Wilson, not a point at 0


def test_effective_sample_size() -> None:
    """Korn–Graubard n = r(1−r)/Var for interior rates (= n for unit weights), Kish W²/Σw²
    where the rate is 0 or 1, truncated at the row count."""
    rate = np.array([0.3, 0.0, 1.0, 0.3, np.nan])
    n = np.array([50.0, 40.0, 10.0, 50.0, 0.0])
    w = np.array([50.0, 60.0, 10.0, 50.0, 0.0])
    w2 = np.array([50.0, 100.0, 10.0, 50.0, 0.0])
    var = np.array([0.3 * 0.7 / 50, 0.0, 0.0, 0.3 * 0.7 / 20, np.nan])
    got = effective_sample_size(rate, var, n, w, w2)
    np.testing.assert_allclose(got[:4], [50.0, 36.0, 10.0, 20.0])
    assert np.isnan(got[4])
    assert effective_sample_size(0.3, 0.3 * 0.7 / 500, 50.0, 50.0, 50.0) == 50.0  # truncated


def test_expected_counts_with_a_constant_group_are_not_tested() -> None:
    """Without a threshold a group whose scores are all equal has zero Wald variance: the pair
    is untested with the reason (never p = 0)."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "g": ["a"] * 30 + ["b"] * 500,
            "y": rng.integers(0, 2, 530),
            "s": np.r_[np.zeros(30), rng.beta(2, 8, 500)],
        }
    )
    res, f = parity(df, threshold=None)
    for key in ("dp_gap", "tpr_gap", "fpr_gap"):
        assert f[key].pvalue is None and f[key].interval is None
        assert "not tested: zero variance" in f[key].reading and "['a']" in f[key].reading
    assert sum("zero variance" in w for w in res.warnings) == 3
    assert np.isnan(tolerance_pvalue(0.2, 0.0, 0.05))
    gaps = rate_gaps(
        np.array([0.0, 0.2]),
        np.array([0.0, 1e-4]),
        np.array([30, 500]),
        tolerance=0.05,
        binomial=False,
    )
    assert gaps.zero_variance[0] and np.isnan(gaps.pvalue[0]) and np.isnan(gaps.low[0])


# ------------------------------------------------------------------ (d) labels of one class
def test_all_positive_labels_test_each_gap_once() -> None:
    """Every label positive: TPR gap = DP gap (same rows), so it is reported but tested once,
    as dp_gap; the FPR is undefined and not tested, with the reason."""
    _, pred_b = big_group(400, 80)
    df = frame(
        {
            "a": (np.ones(60, int), np.r_[np.ones(30), np.zeros(30)]),
            "b": (np.ones(400, int), pred_b),
        }
    )
    res, f = parity(df)
    dp, tpr, fpr = f["dp_gap"], f["tpr_gap"], f["fpr_gap"]
    assert dp.pvalue is not None and dp.pvalue < ALPHA
    assert tpr.estimate == dp.estimate and tpr.interval == dp.interval
    assert tpr.pvalue is None
    assert "equals the demographic-parity gap (no negative labels in either group)" in tpr.reading
    assert np.isnan(fpr.estimate) and fpr.pvalue is None and fpr.interval is None
    assert "undefined" in fpr.reading and "['a', 'b']" in fpr.reading
    assert [x.key.split(".")[0] for x in res.findings if x.tested] == ["dp_gap"]
    assert len(res.warnings) == 2


def test_all_negative_labels_test_fpr_gap_once_and_mixed_groups_test_both() -> None:
    df = frame(
        {
            "a": (np.zeros(50, int), np.r_[np.ones(20), np.zeros(30)]),
            "b": (np.zeros(80, int), np.zeros(80)),
        }
    )
    _, f = parity(df)
    assert f["dp_gap"].tested and not f["fpr_gap"].tested and not f["tpr_gap"].tested
    assert "no positive labels in either group" in f["fpr_gap"].reading
    # one group has both labels: TPR and DP differ, both are tested; FPR of a is undefined
    df2 = frame(
        {"a": (np.ones(50, int), np.r_[np.ones(20), np.zeros(30)]), "b": big_group(200, 30)}
    )
    _, f2 = parity(df2)
    assert f2["dp_gap"].tested and f2["tpr_gap"].tested and not f2["fpr_gap"].tested
    assert f2["tpr_gap"].estimate != f2["dp_gap"].estimate


def test_auc_gap_with_a_perfectly_separated_group_is_not_tested() -> None:
    """group_metrics' DeLong AUC-gap test: a small group with AUC 1 has DeLong variance 0, and
    a z statistic on the other group's variance alone would be huge; the pair is untested."""
    rng = np.random.default_rng(6)
    y_b = rng.integers(0, 2, 2000)
    s_b = np.clip(rng.normal(0.35 + 0.3 * y_b, 0.15), 0, 1)
    df = pd.DataFrame(
        {
            "g": ["a"] * 12 + ["b"] * 2000,
            "y": np.r_[np.zeros(6), np.ones(6), y_b].astype(int),
            "s": np.r_[np.linspace(0.1, 0.3, 6), np.linspace(0.7, 0.9, 6), s_b],
        }
    )
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",), score="s"), threshold=0.5)
    res = run_group_metrics(ds, GroupMetricsConfig(auc_gap_tests=True))
    gap = next(x for x in res.findings if x.key.startswith("auc_gap."))
    assert gap.estimate > 0 and gap.pvalue is None and gap.interval is None
    assert "Not tested" in gap.reading


def test_moments_of_an_all_negative_group_have_zero_wald_variance() -> None:
    """The degenerate input itself: 0 of 30 predicted positive has linearised variance 0, the
    reason the old standard error had no term for the group."""
    mom = GroupLabelMoments.from_arrays(
        "g", ("a",), np.zeros(30, int), np.tile([0, 1], 15), np.zeros(30), hard=True
    )
    rate, var, n = mom.rate((0, 1))
    assert rate[0] == 0 and var[0] == 0 and n[0] == 30
