"""Per-group performance (fairengine.group_performance): hand-computed confusion counts, zero
denominators, Wilson vs scipy, linearised variances vs binomial and simulation, exact and binned
AUC per group vs sklearn, LiFT's AUC quirks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import GroupEncoding
from fairengine.errors import DataContractError
from fairengine.group_performance import (
    binned_score_blocks,
    check_metric_names,
    confusion_counts,
    exact_score_blocks,
    group_auc,
    group_rates,
    hard_prediction_blocks,
)
from fairengine.group_table import GroupTable


def moments(codes, y, p, w=None, hard=True, cats=("a", "b")) -> GroupLabelMoments:
    return GroupLabelMoments.from_arrays(
        "g",
        cats,
        np.asarray(codes),
        np.asarray(y),
        np.asarray(p, float),
        None if w is None else np.asarray(w, float),
        hard=hard,
    )


def test_hand_computed_rates() -> None:
    # group a: (y, ŷ) = (1,1) (1,1) (1,0) (0,1) (0,0) (0,0) (0,0): TP 2 FN 1 FP 1 TN 3
    # group b: no positives: (0,1) (0,0)
    codes = [0] * 7 + [1] * 2
    y = [1, 1, 1, 0, 0, 0, 0, 0, 0]
    p = [1, 1, 0, 1, 0, 0, 0, 1, 0]
    m = moments(codes, y, p)
    cc = confusion_counts(m)
    assert [cc[k][0] for k in ("TP", "FP", "FN", "TN")] == [2, 1, 1, 3]
    r = group_rates(m)
    a = {k: v.estimate[0] for k, v in r.items()}
    assert a == pytest.approx(
        {
            "PRECISION": 2 / 3,
            "RECALL": 2 / 3,
            "FNR": 1 / 3,
            "FPR": 1 / 4,
            "TNR": 3 / 4,
            "ACCURACY": 5 / 7,
        }
    )
    # group b has no positives: recall/FNR undefined, precision 0/1 = 0
    assert np.isnan(r["RECALL"].estimate[1]) and np.isnan(r["FNR"].estimate[1])
    assert r["PRECISION"].estimate[1] == 0.0 and r["FPR"].estimate[1] == 0.5
    assert np.isnan(r["RECALL"].low[1])
    # LiFT: numerator 0 -> 0.0 even with a zero denominator
    lift = group_rates(m, lift_compat=True)
    assert lift["RECALL"].estimate[1] == 0.0 and lift["FNR"].estimate[1] == 0.0
    assert lift["FPR"].estimate[1] == 0.5


def test_wilson_intervals_match_scipy() -> None:
    rng = np.random.default_rng(0)
    n = 400
    codes = rng.integers(0, 2, n)
    y = rng.integers(0, 2, n)
    p = (rng.random(n) < 0.4 + 0.2 * y).astype(float)
    m = moments(codes, y, p)
    r = group_rates(m)
    cc = confusion_counts(m)
    for g in (0, 1):
        k, tot = int(cc["TP"][g]), int(cc["TP"][g] + cc["FN"][g])
        ci = stats.binomtest(k, tot).proportion_ci(method="wilson")
        assert r["RECALL"].low[g] == pytest.approx(ci.low)
        assert r["RECALL"].high[g] == pytest.approx(ci.high)
        assert r["RECALL"].interval_method == "wilson"


def test_linearised_variances_reduce_to_binomial_for_hard_unweighted() -> None:
    rng = np.random.default_rng(1)
    n = 500
    codes = rng.integers(0, 2, n)
    y = rng.integers(0, 2, n)
    p = (rng.random(n) < 0.3 + 0.3 * y).astype(float)
    r = group_rates(moments(codes, y, p))
    for name, rate in r.items():
        binom = rate.estimate * (1 - rate.estimate) / rate.denominator
        np.testing.assert_allclose(rate.variance, binom, rtol=1e-10, err_msg=name)


def test_expected_counts_precision_and_accuracy_variance_by_simulation() -> None:
    """Expected-count mode: precision Σpy/Σp and accuracy are ratios of sums; their
    linearised variance matches the Monte-Carlo variance over R = 1500 replicates (relative
    MC s.e. of a variance ≈ √(2/R) ≈ 3.7 %; we allow 15 %)."""
    rng = np.random.default_rng(2)
    reps, n = 1500, 400
    est = {"PRECISION": [], "ACCURACY": []}
    var = {"PRECISION": [], "ACCURACY": []}
    codes = np.zeros(n, dtype=int)
    for _ in range(reps):
        y = rng.integers(0, 2, n)
        p = rng.beta(2 + 2 * y, 3)
        r = group_rates(moments(codes, y, p, hard=False, cats=("a",)))
        for k in est:
            est[k].append(r[k].estimate[0])
            var[k].append(r[k].variance[0])
    for k in est:
        assert np.mean(var[k]) == pytest.approx(np.var(est[k], ddof=1), rel=0.15), k


def test_weighted_rates_equal_replicated_rows() -> None:
    rng = np.random.default_rng(3)
    n = 300
    codes, y = rng.integers(0, 2, n), rng.integers(0, 2, n)
    p = (rng.random(n) < 0.5).astype(float)
    w = rng.integers(1, 4, n)
    rw = group_rates(moments(codes, y, p, w.astype(float)))
    rr = group_rates(moments(np.repeat(codes, w), np.repeat(y, w), np.repeat(p, w)))
    for k in rw:
        np.testing.assert_allclose(rw[k].estimate, rr[k].estimate)
    assert rw["RECALL"].interval_method.startswith("wald")


# ------------------------------------------------------------------------ AUC per group
def data(n: int, seed: int, groups: int = 3):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, groups, n)
    y = rng.integers(0, 2, n).astype(np.int8)
    s = 1 / (1 + np.exp(-rng.normal(y * (0.5 + codes * 0.3), 1)))
    return codes, y, np.round(s, 3)  # rounding creates ties


def test_exact_group_auc_matches_sklearn_and_weights() -> None:
    codes, y, s = data(3000, 4)
    w = np.random.default_rng(5).uniform(0.5, 2, y.size)
    for weights in (None, w):
        res = group_auc(exact_score_blocks(codes, 3, y, s, weights))
        for g in range(3):
            sel = codes == g
            sw = None if weights is None else weights[sel]
            assert res.estimates[g].auc == pytest.approx(
                roc_auc_score(y[sel], s[sel], sample_weight=sw), abs=1e-12
            )
        assert res.exact and np.all(res.error_bound == 0)


def test_binned_group_auc_within_reported_bound() -> None:
    codes, y, s = data(20000, 6)
    enc = GroupEncoding("g", codes, ("a", "b", "c"))
    table = GroupTable.from_arrays([enc], y, s, hard=False, score=s, bins=64)
    hw, hw2 = table.histogram("g")
    res = group_auc(binned_score_blocks(hw, hw2, table.moments("g").n))
    for g in range(3):
        exact = roc_auc_score(y[codes == g], s[codes == g])
        assert abs(res.estimates[g].auc - exact) <= res.error_bound[g]
        assert res.error_bound[g] < 0.02


def test_group_without_positives_and_all_tied_scores() -> None:
    codes = np.array([0, 0, 0, 1, 1, 1, 1])
    y = np.array([0, 0, 0, 1, 0, 1, 0], dtype=np.int8)
    s = np.array([0.1, 0.5, 0.9, 0.4, 0.4, 0.4, 0.4])
    res = group_auc(exact_score_blocks(codes, 2, y, s))
    assert np.isnan(res.estimates[0].auc)  # no positives
    assert res.estimates[1].auc == 0.5 and res.estimates[1].variance == 0.0
    assert res.all_tied[1]
    lift = group_auc(exact_score_blocks(codes, 2, y, s), lift_compat=True)
    assert lift.estimates[1].auc == 0.0  # LiFT: one distinct score -> 0.0
    assert np.isnan(lift.estimates[0].auc)


def test_lift_auc_missing_origin_examples() -> None:
    """lift-semantics §1.7 verified examples: 0.375 (true 0.5) and 0.5556 (true 0.6667)."""
    y = np.array([1, 0, 1, 0], dtype=np.int8)
    s = np.array([0.9, 0.9, 0.1, 0.1])
    codes = np.zeros(4, dtype=int)
    blocks = exact_score_blocks(codes, 1, y, s)
    assert group_auc(blocks, lift_compat=True).estimates[0].auc == pytest.approx(0.375)
    assert group_auc(blocks).estimates[0].auc == pytest.approx(0.5)
    # thresholded predictions, straight from the count table
    y = [1, 1, 0, 1, 0, 0]
    p = [1, 1, 1, 0, 0, 0]
    m = moments(np.zeros(6, int), y, p, cats=("a",))
    hb = hard_prediction_blocks(m)
    assert group_auc(hb, lift_compat=True).estimates[0].auc == pytest.approx(5 / 9)
    assert group_auc(hb).estimates[0].auc == pytest.approx(2 / 3)


def test_metric_names() -> None:
    assert check_metric_names(["auc", "tpr"], "x") == ["AUC", "RECALL"]
    with pytest.raises(DataContractError, match="valid names"):
        check_metric_names(["F1"], "methods.group_metrics.performance_metrics")
