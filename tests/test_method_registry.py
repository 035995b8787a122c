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

pytestmark = pytest.mark.flow


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
    with pytest.raises(ValueError, match="already registered"):
        register(method_spec("fliptest"))
    with pytest.raises(ValueError, match="built-in"):
        unregister("fliptest")


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
    assert any(m["method"] == "toy_gap" for m in saved["methods"])
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
    assert toy_gap.CALLS == [0.01]
    # caching: the same audit again reuses the toy step; a changed setting recomputes it
    again = audit_flow(cfg)
    assert toy_gap.CALLS == [0.01]
    assert "toy_gap (cached)" in again.result.metadata["timings"]
    assert again.result.method("toy_gap").findings[0].estimate == toy_result.findings[0].estimate
    cfg["methods"] = {"toy_gap": {"margin": 0.02}}
    audit_flow(cfg)
    assert toy_gap.CALLS == [0.01, 0.02]
