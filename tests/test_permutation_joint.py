"""Tests of fairengine.permutation.joint: maxT exceedances over joint permutations of one
attribute's group codes, against a slow independent loop fed to fairengine.maxt, a complete-null
FWER simulation, a power comparison with Holm, edge cases, and the binomial law of the counts."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.maxt import maxt_adjusted_pvalues
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation.joint import (
    JointFamily,
    floored_statistic,
    joint_exceedances,
    joint_family,
    joint_maxt_test,
    maxt_exceedances,
    maxt_pvalues_from_counts,
    permuted_codes,
    sequential_draw,
)
from fairengine.permutation.metrics import RATIO_METRICS, row_values
from fairengine.sequential_mc import SequentialSpec, sequential_decisions

METRICS = ["positive_rate", "tpr", "fpr"]

# ----------------------------------------------------------------------------- slow reference


def documented_permutations(
    rng: np.random.Generator, codes: np.ndarray, y: np.ndarray, scheme: str, n_perm: int
) -> list[np.ndarray]:
    """The module's documented stream: draw by draw, stratum by stratum (all rows; or y = 0
    then y = 1), codes[stratum] ← rng.permutation(codes[stratum])."""
    out = []
    for _ in range(n_perm):
        if scheme == "all_rows":
            out.append(rng.permutation(codes))
            continue
        pseudo = codes.copy()
        for label in (0, 1):
            rows = y == label
            pseudo[rows] = rng.permutation(codes[rows])
        out.append(pseudo)
    return out


def slow_statistics(y, prediction, codes, n_groups, metrics, pseudo_codes, weights=None):
    """(1 + B, m) studentized gaps: row 0 observed, then one bincount per permutation, metric
    and sum (docs/maxt.md, "Building the joint permutation matrix")."""
    pairs = [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]
    pa, pb = np.array(pairs).T
    columns = []
    for name in metrics:
        values = row_values(RATIO_METRICS[name], y, prediction, weights=weights)
        stats = []
        for pseudo in [codes, *pseudo_codes]:
            sums = np.stack([np.bincount(pseudo, values[:, k], n_groups) for k in range(5)], 1)
            stats.append(floored_statistic(sums[pa], sums[pb]))
        columns.append(np.array(stats))
    return np.concatenate(columns, axis=1)


def make_data(rng, n=400, n_groups=4, shift=0.0, soft=False, weights=False, tiny_group=False):
    codes = rng.integers(n_groups, size=n)
    if tiny_group:  # group n_groups-1 has 3 rows: TPR/FPR often undefined under permutation
        codes = rng.integers(n_groups - 1, size=n)
        codes[rng.choice(n, 3, replace=False)] = n_groups - 1
    y = rng.binomial(1, 0.4, n)
    prob = np.clip(np.where(y == 1, 0.7, 0.2) + shift * (codes == 0), 0.0, 1.0)
    pred = rng.uniform(0.0, 1.0, n) if soft else rng.binomial(1, prob).astype(float)
    w = rng.choice([0.5, 1.0, 2.0], size=n) if weights == "few" else None
    if weights == "continuous":
        w = rng.gamma(2.0, 0.5, n)
    return y, pred, codes, w


# ----------------------------------------------------------------------------- 1. equality

CASES = [
    # scheme, alternative, soft predictions, weights, tiny group, max_chunk_bytes
    ("all_rows", "two-sided", False, None, False, 32 * 2**20),
    ("all_rows", "two-sided", False, None, True, 1),  # one draw per chunk, undefined Z*
    ("within_outcome", "two-sided", False, None, False, 200_000),
    ("all_rows", "greater", True, None, False, 32 * 2**20),
    ("within_outcome", "less", True, "continuous", False, 100_000),
    ("all_rows", "less", False, "few", True, 32 * 2**20),
    ("within_outcome", "greater", False, "continuous", True, 32 * 2**20),
]


@pytest.mark.parametrize(("scheme", "alternative", "soft", "weights", "tiny", "chunk"), CASES)
def test_counts_match_maxt_reference(scheme, alternative, soft, weights, tiny, chunk):
    data_rng = np.random.default_rng(CASES.index((scheme, alternative, soft, weights, tiny, chunk)))
    n_groups, n_perm, seed = 4, 300, 12345
    y, pred, codes, w = make_data(
        data_rng, n=300, n_groups=n_groups, shift=0.05, soft=soft, weights=weights, tiny_group=tiny
    )
    family = joint_family(
        y, pred, codes, n_groups, METRICS, weights=w, alternative=alternative, scheme=scheme
    )
    perms = documented_permutations(np.random.default_rng(seed), codes, y, scheme, n_perm)
    np.testing.assert_array_equal(
        permuted_codes(family, np.random.default_rng(seed), n_perm), np.array(perms)
    )
    z = slow_statistics(y, pred, codes, n_groups, METRICS, perms, weights=w)
    np.testing.assert_allclose(family.observed, z[0], rtol=1e-13, atol=0, equal_nan=True)
    ref = maxt_adjusted_pvalues(z[0], z[1:], alternative=alternative)

    maxt, marginal = joint_exceedances(
        family, np.random.default_rng(seed), n_perm, max_chunk_bytes=chunk
    )
    adjusted = maxt_pvalues_from_counts(family, maxt, n_perm)
    np.testing.assert_allclose(adjusted, ref.adjusted_pvalues, rtol=0, atol=1e-12, equal_nan=True)
    raw = np.where(family.tested, (1.0 + marginal) / (1.0 + n_perm), np.nan)
    np.testing.assert_allclose(raw, ref.raw_pvalues, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(family.order, ref.order)
    np.testing.assert_array_equal(
        maxt_exceedances(family, np.random.default_rng(seed), n_perm), maxt
    )
    res = joint_maxt_test(
        y,
        pred,
        codes,
        n_groups,
        METRICS,
        n_perm,
        seed,
        weights=w,
        alternative=alternative,
        scheme=scheme,
    )
    np.testing.assert_allclose(res.adjusted_pvalues, ref.adjusted_pvalues, atol=1e-12)
    np.testing.assert_allclose(res.raw_pvalues, ref.raw_pvalues, atol=1e-12)
    if tiny:
        assert ref.n_undefined.sum() > 0  # the -inf path was exercised
    assert np.isfinite(ref.adjusted_pvalues).sum() == family.tested.sum()


def test_exceedances_are_the_pre_monotone_counts():
    """The (1+S)/(1+B) before the cumulative maximum are the ideal p̃ estimates: never below
    the marginal counts, and S of the least significant test equals its marginal count."""
    rng = np.random.default_rng(3)
    y, pred, codes, _ = make_data(rng, shift=0.1)
    family = joint_family(y, pred, codes, 4, METRICS)
    maxt, marginal = joint_exceedances(family, np.random.default_rng(4), 500)
    assert np.all(maxt >= marginal)
    last = family.order[-1]
    assert maxt[last] == marginal[last]
    assert np.all(np.diff(maxt[family.order]) <= 500)


# ----------------------------------------------------------------------------- 2. FWER, power


def test_complete_null_fwer_and_power_against_holm():
    n_data, n_perm, alpha = 1000, 199, 0.05
    rng = np.random.default_rng(2024)
    rejections = 0
    for _ in range(n_data):
        y, pred, codes, _ = make_data(rng, n=400, n_groups=4)
        res = joint_maxt_test(y, pred, codes, 4, METRICS, n_perm, rng)
        rejections += bool(res.rejected(alpha).any())
    fwer = rejections / n_data
    se = np.sqrt(alpha * (1 - alpha) / n_data)
    msg = f"complete-null FWER {fwer:.3f} (N={n_data}, B={n_perm}, 18 tests, SE {se:.3f})"
    assert abs(fwer - alpha) <= 3 * se, msg

    # Group 0's positive predictions raised: 9 false nulls (3 metrics x pairs with group 0).
    n_data, n_perm = 300, 999
    false_null = np.array(
        [a == 0 for _, a, _ in joint_family(*make_data(rng)[:3], 4, METRICS).labels]
    )
    power_maxt, power_holm, fwer_true = [], [], 0
    for _ in range(n_data):
        y, pred, codes, _ = make_data(rng, n=600, n_groups=4, shift=0.15)
        res = joint_maxt_test(y, pred, codes, 4, METRICS, n_perm, rng)
        holm = adjust_pvalues(res.raw_pvalues, "holm") <= alpha
        rej = res.rejected(alpha)
        power_maxt.append(rej[false_null].mean())
        power_holm.append(holm[false_null].mean())
        fwer_true += bool(rej[~false_null].any())
    pm, ph = float(np.mean(power_maxt)), float(np.mean(power_holm))
    se_p = float(np.std(np.array(power_maxt) - np.array(power_holm)) / np.sqrt(n_data))
    se_m = float(np.std(power_maxt) / np.sqrt(n_data))
    msg = (
        f"{msg}; shifted (N={n_data}, B={n_perm}): power per false null maxT {pm:.3f}, "
        f"Holm {ph:.3f}, paired SE {se_p:.4f}, SE {se_m:.3f}; "
        f"FWER on true nulls {fwer_true / n_data:.3f}"
    )
    print(msg)
    assert pm >= ph - 2 * max(se_m, se_p), msg
    assert fwer_true / n_data <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / n_data), msg


# ----------------------------------------------------------------------------- 3. edge cases


def test_metric_undefined_in_a_group_is_excluded():
    rng = np.random.default_rng(5)
    y, pred, codes, _ = make_data(rng, n=300, n_groups=3)
    y[codes == 2] = 0  # group 2 has no positive labels: its TPR is undefined
    family = joint_family(y, pred, codes, 3, METRICS)
    undefined = [j for j, (m, a, b) in enumerate(family.labels) if m == "tpr" and 2 in (a, b)]
    assert len(undefined) == 2
    assert np.isnan(family.observed[undefined]).all()
    assert not family.tested[undefined].any()
    assert family.tested.sum() == family.n_tests - 2
    assert not np.isin(undefined, family.order).any()
    counts = maxt_exceedances(family, np.random.default_rng(0), 200)
    assert (counts[undefined] == 0).all()
    res = joint_maxt_test(y, pred, codes, 3, METRICS, 200, 0)
    assert np.isnan(res.adjusted_pvalues[undefined]).all()
    assert np.isfinite(res.adjusted_pvalues[family.tested]).all()
    assert not res.rejected(0.5)[undefined].any()
    # a code with no rows at all: every column of that group is undefined
    family = joint_family(y, pred, np.where(codes == 2, 1, codes), 3, METRICS)
    assert family.tested.sum() == 3  # only the pairs (0, 1)


def test_two_groups_and_one_sided_alternatives():
    rng = np.random.default_rng(6)
    y, pred, codes, _ = make_data(rng, n=300, n_groups=2, shift=0.1)
    family = joint_family(y, pred, codes, 2, ["tpr"])
    assert family.pairs == ((0, 1),) and family.labels == (("tpr", 0, 1),)
    res = joint_maxt_test(y, pred, codes, 2, ["tpr"], 500, 1)
    assert res.adjusted_pvalues[0] == res.raw_pvalues[0]  # a single test needs no adjustment
    # 'greater' on the codes equals 'less' on the swapped codes: rng.permutation(1 - c) is
    # 1 - rng.permutation(c), so every permuted Z is exactly negated.
    for scheme in ("all_rows", "within_outcome"):
        g = joint_maxt_test(
            y, pred, codes, 2, METRICS, 300, 7, alternative="greater", scheme=scheme
        )
        le = joint_maxt_test(
            y, pred, 1 - codes, 2, METRICS, 300, 7, alternative="less", scheme=scheme
        )
        np.testing.assert_array_equal(g.adjusted_pvalues, le.adjusted_pvalues)
        np.testing.assert_array_equal(g.observed, -le.observed)
    # one-sided p-values of opposite sides: a strong positive Z is small for 'greater' only
    g = joint_maxt_test(y, pred, codes, 2, ["positive_rate"], 999, 2, alternative="greater")
    le = joint_maxt_test(y, pred, codes, 2, ["positive_rate"], 999, 2, alternative="less")
    assert g.observed[0] > 2
    assert g.adjusted_pvalues[0] < 0.05 < 0.9 < le.adjusted_pvalues[0]


def test_within_outcome_keeps_group_counts_per_outcome():
    rng = np.random.default_rng(8)
    y, pred, codes, _ = make_data(rng, n=500, n_groups=5)
    for scheme in ("within_outcome", "all_rows"):
        family = joint_family(y, pred, codes, 5, METRICS, scheme=scheme)
        pseudo = permuted_codes(family, np.random.default_rng(9), 50)
        for row in pseudo:
            assert np.array_equal(np.bincount(row, minlength=5), np.bincount(codes, minlength=5))
            same = all(
                np.array_equal(
                    np.bincount(row[y == k], minlength=5), np.bincount(codes[y == k], minlength=5)
                )
                for k in (0, 1)
            )
            assert same or scheme == "all_rows"
        if scheme == "all_rows":  # the all-rows scheme does move rows across outcomes
            assert not all(
                np.array_equal(
                    np.bincount(r[y == 1], minlength=5), np.bincount(codes[y == 1], minlength=5)
                )
                for r in pseudo
            )


def _base_args():
    rng = np.random.default_rng(10)
    y, pred, codes, _ = make_data(rng, n=60, n_groups=3)
    return {"y": y, "prediction": pred, "codes": codes, "n_groups": 3, "metrics": METRICS}


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"y": np.full(60, 2)}, "y"),
        ({"y": np.zeros((60, 1))}, "y"),
        ({"prediction": np.full(60, 1.5)}, "prediction"),
        ({"prediction": np.zeros(59)}, "prediction"),
        ({"codes": np.full(60, 3)}, "codes"),
        ({"codes": np.full(60, -1)}, "codes"),
        ({"codes": np.full(60, 0.5)}, "codes"),
        ({"codes": np.zeros(60, dtype=bool)}, "codes"),
        ({"codes": np.zeros(10, dtype=int)}, "codes"),
        ({"n_groups": 1}, "n_groups"),
        ({"n_groups": 2.0}, "n_groups"),
        ({"metrics": ["auc"]}, "metrics"),
        ({"metrics": "tpr"}, "metrics"),
        ({"metrics": []}, "metrics"),
        ({"metrics": ["tpr", "recall"]}, "metrics"),
        ({"weights": -np.ones(60)}, "weights"),
        ({"weights": np.ones(5)}, "weights"),
        ({"alternative": "two_sided"}, "alternative"),
        ({"scheme": "rows"}, "scheme"),
        ({"probability": np.full(60, np.nan)}, "probability"),
    ],
)
def test_bad_family_input_names_the_parameter(change, name):
    args = {**_base_args(), **change}
    with pytest.raises(DataContractError, match=name):
        joint_family(**args)


def test_bad_draw_input_names_the_parameter():
    family = joint_family(**_base_args())
    rng = np.random.default_rng(0)
    for call, name in [
        (lambda: maxt_exceedances(family, 0, 10), "rng"),
        (lambda: maxt_exceedances(family, rng, 0), "batch"),
        (lambda: maxt_exceedances(family, rng, 2.5), "batch"),
        (lambda: maxt_exceedances("family", rng, 10), "family"),
        (lambda: maxt_exceedances(family, rng, 10, max_chunk_bytes=0), "max_chunk_bytes"),
        (lambda: maxt_pvalues_from_counts(family, np.zeros(3), 10), "exceedances"),
        (lambda: maxt_pvalues_from_counts(family, np.full(9, 0.5), 10), "exceedances"),
        (lambda: maxt_pvalues_from_counts(family, np.zeros(9), 0), "resamples"),
        (lambda: maxt_pvalues_from_counts(family, np.full(9, 11), 10), "resamples"),
        (lambda: joint_maxt_test(**_base_args(), n_permutations=0), "n_permutations"),
        (lambda: joint_maxt_test(**_base_args(), seed="x"), "seed"),
        (lambda: joint_maxt_test(**_base_args()).rejected(1.5), "alpha"),
    ]:
        with pytest.raises(DataContractError, match=name):
            call()


def test_family_fields_and_sequential_adapter():
    rng = np.random.default_rng(11)
    y, pred, codes, _ = make_data(rng, n=300, n_groups=4, shift=0.15)
    family = joint_family(y, pred, codes, 4, METRICS)
    assert isinstance(family, JointFamily)
    assert family.n_tests == 18 and len(family.pairs) == 6
    assert family.labels[0] == ("positive_rate", 0, 1)
    assert family.labels[-1] == ("fpr", 2, 3)
    assert sorted(family.order) == list(family.tested_columns)
    t = family.t_observed[family.order]
    assert np.all(np.diff(t) <= 0)
    # the engine's draw convention: counts for the requested (defined) tests, in [0, batch]
    draw = sequential_draw(family, np.random.default_rng(12))
    out = draw(np.array([0, 5, 17]), 40)
    assert out.shape == (3,) and np.all((out >= 0) & (out <= 40))
    spec = SequentialSpec(procedure="none", first_batch=50, max_resamples=800)
    res = sequential_decisions(draw, int(family.tested.sum()), spec)
    assert res.n_tests == 18 and res.total_resamples > 0
    p = maxt_pvalues_from_counts(family, res.exceedances, res.resamples)
    assert np.all(np.diff(p[family.order]) >= 0)


def test_memory_stays_bounded():
    rng = np.random.default_rng(13)
    n = 20_000
    codes = rng.integers(6, size=n)
    y = rng.binomial(1, 0.4, n)
    family = joint_family(y, rng.uniform(size=n), codes, 6, METRICS)  # weighted-bincount path
    tracemalloc.start()
    try:
        maxt_exceedances(family, np.random.default_rng(0), 400)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.1f} MiB"


# ----------------------------------------------------------------------------- 4. binomial


def test_counts_are_binomial():
    rng = np.random.default_rng(14)
    y, pred, codes, _ = make_data(rng, n=200, n_groups=3, shift=0.05)
    family = joint_family(y, pred, codes, 3, ["positive_rate", "tpr"])
    draws = np.random.default_rng(15)
    batch, n_batches, big = 100, 100, 40_000
    counts = np.array([maxt_exceedances(family, draws, batch) for _ in range(n_batches)])
    p_big = maxt_exceedances(family, draws, big) / big
    mean = counts.mean(axis=0) / batch
    cols = family.order
    se = np.sqrt(p_big * (1 - p_big) * (1 / (batch * n_batches) + 1 / big))
    msg = f"mean {mean[cols].round(4)}, large batch {p_big[cols].round(4)}, SE {se[cols].round(4)}"
    assert np.all(np.abs(mean - p_big)[cols] <= 4 * se[cols] + 1e-12), msg
    # dispersion across batches is binomial: Var(S) ≈ batch p (1 - p)
    mid = cols[(p_big[cols] > 0.1) & (p_big[cols] < 0.9)]
    assert mid.size > 0
    ratio = counts[:, mid].var(axis=0, ddof=1) / (batch * p_big[mid] * (1 - p_big[mid]))
    assert np.all((ratio > 0.55) & (ratio < 1.55)), f"{msg}; dispersion ratios {ratio.round(2)}"
