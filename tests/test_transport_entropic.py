"""EntropicMap: agreement with POT's entropic plan, Gaussian closed form, convergence errors,
ε selection, out-of-distribution guard and bad input."""

from __future__ import annotations

import numpy as np
import ot
import pandas as pd
import pytest

from fairengine.errors import DataContractError, FairEngineError
from fairengine.transport import EntropicMap, LinearOTMap, TransportConvergenceError


@pytest.fixture(scope="module")
def gaussians() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(800, 2))
    xt = rng.normal(size=(800, 2)) * np.array([1.5, 0.7]) + np.array([1.0, -2.0])
    return xs, xt


def test_in_sample_map_is_pots_barycentric_projection(gaussians):
    """On fitted points the softmax map equals the barycentric projection of the entropic plan
    (POT log-domain Sinkhorn, same ε, tight tolerance); differences are at our tol (1e-4)."""
    xs, xt = gaussians
    xs, xt = xs[:400], xt[:400]
    m = EntropicMap(epsilon=0.05, standardize=False, dtype="float64", tol=1e-6).fit(xs, xt)
    a = np.full(len(xs), 1 / len(xs))
    plan = ot.sinkhorn(
        a,
        a,
        ot.dist(xs, xt),
        m.epsilon_abs_,
        method="sinkhorn_log",
        stopThr=1e-11,
        numItermax=20000,
    )
    bary = (plan / plan.sum(1, keepdims=True)) @ xt
    assert np.abs(m.transform(xs) - bary).max() < 1e-3
    assert m.marginal_error_ < 1e-6


def test_float32_matches_float64(gaussians):
    xs, xt = gaussians
    m32 = EntropicMap(epsilon=0.05).fit(xs, xt)
    m64 = EntropicMap(epsilon=0.05, dtype="float64").fit(xs, xt)
    assert np.abs(m32.transform(xs) - m64.transform(xs)).max() < 1e-3


def test_recovers_gaussian_ot_map(gaussians):
    """Between Gaussians the OT map is affine and known in closed form (Knott-Smith): here
    T(x) = m_t + diag(1.5, 0.7) x. The entropic estimate with small ε is within a few percent of
    the target variance (L2-UVP) on held-out points; the closed-form linear map is far closer."""
    xs, xt = gaussians
    rng = np.random.default_rng(1)
    q = rng.normal(size=(500, 2)) * 0.8
    truth = q * np.array([1.5, 0.7]) + np.array([1.0, -2.0])
    m = EntropicMap(epsilon=0.01).fit(xs, xt)
    uvp = 100 * ((m.transform(q) - truth) ** 2).sum(1).mean() / xt.var(0).sum()
    assert uvp < 3.0
    lin = LinearOTMap().fit(xs, xt)
    assert 100 * ((lin.transform(q) - truth) ** 2).sum(1).mean() / xt.var(0).sum() < 1.0


def test_epsilon_selected_on_held_out_data(gaussians):
    xs, xt = gaussians
    m = EntropicMap(epsilon_grid=(0.01, 0.03, 0.3)).fit(xs, xt)
    assert set(m.epsilon_scores_) == {0.01, 0.03, 0.3}
    best = min(m.epsilon_scores_, key=m.epsilon_scores_.get)
    assert m.epsilon_ == best
    # ε = 0.3·median blurs the map: its held-out energy distance is the worst
    assert m.epsilon_scores_[0.3] > min(m.epsilon_scores_[0.01], m.epsilon_scores_[0.03])
    assert m.epsilon_abs_ == pytest.approx(m.epsilon_ * m.median_cost_)


def test_non_converging_sinkhorn_raises_naming_epsilon(gaussians):
    xs, xt = gaussians
    with pytest.raises(TransportConvergenceError, match=r"epsilon=0\.001"):
        EntropicMap(epsilon=0.001, max_iter=20).fit(xs, xt)
    with pytest.raises(TransportConvergenceError, match="any epsilon"):
        EntropicMap(epsilon_grid=(0.001,), max_iter=20).fit(xs, xt)


def test_small_epsilon_stays_finite_with_absorption(gaussians):
    """ε = 0.003·median underflows a plain float32 kernel (max C/ε ≫ 80); the stabilized
    iterations converge to finite potentials and a finite map."""
    xs, xt = gaussians
    m = EntropicMap(epsilon=0.003, max_iter=20000).fit(xs[:300], xt[:300])
    assert np.isfinite(m.potential_).all()
    assert np.isfinite(m.transform(xs)).all()


def test_out_of_distribution_guard(gaussians):
    xs, xt = gaussians
    m = EntropicMap(epsilon=0.03).fit(xs, xt)
    far = np.array([[40.0, 40.0], [-30.0, 5.0]])
    assert m.ood_mask(far).all()
    out = m.transform(far)
    assert np.isfinite(out).all()  # POT's transform returns NaN here
    fresh = np.random.default_rng(5).normal(size=(2000, 2))
    # ~1% by construction (99th percentile); 3% leaves room for threshold noise (n = 800)
    assert m.ood_mask(fresh).mean() < 0.03


@pytest.mark.parametrize(
    ("source", "match"),
    [
        (np.array([[0.0, np.nan]] + [[1.0, 2.0]] * 20), "missing or infinite"),
        (np.c_[np.arange(21.0), np.ones(21)], "constant"),
        (np.ones((5, 2)), "at least min_samples"),
        (np.ones((3, 2, 2)), "2-D"),
    ],
)
def test_bad_input(source, match):
    xt = np.random.default_rng(0).normal(size=(30, 2))
    if "constant" in match:
        xt = np.c_[np.arange(30.0), np.ones(30)]
    with pytest.raises(DataContractError, match=match):
        EntropicMap(epsilon=0.1).fit(source, xt)


def test_non_numeric_dataframe_and_dimension_mismatch():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=30), "b": ["x"] * 30})
    with pytest.raises(DataContractError, match=r"\['b'\].*not numeric"):
        EntropicMap().fit(df, df)
    m = EntropicMap(epsilon=0.1).fit(rng.normal(size=(30, 2)), rng.normal(size=(30, 2)))
    with pytest.raises(DataContractError, match="fitted on 2"):
        m.transform(rng.normal(size=(4, 3)))
    with pytest.raises(FairEngineError, match="not fitted"):
        EntropicMap().transform(np.zeros((2, 2)))
    with pytest.raises(DataContractError, match="epsilon"):
        EntropicMap(epsilon=-1.0).fit(rng.normal(size=(30, 2)), rng.normal(size=(30, 2)))
