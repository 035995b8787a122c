"""ExactOTMap (brute-force optimum, iteration-cap error), LinearOTMap (closed-form identity,
POT cross-check) and GANMap (seeded, runs)."""

from __future__ import annotations

import itertools

import numpy as np
import ot
import pytest

from fairengine.errors import DataContractError
from fairengine.transport import ExactOTMap, GANMap, LinearOTMap, TransportConvergenceError


def _brute_force(xs: np.ndarray, xt: np.ndarray, cost) -> float:
    c = cost(xs, xt)
    return min(c[np.arange(len(xs)), list(p)].sum() for p in itertools.permutations(range(len(xs))))


@pytest.mark.parametrize("cost", ["sqeuclidean", "sqcityblock"])
def test_exact_map_is_the_optimal_bijection(cost):
    """n = 7: the matching is a permutation whose cost equals the minimum over all 5,040."""
    rng = np.random.default_rng(3)
    xs, xt = rng.normal(size=(7, 2)), rng.normal(size=(7, 2)) + 1
    m = ExactOTMap(cost=cost, standardize=False, min_samples=2)
    images = m.fit_transform(xs, xt)
    assert sorted(m.matching_) == list(range(7))
    np.testing.assert_allclose(images, xt[m.matching_])

    def c(a, b):
        if cost == "sqeuclidean":
            return ((a[:, None] - b[None]) ** 2).sum(-1)
        return np.abs(a[:, None] - b[None]).sum(-1) ** 2

    achieved = c(xs, xt)[np.arange(7), m.matching_].sum()
    assert achieved == pytest.approx(_brute_force(xs, xt, c), rel=1e-10)


def test_exact_out_of_sample_rule_keeps_fitted_images():
    rng = np.random.default_rng(1)
    xs, xt = rng.normal(size=(200, 3)), rng.normal(size=(200, 3)) * 2
    m = ExactOTMap()
    np.testing.assert_allclose(m.fit_transform(xs, xt), m.transform(xs))
    new = m.transform(rng.normal(size=(50, 3)))
    # c-transform rule: images are target support points
    assert np.isclose(((new[:, None] - xt[None]) ** 2).sum(-1).min(1), 0).all()


def test_iteration_cap_is_an_error_not_a_warning():
    """POT only warns when numItermax is hit (and returns a suboptimal plan)."""
    rng = np.random.default_rng(0)
    xs, xt = rng.normal(size=(300, 4)), rng.normal(size=(300, 4))
    with pytest.raises(TransportConvergenceError, match="max_iter=500"):
        ExactOTMap(max_iter=500).fit(xs, xt)


def test_exact_size_guard():
    rng = np.random.default_rng(0)
    with pytest.raises(DataContractError, match="max_samples"):
        ExactOTMap(max_samples=50).fit(rng.normal(size=(60, 2)), rng.normal(size=(60, 2)))


def test_linear_map_closed_form():
    """A Σ_s A = Σ_t (the pushforward of a Gaussian has the target covariance) and the map
    equals POT's LinearTransport."""
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(500, 3)) @ np.array([[1, 0.5, 0], [0, 1, 0.2], [0, 0, 1]])
    xt = rng.normal(size=(500, 3)) @ np.array([[2, 0, 0], [0.3, 1, 0], [0, 0.4, 0.5]]) + 1
    m = LinearOTMap(standardize=False).fit(xs, xt)
    cs, ct = np.cov(xs, rowvar=False, bias=True), np.cov(xt, rowvar=False, bias=True)
    np.testing.assert_allclose(m.A_ @ cs @ m.A_, ct, atol=1e-6)
    np.testing.assert_allclose(m.A_, m.A_.T, atol=1e-10)
    pot = ot.da.LinearTransport(reg=1e-8).fit(Xs=xs, Xt=xt)
    np.testing.assert_allclose(m.transform(xs), pot.transform(Xs=xs), atol=1e-6)


def test_gan_map_is_seeded_and_runs():
    rng = np.random.default_rng(0)
    xs, xt = rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + 2
    a = GANMap(epochs=20, residual=True, random_state=4).fit(xs, xt)
    b = GANMap(epochs=20, residual=True, random_state=4).fit(xs, xt)
    np.testing.assert_array_equal(a.transform(xs), b.transform(xs))
    assert a.transform(xs).shape == xs.shape
    assert a.history_[-1]["epoch"] == 19
    with pytest.raises(DataContractError, match="cost"):
        GANMap(epochs=1, cost="l1").fit(xs, xt)
