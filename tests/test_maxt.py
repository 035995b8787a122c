"""Tests of fairengine.maxt: Westfall–Young step-down maxT / minP (Ge, Dudoit & Speed 2003,
Boxes 2 and 4) against a brute-force loop of the definitions, their structural properties, the
closed form for perfectly dependent tests, and FWER / power simulations with dependent tests
(all 15 pairs of 6 groups sharing rows, jointly permuted group labels) compared with Holm."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom

from fairengine.errors import FairEngineError
from fairengine.maxt import (
    TIE_RTOL,
    MaxTInputError,
    maxt_adjusted_pvalues,
    minp_adjusted_pvalues,
)
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation import permutation_pvalue

# ----------------------------------------------------------------------------- brute force


def _extremeness(x: np.ndarray, alternative: str) -> np.ndarray:
    t = {"two-sided": np.abs(x), "greater": x, "less": -x}[alternative].astype(float)
    return np.where(np.isnan(t), -np.inf, t)


def _at_least(a: float, t: float) -> bool:
    gamma = TIE_RTOL * abs(t) if np.isfinite(t) else 0.0
    return a >= t - gamma


def brute_maxt(obs: np.ndarray, perm: np.ndarray, alternative: str) -> tuple[np.ndarray, ...]:
    """Westfall & Young Algorithm 2.8 written as the definition: for the j-th most extreme
    observed statistic, count permutations whose maximum over the tests not yet stepped past
    reaches it."""
    m, n_perm = obs.size, perm.shape[0]
    t = _extremeness(obs, alternative)
    t[np.isnan(obs)] = np.nan
    tp = _extremeness(perm, alternative)
    tested = [j for j in range(m) if not np.isnan(obs[j])]
    order = sorted(tested, key=lambda j: -t[j])  # stable: ties in input order
    raw, adj = np.full(m, np.nan), np.full(m, np.nan)
    running = 0.0
    for pos, j in enumerate(order):
        raw[j] = (1 + sum(_at_least(tp[b, j], t[j]) for b in range(n_perm))) / (n_perm + 1)
        rest = order[pos:]
        hits = sum(_at_least(max(tp[b, k] for k in rest), t[j]) for b in range(n_perm))
        running = max(running, (1 + hits) / (n_perm + 1))
        adj[j] = running
    return adj, raw, np.array(order, dtype=int)


def brute_minp(obs: np.ndarray, perm: np.ndarray, alternative: str) -> tuple[np.ndarray, ...]:
    """Ge et al. Box 4 as the definition, with raw p-values of all B + 1 rows by counting."""
    m, n_perm = obs.size, perm.shape[0]
    full = _extremeness(np.vstack([obs[None, :], perm]), alternative)  # row 0 = identity
    tested = [j for j in range(m) if not np.isnan(obs[j])]
    count = np.zeros((n_perm + 1, m), dtype=int)
    for j in tested:
        for b in range(n_perm + 1):
            count[b, j] = sum(_at_least(full[bb, j], full[b, j]) for bb in range(n_perm + 1))
    order = sorted(tested, key=lambda j: (count[0, j], -full[0, j]))
    raw, adj = np.full(m, np.nan), np.full(m, np.nan)
    running = 0.0
    for pos, j in enumerate(order):
        raw[j] = count[0, j] / (n_perm + 1)
        rest = order[pos:]
        hits = sum(min(count[b, k] for k in rest) <= count[0, j] for b in range(n_perm + 1))
        running = max(running, hits / (n_perm + 1))
        adj[j] = running
    return adj, raw, np.array(order, dtype=int)


def random_family(seed: int, m: int = 7, n_perm: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Correlated statistics with many exact ties, near-ties within the tolerance, NaN permuted
    statistics and (for odd seeds) one NaN observed statistic."""
    rng = np.random.default_rng(seed)
    if seed % 3 == 0:  # integer-valued: many exact ties
        perm = rng.integers(-4, 5, size=(n_perm, m)).astype(float)
        obs = rng.integers(-4, 5, size=m).astype(float)
        obs[0] = 0.0  # ties at zero, where the tolerance is 0
    else:  # correlated continuous columns
        z = rng.standard_normal((n_perm + 1, 1))
        full = 0.7 * z + 0.7 * rng.standard_normal((n_perm + 1, m))
        obs, perm = full[0] + rng.normal(0, 1.0, m), full[1:]
        obs[1] = obs[0]  # tied observed statistics
        perm[: n_perm // 4, 2] = obs[2] * (1 - 20 * np.finfo(float).eps)  # within tolerance
        perm[n_perm // 4 : n_perm // 2, 2] = -obs[2]  # exact two-sided ties
    perm[rng.random(perm.shape) < 0.08] = np.nan
    if seed % 2:
        obs[rng.integers(m)] = np.nan
    return obs, perm


CASES = [(seed, alt) for seed in range(6) for alt in ("two-sided", "greater", "less")]


@pytest.mark.parametrize(("seed", "alternative"), CASES)
def test_maxt_equals_brute_force(seed: int, alternative: str) -> None:
    obs, perm = random_family(seed)
    res = maxt_adjusted_pvalues(obs, perm, alternative)
    adj, raw, order = brute_maxt(obs, perm, alternative)
    np.testing.assert_allclose(res.adjusted_pvalues, adj, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(res.raw_pvalues, raw, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(res.order, order)
    np.testing.assert_array_equal(res.n_undefined, np.isnan(perm).sum(axis=0))
    assert res.n_permutations == perm.shape[0] and res.method == "maxT"


@pytest.mark.parametrize(("seed", "alternative"), CASES[::2])
def test_minp_equals_brute_force(seed: int, alternative: str) -> None:
    obs, perm = random_family(seed, n_perm=60)
    res = minp_adjusted_pvalues(obs, perm, alternative)
    adj, raw, order = brute_minp(obs, perm, alternative)
    np.testing.assert_allclose(res.adjusted_pvalues, adj, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(res.raw_pvalues, raw, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(res.order, order)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_raw_pvalues_match_the_per_test_permutation_pvalue(alternative: str) -> None:
    """Without undefined statistics the marginal p-values are exactly the ones the two-group
    test reports (same +1, same tie tolerance)."""
    obs, perm = random_family(4, m=9, n_perm=300)
    perm = np.nan_to_num(perm, nan=0.5)
    obs[np.isnan(obs)] = 1.0
    res = maxt_adjusted_pvalues(obs, perm, alternative)
    ref = [permutation_pvalue(obs[j], perm[:, j], alternative)[0] for j in range(obs.size)]
    np.testing.assert_allclose(res.raw_pvalues, ref, rtol=0, atol=1e-15)


# ----------------------------------------------------------------------------- properties


@pytest.mark.parametrize("method", [maxt_adjusted_pvalues, minp_adjusted_pvalues])
def test_adjusted_at_least_raw_monotone_and_at_most_one(method) -> None:
    for seed in range(20):
        obs, perm = random_family(100 + seed, m=12, n_perm=150)
        res = method(obs, perm, ("two-sided", "greater", "less")[seed % 3])
        ok = ~np.isnan(obs)
        assert np.array_equal(np.isnan(res.adjusted_pvalues), ~ok)
        adj, raw = res.adjusted_pvalues[ok], res.raw_pvalues[ok]
        assert np.all(adj >= raw - 1e-15)
        assert np.all(adj <= 1.0) and np.all(adj >= 1.0 / (perm.shape[0] + 1) - 1e-15)
        stepped = res.adjusted_pvalues[res.order]
        assert np.all(np.diff(stepped) >= 0)
        assert sorted(res.order.tolist()) == np.flatnonzero(ok).tolist()


def test_perfectly_dependent_tests_need_no_adjustment() -> None:
    """Closed form: with m identical columns the maximum over any subset is the common
    statistic, so the maxT (and minP) adjusted p-value is the raw one; Holm multiplies by m."""
    rng = np.random.default_rng(7)
    m, n_perm = 10, 999
    col = rng.standard_normal(n_perm)
    perm = np.repeat(col[:, None], m, axis=1)
    obs = np.full(m, 2.2)
    res = maxt_adjusted_pvalues(obs, perm)
    expected = (1 + np.count_nonzero(np.abs(col) >= 2.2)) / (n_perm + 1)
    np.testing.assert_allclose(res.raw_pvalues, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(res.adjusted_pvalues, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        minp_adjusted_pvalues(obs, perm).adjusted_pvalues, expected, rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(
        adjust_pvalues(res.raw_pvalues, "holm"), min(1.0, m * expected), rtol=0, atol=1e-15
    )


def test_independent_tests_give_sidak_for_the_most_significant() -> None:
    """Closed form for independent columns: u_{b,1} = max of m independent |N(0,1)|, so
    p̃_(1) → P(max |Z_k| ≥ t) = 1 − (2Φ(t) − 1)^m (Šidák), checked within 4 Monte-Carlo SEs."""
    from scipy.stats import norm

    rng = np.random.default_rng(11)
    m, n_perm, t = 5, 20_000, 2.5
    perm = rng.standard_normal((n_perm, m))
    obs = np.array([t, 0.1, 0.2, 0.3, 0.4])
    p1 = maxt_adjusted_pvalues(obs, perm).adjusted_pvalues[0]
    sidak = 1 - (2 * norm.cdf(t) - 1) ** m
    assert abs(p1 - sidak) < 4 * np.sqrt(sidak * (1 - sidak) / n_perm)


def test_minp_equals_maxt_when_columns_share_one_null_distribution() -> None:
    """If every column (identity row included) is a rearrangement of one set of values, the
    raw p-value is the same decreasing function of the statistic in every column, so minP and
    maxT order and count identically."""
    rng = np.random.default_rng(3)
    m, n_perm = 8, 499
    values = rng.standard_normal(n_perm + 1)
    full = np.column_stack([rng.permutation(values) for _ in range(m)])
    obs, perm = full[0], full[1:]
    a = maxt_adjusted_pvalues(obs, perm)
    b = minp_adjusted_pvalues(obs, perm)
    np.testing.assert_allclose(a.adjusted_pvalues, b.adjusted_pvalues, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a.order, b.order)


def test_nan_permuted_statistics_are_minus_infinity() -> None:
    """An all-NaN column never attains the maximum: the others' adjusted p-values are what they
    would be without it, and its own raw p-value is 1/(B+1)."""
    rng = np.random.default_rng(5)
    perm = rng.standard_normal((99, 4))
    obs = np.array([2.0, 1.0, 0.5, 0.7])
    with_nan = perm.copy()
    with_nan[:, 3] = np.nan
    res = maxt_adjusted_pvalues(obs, with_nan)
    ref = maxt_adjusted_pvalues(obs[:3], perm[:, :3])
    assert res.raw_pvalues[3] == pytest.approx(1 / 100)
    assert res.n_undefined.tolist() == [0, 0, 0, 99]
    # Tests 0 and 1 come before column 3 in the step-down order; their successive maxima run
    # over sets that include column 3, which as −∞ changes nothing.
    assert res.order.tolist() == [0, 1, 3, 2]
    np.testing.assert_allclose(
        res.adjusted_pvalues[[0, 1]], ref.adjusted_pvalues[[0, 1]], rtol=0, atol=1e-15
    )


def test_result_round_trips_to_json_and_decisions() -> None:
    obs, perm = random_family(1)
    res = maxt_adjusted_pvalues(obs, perm)
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["method"] == "maxT" and d["n_permutations"] == 200
    assert d["adjusted_pvalues"].count(None) == 1
    rej = res.rejected(0.5)
    assert rej.dtype == bool and not rej[np.isnan(obs)].any()
    assert np.array_equal(rej, np.nan_to_num(res.adjusted_pvalues, nan=2) <= 0.5)


def test_empty_family_and_bad_input() -> None:
    res = maxt_adjusted_pvalues(np.array([np.nan, np.nan]), np.zeros((5, 2)))
    assert res.order.size == 0 and np.isnan(res.adjusted_pvalues).all()
    with pytest.raises(FairEngineError, match="alternative must be one of"):
        maxt_adjusted_pvalues(np.zeros(2), np.zeros((5, 2)), "two_sided")
    with pytest.raises(MaxTInputError, match=r"permuted must be a 2-D array \(B, m\) with m = 3"):
        maxt_adjusted_pvalues(np.zeros(3), np.zeros((5, 2)))
    with pytest.raises(MaxTInputError, match="observed must be a 1-D array"):
        minp_adjusted_pvalues(np.zeros((3, 1)), np.zeros((5, 3)))
    with pytest.raises(MaxTInputError, match="at least one permutation"):
        maxt_adjusted_pvalues(np.zeros(3), np.zeros((0, 3)))
    with pytest.raises(MaxTInputError, match="numeric arrays"):
        maxt_adjusted_pvalues(np.array(["a", "b"]), np.zeros((5, 2)))
    with pytest.raises(MaxTInputError, match="alpha"):
        res.rejected(1.5)


# ----------------------------------------------------------------------------- simulations

N_GROUPS, N_PER_GROUP, ALPHA = 6, 50, 0.05
PAIRS = [(a, b) for a in range(N_GROUPS) for b in range(a + 1, N_GROUPS)]
PAIR_A = np.array([a for a, _ in PAIRS])
PAIR_B = np.array([b for _, b in PAIRS])


def welch_all_pairs(x: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Welch t = (x̄_a − x̄_b)/√(s²_a/n_a + s²_b/n_b) for all 15 pairs, for each row of group
    codes (R, n) over the same values x: (R, 15). Studentized, so all pairs share ≈ t(98)."""
    n_rows = codes.shape[0]
    flat = (codes + N_GROUPS * np.arange(n_rows)[:, None]).ravel()
    s1 = np.bincount(flat, np.tile(x, n_rows), N_GROUPS * n_rows).reshape(n_rows, N_GROUPS)
    s2 = np.bincount(flat, np.tile(x * x, n_rows), N_GROUPS * n_rows).reshape(n_rows, N_GROUPS)
    k = np.bincount(codes[0], minlength=N_GROUPS)
    mean = s1 / k
    var = (s2 - k * mean**2) / (k - 1)
    se = np.sqrt(var[:, PAIR_A] / k[PAIR_A] + var[:, PAIR_B] / k[PAIR_B])
    return (mean[:, PAIR_A] - mean[:, PAIR_B]) / se


def simulate(n_datasets: int, n_perm: int, shift: float, seed: int) -> dict[str, np.ndarray]:
    """Rejections (n_datasets, 15) of maxT, minP and Holm (on the raw permutation p-values) for
    one attribute with 6 groups of 50 rows; group 0's mean is shifted by ``shift`` SDs. Each
    row of the permutation matrix permutes all 300 group labels once (joint distribution)."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(N_GROUPS), N_PER_GROUP)
    out: dict[str, list[np.ndarray]] = {"maxT": [], "minP": [], "holm": []}
    for _ in range(n_datasets):
        x = rng.standard_normal(codes.size) + shift * (codes == 0)
        obs = welch_all_pairs(x, codes[None, :])[0]
        perm = welch_all_pairs(x, rng.permuted(np.tile(codes, (n_perm, 1)), axis=1))
        res = maxt_adjusted_pvalues(obs, perm)
        out["maxT"].append(res.rejected(ALPHA))
        out["minP"].append(minp_adjusted_pvalues(obs, perm).rejected(ALPHA))
        out["holm"].append(adjust_pvalues(res.raw_pvalues, "holm") <= ALPHA)
    return {k: np.array(v) for k, v in out.items()}


def test_fwer_under_the_complete_null_with_dependent_tests() -> None:
    """Complete null, continuous data, B = 199 joint permutations: the maxT family-wise error
    is exactly floor(α(B+1))/(B+1) = 0.05 (the observed maximum is uniform on the B+1 ranks), so
    the count of datasets with any rejection is Binomial(N, 0.05): checked against both
    one-sided 0.1% binomial bounds. Holm on the same raw p-values is far more conservative
    (with B = 199 its smallest adjusted p-value is 15/200 > α)."""
    n_datasets = 1000
    rej = simulate(n_datasets, n_perm=199, shift=0.0, seed=2024)
    k = int(rej["maxT"].any(axis=1).sum())
    assert binom.sf(k - 1, n_datasets, ALPHA) > 1e-3, f"maxT FWER {k / n_datasets} too high"
    assert binom.cdf(k, n_datasets, ALPHA) > 1e-3, f"maxT FWER {k / n_datasets} too low"
    for name in ("minP", "holm"):
        k_other = int(rej[name].any(axis=1).sum())
        assert binom.sf(k_other - 1, n_datasets, ALPHA) > 1e-3
        assert k_other <= k
    print(
        f"complete null FWER (N={n_datasets}, B=199): maxT {k / n_datasets:.3f}, "
        f"minP {rej['minP'].any(axis=1).mean():.3f}, holm {rej['holm'].any(axis=1).mean():.3f}"
    )


def test_power_gain_over_holm_with_dependent_tests() -> None:
    """Group 0 shifted by 0.6 SD: its 5 pairs are false nulls, the other 10 true. With
    B = 999 (Holm needs B ≥ m/α to reject at all), maxT rejects at least one false null and
    each false null at least as often as Holm on the same raw permutation p-values; the error
    on the 10 true nulls stays within α plus binomial Monte-Carlo error (approximately, by
    subset pivotality of the studentized statistics)."""
    n_datasets = 400
    rej = simulate(n_datasets, n_perm=999, shift=0.6, seed=7)
    false = PAIR_A == 0
    stats = {
        name: (
            r[:, false].any(axis=1).mean(),
            r[:, false].mean(),
            r[:, ~false].any(axis=1).mean(),
        )
        for name, r in rej.items()
    }
    assert stats["maxT"][0] >= stats["holm"][0]
    assert stats["maxT"][1] > stats["holm"][1]
    # Per dataset, maxT is uniformly at least as powerful here in nearly all data sets.
    assert np.mean(rej["maxT"].sum(axis=1) >= rej["holm"].sum(axis=1)) >= 0.95
    k_true = int(rej["maxT"][:, ~false].any(axis=1).sum())
    assert binom.sf(k_true - 1, n_datasets, ALPHA) > 1e-3
    for name, (anyr, avg, fwer) in stats.items():
        print(f"{name}: any-rejection {anyr:.3f}, average power {avg:.3f}, FWER(true) {fwer:.3f}")
