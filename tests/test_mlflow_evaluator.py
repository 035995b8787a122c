"""The ``fairengine`` MLflow evaluator (``flows/mlflow_evaluator.py``) through the real entry
point: ``mlflow.models.evaluate(..., evaluators=["fairengine"])`` with a real SQLite-backed
MLflow and the audit flow on Prefect's test server.

Read back as a reviewer would: the evaluation run's metrics, tags and artifacts through
``MlflowClient``, the returned ``EvaluationResult`` gated with ``MetricThreshold``, and the
numbers compared with the CLI's audit of the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.errors import ConfigError

pytestmark = pytest.mark.flow

# fast settings for the tests (the evaluator's defaults are the CLI's)
LIGHT = {"methods": {"fliptest": {"enabled": False}, "individual_fairness": {"enabled": False}}}


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="module")
def client(session_tmp: Path):
    import mlflow
    from mlflow import MlflowClient

    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    assert uri.startswith("sqlite:///") and str(session_tmp) in uri  # conftest isolation
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def frame(n: int = 2000, seed: int = 0, bias: float = 1.0) -> pd.DataFrame:
    """Two features, ``x2`` shifted by sex times ``bias``; the outcome depends on both, so a
    model on them selects men more often (the rates differ by sex)."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n) + bias * (sex == "male")
    y = rng.binomial(1, 1 / (1 + np.exp(-1.5 * (x1 + x2 - 0.5))))
    return pd.DataFrame({"x1": x1, "x2": x2, "sex": sex, "race": race, "y": y})


@pytest.fixture(scope="module")
def registered(client, session_tmp: Path) -> dict:
    """A logistic regression on (x1, x2), logged with its signature (predict: labels, as
    MLflow's default evaluator wants) and registered as ``eval-scorer``."""
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import LogisticRegression

    df = frame()
    X = df[["x1", "x2"]]
    model = LogisticRegression().fit(X, df["y"])
    exp = client.create_experiment(
        "eval-train", artifact_location=(session_tmp / "eval-train").as_uri()
    )
    with mlflow.start_run(experiment_id=exp):
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name="eval-scorer",
            signature=infer_signature(X, model.predict(X)),
            pip_requirements=["scikit-learn"],
        )
    return {
        "model": model,
        "frame": df,
        "model_uri": info.model_uri,  # models:/m-<id>
        "registry_uri": f"models:/eval-scorer/{info.registered_model_version}",
        "version": str(info.registered_model_version),
    }


def start_run(client, experiment: str, tmp_path: Path):
    import mlflow

    exp = client.get_experiment_by_name(experiment)
    exp_id = (
        exp.experiment_id
        if exp is not None
        else client.create_experiment(experiment, artifact_location=(tmp_path / "a").as_uri())
    )
    return mlflow.start_run(experiment_id=exp_id)


def test_the_entry_point_registers_the_evaluator() -> None:
    from mlflow.models.evaluation import list_evaluators

    assert "fairengine" in list_evaluators()


