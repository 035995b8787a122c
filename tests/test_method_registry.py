"""The method contract (issue "One method contract"): every method is listed once in
:mod:`fairengine.registry`, the config's sections are checked against it, and a new method is
one module plus one registry line: a toy method registered from outside the package runs
through the real audit flow (embedded Prefect, MLflow on SQLite) and appears in ``audit.json``,
the MLflow run (metrics and params) and the report (its generic section), with caching."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from plugins import toy_gap
from test_flow import (  # noqa: F401  (the embedded Prefect server and MLflow client fixtures)
    client,
    config_for,
    prefect_server,
    run_ids,
    scored_frame,
)

from fairengine.config import AuditConfig, MethodsConfig
from fairengine.errors import ConfigError
from fairengine.registry import BUILT_IN, METHODS, MethodSpec, method_spec, register, unregister
from fairengine.results import AuditResult

pytestmark = pytest.mark.flow


@pytest.fixture
def scored_dataset():
    """A small scored dataset."""
    from fairengine.dataset import AuditDataset
    from fairengine.roles import ColumnRoles

    roles = ColumnRoles(label="y", protected=["sex", "race"], score="score")
    return AuditDataset.from_frame(scored_frame(400, seed=1), roles, threshold=0.5)


@pytest.fixture
def toy():
    """The toy method's one registry line (undone after the test)."""
    register(toy_gap.SPEC)
    toy_gap.CALLS.clear()
    yield toy_gap.SPEC
    unregister("toy_gap")


def test_every_built_in_method_is_listed_once_with_its_config_section() -> None:
    names = [m.name for m in METHODS]
    assert len(names) == len(set(names)) and tuple(names[: len(BUILT_IN)]) == BUILT_IN
    typed = [f for f in dataclasses.fields(MethodsConfig) if f.init]
    assert [f.name for f in typed] == list(BUILT_IN)
    cfg = MethodsConfig()
    for name in BUILT_IN:
        assert type(cfg.section(name)) is method_spec(name).config
        assert hasattr(cfg.section(name), "enabled")
    assert method_spec("fliptest").needs == "predict_proba"
    assert method_spec("individual_fairness").needs == "model"
    with pytest.raises(KeyError, match="registered"):
        method_spec("flipsets")
    from tasks.after_logging import AFTER_LOGGING

    assert set(AFTER_LOGGING) <= set(BUILT_IN)  # steps after logging belong to methods


def test_a_spec_is_checked_and_names_are_unique() -> None:
    @dataclasses.dataclass
    class NoEnabled:
        x: int = 0

    with pytest.raises(ValueError, match="enabled"):
        MethodSpec("bad", "Bad", NoEnabled, toy_gap.run_toy_gap)
    with pytest.raises(ValueError, match="identifier"):
        MethodSpec("bad name", "Bad", toy_gap.ToyGapConfig, toy_gap.run_toy_gap)
    with pytest.raises(ValueError, match="needs"):
        MethodSpec("bad", "Bad", toy_gap.ToyGapConfig, toy_gap.run_toy_gap, needs="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="MethodDetails subclass"):
        MethodSpec("bad", "Bad", toy_gap.ToyGapConfig, toy_gap.run_toy_gap, details=dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        register(method_spec("fliptest"))
    with pytest.raises(ValueError, match="built-in"):
        unregister("fliptest")


def test_a_method_must_return_the_details_type_it_declares(toy, scored_dataset) -> None:
    """The task checks the contract: details of another type than the spec's are an error
    naming both (so audit.json is always read back as the type the method wrote)."""
    from fairengine.results import NoDetails
    from tasks.method_task import method_task

    wrong = dataclasses.replace(toy, name="toy_wrong", details=NoDetails)
    register(wrong)
    try:
        with pytest.raises(TypeError, match="ToyGapDetails; its MethodSpec declares NoDetails"):
            method_task.fn(scored_dataset, "toy_wrong", toy_gap.ToyGapConfig())
    finally:
        unregister("toy_wrong")
    ok = method_task.fn(scored_dataset, "toy_gap", toy_gap.ToyGapConfig())
    assert isinstance(ok.details, toy_gap.ToyGapDetails)


def test_a_registered_method_is_configured_like_a_built_in_one(toy) -> None:
    cfg = AuditConfig.from_dict({"methods": {"toy_gap": {"margin": 0.1}}})
    assert cfg.methods.section("toy_gap") == toy_gap.ToyGapConfig(margin=0.1)
    assert cfg.to_dict()["methods"]["toy_gap"] == {"enabled": True, "margin": 0.1}
    assert AuditConfig.from_dict({}).methods.section("toy_gap") == toy_gap.ToyGapConfig()
    with pytest.raises(ConfigError, match=r"did you mean 'methods\.toy_gap'"):
        AuditConfig.from_dict({"methods": {"toy_gp": {}}})
    with pytest.raises(ConfigError, match=r"methods\.toy_gap\.margn"):
        AuditConfig.from_dict({"methods": {"toy_gap": {"margn": 0.1}}})


def test_a_toy_method_runs_through_the_flow_into_json_mlflow_and_report(
    toy,
    tmp_path: Path,
    client,  # noqa: F811  (the fixture imported from test_flow)
) -> None:
    from flows.audit import audit_flow

    data = tmp_path / "d.csv"
    scored_frame(seed=3).to_csv(data, index=False)
    cfg = config_for(data, tmp_path / "out", "t-toy", methods={"toy_gap": {"margin": 0.01}}, seed=5)
    run = audit_flow(cfg)
    res = run.result
    toy_result = res.method("toy_gap")
    assert toy_result.status == "ok" and toy_result.parameters["seed"] == 5
    f = next(x for x in res.findings() if x.key == "toy_gap.sex")
    assert f.decision in ("reject", "fail_to_reject") and f.adjusted_pvalue is not None
    # audit.json
    saved = json.loads(Path(run.paths["json"]).read_text())
    (toy_saved,) = [m for m in saved["methods"] if m["method"] == "toy_gap"]
    assert toy_saved["details"]["attributes"]["sex"]["n_first"] > 0
    assert isinstance(toy_result.details, toy_gap.ToyGapDetails)
    reread = AuditResult.from_json(Path(run.paths["json"]).read_text()).method("toy_gap")
    assert reread.details == toy_result.details  # read back as its declared type
    assert saved["config"]["methods"]["toy_gap"]["margin"] == 0.01
    # the MLflow run: the finding's metrics and the method's params
    (run_id,) = run_ids(client, "t-toy")
    mrun = client.get_run(run_id)
    assert mrun.data.metrics["toy_gap.sex"] == pytest.approx(f.estimate)
    assert mrun.data.metrics["toy_gap.sex.pvalue_adj"] == pytest.approx(f.adjusted_pvalue)
    assert mrun.data.params["methods.toy_gap.margin"] == "0.01"
    # the report: its generic section with its finding
    html = Path(run.report_path).read_text()
    assert "Toy mean-score gap" in html and f.label in html
    assert "Details (raw JSON)" in html and "mean_rest" in html  # the generic view
    assert toy_gap.CALLS == [0.01]
    # caching: the same audit again reuses the toy step; a changed setting recomputes it
    again = audit_flow(cfg)
    assert toy_gap.CALLS == [0.01]
    assert "toy_gap (cached)" in again.result.metadata.timings
    assert again.result.method("toy_gap").findings[0].estimate == toy_result.findings[0].estimate
    cfg["methods"] = {"toy_gap": {"margin": 0.02}}
    audit_flow(cfg)
    assert toy_gap.CALLS == [0.01, 0.02]
