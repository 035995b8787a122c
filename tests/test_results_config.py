"""The result contract (JSON round trip), audit assembly/verdict, and the YAML config."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError
from fairengine.group_parity import group_parity
from fairengine.results import AuditResult, Finding, Interval, MethodResult
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit


def audit(shift: float, tolerance: float = 0.05, multiplicity: str = "holm") -> AuditResult:
    rng = np.random.default_rng(0)
    n = 3000
    g = rng.choice(["x", "y", "z"], n)
    s = np.clip(rng.random(n) + shift * (g == "z"), 0, 1)
    df = pd.DataFrame({"g": g, "lab": rng.integers(0, 2, n), "s": s})
    ds = AuditDataset.from_frame(df, ColumnRoles("lab", ("g",), score="s"), threshold=0.5)
    m = group_parity(ds, tolerance=tolerance)
    return finalize_audit(
        config={"k": 1},
        dataset=ds.summary(),
        model={"uri": None},
        validation=None,
        methods=[m],
        multiplicity=multiplicity,
    )


def test_json_round_trip_is_strict_and_lossless() -> None:
    a = audit(0.3)
    other = MethodResult(
        "other",
        "Other",
        findings=[Finding("eps", "epsilon", math.inf, Interval(1.0, math.inf), pvalue=None)],
    )
    a = dataclasses.replace(a, methods=[*a.methods, other])
    text = a.to_json()
    json.loads(text)  # strict JSON (allow_nan=False inside to_json)
    b = AuditResult.from_json(text)
    assert b.to_dict() == a.to_dict()
    assert b.method("other").findings[0].estimate == math.inf
    with pytest.raises(KeyError, match="no method 'nope'"):
        b.method("nope")


def test_verdict_fail_pass_incomplete() -> None:
    fail = audit(0.3)
    assert fail.verdict.status == "fail"
    assert any("g: x − z" in r for r in fail.verdict.reasons)
    passed = audit(0.0)
    assert passed.verdict.status == "pass"
    assert all(f.decision == "fail_to_reject" for f in passed.findings())
    failed_method = MethodResult("m", "M", status="failed", reason="boom")
    inc = finalize_audit(
        config={},
        dataset={},
        model={},
        validation=None,
        methods=[group_parity_fair(), failed_method],
    )
    assert inc.verdict.status == "incomplete" and "M failed: boom" in inc.verdict.reasons


def group_parity_fair() -> MethodResult:
    return audit(0.0).methods[0]


def test_adjusted_pvalues_holm_dominates_raw_and_decisions_use_them() -> None:
    a = audit(0.06, tolerance=0.0)
    for f in a.findings():
        assert f.adjusted_pvalue >= f.pvalue
        assert (f.decision == "reject") == (f.adjusted_pvalue <= a.alpha)
        assert "Holm-adjusted" in f.reading
    bh = audit(0.06, tolerance=0.0, multiplicity="bh")
    assert all("Benjamini–Hochberg" in f.reading for f in bh.findings())


def test_flat_metrics_names() -> None:
    m = audit(0.3).flat_metrics()
    assert "dp_gap.g.x_z" in m and "dp_gap.g.x_z.ci_low" in m and "dp_gap.g.x_z.pvalue_adj" in m
    assert all(math.isfinite(v) for v in m.values())


def test_config_defaults_and_yaml(tmp_path) -> None:
    p = tmp_path / "audit.yaml"
    p.write_text(
        "data: {path: d.csv}\ncolumns: {label: y, protected: sex, score: s}\nthreshold: null\n"
    )
    cfg = AuditConfig.from_yaml(p)
    assert cfg.data.path == str(tmp_path / "d.csv")
    assert cfg.threshold is None and cfg.alpha == 0.05 and cfg.multiplicity == "maxt"
    assert cfg.methods.group_parity.tolerance == 0.05
    assert cfg.roles() == ColumnRoles("y", ("sex",), score="s")
    assert cfg.to_dict()["validation"]["min_group_size"] == 30


@pytest.mark.parametrize(
    "raw,match",
    [
        ({"methds": {}}, "unknown config key 'methds'; did you mean 'methods'"),
        ({"methods": {"group_parity": {"tolerence": 1}}}, "methods.group_parity.tolerance"),
        ({"alpha": "0.05"}, "'alpha' must be a number"),
        ({"threshold": 2}, "threshold must lie in"),
        ({"score_type": "logit"}, "score_type must be one of"),
        ({"multiplicity": "bonferroni"}, "multiplicity must be one of"),
        ({"validation": {"min_group_size": 2.5}}, "must be an integer"),
        ({"data": {"path": "a.csv", "embedded": "x"}}, "either 'path' or 'embedded'"),
    ],
)
def test_config_errors_name_the_key(raw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        AuditConfig.from_dict(raw)


def test_config_roles_required() -> None:
    with pytest.raises(ConfigError, match=r"columns\.label is required"):
        AuditConfig.from_dict({}).roles()
    with pytest.raises(ConfigError, match="does not exist"):
        AuditConfig.from_yaml("/nonexistent/audit.yaml")


def test_finalize_audit_leaves_the_method_results_unchanged_so_it_can_be_rerun() -> None:
    """Deciding the same method results twice, with the other gap_null, gives the other
    decider and readings with one decision sentence each."""
    from fairengine.results import ResamplingPart, gap_question

    q = gap_question("tpr", "sex", "f", "m")
    methods = [
        MethodResult(
            "group_parity",
            "Group parity",
            findings=[
                Finding(
                    "tpr_gap.sex.f_m",
                    "TPR gap",
                    0.1,
                    pvalue=0.2,
                    null_hypothesis="|gap| ≤ 0.05",
                    question=q,
                    null_kind="tolerance",
                )
            ],
        ),
        MethodResult(
            "permutation_tests",
            "Permutation tests",
            findings=[
                Finding(
                    "perm_tpr.sex.f_m",
                    "TPR difference",
                    0.1,
                    pvalue=0.0005,
                    null_hypothesis="tpr(f) = tpr(m)",
                    question=q,
                    null_kind="zero",
                    resampling=[ResamplingPart("permutation", 0, 1999)],
                )
            ],
        ),
    ]
    kw = {"config": {}, "dataset": {}, "model": {}, "validation": None, "methods": methods}
    first = {f.key: f for f in finalize_audit(**kw, gap_null="tolerance").findings()}
    second = {f.key: f for f in finalize_audit(**kw, gap_null="zero").findings()}
    assert first["perm_tpr.sex.f_m"].decided_by == "tpr_gap.sex.f_m"
    assert second["tpr_gap.sex.f_m"].decided_by == "perm_tpr.sex.f_m"
    assert second["perm_tpr.sex.f_m"].decided_by is None
    assert second["perm_tpr.sex.f_m"].decision == "reject"
    for f in second.values():
        assert f.reading.count("α=") == (0 if f.decision == "supporting" else 1), f.reading
    assert [m.findings[0].decision for m in methods] == ["not_tested", "not_tested"]


def test_audit_json_names_its_format_and_older_or_unknown_formats_are_handled() -> None:
    """audit.json carries ``schema``; a file from before the format was named (no ``schema``)
    still loads; a format this version does not know is a clear error naming it."""
    from fairengine.audit_context import DatasetSummary, ModelIdentity
    from fairengine.results import AUDIT_SCHEMA, AuditFormatError, AuditResult, Verdict

    result = AuditResult(
        audit_id="a1",
        created_at="2026-11-26T00:00:00+00:00",
        config={},
        dataset=DatasetSummary(),
        model=ModelIdentity(),
        validation=None,
        methods=[],
        alpha=0.05,
        multiplicity="maxt",
        verdict=Verdict("pass", "no test rejects"),
    )
    d = result.to_dict()
    assert d["schema"] == AUDIT_SCHEMA
    assert AuditResult.from_dict(d).to_dict() == d
    older = {k: v for k, v in d.items() if k != "schema"}
    assert AuditResult.from_dict(older).audit_id == "a1"
    with pytest.raises(AuditFormatError, match=r"'fairengine\.audit/9'.*fairengine\.audit/1"):
        AuditResult.from_dict({**d, "schema": "fairengine.audit/9"})
