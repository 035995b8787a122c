"""FlipTest and the individual-fairness test in regression and multiclass audits end to end
(issue 22): ``fairengine.audit`` on ``make_proxy_shift("regression")`` and
``("multiclass")`` with a scikit-learn model object and both methods on; their findings
appear in the result with decisions, and the report renders their sections without empty
cells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

import fairengine
from fairengine.datasets import make_proxy_shift
from fairengine.errors import ConfigError

FLIPTEST = {
    "enabled": True, "n_permutations": 19, "n_selfmap": 19, "n_bootstrap": 9,
    "max_per_group": 150, "max_null_refits": 79, "validate": False,
}  # fmt: skip
INDIVIDUAL = {"max_rows": 400}


def _audit(task: str, tmp: Path, **fliptest: object) -> fairengine.AuditResult:
    data = make_proxy_shift(task, n=1200, seed=7)
    df = data.frame
    model = LinearRegression() if task == "regression" else LogisticRegression(max_iter=500)
    model.fit(df[["x1", "x2"]], df["y"])
    return fairengine.audit(
        df, label="y", protected=["group", "region"], model=model, task=task,
        methods={"fliptest": {**FLIPTEST, **fliptest}, "individual_fairness": INDIVIDUAL},
        mlflow={"enabled": False}, output={"dir": str(tmp / f"{task}-model-methods")},
    )  # fmt: skip


@pytest.fixture(scope="module")
def regression_audit(session_tmp: Path) -> fairengine.AuditResult:
    return _audit("regression", session_tmp, delta=0.2)


@pytest.fixture(scope="module")
def multiclass_audit(session_tmp: Path) -> fairengine.AuditResult:
    return _audit("multiclass", session_tmp)


def _section(html: str, method: str) -> str:
    match = re.search(
        rf'<section class="method [^"]*" id="method-\d+-{method}[^"]*".*?</section>', html, re.S
    )
    assert match, f"no section for {method}"
    return match.group(0)


def _no_empty_cells(section: str) -> None:
    for bad in ("<td></td>", '<td class="num"></td>', ">None<", ">nan<", "None →"):
        assert bad not in section, bad


def test_the_regression_audit_runs_both_methods(regression_audit) -> None:
    status = {m.method: (m.status, m.reason) for m in regression_audit.methods}
    assert status["fliptest"] == ("ok", None)
    assert status["individual_fairness"] == ("ok", None)
    found = {f.key: f for f in regression_audit.findings()}
    # B's counterparts in A are predicted higher (the proxy reads B lower): F- of B -> A
    neg = found["fliptest_neg.group.B_A"]
    assert neg.estimate > 0.2 and neg.decision in ("reject", "undetermined")
    assert {"fliptest_pos.region.north_south", "individual.loss_ratio"} <= set(found)
    assert "individual.error_rate_ratio" not in found  # no error rate for a regression model
    assert found["individual.loss_ratio"].decision == "reject"
    html = regression_audit.html()
    flip = _section(html, "fliptest")
    assert "A flip is a change of the prediction by at least δ = 0.2" in flip
    assert "F− (prediction ≥ δ lower than the counterpart&#39;s)" in flip or (
        "F− (prediction ≥ δ lower than the counterpart's)" in flip
    )
    assert "mean prediction" in flip
    _no_empty_cells(flip)
    ind = _section(html, "individual-fairness")
    assert "squared loss" in ind and "Prediction: original → mapped" in ind
    assert "Error rate" not in ind
    _no_empty_cells(ind)


def test_the_multiclass_audit_runs_both_methods(multiclass_audit) -> None:
    status = {m.method: (m.status, m.reason) for m in multiclass_audit.methods}
    assert status["fliptest"] == ("ok", None)
    assert status["individual_fairness"] == ("ok", None)
    found = {f.key: f for f in multiclass_audit.findings()}
    assert {"fliptest_changed.group.A_B", "fliptest_changed.group.B_A"} <= set(found)
    assert all(f.decision for k, f in found.items() if k.startswith("fliptest_changed"))
    assert {"individual.loss_ratio", "individual.error_rate_ratio"} <= set(found)
    html = multiclass_audit.html()
    flip = _section(html, "fliptest")
    assert "Predicted class of each source individual (rows) and of its counterpart" in flip
    assert "F (predicted class changes)" in flip
    _no_empty_cells(flip)
    ind = _section(html, "individual-fairness")
    assert "cross-entropy (softmax)" in ind and "P(own class)" in ind
    _no_empty_cells(ind)


def test_a_regression_fliptest_without_delta_is_a_config_error(session_tmp: Path) -> None:
    """Found when the config is read (before any data or model is loaded), naming the key."""
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.delta is required in a regression"):
        _audit("regression", session_tmp / "no-delta")
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.delta applies to regression"):
        _audit("multiclass", session_tmp / "delta", delta=0.2)
