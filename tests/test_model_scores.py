"""The audit's score source: probabilities over labels, the model's signature as its inputs.

Pure rules (:mod:`fairengine.model_scores`) are tested on arrays; the MLflow edge
(:mod:`tasks.model`) on real models logged into the test session's SQLite store and loaded back
with ``mlflow.pyfunc.load_model``; the audit flow end to end on a few of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.models import infer_signature
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError, ModelLoadError
from fairengine.model_scores import (
    Conversion,
    InputColumn,
    ModelInput,
    ScoreSource,
    classify_output,
    label_positive_value,
    match_schema,
    positive_column,
)
from fairengine.permutation.result import PermutationDetails
from fairengine.roles import ColumnRoles
from fairengine.scores import SCORE_TYPES, effective_threshold, positive_prediction

FEATURES = ["x1", "x2", "age"]


def adult_like(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Adult-like synthetic rows: sex, race (3 groups), two scores and an integer age; the
    outcome depends on the features and, through x2, on sex."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n, p=[0.45, 0.55])
    race = rng.choice(["a", "b", "c"], n, p=[0.6, 0.25, 0.15])
    age = rng.integers(18, 80, n).astype(np.int64)
    x1 = rng.normal(size=n)
    x2 = rng.normal(np.where(sex == "male", 0.5, 0.0), 1.0)
    logit = -0.3 + 1.2 * x1 + 0.8 * x2 + 0.03 * (age - 45)
    y = rng.binomial(1, 1 / (1 + np.exp(-logit)))
    return pd.DataFrame({"sex": sex, "race": race, "age": age, "x1": x1, "x2": x2, "y": y})


# --------------------------------------------------------------------------- pure rules
def test_score_type_label_is_a_score_type_with_fixed_threshold() -> None:
    assert "label" in SCORE_TYPES
    assert effective_threshold("label", None) == 0.5 and effective_threshold("label", 1.0) == 0.5
    assert effective_threshold("probability", None) is None
    labels = np.array([0.0, 1.0, 1.0, 0.0])
    # threshold 1.0 would zero every probability, but labels are their own predictions
    np.testing.assert_array_equal(positive_prediction(labels, 1.0, "label"), labels)


def test_dataset_label_scores_must_be_zero_or_one() -> None:
    frame = pd.DataFrame(
        {"y": [0, 1] * 20, "g": ["a"] * 20 + ["b"] * 20, "s": [0.0, 1.0, 1.0, 0.0] * 10}
    )
    roles = ColumnRoles(label="y", protected=("g",), score="s")
    ds = AuditDataset.from_frame(frame, roles, score_type="label", threshold=None)
    assert ds.prediction_mode == "hard" and ds.threshold == 0.5
    np.testing.assert_array_equal(ds.prediction, frame["s"].to_numpy(float))
    frame.loc[3, "s"] = 0.7
    with pytest.raises(DataContractError, match=r"score_type='label'.*neither 0 nor 1.*0\.7"):
        AuditDataset.from_frame(frame, roles, score_type="label")


def test_classify_output_labels_scores_and_shapes() -> None:
    n = 6
    probs = np.array([0.1, 0.4, 0.35, 0.8, 0.9, 0.2])
    out = classify_output(probs, n, score_type="probability", positive_label=1, what="m")
    assert not out.is_labels and out.column is None
    two = classify_output(
        np.column_stack([1 - probs, probs]), n, score_type="probability", positive_label=1,
        what="m",
    )  # fmt: skip
    np.testing.assert_array_equal(two.scores, probs)
    # a DataFrame naming its columns: the positive label's column, wherever it is
    named = pd.DataFrame({"yes": probs, "no": 1 - probs})
    picked = classify_output(named, n, score_type="probability", positive_label="yes", what="m")
    assert picked.column == 0 and picked.column_name == "yes"
    np.testing.assert_array_equal(picked.scores, probs)
    # two raw logits: z1 - z0, whose sigmoid is the softmax probability of class 1
    z = np.column_stack([np.zeros(n), np.log(probs / (1 - probs))])
    raw = classify_output(z + 3.0, n, score_type="raw", positive_label=1, what="m")
    np.testing.assert_allclose(1 / (1 + np.exp(-raw.scores)), probs)
    # labels: two distinct values, or integers
    assert classify_output(
        np.array([0, 1, 1, 0, 1, 0]), n, score_type="probability", positive_label=1, what="m"
    ).is_labels
    assert classify_output(
        np.array([0.2, 0.7, 0.7, 0.2, 0.2, 0.7]), n, score_type="probability",
        positive_label=1, what="m",
    ).is_labels  # fmt: skip
    assert classify_output(
        np.array([1.0, 2.0, 3.0, 2.0, 1.0, 3.0]), n, score_type="raw", positive_label=1, what="m"
    ).is_labels
    text = classify_output(
        np.array(["no", "yes", "yes", "no", "no", "yes"], dtype=object), n,
        score_type="probability", positive_label=1, what="m",
    )  # fmt: skip
    assert text.is_labels and text.text and text.distinct == ("no", "yes")
    with pytest.raises(ModelLoadError, match=r"same value 0\.3 for every row"):
        classify_output(np.full(n, 0.3), n, score_type="probability", positive_label=1, what="m")
    with pytest.raises(ModelLoadError, match=r"shape \(6, 3\).*multi-class"):
        classify_output(np.ones((n, 3)), n, score_type="probability", positive_label=1, what="m")
    with pytest.raises(ModelLoadError, match="1 missing or infinite"):
        bad = probs.copy()
        bad[2] = np.nan
        classify_output(bad, n, score_type="probability", positive_label=1, what="m")
    with pytest.raises(ModelLoadError, match=r"sum to 1.*score_type: probability"):
        classify_output(
            np.column_stack([1 - probs, probs]), n, score_type="raw", positive_label=1, what="m"
        )


def test_positive_column_and_label_value() -> None:
    assert positive_column([0, 1], 1, "m") == 1
    assert positive_column([0, 1], ">50K", "m") == 1  # text labels, model on their 0/1 code
    assert positive_column(np.array(["<=50K", ">50K"]), ">50K", "m") == 1
    assert positive_column(np.array([">50K", "<=50K"]), ">50K", "m") == 0
    with pytest.raises(ModelLoadError, match=r"positive_label 1 is not one of the classes"):
        positive_column(np.array(["no", "yes"]), 1, "m")
    with pytest.raises(ModelLoadError, match="3 classes"):
        positive_column([0, 1, 2], 1, "m")
    assert label_positive_value([0, 1], 1, "m") == 1
    assert label_positive_value([0.0, 1.0], ">50K", "m") == 1
    assert label_positive_value(["no", "yes"], "yes", "m") == "yes"
    with pytest.raises(ModelLoadError, match=r"labels \['no', 'yes'\].*positive_label 1"):
        label_positive_value(["no", "yes"], 1, "m")


def test_schema_conversions_are_exact_or_errors() -> None:
    frame = pd.DataFrame(
        {
            "a": np.array([1, 2, 3], dtype=np.int64),
            "big": np.array([2**53 + 1, 0, 1], dtype=np.int64),
            "f": [1.0, 2.0, 3.5],
            "g": [1.0, 2.0, 3.0],
            "s": ["x", "y", "z"],
            "c": pd.Categorical(["u", "v", "u"]),
            "y": [0, 1, 0],
        }
    )
    schema = [
        InputColumn("a", "double"),
        InputColumn("g", "long"),
        InputColumn("s", "string"),
        InputColumn("c", "string"),
        InputColumn("opt", "double", required=False),
    ]
    m = match_schema(frame, schema, ["y"])
    assert m.ok and m.missing == () and m.columns == ("a", "g", "s", "c")
    assert [c.text() for c in m.conversions] == [
        "a: int64 -> double",
        "g: float64 -> long",
        "c: category -> string",
    ]
    assert m.extra == ("big", "f")
    prepared = ModelInput(m.columns, "signature", m.conversions).prepare(frame)
    assert prepared["a"].dtype == np.float64 and prepared["g"].dtype == np.int64
    np.testing.assert_array_equal(prepared["a"], [1.0, 2.0, 3.0])
    lossy = match_schema(
        frame,
        [InputColumn("big", "double"), InputColumn("f", "long"), InputColumn("s", "double")],
        ["y"],
    )
    assert not lossy.ok
    text = " | ".join(lossy.problems)
    assert "big: int64 -> double: values beyond ±2^53" in text
    assert "f: float64 -> long: it holds non-integer values" in text
    assert "s: str -> double" in text or "s: object -> double" in text
    # a recorded conversion that is not exact on new rows (FlipTest's mapped rows) is an error
    plan = ModelInput(("g",), "signature", (Conversion("g", "float64", "long"),))
    with pytest.raises(ModelLoadError, match="'g' cannot be converted to long"):
        plan.prepare(pd.DataFrame({"g": [1.5]}))


# --------------------------------------------------------------------------- real MLflow models
class LabelModel(mlflow.pyfunc.PythonModel):
    """Serves hard 0/1 labels (a thresholded linear score)."""

    def predict(self, context, model_input, params=None):
        return (model_input["x1"] + model_input["x2"] > 0).astype(np.int64).to_numpy()


class ConstantModel(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return np.full(len(model_input), 0.3)


class TextLabelModel(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return np.where(model_input["x1"] > 0, "yes", "no")


class ProbabilityModel(mlflow.pyfunc.PythonModel):
    """Serves two class columns [P(y=0), P(y=1)] from a fixed logistic score."""

    def predict(self, context, model_input, params=None):
        p = 1 / (1 + np.exp(-(model_input["x1"].to_numpy() + 0.5 * model_input["x2"].to_numpy())))
        return pd.DataFrame({0: 1 - p, 1: p})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    """The session's SQLite tracking store with an experiment whose artifacts live in a temp
    folder; yields a function logging a model and returning its ``runs:/`` URI."""
    from mlflow import MlflowClient

    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    art = tmp_path_factory.mktemp("model-scores-art")
    exp = MlflowClient(uri, uri).create_experiment("model-scores", artifact_location=art.as_uri())

    def log(kind: str, model, **kwargs) -> str:
        with mlflow.start_run(experiment_id=exp):
            if kind == "sklearn":
                info = mlflow.sklearn.log_model(
                    model, name="model", pip_requirements=["scikit-learn"], **kwargs
                )
            else:
                info = mlflow.pyfunc.log_model(
                    name="model", python_model=model, pip_requirements=["mlflow"], **kwargs
                )
        return info.model_uri

    log.experiment_id = exp  # type: ignore[attr-defined]
    return log


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return adult_like()


@pytest.fixture(scope="module")
def logistic(data: pd.DataFrame) -> LogisticRegression:
    return LogisticRegression(max_iter=500).fit(data[FEATURES], data["y"])


def _source(uri: str, frame: pd.DataFrame, score_type: str = "probability", **roles_kw):
    from tasks.model import choose_score_source, plan_model_input

    pyfunc = mlflow.pyfunc.load_model(uri)
    roles = ColumnRoles(label="y", protected=("sex", "race"), **roles_kw)
    model_input, notes = plan_model_input(pyfunc, frame, roles, roles_kw.get("features"))
    scored = choose_score_source(pyfunc, frame, model_input, score_type, 1)
    return pyfunc, model_input, scored, notes


def test_default_sklearn_flavor_is_scored_with_predict_proba(store, data, logistic) -> None:
    """(a) log_model defaults serve predict (0/1), but the audit uses predict_proba; without a
    signature the columns are those the estimator was fitted on (``feature_names_in_``), in
    its order."""
    from tasks.model import model_handles

    uri = store("sklearn", logistic)
    pyfunc, model_input, scored, _ = _source(uri, data)
    served = np.asarray(pyfunc.predict(data[FEATURES]))
    assert set(np.unique(served)) == {0, 1}  # what the old audit took for probabilities
    proba = logistic.predict_proba(data[FEATURES])[:, 1]
    np.testing.assert_array_equal(scored.scores, proba)
    src = scored.source
    assert src.kind == "predict_proba" and src.column == 1 and src.positive_class == 1
    assert src.description.startswith(
        "predict_proba of the sklearn flavor's LogisticRegression, column 1 (class 1)"
    )
    assert model_input.origin == "fitted" and model_input.columns == tuple(FEATURES)
    # every handle comes from the same source
    handles = model_handles(pyfunc, src, model_input, "probability")
    np.testing.assert_allclose(handles.predict_proba(data), proba, rtol=0, atol=1e-15)
    assert isinstance(handles.model, LogisticRegression)
    np.testing.assert_array_equal(handles.model.predict_proba(data[FEATURES])[:, 1], proba)


def test_sklearn_handle_reaches_a_worker_without_mlflow_or_prefect(
    store, data, logistic, tmp_path: Path
) -> None:
    """FlipTest sends the predict_proba handle to its worker processes: for a scikit-learn
    model it is the estimator alone (RawModelScores), so a fresh interpreter unpickles it and
    scores the rows exactly as through the pyfunc without importing MLflow or Prefect (1.2 s
    and ~1 s of each worker's CPU at the audit's start). A custom pyfunc keeps its pyfunc."""
    import subprocess
    import sys

    import cloudpickle

    from tasks.model import model_handles

    uri = store("sklearn", logistic)
    pyfunc, model_input, scored, _ = _source(uri, data)
    handle = model_handles(pyfunc, scored.source, model_input, "probability").predict_proba
    expected = handle(data)
    np.testing.assert_array_equal(expected, logistic.predict_proba(data[FEATURES])[:, 1])
    (tmp_path / "handle.pkl").write_bytes(cloudpickle.dumps(handle))
    data.to_pickle(tmp_path / "rows.pkl")
    handle_file, rows_file, out_file = (
        str(tmp_path / name) for name in ("handle.pkl", "rows.pkl", "out.npy")
    )
    script = (
        "import pickle, sys, numpy as np, pandas as pd\n"
        f"h = pickle.loads(open({handle_file!r}, 'rb').read())\n"
        f"np.save({out_file!r}, h(pd.read_pickle({rows_file!r})))\n"
        "print(sorted(m for m in ('mlflow', 'prefect', 'tasks') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)

    custom = store("pyfunc", ProbabilityModel())
    pyfunc, model_input, scored, _ = _source(custom, data)
    kept = model_handles(pyfunc, scored.source, model_input, "probability").predict_proba
    assert not isinstance(kept, type(handle))  # served by the pyfunc itself


def test_pyfunc_predict_fn_predict_proba_gives_the_same_scores(store, data, logistic) -> None:
    """(b) ``pyfunc_predict_fn="predict_proba"``: the same probabilities, the same source."""
    uri = store("sklearn", logistic, pyfunc_predict_fn="predict_proba")
    pyfunc, _, scored, _ = _source(uri, data)
    proba = logistic.predict_proba(data[FEATURES])[:, 1]
    np.testing.assert_array_equal(np.asarray(pyfunc.predict(data[FEATURES]))[:, 1], proba)
    np.testing.assert_array_equal(scored.scores, proba)
    assert scored.source.kind == "predict_proba"
    assert "pyfunc_predict_fn='predict_proba'" in scored.source.description


def test_pyfunc_with_two_probability_columns(store, data) -> None:
    from tasks.model import model_handles

    uri = store("pyfunc", ProbabilityModel())
    pyfunc, model_input, scored, _ = _source(uri, data)
    p = 1 / (1 + np.exp(-(data["x1"].to_numpy() + 0.5 * data["x2"].to_numpy())))
    np.testing.assert_allclose(scored.scores, p, rtol=1e-12)
    assert scored.source.kind == "pyfunc_output" and scored.source.column == 1
    handles = model_handles(pyfunc, scored.source, model_input, "probability")
    # the individual-fairness model is a black box over the same pyfunc output
    np.testing.assert_allclose(handles.model.predict_proba(data)[:, 1], p, rtol=1e-12)
    assert handles.model.classes_[1] == 1
    # ... which the gradient-flow test can attack with finite differences
    from fairengine.individual import IndividualConfig, run_individual_fairness
    from tasks.model import SCORE_COLUMN

    roles = ColumnRoles(
        label="y", protected=("sex", "race"), score=SCORE_COLUMN, features=model_input.columns
    )
    ds = AuditDataset.from_frame(data.assign(**{SCORE_COLUMN: scored.scores}), roles)
    cfg = IndividualConfig(steps=5, max_rows=200, black_box="finite_difference")
    res = run_individual_fairness(ds, cfg, seed=0, model=handles.model)
    from fairengine.individual.result import IndividualFairnessDetails

    assert res.status == "ok" and isinstance(res.details, IndividualFairnessDetails)
    assert res.details.model.kind == "SourceProbability"


def test_hard_label_pyfunc_is_an_error_unless_score_type_label(store, data) -> None:
    """(c) A PythonModel returning 0/1 labels."""
    uri = store("pyfunc", LabelModel())
    with pytest.raises(ModelLoadError) as err:
        _source(uri, data)
    msg = str(err.value)
    assert "only the values [0, 1]" in msg
    assert 'pyfunc_predict_fn="predict_proba"' in msg and "score_type: label" in msg
    _, _, scored, _ = _source(uri, data, score_type="label")
    assert scored.source.kind == "label" and scored.source.positive_class == 1
    expected = (data["x1"] + data["x2"] > 0).to_numpy(float)
    np.testing.assert_array_equal(scored.scores, expected)


def test_constant_model_is_an_error(store, data) -> None:
    """(d)"""
    uri = store("pyfunc", ConstantModel())
    for score_type in ("probability", "label"):
        with pytest.raises(ModelLoadError, match=r"same value 0\.3 for every row"):
            _source(uri, data, score_type=score_type)


def test_text_labels_are_an_error_naming_them(store, data) -> None:
    """(e) 'yes'/'no' from the model: named, not a numpy ValueError; with score_type label
    and positive_label 'yes' they are the hard predictions."""
    from tasks.model import choose_score_source, plan_model_input

    uri = store("pyfunc", TextLabelModel())
    with pytest.raises(ModelLoadError, match=r"text labels \['no', 'yes'\]"):
        _source(uri, data)
    with pytest.raises(ModelLoadError, match=r"labels \['no', 'yes'\] and positive_label 1"):
        _source(uri, data, score_type="label")
    pyfunc = mlflow.pyfunc.load_model(uri)
    roles = ColumnRoles(label="y", protected=("sex",))
    model_input, _ = plan_model_input(pyfunc, data, roles)
    scored = choose_score_source(pyfunc, data, model_input, "label", "yes")
    np.testing.assert_array_equal(scored.scores, (data["x1"] > 0).to_numpy(float))


def _onehot_pipeline(X: pd.DataFrame, y: pd.Series) -> Pipeline:
    """A model that takes the protected attributes as inputs (one-hot encoded inside)."""
    pre = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), ["sex", "race"])],
        remainder="passthrough",
    )
    return Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=500))]).fit(X, y)


def test_features_come_from_the_signature_with_protected_attributes(store, data) -> None:
    """(f) Trained on sex and race with a signature: those are model inputs; the data's int64
    age is converted exactly to the signature's double (MLflow alone refuses it)."""
    train = data[["x1", "x2", "age", "sex", "race"]].assign(age=data["age"].astype(float))
    model = _onehot_pipeline(train, data["y"])
    uri = store("sklearn", model, signature=infer_signature(train))
    pyfunc = mlflow.pyfunc.load_model(uri)
    with pytest.raises(Exception, match=r"int64 to float64"):  # MLflow's own enforcement
        pyfunc.predict(data[["x1", "x2", "age", "sex", "race"]])
    _, model_input, scored, notes = _source(uri, data)
    assert model_input.origin == "signature"
    assert model_input.columns == ("x1", "x2", "age", "sex", "race")
    assert [c.text() for c in model_input.conversions] == ["age: int64 -> double"]
    assert "age: int64 -> double" in notes[0]
    np.testing.assert_allclose(scored.scores, model.predict_proba(train)[:, 1], rtol=1e-12)
    assert scored.source.estimator == "Pipeline[LogisticRegression]"


