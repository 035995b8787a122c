"""Gradient-flow attack (Maity et al. 2021 eq. 2.8 / Algorithm 1) and fair metrics (§3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fairengine.errors import ConfigError, DataContractError
from fairengine.individual import (
    DiscountedDirectionsMetric,
    EXPLOREMetric,
    FACEMetric,
    MahalanobisMetric,
    SensitiveSubspaceMetric,
    SVDSensitiveSubspaceMetric,
    TorchClassifier,
    explore_pairs,
    gradient_flow,
    project_simplex,
)
from fairengine.individual.attack import step_sizes
from fairengine.individual.torch_models import LinearLogitModule

THETA = np.array([1.5, -0.7, 0.3])
B = 0.2


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < 0.5).astype(int)
    return X, y


def _numpy_euler(X0, y, sigma, lam, etas):
    """Forward Euler of eq. 2.8 for a logistic model, by hand: ∇ℓ = (σ(xθ+b) − y)θ."""
    X = X0.copy()
    for eta in etas:
        p = 1 / (1 + np.exp(-(X @ THETA + B)))
        g = (p - y)[:, None] * THETA[None, :] - 2 * lam * (X - X0) @ sigma
        X = X + eta * g
    return X


@pytest.mark.parametrize("schedule", ["constant", "power"])
def test_flow_equals_hand_euler(schedule: str) -> None:
    X, y = _data()
    metric = DiscountedDirectionsMetric([[1.0, 0.5, 0.0]]).fit()
    etas = step_sizes(0.05, 40, schedule)
    clf = TorchClassifier(LinearLogitModule(THETA, B))
    res = gradient_flow(clf, X, y, metric, lam=3.0, steps=40, eta=0.05, schedule=schedule)
    expect = _numpy_euler(X, y, metric.sigma_, 3.0, etas)
    np.testing.assert_allclose(res.X, expect, atol=1e-12)
    p1 = 1 / (1 + np.exp(-(expect @ THETA + B)))
    np.testing.assert_allclose(res.loss_mapped, -np.log(np.where(y == 1, p1, 1 - p1)), rtol=1e-10)
    np.testing.assert_allclose(res.sq_dist, metric.sq_dist(expect, X), atol=1e-12)
    assert res.flow_time == pytest.approx(etas.sum())
    if schedule == "power":
        assert etas[1] == pytest.approx(0.05 * 2 ** (-2 / 3))


def test_rows_are_independent_of_batching() -> None:
    """Summed per-row objective: the same rows give the same Φ alone, in chunks, or in a batch."""
    X, y = _data(50)
    metric = SensitiveSubspaceMetric().fit(X, (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int))
    clf = TorchClassifier(
        torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    )
    full = gradient_flow(clf, X, y, metric, lam=5.0, steps=30, eta=0.05)
    chunked = gradient_flow(clf, X, y, metric, lam=5.0, steps=30, eta=0.05, chunk_rows=7)
    alone = gradient_flow(clf, X[:3], y[:3], metric, lam=5.0, steps=30, eta=0.05)
    np.testing.assert_allclose(chunked.X, full.X, atol=1e-12)
    np.testing.assert_allclose(alone.X, full.X[:3], atol=1e-12)
    # the regularised objective ℓ − λd² never decreases along small steps (eq. 3.1 analogue)
    obj0 = full.loss_original
    obj1 = full.loss_mapped - 5.0 * full.sq_dist
    assert np.all(obj1 >= obj0 - 1e-9)


def test_divergence_is_detected_and_warned() -> None:
    X, y = _data(20)
    metric = MahalanobisMetric(np.eye(3)).fit()
    clf = TorchClassifier(LinearLogitModule(THETA, B))
    res = gradient_flow(clf, X, y, metric, lam=50.0, steps=200, eta=0.05)
    assert res.n_diverged == 20
    assert any("eta*lambda*sigma_max" in w for w in res.warnings)
    assert any("diverged" in w for w in res.warnings)
    assert np.isfinite(res.X).all()
    ok = gradient_flow(clf, X, y, metric, lam=50.0, steps=200, eta=0.005)
    assert ok.n_diverged == 0 and not ok.warnings


def test_mask_box_and_simplex_domains() -> None:
    X, y = _data(30)
    metric = MahalanobisMetric(np.diag([0.0, 0.0, 1.0])).fit()
    clf = TorchClassifier(LinearLogitModule([3.0, -3.0, 1.0], 0.0))
    frozen = gradient_flow(
        clf, X, y, metric, lam=1.0, steps=20, eta=0.1, mutable_mask=[True, False, True]
    )
    np.testing.assert_array_equal(frozen.X[:, 1], X[:, 1])
    lo, hi = X.min(0), X.max(0)
    boxed = gradient_flow(clf, X, y, metric, lam=1.0, steps=50, eta=0.5, domain="box",
                          lower=lo, upper=hi)  # fmt: skip
    assert np.all(boxed.X >= lo - 1e-12) and np.all(boxed.X <= hi + 1e-12)
    Xs = np.abs(X) / np.abs(X).sum(1, keepdims=True)  # rows on the simplex
    simp = gradient_flow(clf, Xs, y, metric, lam=1.0, steps=50, eta=0.5, domain="simplex",
                         onehot_groups=[([0, 1, 2], True)])  # fmt: skip
    assert np.allclose(simp.X.sum(1), 1.0) and np.all(simp.X >= 0)


def test_project_simplex() -> None:
    u = torch.tensor(
        [[0.5, 0.5, 0.5], [2.0, 0.0, 0.0], [0.2, 0.3, -0.1], [0.6, 0.7, 0.1]], dtype=torch.float64
    )
    full = project_simplex(u, True)
    np.testing.assert_allclose(full[0], [1 / 3] * 3)
    np.testing.assert_allclose(full[1], [1, 0, 0])
    np.testing.assert_allclose(full[3], [0.45, 0.55, 0.0])
    capped = project_simplex(u, False)
    np.testing.assert_allclose(capped[2], [0.2, 0.3, 0.0])
    np.testing.assert_allclose(capped[3], full[3])
    # optimality: no random simplex point is closer to u than its projection
    rng = np.random.default_rng(0)
    pts = torch.as_tensor(rng.dirichlet(np.ones(3), size=5000))
    for i in range(4):
        best = torch.linalg.vector_norm(pts - u[i], dim=1).min()
        assert torch.linalg.vector_norm(full[i] - u[i]) <= best + 1e-12


def test_flow_bad_input() -> None:
    X, y = _data(5)
    metric = MahalanobisMetric(np.eye(3)).fit()
    clf = TorchClassifier(LinearLogitModule(THETA, B))
    Xn = X.copy()
    Xn[0, 1] = np.nan
    with pytest.raises(DataContractError, match="missing or infinite"):
        gradient_flow(clf, Xn, y, metric)
    with pytest.raises(ConfigError, match="eta"):
        gradient_flow(clf, X, y, metric, eta=0.0)
    with pytest.raises(ConfigError, match="schedule"):
        gradient_flow(clf, X, y, metric, schedule="cosine")
    with pytest.raises(DataContractError, match="fitted on 2 features"):
        gradient_flow(clf, X, y, MahalanobisMetric(np.eye(2)).fit())


# ----------------------------------------------------------------------------- metrics
def test_sensitive_subspace_metric() -> None:
    """Σ = I − P_H: a symmetric idempotent projector that zeroes the coefficient directions."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2000, 5))
    a = (X @ np.array([2.0, -1.0, 0, 0, 0]) + rng.standard_normal(2000) > 0).astype(int)
    b = (X[:, 3] + 0.5 * rng.standard_normal(2000) > 0).astype(int)
    m = SensitiveSubspaceMetric().fit(X, np.column_stack([a, b]))
    s = m.sigma_
    np.testing.assert_allclose(s, s.T, atol=1e-12)
    np.testing.assert_allclose(s @ s, s, atol=1e-10)
    assert m.basis_.shape == (5, 2)
    np.testing.assert_allclose(s @ m.coef_.T, 0.0, atol=1e-10)
    # a move along the coefficient of `a` is free, along x5 it costs its squared length
    assert m.sq_dist(m.coef_[:1], np.zeros((1, 5)))[0] == pytest.approx(0.0, abs=1e-12)
    assert m.sq_dist([[0, 0, 0, 0, 2.0]], [[0, 0, 0, 0, 0]])[0] == pytest.approx(4.0, rel=0.05)
    # transform is a square root: Euclidean distance after it equals d
    t = m.transform(X[:3]) - m.transform(X[3:6])
    np.testing.assert_allclose((t**2).sum(1), m.sq_dist(X[:3], X[3:6]), atol=1e-10)
    # protected columns that are inputs become free axes and leave the regressions
    mp = SensitiveSubspaceMetric(protected_columns=[4]).fit(X, a)
    assert mp.sq_dist([[0, 0, 0, 0, 3.0]], [[0, 0, 0, 0, 0]])[0] == pytest.approx(0.0, abs=1e-12)
    assert mp.provenance_["protected_axes"] == [4]


