"""fairengine.multiclass.rates: one-vs-rest rates equal fairlearn's MetricFrame (to 1e-12,
weighted and not), expected counts equal direct sums, the argmax tie rule, JSON round trip, and
the coverage of the Wilson intervals (Wilson 1927; Korn & Graubard 1998 effective counts)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fairlearn.metrics import (
    MetricFrame,
    false_positive_rate,
    selection_rate,
    true_positive_rate,
)

from fairengine.multiclass import ClassRates, group_class_rates

CATS = ["Female", "Male", "Other"]
CLASSES = ["Low", "Medium", "High", "Very_high"]


def _data(n: int = 900, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, n)
    y = rng.integers(0, 4, n)
    noise = rng.integers(0, 4, n)
    pred = np.where(rng.random(n) < 0.5 + 0.1 * codes, y, noise)
    w = rng.integers(1, 5, n).astype(float)
    return y, pred, codes, w


def _one_vs_rest(c: int):
    def sel(yt, yp, sample_weight=None):
        return selection_rate(yt == c, yp == c, pos_label=True, sample_weight=sample_weight)

    def tpr(yt, yp, sample_weight=None):
        return true_positive_rate(yt == c, yp == c, pos_label=True, sample_weight=sample_weight)

    def fpr(yt, yp, sample_weight=None):
        return false_positive_rate(yt == c, yp == c, pos_label=True, sample_weight=sample_weight)

    return {"selection": sel, "tpr": tpr, "fpr": fpr}


@pytest.mark.parametrize("weighted", [False, True])
def test_rates_equal_fairlearn_metricframe(weighted: bool) -> None:
    y, pred, codes, w = _data()
    r = group_class_rates(
        y, pred, codes, CATS, CLASSES, weights=w if weighted else None, attribute="sex"
    )
    sensitive = np.array(CATS)[codes]
    for c in range(len(CLASSES)):
        funcs = _one_vs_rest(c)
        params = {m: {"sample_weight": w} for m in funcs} if weighted else None
        mf = MetricFrame(
            metrics=funcs,
            y_true=y,
            y_pred=pred,
            sensitive_features=sensitive,
            sample_params=params,
        )
        for metric in funcs:
            for g in CATS:
                got = r.group(g).rate(metric, c).value
                assert got == pytest.approx(mf.by_group.loc[g, metric], abs=1e-12)


def test_unweighted_intervals_are_wilson_on_counts() -> None:
    from fairengine.intervals import wilson_interval

    y, pred, codes, _ = _data()
    r = group_class_rates(y, pred, codes, CATS, CLASSES)
    rows = (codes == 1) & (y == 2)
    k = int(np.sum(pred[rows] == 2))
    low, high = wilson_interval(k, int(rows.sum()), 0.95)
    est = r.group("Male").rate("tpr", 2)
    assert est.n == int(rows.sum())
    assert (est.interval.low, est.interval.high) == pytest.approx((float(low), float(high)))
    assert est.interval.method == "wilson"
    # binomial standard error
    m = k / rows.sum()
    assert est.se == pytest.approx(np.sqrt(m * (1 - m) / rows.sum()), rel=1e-12)


def test_expected_counts_and_argmax() -> None:
    rng = np.random.default_rng(3)
    n = 500
    y = rng.integers(0, 3, n)
    codes = rng.integers(0, 2, n)
    prob = rng.dirichlet(np.ones(3), n)
    w = rng.uniform(0.5, 2.0, n)
    r = group_class_rates(
        y, prob, codes, ["a", "b"], ["x", "y", "z"], weights=w, probabilities="expected"
    )
    assert r.prediction == "expected"
    for g in range(2):
        for c in range(3):
            rows = codes == g
            sel = np.sum(w[rows] * prob[rows, c]) / np.sum(w[rows])
            pos = rows & (y == c)
            neg = rows & (y != c)
            tpr = np.sum(w[pos] * prob[pos, c]) / np.sum(w[pos])
            fpr = np.sum(w[neg] * prob[neg, c]) / np.sum(w[neg])
            grp = r.groups[g]
            assert grp.rate("selection", c).value == pytest.approx(sel, abs=1e-12)
            assert grp.rate("tpr", c).value == pytest.approx(tpr, abs=1e-12)
            assert grp.rate("fpr", c).value == pytest.approx(fpr, abs=1e-12)
            assert grp.rate("tpr", c).interval.method.startswith("wald")
    # argmax with ties to the lowest code: a row (0.4, 0.4, 0.2) is class 0
    tied = np.array([[0.4, 0.4, 0.2], [0.2, 0.4, 0.4], [0.1, 0.2, 0.7]])
    r2 = group_class_rates([0, 1, 2], tied, [0, 0, 0], ["a"], ["x", "y", "z"])
    assert r2.prediction == "argmax"
    assert r2.values("selection")[0] == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert r2.values("tpr")[0] == pytest.approx([1.0, 1.0, 1.0])  # ŷ = (0, 1, 2)


def test_undefined_rate_is_nan_and_json_round_trip() -> None:
    # group b has no row of true class z: its TPR of z is undefined
    y = np.array([0, 1, 2, 0, 1, 0])
    pred = np.array([0, 1, 2, 1, 1, 0])
    codes = np.array([0, 0, 0, 1, 1, 1])
    r = group_class_rates(y, pred, codes, ["a", "b"], ["x", "y", "z"], weights=np.ones(6))
    est = r.group("b").rate("tpr", 2)
    assert np.isnan(est.value) and est.n == 0 and np.isnan(est.interval.low)
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = ClassRates.from_dict(json.loads(text))
    assert back.to_dict() == d
    assert back.group("a").rate("fpr", 1) == r.group("a").rate("fpr", 1)


def _coverage(weighted: bool, probabilities: bool) -> np.ndarray:
    """Share of 1,500 groups of ~150 rows whose 95% intervals cover the true rates, per
    (metric, class). Truth: y ~ Cat(π), ŷ | y ~ Cat(M[y]) (or the probabilities M[y] as
    expected counts)."""
    rng = np.random.default_rng(11)
    n_groups, per = 1500, 150
    pi = np.array([0.5, 0.3, 0.2])
    m = np.array([[0.7, 0.2, 0.1], [0.25, 0.6, 0.15], [0.1, 0.3, 0.6]])
    n = n_groups * per
    codes = np.repeat(np.arange(n_groups), per)
    y = rng.choice(3, size=n, p=pi)
    if probabilities:
        gam = rng.gamma(10 * m[y])
        pred = gam / gam.sum(axis=1, keepdims=True)  # Dirichlet(10 M[y]): E[P | y] = M[y]
    else:
        u = rng.random(n)[:, None]
        pred = (u > np.cumsum(m[y], axis=1)).sum(axis=1)
    truth_m = m
    w = rng.choice([0.5, 1.0, 3.0], size=n) if weighted else None
    r = group_class_rates(
        y,
        pred,
        codes,
        [str(i) for i in range(n_groups)],
        ["a", "b", "c"],
        weights=w,
        probabilities="expected",
    )
    sel = pi @ truth_m
    tpr = np.diag(truth_m)
    fpr = np.array([(sel[c] - pi[c] * truth_m[c, c]) / (1 - pi[c]) for c in range(3)])
    out = np.empty((3, 3))
    for j, (metric, true) in enumerate((("selection", sel), ("tpr", tpr), ("fpr", fpr))):
        for c in range(3):
            ivs = [g.rate(metric, c).interval for g in r.groups]
            out[j, c] = np.mean([iv.low <= true[c] <= iv.high for iv in ivs])
    return out


@pytest.mark.parametrize(
    ("weighted", "probabilities"), [(False, False), (True, False), (False, True)]
)
def test_interval_coverage(weighted: bool, probabilities: bool) -> None:
    """Wilson (counts / effective counts) and Wald (expected counts) 95% intervals cover the
    true rate in 95% ± MC error of 1,500 groups (binomial sd 0.0056; band ±0.025 also allows
    Wilson's small-n oscillation, Brown, Cai & DasGupta 2001 Fig. 4)."""
    cov = _coverage(weighted, probabilities)
    assert np.all(np.abs(cov - 0.95) < 0.025), cov
    assert abs(cov.mean() - 0.95) < 0.012, cov
