"""fairengine.regression.permutation and .distances: observed KS and W1 equal scipy's (to 1e-12,
with ties and weights), the type-I error of every permutation test under exchangeable groups
lies in the 99.9 % binomial band of 0.05 (400 data sets × 199 permutations), studentization
keeps the level of the mean-residual test where the plain permutation test does not (DiCiccio
et al. 2020, §3.3: unequal variances and sizes), the shared-permutation driver gives the
engine's p-values (fairengine.permutation.two_group, rows path) step for step, and the results
round-trip through JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from fairengine.errors import DataContractError
from fairengine.permutation.two_group import permutation_test
from fairengine.regression import PairTests, all_pair_tests, pair_permutation_tests, pair_seed
from fairengine.regression.distances import distances, sorted_sample

SETS, PERMS, ALPHA = 400, 199, 0.05


def _band() -> tuple[float, float]:
    lo = stats.binom.ppf(0.0005, SETS, ALPHA) / SETS
    hi = stats.binom.ppf(0.9995, SETS, ALPHA) / SETS
    return float(lo), float(hi)


def _two_groups(rng: np.random.Generator, n_a: int, n_b: int, ties: bool = False):
    n = n_a + n_b
    pred = rng.normal(size=n)
    if ties:
        pred = np.round(pred, 1)
    y = pred + rng.normal(size=n)
    codes = np.r_[np.zeros(n_a, int), np.ones(n_b, int)]
    return y, pred, codes


@pytest.mark.parametrize("ties", [False, True])
def test_observed_distances_equal_scipy(ties: bool) -> None:
    rng = np.random.default_rng(1)
    y, pred, codes = _two_groups(rng, 300, 500, ties)
    pred = pred + 0.2 * codes
    res = pair_permutation_tests(y, pred, codes, ["a", "b"], group_a=0, group_b=1, n_permutations=9)
    a, b = pred[codes == 0], pred[codes == 1]
    assert res.distance("ks").statistic == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
    assert res.distance("wasserstein").statistic == pytest.approx(
        stats.wasserstein_distance(a, b), abs=1e-12
    )


def test_weighted_wasserstein_equals_scipy_and_integer_weights_replicate_rows() -> None:
    rng = np.random.default_rng(2)
    y, pred, codes = _two_groups(rng, 200, 300)
    w = rng.integers(1, 4, y.size).astype(float)
    res = pair_permutation_tests(
        y, pred, codes, ["a", "b"], group_a=0, group_b=1, weights=w, n_permutations=9
    )
    a, b = codes == 0, codes == 1
    assert res.distance("wasserstein").statistic == pytest.approx(
        stats.wasserstein_distance(pred[a], pred[b], w[a], w[b]), abs=1e-12
    )
    rep = np.repeat(np.arange(y.size), w.astype(int))
    plain = pair_permutation_tests(
        y[rep], pred[rep], codes[rep], ["a", "b"], group_a=0, group_b=1, n_permutations=9
    )
    assert res.distance("ks").statistic == pytest.approx(plain.distance("ks").statistic, abs=1e-12)
    for m in ("mean_prediction", "mean_residual", "mae", "mse"):
        assert res.difference(m).difference == pytest.approx(
            plain.difference(m).difference, abs=1e-12
        )


def test_scan_over_blocks_equals_one_pass() -> None:
    rng = np.random.default_rng(3)
    x = np.sort(np.round(rng.normal(size=20_000), 2))
    masks = (rng.random((5, x.size)) < 0.3).astype(np.float64)
    from fairengine.regression.distances import DistanceScan

    s = sorted_sample(x, None)
    ks, w1 = distances(s, masks)
    scan = DistanceScan(s, masks.sum(axis=1))
    for j0 in range(0, x.size, 3000):
        scan.update(j0, masks[:, j0 : j0 + 3000])
    ks2, w12 = scan.result()
    np.testing.assert_allclose(ks2, ks, atol=1e-12)
    np.testing.assert_allclose(w12, w1, atol=1e-12)
    for t in range(5):
        a, b = x[masks[t] == 1], x[masks[t] == 0]
        assert ks[t] == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
        assert w1[t] == pytest.approx(stats.wasserstein_distance(a, b), abs=1e-12)


def test_type_one_error_of_every_test_under_exchangeable_groups() -> None:
    rng = np.random.default_rng(2026)
    names = ("mean_prediction", "mean_residual", "mae", "mse", "ks", "wasserstein")
    rejections = dict.fromkeys(names, 0)
    for i in range(SETS):
        y, pred, codes = _two_groups(rng, 40, 80)
        res = pair_permutation_tests(
            y, pred, codes, ["a", "b"], group_a=0, group_b=1, n_permutations=PERMS, seed=i
        )
        for t in (*res.differences, *res.distances):
            rejections[t.metric] += t.pvalue <= ALPHA
    lo, hi = _band()
    rates = {k: v / SETS for k, v in rejections.items()}
    for k, r in rates.items():
        assert lo <= r <= hi, (k, rates, (lo, hi))


def test_studentization_keeps_the_level_where_the_plain_test_fails() -> None:
    """Mean residual 0 in both groups; group A small (30) with residual SD 4, group B large
    (150) with SD 1: the plain permutation distribution of Δ is too narrow (it pools the
    variances), the studentized one is not."""
    rng = np.random.default_rng(99)
    plain = stud = 0
    for i in range(SETS):
        n_a, n_b = 30, 150
        pred = rng.normal(size=n_a + n_b)
        e = np.r_[rng.normal(0, 4, n_a), rng.normal(0, 1, n_b)]
        codes = np.r_[np.zeros(n_a, int), np.ones(n_b, int)]
        common = {"group_a": 0, "group_b": 1, "metrics": ("mean_residual",)}
        common |= {"distance_tests": False, "n_permutations": PERMS, "seed": i}
        s = pair_permutation_tests(pred + e, pred, codes, ["a", "b"], **common)
        p = pair_permutation_tests(pred + e, pred, codes, ["a", "b"], studentize="none", **common)
        stud += s.differences[0].pvalue <= ALPHA
        plain += p.differences[0].pvalue <= ALPHA
    lo, hi = _band()
    assert lo <= stud / SETS <= hi, stud / SETS
    assert plain / SETS > hi, plain / SETS


def test_same_permutations_and_p_values_as_the_engine_rows_path() -> None:
    """With 0/1 targets and probabilities (the engine's input contract), sorted by prediction,
    the mean prediction is the engine's ``positive_rate`` on expected counts and the mean
    residual minus its ``calibration``: same draws, same statistics, same counts."""
    rng = np.random.default_rng(5)
    n = 3000
    prob = np.sort(rng.random(n))
    y = (rng.random(n) < prob).astype(float)
    in_a = rng.random(n) < 0.35
    codes = np.where(in_a, 0, 1)
    mine = pair_permutation_tests(
        y,
        prob,
        codes,
        ["a", "b"],
        group_a=0,
        group_b=1,
        metrics=("mean_prediction", "mean_residual"),
        distance_tests=False,
        n_permutations=999,
        seed=42,
    )
    for metric, sign in (("positive_rate", 1), ("calibration", -1)):
        eng = permutation_test(
            y, prob, in_a, metric=metric, probability=prob, n_permutations=999, seed=42
        )
        assert eng.path == "rows"
        ours = mine.differences[0 if metric == "positive_rate" else 1]
        assert ours.statistic == pytest.approx(sign * eng.statistic, rel=1e-12, abs=1e-12)
        assert ours.difference == pytest.approx(sign * eng.difference, abs=1e-12)
        assert (ours.n_extreme, ours.pvalue) == (eng.n_extreme, eng.pvalue)


def test_more_permutations_from_the_pair_seed_extend_the_counts() -> None:
    rng = np.random.default_rng(8)
    y, pred, codes = _two_groups(rng, 60, 90)
    pred = pred + 0.1 * codes
    first = pair_permutation_tests(
        y, pred, codes, ["a", "b"], group_a=0, group_b=1, n_permutations=199, seed=pair_seed(7, 0)
    )
    more = pair_permutation_tests(
        y,
        pred,
        codes,
        ["a", "b"],
        group_a=0,
        group_b=1,
        n_permutations=300,
        seed=pair_seed(7, 0, start=199),
    )
    for a, b in zip(first.differences, more.differences, strict=True):
        assert a.statistic == b.statistic  # the observed statistic does not depend on draws
        total = a.n_extreme + b.n_extreme
        assert 0 <= total <= 499
    assert all_pair_tests(y, pred, codes, ["a", "b"], seed=7, n_permutations=199)[0] == first


def test_json_round_trip_and_tuples() -> None:
    rng = np.random.default_rng(9)
    y, pred, codes = _two_groups(rng, 30, 40)
    res = pair_permutation_tests(
        y, pred, codes, ["F", "M"], group_a="F", group_b="M", n_permutations=99, attribute="sex"
    )
    text = json.dumps(res.to_dict(), allow_nan=False)
    back = PairTests.from_dict(json.loads(text))
    assert back == res
    assert isinstance(back.differences, tuple) and isinstance(back.distances, tuple)


def test_bad_options_are_named() -> None:
    y, pred, codes = _two_groups(np.random.default_rng(0), 5, 5)
    with pytest.raises(DataContractError, match="group_b must be a category label"):
        pair_permutation_tests(y, pred, codes, ["a", "b"], group_a=0, group_b="c")
    with pytest.raises(DataContractError, match="unknown metric"):
        pair_permutation_tests(y, pred, codes, ["a", "b"], group_a=0, group_b=1, metrics=["r2"])
    with pytest.raises(DataContractError, match="group_a and group_b must differ"):
        pair_permutation_tests(y, pred, codes, ["a", "b"], group_a=1, group_b="b")


def test_worker_threads_give_the_same_result() -> None:
    rng = np.random.default_rng(10)
    y, pred, codes = _two_groups(rng, 20_000, 30_000)
    w = rng.random(y.size) + 0.5
    common = {"group_a": 0, "group_b": 1, "weights": w, "n_permutations": 199, "seed": 4}
    one = pair_permutation_tests(y, pred, codes, ["a", "b"], workers=1, **common)
    two = pair_permutation_tests(y, pred, codes, ["a", "b"], workers=2, **common)
    assert one == two
