"""Individual fairness for regression models (squared loss) and multiclass classifiers
(softmax cross-entropy) (issue 22; ``fairengine/individual/task_models.py``): the losses and
their gradients against closed forms and direct numpy computations, the exact conversions of
scikit-learn models (and what is not applicable), and the test on a model blind to the
protected attribute against one that reads a proxy of it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

import fairengine.registry  # noqa: F401 (registers every method's details type)
from fairengine.dataset import AuditDataset
from fairengine.datasets import make_proxy_shift
from fairengine.errors import ModelLoadError
from fairengine.individual import run_individual_fairness
from fairengine.individual.config import IndividualConfig
from fairengine.individual.task_models import TorchTaskModel, class_order, task_model
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles

COLS = ["x0", "x1", "x2"]


def _regression_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 3.0 + rng.normal(scale=0.5, size=n)
    return pd.DataFrame(x, columns=COLS).assign(y=y)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.array(a, dtype=np.float64))  # a writable copy


# ------------------------------------------------------------------------- squared loss
@pytest.mark.parametrize("estimator", [LinearRegression(), Ridge(alpha=3.0)])
def test_the_squared_loss_ratio_of_a_linear_model_has_its_closed_form(estimator) -> None:
    """f(x) = wᵀx + b, r = f(x) − y: moving x by t·u gives the loss (r + t wᵀu)², so along a
    fair direction (wᵀu = 0) the loss ratio is exactly 1 and along u = w/|w| it is
    (r + t|w|)²/r²; the x-gradient of the loss is 2 r w."""
    df = _regression_frame()
    model = estimator.fit(df[COLS], df["y"])
    adapter = task_model(model, COLS, "regression")
    assert adapter.exact and "exact linear layer" in adapter.description
    assert adapter.verify(df[COLS], atol=1e-9) < 1e-9
    clf = adapter.classifier
    X, y = df[COLS].to_numpy(), df["y"].to_numpy()
    w, r = model.coef_, model.predict(df[COLS]) - y
    loss0 = clf.loss(_t(X), _t(y)).numpy()
    np.testing.assert_allclose(loss0, r**2, rtol=1e-12)
    fair = np.cross(w, [0.0, 0.0, 1.0])  # w·fair = 0
    for t in (0.5, 3.0):
        moved = clf.loss(_t(X + t * fair), _t(y)).numpy()
        np.testing.assert_allclose(moved / loss0, 1.0, rtol=1e-9)
        along = clf.loss(_t(X + t * w / np.linalg.norm(w)), _t(y)).numpy()
        np.testing.assert_allclose(
            along / loss0, (r + t * np.linalg.norm(w)) ** 2 / r**2, rtol=1e-9
        )
    _, grad = clf.loss_and_grad(_t(X), _t(y))
    np.testing.assert_allclose(grad.numpy(), 2 * r[:, None] * w[None, :], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("free", ["fair", "along_w"])
def test_the_attack_on_a_linear_regressor_has_a_closed_form(free: str) -> None:
    """The attack's Euler step d <- d + η(2 r w − 2λΣd) on f(x) = wᵀx + b is linear in the
    residual r0: d_k = r0 v_k with v_{k+1} = v_k + η(2(1 + wᵀv_k) w − 2λΣ v_k), v_0 = 0, so
    every row ends with residual r0 (1 + wᵀv_T) and the same squared-loss ratio
    (1 + wᵀv_T)². Σ = I − u uᵀ leaves u free: a fair direction (wᵀu = 0, the model does not
    change along it; the attack pays for every move that changes f) or one along w (free
    gains: a far larger ratio). With u fair the flow's fixed point gives the ratio
    (λ / (λ − |w|²))² in closed form."""
    from fairengine.individual.attack import gradient_flow
    from fairengine.individual.fair_metric import MahalanobisMetric

    df = _regression_frame(n=200, seed=4)
    model = LinearRegression().fit(df[COLS], df["y"])
    w = model.coef_
    u = np.cross(w, [0.0, 0.0, 1.0]) if free == "fair" else w + np.array([0.3, 0.0, 0.0])
    u = u / np.linalg.norm(u)
    sigma = np.eye(3) - np.outer(u, u)
    X, y = df[COLS].to_numpy(), df["y"].to_numpy()
    adapter = task_model(model, COLS, "regression")
    lam, eta, steps = 50.0, 0.01, 60  # the defaults λ, η; λ > |w|² keeps costly moves bounded
    metric = MahalanobisMetric(sigma).fit(X)
    flow = gradient_flow(adapter.classifier, X, y, metric, lam=lam, eta=eta, steps=steps)
    v = np.zeros(3)
    for _ in range(steps):
        v = v + eta * (2 * (1 + w @ v) * w - 2 * lam * sigma @ v)
    r0 = model.predict(df[COLS]) - y
    growth = (1 + w @ v) ** 2
    np.testing.assert_allclose(flow.loss_original, r0**2, rtol=1e-10)
    np.testing.assert_allclose(flow.loss_mapped, r0**2 * growth, rtol=1e-8)
    np.testing.assert_allclose(flow.X - X, r0[:, None] * v[None, :], rtol=1e-8, atol=1e-12)
    if free == "fair":
        # only costly moves change f: the flow settles at v = (1 + wᵀv) w / λ, so the ratio is
        # (λ / (λ − |w|²))² for every row (λ > |w|²; here 60 steps converge to 1e-40)
        assert abs(w @ u) < 1e-12
        assert growth == pytest.approx((lam / (lam - w @ w)) ** 2, rel=1e-9)
    else:
        assert growth > 10.0  # a free direction that changes f: the loss explodes


def test_a_pipeline_and_a_torch_module_are_differentiated_in_their_input_space() -> None:
    df = _regression_frame(seed=1)
    pipe = make_pipeline(StandardScaler(), Ridge()).fit(df[COLS], df["y"])
    adapter = task_model(pipe, COLS, "regression")
    assert adapter.verify(df[COLS], atol=1e-9) < 1e-9 and adapter.kind == "Pipeline[Ridge]"
    lin = nn.Linear(3, 1).double()
    adapter = task_model(lin, COLS, "regression")
    X = _t(df[COLS].to_numpy())
    with torch.no_grad():
        expected = lin(X)[:, 0]
    assert torch.allclose(adapter.classifier.proba(X), expected)


# ------------------------------------------------------------------------- cross-entropy
def _multiclass_frame(n: int = 600, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    t = x @ np.array([1.0, -1.0, 0.3]) + rng.normal(scale=0.7, size=n)
    y = np.array(["low", "mid", "top"])[np.digitize(t, [-0.6, 0.6])]
    return pd.DataFrame(x, columns=COLS).assign(y=y)


def test_the_softmax_cross_entropy_equals_a_direct_numpy_computation() -> None:
    """For a multinomial LogisticRegression the loss is −log p_y with p = predict_proba, and its
    x-gradient Wᵀ(p − e_y) (W the K × d coefficients): both from numpy, in the audit's class
    order."""
    df = _multiclass_frame()
    model = LogisticRegression(max_iter=1000).fit(df[COLS], df["y"])
    classes = ("low", "mid", "top")
    adapter = task_model(model, COLS, "multiclass", classes)
    assert adapter.verify(df[COLS], atol=1e-9) < 1e-9
    X = df[COLS].to_numpy()
    codes = pd.Series(df["y"]).map({c: i for i, c in enumerate(classes)}).to_numpy()
    p = model.predict_proba(df[COLS])  # classes_ sorted as `classes`
    loss, grad = adapter.classifier.loss_and_grad(_t(X), _t(codes))
    rows = np.arange(len(X))
    np.testing.assert_allclose(loss.numpy(), -np.log(p[rows, codes]), rtol=1e-10)
    onehot = np.eye(3)[codes]
    np.testing.assert_allclose(grad.numpy(), (p - onehot) @ model.coef_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(adapter.classifier.proba(_t(X)).numpy(), p, atol=1e-12)


def test_the_logits_follow_the_audits_class_order() -> None:
    """A model whose ``classes_`` are in another order than the audit's classes is reordered:
    the module's column k is the probability of the audit's class k."""
    df = _multiclass_frame(seed=3)
    model = LogisticRegression(max_iter=1000).fit(df[COLS], df["y"])
    order = ("top", "low", "mid")
    adapter = task_model(model, COLS, "multiclass", order)
    got = adapter.classifier.proba(_t(df[COLS].to_numpy())).numpy()
    np.testing.assert_allclose(got, model.predict_proba(df[COLS])[:, [2, 0, 1]], atol=1e-12)
    assert class_order(["a", "b", "c"], ("c", "a"), "m") == [2, 0]
    with pytest.raises(ModelLoadError, match=r"without \['d'\]"):
        class_order(["a", "b"], ("a", "d"), "m")
    module = nn.Linear(3, 3).double()
    tm = TorchTaskModel(module, "multiclass")
    y = torch.as_tensor([0, 2, 1])
    X = _t(np.random.default_rng(0).normal(size=(3, 3)))
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(module(X), y, reduction="none")
    assert torch.allclose(tm.loss(X, y), expected)


# ------------------------------------------------------------------------- not applicable
def _dataset(df: pd.DataFrame, task: str) -> AuditDataset:
    frame = df.assign(g=np.where(df["x0"] > 0, "u", "v"))
    return AuditDataset.from_frame(frame, ColumnRoles("y", ("g",), features=tuple(COLS)), task=task)


def test_models_without_an_exact_conversion_are_not_applicable_with_the_reason() -> None:
    df = _regression_frame()
    forest = RandomForestRegressor(n_estimators=3, random_state=0).fit(df[COLS], df["y"])
    res = run_individual_fairness(_dataset(df, "regression"), IndividualConfig(), model=forest)
    assert res.status == "not_run"
    assert res.reason.startswith("not applicable to this regression model: RandomForestRegressor")
    mc = _multiclass_frame()
    ovr = OneVsRestClassifier(LogisticRegression()).fit(mc[COLS], mc["y"])
    res = run_individual_fairness(_dataset(mc, "multiclass"), IndividualConfig(), model=ovr)
    assert res.status == "not_run"
    assert res.reason.startswith("not applicable to this multiclass model: OneVsRestClassifier")


# ------------------------------------------------------------------------- the test
def _group_design(
    kind: str, task: str, seed: int = 0, n: int = 1200
) -> tuple[AuditDataset, object]:
    """x0 carries the group (mean 1 higher in b), x1 does not; the target is x1 + noise
    (``blind``: the fitted model ignores x0) or x0 + x1 + noise (``proxy``)."""
    rng = np.random.default_rng(seed)
    g = rng.random(n) < 0.4
    x0, x1 = rng.normal(size=n) + g, rng.normal(size=n)
    t = x1 + (x0 if kind == "proxy" else 0.0) + 0.5 * rng.normal(size=n)
    y = t if task == "regression" else np.array(["a", "b", "c"])[np.digitize(t, [-0.5, 0.5])]
    df = pd.DataFrame({"g": np.where(g, "b", "a"), "x0": x0, "x1": x1, "y": y})
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",), features=("x0", "x1")), task=task)
    model = LinearRegression() if task == "regression" else LogisticRegression(max_iter=1000)
    return ds, model.fit(df[["x0", "x1"]], y)


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_a_blind_model_passes_and_a_proxy_model_fails(task: str) -> None:
    """With the learned sensitive subspace (the direction that predicts the group, about x0) the
    attack moves freely along x0: a model that ignores x0 keeps its loss (mean ratio near 1, not
    rejected at δ = 1.25), a model that reads x0 loses a lot (rejected). A regression audit has
    no error-rate test."""
    cfg = IndividualConfig()
    ds, blind = _group_design("blind", task)
    res = run_individual_fairness(ds, cfg, model=blind)
    assert res.status == "ok", res.reason
    got = {f.key: f for f in res.findings}
    assert got["individual.loss_ratio"].estimate < 1.25
    assert got["individual.loss_ratio"].pvalue > 0.05
    assert ("individual.error_rate_ratio" in got) == (task == "multiclass")
    ds, proxy = _group_design("proxy", task)
    res = run_individual_fairness(ds, cfg, model=proxy)
    got = {f.key: f for f in res.findings}
    assert got["individual.loss_ratio_lb"].estimate > 1.25
    assert got["individual.loss_ratio"].pvalue < 1e-6
    d = res.details
    assert d.task == task and d.error_rate_ratio.enabled == (task == "multiclass")
    assert d.loss == {"regression": "squared loss", "multiclass": "cross-entropy (softmax)"}[task]
    if task == "regression":
        assert d.label_flip_rate is None and isinstance(d.top_points[0].label, float)
        assert all(g.error_rate_original is None for g in d.per_group["g"])
    else:
        assert 0 < d.label_flip_rate < 1 and d.top_points[0].label in ("a", "b", "c")
    back = MethodResult.from_dict(json.loads(json.dumps(res.to_dict(), allow_nan=False)))
    assert back.details == res.details


def test_the_proxy_shift_examples_run() -> None:
    for task in ("regression", "multiclass"):
        data = make_proxy_shift(task, n=800, seed=1)
        df = data.frame
        model = LinearRegression() if task == "regression" else LogisticRegression(max_iter=500)
        model.fit(df[["x1", "x2"]], df["y"])
        ds = AuditDataset.from_frame(df, data.roles, task=task)
        res = run_individual_fairness(ds, IndividualConfig(), model=model)
        assert res.status == "ok"
        assert res.findings[0].key == "individual.loss_ratio"
