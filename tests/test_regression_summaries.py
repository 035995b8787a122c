"""fairengine.regression.summaries: per-group estimates equal fairlearn's MetricFrame (to 1e-12,
weighted and not), RMSE from the MSE interval, JSON round trip, and the input contract."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import mean_absolute_error, mean_squared_error

from fairengine.errors import DataContractError
from fairengine.regression import GroupSummaries, group_summaries

CATS = ["Female", "Male", "Other"]


def _data(n: int = 600, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, n)
    x = rng.normal(size=n)
    y = 2 * x + rng.normal(size=n) * (1 + 0.5 * codes)
    pred = 2 * x + 0.3 * codes
    w = rng.integers(1, 5, n).astype(float)
    return y, pred, codes, w


def _mean_prediction(y_true: np.ndarray, y_pred: np.ndarray, sample_weight=None) -> float:
    return float(np.average(y_pred, weights=sample_weight))


@pytest.mark.parametrize("weighted", [False, True])
def test_estimates_equal_fairlearn_metricframe(weighted: bool) -> None:
    y, pred, codes, w = _data()
    weights = w if weighted else None
    s = group_summaries(y, pred, codes, CATS, weights=weights, attribute="sex")
    sensitive = np.array(CATS)[codes]
    params = {"sample_weight": w} if weighted else None
    metrics = {"mae": mean_absolute_error, "mse": mean_squared_error, "mp": _mean_prediction}
    sp = {k: params for k in metrics} if weighted else None
    mf = MetricFrame(
        metrics=metrics, y_true=y, y_pred=pred, sensitive_features=sensitive, sample_params=sp
    )
    for g in s.groups:
        row = mf.by_group.loc[g.group]
        assert g.mae.value == pytest.approx(row["mae"], abs=1e-12, rel=1e-12)
        assert g.mse.value == pytest.approx(row["mse"], abs=1e-12, rel=1e-12)
        assert g.mean_prediction.value == pytest.approx(row["mp"], abs=1e-12, rel=1e-12)
        assert g.rmse.value == pytest.approx(math.sqrt(row["mse"]), abs=1e-12)
        rows = codes == g.code
        ww = w[rows] if weighted else None
        assert g.mean_residual.value == pytest.approx(
            np.average(y[rows] - pred[rows], weights=ww), abs=1e-12
        )
        assert g.mean_target.value == pytest.approx(np.average(y[rows], weights=ww), abs=1e-12)
        assert g.n == int(rows.sum())


def test_unweighted_t_interval_is_the_textbook_one_and_rmse_is_the_root_of_mse() -> None:
    from scipy import stats

    y, pred, codes, _ = _data()
    s = group_summaries(y, pred, codes, CATS, confidence_level=0.9)
    g = s.group("Male")
    e = (y - pred)[codes == 1]
    se = e.std(ddof=1) / math.sqrt(e.size)
    q = stats.t.ppf(0.95, e.size - 1)
    iv = g.mean_residual.interval
    assert (iv.low, iv.high, iv.level) == pytest.approx((e.mean() - q * se, e.mean() + q * se, 0.9))
    assert g.mean_residual.se == pytest.approx(se, rel=1e-12)
    m = g.mse.interval
    assert g.rmse.interval.low == pytest.approx(math.sqrt(m.low))
    assert g.rmse.interval.high == pytest.approx(math.sqrt(m.high))
    # the MSE interval leans right (Hall's correction for a right-skewed mean)
    assert m.high - g.mse.value > g.mse.value - m.low


def test_equal_weights_give_the_unweighted_summaries() -> None:
    y, pred, codes, _ = _data()
    a = group_summaries(y, pred, codes, CATS)
    b = group_summaries(y, pred, codes, CATS, weights=np.full(y.size, 3.0))
    for ga, gb in zip(a.groups, b.groups, strict=True):
        for q in ("mean_prediction", "mae", "mse"):
            ea, eb = ga.estimate(q), gb.estimate(q)
            assert eb.value == pytest.approx(ea.value, rel=1e-12)
            assert eb.se == pytest.approx(ea.se, rel=1e-10)
            assert eb.interval.low == pytest.approx(ea.interval.low, rel=1e-10)


def test_json_round_trip_with_nan() -> None:
    y, pred, codes, _ = _data()
    s = group_summaries(y, pred, codes, CATS, attribute="sex")
    text = json.dumps(s.to_dict(), allow_nan=False)
    assert GroupSummaries.from_dict(json.loads(text)) == s
    # a perfect model: RMSE 0 and its se NaN (encoded as "NaN")
    p = group_summaries(y, y, codes, CATS)
    d = p.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["groups"][0]["rmse"]["se"] == "NaN"
    back = GroupSummaries.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert math.isnan(back.groups[0].rmse.se)
    assert back.groups[0].mse == p.groups[0].mse
    assert isinstance(back.groups, tuple)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"prediction": np.array([0.1, np.nan, 0.3, 0.4])}, "prediction must hold finite"),
        ({"y": np.array([1.0, 2.0, 3.0])}, "prediction has 4 rows but y has 3"),
        ({"groups": np.array([0, 0, 0, 1])}, "group 'b' (code 1) has 1 row(s)"),
        ({"groups": np.array([0, 0, 1, 2])}, "groups must hold codes 0..1"),
        ({"groups": np.array([0, 0, 1])}, "groups must be a 1-D array of group codes"),
        ({"weights": np.array([1.0, -1.0, 1.0, 1.0])}, "weights must be non-negative"),
        ({"weights": np.array([1.0, 1.0, 0.0, 0.0])}, "weights of group 'b' are positive on 0 row"),
        ({"weights": np.array([1.0, 1.0, 0.0, 2.0])}, "weights of group 'b' are positive on 1 row"),
        ({"y": np.array(["a", "b", "c", "d"])}, "y must be numeric"),
    ],
)
def test_bad_input_names_the_array(change: dict, message: str) -> None:
    args = {
        "y": np.array([1.0, 2.0, 3.0, 4.0]),
        "prediction": np.array([1.1, 2.1, 2.9, 4.2]),
        "groups": np.array([0, 0, 1, 1]),
        "weights": None,
    }
    args.update(change)
    with pytest.raises(DataContractError, match=_escape(message)):
        group_summaries(
            args["y"], args["prediction"], args["groups"], ["a", "b"], weights=args["weights"]
        )


def _escape(text: str) -> str:
    import re

    return re.escape(text)
