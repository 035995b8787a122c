"""``fairengine.audit``: one call from Python gives the CLI's findings.

The same raw Adult sample (a CSV without a header, ``" ?"`` for missing values) is audited by
the ``fairengine`` command with a scikit-learn pipeline logged by ``mlflow.sklearn.log_model``
defaults, and by ``fairengine.audit`` with the fitted pipeline object, the same model's MLflow
URI, and a plain callable; every finding (estimate, interval, p-values, decision) must agree.
Then each other model kind (torch module, xgboost, lightgbm) is checked against the same model
logged to MLflow or called as a plain function, and the errors, the display, ``save``,
``load_audit`` and ``log_to_mlflow``.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import fairengine
from fairengine.errors import ConfigError, FairEngineError

NAMES = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income",
]  # fmt: skip
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORICAL = ["workclass", "occupation"]
ROWS = 5000
SCORE_METHODS = ["group_parity", "group_metrics", "permutation_tests", "intersectional"]
COMPARED = ["key", "decision", "estimate", "ci_low", "ci_high", "pvalue", "adjusted_pvalue"]


def _same_findings(a: pd.DataFrame, b: pd.DataFrame) -> None:
    left = a[COMPARED].sort_values("key").reset_index(drop=True)
    right = b[COMPARED].sort_values("key").reset_index(drop=True)
    assert len(left) > 10
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def adult(tmp_path_factory, shared_dir: Path):
    """A raw Adult sample as a headerless CSV, the frame a user reads from it, and a pipeline
    fitted on it (categorical columns one-hot encoded, as in the README's trial)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    folder = tmp_path_factory.mktemp("api")
    with gzip.open(shared_dir / "data/adult/adult.data.gz", "rt") as raw:
        lines = [next(raw) for _ in range(ROWS)]  # the raw lines: ", " delimiters, " ?"
    path = folder / "adult_sample.csv"
    path.write_text("".join(lines))
    # what a user reads: the CLI audits the same rows (no role column has a "?"; the model's
    # feature columns keep theirs as a category, as the CLI's warning says)
    frame = pd.read_csv(path, names=NAMES, skipinitialspace=True)
    features = NUMERIC + CATEGORICAL
    train = frame[(frame[CATEGORICAL] != "?").all(axis=1)]
    pipe = Pipeline(
        [
            (
                "prep",
                ColumnTransformer(
                    [
                        ("num", StandardScaler(), NUMERIC),
                        ("cat", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL),
                    ]
                ),
            ),
            ("clf", LogisticRegression(max_iter=1000)),
        ]
    )
    pipe.fit(train[features], train["income"])
    return {"folder": folder, "path": path, "frame": frame, "features": features, "pipe": pipe}


def _experiment(folder: Path) -> str:
    """An experiment whose artifacts stay in the test's folder (not ``./mlruns``)."""
    from mlflow import MlflowClient

    client = MlflowClient()
    found = client.get_experiment_by_name("python-api")
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment("python-api", artifact_location=(folder / "art").as_uri()))


@pytest.fixture(scope="module")
def logged_pipe(adult) -> str:
    """The pipeline logged the default MLflow way and registered; its ``models:/`` URI."""
    import mlflow

    with mlflow.start_run(experiment_id=_experiment(adult["folder"])):
        mlflow.sklearn.log_model(
            adult["pipe"],
            name="model",
            registered_model_name="api-adult",
            input_example=adult["frame"][adult["features"]].head(5),
        )
    return "models:/api-adult/1"


def _settings(adult) -> dict:
    return {
        "label": "income",
        "protected": ["sex", "race"],
        "positive_label": ">50K",
        "validation": {"min_group_size": 20},
        "cache": {"enabled": False},
        "output": {"dir": str(adult["folder"] / "reports")},
    }


@pytest.fixture(scope="module")
def cli_findings(adult, logged_pipe) -> pd.DataFrame:
    """The CLI's audit of the CSV with the logged model, from the findings of its audit.json."""
    config = {
        "data": {"path": str(adult["path"]), "names": NAMES, "missing": "drop"},
        "columns": {"label": "income", "protected": ["sex", "race"]},
        "model": {"uri": logged_pipe},
        "positive_label": ">50K",
        "validation": {"min_group_size": 20},
        "cache": {"enabled": False},
        "output": {"dir": str(adult["folder"] / "cli")},
    }
    cfg = adult["folder"] / "audit.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(cfg), "--no-mlflow"],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ.copy(),
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]
    (json_path,) = (adult["folder"] / "cli").glob("*/audit.json")
    return fairengine.load_audit(json_path).to_frame()


