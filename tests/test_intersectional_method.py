"""The ``intersectional`` audit method: findings, details, support policy, config, Adult."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.datasets import load_adult, make_intersectional_synthetic
from fairengine.errors import ConfigError, DataContractError
from fairengine.intersectional import IntersectionalConfig, run_intersectional
from fairengine.intersectional.result import IntersectionalDetails
from fairengine.roles import ColumnRoles

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
METRICS = ("elift", "slift", "sp", "tpr", "fpr", "eo")


def _synthetic(n: int, seed: int = 0, score: bool = True) -> AuditDataset:
    ds = make_intersectional_synthetic(n=n, seed=seed)
    roles = ds.roles if score else ColumnRoles("y", ("attr_a", "attr_b"), features=())
    return AuditDataset.from_frame(ds.frame, roles, threshold=0.5 if score else None)


def test_findings_details_and_json_contract() -> None:
    res = run_intersectional(_synthetic(20_000), IntersectionalConfig(n_posterior=1000), seed=0)
    assert res.method == "intersectional" and res.status == "ok"
    keys = {f.key for f in res.findings}
    for g in ("attr__a_x_attr__b", "attr__a", "attr__b"):  # "_" doubled in key tokens
        assert {f"df_eps.{m}.{g}" for m in METRICS} <= keys
    assert "df_amplification.attr__a_x_attr__b" in keys
    for f in res.findings:
        assert f.pvalue is None and f.decision == "not_tested"
        assert f.interval is not None and f.interval.low <= f.interval.high
    sp = next(f for f in res.findings if f.key == "df_eps.sp.attr__a_x_attr__b")
    assert sp.interval.low <= sp.estimate <= sp.interval.high
    assert "a1 × b1" in sp.reading and "ratio e^-ε" in sp.reading
    text = json.dumps(res.to_dict(), allow_nan=False)
    assert len(text) < 200_000
    details = res.details
    assert isinstance(details, IntersectionalDetails)
    d = details.metrics["sp"]["attr__a_x_attr__b"]
    assert d.estimators.smoothed.estimate == d.epsilon
    assert (d.estimators.bootstrap.n_draws, d.estimators.bayesian.n_draws) == (2000, 1000)
    assert d.pair.low == "a1 × b1" or d.pair.high == "a1 × b1"
    tab = details.rates["attr__a_x_attr__b"]
    assert tab.group[3] == "a1 × b1" and tab.n[3] == details.smallest[0].n
    assert None not in (tab.base_rate, tab.selection_rate, tab.tpr, tab.fpr)
    assert tab.tpr is not None and tab.tpr.low[0] <= tab.tpr.rate[0] <= tab.tpr.high[0]
    assert set(details.rates) == {"attr__a_x_attr__b", "attr__a", "attr__b"}
    assert d.epsilon_both is not None and d.epsilon_positive is None
    assert d.epsilon_empirical >= 0
    assert details.smallest[0].group == "a1 × b1"


def test_marginal_findings_do_not_exceed_intersectional() -> None:
    cfg = IntersectionalConfig(
        smoothing_alpha=0.0, smoothing_beta=0.0, n_bootstrap=50, n_posterior=50
    )
    res = run_intersectional(_synthetic(20_000, seed=3), cfg)
    est = {f.key: f.estimate for f in res.findings}
    for m in METRICS:
        for a in ("attr__a", "attr__b"):
            assert est[f"df_eps.{m}.{a}"] <= est[f"df_eps.{m}.attr__a_x_attr__b"] + 1e-12


def test_headline_is_bayesian_for_tiny_cells_and_bootstrap_otherwise() -> None:
    cfg = IntersectionalConfig(n_bootstrap=200, n_posterior=500)
    small = run_intersectional(_synthetic(2000, seed=1), cfg)
    f = next(f for f in small.findings if f.key == "df_eps.tpr.attr__a_x_attr__b")
    assert "posterior" in f.interval.method and "under-covers" in f.reading
    big = run_intersectional(_synthetic(50_000, seed=1), cfg)
    f = next(f for f in big.findings if f.key == "df_eps.tpr.attr__a_x_attr__b")
    assert "bootstrap" in f.interval.method


def test_target_epsilon_makes_findings_tested_with_a_stated_null() -> None:
    ds = _synthetic(20_000, seed=2)
    res = run_intersectional(ds, IntersectionalConfig(target_epsilon=0.2, n_posterior=500))
    f = next(f for f in res.findings if f.key == "df_eps.sp.attr__a_x_attr__b")
    assert f.null_hypothesis.startswith("ε_sp over attr_a × attr_b ≤ 0.2")
    assert 0 < f.pvalue < 0.01  # true ε_sp = 1.107, far above 0.2
    # a Monte-Carlo p-value: its draws are recorded so the audit decides it through them
    (part,) = f.resampling
    assert part.name in ("bootstrap", "posterior") and part.resamples > 0
    assert f.pvalue == (part.exceedances + 1) / (part.resamples + 1)
    far = run_intersectional(ds, IntersectionalConfig(target_epsilon=3.0, n_posterior=500))
    assert next(f for f in far.findings if f.key == f"df_eps.sp.{'attr__a_x_attr__b'}").pvalue > 0.5


def test_seed_reproducibility() -> None:
    ds = _synthetic(5000, seed=4)
    cfg = IntersectionalConfig(n_bootstrap=100, n_posterior=100)
    a, b, c = (run_intersectional(ds, cfg, seed=s) for s in (7, 7, 8))
    assert [f.to_dict() for f in a.findings] == [f.to_dict() for f in b.findings]
    assert [f.interval for f in a.findings] != [f.interval for f in c.findings]


def test_labels_only_runs_data_metrics_and_warns() -> None:
    res = run_intersectional(_synthetic(5000, score=False), IntersectionalConfig(n_posterior=100))
    assert {f.key.split(".")[1] for f in res.findings} == {"elift", "slift"}
    assert any("model metrics ['sp', 'tpr', 'fpr', 'eo'] skipped" in w for w in res.warnings)
    assert isinstance(res.details, IntersectionalDetails)
    assert res.details.prediction == "none"


def test_bins_for_a_numeric_column_and_bad_bins() -> None:
    rng = np.random.default_rng(0)
    n = 4000
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], n),
            "age": rng.integers(17, 90, n),
            "y": rng.integers(0, 2, n),
            "score": rng.random(n),
        }
    )
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("sex",), score="score"), threshold=0.5)
    cfg = IntersectionalConfig(
        attributes=["sex", "age"], bins={"age": [0, 25, 45, 200]}, n_posterior=100
    )
    res = run_intersectional(ds, cfg)
    assert isinstance(res.details, IntersectionalDetails)
    assert res.details.levels["age"] == ("[0, 25]", "(25, 45]", "(45, 200]")
    assert "df_eps.sp.sex_x_age" in {f.key for f in res.findings}
    cfg = IntersectionalConfig(attributes=["sex", "age"], bins={"age": [20, 45, 200]})
    with pytest.raises(DataContractError, match=r"'age'.*outside the bin edges"):
        run_intersectional(ds, cfg)
    with pytest.raises(DataContractError, match=r"names 'age', which is neither"):
        run_intersectional(ds, IntersectionalConfig(attributes=["sex", "age"]))


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"outcomes": "all"}, r"methods.intersectional.outcomes must be one of"),
        ({"metrics": ["sp", "dp"]}, r"methods.intersectional.metrics must be"),
        ({"smoothing_alpha": -1}, r"methods.intersectional.smoothing_alpha must be"),
        ({"prior_beta": 0}, r"methods.intersectional.prior_beta must be a finite number > 0"),
        ({"n_bootstrap": 5}, r"methods.intersectional.n_bootstrap must be an integer >= 10"),
        ({"confidence_level": 1.0}, r"methods.intersectional.confidence_level"),
        ({"headline": "best"}, r"methods.intersectional.headline"),
        ({"bins": {"age": [3, 2, 1]}}, r"methods.intersectional.bins.age"),
        ({"target_epsilon": -0.1}, r"methods.intersectional.target_epsilon"),
        ({"n_bootstrp": 10}, r"did you mean 'methods.intersectional.n_bootstrap'"),
    ],
)
def test_config_errors_name_the_key(raw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AuditConfig.from_dict({"methods": {"intersectional": raw}})


def test_config_coerces_from_yaml_types() -> None:
    cfg = AuditConfig.from_dict(
        {
            "methods": {
                "intersectional": {
                    "metrics": "sp",
                    "n_bootstrap": 500,
                    "target_epsilon": 1,
                    "bins": {"age": [0, 30, 99]},
                }
            }
        }
    ).methods.intersectional
    assert cfg.metrics == ["sp"] and cfg.target_epsilon == 1.0 and cfg.enabled


def test_adult_sex_age_race_on_data_handles_the_smallest_cells() -> None:
    """UCI Adult, sex × age (≤25, 26–45, >45) × race (5): 30 intersections, none empty; several
    tiny "Other"/"Amer-Indian-Eskimo" cells have no positives (notes §6), so the empirical ε is
    infinite while the smoothed ε is finite, and the Bayesian interval is the headline."""
    adult = load_adult(SHARED / "adult")
    ds = AuditDataset.from_frame(adult.frame, adult.roles)
    cfg = IntersectionalConfig(
        attributes=["sex", "age", "race"], bins={"age": [0, 25, 45, 200]}, n_posterior=2000
    )
    res = run_intersectional(ds, cfg)
    assert isinstance(res.details, IntersectionalDetails)
    assert res.details.n_intersections == 30
    slift = res.details.metrics["slift"]["sex_x_age_x_race"]
    assert slift.epsilon_empirical == np.inf
    assert 2.0 < slift.epsilon < 6.0
    assert slift.headline == "bayesian"
    assert any("infinite" in w for w in res.warnings)
    smallest = res.details.smallest
    assert smallest[0].n < 30 and smallest[0].status == "sparse"
    assert any(s.positives == 0 for s in smallest)
    f = next(f for f in res.findings if f.key == "df_eps.slift.sex_x_age_x_race")
    for a in ("sex", "age", "race"):
        assert next(x for x in res.findings if x.key == f"df_eps.slift.{a}").estimate < f.estimate


def test_unsupported_intersection_is_excluded_listed_and_warned() -> None:
    """A group without positives has no TPR: it is left out of ε_tpr (not imputed), listed under
    ``excluded`` and named in a warning; with include_empty it enters with its prior."""
    n = 600
    frame = pd.DataFrame(
        {
            "g": np.repeat(["a", "b", "c"], n // 3),
            "y": np.tile([0, 1], n // 2),
            "score": np.tile([0.2, 0.9], n // 2),
        }
    )
    frame.loc[frame["g"] == "c", "y"] = 0
    frame.loc[(frame["g"] == "b") & (frame["y"] == 1), "score"] = np.tile([0.9, 0.1], 50)
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("g",), score="score"), threshold=0.5)
    res = run_intersectional(ds, IntersectionalConfig(metrics=["tpr"], n_posterior=200))
    assert isinstance(res.details, IntersectionalDetails)
    d = res.details.metrics["tpr"]["g"]
    assert d.excluded == {"tpr": ("c",)}
    assert d.epsilon == pytest.approx(np.log(100.5 / 101) - np.log(50.5 / 101))
    assert any("left out of ε (e.g. c (tpr))" in w for w in res.warnings)
    inc = run_intersectional(
        ds, IntersectionalConfig(metrics=["tpr"], n_posterior=200, include_empty=True)
    )
    assert isinstance(inc.details, IntersectionalDetails)
    di = inc.details.metrics["tpr"]["g"]
    assert di.excluded == {"tpr": ()}
    tpr = inc.details.rates["g"].tpr
    assert tpr is not None and tpr.rate[2] == 0.5  # prior mean, k = d = 0
    assert di.estimators.bayesian.high > d.estimators.bayesian.high


def test_details_stay_small_for_200_intersections() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 8, n).astype(str),
            "b": rng.integers(0, 5, n).astype(str),
            "c": rng.integers(0, 5, n).astype(str),
            "y": rng.integers(0, 2, n),
            "score": rng.random(n),
        }
    )
    ds = AuditDataset.from_frame(
        frame, ColumnRoles("y", ("a", "b", "c"), score="score"), threshold=0.5
    )
    res = run_intersectional(ds, IntersectionalConfig(n_bootstrap=100, n_posterior=100))
    assert isinstance(res.details, IntersectionalDetails)
    assert res.details.n_intersections == 200
    assert len(res.details.rates["a_x_b_x_c"].group) == 200
    assert len(json.dumps(res.to_dict(), allow_nan=False)) < 200_000
