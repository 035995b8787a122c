"""fairengine.regression.findings: keys in the project's format (unique, MLflow-valid), tested
findings with their null hypotheses and resampling counts, plain-language readings, and the
JSON round trip of the bounded-group-loss result and of every finding."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.finding_keys import check_unique_keys
from fairengine.regression import (
    BoundedGroupLoss,
    all_pair_tests,
    bounded_group_loss,
    group_summaries,
    regression_findings,
)
from fairengine.results import Finding

CATS = ["Female", "Male", "non_binary"]


@pytest.fixture(scope="module")
def findings() -> list[Finding]:
    rng = np.random.default_rng(0)
    n = 900
    codes = rng.integers(0, 3, n)
    pred = rng.normal(size=n) + 0.2 * codes
    y = pred + rng.normal(size=n) * (1 + 0.3 * codes)
    s = group_summaries(y, pred, codes, CATS, attribute="sex")
    pairs = all_pair_tests(y, pred, codes, CATS, attribute="sex", n_permutations=199, seed=3)
    bgl = [
        bounded_group_loss(y, pred, codes, CATS, bound=1.5, loss=loss, attribute="sex")
        for loss in ("squared", "absolute")
    ]
    return regression_findings(s, pairs, bgl)


def test_keys_follow_the_project_format_and_are_unique(findings: list[Finding]) -> None:
    keys = {f.key for f in findings}
    assert "reg_mae.sex.Female_Male" in keys
    assert "reg_mean_residual.sex.Male_non__binary" in keys
    assert "reg_ks.sex.Female_non__binary" in keys
    assert "reg_wasserstein.sex.Female_Male" in keys
    assert "reg_group_rmse.sex.Female" in keys
    assert "reg_bgl_squared.sex.non__binary" in keys
    assert "reg_bgl_absolute.sex.Male" in keys
    # 3 groups × 6 summaries + 3 pairs × (4 + 2) tests + 2 losses × 3 groups
    assert len(findings) == 18 + 18 + 6
    check_unique_keys(findings)


def test_tested_findings_state_their_null_and_counts(findings: list[Finding]) -> None:
    by_key = {f.key: f for f in findings}
    mae = by_key["reg_mae.sex.Female_Male"]
    assert mae.null_hypothesis == "mean absolute error(Female) = mean absolute error(Male)"
    assert mae.null_kind == "zero" and mae.question is not None
    assert mae.resampling[0].name == "permutation" and mae.resampling[0].resamples == 199
    assert mae.pvalue == (1 + mae.resampling[0].exceedances) / 200
    assert "studentized permutation test" in mae.reading and "Female" in mae.reading
    ks = by_key["reg_ks.sex.Female_Male"]
    assert "same distribution" in ks.null_hypothesis and ks.interval is None
    bgl = by_key["reg_bgl_squared.sex.Female"]
    assert bgl.null_hypothesis == "mean squared error(Female) ≤ 1.5"
    assert bgl.interval is not None and bgl.interval.low < bgl.estimate < bgl.interval.high
    assert "upper 95% bound" in bgl.reading
    group = by_key["reg_group_mae.sex.Male"]
    assert group.pvalue is None and group.decision == "not_tested"
    assert group.reading.startswith("The mean absolute error of sex=Male is")


def test_findings_round_trip_through_json(findings: list[Finding]) -> None:
    for f in findings:
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict(), allow_nan=False))) == f


def test_bounded_group_loss_round_trip_and_bad_options() -> None:
    rng = np.random.default_rng(1)
    codes = np.repeat([0, 1], 50)
    pred = rng.normal(size=100)
    y = pred + rng.normal(size=100)
    res = bounded_group_loss(y, pred, codes, ["a", "b"], bound=1.0, weights=np.ones(100))
    assert BoundedGroupLoss.from_dict(json.loads(json.dumps(res.to_dict()))) == res
    assert res.worst.mean_loss == max(g.mean_loss for g in res.groups)
    with pytest.raises(DataContractError, match="loss must be one of"):
        bounded_group_loss(y, pred, codes, ["a", "b"], bound=1.0, loss="huber")
    with pytest.raises(DataContractError, match="bound must be a finite number"):
        bounded_group_loss(y, pred, codes, ["a", "b"], bound=float("nan"))
