"""``task: regression`` end to end (issue "Beyond binary classifiers", regression part): the
config's task and its binary-only settings, the regression data contract, the registry's
"not applicable" listing, the regression method through the flow (score column and a model
object), the sequential decisions drawing more permutations for its tests, and the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

import fairengine
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError, FairEngineError
from fairengine.group_pairs import pair_seed, planned_pairs
from fairengine.registry import METHODS
from fairengine.regression.config import RegressionConfig
from fairengine.regression.method import run_regression_metrics
from fairengine.regression.permutation import pair_permutation_tests
from fairengine.regression.resampler import RegressionResampler
from fairengine.roles import ColumnRoles

BINARY_METHODS = [
    m.name for m in METHODS if m.applies_to("binary") and not m.applies_to("regression")
]
"""The methods of binary audits only (FlipTest and individual fairness apply to regression)."""


def _frame(n: int = 1200, shift: float = 0.6, seed: int = 0) -> pd.DataFrame:
    """A target and a prediction whose residual is shifted by ``shift`` for group B."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    group = rng.choice(["A", "B"], size=n, p=[0.6, 0.4])
    sex = rng.choice(["f", "m"], size=n)
    y = 2.0 * x + rng.normal(scale=1.0, size=n) + shift * (group == "B")
    return pd.DataFrame({"x": x, "group": group, "sex": sex, "y": y, "pred": 2.0 * x})


# ----------------------------------------------------------------------------- config
def test_regression_replaces_the_binary_defaults() -> None:
    cfg = AuditConfig.from_dict({"task": "regression"})
    assert (cfg.task, cfg.score_type, cfg.threshold) == ("regression", "value", None)
    assert AuditConfig.from_dict({}).task == "binary"
    # what a regression audit accepts explicitly
    ok = AuditConfig.from_dict({"task": "regression", "score_type": "value", "threshold": None})
    assert ok.score_type == "value"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"task": "regression", "threshold": 0.3}, "threshold: binary-classifier setting"),
        ({"task": "regression", "score_type": "raw"}, "score_type: binary-classifier setting"),
        ({"task": "regression", "positive_label": 1}, "positive_label: binary-classifier"),
        ({"task": "regresion"},
         "task must be one of ['binary', 'regression', 'multiclass', 'ranking']"),
        ({"score_type": "value"},
         "score_type 'value' is the prediction of a regression or ranking model"),
        ({"task": "regression", "methods": {"regression_metrics": {"metrics": ["rmse"]}}},
         "methods.regression_metrics.metrics must list some of"),
    ],
)  # fmt: skip
def test_bad_task_settings_are_clear_errors(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        AuditConfig.from_dict(raw)
    assert message in str(err.value)


# ----------------------------------------------------------------------------- data contract
def test_the_regression_dataset_keeps_the_target_and_the_prediction() -> None:
    df = _frame()
    roles = ColumnRoles(label="y", protected=("group",), score="pred")
    ds = AuditDataset.from_frame(df, roles, task="regression")
    assert ds.task == "regression" and ds.probability is None and ds.threshold is None
    np.testing.assert_array_equal(ds.label, df["y"].to_numpy())
    np.testing.assert_array_equal(ds.prediction, df["pred"].to_numpy())
    assert ds.summary()["task"] == "regression"
    assert (
        "task"
        not in AuditDataset.from_frame(
            df.assign(y=(df.y > 0).astype(int), pred=0.5), roles
        ).summary()
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"y": "text"}, "label column 'y' (the target of a regression audit) must be numeric"),
        ({"y": np.nan}, "label column 'y' (the target of a regression audit) has 1200 missing"),
        ({"pred": np.inf}, "score column 'pred' has 1200 missing or infinite"),
    ],
)
def test_a_bad_target_or_prediction_names_the_column(change: dict, message: str) -> None:
    df = _frame().assign(**change)
    roles = ColumnRoles(label="y", protected=("group",), score="pred")
    with pytest.raises(DataContractError) as err:
        AuditDataset.from_frame(df, roles, task="regression")
    assert message in str(err.value)


# ----------------------------------------------------------------------------- the method
def test_pairs_beyond_max_pairs_keep_the_largest_groups() -> None:
    assert planned_pairs(np.array([5, 50, 40]), 10) == [(0, 1), (0, 2), (1, 2)]
    assert planned_pairs(np.array([5, 50, 40, 30]), 2) == [(1, 2), (1, 3)]


def test_the_resampler_continues_each_pair_on_its_own_stream() -> None:
    df = _frame(n=400)
    ds = AuditDataset.from_frame(
        df, ColumnRoles(label="y", protected=("group", "sex"), score="pred"), task="regression"
    )
    cfg = RegressionConfig(n_permutations=99)
    res = run_regression_metrics(ds, cfg, seed=3)
    assert res.status == "ok"
    keys = {f.key for f in res.findings if f.pvalue is not None}
    sampler = RegressionResampler(ds, cfg, seed=3)
    assert keys and all(sampler.can_extend(k) for k in keys)
    assert not sampler.can_extend("reg_group_mae.group.A")  # estimates are not tested
    # the second pair (sex: f vs m) after 99 permutations: stream 1, start 99
    direct = pair_permutation_tests(
        ds.label, ds.prediction, ds.groups["sex"].codes.astype(np.intp),
        ds.groups["sex"].categories, group_a=0, group_b=1, n_permutations=50,
        seed=pair_seed(3, 1, 99), attribute="sex",
    )  # fmt: skip
    assert (
        sampler.draw("reg_mae.sex.f_m", "permutation", 99, 50) == direct.difference("mae").n_extreme
    )
    assert sampler.draw("reg_ks.sex.f_m", "permutation", 99, 50) == direct.distance("ks").n_extreme