def test_evaluate_logs_the_audit_into_the_evaluation_run(
    tmp_path: Path, client, registered: dict
) -> None:
    import mlflow

    from flows.audit import audit_flow

    df = registered["frame"]
    settings = {**LIGHT, "output": {"dir": str(tmp_path / "out")}}
    with start_run(client, "eval-audit", tmp_path) as run:
        result = mlflow.models.evaluate(
            registered["registry_uri"],
            df,
            targets="y",
            model_type="classifier",
            evaluators=["fairengine"],
            evaluator_config={
                "fairengine": {
                    "protected": ["sex", "race"],
                    "model_uri": registered["registry_uri"],
                    **settings,
                }
            },
        )
    run_id = run.info.run_id
    exp = client.get_experiment_by_name("eval-audit")
    assert [r.info.run_id for r in client.search_runs([exp.experiment_id])] == [run_id]
    logged = client.get_run(run_id)

    # the same audit as the CLI's on the same rows and model (the flow with a data path)
    data = tmp_path / "rows.parquet"
    df.to_parquet(data, index=False)
    cli = audit_flow(
        {
            **settings,
            "data": {"path": str(data)},
            "columns": {"label": "y", "protected": ["sex", "race"]},
            "model": {"uri": registered["registry_uri"]},
            "mlflow": {"enabled": False},
        }
    ).result
    expected = {f"fairness.{k}": v for k, v in cli.flat_metrics().items()}
    expected["fairness.verdict_fail"] = float(cli.verdict.status == "fail")
    expected["fairness.tests_rejected"] = float(cli.decisions.n_rejected)
    expected["fairness.tests_not_rejected"] = float(cli.decisions.n_not_rejected)
    expected["fairness.tests_undetermined"] = float(cli.decisions.n_undetermined)
    assert result.metrics == pytest.approx(expected)
    assert cli.verdict.status == "fail"  # x2 carries sex: the model's rates differ by sex

    # the scores were the model's probabilities
    p = registered["model"].predict_proba(df[["x1", "x2"]])[:, 1] > 0.5
    dp = result.metrics["fairness.dp_gap.sex.female_male"]
    assert dp == pytest.approx(p[df.sex == "female"].mean() - p[df.sex == "male"].mean())

    # metrics, tags and artifacts in the evaluation's run
    assert {k: logged.data.metrics[k] for k in expected} == pytest.approx(expected)
    tags = logged.data.tags
    assert tags["fairness.verdict"] == "fail"
    assert tags["fairness.kind"] == "evaluation"
    assert tags["fairness.model_name"] == "eval-scorer"
    assert tags["fairness.model_version"] == registered["version"]
    audit_json = json.loads(
        Path(client.download_artifacts(run_id, "audit/audit.json", str(tmp_path))).read_text()
    )
    assert tags["fairness.audit_id"] == audit_json["audit_id"]
    assert audit_json["verdict"]["status"] == "fail"
    names = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert names == {"audit/audit.json", "audit/report.html", "audit/findings.json"}
    html = result.artifacts["fairness_report"].content
    assert html.lstrip().lower().startswith("<!doctype html")
    assert result.artifacts["fairness_report"].uri.endswith("audit/report.html")
    assert result.artifacts["fairness_audit"].content["audit_id"] == audit_json["audit_id"]
    # the registry version is tagged as by the CLI
    mv = client.get_model_version("eval-scorer", registered["version"])
    assert mv.tags["fairness.verdict"] == "fail"
    assert mv.tags["fairness.audit_run_id"] == run_id


