"""sklearn -> torch conversions checked against predict_proba, gradients against finite
differences of predict_proba, black-box gradients, MLflow-pyfunc-like unwrapping."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from fairengine.errors import ModelLoadError
from fairengine.individual import as_differentiable_model


def _table(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.normal(40, 12, n),
            "hours": rng.normal(40, 8, n),
            "job": rng.choice(["a", "b", "c"], n),
            "city": rng.choice(["x", "y"], n),
        }
    )
    logit = 0.05 * (df.age - 40) + 0.08 * (df.hours - 40) + (df.job == "b") - 0.5 * (df.city == "y")
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return df, y


def _grad_check(adapter, frame: pd.DataFrame, y: np.ndarray, proba_encoded) -> None:
    """Torch ∂ℓ/∂x vs central differences of −log p_y from sklearn on the encoded rows."""
    Z = adapter.encode(frame.iloc[:20])
    yy = y[:20]
    _, g = adapter.classifier.loss_and_grad(
        torch.as_tensor(Z), torch.as_tensor(yy, dtype=torch.float64)
    )
    h = 1e-6
    num = np.empty_like(Z)
    for j in range(Z.shape[1]):
        e = np.zeros(Z.shape[1])
        e[j] = h
        lp = -np.log(np.where(yy == 1, proba_encoded(Z + e), 1 - proba_encoded(Z + e)))
        lm = -np.log(np.where(yy == 1, proba_encoded(Z - e), 1 - proba_encoded(Z - e)))
        num[:, j] = (lp - lm) / (2 * h)
    np.testing.assert_allclose(g.numpy(), num, atol=1e-5)


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
def test_mlp_pipeline_matches_predict_proba(activation: str) -> None:
    df, y = _table()
    num = ["age", "hours"]
    pre = ColumnTransformer(
        [("num", StandardScaler(), num), ("cat", OneHotEncoder(drop="first"), ["job", "city"])]
    )
    pipe = make_pipeline(
        pre, MLPClassifier((7, 5), activation=activation, max_iter=300, random_state=0)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(df, y)
    ad = as_differentiable_model(pipe, list(df.columns))
    assert ad.exact and ad.verify(df, atol=1e-10) <= 1e-10
    assert [g.source for g in ad.onehot_groups] == ["job", "city"]
    assert [g.full for g in ad.onehot_groups] == [False, False]  # drop="first"
    assert ad.source_columns[:2] == num
    _grad_check(ad, df, y, lambda Z: pipe[-1].predict_proba(Z)[:, 1])
    back = ad.decode(ad.encode(df.iloc[:5]))
    np.testing.assert_allclose(back[num].to_numpy(float), df[num].iloc[:5].to_numpy(), atol=1e-9)
    assert list(back["job"]) == list(df["job"].iloc[:5])


def test_logistic_regression_and_label_order() -> None:
    df, y = _table()
    X = df[["age", "hours"]]
    lr = LogisticRegression().fit(X, y)
    ad = as_differentiable_model(lr, ["age", "hours"])
    assert ad.verify(X) <= 1e-12
    _grad_check(ad, X, y, lambda Z: lr.predict_proba(pd.DataFrame(Z, columns=X.columns))[:, 1])
    # string classes with the positive label first in classes_
    ys = np.where(y == 1, "bad", "good")  # classes_ = ['bad', 'good']; positive = 'good'
    lr2 = LogisticRegression().fit(X, ys)
    ad2 = as_differentiable_model(lr2, ["age", "hours"], positive_label="good")
    p = ad2.classifier.proba(torch.as_tensor(ad2.encode(X)))
    np.testing.assert_allclose(p.numpy(), lr2.predict_proba(X)[:, 1], atol=1e-12)
    ad3 = as_differentiable_model(lr2, ["age", "hours"], positive_label="bad")
    p3 = ad3.classifier.proba(torch.as_tensor(ad3.encode(X)))
    np.testing.assert_allclose(p3.numpy(), lr2.predict_proba(X)[:, 0], atol=1e-12)


def test_pyfunc_like_wrapper_is_unwrapped() -> None:
    df, y = _table()
    pipe = make_pipeline(
        ColumnTransformer([("n", StandardScaler(), ["age"]), ("c", OneHotEncoder(), ["job"])]),
        LogisticRegression(),
    ).fit(df, y)

    class FakePyFunc:  # mlflow.pyfunc.PyFuncModel exposes get_raw_model()
        def get_raw_model(self):
            return pipe

        def predict(self, frame):
            return pipe.predict(frame)

    ad = as_differentiable_model(FakePyFunc(), list(df.columns))
    assert ad.kind.startswith("Pipeline") and ad.verify(df) <= 1e-12
    assert ad.onehot_groups[0].full and len(ad.onehot_groups[0].columns) == 3


def test_torch_module_and_probability_output() -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.standard_normal((30, 3)), columns=["a", "b", "c"])
    net = torch.nn.Sequential(torch.nn.Linear(3, 2))
    ad = as_differentiable_model(net, list(X.columns))
    Z = torch.as_tensor(X.to_numpy().copy())
    loss = ad.classifier.loss(Z, torch.ones(30, dtype=torch.float64))
    expect = -torch.log_softmax(net.double()(Z), 1)[:, 1]
    np.testing.assert_allclose(loss.numpy(), expect.detach().numpy(), atol=1e-12)
    prob_net = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Sigmoid())
    adp = as_differentiable_model(prob_net, list(X.columns), torch_output="probability")
    p = adp.classifier.proba(Z)
    l0 = adp.classifier.loss(Z, torch.zeros(30, dtype=torch.float64))
    np.testing.assert_allclose(l0.numpy(), -np.log(1 - p.numpy()), atol=1e-12)


def test_black_box_gradients() -> None:
    df, y = _table()
    X = df[["age", "hours"]]
    Xs = (X - X.mean()) / X.std()
    lr = LogisticRegression().fit(Xs.to_numpy(), y)
    exact = as_differentiable_model(lr, list(Xs.columns))
    Z = torch.as_tensor(Xs.to_numpy()[:50].copy())
    yy = torch.as_tensor(y[:50], dtype=torch.float64)
    _, g = exact.classifier.loss_and_grad(Z, yy)
    # finite differences on a smooth model agree with the exact gradient
    hgb = HistGradientBoostingClassifier(max_iter=20).fit(Xs, y)
    with pytest.raises(ModelLoadError, match="black_box"):
        as_differentiable_model(hgb, list(Xs.columns))
    from fairengine.individual import BlackBoxClassifier

    fd = BlackBoxClassifier(lambda A: lr.predict_proba(A)[:, 1], "finite_difference", fd_step=1e-5)
    _, gfd = fd.loss_and_grad(Z, yy)
    np.testing.assert_allclose(gfd.numpy(), g.numpy(), atol=1e-6)
    # Gaussian smoothing: unbiased for the smoothed loss; with many directions close to exact
    zo = BlackBoxClassifier(
        lambda A: lr.predict_proba(A)[:, 1], "smoothed", sigma=1e-3, n_samples=1500, seed=0
    )
    _, gzo = zo.loss_and_grad(Z, yy)
    corr = np.corrcoef(gzo.numpy().ravel(), g.numpy().ravel())[0, 1]
    assert corr > 0.95
    # a tree model through the smoothed option: approximate, but usable
    bb = as_differentiable_model(hgb, list(Xs.columns), black_box="smoothed", smoothing_samples=5)
    assert not bb.exact and "approximate" in bb.description
    loss, grad = bb.classifier.loss_and_grad(Z[:5], yy[:5])
    assert loss.shape == (5,) and grad.shape == (5, 2) and torch.isfinite(grad).all()


def test_unsupported_models() -> None:
    df, y = _table()
    X = df[["age", "hours"]]
    y3 = np.arange(len(y)) % 3
    with pytest.raises(ModelLoadError, match="3 classes"):
        as_differentiable_model(LogisticRegression().fit(X, y3), ["age", "hours"])
    with pytest.raises(ModelLoadError, match="predict_proba"):
        as_differentiable_model(object(), ["age"])
    with pytest.raises(ModelLoadError, match="black_box must be"):
        as_differentiable_model(LogisticRegression().fit(X, y), ["age"], black_box="magic")
