"""run_individual_fairness: the audit entry point, its result contract and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_maity_simulation
from fairengine.errors import ConfigError, DataContractError, ModelLoadError
from fairengine.individual import IndividualConfig, run_individual_fairness
from fairengine.individual.result import (
    DivergedAttackDetails,
    IndividualFairnessDetails,
    SensitiveSubspaceProvenance,
)
from fairengine.roles import ColumnRoles

FAST = {"steps": 60, "num_threads": 1, "device": "cpu"}


def _sim(n: int = 600, seed: int = 4) -> tuple[AuditDataset, pd.DataFrame]:
    ds = make_maity_simulation(n=n, seed=seed)
    return AuditDataset.from_frame(ds.frame, ds.roles), ds.frame


def test_unfair_model_rejected_fair_model_not() -> None:
    """On the 2-D simulation a model using x1 (the group direction) is rejected; one using only
    x2 is not. The learned sensitive-subspace metric finds x1 from the group labels."""
    ad, frame = _sim()
    X = frame[["x1", "x2"]]
    noise = np.random.default_rng(0).normal(0, 0.3, len(X))
    unfair = LogisticRegression().fit(X, (X.x1 + 0.3 * X.x2 + noise > -1.5).astype(int))
    fair = LogisticRegression().fit(X, (X.x2 + noise > 0).astype(int))
    res_u = run_individual_fairness(ad, IndividualConfig(**FAST), model=unfair)
    res_f = run_individual_fairness(ad, IndividualConfig(**FAST), model=fair)
    assert res_u.status == res_f.status == "ok"
    lb_u = {f.key: f for f in res_u.findings}["individual.loss_ratio_lb"].estimate
    lb_f = {f.key: f for f in res_f.findings}["individual.loss_ratio_lb"].estimate
    assert lb_u > 1.25 > lb_f
    f = {x.key: x for x in res_u.findings}["individual.loss_ratio"]
    assert f.pvalue < 0.05 and f.interval is not None and f.null_hypothesis
    assert f.decision == "not_tested" and f.adjusted_pvalue is None  # the audit decides
    text = json.dumps(res_u.to_dict(), allow_nan=False)
    assert len(text) < 200_000
    d = res_u.details
    assert isinstance(d, IndividualFairnessDetails)
    assert d.lower_bound_by_steps[-1].step == 60
    assert d.lower_bound_by_steps[-1].lower_bound == pytest.approx(lb_u)
    assert len(d.top_points) == 10 and set(d.top_points[0].original) == {"x1", "x2"}
    assert d.ratio_histogram is not None
    assert sum(d.ratio_histogram.counts) + d.ratio_histogram.n_above == 600
    assert d.metric.metric == "sensitive_subspace"


def test_pipeline_with_onehot_simplex_and_protected_feature() -> None:
    rng = np.random.default_rng(0)
    n = 500
    frame = pd.DataFrame(
        {
            "income": rng.normal(0, 1, n),
            "job": rng.choice(["a", "b", "c"], n),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    frame["y"] = (frame.income + (frame.sex == "m") + rng.normal(0, 1, n) > 0.5).astype(int)
    feats = ["income", "job", "sex"]
    pipe = make_pipeline(
        ColumnTransformer(
            [("n", StandardScaler(), ["income"]), ("c", OneHotEncoder(), ["job", "sex"])]
        ),
        LogisticRegression(),
    ).fit(frame[feats], frame.y)
    ad = AuditDataset.from_frame(frame, ColumnRoles("y", ("sex",), features=tuple(feats)))
    cfg = IndividualConfig(
        domain="simplex", immutable_features=["income"], lam=5.0, eta=0.05, steps=100,
        num_threads=1, device="cpu",
    )  # fmt: skip
    res = run_individual_fairness(ad, cfg, model=pipe)
    assert res.status == "ok"
    assert any("also model features" in w for w in res.warnings)
    d = res.details
    assert isinstance(d, IndividualFairnessDetails)
    assert isinstance(d.metric, SensitiveSubspaceProvenance)
    assert d.metric.protected_axes  # sex's one-hot columns are free to move
    top = d.top_points[0]
    assert top.original["income"] == pytest.approx(top.mapped["income"])
    assert top.mapped["job"] in {"a", "b", "c"}
    assert d.model.max_abs_proba_difference is not None
    assert d.model.max_abs_proba_difference < 1e-10
    # the model uses sex directly: changing it is free, so the test must reject
    assert d.loss_ratio.lower_bound > 1.25


def test_not_run_and_model_errors() -> None:
    ad, frame = _sim(100)
    assert run_individual_fairness(ad, IndividualConfig(), model=None).status == "not_run"
    off = run_individual_fairness(ad, IndividualConfig(enabled=False), model=object())
    assert off.status == "not_run"
    tree = HistGradientBoostingClassifier(max_iter=5).fit(frame[["x1", "x2"]], frame.y)
    with pytest.raises(ModelLoadError, match="black_box"):
        run_individual_fairness(ad, IndividualConfig(**FAST), model=tree)
    res = run_individual_fairness(
        ad, IndividualConfig(black_box="smoothed", smoothing_samples=4, steps=5), model=tree
    )
    assert res.status == "ok" and isinstance(res.details, IndividualFairnessDetails)
    assert not res.details.model.exact
    assert any("approximate" in w for w in res.warnings)
    # transfer attack: surrogate fitted on held-out rows, black-box losses on the others
    cfg = IndividualConfig(black_box="surrogate", steps=10, num_threads=1, device="cpu")
    sur = run_individual_fairness(ad, cfg, model=tree)
    assert sur.status == "ok" and isinstance(sur.details, IndividualFairnessDetails)
    assert sur.details.n_audited == 50
    assert "surrogate" in sur.details.model.description


def test_nan_features_rejected() -> None:
    _, frame = _sim(100)
    frame = frame.copy()
    frame.loc[3, "x2"] = np.nan
    ad = AuditDataset.from_frame(frame, make_maity_simulation(n=10).roles)
    model = LogisticRegression().fit(frame[["x1", "x2"]].fillna(0), frame.y)
    with pytest.raises(DataContractError, match="x2"):
        run_individual_fairness(ad, IndividualConfig(**FAST), model=model)


def test_diverging_attack_fails_with_reason() -> None:
    ad, frame = _sim(100)
    model = LogisticRegression().fit(frame[["x1", "x2"]], frame.y)
    res = run_individual_fairness(ad, IndividualConfig(eta=0.1, lam=50.0, **FAST), model=model)
    assert res.status == "failed" and "diverged" in res.reason and "eta" in res.reason
    assert isinstance(res.details, DivergedAttackDetails)
    assert res.details.attack.lam == 50.0 and res.details.attack.max_eta_lambda_sigma >= 1


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"delta": 0}, "methods.individual_fairness.delta"),
        ({"alpha": 1.0}, "methods.individual_fairness.alpha"),
        ({"metric": "cosine"}, "methods.individual_fairness.metric"),
        ({"steps": 0}, "methods.individual_fairness.steps"),
        ({"eta": -0.1}, "methods.individual_fairness.eta"),
        ({"domain": "ball"}, "methods.individual_fairness.domain"),
        ({"black_box": "yes"}, "methods.individual_fairness.black_box"),
        ({"ddof": 3}, "methods.individual_fairness.ddof"),
        ({"dtype": "float16"}, "methods.individual_fairness.dtype"),
        ({"max_rows": 1}, "methods.individual_fairness.max_rows"),
        ({"device": "gpu"}, "methods.individual_fairness.device"),
    ],
)
def test_config_validation(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        IndividualConfig(**kwargs)


def test_metric_options() -> None:
    ad, frame = _sim(300)
    model = LogisticRegression().fit(frame[["x1", "x2"]], frame.y)
    for metric, params in [
        ("discounted_directions", {"directions": [[1.0, 0.0]]}),
        ("mahalanobis", {"sigma": [[0.0, 0.0], [0.0, 1.0]]}),
        ("svd", {"n_components": 1}),
        ("explore", {"n_iter": 50, "n_comparable": 200, "n_incomparable": 100}),
    ]:
        lam = 1.0 if metric == "explore" else 50.0  # EXPLORE's Σ is not normalised
        res = run_individual_fairness(
            ad, IndividualConfig(metric=metric, metric_params=params, lam=lam, **FAST), model=model
        )
        assert res.status == "ok", metric
    holdout = run_individual_fairness(
        ad, IndividualConfig(metric_fit="holdout", **FAST), model=model
    )
    assert isinstance(holdout.details, IndividualFairnessDetails)
    assert holdout.details.n_audited == 150
    with pytest.raises(ConfigError, match=r"unknown methods\.individual_fairness\.metric_params"):
        run_individual_fairness(
            ad, IndividualConfig(metric_params={"Cee": 1.0}, **FAST), model=model
        )
    with pytest.raises(ConfigError, match="metric_params"):  # sklearn rejects l1 with lbfgs
        run_individual_fairness(
            ad, IndividualConfig(metric_params={"penalty": "l1"}, **FAST), model=model
        )
    with pytest.raises(ConfigError, match="group_column"):
        run_individual_fairness(ad, IndividualConfig(metric="face", **FAST), model=model)


def test_float32_attack_agrees_with_float64() -> None:
    ad, frame = _sim(300)
    model = LogisticRegression().fit(frame[["x1", "x2"]], frame.y)
    r64 = run_individual_fairness(ad, IndividualConfig(**FAST), model=model)
    r32 = run_individual_fairness(ad, IndividualConfig(dtype="float32", **FAST), model=model)
    assert isinstance(r64.details, IndividualFairnessDetails)
    assert isinstance(r32.details, IndividualFairnessDetails)
    lb64 = r64.details.loss_ratio.lower_bound
    assert r32.details.loss_ratio.lower_bound == pytest.approx(lb64, rel=1e-4)
    assert r32.details.attack.dtype == "float32"