def test_metric_thresholds_gate_on_the_verdict(tmp_path: Path, client) -> None:
    """Static scores (``predictions=``): fair scores pass the gate, unfair ones fail it."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.models import MetricThreshold

    rng = np.random.default_rng(3)
    df = frame(seed=3, bias=0.0)
    fair = np.clip(0.3 + 0.4 * df["y"] + rng.normal(0, 0.1, len(df)), 0, 1)
    gate = {
        "fairness.verdict_fail": MetricThreshold(threshold=0, greater_is_better=False),
        "fairness.tests_rejected": MetricThreshold(threshold=0, greater_is_better=False),
    }
    results = {}
    for name, scores in (
        ("fair", fair),
        ("unfair", np.clip(fair + 0.2 * (df.sex == "male"), 0, 1)),
    ):
        with start_run(client, "eval-gate", tmp_path):
            results[name] = mlflow.models.evaluate(
                data=df.assign(score=scores),
                targets="y",
                predictions="score",
                model_type="classifier",
                evaluators=["fairengine"],
                evaluator_config={
                    "fairengine": {
                        "protected": ["sex", "race"],
                        **LIGHT,
                        "output": {"dir": str(tmp_path / name)},
                    }
                },
            )
    assert results["fair"].metrics["fairness.verdict_fail"] == 0.0
    mlflow.validate_evaluation_results(gate, results["fair"])  # passes: no exception
    assert results["unfair"].metrics["fairness.verdict_fail"] == 1.0
    assert results["unfair"].metrics["fairness.tests_rejected"] >= 1
    with pytest.raises(MlflowException, match=r"fairness\.verdict_fail"):
        mlflow.validate_evaluation_results(gate, results["unfair"])
    # the gap itself can be gated too: the unfair scores' selection-rate gap is about -0.2
    gap = {
        "fairness.dp_gap.sex.female_male": MetricThreshold(threshold=-0.1, greater_is_better=True)
    }
    mlflow.validate_evaluation_results(gap, results["fair"])
    with pytest.raises(MlflowException, match="dp_gap"):
        mlflow.validate_evaluation_results(gap, results["unfair"])


def test_next_to_the_default_evaluator(tmp_path: Path, client, registered: dict) -> None:
    """MLflow's classifier evaluator calls the raw model on every feature column, so the
    evaluation names the model's features and the protected attribute comes as a DataFrame."""
    import mlflow

    df = registered["frame"]
    with start_run(client, "eval-both", tmp_path) as run:
        result = mlflow.models.evaluate(
            registered["model_uri"],
            df,
            targets="y",
            feature_names=["x1", "x2"],
            model_type="classifier",
            evaluators=["default", "fairengine"],
            evaluator_config={
                "fairengine": {
                    "protected": df[["sex"]],
                    **LIGHT,
                    "output": {"dir": str(tmp_path)},
                }
            },
        )
    logged = client.get_run(run.info.run_id).data
    for name in ("accuracy_score", "f1_score", "fairness.verdict_fail"):
        assert name in result.metrics and name in logged.metrics, name
    p = registered["model"].predict_proba(df[["x1", "x2"]])[:, 1] > 0.5
    dp = p[df.sex == "female"].mean() - p[df.sex == "male"].mean()
    assert logged.metrics["fairness.dp_gap.sex.female_male"] == pytest.approx(dp)
    assert result.metrics["fairness.dp_gap.sex.female_male"] == pytest.approx(dp)
    assert not any(k.startswith("fairness.") and ".race." in k for k in result.metrics)
    assert "confusion_matrix" in result.artifacts and "fairness_report" in result.artifacts
    assert "audit/report.html" in {a.path for a in client.list_artifacts(run.info.run_id, "audit")}
    assert logged.tags["fairness.verdict"] == "fail"
    # the model came from its logged-model URI: no registry identity, the URI is kept
    assert logged.tags["fairness.model_uri"] == registered["model_uri"]
    assert "fairness.model_name" not in logged.tags


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"protected": ["sex"], "treshold": 0.4}, "did you mean 'threshold'"),
        ({"protectd": ["sex"]}, "did you mean 'protected'"),
        (
            {"protected": ["sex"], "methods": {"group_parity": {"tolerence": 0.1}}},
            "did you mean 'methods.group_parity.tolerance'",
        ),
        ({"protected": ["sex"], "data": {"path": "x.csv"}}, "mlflow.evaluate's `data`"),
        ({"protected": ["gender"]}, r"column\(s\) \['gender'\] are not in the evaluation data"),
        ({"protected": pd.DataFrame({"sex": ["a"] * 10})}, "has 10 rows, the evaluation data 200"),
    ],
)
def test_a_bad_evaluator_config_is_a_clear_error(
    tmp_path: Path, client, config: dict, message: str
) -> None:
    import mlflow

    df = frame(n=200).assign(score=0.5)
    with start_run(client, "eval-bad", tmp_path), pytest.raises(ConfigError, match=message):
        mlflow.models.evaluate(
            data=df,
            targets="y",
            predictions="score",
            model_type="classifier",
            evaluators=["fairengine"],
            evaluator_config={"fairengine": config},
        )
