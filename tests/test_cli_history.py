"""``fairengine history``: past audits read back from a real SQLite MLflow store.

Two audits of a registered scikit-learn model (version 1 scores both sexes alike and passes,
version 2 shifts one sex's scores and fails) and one audit of a score column (no model) are run
through the real flow (embedded Prefect test harness) into a store in a temporary folder; the
command then lists them, newest first, in each format, filtered by model and experiment, and
the counts agree with the audits' own decision records.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from tasks.audit_history_list import COLUMNS, format_table, list_audits

pytestmark = pytest.mark.flow
REPO = Path(__file__).resolve().parents[1]
MODEL = "history-model"


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def _frame(shift: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 2000
    sex = rng.choice(["f", "m"], n)
    y = rng.binomial(1, 0.4, n)
    x1 = rng.normal(2.0 * y - 1.0, 1.0)
    x2 = np.where(sex == "m", shift, 0.0) + rng.normal(0, 0.1, n)
    return pd.DataFrame({"sex": sex, "y": y, "x1": x1, "x2": x2})


@pytest.fixture(scope="module")
def audits(
    tmp_path_factory: pytest.TempPathFactory, prefect_server: None
) -> Iterator[dict[str, Any]]:
    """Three audits in one store: model v1 (pass), model v2 (fail), a score column. MLflow's
    tracking and registry URIs (``set_tracking_uri`` also sets ``$MLFLOW_TRACKING_URI``) are
    restored afterwards, so later test modules keep the suite's isolated store."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.tracking._model_registry import utils as registry_state
    from mlflow.tracking._tracking_service import utils as tracking_state

    tmp = tmp_path_factory.mktemp("history")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)

    saved_env = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    saved = (tracking_state._tracking_uri, registry_state._registry_uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield _history_audits(client, uri, tmp)
    finally:
        tracking_state._tracking_uri, registry_state._registry_uri = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _history_audits(client: Any, uri: str, tmp: Path) -> dict[str, Any]:
    import mlflow
    from sklearn.linear_model import LogisticRegression

    from flows.audit import audit_flow

    exp = client.create_experiment("train", artifact_location=(tmp / "art").as_uri())
    methods = {
        "permutation_tests": {"n_permutations": 199},
        "fliptest": {"enabled": False},
        "individual_fairness": {"enabled": False},
        "intersectional": {"enabled": False},
        "mitigation": {"enabled": False},
    }
    runs = {}
    for version, shift in (("1", 0.0), ("2", 3.0)):
        frame = _frame(shift, seed=int(version))
        # version 2 learns from x2, which is the sex: its scores differ between the sexes
        fit = frame.assign(y=np.where(frame["x2"] > 1.5, 1, frame["y"]))
        model = LogisticRegression().fit(fit[["x1", "x2"]], fit["y"])
        with mlflow.start_run(experiment_id=exp):
            info = mlflow.sklearn.log_model(
                model,
                name="model",
                registered_model_name=MODEL,
                pyfunc_predict_fn="predict_proba",
                pip_requirements=["scikit-learn"],
            )
        assert str(info.registered_model_version) == version
        data = tmp / f"v{version}.parquet"
        frame.to_parquet(data, index=False)
        runs[version] = audit_flow(
            {
                "name": f"v{version}",
                "data": {"path": str(data)},
                "columns": {"label": "y", "protected": ["sex"], "features": ["x1", "x2"]},
                "model": {"uri": f"models:/{MODEL}/{version}"},
                "methods": methods,
                "output": {"dir": str(tmp / "out")},
                "cache": {"enabled": False},
                "mlflow": {"tracking_uri": uri, "experiment": "audits"},
            }
        )
    scores = _frame(0.0, seed=9)
    scores["score"] = 1 / (1 + np.exp(-scores["x1"]))
    scores.to_csv(tmp / "scores.csv", index=False)
    runs["scores"] = audit_flow(
        {
            "name": "scores",
            "data": {"path": str(tmp / "scores.csv")},
            "columns": {"label": "y", "protected": ["sex"], "score": "score"},
            "methods": methods,
            "output": {"dir": str(tmp / "out")},
            "cache": {"enabled": False},
            "mlflow": {"tracking_uri": uri, "experiment": "other-audits"},
        }
    )
    return {"uri": uri, "runs": runs, "tmp": tmp}


def _history(capsys: pytest.CaptureFixture[str], uri: str, *args: str) -> tuple[int, str]:
    code = main(["history", "--tracking-uri", uri, *args])
    return code, capsys.readouterr().out


def test_the_two_audits_differ_in_verdict(audits: dict[str, Any]) -> None:
    runs = audits["runs"]
    assert runs["1"].result.verdict.status == "pass"
    assert runs["2"].result.verdict.status == "fail"


def test_json_lists_every_audit_newest_first_with_its_counts(
    audits: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _history(capsys, audits["uri"], "--format", "json")
    assert code == 0
    rows = json.loads(out)
    runs = audits["runs"]
    assert [r["run_id"] for r in rows] == [runs[k].mlflow["run_id"] for k in ("scores", "2", "1")]
    assert [r["started"] for r in rows] == sorted((r["started"] for r in rows), reverse=True)
    for row, key in zip(rows, ("scores", "2", "1"), strict=True):
        result = runs[key].result
        assert set(row) == set(COLUMNS)
        assert row["verdict"] == result.verdict.status
        assert row["audit_id"] == result.audit_id
        assert row["rejected"] == result.decisions.n_rejected
        assert row["not_rejected"] == result.decisions.n_not_rejected
        assert row["undetermined"] == result.decisions.n_undetermined
        assert row["kind"] == "audit"
    assert rows[1]["model_name"] == MODEL and rows[1]["model_version"] == "2"
    assert rows[2]["model_version"] == "1" and rows[2]["experiment"] == "audits"
    assert rows[0]["model_name"] is None and rows[0]["experiment"] == "other-audits"
    assert rows[1]["rejected"] >= 1 and rows[2]["rejected"] == 0


def test_model_experiment_and_limit_filter(
    audits: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    runs, uri = audits["runs"], audits["uri"]
    code, out = _history(capsys, uri, "--model", MODEL, "--format", "json")
    assert code == 0
    assert [r["model_version"] for r in json.loads(out)] == ["2", "1"]
    code, out = _history(capsys, uri, "--model", MODEL, "--limit", "1", "--format", "json")
    assert [r["run_id"] for r in json.loads(out)] == [runs["2"].mlflow["run_id"]]
    code, out = _history(capsys, uri, "--experiment", "other-audits", "--format", "json")
    assert [r["run_id"] for r in json.loads(out)] == [runs["scores"].mlflow["run_id"]]
    code, out = _history(capsys, uri, "--model", "no-such-model")
    assert code == 0 and out.strip() == "No audits found."


def test_csv_has_a_header_and_one_row_per_audit(
    audits: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _history(capsys, audits["uri"], "--format", "csv", "--model", MODEL)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert tuple(rows[0]) == COLUMNS
    assert [(r["model_version"], r["verdict"]) for r in rows] == [("2", "fail"), ("1", "pass")]
    assert rows[0]["run_id"] == audits["runs"]["2"].mlflow["run_id"]


def test_the_table_shows_date_version_verdict_counts_and_run(
    audits: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _history(capsys, audits["uri"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["date", "(UTC)", "model", "version"]
    assert "not rej." in lines[0] and "run id" in lines[0]
    assert len(lines) == 2 + 3
    v2 = audits["runs"]["2"]
    line = next(x for x in lines if v2.mlflow["run_id"] in x)
    cells = line.split()
    assert cells[2:5] == [MODEL, "2", "FAIL"]
    d = v2.result.decisions
    assert cells[5:8] == [str(d.n_rejected), str(d.n_not_rejected), str(d.n_undetermined)]
    scores_line = next(x for x in lines if audits["runs"]["scores"].mlflow["run_id"] in x)
    assert scores_line.split()[2:4] == ["-", "-"]  # no registered model


def test_unknown_experiment_is_a_clear_error(
    audits: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["history", "--tracking-uri", audits["uri"], "--experiment", "audit"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no MLflow experiment named 'audit'" in err and "did you mean 'audits'?" in err
    assert main(["history", "--tracking-uri", audits["uri"], "--limit", "0"]) == 2


def test_a_store_with_nothing_logged_lists_nothing_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["history", "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out.strip() == "No audits found."
    assert not (tmp_path / "empty.db").exists()
    assert list_audits is not None and format_table([]) == "No audits found."


def test_the_console_command_prints_csv(audits: dict[str, Any]) -> None:
    """The command as a user runs it (its own process)."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "history",
            "--tracking-uri",
            audits["uri"],
            "-f",
            "csv",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    runs = audits["runs"]
    assert [r["run_id"] for r in rows] == [runs[k].mlflow["run_id"] for k in ("scores", "2", "1")]
    assert [r["verdict"] for r in rows] == [
        runs[k].result.verdict.status for k in ("scores", "2", "1")
    ]


def test_evaluation_runs_and_counts_read_from_audit_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An evaluation run (the evaluator's ``fairness.``-prefixed count metrics) is listed; a
    count that no metric carries comes from the run's audit.json, and is empty (``-`` / null)
    when that artifact is missing; runs that are not audits are not listed."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    exp = client.create_experiment("evals", artifact_location=(tmp_path / "art").as_uri())
    evaluation = client.create_run(
        exp,
        tags={"fairness.audit_id": "e1", "fairness.verdict": "fail", "fairness.kind": "evaluation"},
    ).info.run_id
    client.log_metric(evaluation, "fairness.tests_rejected", 2)
    client.log_metric(evaluation, "fairness.tests_undetermined", 1)
    client.log_dict(evaluation, {"decisions": {"n_not_rejected": 5}}, "audit/audit.json")
    client.set_terminated(evaluation)
    time.sleep(0.05)  # a later start time: listed first
    bare = client.create_run(exp, tags={"fairness.audit_id": "b1", "fairness.kind": "audit"})
    client.set_terminated(bare.info.run_id)
    client.set_terminated(client.create_run(exp, tags={"other": "run"}).info.run_id)
    unfinished = client.create_run(exp, tags={"fairness.audit_id": "u1"})  # still running
    assert unfinished.info.status == "RUNNING"

    code, out = _history(capsys, uri, "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == [bare.info.run_id, evaluation]
    assert rows[1] | {"started": None} == {
        "started": None,
        "model_name": None,
        "model_version": None,
        "verdict": "fail",
        "rejected": 2,
        "not_rejected": 5,
        "undetermined": 1,
        "run_id": evaluation,
        "audit_id": "e1",
        "kind": "evaluation",
        "experiment": "evals",
    }
    assert [rows[0][k] for k in ("verdict", "rejected", "not_rejected", "undetermined")] == [
        None,
        None,
        None,
        None,
    ]
    code, out = _history(capsys, uri)
    bare_line = next(x for x in out.splitlines() if bare.info.run_id in x)
    assert bare_line.split()[2:8] == ["-"] * 6