def test_schema_mismatch_names_columns_conversions_and_mlflow_cause(store, data) -> None:
    """(g) A signature the data does not meet: missing and extra columns, a lossy dtype
    conversion, and MLflow's whole message (not its first line)."""
    train = pd.DataFrame(
        {
            "x1": data["x1"],
            "age": data["age"],  # long in the signature
            "sex_male": (data["sex"] == "male").astype(np.int64),
            "hours": (data["age"] % 40 + 20).astype(float),  # double in the signature
        }
    )
    model = LogisticRegression().fit(train, data["y"])
    uri = store("sklearn", model, signature=infer_signature(train))
    audit = data.assign(age=data["age"] + 0.5, income_k=1.0, hours=data["age"] % 40 + 20)
    with pytest.raises(ModelLoadError) as err:
        _source(uri, audit)
    msg = str(err.value)
    assert "missing column(s) ['sex_male']" in msg
    assert "'income_k'" in msg and "x2" in msg  # columns without a role the model does not take
    assert "age: float64 -> long: it holds non-integer values" in msg
    assert "Exact dtype conversion(s) the audit makes itself: hours: int64 -> double" in msg
    assert "MLflow: Model is missing inputs ['sex_male']. Note that there were extra inputs" in msg
    assert "model input schema:" in msg and "'sex_male': long" in msg
    # columns.features that contradicts the signature
    ok = data.assign(sex_male=(data["sex"] == "male").astype(np.int64), hours=20.0)
    with pytest.raises(ModelLoadError, match=r"columns.features \['x1'\] differs"):
        _source(uri, ok, features=["x1"])
    # the label is never a model input
    leaky = LogisticRegression().fit(data[["x1", "y"]], data["y"])
    uri2 = store("sklearn", leaky, signature=infer_signature(data[["x1", "y"]]))
    with pytest.raises(ModelLoadError, match=r"signature takes \['y'\] as input"):
        _source(uri2, data)


