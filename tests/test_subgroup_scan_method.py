"""The ``subgroup_scan`` audit method: registered and off by default, its config errors name
the key, it finds a planted mis-calibrated subgroup of an audit dataset and writes it as a
readable rule, its typed details round-trip through strict JSON, and it warns when the scores
are not held out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.registry import method_spec
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.subgroup_scan.method import run_subgroup_scan
from fairengine.subgroup_scan.result import SubgroupScanDetails


def _dataset(n: int = 4000, seed: int = 0) -> AuditDataset:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["Female", "Male"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    age = rng.integers(18, 70, n)
    p = rng.beta(2, 3, n)
    young_women = (sex == "Female") & (age < 30)
    q = np.where(young_women, 0.4, 1.0)  # the model over-predicts for young women
    y = (rng.random(n) < q * p / (1 - p + q * p)).astype(int)
    frame = pd.DataFrame({"sex": sex, "race": race, "age": age, "y": y, "s": p})
    return AuditDataset.from_frame(frame, ColumnRoles("y", ("sex", "race"), score="s"))


def test_registered_off_by_default_and_config_errors_name_the_key() -> None:
    spec = method_spec("subgroup_scan")
    assert spec.config is SubgroupScanConfig and spec.details is SubgroupScanDetails
    assert SubgroupScanConfig().enabled is False
    base = {"data": {"path": "x.csv"}, "columns": {"label": "y", "protected": ["s"]}}
    assert AuditConfig.from_dict(base).methods.subgroup_scan.enabled is False
    cfg = AuditConfig.from_dict(
        {**base, "methods": {"subgroup_scan": {"enabled": True, "features": ["age"]}}}
    )
    assert cfg.methods.subgroup_scan.features == ["age"]
    with pytest.raises(ConfigError, match=r"methods\.subgroup_scan\.dpeth"):
        AuditConfig.from_dict({**base, "methods": {"subgroup_scan": {"dpeth": 3}}})
    with pytest.raises(ConfigError, match=r"methods\.subgroup_scan\.statistic must be one of"):
        SubgroupScanConfig(statistic="auc")
    with pytest.raises(ConfigError, match=r"methods\.subgroup_scan\.depth"):
        SubgroupScanConfig(depth=0)


def test_planted_subgroup_is_the_top_rule_with_a_small_adjusted_pvalue() -> None:
    ds = _dataset()
    cfg = SubgroupScanConfig(enabled=True, features=["age"], levels=4, min_draws=199)
    res = run_subgroup_scan(ds, cfg, seed=1)
    details = res.details
    assert isinstance(details, SubgroupScanDetails)
    top = details.top[0]
    # age quantile bins: the youngest bin is "age < q_{1/4}" (q ≈ 31 for uniform 18–69)
    assert top.rule.startswith("sex = Female and age < ")
    assert top.observed_rate < top.expected_rate and top.interval.high < 0
    finding = res.findings[0]
    assert finding.key == "scan_calibration.1"
    assert finding.pvalue == details.pvalue and finding.pvalue < 0.01
    assert finding.reading.startswith(f"{top.rule}: observed {top.observed_rate:.2f} vs ")
    assert f"n = {top.n:,}" in finding.reading
    part = finding.resampling[0]
    assert (part.exceedances + 1) / (part.resamples + 1) == pytest.approx(finding.pvalue)
    # step-down p-values never decrease down the list
    ps = [f.pvalue for f in res.findings]
    assert ps == sorted(ps)
    assert not res.warnings
    # strict JSON round trip of the typed details
    back = MethodResult.from_dict(json.loads(json.dumps(res.to_dict(), allow_nan=False)))
    assert back.details == details


def test_warns_when_scores_are_not_held_out_and_names_missing_inputs() -> None:
    ds = _dataset(n=1500)
    res = run_subgroup_scan(
        ds, SubgroupScanConfig(enabled=True, held_out=False, min_draws=0, top_k=1)
    )
    assert any("held_out: false" in w for w in res.warnings)
    with pytest.raises(DataContractError, match="'nope', which is not a column"):
        run_subgroup_scan(ds, SubgroupScanConfig(enabled=True, features=["nope"]))
    with pytest.raises(DataContractError, match="needs hard predictions"):
        run_subgroup_scan(ds, SubgroupScanConfig(enabled=True, statistic="tpr"))


def test_resampler_extends_the_step_down_pvalues_consistently() -> None:
    """More null scans from the resampler estimate the same p-values as the method's own draws
    (within Monte-Carlo error), are reproducible per (start, batch), and keep p̃_1 ≤ p̃_2."""
    from fairengine.subgroup_scan.resampler import SubgroupScanResampler

    rng = np.random.default_rng(11)
    n = 3000
    p = rng.beta(2, 3, n)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], n),
            "race": rng.choice(["a", "b", "c"], n),
            "region": rng.integers(0, 4, n),
            "y": (rng.random(n) < p).astype(int),  # calibrated: a mid-range p-value
            "s": p,
        }
    )
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("sex", "race"), score="s"))
    cfg = SubgroupScanConfig(enabled=True, features=["region"], top_k=2, min_draws=999)
    res = run_subgroup_scan(ds, cfg, seed=3)
    sampler = SubgroupScanResampler(ds, cfg, seed=3)
    assert sampler.can_extend("scan_calibration.1") and not sampler.can_extend("dp_gap.x")
    b = 2000
    for j, finding in enumerate(res.findings, start=1):
        part = finding.resampling[0]
        count = sampler.draw(f"scan_calibration.{j}", part.name, part.resamples, b)
        assert count == sampler.draw(f"scan_calibration.{j}", part.name, part.resamples, b)
        p_method = (part.exceedances + 1) / (part.resamples + 1)
        p_more = count / b
        se = np.sqrt(p_method * (1 - p_method) * (1 / part.resamples + 1 / b))
        assert abs(p_method - p_more) <= 4 * se + 1e-3
    first = sampler.draw("scan_calibration.1", "null scan", 5000, 500)
    second = sampler.draw("scan_calibration.2", "null scan", 5000, 500)
    assert first <= second
