"""run_fliptest: the integration contract (findings, details, not_run), configuration errors
and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring
from fairengine.devices import resolve_device
from fairengine.errors import ConfigError, DataContractError
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.fliptest.result import FlipTestDetails
from fairengine.roles import ColumnRoles

FAST = dict(n_permutations=4, n_selfmap=4, n_bootstrap=4, max_per_group=300)


def _hire_proba(df: pd.DataFrame) -> np.ndarray:
    z = 1.4028 * df["work_exp"].to_numpy() + 1.1688 * df["hair_len"].to_numpy() - 0.8684
    return 1 / (1 + np.exp(-40 * z))


@pytest.fixture(scope="module")
def lipton() -> AuditDataset:
    ds = make_lipton_hiring(400)
    return AuditDataset.from_frame(ds.frame, ds.roles)


def test_not_run_without_a_model(lipton):
    r = run_fliptest(lipton, FlipTestConfig(enabled=True))
    assert r.status == "not_run"
    assert "predict_proba" in r.reason
    assert run_fliptest(
        lipton, FlipTestConfig(enabled=False), predict_proba=_hire_proba
    ).status == ("not_run")


def test_result_contract(lipton):
    cfg = FlipTestConfig(enabled=True, epsilon=0.03, **FAST)
    r = run_fliptest(lipton, cfg, seed=1, predict_proba=_hire_proba)
    assert r.method == "fliptest" and r.status == "ok"
    assert r.parameters["device_requested"] == "auto"  # the default, resolved and recorded
    assert r.parameters["device"] == resolve_device("auto")
    keys = {f.key for f in r.findings}
    assert keys == {
        "fliptest_pos.gender.man_woman",
        "fliptest_neg.gender.man_woman",
        "fliptest_pos.gender.woman_man",
        "fliptest_neg.gender.woman_man",
    }
    for f in r.findings:
        assert 0 <= f.estimate <= 1
        assert f.interval is not None and f.interval.low <= f.interval.high
        assert f.pvalue is not None and 0 < f.pvalue <= 1 and f.null_hypothesis
        assert f.adjusted_pvalue is None and f.decision == "not_tested"
    text = json.dumps(r.to_dict(), allow_nan=False)
    assert len(text) < 200_000
    assert isinstance(r.details, FlipTestDetails)
    pair = r.details.pairs[0]
    fwd, rev = pair.directions
    assert (fwd.source, fwd.target) == ("man", "woman")
    assert fwd.validation is not None
    assert [(m.stratum, m.path, m.loaded_from_cache) for m in fwd.maps] == [("all", None, None)]
    assert fwd.maps[0].artifact == "map_gender_man_to_woman.npz"
    tr = rev.transparency.positive
    assert tr.ranking_mean_difference[0] == "hair_len"
    assert all(0 <= e.sign_pvalue <= e.sign_pvalue_bh <= 1 for e in tr.features)
    assert sum(rev.histograms["hair_len"].group) == pair.n[1]
    assert "demographic-parity count gap" in r.details.identity_note
    # same seed, same result
    again = run_fliptest(lipton, cfg, seed=1, predict_proba=_hire_proba)
    assert [f.estimate for f in again.findings] == [f.estimate for f in r.findings]


def test_equalized_odds_and_protected_as_feature(lipton, monkeypatch):
    # observed on the calling thread: in a worker process the model would append to a copy
    monkeypatch.setenv("FAIRENGINE_WORKER_PROCESSES", "0")
    seen = []

    def proba(df):
        seen.append(set(df["gender"]))
        return _hire_proba(df)

    cfg = FlipTestConfig(
        enabled=True,
        mode="equalized_odds",
        estimator="exact",
        protected_as_feature=True,
        validate=False,
        min_group_size=20,
        **FAST,
    )
    r = run_fliptest(lipton, cfg, predict_proba=proba)
    assert r.status == "ok" and len(r.findings) == 4
    assert {"man"} in seen and {"woman"} in seen
    # exact bijection within label strata: net flips = source positives - target positives
    assert isinstance(r.details, FlipTestDetails)
    for d in r.details.pairs[0].directions:
        assert d.net_flips == pytest.approx(d.dp_count_gap)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("estimator", "sinkhorn", "methods.fliptest.estimator"),
        ("mode", "dp", "methods.fliptest.mode"),
        ("n_permutations", -1, "methods.fliptest.n_permutations"),
        ("stable_threshold", 1.5, "methods.fliptest.stable_threshold"),
        ("epsilon", 0.0, "methods.fliptest.epsilon"),
        ("cost", "sqcityblock", "methods.fliptest.cost"),
        ("device", "gpu", "methods.fliptest.device must be 'auto'"),
    ],
)
def test_config_errors_name_the_key(field, value, match):
    with pytest.raises(ConfigError, match=match):
        FlipTestConfig(**{field: value})


def _dataset(frame: pd.DataFrame, features: tuple[str, ...]) -> AuditDataset:
    roles = ColumnRoles(label="hired", protected=("gender",), features=features)
    return AuditDataset.from_frame(frame, roles)


def test_bad_input(lipton):
    frame = lipton.frame.copy()
    frame["city"] = "x"
    with pytest.raises(DataContractError, match=r"\['city'\].*not numeric"):
        run_fliptest(
            _dataset(frame, ("work_exp", "city")),
            FlipTestConfig(enabled=True),
            predict_proba=_hire_proba,
        )
    frame = lipton.frame.copy()
    frame.loc[3, "hair_len"] = np.nan
    with pytest.raises(DataContractError, match="missing"):
        run_fliptest(
            _dataset(frame, ("work_exp", "hair_len")),
            FlipTestConfig(enabled=True),
            predict_proba=_hire_proba,
        )
    frame = lipton.frame.copy()
    frame["const"] = 1.0
    with pytest.raises(DataContractError, match="const"):
        run_fliptest(
            _dataset(frame, ("work_exp", "const")),
            FlipTestConfig(enabled=True, **FAST),
            predict_proba=_hire_proba,
        )
    with pytest.raises(DataContractError, match="min_group_size"):
        run_fliptest(
            lipton, FlipTestConfig(enabled=True, min_group_size=500), predict_proba=_hire_proba
        )
    with pytest.raises(DataContractError, match="predict_proba must return"):
        run_fliptest(
            lipton, FlipTestConfig(enabled=True, **FAST), predict_proba=lambda df: np.zeros(3)
        )
    with pytest.raises(DataContractError, match="not protected attributes"):
        run_fliptest(
            lipton, FlipTestConfig(enabled=True, attributes=["race"]), predict_proba=_hire_proba
        )


def test_pairs_run_in_threads_give_the_same_result():
    rng = np.random.default_rng(2)
    group = np.repeat(["a", "b", "c"], [200, 150, 120])
    frame = pd.DataFrame(
        {
            "gender": group,
            "work_exp": rng.normal(size=len(group)) + (group == "a") * 0.4,
            "hair_len": rng.normal(size=len(group)) - (group == "c") * 0.3,
        }
    )
    frame["hired"] = frame["work_exp"] > 0
    ds = _dataset(frame, ("work_exp", "hair_len"))
    results = [
        run_fliptest(
            ds,
            FlipTestConfig(enabled=True, epsilon=0.05, n_jobs=n_jobs, **FAST),
            seed=3,
            predict_proba=_hire_proba,
        )
        for n_jobs in (1, 3)
    ]
    one, three = (json.dumps(r.to_dict()["findings"], sort_keys=True) for r in results)
    details = [r.details for r in results]
    assert all(isinstance(d, FlipTestDetails) for d in details)
    assert len(details[0].pairs) == 3
    assert one == three
    assert [p.groups for p in details[0].pairs] == [p.groups for p in details[1].pairs]
