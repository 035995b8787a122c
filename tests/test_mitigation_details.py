"""The mitigation step's typed details: the report block drawn from them, the deployed rule's
JSON (what the registered MLflow model stores) and its application in either form, and strict
reading of stored details."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fairengine.registry  # noqa: F401  (registers the mitigation details type)
from fairengine.dataset import AuditDataset
from fairengine.mitigation import MitigationConfig, apply_rule, run_mitigation
from fairengine.mitigation.result import (
    DeployedMitigation,
    DeployedRule,
    IntersectionRow,
    MitigationDetails,
)
from fairengine.result_codec import ResultFormatError
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles

STORED = Path(__file__).parent / "data" / "mitigation_result_format1.json"
RULE_KEYS = [  # the rule file of the registered model, as written before typed details
    "thresholds",
    "p",
    "q",
    "grid_shape",
    "seen",
    "source",
    "global_source",
    "constraints",
    "epsilon",
    "variant",
    "outcomes",
    "attributes",
    "levels",
    "bins",
    "score_type",
]


def _frame(n: int = 2000, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n, p=[0.4, 0.6])
    age = rng.uniform(18, 80, n)
    y = rng.binomial(1, np.where(sex == "male", 0.45, 0.3))
    x = rng.normal(y * 1.2, 1.0) + np.where(sex == "male", 0.8, 0.0) + (age > 50) * 0.4 - 0.6
    return pd.DataFrame({"sex": sex, "age": age, "y": y, "s": 1 / (1 + np.exp(-x))})


@pytest.fixture(scope="module")
def run() -> tuple[pd.DataFrame, AuditDataset, MethodResult]:
    """sex × age bin under equalized odds (tpr and fpr), with the fairlearn comparison."""
    frame = _frame()
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("sex",), score="s"), threshold=0.5)
    cfg = MitigationConfig(
        enabled=True,
        attributes=["sex", "age"],
        bins={"age": [0, 35, 50, 100]},
        constraints=["eo"],
        epsilon=0.3,
        variants=["randomization_only", "thresholds_only", "overall"],
        n_thresholds=10,
        n_posterior=200,
        n_realised=20,
    )
    result = run_mitigation(ds, cfg, seed=0)
    assert result.status == "ok", result.reason
    return frame, ds, result


def test_report_block_draws_the_typed_details(run) -> None:
    from fairengine.registry import method_spec
    from fairengine.verdict import finalize_audit
    from tasks.report import fmt_number, render_report

    _, ds, m = run
    d = m.details
    assert isinstance(d, DeployedMitigation) and d.intersections and d.comparison
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[m])
    )
    assert "could not draw" not in html
    assert "Before and after, per variant (held-out data)" in html
    assert "The deployed rule per intersection" in html and "RTDP and fairlearn" in html
    assert "fpr before → after" in html and "tpr before → after" in html
    assert "selection_rate before → after" not in html  # not constrained
    assert fmt_number(d.after.epsilon["eo"].estimate) in html
    assert "female × [0, 35]" in html
    summary = method_spec("mitigation").summary
    assert summary is not None
    line = summary(m, MitigationConfig(constraints=["eo"], epsilon=0.3))
    assert f"ε_eo {d.after.epsilon['eo'].estimate:.3f}" in line
    assert d.registration.reason in line


def test_rows_keep_only_the_constrained_rates(run) -> None:
    _, _, m = run
    assert isinstance(m.details, DeployedMitigation) and m.details.intersections
    row = m.details.intersections[0]
    assert sorted(row.rates) == ["fpr", "tpr"]
    keys = list(row.to_dict())
    assert keys[-4:] == ["fpr_before", "fpr_after", "tpr_before", "tpr_after"]
    assert IntersectionRow.from_dict(row.to_dict()) == row


def test_the_rule_json_keeps_its_format_and_applies_as_the_typed_rule(run) -> None:
    frame, _, m = run
    assert isinstance(m.details, DeployedMitigation)
    rule = m.details.postprocessor
    data = rule.to_dict()
    assert list(data) == RULE_KEYS
    assert data["bins"] == {"age": [0, 35, 50, 100]}
    # the registered model's rule file: the rule's JSON plus the model's own keys
    stored = json.loads(json.dumps({**data, "feature_columns": ["s"]}, indent=1))
    score = frame["s"].to_numpy()
    typed, unknown = apply_rule(rule, frame, score)
    assert unknown == 0
    for other in (stored, json.loads(json.dumps(data, allow_nan=False))):
        pi, n_unknown = apply_rule(other, frame, score)
        np.testing.assert_array_equal(pi, typed)
        assert n_unknown == 0
    # an unseen category gets the rule of the largest fitted intersection, and is counted
    odd = frame.head(3).assign(sex=["female", "other", "male"])
    pi, unknown = apply_rule(rule, odd, score[:3])
    assert unknown == 1
    g = rule.global_source
    expect = rule.q[g] if score[1] > rule.thresholds[g] else rule.p[g]
    assert pi[1] == expect


def test_a_stored_rule_reads_back_as_the_same_json() -> None:
    stored = json.loads(STORED.read_text())["details"]["postprocessor"]
    rule = DeployedRule.from_dict(stored)
    assert rule.to_dict() == stored and list(rule.to_dict()) == RULE_KEYS
    assert rule.levels == (("female", "male"), ("a", "b", "c"))


def test_non_finite_bin_edges_apply_from_strict_json() -> None:
    """Open-ended bins (±inf edges) are strings in strict JSON; the rule reads either form."""
    stored = json.loads(STORED.read_text())["details"]["postprocessor"]
    levels = [["female", "male"], ["[-inf, 40]", "(40, 60]", "(60, inf]"]]
    bins = {"age": ["-Infinity", 40, 60, "Infinity"]}
    rule = DeployedRule.from_dict(
        {**stored, "attributes": ["sex", "age"], "levels": levels, "bins": bins}
    )
    assert rule.bins["age"] == (-math.inf, 40.0, 60.0, math.inf)
    frame = pd.DataFrame({"sex": ["female", "male", "male"], "age": [10.0, 50.0, 90.0]})
    score = np.array([0.2, 0.7, 0.9])
    typed, _ = apply_rule(rule, frame, score)
    literal = {**rule.to_dict(), "bins": {"age": [-math.inf, 40, 60, math.inf]}}
    np.testing.assert_array_equal(apply_rule(rule.to_dict(), frame, score)[0], typed)
    np.testing.assert_array_equal(apply_rule(literal, frame, score)[0], typed)


def test_stored_details_are_read_strictly() -> None:
    stored = json.loads(STORED.read_text())
    assert isinstance(MethodResult.from_dict(stored).details, DeployedMitigation)
    extra = copy.deepcopy(stored)
    extra["details"]["after"]["surprise"] = 1
    with pytest.raises(ResultFormatError, match=r"details\.after"):
        MethodResult.from_dict(extra)
    half = copy.deepcopy(stored)
    del half["details"]["intersections"][0]["selection_rate_after"]
    with pytest.raises(ResultFormatError, match=r"details\.intersections"):
        MethodResult.from_dict(half)
    with pytest.raises(ResultFormatError, match="selection_rate"):
        IntersectionRow.from_dict(half["details"]["intersections"][0])
    wrong = copy.deepcopy(stored)
    wrong["details"]["postprocessor"]["thresholds"] = "0.5"
    with pytest.raises(ResultFormatError, match=r"postprocessor\.thresholds"):
        MethodResult.from_dict(wrong)
    # an older file whose details do not match is kept verbatim, not dropped
    old = MethodResult.from_dict(extra, strict=False)
    assert not isinstance(old.details, MitigationDetails)
    assert old.to_dict()["details"] == extra["details"]
