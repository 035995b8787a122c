"""The exact unconditional tolerance test (fairengine.exact_tolerance) and its use in group parity.

Statistical checks, each able to fail: the restricted MLE against direct maximisation of the
likelihood; the one-sided p-values against scipy.stats.barnard_exact (τ = 0, pooled score
statistic) and against an independent dense search of the nuisance parameter (τ > 0, both
sides computed directly); the exact size by full enumeration of the outcome table at boundary
and interior points of H0 (never above α, where the Newcombe inversion is); the supremum on the
boundary p₁ − p₂ = τ (Röhmel & Mansmann 1999) against interior points; monotonicity and edge
cases; the group_parity options.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats
from threadpoolctl import threadpool_limits

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.exact_tolerance import (
    EXACT_MAX_CELLS,
    EXACT_TEST,
    TIE_RTOL,
    binomial_pmfs,
    exact_tolerance_pvalue,
    exact_tolerance_test,
    reject_runs,
    restricted_mle,
    run_tail_probabilities,
    score_statistic,
    statistic_table,
    tail_probabilities,
)
from fairengine.group_parity.method import NEWCOMBE_TEST, group_parity
from fairengine.group_parity.result import RATE_NAMES, GroupParityDetails
from fairengine.rate_gap import newcombe_tolerance_pvalue
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles

# (n₁, n₂) of the exact-size and boundary checks: small groups, one-row groups, rare rates
DESIGNS = [(10, 30), (30, 300), (1, 200), (30, 3000), (1, 1000)]


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    """The enumerations' matrix products on one BLAS thread: two threads on the shared 2-core
    test machine are several times slower (fairengine.library_threads)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def grid_table(n1: int, n2: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(n1 + 1.0)[:, None], np.arange(n2 + 1.0)[None, :]


# ------------------------------------------------------------------ statistic
def test_restricted_mle_maximises_the_restricted_likelihood() -> None:
    """(p̃₁, p̃₂) of the closed-form cubic against bounded Brent maximisation of the binomial
    log-likelihood on p₁ − p₂ = δ (started from a 2,001-point scan), over random tables and
    margins of both signs, including k ∈ {0, n}: never a lower likelihood (1e-10), same point
    (1e-6)."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        n1, n2 = (int(x) for x in rng.integers(1, 400, 2))
        k1 = int(rng.choice([0, n1, rng.integers(0, n1 + 1)]))
        k2 = int(rng.choice([0, n2, rng.integers(0, n2 + 1)]))
        delta = float(rng.choice([-1, 1]) * rng.choice([0.001, 0.05, 0.2, 0.6]))
        lo, hi = max(0.0, delta), min(1.0, 1.0 + delta)
        counts = (k1, n1, k2, n2, delta)

        def nll(x: np.ndarray | float, c: tuple = counts) -> np.ndarray:
            k1, n1, k2, n2, delta = c
            return -(stats.binom.logpmf(k1, n1, x) + stats.binom.logpmf(k2, n2, x - delta))

        xs = np.linspace(lo, hi, 2001)
        i = int(np.argmin(nll(xs)))
        res = optimize.minimize_scalar(
            lambda x: float(nll(x)),
            bounds=(xs[max(i - 1, 0)], xs[min(i + 1, 2000)]),
            method="bounded",
            options={"xatol": 1e-12},
        )
        best_x = res.x if res.fun <= nll(xs[i]) else xs[i]
        t1, t2 = restricted_mle(k1, n1, k2, n2, delta)
        assert float(t1) - float(t2) == pytest.approx(delta, abs=1e-15)
        assert nll(float(t1)) <= float(nll(best_x)) + 1e-10, counts
        assert float(t1) == pytest.approx(best_x, abs=1e-6)


def test_zero_margin_statistic_is_the_pooled_score_and_every_table_is_monotone() -> None:
    """τ = 0: Z is scipy.stats.barnard_exact's pooled statistic (p̂₁ − p̂₂)/√(p̄(1 − p̄)(1/n₁ +
    1/n₂)). For every design and margin used here Z_δ rises with k₁ and falls with k₂ over the
    whole outcome table (Barnard convexity of every rejection region {Z_δ ≥ t}), the premise
    of searching the supremum on the boundary only."""
    for n1, n2 in [(10, 30), (7, 13)]:
        i, j = grid_table(n1, n2)
        pooled = (i + j) / (n1 + n2)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = (i / n1 - j / n2) / np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
        w[i / n1 == j / n2] = 0.0
        np.testing.assert_allclose(statistic_table(n1, n2, 0.0), w, rtol=1e-12, atol=1e-14)
    for n1, n2 in [*DESIGNS, (200, 200), (3, 3)]:
        for delta in (0.0, 0.05, -0.05, 0.3, -0.9):
            z = statistic_table(n1, n2, delta)
            assert np.all(np.diff(z, axis=0) >= -1e-12) and np.all(np.diff(z, axis=1) <= 1e-12)
            i, j = grid_table(n1, n2)
            np.testing.assert_array_equal(z, score_statistic(i, n1, j, n2, delta))


def test_pmfs_and_both_summation_forms_agree() -> None:
    """Log-space pmfs equal scipy.stats.binom.pmf (1e-10 relative where above 1e-250, 1e-11
    absolute everywhere, exact at p ∈ {0, 1}); the run form (binomial cdfs) and the
    matrix-product form of a tail probability agree within 1e-10 relative (the pmfs' rounding),
    for Barnard-convex and for arbitrary sets."""
    p = np.array([0.0, 1e-9, 0.003, 0.3, 0.999999, 1.0])
    for n in (1, 30, 20000):
        ours = binomial_pmfs(n, p)
        ref = stats.binom.pmf(np.arange(n + 1)[None, :], n, p[:, None])
        big = ref > 1e-250
        np.testing.assert_allclose(ours[big], ref[big], rtol=1e-10)
        assert np.all(np.abs(ours - ref) < 1e-11)
    rng = np.random.default_rng(12)
    for n1, n2 in [(30, 300), (5, 2000)]:
        z = statistic_table(n1, n2, 0.05)
        q = np.r_[0.0, np.geomspace(1e-5, 0.5, 40), 0.95]
        for reject in (z >= np.quantile(z, 0.9), rng.random(z.shape) < 0.3):
            dense = tail_probabilities(reject, q + 0.05, q)
            runs = run_tail_probabilities(reject_runs(reject), n1, n2, q + 0.05, q)
            np.testing.assert_allclose(runs, dense, rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------ p-values
def scipy_ties(n1: int, n2: int, k1: int, k2: int) -> bool:
    """Whether another table has the same pooled statistic in exact arithmetic: scipy compares
    floats, so it may leave such a tie out of the tail (the test here includes it)."""

    def key(i: int, j: int) -> Fraction | None:
        d = Fraction(i, n1) - Fraction(j, n2)
        pooled = Fraction(i + j, n1 + n2)
        if pooled in (0, 1):
            return None
        return (1 if d >= 0 else -1) * d * d / (pooled * (1 - pooled))

    obs = key(k1, k2)
    return sum(key(i, j) == obs for i in range(n1 + 1) for j in range(n2 + 1)) > 1


def test_zero_tolerance_matches_scipy_barnard_exact() -> None:
    """τ = 0: p⁺ and p⁻ equal scipy.stats.barnard_exact(pooled=True, 'greater' / 'less') for
    random tables of groups up to 25 rows where no other table ties with the observed one
    (scipy searches its nuisance parameter with shgo, 200 sampling points; tolerance 1e-9
    absolute, the agreement seen is ~1e-15); the two-sided p is min(1, 2·min(p⁺, p⁻))."""
    rng = np.random.default_rng(13)
    compared = 0
    while compared < 25:
        n1, n2 = (int(x) for x in rng.integers(1, 26, 2))
        k1, k2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        if scipy_ties(n1, n2, k1, k2):
            continue
        table = [[k1, k2], [n1 - k1, n2 - k2]]
        greater = stats.barnard_exact(table, alternative="greater", pooled=True, n=200).pvalue
        less = stats.barnard_exact(table, alternative="less", pooled=True, n=200).pvalue
        got = exact_tolerance_test(k1, n1, k2, n2, 0.0)
        assert got.upper == pytest.approx(greater, abs=1e-9), (k1, n1, k2, n2)
        assert got.lower == pytest.approx(less, abs=1e-9), (k1, n1, k2, n2)
        assert got.pvalue == min(1.0, 2 * min(got.upper, got.lower))
        compared += 1


def test_exact_ties_are_in_the_tail_where_scipy_drops_one() -> None:
    """7 of 12 against 2 of 15 ties exactly with 11 of 12 against 7 of 15 (gap 0.45, pooled
    rate 1/3 and 2/3); scipy's floats put the second 9e-16 lower and leave it out of the
    'greater' tail (p 0.0092534), the test here keeps it (0.0092573), which is the supremum
    of the tail that includes it (dense search: 200,001 points)."""
    assert scipy_ties(12, 15, 7, 2)
    scipy_p = stats.barnard_exact([[7, 2], [5, 13]], alternative="greater", pooled=True).pvalue
    got = exact_tolerance_test(7, 12, 2, 15, 0.0).upper
    z = statistic_table(12, 15, 0.0)
    reject = z >= z[7, 2] - 1e-9
    assert reject[11, 7]
    q = np.linspace(0, 1, 200_001)
    assert got == pytest.approx(tail_probabilities(reject, q, q).max(), rel=1e-9)
    assert got - scipy_p == pytest.approx(3.857e-6, rel=1e-3)


def dense_supremum(reject: np.ndarray, delta: float) -> float:
    """Independent search of sup over p₂ of P((K₁, K₂) ∈ R) on p₁ − p₂ = δ: 10,001 points
    uniform in p₂ plus 10,001 uniform in arcsin √p₂, then bounded Brent (xatol 1e-14) around
    the five highest grid maxima."""
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)
    q = np.unique(
        np.r_[
            np.linspace(lo, hi, 10_001),
            np.sin(np.linspace(math.asin(math.sqrt(lo)), math.asin(math.sqrt(hi)), 10_001)) ** 2,
        ]
    )
    v = tail_probabilities(reject, q + delta, q)
    best = float(v.max())
    peaks = np.flatnonzero((v >= np.r_[-1, v[:-1]]) & (v >= np.r_[v[1:], -1]))
    for p in peaks[np.argsort(-v[peaks])][:5]:
        res = optimize.minimize_scalar(
            lambda x: -float(tail_probabilities(reject, x + delta, x)[0]),
            bounds=(q[max(p - 1, 0)], q[min(p + 1, q.size - 1)]),
            method="bounded",
            options={"xatol": 1e-14},
        )
        best = max(best, -float(res.fun))
    return best


@pytest.mark.parametrize(
    "k1,n1,k2,n2,tau",
    [
        (3, 30, 0, 3000, 0.0),  # rare rates, a large group: narrow peaks near 0
        (2, 30, 1, 3000, 0.05),
        (1, 1, 2, 1000, 0.0),
        (9, 10, 8, 30, 0.05),
        (40, 200, 10, 150, 0.05),
        (0, 40, 25, 60, 0.1),
    ],
)
def test_both_sides_against_a_direct_dense_search(k1, n1, k2, n2, tau) -> None:
    """p⁺ from Z_τ and p⁻ computed directly from Z_{−τ} (its lower tail, on the boundary
    p₁ − p₂ = −τ, without the relabelling the module uses), each by the dense search: equal
    to the module's grid-and-refinement search within 1e-9 relative (its stated accuracy)."""
    got = exact_tolerance_test(k1, n1, k2, n2, tau)
    z_up = statistic_table(n1, n2, tau)
    z_low = statistic_table(n1, n2, -tau)
    up = dense_supremum(z_up >= z_up[k1, k2] - TIE_RTOL * max(1, abs(z_up[k1, k2])), tau)
    low = dense_supremum(z_low <= z_low[k1, k2] + TIE_RTOL * max(1, abs(z_low[k1, k2])), -tau)
    assert got.upper == pytest.approx(up, rel=1e-9, abs=1e-300)
    assert got.lower == pytest.approx(low, rel=1e-9, abs=1e-300)
    assert got.statistic_upper == pytest.approx(z_up[k1, k2], rel=1e-12)
    assert got.statistic_lower == pytest.approx(z_low[k1, k2], rel=1e-9, abs=1e-12)


# ------------------------------------------------------------------ exact size
def upper_region(n1: int, n2: int, tau: float, level: float) -> np.ndarray:
    """{Z_τ ≥ c} with c the smallest statistic whose p⁺ ≤ ``level`` (p⁺ falls as Z_τ rises,
    so a bisection over the sorted values finds it), ties within TIE_RTOL included."""
    z = statistic_table(n1, n2, tau)
    values = np.unique(z)
    lo, hi = 0, values.size
    while lo < hi:
        mid = (lo + hi) // 2
        i, j = np.argwhere(z == values[mid])[0]
        if exact_tolerance_test(int(i), n1, int(j), n2, tau).upper <= level:
            hi = mid
        else:
            lo = mid + 1
    if lo == values.size:
        return np.zeros(z.shape, dtype=bool)
    c = values[lo]
    return z >= c - TIE_RTOL * max(1.0, abs(c))


def null_points(tau: float) -> np.ndarray:
    """(p₁, p₂) in H0: |p₁ − p₂| ≤ τ: both boundaries at 400 evenly spaced and 200 rare rates
    (10⁻⁴ to 0.05), and interior points (300 random ones for τ > 0)."""
    even, rare = np.linspace(0, 1, 400), np.geomspace(1e-4, 0.05, 200)
    pts = []
    for d in {tau, -tau}:
        p2 = even[(even + d >= 0) & (even + d <= 1)]
        pts += [np.c_[p2 + d, p2], np.c_[rare + max(d, 0), rare + max(-d, 0)]]
    if tau > 0:
        u = np.random.default_rng(14).random((3000, 2))
        pts.append(u[np.abs(u[:, 0] - u[:, 1]) < tau][:300])
    return np.vstack(pts)


# Newcombe's maximum size / α over null_points (measured), where it exceeds α
NEWCOMBE_EXCEEDS = {
    (30, 300): {(0.0, 1e-3): 1.359, (0.05, 1e-3): 1.210},
    (1, 200): {(0.0, 1e-3): 9.713},
    (30, 3000): {(0.0, 1e-3): 8.394, (0.05, 1e-3): 3.345},
    (1, 1000): {(0.0, 1e-3): 14.689, (0.05, 0.05): 1.016},
}


@pytest.mark.parametrize("design", DESIGNS)
def test_exact_size_never_exceeds_alpha_where_newcombe_does(design) -> None:
    """Full enumeration of the outcome table: the rejection probability of the exact test at
    α ∈ {0.05, 10⁻³}, τ ∈ {0, 0.05}, at every point of null_points, is ≤ α (+1e-9); the
    Newcombe inversion's reaches the ratios of NEWCOMBE_EXCEEDS (> 1), the failure the exact
    test exists for (10 rows against 30: Newcombe holds its level, so does the exact test)."""
    n1, n2 = design
    i, j = grid_table(n1, n2)
    for tau in (0.0, 0.05):
        pts = null_points(tau)
        newcombe_p = newcombe_tolerance_pvalue(i, n1, j, n2, tau)
        for alpha in (0.05, 1e-3):
            up = upper_region(n1, n2, tau, alpha / 2)
            region = up | up[::-1, ::-1]  # p⁻(k) = p⁺(n − k): the mirrored region
            size = tail_probabilities(region, pts[:, 0], pts[:, 1])
            assert size.max() <= alpha + 1e-9, (design, tau, alpha, size.max() / alpha)
            newcombe = tail_probabilities(newcombe_p <= alpha, pts[:, 0], pts[:, 1]).max()
            expected = NEWCOMBE_EXCEEDS.get(design, {}).get((tau, alpha))
            if expected is not None:
                assert newcombe / alpha == pytest.approx(expected, abs=0.002)
                assert newcombe > alpha
    if design == (10, 30):  # the bisection's region is {p⁺ ≤ level}, table by table
        for tau, level in ((0.0, 0.025), (0.05, 5e-4)):
            p_up = np.array(
                [
                    [exact_tolerance_test(a, 10, b, 30, tau).upper for b in range(31)]
                    for a in range(11)
                ]
            )
            np.testing.assert_array_equal(upper_region(10, 30, tau, level), p_up <= level)


@pytest.mark.parametrize("design", DESIGNS)
def test_supremum_over_h0_plus_is_on_the_boundary(design) -> None:
    """For τ ∈ {0, 0.05} and the one-sided regions {Z_τ ≥ c} at levels 0.025, 0.2 and 0.5
    (those that are not empty: at least three per design), the largest tail probability over
    a 2-D grid of the interior of H0+ (p₁ − p₂ < τ; 80 × 80 even points plus rare rates) is at
    most the supremum on the boundary p₁ − p₂ = τ found by the module's search (Röhmel &
    Mansmann 1999: Barnard-convex regions)."""
    n1, n2 = design
    axis = np.unique(np.r_[np.linspace(0, 1, 80), np.geomspace(1e-4, 0.05, 30)])
    p1, p2 = (g.ravel() for g in np.meshgrid(axis, axis))
    checked = 0
    for tau in (0.0, 0.05):
        inside = p1 - p2 < tau
        z = statistic_table(n1, n2, tau)
        for level in (0.025, 0.2, 0.5):
            region = upper_region(n1, n2, tau, level)
            if not region.any():
                continue
            i, j = np.argwhere(region)[np.argmin(z[region])]
            boundary = exact_tolerance_test(int(i), n1, int(j), n2, tau).upper
            interior = tail_probabilities(region, p1[inside], p2[inside])
            assert interior.max() <= boundary + 1e-12, (design, tau, level)
            assert boundary <= level
            checked += 1
    assert checked >= 3


# ------------------------------------------------------------------ sanity
def test_pvalue_is_one_inside_the_band_and_falls_as_the_gap_grows() -> None:
    """p = 1 when the estimate lies inside [−τ, τ] by a margin; with k₂ fixed, p⁺ falls and
    p⁻ rises as k₁ grows, and the two-sided p falls once k₁/n₁ − k₂/n₂ > τ."""
    assert exact_tolerance_pvalue(10, 40, 10, 40, 0.05) == 1.0
    assert exact_tolerance_pvalue(12, 40, 10, 40, 0.1) == 1.0
    res = [exact_tolerance_test(k, 40, 6, 60, 0.05) for k in range(41)]
    up = np.array([r.upper for r in res])
    low = np.array([r.lower for r in res])
    assert np.all(np.diff(up) <= 1e-12) and np.all(np.diff(low) >= -1e-12)
    p = np.array([r.pvalue for r in res])
    beyond = np.arange(41) / 40 - 0.1 > 0.05
    assert np.all(np.diff(p[beyond]) <= 1e-12) and p[beyond][0] > p[beyond][-1]
    assert p[-1] < 1e-10 and p[4] == 1.0  # 4/40 = 6/60: the gap is 0


def test_edge_cases_and_refusals() -> None:
    """NaN for an empty group (as newcombe_tolerance_pvalue), 1 for τ ≥ 1, ValueError for
    counts out of range, a negative τ and tables above EXACT_MAX_CELLS."""
    assert math.isnan(exact_tolerance_pvalue(0, 0, 3, 10, 0.05))
    assert math.isnan(exact_tolerance_pvalue(3, 10, 0, 0, 0.0))
    assert math.isnan(float(newcombe_tolerance_pvalue(0, 0, 3, 10, 0.05)))
    assert exact_tolerance_pvalue(1, 1, 0, 5, 1.0) == 1.0
    with pytest.raises(ValueError, match="whole number in"):
        exact_tolerance_pvalue(11, 10, 3, 10, 0.05)
    with pytest.raises(ValueError, match="whole number"):
        exact_tolerance_pvalue(1.5, 10, 3, 10, 0.05)
    with pytest.raises(ValueError, match="tolerance"):
        exact_tolerance_pvalue(1, 10, 3, 10, -0.01)
    n = math.isqrt(EXACT_MAX_CELLS)  # (n + 1)² > EXACT_MAX_CELLS
    with pytest.raises(ValueError, match="EXACT_MAX_CELLS"):
        exact_tolerance_pvalue(1, n, 3, n, 0.05)


# ------------------------------------------------------------------ group parity
def parity_frame(n_small: int, seed: int = 15) -> pd.DataFrame:
    """Group a: n_small rows, rate 0.02 predicted positive; b: 2,000 rows at 0.15."""
    rng = np.random.default_rng(seed)
    parts = [
        pd.DataFrame(
            {"g": "a", "y": rng.integers(0, 2, n_small), "s": (np.arange(n_small) % 50 == 0)}
        ),
        pd.DataFrame({"g": "b", "y": rng.integers(0, 2, 2000), "s": rng.random(2000) < 0.15}),
    ]
    df = pd.concat(parts, ignore_index=True)
    df["s"] = df["s"].astype(float)
    return df


def run_parity(df: pd.DataFrame, weight: str | None = None, threshold: float | None = 0.5, **kw):
    ds = AuditDataset.from_frame(
        df,
        ColumnRoles("y", ("g",), score="s", weight=weight),
        threshold=threshold,
        min_group_size=1,
    )
    res = group_parity(ds, tolerance=0.05, **kw)
    return res, {f.key.split(".")[0]: f for f in res.findings}


def parity_details(res: MethodResult) -> GroupParityDetails:
    assert isinstance(res.details, GroupParityDetails)
    return res.details


def test_group_parity_auto_uses_the_exact_test_for_small_groups_only() -> None:
    """auto: 150 rows against 2,000 take the exact p-value (each rate's counts), named in the
    reading and in details; 400 rows against 2,000 keep Newcombe; never keeps Newcombe; the
    interval is Newcombe's either way."""
    df = parity_frame(150)
    res, f = run_parity(df)
    _, f_never = run_parity(df, exact="never")
    yhat = df["s"] > 0.5
    k = [int(yhat[df.g == g].sum()) for g in "ab"]
    n = [int((df.g == g).sum()) for g in "ab"]
    dp = f["dp_gap"]
    assert dp.pvalue == pytest.approx(exact_tolerance_pvalue(k[0], n[0], k[1], n[1], 0.05))
    assert dp.pvalue != pytest.approx(f_never["dp_gap"].pvalue, rel=1e-3)
    assert "exact unconditional test's (Farrington–Manning score) and decides" in dp.reading
    assert dp.interval == f_never["dp_gap"].interval
    assert "exact" not in f_never["dp_gap"].reading
    pairs = parity_details(res).attributes["g"].pairs
    assert {r.test for name in RATE_NAMES for r in pairs.of(name)} == {EXACT_TEST}
    assert pairs.positive_rate[0].pvalue == dp.pvalue
    assert res.parameters["exact"] == "auto" and res.parameters["exact_max_rows"] == 200
    res_big, f_big = run_parity(parity_frame(400))
    big_rows = parity_details(res_big).attributes["g"].pairs.positive_rate
    assert big_rows[0].test == NEWCOMBE_TEST
    assert "exact" not in f_big["dp_gap"].reading
    # a lower exact_max_rows moves the 150-row group back to Newcombe
    _, f_low = run_parity(df, exact_max_rows=100)
    assert f_low["dp_gap"].pvalue == f_never["dp_gap"].pvalue


def test_group_parity_always_and_its_warnings() -> None:
    """always: 400 rows against 2,000 are tested exactly; weighted data get one warning and
    keep Newcombe on effective counts; a bad value is refused naming the option."""
    res, f = run_parity(parity_frame(400), exact="always")
    pairs = parity_details(res).attributes["g"].pairs
    assert all(r.test == EXACT_TEST for name in RATE_NAMES for r in pairs.of(name))
    assert "decides" in f["dp_gap"].reading and not res.warnings
    df = parity_frame(150)
    df["w"] = 1.0
    res_w, f_w = run_parity(df, weight="w", exact="always")
    warned = [w for w in res_w.warnings if "exact is 'always'" in w]
    assert len(warned) == 1 and "it has sample weights" in warned[0]
    assert "exact" not in f_w["dp_gap"].reading
    # above EXACT_MAX_CELLS (2,002² cells): always warns, naming the pair, and keeps Newcombe
    rng = np.random.default_rng(16)
    big = pd.DataFrame(
        {
            "g": np.repeat(["a", "b"], 2001),
            "y": np.r_[np.ones(2001, int), np.zeros(2001, int)],
            "s": (rng.random(4002) < 0.3).astype(float),
        }
    )
    res_big, _ = run_parity(big, exact="always")
    assert parity_details(res_big).attributes["g"].pairs.positive_rate[0].test == NEWCOMBE_TEST
    assert [w for w in res_big.warnings if "exact test would" in w] == [
        "dp_gap for g 'a' vs 'b': the exact test would enumerate 4,008,004 outcome tables, "
        "more than 4,000,000; its p-value comes from the Newcombe interval inversion"
    ]
    with pytest.raises(DataContractError, match="'auto', 'always', 'never'"):
        run_parity(df, exact="yes")
    with pytest.raises(DataContractError, match="exact_max_rows"):
        run_parity(df, exact_max_rows=0)


def test_config_validates_the_exact_options() -> None:
    cfg = AuditConfig.from_dict({"methods": {"group_parity": {"exact": "never"}}})
    assert cfg.methods.group_parity.exact == "never"
    assert cfg.methods.group_parity.exact_max_rows == 200
    with pytest.raises(ConfigError, match=r"methods\.group_parity\.exact must be one of"):
        AuditConfig.from_dict({"methods": {"group_parity": {"exact": "sometimes"}}})
    with pytest.raises(ConfigError, match=r"methods\.group_parity\.exact_max_rows"):
        AuditConfig.from_dict({"methods": {"group_parity": {"exact_max_rows": 0}}})