def test_no_signature_uses_the_columns_the_model_was_fitted_on(store, data) -> None:
    """Without a signature, a model fitted on a DataFrame knows its inputs
    (``feature_names_in_``): the protected attributes it was trained on are passed, in its
    order, as a signature would give them."""
    model = _onehot_pipeline(data[["x1", "x2", "sex", "race"]], data["y"])
    uri = store("sklearn", model)
    _, model_input, scored, _ = _source(uri, data)
    assert model_input.origin == "fitted"
    assert model_input.columns == ("x1", "x2", "sex", "race")
    np.testing.assert_array_equal(
        scored.scores, model.predict_proba(data[["x1", "x2", "sex", "race"]])[:, 1]
    )
    _, model_input, scored, _ = _source(uri, data, features=["x1", "x2", "sex", "race"])
    assert model_input.origin == "columns.features" and scored.source.kind == "predict_proba"
    renamed = data.rename(columns={"race": "ethnicity"})
    with pytest.raises(ModelLoadError, match=r"fitted on the column\(s\) \['race'\]"):
        _source(uri, renamed)


def test_no_signature_error_says_what_to_set(store, data) -> None:
    """A model without a signature and without feature names (fitted on an array) that takes
    the protected attributes: the default features leave them out; the error says to list the
    model's inputs in columns.features."""
    X = data[["x1", "x2", "sex", "race"]].assign(
        sex=(data["sex"] == "male").astype(float), race=(data["race"] == "a").astype(float)
    )
    model = LogisticRegression(max_iter=500).fit(X.to_numpy(), data["y"])
    uri = store("sklearn", model)
    with pytest.raises(ModelLoadError) as err:
        _source(uri, data)
    msg = str(err.value)
    assert "columns.features" in msg and "no signature" in msg
    assert "\n" in msg or "features" in msg  # the whole cause, not its first line