def test_the_pipeline_object_on_the_raw_file_gives_the_cli_findings(adult, cli_findings) -> None:
    result = fairengine.audit(
        adult["path"], names=NAMES, missing="drop", model=adult["pipe"], **_settings(adult)
    )
    assert isinstance(result, fairengine.AuditResult)
    assert result.model.uri == "python:Pipeline[LogisticRegression]"
    assert "predict_proba of the Python model" in result.model.score_source["description"]
    assert {m.method for m in result.methods if m.status == "ok"} >= set(SCORE_METHODS)
    _same_findings(result.to_frame(), cli_findings)


def test_a_dataframe_and_the_mlflow_uri_give_the_cli_findings(
    adult, logged_pipe, cli_findings
) -> None:
    given = adult["frame"].copy()
    result = fairengine.audit(given, model=logged_pipe, **_settings(adult))
    pd.testing.assert_frame_equal(given, adult["frame"])  # the caller's frame is unchanged
    assert result.model.name == "api-adult" and result.model.version == "1"
    _same_findings(result.to_frame(), cli_findings)


def test_a_plain_callable_gives_the_same_score_based_findings(adult, cli_findings) -> None:
    pipe = adult["pipe"]
    result = fairengine.audit(
        adult["frame"],
        model=lambda x: pipe.predict_proba(x)[:, list(pipe.classes_).index(">50K")],
        features=adult["features"],
        methods=SCORE_METHODS,
        **_settings(adult),
    )
    assert result.model.uri.startswith("python:callable")
    wanted = cli_findings[cli_findings["method"].isin(SCORE_METHODS)]
    _same_findings(result.to_frame(), wanted)


# --------------------------------------------------------------------------- other model kinds
@pytest.fixture(scope="module")
def numeric(adult):
    frame = adult["frame"][[*NUMERIC, "sex", "race", "income"]].copy()
    frame[NUMERIC] = (frame[NUMERIC] - frame[NUMERIC].mean()) / frame[NUMERIC].std()
    frame["y"] = (frame.pop("income") == ">50K").astype(int)
    return frame


def _kind_settings(adult) -> dict:
    return {
        "label": "y",
        "protected": ["sex"],
        "features": NUMERIC,
        "methods": SCORE_METHODS,
        "cache": {"enabled": False},
        "output": {"dir": str(adult["folder"] / "kinds")},
    }


def test_a_torch_module_matches_the_same_module_logged_with_mlflow_pytorch(adult, numeric) -> None:
    import mlflow
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(len(NUMERIC), 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
    )
    x = torch.tensor(numeric[NUMERIC].to_numpy(np.float32))
    y = torch.tensor(numeric["y"].to_numpy(np.float32)).unsqueeze(1)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(net(x), y).backward()
        opt.step()
    net.train()  # the audit scores in inference mode and leaves the module's own mode alone
    with mlflow.start_run(experiment_id=_experiment(adult["folder"])):
        info = mlflow.pytorch.log_model(net, name="net", input_example=x[:5].numpy())
    settings = {**_kind_settings(adult), "score_type": "raw"}
    # MLflow 3 logs torch modules traced (pt2) with a float32 tensor signature, which refuses
    # float64 columns: the data carries float32 features, as the module itself computes in
    data = numeric.astype({c: np.float32 for c in NUMERIC})
    direct = fairengine.audit(data, model=net, **settings)
    logged = fairengine.audit(data, model=info.model_uri, **settings)
    assert net.training
    assert direct.model.score_source["flavor"] == "pytorch"
    _same_findings(direct.to_frame(), logged.to_frame())


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_boosted_trees_score_through_predict_proba(adult, numeric, library: str) -> None:
    if library == "xgboost":
        from xgboost import XGBClassifier

        clf = XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1)
    else:
        from lightgbm import LGBMClassifier

        clf = LGBMClassifier(n_estimators=20, num_leaves=7, n_jobs=1, verbose=-1)
    clf.fit(numeric[NUMERIC], numeric["y"])
    direct = fairengine.audit(numeric, model=clf, **_kind_settings(adult))
    assert direct.model.score_source["kind"] == "predict_proba"
    assert direct.model.score_source["flavor"] == library
    plain = fairengine.audit(
        numeric, model=lambda x: clf.predict_proba(x)[:, 1], **_kind_settings(adult)
    )
    _same_findings(direct.to_frame(), plain.to_frame())


