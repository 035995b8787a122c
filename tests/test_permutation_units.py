"""Unit tests of fairengine.permutation: metrics and variances, draws, batched AUC/DeLong,
p-values and the result object, bad input, configuration and the audit method."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import chisquare, hypergeom
from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

from fairengine.counts import GroupLabelMoments
from fairengine.dataset import AuditDataset
from fairengine.delong import auc_delong
from fairengine.errors import ConfigError, DataContractError
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation import (
    CustomMetricError,
    PermutationConfig,
    permutation_pvalue,
    permutation_test,
    run_permutation_tests,
)
from fairengine.permutation.auc import (
    BYTE_LANE_MIN_ROWS_PER_BOUND,
    CACHE_ELEMENTS,
    auc_pair_numpy,
    auc_pair_torch,
    auc_weighted_numpy,
    rank_sample,
)
from fairengine.permutation.cell_draws import (
    hypergeometric_cell_draws,
    multinomial_cell_draws,
    random_subset_masks,
)
from fairengine.permutation.metrics import RATIO_METRICS, ratio_value_variance, row_values
from fairengine.permutation.result import PermutationDetails
from fairengine.roles import ColumnRoles


def toy(n: int = 600, seed: int = 0, hard: bool = True):
    rng = np.random.default_rng(seed)
    g = rng.random(n) < 0.45
    y = rng.binomial(1, np.where(g, 0.6, 0.3))
    s = np.clip(rng.normal(0.35 + 0.3 * y + 0.05 * g, 0.2), 0, 1)
    p = (s > 0.5).astype(float) if hard else s
    return y, p, s, g


# ----------------------------------------------------------------------------- metrics


def test_ratio_metrics_match_sklearn_and_binomial_variance() -> None:
    y, p, _, g = toy()
    for grp in (g, ~g):
        yy, pp = y[grp], p[grp]
        ref = {
            "tpr": recall_score(yy, pp),
            "fnr": 1 - recall_score(yy, pp),
            "fpr": np.mean(pp[yy == 0]),
            "tnr": 1 - np.mean(pp[yy == 0]),
            "precision": precision_score(yy, pp),
            "accuracy": accuracy_score(yy, pp),
            "positive_rate": pp.mean(),
        }
        denominators = {
            "tpr": (yy == 1).sum(),
            "fnr": (yy == 1).sum(),
            "fpr": (yy == 0).sum(),
            "tnr": (yy == 0).sum(),
            "precision": (pp == 1).sum(),
            "accuracy": yy.size,
            "positive_rate": yy.size,
        }
        for name, value in ref.items():
            m, var = ratio_value_variance(row_values(RATIO_METRICS[name], yy, pp).sum(axis=0))
            assert m == pytest.approx(value, abs=1e-12), name
            assert var == pytest.approx(value * (1 - value) / denominators[name], rel=1e-9), name


def test_weighted_ratio_variance_matches_counts_module() -> None:
    """Weighted expected-count TPR: value and linearisation variance equal GroupLabelMoments'."""
    y, _, s, g = toy(hard=False)
    w = np.random.default_rng(3).uniform(0.2, 3.0, y.size)
    mom = GroupLabelMoments.from_arrays("a", ["0", "1"], g.astype(int), y, s, w, hard=False)
    m_ref, v_ref, _ = mom.rate((1,))
    for code in (0, 1):
        rows = g.astype(int) == code
        sums = row_values(RATIO_METRICS["tpr"], y[rows], s[rows], weights=w[rows]).sum(axis=0)
        m, v = ratio_value_variance(sums)
        assert m == pytest.approx(m_ref[code], rel=1e-12)
        assert v == pytest.approx(v_ref[code], rel=1e-9)


# ----------------------------------------------------------------------------- draws


@pytest.mark.parametrize(("n", "k"), [(7, 1), (7, 3), (7, 6), (9, 4)])
def test_random_subset_masks_are_uniform(n: int, k: int) -> None:
    """Every k-subset equally likely: chi-square over all C(n, k) subsets (p > 1e-4)."""
    m = random_subset_masks(np.random.default_rng(n * 10 + k), n, k, 60_000)
    assert np.all(m.sum(axis=1) == k)
    codes = (m * (1 << np.arange(n))).sum(axis=1)
    _, counts = np.unique(codes, return_counts=True)
    from math import comb

    assert counts.size == comb(n, k)
    assert chisquare(counts).pvalue > 1e-4


