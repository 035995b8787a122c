"""fairengine.multiclass.distances and .epsilon: TV, Jensen–Shannon and Hellinger against
scipy.spatial.distance, ε over K outcomes against brute force (Foulds et al. 2020's definition) and,
for K = 2, against the intersectional package's smoothed estimator."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.spatial import distance

from fairengine.errors import DataContractError
from fairengine.intersectional.metrics import pairwise_epsilon, smoothed_rates
from fairengine.multiclass import (
    MulticlassEpsilon,
    class_distances,
    differential_fairness,
    pair_permutation_tests,
)


def test_distances_equal_scipy() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 7))
        p, q = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
        if rng.random() < 0.3:  # zeros in the support
            p[0] = 0.0
            p /= p.sum()
        tv, js, hell = class_distances(p, q)
        assert tv == pytest.approx(0.5 * distance.cityblock(p, q), abs=1e-12)
        assert js == pytest.approx(distance.jensenshannon(p, q, base=2) ** 2, abs=1e-12)
        assert hell == pytest.approx(
            distance.euclidean(np.sqrt(p), np.sqrt(q)) / math.sqrt(2), abs=1e-12
        )
    # identical: 0; disjoint supports: all three are 1
    assert class_distances([0.2, 0.8], [0.2, 0.8]) == pytest.approx([0, 0, 0])
    assert class_distances([1.0, 0.0], [0.0, 1.0]) == pytest.approx([1, 1, 1])


def test_pair_distances_are_of_the_predicted_class_distributions() -> None:
    rng = np.random.default_rng(1)
    n = 800
    y, pred, codes = rng.integers(0, 4, n), rng.integers(0, 4, n), rng.integers(0, 2, n)
    pt = pair_permutation_tests(
        y, pred, codes, ["a", "b"], list("wxyz"), group_a=0, group_b=1, n_permutations=99
    )
    p = np.bincount(pred[codes == 0], minlength=4) / np.sum(codes == 0)
    q = np.bincount(pred[codes == 1], minlength=4) / np.sum(codes == 1)
    assert pt.distance("tv").statistic == pytest.approx(0.5 * np.abs(p - q).sum(), abs=1e-12)
    js = distance.jensenshannon(p, q, base=2) ** 2
    assert pt.distance("js").statistic == pytest.approx(js, abs=1e-12)


def _brute_epsilon(counts: np.ndarray, alpha: float) -> float:
    g, k = counts.shape
    best = 0.0
    for c in range(k):
        for s, t in itertools.permutations(range(g), 2):
            rs = (counts[s, c] + alpha) / (counts[s].sum() + k * alpha)
            rt = (counts[t, c] + alpha) / (counts[t].sum() + k * alpha)
            best = max(best, abs(math.log(rs) - math.log(rt)))
    return best


def test_epsilon_equals_brute_force_and_posterior() -> None:
    rng = np.random.default_rng(4)
    n = 1500
    codes = rng.integers(0, 5, n)
    pred = np.minimum(rng.poisson(0.6 + 0.3 * codes), 3)
    y = rng.integers(0, 4, n)
    e = differential_fairness(
        y, pred, codes, list("abcde"), list("wxyz"), n_draws=2000, attribute="race"
    )
    counts = np.array(e.counts)
    assert counts.sum() == n
    assert e.epsilon == pytest.approx(_brute_epsilon(counts, 0.25), rel=1e-12)
    assert e.epsilon_empirical == pytest.approx(_brute_epsilon(counts, 0.0), rel=1e-12)
    assert max(e.per_class) == e.epsilon
    assert e.class_label == "wxyz"[int(np.argmax(e.per_class))]
    post = e.posterior
    assert post is not None and post.interval.low < e.epsilon < post.interval.high
    text = json.dumps(e.to_dict(), allow_nan=False)
    assert MulticlassEpsilon.from_dict(json.loads(text)) == e


def test_two_outcomes_equal_the_intersectional_estimator() -> None:
    """K = 2 with concentration 1 is the intersectional package's α = β = ½ smoothed ε of
    statistical parity over both outcomes."""
    rng = np.random.default_rng(8)
    n = 900
    codes = rng.integers(0, 4, n)
    pred = (rng.random(n) < 0.2 + 0.15 * codes).astype(int)
    e = differential_fairness(np.zeros(n, int), pred, codes, list("abcd"), ["neg", "pos"])
    k = np.bincount(codes[pred == 1], minlength=4)
    d = np.bincount(codes, minlength=4)
    eps, *_ = pairwise_epsilon(smoothed_rates(k, d, 0.5, 0.5), outcomes="both")
    assert e.epsilon == pytest.approx(float(eps), rel=1e-12)


def test_epsilon_edge_cases() -> None:
    # a class one group never gets: empirical ε is infinite, smoothed finite
    e = differential_fairness([0, 1, 2, 0], [0, 1, 2, 0], [0, 0, 1, 1], ["a", "b"], "xyz")
    assert math.isinf(e.epsilon_empirical) and math.isfinite(e.epsilon)
    # a class nobody gets does not count
    e2 = differential_fairness([0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 1], ["a", "b"], "xyz")
    assert e2.epsilon_empirical == 0.0 and e2.per_class[2] == 0.0
    json.dumps(e.to_dict(), allow_nan=False)
    with pytest.raises(DataContractError, match="concentration"):
        differential_fairness([0], [0], [0], ["a"], "xy", concentration=-1)
    with pytest.raises(DataContractError, match="n_draws"):
        differential_fairness([0], [0], [0], ["a"], "xy", n_draws=-5)
