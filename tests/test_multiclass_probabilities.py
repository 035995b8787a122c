"""A multiclass audit from class probabilities (issue "Beyond binary classifiers": "scores: a
probability per class, or predicted classes"): ``columns.class_scores`` names one probability
column per class, a model with ``predict_proba`` gives its matrix beside its predicted classes,
a pyfunc logged to serve ``predict_proba`` is read as probabilities with their most probable
class, and ``methods.multiclass_metrics.probabilities: expected`` reads expected counts.

Independent checks: the per-group expected selection rate is the mean probability of the class
in the group (a pandas ``groupby``); one-hot probabilities give the hard-count estimates; the
matrix the audit holds equals scikit-learn's ``predict_proba``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import fairengine
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.method import run_multiclass_metrics
from fairengine.roles import ColumnRoles

CLASSES = ("High", "Low", "Medium")  # the label's classes in code (sorted) order


def _table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    """Three classes whose probabilities depend on a feature and (shifted) on the group."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    logits = np.column_stack([x + 0.4 * (g == "a"), np.zeros(n), -x])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array(CLASSES)[[rng.choice(3, p=row) for row in p]]
    return pd.DataFrame(
        {"x": x, "g": g, "y": y, "p_high": p[:, 0], "p_low": p[:, 1], "p_med": p[:, 2]}
    )


SCORES = {"High": "p_high", "Low": "p_low", "Medium": "p_med"}


def _dataset(df: pd.DataFrame, scores: object = SCORES, **roles: object) -> AuditDataset:
    r = ColumnRoles(label="y", protected=("g",), class_scores=scores, **roles)  # type: ignore[arg-type]
    return AuditDataset.from_frame(df, r, task="multiclass")


def test_class_scores_give_the_matrix_in_class_order_and_the_argmax() -> None:
    df = _table()
    ds = _dataset(df, {"Medium": "p_med", "High": "p_high", "Low": "p_low"})  # any order
    assert ds.classes == CLASSES
    assert ds.class_probability is not None
    np.testing.assert_array_equal(ds.class_probability, df[["p_high", "p_low", "p_med"]])
    np.testing.assert_array_equal(ds.prediction, np.argmax(df[["p_high", "p_low", "p_med"]], 1))
    assert "p_high" not in ds.feature_columns  # a probability column is no model input


def test_a_predicted_class_column_stays_the_prediction() -> None:
    df = _table()
    df["pred"] = "Low"
    df.loc[:10, "pred"] = "High"
    ds = _dataset(df, score="pred")
    assert ds.class_probability is not None
    assert (ds.prediction == 1).sum() == len(df) - 11  # the column's classes, not the argmax


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d, s: s.pop("Low"), "no column for class(es) ['Low']"),
        (lambda d, s: s.update(Extra="p_low2"), "['Extra'] that the label never takes"),
        (lambda d, s: d.__setitem__("p_med", d["p_med"] + 0.01), "must sum to 1 in every row"),
        (lambda d, s: d.__setitem__("p_low", d["p_low"] * np.nan), "'p_low' (class 'Low') has"),
        (lambda d, s: d.__setitem__("p_high", "x"), "'p_high' (class 'High') must be numeric"),
    ],
)
def test_bad_class_scores_name_the_column_and_class(change, message) -> None:
    df, scores = _table(200), dict(SCORES)
    df["p_low2"] = df["p_low"]
    change(df, scores)
    with pytest.raises(DataContractError, match=re.escape(message)):
        _dataset(df, scores)