def test_random_subset_masks_large_rows_exact_size() -> None:
    m = random_subset_masks(np.random.default_rng(1), 50_000, 12_345, 20)
    assert np.all(m.sum(axis=1) == 12_345)
    assert random_subset_masks(np.random.default_rng(1), 5, 0, 3).sum() == 0
    assert random_subset_masks(np.random.default_rng(1), 5, 5, 3).all()


def test_hypergeometric_cell_draws_match_scipy() -> None:
    c = np.array([9, 0, 5, 6])
    x = hypergeometric_cell_draws(np.random.default_rng(2), c, 8, 40_000)
    assert np.all(x.sum(axis=1) == 8)
    assert np.all(x[:, 1] == 0)
    # marginal of cell 0 is hypergeometric(N=20, K=9, n=8)
    vals, counts = np.unique(x[:, 0], return_counts=True)
    expected = hypergeom(20, 9, 8).pmf(vals) * x.shape[0]
    keep = expected > 5
    stat = chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum())
    assert stat.pvalue > 1e-4
    b = multinomial_cell_draws(np.random.default_rng(3), np.array([2, 3, 5]), 1000)
    assert np.all(b.sum(axis=1) == 10)
    assert b.mean(axis=0) == pytest.approx([2, 3, 5], abs=0.3)


# ----------------------------------------------------------------------------- batched AUC


@pytest.mark.parametrize("ties", [False, True])
def test_batched_auc_delong_equals_single_sample_delong(ties: bool) -> None:
    rng = np.random.default_rng(4)
    n = 400
    y = rng.binomial(1, 0.35, n)
    s = rng.normal(0.9 * y, 1.0)
    if ties:
        s = np.round(s, 1)
    r = rank_sample(y, s)
    masks = rng.random((5, n)) < 0.4
    a, va, b, vb = auc_pair_numpy(r, masks[:, r.pos_rows], masks[:, r.neg_rows])
    ta, tva, tb, tvb = auc_pair_torch(
        r, torch.as_tensor(masks[:, r.pos_rows]), torch.as_tensor(masks[:, r.neg_rows]), "cpu"
    )
    for t, g in enumerate(masks):
        ea, eb = auc_delong(y[g], s[g]), auc_delong(y[~g], s[~g])
        assert a[t] == pytest.approx(roc_auc_score(y[g], s[g]), abs=1e-12)
        assert (a[t], va[t], b[t], vb[t]) == pytest.approx(
            (ea.auc, ea.variance, eb.auc, eb.variance), rel=1e-9
        )
        assert (ta[t], tva[t], tb[t], tvb[t]) == pytest.approx((a[t], va[t], b[t], vb[t]))
    # integer multiplicities (bootstrap) equal the AUC of the duplicated rows
    counts = rng.multinomial(n, np.full(n, 1 / n), size=3)
    aw, vw = auc_weighted_numpy(r, counts[:, r.pos_rows], counts[:, r.neg_rows])
    for t, c in enumerate(counts):
        rows = np.repeat(np.arange(n), c)
        e = auc_delong(y[rows], s[rows])
        assert (aw[t], vw[t]) == pytest.approx((e.auc, e.variance), rel=1e-9)


@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_batched_auc_pair_equals_direct_sums_of_each_group_exactly(share: float) -> None:
    """The pair AUC derives the larger group's sums from the smaller one's and the run
    constants (:func:`fairengine.permutation.auc._pair`); the sums are integers below 2**53 here,
    so every AUC and DeLong variance equals, bit for bit, the direct run sums of each group on
    its own (``auc_weighted_numpy`` with 0/1 multiplicities), over several cache chunks and
    with tied scores."""
    rng = np.random.default_rng(11)
    n = 3000
    y = rng.binomial(1, 0.3, n)
    s = np.round(rng.normal(0.8 * y, 1.0), 2)  # ties within and across labels
    r = rank_sample(y, s)
    masks = np.stack([random_subset_masks(rng, n, round(share * n), 1)[0] for _ in range(250)])
    gp, gn = masks[:, r.pos_rows], masks[:, r.neg_rows]
    a, va, b, vb = auc_pair_numpy(r, gp, gn)
    ea, eva = auc_weighted_numpy(r, gp.astype(np.int64), gn.astype(np.int64))
    eb, evb = auc_weighted_numpy(r, (~gp).astype(np.int64), (~gn).astype(np.int64))
    for got, want in ((a, ea), (va, eva), (b, eb), (vb, evb)):
        np.testing.assert_array_equal(got, want)
    assert np.isfinite(va).all() and np.isfinite(vb).all()