def test_xgboost_classifier_is_scored_with_predict_proba(store, data) -> None:
    xgb = pytest.importorskip("xgboost", reason="xgboost is not installed (optional flavor)")
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2).fit(data[FEATURES], data["y"])
    with mlflow.start_run(experiment_id=store.experiment_id):
        info = mlflow.xgboost.log_model(model, name="model", pip_requirements=["xgboost"])
    uri = info.model_uri
    _, _, scored, _ = _source(uri, data)
    np.testing.assert_allclose(scored.scores, model.predict_proba(data[FEATURES])[:, 1])


def test_lightgbm_classifier_is_scored_with_predict_proba(store, data) -> None:
    lgb = pytest.importorskip("lightgbm", reason="lightgbm is not installed (optional flavor)")
    model = lgb.LGBMClassifier(n_estimators=5).fit(data[FEATURES], data["y"])
    with mlflow.start_run(experiment_id=store.experiment_id):
        info = mlflow.lightgbm.log_model(model, name="model", pip_requirements=["lightgbm"])
    uri = info.model_uri
    _, _, scored, _ = _source(uri, data)
    np.testing.assert_allclose(scored.scores, model.predict_proba(data[FEATURES])[:, 1])


def test_torch_model_output_and_its_module_for_the_gradient_test(store, data) -> None:
    """A pytorch model: its pyfunc output is the score; the individual-fairness test gets the
    module itself, whose output it reads as logits (a probability output is wrapped in
    log p − log(1 − p), so both read the same model)."""
    torch = pytest.importorskip("torch")
    from tasks.model import model_handles

    frame = data.assign(x1=data["x1"].astype(np.float32), x2=data["x2"].astype(np.float32))
    X = frame[["x1", "x2"]]
    tensor = torch.tensor(X.to_numpy())
    torch.manual_seed(0)
    for score_type, net in (
        ("raw", torch.nn.Sequential(torch.nn.Linear(2, 1))),
        ("probability", torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.Sigmoid())),
    ):
        sig = infer_signature(X, net(tensor).detach().numpy())
        with mlflow.start_run(experiment_id=store.experiment_id):
            info = mlflow.pytorch.log_model(
                net, name="model", pip_requirements=["torch"], serialization_format="pickle",
                signature=sig,
            )  # fmt: skip
        pyfunc, model_input, scored, _ = _source(info.model_uri, frame, score_type=score_type)
        out = net(tensor).detach().numpy().ravel()
        np.testing.assert_allclose(scored.scores, out, rtol=1e-6)
        assert scored.source.kind == "pyfunc_output" and scored.source.flavor == "pytorch"
        handles = model_handles(pyfunc, scored.source, model_input, score_type)
        assert isinstance(handles.model, torch.nn.Module)
        logits = handles.model(tensor).detach().numpy().ravel()
        p = 1 / (1 + np.exp(-out)) if score_type == "raw" else out
        np.testing.assert_allclose(1 / (1 + np.exp(-logits)), p, rtol=1e-5)
        np.testing.assert_allclose(handles.predict_proba(frame), p, rtol=1e-6)


