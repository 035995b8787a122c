"""The audit flow end to end: real Prefect (test harness server), real MLflow SQLite store.

Everything is read back the way a reviewer would: the files on disk, and the MLflow run through
``MlflowClient`` (params, metrics, artifacts, model-version tags).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.errors import DataContractError, DataValidationError, ModelLoadError

pytestmark = pytest.mark.flow


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="module")
def client(session_tmp: Path):
    from mlflow import MlflowClient

    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    assert uri.startswith("sqlite:///") and str(session_tmp) in uri  # conftest isolation
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def scored_frame(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    y = rng.binomial(1, 0.4, n)
    score = np.clip(rng.normal(0.35 + 0.25 * y + 0.15 * (sex == "male"), 0.2), 0, 1)
    return pd.DataFrame(
        {"sex": sex, "race": race, "y": y, "score": score, "x1": rng.normal(size=n)}
    )


def config_for(data_path: Path, out: Path, experiment: str, **extra) -> dict:
    cfg = {
        "data": {"path": str(data_path)},
        "columns": {"label": "y", "protected": ["sex", "race"], "score": "score"},
        "threshold": 0.5,
        "output": {"dir": str(out)},
        "mlflow": {"experiment": experiment},
        "cache": {"dir": str(out.parent / "cache")},  # one cache per test: no cross-talk
    }
    cfg.update(extra)
    return cfg


def run_ids(client, experiment: str) -> list[str]:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return [r.info.run_id for r in client.search_runs([exp.experiment_id])]


def test_audit_of_scores_in_a_csv(tmp_path: Path, client) -> None:
    from flows.audit import audit_flow

    df = scored_frame()
    data = tmp_path / "scored.csv"
    df.to_csv(data, index=False)
    run = audit_flow(config_for(data, tmp_path / "out", "t-scores"))
    res = run.result

    # the computed numbers are right
    dp = next(f for f in res.findings() if f.key == "dp_gap.sex.female_male")
    yhat = df["score"] > 0.5
    assert dp.estimate == pytest.approx(
        yhat[df.sex == "female"].mean() - yhat[df.sex == "male"].mean()
    )
    assert res.verdict.status == "fail"  # a 0.15 score shift by sex is a real disparity
    assert res.validation is not None and res.validation.success
    assert res.dataset.n_rows == len(df) and len(res.dataset.fingerprint) == 64
    assert {"load_data", "validate_data", "group_parity"} <= set(res.metadata.timings)

    # local outputs: JSON is the source of truth, the report renders it
    saved = json.loads(Path(run.paths["json"]).read_text())
    assert saved == res.to_dict()
    html = Path(run.report_path).read_text()
    assert f"{dp.estimate:+.3f}" in html or f"{dp.estimate:.4f}" in html
    assert "dp_gap" in html or dp.label in html

    # MLflow: one finished run with params, flat metrics and both artifacts
    (run_id,) = run_ids(client, "t-scores")
    assert run_id == run.mlflow["run_id"]
    mrun = client.get_run(run_id)
    assert mrun.info.status == "FINISHED"
    assert mrun.data.params["methods.group_parity.tolerance"] == "0.05"
    assert mrun.data.params["threshold"] == "0.5"
    assert mrun.data.metrics["dp_gap.sex.female_male"] == pytest.approx(dp.estimate)
    assert mrun.data.metrics["dp_gap.sex.female_male.pvalue_adj"] == pytest.approx(
        dp.adjusted_pvalue
    )
    assert mrun.data.tags["fairness.verdict"] == "fail"
    names = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert names == {"audit/audit.json", "audit/report.html", "audit/findings.json"}
    local = client.download_artifacts(run_id, "audit/audit.json", str(tmp_path / "dl"))
    assert json.loads(Path(local).read_text()) == res.to_dict()


def test_audit_of_a_registered_model_by_version_and_alias(tmp_path: Path, client) -> None:
    import mlflow
    from sklearn.linear_model import LogisticRegression

    from flows.audit import audit_flow
    from tasks.settings import default_tracking_uri

    df = scored_frame(seed=1).drop(columns="score")
    df["x2"] = df["x1"] + np.where(df["sex"] == "male", 1.0, 0.0)
    model = LogisticRegression().fit(df[["x1", "x2"]], df["y"])
    mlflow.set_tracking_uri(default_tracking_uri())
    mlflow.set_registry_uri(default_tracking_uri())
    # artifacts under the test's tmp dir, never the default cwd-relative ./mlruns
    exp_id = client.create_experiment("train", artifact_location=(tmp_path / "art").as_uri())
    with mlflow.start_run(experiment_id=exp_id):
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name="credit-scorer",
            pyfunc_predict_fn="predict_proba",
            pip_requirements=["scikit-learn"],
        )
    version = str(info.registered_model_version)
    client.set_registered_model_alias("credit-scorer", "champion", version)
    data = tmp_path / "audit.parquet"
    df.to_parquet(data, index=False)

    for uri in (f"models:/credit-scorer/{version}", "models:/credit-scorer@champion"):
        cfg = config_for(
            data,
            tmp_path / "out",
            "t-model",
            model={"uri": uri},
            mlflow={"experiment": "t-model", "approve_alias": "fair-approved"},
            # the model-based methods run on the real pyfunc model, with few refits for speed
            methods={
                "fliptest": {"enabled": True, "n_permutations": 9, "n_selfmap": 9, "n_bootstrap": 9}
            },
        )
        cfg["columns"] = {"label": "y", "protected": ["sex", "race"], "features": ["x1", "x2"]}
        run = audit_flow(cfg)
        assert run.result.model.name == "credit-scorer"
        assert run.result.model.version == version
        # FlipTest got the model as a function; the gradient test got the unwrapped sklearn model
        assert run.result.method("fliptest").status == "ok"
        individual = run.result.method("individual_fairness")
        assert individual.status == "ok", individual.reason
        from fairengine.individual.result import IndividualFairnessDetails

        assert isinstance(individual.details, IndividualFairnessDetails)
        assert individual.details.model.exact, individual.details.model
        # the scores used are the model's probabilities
        p = model.predict_proba(df[["x1", "x2"]])[:, 1] > 0.5
        dp = next(f for f in run.result.findings() if f.key == "dp_gap.sex.female_male")
        assert dp.estimate == pytest.approx(
            p[df.sex == "female"].mean() - p[df.sex == "male"].mean()
        )
    # the second audit of the model shows the first one in its trend table
    (earlier,) = run.result.metadata.previous_audits
    assert earlier.model_version == version
    assert earlier.estimates["dp_gap.sex.female_male"] == pytest.approx(dp.estimate)
    html = Path(run.report_path).read_text()
    assert "Trend across audits of this model" in html
    mv = client.get_model_version("credit-scorer", version)
    assert mv.tags["fairness.verdict"] == run.result.verdict.status
    assert mv.tags["fairness.audit_run_id"] == run.mlflow["run_id"]
    assert mv.tags["fairness.report_uri"] == f"{run.mlflow['artifact_uri']}/audit/report.html"
    # the approval alias moves to the version only when the audit passes
    aliases = client.get_registered_model("credit-scorer").aliases
    assert ("fair-approved" in aliases) == (run.result.verdict.status == "pass")
    assert client.get_run(run.mlflow["run_id"]).data.tags["fairness.model_version"] == version


def _assert_nothing_written(out: Path, client, experiment: str) -> None:
    assert not out.exists() or not any(out.rglob("*")), list(out.rglob("*"))
    assert run_ids(client, experiment) == []


def test_bad_data_stops_before_anything_is_written(tmp_path: Path, client) -> None:
    from flows.audit import audit_flow

    df = scored_frame()
    df.loc[3, "race"] = "d"  # a group of one (missing values stop the audit when it is read)
    df.loc[5, "score"] = 1.7
    data = tmp_path / "bad.csv"
    df.to_csv(data, index=False)
    with pytest.raises(DataValidationError) as err:
        audit_flow(config_for(data, tmp_path / "out", "t-bad"))
    msg = str(err.value)
    assert msg.startswith("Data validation failed:")
    assert "race" in msg and "score" in msg  # both problems reported at once
    assert len(err.value.failures) >= 2
    _assert_nothing_written(tmp_path / "out", client, "t-bad")


def test_unreadable_model_uri(tmp_path: Path, client) -> None:
    from flows.audit import audit_flow

    df = scored_frame().drop(columns="score")
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    cfg = config_for(data, tmp_path / "out", "t-nomodel", model={"uri": "models:/no-such-model/3"})
    cfg["columns"].pop("score")
    with pytest.raises(ModelLoadError, match="models:/no-such-model/3"):
        audit_flow(cfg)
    _assert_nothing_written(tmp_path / "out", client, "t-nomodel")


def test_empty_file(tmp_path: Path, client) -> None:
    from flows.audit import audit_flow

    data = tmp_path / "empty.csv"
    data.write_text("")
    with pytest.raises(DataContractError, match="empty"):
        audit_flow(config_for(data, tmp_path / "out", "t-empty"))
    _assert_nothing_written(tmp_path / "out", client, "t-empty")


def test_failed_optional_method_is_reported_and_audit_completes(
    tmp_path: Path, client, monkeypatch
) -> None:
    import fairengine.group_parity.method
    from flows.audit import audit_flow

    def boom(*args, **kwargs):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(fairengine.group_parity.method, "group_parity", boom)
    data = tmp_path / "d.csv"
    scored_frame().to_csv(data, index=False)
    only_parity = {  # no other method's rejection may mask the "incomplete" verdict
        name: {"enabled": False}
        for name in ("group_metrics", "permutation_tests", "intersectional")
    }
    run = audit_flow(config_for(data, tmp_path / "out", "t-failed", methods=only_parity))
    m = run.result.method("group_parity")
    assert m.status == "failed" and "simulated failure" in m.reason
    assert run.result.verdict.status == "incomplete"
    assert Path(run.report_path).exists()
    assert "simulated failure" in Path(run.report_path).read_text()
    assert len(run_ids(client, "t-failed")) == 1


def test_rerun_reuses_cached_method_results_and_a_changed_parameter_recomputes(
    tmp_path: Path, client, monkeypatch
) -> None:
    """Cache keys come from the data content, model, parameters and code (tasks/caching.py):
    a second identical audit reuses the method results (the method body does not run again)
    and yields the same findings and verdict; changing one parameter recomputes that step."""
    import fairengine.group_parity.method
    from flows.audit import audit_flow

    calls: list[float] = []
    real = fairengine.group_parity.method.group_parity

    def counting(dataset, **kwargs):
        calls.append(kwargs["tolerance"])
        return real(dataset, **kwargs)

    monkeypatch.setattr(fairengine.group_parity.method, "group_parity", counting)
    data = tmp_path / "d.csv"
    scored_frame(seed=7).to_csv(data, index=False)
    cfg = config_for(data, tmp_path / "out", "t-cache", mlflow={"enabled": False})
    first = audit_flow(cfg)
    # the same content in a new file (another path, another DataFrame object) hits the cache
    copy = tmp_path / "copy.csv"
    copy.write_bytes(data.read_bytes())
    second = audit_flow(config_for(copy, tmp_path / "out", "t-cache", mlflow={"enabled": False}))
    assert calls == [0.05]
    assert "group_parity (cached)" in second.result.metadata.timings
    assert "group_parity" in first.result.metadata.timings
    a, b = first.result.to_dict(), second.result.to_dict()
    assert a["methods"] == b["methods"] and a["verdict"] == b["verdict"]

    cfg["methods"] = {"group_parity": {"tolerance": 0.1}}
    third = audit_flow(cfg)
    assert calls == [0.05, 0.1]
    assert third.result.method("group_parity").parameters["tolerance"] == 0.1

    cfg["cache"]["enabled"] = False
    audit_flow(cfg)
    assert calls == [0.05, 0.1, 0.1]


def test_mlflow_down_keeps_local_results_and_fairengine_log_records_them_later(
    tmp_path: Path, client, monkeypatch
) -> None:
    """Fault: the MLflow server is unreachable at the logging step. The run fails with a clear
    error naming the store and the local files, which stay on disk; ``fairengine log`` then
    records them once a store is reachable."""
    import socket

    from fairengine.errors import ResultLoggingError
    from flows.audit import audit_flow
    from flows.cli import main
    from tasks.settings import default_tracking_uri

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "d.csv"
    scored_frame(seed=11).to_csv(data, index=False)
    down = {"tracking_uri": f"http://127.0.0.1:{port}", "experiment": "t-down"}
    with pytest.raises(ResultLoggingError) as info:
        audit_flow(config_for(data, tmp_path / "out", "t-down", mlflow=down))
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "fairengine log --result" in message
    (saved,) = (tmp_path / "out").rglob("audit.json")
    assert (saved.parent / "report.html").is_file()
    assert str(saved) in message
    assert run_ids(client, "t-down") == []

    assert main(["log", "--result", str(saved), "--tracking-uri", default_tracking_uri()]) == 0
    (run_id,) = run_ids(client, "t-down")
    names = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert names == {"audit/audit.json", "audit/report.html", "audit/findings.json"}
    logged = json.loads(
        Path(client.download_artifacts(run_id, "audit/audit.json", str(tmp_path))).read_text()
    )
    assert logged == json.loads(saved.read_text())


def test_passing_audit_moves_the_approval_alias_and_tags_the_version(
    tmp_path: Path, client
) -> None:
    """``mlflow.approve_alias``: a ``pass`` verdict moves the alias to the audited version."""
    import mlflow
    from sklearn.dummy import DummyClassifier

    from fairengine.verdict import finalize_audit
    from tasks.mlflow_log import log_audit
    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    exp_id = client.create_experiment("train-pass", artifact_location=(tmp_path / "a").as_uri())
    X = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]})
    with mlflow.start_run(experiment_id=exp_id):
        info = mlflow.sklearn.log_model(
            DummyClassifier().fit(X, [0, 1, 0, 1]),
            name="model",
            registered_model_name="approved-model",
            pip_requirements=["scikit-learn"],
        )
    version = str(info.registered_model_version)
    result = finalize_audit(
        config={},
        dataset={"name": "d"},
        model={"name": "approved-model", "version": version},
        validation=None,
        methods=[],
    )
    assert result.verdict.status == "pass"
    out = log_audit(
        result,
        "<html></html>",
        tracking_uri=uri,
        experiment="t-approve",
        approve_alias="fair-approved",
        run_tags={"fairness.trigger": "test"},
    )
    mv = client.get_model_version_by_alias("approved-model", "fair-approved")
    assert str(mv.version) == version and mv.tags["fairness.verdict"] == "pass"
    assert client.get_run(out["run_id"]).data.tags["fairness.trigger"] == "test"