@pytest.mark.parametrize("n", [1999, 2000, 2003, 2007])
@pytest.mark.parametrize("decimals", [0, 1, 6])
def test_byte_lane_counts_equal_row_wise_cumulative_counts(n: int, decimals: int) -> None:
    """The cumulative counts at the run bounds are taken in byte lanes (eight rows per 64-bit
    word) on a side with many rows per bound and row by row otherwise; both are integer
    arithmetic, so the pair AUC and DeLong variances equal the direct run sums of each group
    bit for bit, whichever path each side takes (few runs: both sides in lanes; distinct
    scores: neither), for every n mod 8 (a bound at n inside the padding word), over several
    cache chunks, on masks that are column slices of a wider array as the permutation test
    passes them."""
    rng = np.random.default_rng(100 + n + decimals)
    y = rng.binomial(1, 0.3, n)
    s = np.round(rng.normal(0.8 * y, 1.0), decimals)
    r = rank_sample(y, s)
    lanes = [size >= BYTE_LANE_MIN_ROWS_PER_BOUND * (r.n_runs + 1) for size in (r.n_pos, r.n_neg)]
    if decimals != 1:  # 1 decimal: whatever mix the data gives
        assert lanes == [decimals == 0] * 2
    t = 3 * (CACHE_ELEMENTS // n) + 7  # several chunks and a short last one
    wide = rng.random((t, n + 13)) < 0.45
    block = wide[:, 5 : 5 + n]  # a strided view, as mask[:, :n1] and mask[:, n1:] are
    gp, gn = block[:, : r.n_pos], block[:, r.n_pos :]
    a, va, b, vb = auc_pair_numpy(r, gp, gn)
    ea, eva = auc_weighted_numpy(r, gp.astype(np.int64), gn.astype(np.int64))
    eb, evb = auc_weighted_numpy(r, (~gp).astype(np.int64), (~gn).astype(np.int64))
    for got, want in ((a, ea), (va, eva), (b, eb), (vb, evb)):
        np.testing.assert_array_equal(got, want)


def test_auc_test_torch_backend_matches_numpy_in_distribution() -> None:
    """Same observed statistic; p-values from independent permutation streams agree within
    Monte-Carlo error (|Δp| < 4·√(2 p(1−p)/T))."""
    y, p, s, g = toy(n=800, seed=5)
    kw = {"metric": "auc", "probability": s, "n_permutations": 999}
    rn = permutation_test(y, p, g, **kw)
    rt = permutation_test(y, p, g, backend="torch", device="cpu", **kw)
    assert rt.statistic == pytest.approx(rn.statistic)
    assert rt.path == "auc-torch-cpu"
    pbar = (rn.pvalue + rt.pvalue) / 2
    assert abs(rn.pvalue - rt.pvalue) < 4 * np.sqrt(2 * pbar * (1 - pbar) / 999) + 1e-3


# ----------------------------------------------------------------------------- p-values, result


def test_permutation_pvalue_plus_one_and_ties() -> None:
    null = np.array([0.5, -2.0, 2.0, 1.0, np.nan])
    p, b, n_nan = permutation_pvalue(2.0, null, "two-sided")
    assert (b, n_nan) == (3, 1)  # |±2| ties count, NaN counts as extreme
    assert p == pytest.approx(4 / 6)
    assert permutation_pvalue(2.0, null, "greater")[1] == 2
    assert permutation_pvalue(-2.0, null, "less")[1] == 2
    assert permutation_pvalue(10.0, np.zeros(99))[0] == pytest.approx(0.01)


def test_result_object_scipy_shape_and_json() -> None:
    y, p, _, g = toy()
    res = permutation_test(y, p, g, metric="tpr", n_permutations=499, seed=1)
    assert res.null_distribution.shape == (499,)
    assert res.pvalue == (1 + res.n_extreme) / 500
    assert res.pvalue_se == pytest.approx(np.sqrt(res.pvalue * (1 - res.pvalue) / 499))
    lo, hi = res.pvalue_interval()
    assert lo <= res.n_extreme / 499 <= hi
    ci = res.confidence_interval(0.9)
    assert ci.low < res.difference < ci.high and ci.method == "newcombe"
    assert res.decision(1.0) == "reject"
    json.dumps(res.to_dict(), allow_nan=False)
    tpr = [recall_score(y[m], p[m]) for m in (g, ~g)]
    assert res.difference == pytest.approx(tpr[0] - tpr[1])
    # same seed, same answer
    assert permutation_test(y, p, g, metric="tpr", n_permutations=499, seed=1).pvalue == (
        res.pvalue
    )


def test_lift_compat_divides_by_bootstrap_and_permutation_sd() -> None:
    y, p, _, g = toy()
    res = permutation_test(y, p, g, metric="fpr", studentize="lift_compat", n_permutations=299)
    assert res.statistic == pytest.approx(res.difference / res.extra["bootstrap_sd"])
    raw = permutation_test(y, p, g, metric="fpr", studentize="none", n_permutations=299)
    np.testing.assert_allclose(
        res.null_distribution, raw.null_distribution / np.std(raw.null_distribution, ddof=1)
    )


def test_custom_metric_matches_direct_computation() -> None:
    y, p, s, g = toy()

    def mean_score_of_positives(yy, ss, ww):
        return float(np.mean(ss[yy == 1]))

    res = permutation_test(
        y, p, g, metric=mean_score_of_positives, probability=s, n_permutations=49, n_bootstrap=20
    )
    direct = s[g & (y == 1)].mean() - s[~g & (y == 1)].mean()
    assert res.difference == pytest.approx(direct)
    assert res.path == "custom" and np.isfinite(res.statistic) and np.isfinite(res.se)


# ----------------------------------------------------------------------------- bad input


def test_cell_path_reads_rows_as_they_are() -> None:
    """Issue 23: labels, predictions and the group mask are counted as given (bool, int8,
    int64 or float 0/1: the same test at the same seed), and 1M rows of int8/int8/bool peak
    far below their 3 MB (no float or intp copy of a column, no np.isin over rows)."""
    import tracemalloc

    y, p, _, g = toy(2_000)
    ref = permutation_test(y, p, g, metric="fnr", n_permutations=999, seed=4)
    for yy, pp, gg in (
        (y.astype(bool), p.astype(np.int8), g),
        (y.astype(np.int8), p.astype(bool), g.astype(np.int64)),
        (y.astype(float), p, g.astype(float)),
    ):
        res = permutation_test(yy, pp, gg, metric="fnr", n_permutations=999, seed=4)
        assert (res.path, res.pvalue, res.statistic) == ("cells", ref.pvalue, ref.statistic)
    rng = np.random.default_rng(0)
    n = 1_000_000
    g = rng.random(n) < 0.3
    y = (rng.random(n) < 0.4).astype(np.int8)
    yhat = np.where(rng.random(n) < 0.8, y, 1 - y).astype(np.int8)
    tracemalloc.start()
    permutation_test(y, yhat, g, metric="fnr", n_permutations=999, seed=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.5 * (y.nbytes + yhat.nbytes + g.nbytes)


def test_group_without_positives_is_a_clear_error() -> None:
    y, p, _, g = toy()
    y = y.copy()
    y[g] = 0
    with pytest.raises(DataContractError, match=r"'A'.*no positive labels"):
        permutation_test(y, p, g, metric="fnr")
    with pytest.raises(DataContractError, match="positive and negative"):
        permutation_test(y, p, g, metric="auc", probability=p)


def test_bad_inputs_raise_fairengine_errors() -> None:
    y, p, s, g = toy()
    small = np.zeros_like(g)
    small[:3] = True
    with pytest.raises(DataContractError, match="needs at least 10"):
        permutation_test(y, p, small, metric="tpr", min_group_size=10)
    with pytest.raises(DataContractError, match="0/1 labels"):
        permutation_test(y + 1, p, g)
    with pytest.raises(DataContractError, match="alternative"):
        permutation_test(y, p, g, alternative="bigger")
    with pytest.raises(DataContractError, match="unknown metric"):
        permutation_test(y, p, g, metric="f1")
    with pytest.raises(DataContractError, match="sample weights"):
        permutation_test(y, p, g, metric="auc", probability=s, weights=np.ones(y.size))
    with pytest.raises(DataContractError, match="prediction"):
        permutation_test(y, p * 2, g)

    def broken(yy, ss, ww):
        raise ZeroDivisionError("boom")

    with pytest.raises(CustomMetricError, match=r"broken.*ZeroDivisionError: boom"):
        permutation_test(y, p, g, metric=broken, n_permutations=5)


# ----------------------------------------------------------------------------- config, method


def test_config_validation_names_key_path() -> None:
    assert PermutationConfig().enabled is True
    with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.metrics"):
        PermutationConfig(metrics=["f1"])
    with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.studentize"):
        PermutationConfig(studentize="bootstrap")
    with pytest.raises(ConfigError, match=r"custom_metrics\.mine"):
        PermutationConfig(custom_metrics={"mine": "nocolon"})
    with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.backend.*'auto'"):
        PermutationConfig(backend="jax")
    with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.device must be 'auto'"):
        PermutationConfig(device="gpu")


def frame(n: int = 900, seed: int = 0, weights: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    sex = rng.choice(["female", "male"], n)
    y = rng.binomial(1, np.where(sex == "male", 0.5, 0.3))
    s = np.clip(rng.normal(0.35 + 0.25 * y + 0.1 * (race == "a"), 0.2), 0, 1)
    df = pd.DataFrame({"race": race, "sex": sex, "y": y, "s": s})
    if weights:
        df["w"] = rng.uniform(0.5, 2.0, n)
    return df


def test_run_permutation_tests_findings_details_and_family() -> None:
    ds = AuditDataset.from_frame(
        frame(), ColumnRoles("y", ("race", "sex"), score="s"), threshold=0.5
    )
    cfg = PermutationConfig(metrics=["fnr", "auc", "calibration"], n_permutations=199)
    res = run_permutation_tests(ds, cfg, seed=3)
    assert res.method == "permutation_tests" and res.status == "ok"
    assert len(res.findings) == 3 * (3 + 1)
    keys = {f.key for f in res.findings}
    assert "perm_fnr.race.a_b" in keys and "perm_auc.sex.female_male" in keys
    for f in res.findings:
        assert f.pvalue is not None and f.null_hypothesis and f.interval is not None
        assert f.adjusted_pvalue is None and f.decision == "not_tested"
    assert isinstance(res.details, PermutationDetails)
    fam = res.details.family
    np.testing.assert_allclose(fam.adjusted_pvalues, adjust_pvalues(list(fam.raw_pvalues)))
    text = json.dumps(res.to_dict(), allow_nan=False)
    assert len(text) < 200_000
    # FNR of a: direct computation
    f = next(f for f in res.findings if f.key == "perm_fnr.sex.female_male")
    df = frame()
    yhat = (df["s"] > 0.5).astype(int)
    fnr = [
        1 - recall_score(df["y"][df["sex"] == v], yhat[df["sex"] == v]) for v in ("female", "male")
    ]
    assert res.details.tests[0].path == "cells"
    assert f.estimate == pytest.approx(fnr[0] - fnr[1])
    # reproducible
    again = run_permutation_tests(ds, cfg, seed=3)
    assert [f.pvalue for f in again.findings] == [f.pvalue for f in res.findings]


def test_run_permutation_tests_skips_untestable_pairs_with_warnings() -> None:
    df = frame(weights=True)
    df.loc[df["race"] == "c", "y"] = 0  # no positives in group c
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("race",), score="s", weight="w"))
    res = run_permutation_tests(
        ds, PermutationConfig(metrics=["tpr", "auc"], n_permutations=99), seed=0
    )
    assert {f.key for f in res.findings} == {"perm_tpr.race.a_b"}
    reasons = " ".join(res.warnings)
    assert "race=c" in reasons and "sample weights" in reasons
    assert isinstance(res.details, PermutationDetails)
    assert len(res.details.skipped) == 2 + 3
    with pytest.raises(ConfigError, match="attributes"):
        run_permutation_tests(ds, PermutationConfig(attributes=["age"]))
    with pytest.raises(ConfigError, match=r"custom_metrics\.x"):
        run_permutation_tests(
            ds, PermutationConfig(metrics=["x"], custom_metrics={"x": "no_such_mod:f"})
        )


def test_disabled_method_is_not_run() -> None:
    ds = AuditDataset.from_frame(frame(), ColumnRoles("y", ("sex",), score="s"), threshold=0.5)
    res = run_permutation_tests(ds, PermutationConfig(enabled=False))
    assert res.status == "not_run" and not res.findings
