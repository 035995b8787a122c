"""fairengine.ranking.permutation: the type-I error of the within-list studentized permutation
tests (exposure difference, top-k rate differences) under exchangeable groups lies in the 99.9 %
binomial band of 0.05 (300 data sets × 199 permutations, six lists of different lengths and
group mixes, so that the raw group means differ under the null), the within-list draws keep
every list's labels and are uniform, the seeds follow fairengine.regression's pair_seed
convention (a later batch adds to the counts), and bad arguments are named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from fairengine.errors import DataContractError
from fairengine.ranking import RankPairTests, all_pair_tests, pair_permutation_tests, pair_seed
from fairengine.ranking.permutation import within_list_masks

SETS, PERMS, ALPHA = 300, 199, 0.05


def _band() -> tuple[float, float]:
    lo = stats.binom.ppf(0.0005, SETS, ALPHA) / SETS
    hi = stats.binom.ppf(0.9995, SETS, ALPHA) / SETS
    return float(lo), float(hi)


def _null_lists(rng: np.random.Generator):
    """Six lists of 10–60 items; the share of group A differs by list (0.1 … 0.8) and the
    short lists hold more A, so the raw exposure of A is higher under the null."""
    sizes = np.array([10, 15, 25, 35, 45, 60])
    share_a = np.array([0.8, 0.7, 0.5, 0.3, 0.2, 0.1])
    lists = np.repeat(np.arange(6), sizes)
    codes = (rng.random(lists.size) >= share_a[lists]).astype(int)  # 0 = A
    scores = rng.normal(size=lists.size)  # independent of the group: exchangeable
    return scores, codes, lists


def test_type_one_error_of_every_test_under_exchangeable_groups() -> None:
    rng = np.random.default_rng(2026)
    names = ("exposure", "topk_20pct", "topk_k5")
    rejections = dict.fromkeys(names, 0)
    raw = []
    for i in range(SETS):
        scores, codes, lists = _null_lists(rng)
        res = pair_permutation_tests(
            scores,
            codes,
            ["A", "B"],
            group_a=0,
            group_b=1,
            lists=lists,
            k=(0.2, 5),
            n_permutations=PERMS,
            seed=i,
        )
        for name in names:
            rejections[name] += res.test(name).pvalue <= ALPHA
        raw.append(res.test("exposure").difference)
    lo, hi = _band()
    rates = {k: v / SETS for k, v in rejections.items()}
    for k, r in rates.items():
        assert lo <= r <= hi, (k, rates, (lo, hi))
    print("type-I rates", rates, (lo, hi))
    # the raw difference is biased under this null (A sits in short lists): the within-list
    # centring is what keeps the test's level
    assert np.mean(raw) > 0.02


def test_one_list_type_one_error_with_ties() -> None:
    rng = np.random.default_rng(7)
    rejections = {"exposure": 0, "topk_10pct": 0}
    for i in range(SETS):
        n = 120
        scores = np.round(rng.normal(size=n), 1)  # ties: row order breaks them
        codes = (rng.random(n) < 0.3).astype(int)
        res = pair_permutation_tests(
            scores, codes, ["a", "b"], group_a=0, group_b=1, k=0.1, n_permutations=PERMS, seed=i
        )
        assert res.n_lists == 1 and res.n_lists_mixed == 1
        for name in rejections:
            rejections[name] += res.test(name).pvalue <= ALPHA
    lo, hi = _band()
    for k, v in rejections.items():
        assert lo <= v / SETS <= hi, (k, v / SETS, (lo, hi))


def test_detects_a_ranking_that_favours_a_group() -> None:
    rng = np.random.default_rng(3)
    scores, codes, lists = _null_lists(rng)
    scores = scores + 1.0 * (codes == 1)
    res = pair_permutation_tests(
        scores, codes, ["A", "B"], group_a=0, group_b=1, lists=lists, n_permutations=999
    )
    for t in res.tests:
        assert t.pvalue < 0.01 and t.adjusted_difference < 0 and t.interval.high < 0, t
    # one list: the adjusted difference is the raw one
    one = pair_permutation_tests(scores, codes, ["A", "B"], group_a=0, group_b=1, n_permutations=9)
    for t in one.tests:
        assert t.adjusted_difference == pytest.approx(t.difference, abs=1e-12)


@pytest.mark.parametrize("long_list", [0, 30])
def test_within_list_masks_keep_labels_and_are_uniform(long_list: int) -> None:
    """Lists of 3, 4 and 2 items (sorted per list in a padded array) and, with a list of 30
    more, the one-argsort path (padding would cost more than PAD_FACTOR times the items)."""
    rng = np.random.default_rng(11)
    lists = np.r_[[0, 0, 0, 1, 1, 1, 1, 2, 2], np.full(long_list, 3)]
    labels = np.r_[
        [True, False, False, True, True, False, False, True, False], np.arange(long_list) < 10
    ].astype(bool)
    masks = within_list_masks(rng, lists, labels, 30_000)
    for lid in np.unique(lists):
        cols = lists == lid
        np.testing.assert_array_equal(masks[:, cols].sum(axis=1), labels[cols].sum())
        # every position of the list is A with probability n_A,l / n_l (binomial 5 SE)
        p = labels[cols].mean()
        freq = masks[:, cols].mean(axis=0)
        assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / masks.shape[0]))
    # list 1 (2 A of 4): the 6 arrangements are equally likely (chi-square, 99.9 %)
    _, counts = np.unique(masks[:, 3:7], axis=0, return_counts=True)
    assert counts.size == 6
    assert stats.chisquare(counts).pvalue > 0.001


def test_seeds_follow_the_pair_seed_convention() -> None:
    rng = np.random.default_rng(5)
    scores, codes, lists = _null_lists(rng)
    codes = np.where(rng.random(codes.size) < 0.2, 2, codes)
    cats = ["A", "B", "C"]
    opts = {"lists": lists, "k": (0.2,), "n_permutations": 99}
    pairs = all_pair_tests(scores, codes, cats, seed=42, **opts)
    assert [(p.group_a, p.group_b) for p in pairs] == [("A", "B"), ("A", "C"), ("B", "C")]
    second = pair_permutation_tests(
        scores, codes, cats, group_a="A", group_b="C", seed=pair_seed(42, 1), **opts
    )
    assert second == pairs[1]
    more = pair_permutation_tests(
        scores, codes, cats, group_a="A", group_b="C", seed=pair_seed(42, 1, 99), **opts
    )
    assert more != second
    for t0, t1 in zip(second.tests, more.tests, strict=True):
        assert t1.statistic == t0.statistic  # observed: deterministic, counts add up
        assert t1.n_permutations == t0.n_permutations == 99
    back = RankPairTests.from_dict(json.loads(json.dumps(second.to_dict(), allow_nan=False)))
    assert back == second


def test_bad_arguments_are_named() -> None:
    s, g = [5.0, 4.0, 3.0, 2.0, 1.0], [0, 1, 0, 1, 2]
    cats = ["a", "b", "c"]
    with pytest.raises(DataContractError, match="group 'c' has 1 item"):
        pair_permutation_tests(s, g, cats, group_a="a", group_b="c")
    with pytest.raises(DataContractError, match="group_a and group_b must differ"):
        pair_permutation_tests(s, g, cats, group_a=0, group_b="a")
    with pytest.raises(DataContractError, match="group_b must be a category label"):
        pair_permutation_tests(s, g, cats, group_a=0, group_b="z")
    with pytest.raises(DataContractError, match="nothing to test"):
        pair_permutation_tests(s, g, cats, group_a=0, group_b=1, exposure=False, k=())
    with pytest.raises(DataContractError, match="n_permutations must be >= 1"):
        pair_permutation_tests(s, g, cats, group_a=0, group_b=1, n_permutations=0)
    with pytest.raises(DataContractError, match="alternative must be one of"):
        pair_permutation_tests(s, g, cats, group_a=0, group_b=1, alternative="bigger")
