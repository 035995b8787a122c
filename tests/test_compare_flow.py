"""Challenger vs champion end to end: ``fairengine.compare`` and ``fairengine compare``.

Known truth on the Lipton et al. hiring data (hair length is a proxy of gender): a model on
work experience only is fairer than the champion that also uses hair length, and a model that
leans on hair length harder is worse. Through the CLI with a real MLflow registry (alias
``champion``), the candidate version is tagged and the exit code gates; then a real pair of
Adult models, the unconstrained one and its RTDP-mitigated version registered by an audit, is
compared.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.special import expit

import fairengine
from fairengine.datasets import load_embedded

FEATURES = ["work_exp", "hair_len"]


@pytest.fixture(scope="module")
def hiring():
    from sklearn.linear_model import LogisticRegression

    frame = load_embedded("lipton_hiring").frame
    champion = LogisticRegression().fit(frame[FEATURES], frame["hired"])
    fairer = LogisticRegression().fit(frame[["work_exp"]], frame["hired"])

    def leaning(x: pd.DataFrame) -> np.ndarray:  # the champion minus 1.5 sd of hair length
        zz = (x["hair_len"] - frame["hair_len"].mean()) / frame["hair_len"].std()
        return expit(champion.decision_function(x[FEATURES]) - 1.5 * zz.to_numpy())

    return {"frame": frame, "champion": champion, "fairer": fairer, "leaning": leaning}


def _settings(tmp: Path) -> dict:
    return {
        "label": "hired",
        "protected": "gender",  # each model takes the columns it was fitted on
        "output": {"dir": str(tmp)},
    }


def test_the_same_model_is_not_worse_with_a_zero_interval(hiring, tmp_path: Path) -> None:
    c = fairengine.compare(
        hiring["frame"],
        baseline=hiring["champion"],
        candidate=hiring["champion"],
        **_settings(tmp_path),
    )
    assert c.verdict.status == "not_worse"
    table = c.to_frame()
    assert len(table) == 3 and set(table["metric"]) == {"selection_rate", "tpr", "fpr"}
    assert (table["difference"] == 0).all() and (table["low"] == 0).all()
    assert (table["high"] == 0).all()
    assert Path(c.paths["report"]).is_file() and Path(c.paths["json"]).is_file()
    # two Python objects are told apart by their content hash, one object is one model
    assert c.baseline.uri == c.candidate.uri
    assert c.baseline.uri.startswith("python:LogisticRegression@")
    assert "NOT WORSE" in c._repr_html_()


def test_a_fairer_candidate_passes_and_a_worse_one_fails(hiring, tmp_path: Path) -> None:
    fairer = fairengine.compare(
        hiring["frame"],
        baseline=hiring["champion"],
        candidate=hiring["fairer"],
        **_settings(tmp_path),
    )
    sel = fairer.result.question("selection_rate", "gender", "man", "woman")
    assert abs(sel.gap_candidate) < abs(sel.gap_baseline)
    assert sel.high < 0  # shown fairer, not just within the margin
    assert fairer.verdict.status == "not_worse", fairer.verdict.summary

    worse = fairengine.compare(
        hiring["frame"],
        baseline=hiring["champion"],
        candidate=hiring["leaning"],
        **_settings(tmp_path),
    )
    sel = worse.result.question("selection_rate", "gender", "man", "woman")
    assert sel.low > worse.result.delta and sel.decision == "worse"
    assert worse.verdict.status == "worse"
    assert fairer.baseline.uri != fairer.candidate.uri
    # the paired gaps are the rates of each model's thresholded predictions
    frame = hiring["frame"]
    pred = hiring["champion"].predict_proba(frame[FEATURES])[:, 1] > 0.5
    man = (frame["gender"] == "man").to_numpy()
    assert sel.gap_baseline == pytest.approx(pred[man].mean() - pred[~man].mean(), abs=1e-12)
    on_disk = json.loads(Path(worse.paths["json"]).read_text())
    assert on_disk["schema"] == "fairengine.comparison/1"
    assert on_disk["verdict"]["status"] == "worse"


def _register(model, name: str, folder: Path) -> str:
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient()
    exp = client.get_experiment_by_name("compare-train")
    exp_id = (
        exp.experiment_id
        if exp
        else client.create_experiment("compare-train", artifact_location=(folder / "a").as_uri())
    )
    with mlflow.start_run(experiment_id=exp_id):
        info = mlflow.sklearn.log_model(model, name="model", registered_model_name=name)
    return str(info.registered_model_version)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ.copy(),
    )


def test_the_cli_gates_tags_the_candidate_and_logs_a_run(hiring, tmp_path: Path) -> None:
    from mlflow import MlflowClient
    from sklearn.linear_model import LogisticRegression

    frame = hiring["frame"]
    v1 = _register(hiring["champion"], "hire", tmp_path)
    client = MlflowClient()
    client.set_registered_model_alias("hire", "champion", v1)
    # a candidate that leans on the proxy: trained on hair length alone
    proxy_x = frame[FEATURES].assign(work_exp=0.0)
    proxy = LogisticRegression().fit(proxy_x, frame["hired"])
    v2 = _register(proxy, "hire", tmp_path)
    data = tmp_path / "hiring.csv"
    frame.to_csv(data, index=False)
    config = {
        "data": {"path": str(data)},
        "columns": {"label": "hired", "protected": ["gender"], "features": FEATURES},
        "model": {"uri": f"models:/hire/{v2}"},
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"experiment": "compare-tests"},
    }
    cfg = tmp_path / "audit.yaml"
    cfg.write_text(yaml.safe_dump(config))

    out = _cli("compare", "--config", str(cfg), "--baseline", "models:/hire@champion")
    assert out.returncode == 1, out.stderr[-3000:]
    assert "Verdict:     WORSE" in out.stdout
    tags = client.get_model_version("hire", v2).tags
    assert tags["fairness.comparison"] == "worse"
    assert tags["fairness.comparison_baseline"] == "models:/hire@champion"
    run = client.get_run(tags["fairness.comparison_run_id"])
    assert run.data.tags["fairness.kind"] == "comparison"
    assert run.data.metrics["comparison_verdict_worse"] == 1.0
    assert run.data.metrics["comparison_worse"] >= 1
    assert any(k.startswith("cmp_dp.gender.") for k in run.data.metrics)
    from tasks.mlflow_log import previous_audits
    from tasks.settings import default_tracking_uri

    # the comparison run is not an audit: the next audit's trend table does not list it
    assert previous_audits(default_tracking_uri(), "compare-tests", "hire", []) == []
    names = {a.path for a in client.list_artifacts(run.info.run_id, "comparison")}
    assert names == {"comparison/comparison.json", "comparison/comparison.html"}

    same = _cli(
        "compare", "--config", str(cfg), "--baseline", f"models:/hire/{v1}",
        "--candidate", "models:/hire@champion", "--no-mlflow",
    )  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr[-3000:]
    assert "Verdict:     NOT WORSE" in same.stdout

    bad = _cli("compare", "--config", str(cfg), "--no-mlflow")
    assert bad.returncode == 2 and "--baseline" in bad.stderr


# --------------------------------------------------------------------------- a real Adult pair
NAMES = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income",
]  # fmt: skip
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]


def test_the_rtdp_mitigated_adult_model_against_the_unconstrained_one(
    tmp_path: Path, shared_dir: Path
) -> None:
    """An audit of the unconstrained Adult model registers its RTDP-mitigated version
    (selection-rate constraint over sex); comparing the two on the same rows shows the
    mitigated one not worse on the selection-rate gap it was fitted to reduce."""
    from sklearn.linear_model import LogisticRegression

    from flows.audit import audit_flow

    with gzip.open(shared_dir / "data/adult/adult.data.gz", "rt") as raw:
        lines = [next(raw) for _ in range(12000)]
    path = tmp_path / "adult.csv"
    path.write_text("".join(lines))
    frame = pd.read_csv(path, names=NAMES, skipinitialspace=True)
    model = LogisticRegression(max_iter=1000).fit(frame[NUMERIC], frame["income"])
    v1 = _register(model, "adult-pair", tmp_path)
    base = {
        "data": {"path": str(path), "names": NAMES},
        "columns": {"label": "income", "protected": ["sex"], "features": NUMERIC},
        "positive_label": ">50K",
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"experiment": "adult-pair"},
        "cache": {"enabled": False},
    }
    off = {"enabled": False}
    run = audit_flow(
        {
            **base,
            "model": {"uri": f"models:/adult-pair/{v1}"},
            "methods": {
                "permutation_tests": off,
                "individual_fairness": off,
                "intersectional": off,
                "mitigation": {
                    "enabled": True,
                    "register": True,
                    "register_if": "always",
                    "constraints": ["sp"],
                    "epsilon": 0.2,
                    "variants": ["overall"],
                    "max_seconds": 60,
                },
            },
        }
    )
    mitigated = run.mlflow["mitigated_model_uri"]
    c = fairengine.compare(
        path,
        names=NAMES,
        baseline=f"models:/adult-pair/{v1}",
        candidate=mitigated,
        label="income",
        protected="sex",  # each model takes its own inputs (the mitigated one also sex)
        positive_label=">50K",
        comparison={"metrics": ["selection_rate"]},
        output={"dir": str(tmp_path / "cmp")},
    )
    (q,) = c.result.questions
    assert abs(q.gap_candidate) < abs(q.gap_baseline) / 2, q
    assert q.decision == "not_worse" and q.high < 0, q.reading
    assert c.verdict.status == "not_worse"
    assert any("drawn from it" in w for w in c.warnings)  # the RTDP decides by a draw


def test_the_registry_audit_compares_a_new_version_with_the_champion(
    hiring, tmp_path: Path
) -> None:
    """The deployment's flow: with comparison.baseline "@champion", auditing version 2 also
    compares it with the champion (tag, verdict in the flow's result); auditing the champion
    itself skips the comparison."""
    from mlflow import MlflowClient
    from sklearn.linear_model import LogisticRegression

    from deployments.registry_audit import registry_audit_flow

    frame = hiring["frame"]
    v1 = _register(hiring["champion"], "hire-deploy", tmp_path)
    client = MlflowClient()
    client.set_registered_model_alias("hire-deploy", "champion", v1)
    proxy = LogisticRegression().fit(frame[FEATURES].assign(work_exp=0.0), frame["hired"])
    v2 = _register(proxy, "hire-deploy", tmp_path)
    data = tmp_path / "hiring.csv"
    frame.to_csv(data, index=False)
    off = {"enabled": False}
    config = {
        "data": {"path": str(data)},
        "columns": {"label": "hired", "protected": ["gender"]},
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"experiment": "deploy-compare"},
        "methods": {m: off for m in ("permutation_tests", "intersectional", "individual_fairness")},
        "comparison": {"baseline": "@champion"},
    }
    result = registry_audit_flow("hire-deploy", v2, base_config=config)
    assert result["status"] == "audited"
    assert result["comparison"]["status"] == "compared", result["comparison"]
    assert result["comparison"]["verdict"] == "worse"
    assert result["comparison"]["baseline"] == "models:/hire-deploy@champion"
    tags = client.get_model_version("hire-deploy", v2).tags
    assert tags["fairness.comparison"] == "worse" and tags["fairness.verdict"] in {"pass", "fail"}
    same = registry_audit_flow("hire-deploy", v1, base_config=config)
    assert same["comparison"]["status"] == "skipped"