def test_svd_face_and_discount() -> None:
    rng = np.random.default_rng(2)
    v = np.array([0.6, 0.8, 0.0])
    # comparable pairs differ only along v (plus small noise): FACE recovers ±v
    base = rng.standard_normal((300, 3))
    shift = rng.standard_normal((300, 1)) * v + 0.01 * rng.standard_normal((300, 3))
    Xp = np.vstack([base, base + shift])
    groups = np.tile(np.arange(300), 2)
    face = FACEMetric(n_components=1).fit(Xp, groups)
    assert abs(face.basis_[:, 0] @ v) == pytest.approx(1.0, abs=1e-3)
    svd = SVDSensitiveSubspaceMetric(n_components=1).fit(np.outer(rng.standard_normal(20), v))
    assert abs(svd.basis_[:, 0] @ v) == pytest.approx(1.0, abs=1e-10)
    disc = DiscountedDirectionsMetric([v], discount=0.25).fit()
    assert disc.sq_dist([2 * v], [np.zeros(3)])[0] == pytest.approx(0.25 * 4)
    rot = DiscountedDirectionsMetric.rotated_2d(10.0)
    u = np.array([-np.sin(np.radians(10)), np.cos(np.radians(10))])
    assert rot.sq_dist([u], [[0, 0]])[0] == pytest.approx(1.0)
    with pytest.raises(DataContractError, match="discount"):
        DiscountedDirectionsMetric([v], discount=1.0).fit()
    with pytest.raises(DataContractError, match="positive semi-definite"):
        MahalanobisMetric(np.diag([1.0, -1.0])).fit()