# --------------------------------------------------------------------------- the audit flow
@pytest.fixture(scope="module")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def _config(data_path: Path, out: Path, uri: str, methods: dict, **extra) -> dict:
    off = {"enabled": False}
    all_off = {
        m: off
        for m in (
            "group_parity",
            "group_metrics",
            "permutation_tests",
            "intersectional",
            "fliptest",
            "individual_fairness",
            "mitigation",
        )
    }
    cfg = {
        "data": {"path": str(data_path)},
        "columns": {"label": "y", "protected": ["sex", "race"]},
        "model": {"uri": uri},
        "threshold": 0.5,
        "output": {"dir": str(out)},
        "mlflow": {"enabled": False},
        "cache": {"enabled": False},
        "methods": {**all_off, **methods},
    }
    cfg.update(extra)
    return cfg


def _group_aucs(result) -> dict[str, float]:
    return {f.key: f.estimate for f in result.findings() if f.key.startswith("auc.")}


@pytest.mark.flow
def test_audit_uses_predict_proba_everywhere(
    prefect_server, store, data, logistic, tmp_path: Path
) -> None:
    """(a) + (h): the audit of a default-logged LogisticRegression: per-group AUC equals
    sklearn's roc_auc_score of predict_proba per group; the result and report record the score
    source; the individual-fairness test attacked the same estimator (exact torch conversion)."""
    from flows.audit import audit_flow

    uri = store("sklearn", logistic)
    path = tmp_path / "audit.csv"
    data.to_csv(path, index=False)
    methods = {
        "group_parity": {"enabled": True},
        "group_metrics": {"enabled": True},
        "permutation_tests": {"enabled": True, "n_permutations": 99, "metrics": ["tpr", "auc"]},
        "individual_fairness": {"enabled": True, "steps": 10, "max_rows": 300},
    }
    run = audit_flow(_config(path, tmp_path / "out", uri, methods))
    res = run.result
    proba = logistic.predict_proba(data[FEATURES])[:, 1]
    labels = logistic.predict(data[FEATURES])  # what the pyfunc serves
    aucs = _group_aucs(res)
    for attr in ("sex", "race"):
        for group in sorted(data[attr].unique()):
            rows = (data[attr] == group).to_numpy()
            key = f"auc.{attr}.{group}"
            y = data["y"][rows]
            assert aucs[key] == pytest.approx(roc_auc_score(y, proba[rows]), abs=1e-9), key
            # not the AUC of the 0/1 labels taken for probabilities (the old audit's number)
            assert aucs[key] > roc_auc_score(y, labels[rows]) + 0.02, key
    src = res.model.score_source
    assert src["kind"] == "predict_proba" and src["estimator"] == "LogisticRegression"
    assert res.model.model_input["columns"] == FEATURES
    assert list(res.dataset.roles.features or ()) == FEATURES
    individual = res.method("individual_fairness")
    assert individual.status == "ok", individual.reason
    from fairengine.individual.result import IndividualFairnessDetails

    assert isinstance(individual.details, IndividualFairnessDetails)
    assert individual.details.model.exact
    assert "LogisticRegression" in json.dumps(individual.details.to_dict()["model"])
    perm = res.method("permutation_tests")
    assert any(f.key.startswith("perm_auc.sex") for f in perm.findings)
    html = Path(run.report_path).read_text()
    assert "Score source" in html and "predict_proba of the sklearn flavor" in html