def test_a_model_object_is_cached_by_its_content(adult, numeric) -> None:
    """The same fitted object reuses the method steps; a refitted one (other coefficients)
    does not: the cache key holds the object's content fingerprint, not its type."""
    from sklearn.linear_model import LogisticRegression

    settings = {**_kind_settings(adult), "cache": {"dir": str(adult["folder"] / "cache")}}
    clf = LogisticRegression(C=1.0).fit(numeric[NUMERIC], numeric["y"])
    first = fairengine.audit(numeric, model=clf, **settings)
    again = fairengine.audit(numeric, model=clf, **settings)
    refit = LogisticRegression(C=0.001).fit(numeric[NUMERIC], numeric["y"])
    other = fairengine.audit(numeric, model=refit, **settings)

    def cached(r) -> set[str]:
        return {k for k in r.metadata.timings if k.endswith("(cached)")}

    assert cached(first) == set()
    assert cached(again) == {f"{m} (cached)" for m in SCORE_METHODS}
    assert cached(other) == set()
    assert first.model.fingerprint != other.model.fingerprint
    _same_findings(first.to_frame(), again.to_frame())


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"protcted": ["sex"]}, "unknown keyword 'protcted'; did you mean 'protected'?"),
        ({"methods": ["fliptst"]}, "unknown method 'fliptst'; did you mean 'fliptest'?"),
        ({"methods": {"permutation_test": {}}}, "did you mean 'permutation_tests'?"),
        ({"alpha": 2}, "alpha must lie in (0, 1)"),
        ({"decisions": {"gap_nul": "zero"}}, "did you mean 'decisions.gap_null'?"),
        ({"model": 42}, "model: expected a fitted classifier with predict_proba"),
        ({"label": "incme"}, "incme"),
    ],
)
def test_bad_keywords_are_clear_errors(adult, keywords: dict, message: str) -> None:
    settings = {"label": "income", "protected": ["sex"], "model": adult["pipe"]}
    settings.update(keywords)
    with pytest.raises(FairEngineError) as info:
        fairengine.audit(adult["frame"], positive_label=">50K", **settings)
    assert message in str(info.value)


def test_data_of_another_type_names_the_parameter(adult) -> None:
    expected = "data: expected a pandas, Dask or Spark DataFrame, the path"
    with pytest.raises(ConfigError, match=expected):
        fairengine.audit(adult["frame"].to_numpy(), label="income", protected="sex")


# --------------------------------------------------------------------------- the ways out
def test_display_save_load_and_log(adult, tmp_path: Path) -> None:
    frame = adult["frame"].copy()
    frame["sex"] = frame["sex"].map({"Male": "Male", "Female": "<b>Female & Ø</b>"})
    result = fairengine.audit(frame, model=adult["pipe"], **_settings(adult))
    shown = result._repr_html_()
    assert result.verdict.status.upper() in shown
    assert result.verdict.summary.split(" (")[0] in shown
    assert "&lt;b&gt;Female &amp; Ø&lt;/b&gt;" in shown and "<b>Female" not in shown
    n_rows = shown.count("<tr>") - 1  # the header row
    deciding = [f for f in result.findings() if f.counts]
    assert n_rows == min(10, len(deciding))
    if len(deciding) > 10:
        assert f"{len(deciding) - 10:,} more" in shown
    assert "rejected" in repr(result) and result.audit_id in repr(result)

    table = result.to_frame()
    assert len(table) == len(result.findings())
    assert table["estimate"].dtype == float
    assert set(table["decision"]) <= {
        "reject",
        "fail_to_reject",
        "undetermined",
        "not_tested",
        "supporting",
    }

    paths = result.save(tmp_path / "saved")
    assert Path(paths["report"]).read_text(encoding="utf-8").lstrip().startswith("<!DOCTYPE html>")
    back = fairengine.load_audit(paths["json"])
    assert back.audit_id == result.audit_id
    _same_findings(back.to_frame(), table)

    info = result.log_to_mlflow(experiment="api-tests")
    from mlflow import MlflowClient

    run = MlflowClient().get_run(info["run_id"])
    assert run.data.tags["fairness.verdict"] == result.verdict.status
    assert "tests_rejected" in run.data.metrics
    again = result.log_to_mlflow(experiment="api-tests")
    assert again["run_id"] == info["run_id"]  # not logged twice