def test_class_scores_belong_to_multiclass_audits() -> None:
    raw = {"task": "binary", "columns": {"label": "y", "protected": ["g"],
           "class_scores": {"a": "p"}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"columns.class_scores .* applies to task: multiclass"):
        AuditConfig.from_dict(raw).roles()
    with pytest.raises(DataContractError, match=r"names class\(es\) \['a'\] twice"):
        ColumnRoles(label="y", protected=("g",), class_scores=(("a", "p"), ("a", "q")))
    with pytest.raises(DataContractError, match="more than one role"):
        ColumnRoles(label="y", protected=("g",), class_scores={"a": "g"})


def test_expected_counts_are_the_groups_mean_probabilities() -> None:
    df = _table(3000, seed=4)
    ds = _dataset(df)
    res = run_multiclass_metrics(ds, MulticlassConfig(probabilities="expected", n_permutations=99))
    assert res.details.probabilities == "expected"  # type: ignore[union-attr]
    got = {f.key: f.estimate for f in res.findings}
    truth = df.groupby("g")[["p_high", "p_low", "p_med"]].mean()
    for cls, column in SCORES.items():
        for g in "abc":
            key = f"mc_group_selection.{cls}.g.{g}"
            assert got[key] == pytest.approx(truth.loc[g, column], abs=1e-12)
    hard = run_multiclass_metrics(ds, MulticlassConfig(n_permutations=99))
    assert hard.details.probabilities == "argmax"  # type: ignore[union-attr]
    counts = pd.crosstab(df.g, np.array(CLASSES)[ds.prediction], normalize="index")
    assert {f.key: f.estimate for f in hard.findings}["mc_group_selection.High.g.b"] == (
        pytest.approx(counts.loc["b", "High"], abs=1e-12)
    )


def test_one_hot_probabilities_read_as_expected_counts_equal_hard_counts() -> None:
    df = _table(1500, seed=7)
    top = np.argmax(df[["p_high", "p_low", "p_med"]].to_numpy(), axis=1)
    for k, column in enumerate(["p_high", "p_low", "p_med"]):
        df[column] = (top == k).astype(float)
    ds = _dataset(df)
    cfg = {"n_permutations": 99, "distance_tests": False}
    soft = run_multiclass_metrics(ds, MulticlassConfig(probabilities="expected", **cfg))
    hard = run_multiclass_metrics(ds, MulticlassConfig(**cfg))
    a = {f.key: f.estimate for f in soft.findings if f.key.startswith("mc_group_")}
    b = {f.key: f.estimate for f in hard.findings if f.key.startswith("mc_group_")}
    assert a.keys() == b.keys() and len(a) > 0
    assert all(a[k] == pytest.approx(b[k], abs=1e-12) for k in a)


def test_expected_without_probabilities_names_the_setting() -> None:
    df = _table(300)
    ds = AuditDataset.from_frame(
        df.assign(pred="Low"), ColumnRoles(label="y", protected=("g",), score="pred"),
        task="multiclass",
    )  # fmt: skip
    with pytest.raises(DataContractError, match=r"multiclass_metrics.probabilities: expected"):
        run_multiclass_metrics(ds, MulticlassConfig(probabilities="expected"))
    with pytest.raises(ConfigError, match="probabilities must be one of"):
        MulticlassConfig(probabilities="soft")


def test_a_model_with_predict_proba_gives_its_probabilities(session_tmp: Path) -> None:
    df = _table(900, seed=3)
    model = LogisticRegression(max_iter=500).fit(df[["x"]], df["y"])
    res = fairengine.audit(
        df[["x", "g", "y"]], label="y", protected=["g"], model=model, task="multiclass",
        methods={"multiclass_metrics": {"n_permutations": 99, "probabilities": "expected"}},
        output={"dir": str(session_tmp / "mc-proba-object")},
    )  # fmt: skip
    assert "class probabilities from predict_proba" in (res.model.score_description or "")
    proba = model.predict_proba(df[["x"]])
    got = {f.key: f.estimate for f in res.findings()}
    in_a = df.g.to_numpy() == "a"
    for k, cls in enumerate(model.classes_):
        assert got[f"mc_group_selection.{cls}.g.a"] == pytest.approx(
            proba[in_a, k].mean(), abs=1e-12
        )


def test_a_pyfunc_serving_predict_proba_is_read_as_probabilities(session_tmp: Path) -> None:
    import mlflow

    df = _table(900, seed=5)
    model = LogisticRegression(max_iter=500).fit(df[["x"]], df["y"])
    client = mlflow.MlflowClient()  # the session's store (conftest), artifacts under tmp
    exp = client.create_experiment(
        "mc-proba-train", artifact_location=(session_tmp / "mc-proba-art").as_uri()
    )
    with mlflow.start_run(experiment_id=exp):
        info = mlflow.sklearn.log_model(
            model, name="m", input_example=df[["x"]].head(), pyfunc_predict_fn="predict_proba"
        )
    res = fairengine.audit(
        df[["x", "g", "y"]], label="y", protected=["g"], model=info.model_uri,
        task="multiclass", output={"dir": str(session_tmp / "mc-proba-pyfunc")},
        methods={"multiclass_metrics": {"n_permutations": 99}, "fliptest": {
            "enabled": True, "n_permutations": 19, "n_selfmap": 19, "n_bootstrap": 19,
            "max_per_group": 150}},
    )  # fmt: skip
    assert "class probabilities (3 columns)" in (res.model.score_description or "")
    statuses = {m.method: m.status for m in res.methods}
    assert statuses["fliptest"] == "ok", res.method("fliptest").reason  # on the argmax classes
    predicted = model.classes_[np.argmax(model.predict_proba(df[["x"]]), axis=1)]
    got = {f.key: f.estimate for f in res.findings()}
    in_b = df.g.to_numpy() == "b"
    assert got["mc_group_selection.Medium.g.b"] == pytest.approx(
        (predicted[in_b] == "Medium").mean(), abs=1e-12
    )
