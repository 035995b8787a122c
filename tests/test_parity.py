"""Demographic parity and equalized odds (fairengine.group_parity), cross-checked with
fairlearn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    demographic_parity_difference,
    equalized_odds_difference,
    false_positive_rate,
    selection_rate,
    true_positive_rate,
)

from fairengine.dataset import AuditDataset
from fairengine.group_parity import group_parity, metric_token
from fairengine.group_parity.result import GroupParityDetails
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles


def data(n: int = 3000, seed: int = 0, weights: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    sex = rng.choice(["female", "male"], n)
    y = rng.binomial(1, np.where(sex == "male", 0.5, 0.3))
    score = np.clip(rng.normal(0.35 + 0.2 * y + 0.1 * (race == "a"), 0.2), 0, 1)
    df = pd.DataFrame({"race": race, "sex": sex, "y": y, "s": score})
    if weights:
        df["w"] = rng.uniform(0.2, 3.0, n)
    return df


def fe(df: pd.DataFrame, threshold: float | None = 0.5, weight: str | None = None, **kw):
    ds = AuditDataset.from_frame(
        df, ColumnRoles("y", ("race", "sex"), score="s", weight=weight), threshold=threshold
    )
    return group_parity(ds, **kw)


@pytest.mark.parametrize("weighted", [False, True])
def test_rates_and_gaps_match_fairlearn(weighted: bool) -> None:
    df = data(weights=weighted)
    res = fe(df, weight="w" if weighted else None)
    yhat = (df["s"] > 0.5).astype(int)
    sp = {"sample_weight": df["w"].to_numpy()} if weighted else None
    params = {k: sp for k in ("sr", "tpr", "fpr")} if weighted else None
    for attr in ("race", "sex"):
        mf = MetricFrame(
            metrics={"sr": selection_rate, "tpr": true_positive_rate, "fpr": false_positive_rate},
            y_true=df["y"],
            y_pred=yhat,
            sensitive_features=df[attr],
            sample_params=params,
        )
        groups = details(res).attributes[attr].groups
        for g in groups:
            fl = mf.by_group.loc[g.group]
            assert g.rates.positive_rate.estimate == pytest.approx(fl["sr"], abs=1e-12)
            assert g.rates.tpr.estimate == pytest.approx(fl["tpr"], abs=1e-12)
            assert g.rates.fpr.estimate == pytest.approx(fl["fpr"], abs=1e-12)
        kw = {"sample_weight": df["w"]} if weighted else {}
        dp = [f.estimate for f in res.findings if f.key.startswith(f"dp_gap.{attr}.")]
        assert max(abs(np.array(dp))) == pytest.approx(
            demographic_parity_difference(df["y"], yhat, sensitive_features=df[attr], **kw)
        )
        eo = [
            f.estimate
            for f in res.findings
            if f.key.split(".")[0] in ("tpr_gap", "fpr_gap") and f.key.split(".")[1] == attr
        ]
        assert max(abs(np.array(eo))) == pytest.approx(
            equalized_odds_difference(df["y"], yhat, sensitive_features=df[attr], **kw)
        )


def details(res: MethodResult) -> GroupParityDetails:
    assert isinstance(res.details, GroupParityDetails)
    return res.details


def test_gap_sign_keys_and_counts() -> None:
    df = data()
    res = fe(df)
    # 3 race pairs + 1 sex pair, each with dp, tpr, fpr
    assert len(res.findings) == (3 + 1) * 3
    f = next(f for f in res.findings if f.key == "dp_gap.sex.female_male")
    yhat = df["s"] > 0.5
    expected = yhat[df["sex"] == "female"].mean() - yhat[df["sex"] == "male"].mean()
    assert f.estimate == pytest.approx(expected)
    assert f.interval.low < f.estimate < f.interval.high
    assert f.interval.method == "newcombe hybrid score (continuity-corrected)"
    assert f.null_hypothesis == "|gap| ≤ 0.05"


def test_expected_counts_without_threshold() -> None:
    df = data()
    res = fe(df, threshold=None)
    g = {x.group: x for x in details(res).attributes["sex"].groups}
    assert g["male"].rates.positive_rate.estimate == pytest.approx(
        df.loc[df.sex == "male", "s"].mean()
    )
    tpr = df.loc[(df.sex == "male") & (df.y == 1), "s"].mean()
    assert g["male"].rates.tpr.estimate == pytest.approx(tpr)
    assert details(res).prediction == "expected"
    assert res.findings[0].interval.method.startswith("wald")


def test_detects_a_real_disparity_and_not_a_null_one() -> None:
    rng = np.random.default_rng(5)
    n = 4000
    sex = rng.choice(["f", "m"], n)
    y = rng.integers(0, 2, n)
    fair = rng.random(n)
    unfair = np.clip(fair + 0.25 * (sex == "m"), 0, 1)
    df = pd.DataFrame({"sex": sex, "y": y, "fair": fair, "unfair": unfair})
    roles = dict(label="y", protected=("sex",))
    res_u = group_parity(
        AuditDataset.from_frame(df, ColumnRoles(score="unfair", **roles), threshold=0.5)
    )
    res_f = group_parity(
        AuditDataset.from_frame(df, ColumnRoles(score="fair", **roles), threshold=0.5)
    )
    dp_u = next(f for f in res_u.findings if f.key.startswith("dp_gap"))
    dp_f = next(f for f in res_f.findings if f.key.startswith("dp_gap"))
    assert dp_u.estimate == pytest.approx(-0.25, abs=0.04) and dp_u.pvalue < 1e-6
    assert abs(dp_f.estimate) < 0.05 and dp_f.pvalue > 0.05


def test_undefined_rate_is_nan_untested_and_warned() -> None:
    df = data(600)
    df.loc[df["race"] == "c", "y"] = 0  # no positives in group c: TPR undefined
    res = fe(df)
    f = next(f for f in res.findings if f.key == "tpr_gap.race.a_c")
    assert np.isnan(f.estimate) and f.pvalue is None and f.interval is None
    assert "not tested: the gap is undefined" in f.reading and "nan" not in f.reading
    assert any(
        w.startswith("tpr_gap for race 'a' vs 'c' is not tested: the gap is undefined")
        and "['c']" in w
        for w in res.warnings
    )


def test_metric_token() -> None:
    assert metric_token("Asian-Pac-Islander") == "Asian-Pac-Islander"
    # lossy names: readable slug plus a hash of the exact name (fairengine.finding_keys)
    assert metric_token(">50K <script>").startswith("50K-script-x")
    assert metric_token(">50K <script>") != metric_token("<50K script>")
    assert metric_token("") not in {"", "_"}


def test_pairs_in_details_signed_absolute_ratio_four_fifths() -> None:
    df = data()
    res = fe(df)
    rows = details(res).attributes["sex"].pairs.positive_rate
    assert len(rows) == 1
    row = rows[0]
    yhat = df["s"] > 0.5
    rf, rm = yhat[df["sex"] == "female"].mean(), yhat[df["sex"] == "male"].mean()
    assert (row.a, row.b) == ("female", "male")
    assert row.gap == pytest.approx(rf - rm) and row.abs_gap == pytest.approx(abs(rf - rm))
    assert row.ratio == pytest.approx(rf / rm)
    assert row.impact_ratio == pytest.approx(min(rf, rm) / max(rf, rm))
    assert row.four_fifths_violated == (min(rf, rm) / max(rf, rm) < 0.8)
    assert row.ratio_low < row.ratio < row.ratio_high
    # the finding keys are unchanged by the extension
    assert {f.key.split(".")[0] for f in res.findings} == {"dp_gap", "tpr_gap", "fpr_gap"}
    assert len(details(res).attributes["race"].pairs.tpr) == 3