# ----------------------------------------------------------------------------- the flow
@pytest.fixture(scope="module")
def regression_audit(session_tmp: Path) -> fairengine.AuditResult:
    df = _frame()
    return fairengine.audit(
        df[["y", "pred", "group", "sex"]],
        label="y",
        protected=["group", "sex"],
        score="pred",
        task="regression",
        mlflow={"enabled": False},
        output={"dir": str(session_tmp / "regression-reports")},
    )


def test_a_regression_audit_runs_only_the_methods_defined_for_it(regression_audit) -> None:
    status = {m.method: (m.status, m.reason or "") for m in regression_audit.methods}
    assert status["regression_metrics"][0] == "ok"
    for name in status.keys() - {"regression_metrics"}:
        assert status[name][0] == "not_run"
        assert status[name][1].startswith("not applicable to a regression audit") or (
            name in ("fliptest", "individual_fairness")  # defined for regression, not run here
        )
    # FlipTest is disabled by default; the gradient-flow test needs the model itself
    assert status["fliptest"][1] == "disabled in the config (methods.fliptest.enabled)"
    assert status["individual_fairness"][1].startswith("needs the model itself")
    for name in BINARY_METHODS:
        assert status[name][1].startswith("not applicable to a regression audit")
        assert "defined for binary classifiers" in status[name][1]


def test_the_shifted_group_is_found_and_the_equal_one_is_not(regression_audit) -> None:
    found = {f.key: f for f in regression_audit.findings()}
    # group B's residual is shifted by 0.6 (about 0.6 / 0.06 = 10 standard errors)
    bias = found["reg_mean_residual.group.A_B"]
    assert bias.decision == "reject"
    assert bias.interval is not None and bias.interval.low < -0.6 + 0.2 < bias.interval.high + 0.2
    # the decision needed more permutations than the first 1,999 (settled at maxT/Holm level)
    assert sum(p.resamples for p in bias.resampling) > 1999
    # the predictions of both groups come from the same law: not rejected
    assert found["reg_mean_prediction.group.A_B"].decision in ("fail_to_reject", "undetermined")
    assert found["reg_mean_residual.sex.f_m"].decision in ("fail_to_reject", "undetermined")
    assert regression_audit.verdict.status == "fail"
    assert regression_audit.dataset.task == "regression"
    assert regression_audit.dataset.score_type == "value"


def test_the_report_lists_the_inapplicable_methods_on_one_line(regression_audit) -> None:
    html = regression_audit.html()
    assert (
        "Not applicable to a regression audit (defined for binary classifiers; multiclass "
        "classifiers; rankings):" in html
    )
    assert "FlipTest (optimal-transport flipsets)" in html
    # the method that ran, and the two defined for regression that did not run (with why)
    assert html.count('<section class="method ') == 3
    assert "disabled in the config (methods.fliptest.enabled)" in html
    assert "values (regression)" in html


def test_a_binary_audit_lists_the_regression_method_as_not_applicable(session_tmp: Path) -> None:
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {"y": rng.integers(0, 2, 600), "s": rng.random(600), "g": rng.choice(["a", "b"], 600)}
    )
    res = fairengine.audit(
        df, label="y", protected=["g"], score="s", methods=["group_parity"],
        mlflow={"enabled": False}, output={"dir": str(session_tmp / "binary-reports")},
    )  # fmt: skip
    reg = res.method("regression_metrics")
    assert reg.status == "not_run"
    assert reg.reason == (
        "not applicable to a binary audit: Regression fairness (errors, bias and predictions "
        "by group) is defined for regression models (task: regression)"
    )


def test_a_regression_model_object_scores_with_predict(session_tmp: Path) -> None:
    df = _frame(n=600, shift=0.0)
    model = LinearRegression().fit(df[["x"]], df["y"])
    res = fairengine.audit(
        df[["x", "y", "group"]], label="y", protected=["group"], model=model, task="regression",
        methods={"regression_metrics": {"n_permutations": 99, "distance_tests": False}},
        mlflow={"enabled": False}, output={"dir": str(session_tmp / "model-reports")},
    )  # fmt: skip
    assert res.model.uri is not None and res.model.uri.startswith("python:LinearRegression")
    assert "one prediction per row (regression)" in (res.model.score_description or "")
    summary = res.method("regression_metrics").details
    expected = model.predict(df[["x"]])[df.group.to_numpy() == "A"].mean()
    got = summary.attributes[0].summaries.group("A").mean_prediction.value  # type: ignore[attr-defined]
    assert got == pytest.approx(expected, rel=1e-12)


def test_a_classifier_with_text_labels_is_refused_for_regression(session_tmp: Path) -> None:
    df = _frame(n=300)
    clf = LogisticRegression().fit(df[["x"]], np.where(df.y > 0, "high", "low"))
    # the pyfunc of a classifier serves its labels: not numeric predictions
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(
            df[["x", "y", "group"]], label="y", protected=["group"], model=clf.predict,
            task="regression", mlflow={"enabled": False},
            output={"dir": str(session_tmp / "bad-reports")},
        )  # fmt: skip
    assert "task: regression needs numeric predictions" in str(err.value)


def test_the_details_round_trip_through_audit_json(regression_audit) -> None:
    again = type(regression_audit).from_json(regression_audit.to_json())
    assert dataclasses.asdict(again.method("regression_metrics").details) == dataclasses.asdict(
        regression_audit.method("regression_metrics").details
    )