@pytest.mark.flow
def test_label_audit_marks_auc_not_applicable(prefect_server, store, data, tmp_path: Path) -> None:
    """(c) with ``score_type: label``: the audit runs on the hard labels; no AUC findings, the
    reason is recorded; the individual-fairness test says it needs probabilities."""
    from flows.audit import audit_flow

    uri = store("pyfunc", LabelModel())
    path = tmp_path / "audit.csv"
    data.to_csv(path, index=False)
    methods = {
        "group_parity": {"enabled": True},
        "group_metrics": {"enabled": True},
        "permutation_tests": {"enabled": True, "n_permutations": 99, "metrics": ["tpr", "auc"]},
        "individual_fairness": {"enabled": True, "steps": 10, "max_rows": 300},
    }
    cfg = _config(path, tmp_path / "out", uri, methods, score_type="label", threshold=None)
    with pytest.raises(ConfigError, match="not both"):
        audit_flow({**cfg, "columns": {**cfg["columns"], "score": "x1"}})
    run = audit_flow(cfg)
    res = run.result
    assert res.model.score_source["kind"] == "label"
    assert not _group_aucs(res)
    gm = res.method("group_metrics")
    assert gm.status == "ok"
    from fairengine.group_metrics.result import AucNotApplicable, GroupMetricsDetails

    assert isinstance(gm.details, GroupMetricsDetails)
    auc = gm.details.auc
    assert isinstance(auc, AucNotApplicable)
    assert auc.applicable is False and "score_type is label" in auc.reason
    perm = res.method("permutation_tests")
    assert not any(f.key.startswith("perm_auc") for f in perm.findings)
    assert isinstance(perm.details, PermutationDetails)
    assert any("perm_auc.sex" in s.reason and "not applicable" in s.reason
               for s in perm.details.skipped)  # fmt: skip
    assert any(f.key.startswith("perm_tpr") for f in perm.findings)
    yhat = (data["x1"] + data["x2"] > 0).to_numpy()
    dp = next(f for f in res.findings() if f.key == "dp_gap.sex.female_male")
    female = (data["sex"] == "female").to_numpy()
    assert dp.estimate == pytest.approx(yhat[female].mean() - yhat[~female].mean(), abs=1e-12)
    individual = res.method("individual_fairness")  # a step function has no probabilities
    assert individual.status == "failed" and "LabelOnlyModel" in individual.reason
    assert "needs class probabilities" in individual.reason