def test_explore_recovers_planted_metric() -> None:
    """Pairs drawn from the EXPLORE model with Σ* = diag(4, 0.25): the MLE lands near Σ*."""
    rng = np.random.default_rng(3)
    true = np.diag([4.0, 0.25])
    D = rng.standard_normal((8000, 2)) * 0.8
    d = np.einsum("ij,jk,ik->i", D, true, D)
    y = (rng.random(8000) < 2 / (1 + np.exp(d))).astype(int)
    m = EXPLOREMetric(n_iter=1500, batch_size=1000, random_state=0).fit(D, np.zeros_like(D), y)
    np.testing.assert_allclose(np.diag(m.sigma_), [4.0, 0.25], rtol=0.25, atol=0.1)
    assert m.nll_[-1] < m.nll_[0]
    assert EXPLOREMetric.negative_log_likelihood(m.sigma_, D, y) <= (
        EXPLOREMetric.negative_log_likelihood(np.eye(2), D, y)
    )
    x1, x2, lab = explore_pairs(
        rng.standard_normal((100, 2)), rng.integers(0, 2, 100), rng.integers(0, 2, 100),
        n_comparable=50, n_incomparable=20,
    )  # fmt: skip
    assert x1.shape == x2.shape and set(np.unique(lab)) <= {0, 1}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (GPU runs only)")
def test_cpu_and_cuda_agree() -> None:
    X, y = _data(200)
    metric = DiscountedDirectionsMetric([[1.0, 0.5, 0.0]]).fit()
    clf = TorchClassifier(
        torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    )
    cpu = gradient_flow(clf, X, y, metric, lam=5.0, steps=50, eta=0.05, device="cpu")
    gpu = gradient_flow(clf, X, y, metric, lam=5.0, steps=50, eta=0.05, device="cuda")
    np.testing.assert_allclose(gpu.X, cpu.X, atol=1e-9)
    np.testing.assert_allclose(gpu.loss_mapped, cpu.loss_mapped, rtol=1e-9)