@pytest.mark.flow
def test_signature_model_with_protected_inputs_audits(
    prefect_server, store, data, tmp_path: Path
) -> None:
    """(f) end to end: the signature's inputs (with sex and race) reach the model, the exact
    int64 -> double conversion is a warning of the audit."""
    from flows.audit import audit_flow

    cols = ["x1", "x2", "age", "sex", "race"]
    train = data[cols].assign(age=data["age"].astype(float))
    model = _onehot_pipeline(train, data["y"])
    uri = store("sklearn", model, signature=infer_signature(train))
    path = tmp_path / "audit.parquet"
    data.to_parquet(path, index=False)  # age stays int64
    run = audit_flow(_config(path, tmp_path / "out", uri, {"group_metrics": {"enabled": True}}))
    res = run.result
    assert list(res.dataset.roles.features or ()) == cols
    assert res.model.model_input["origin"] == "signature"
    assert any("age: int64 -> double" in w for w in res.warnings)
    proba = model.predict_proba(train)[:, 1]
    female = (data["sex"] == "female").to_numpy()
    auc = _group_aucs(res)["auc.sex.female"]
    assert auc == pytest.approx(roc_auc_score(data["y"][female], proba[female]), abs=1e-9)


def test_data_column_source_is_recorded() -> None:
    assert ScoreSource.from_data_column("score", "probability").to_dict()["description"] == (
        "the data column 'score' (probability scores)"
    )
