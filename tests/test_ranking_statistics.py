"""fairengine.ranking: exposure (Singh & Joachims 2018), top-k shares and skew@k, NDKL (Geyik,
Ambler & Kenthapadi 2019, §3.1, eq. (3)) and precision@k/recall@k against a straightforward loop
implementation on random small lists (to 1e-12), NDKL on a hand-computed example, the lossless
JSON round trip and the errors of bad input (each naming the array or parameter)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.ranking import (
    NDKL,
    GroupExposures,
    PrecisionAtK,
    RankingStatistics,
    TopKShares,
    check_inputs,
    group_exposure,
    ndkl,
    precision_recall_at_k,
    ranking_statistics,
    resolve_cutoff,
    topk_shares,
)

CATS = ["a", "b", "c"]


def _random_lists(seed: int, ties: bool = False):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 25, size=6)
    lists = np.repeat(np.array([7, 3, 11, 0, 5, 2]), sizes)
    n = lists.size
    scores = rng.normal(size=n)
    if ties:
        scores = np.round(scores, 0)
    codes = rng.integers(0, 3, size=n)
    codes[:3] = [0, 1, 2]
    relevance = rng.integers(0, 3, size=n).astype(float)
    perm = rng.permutation(n)  # items of a list are not contiguous
    return scores[perm], codes[perm], lists[perm], relevance[perm]


# ------------------------------------------------------------------ the loop implementation


def _loop_ranks(scores, lists):
    ranks = {}
    for lid in set(lists.tolist()):
        rows = [i for i in range(len(scores)) if lists[i] == lid]
        rows.sort(key=lambda i: (-scores[i], i))  # ties: row order
        for r, i in enumerate(rows, start=1):
            ranks[i] = r
    return [ranks[i] for i in range(len(scores))]


def _loop_k(k, size):
    if isinstance(k, int):
        return k
    return max(1, math.ceil(Fraction(str(k)) * size))


def _loop_sizes(lists):
    out: dict[int, int] = {}
    for lid in lists.tolist():
        out[lid] = out.get(lid, 0) + 1
    return out


def _loop_top(ranks, lists, k):
    sizes = _loop_sizes(lists)
    return [ranks[i] <= _loop_k(k, sizes[lists[i]]) for i in range(len(ranks))]


def _loop_ndkl_one(codes_in_order, n_groups):
    n = len(codes_in_order)
    q = [codes_in_order.count(g) / n for g in range(n_groups)]
    num = z = 0.0
    for i in range(1, n + 1):
        prefix = codes_in_order[:i]
        kl = 0.0
        for g in range(n_groups):
            p = prefix.count(g) / i
            if p > 0:
                kl += p * math.log(p / q[g])
        w = 1 / math.log2(i + 1)
        num += w * kl
        z += w
    return num / z


# ------------------------------------------------------------------ cross-checks


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ties", [False, True])
def test_exposure_equals_loop(seed: int, ties: bool) -> None:
    s, g, lists, rel = _random_lists(seed, ties)
    res = group_exposure(s, g, CATS, lists=lists, relevance=rel)
    ranks = _loop_ranks(s, lists)
    exp = [1 / math.log2(1 + r) for r in ranks]
    means, per_rel = [], []
    for code in range(3):
        rows = [i for i in range(len(s)) if g[i] == code]
        e = sum(exp[i] for i in rows) / len(rows)
        u = sum(rel[i] for i in rows) / len(rows)
        means.append(e)
        per_rel.append(e / u)
        assert res.groups[code].mean_exposure == pytest.approx(e, abs=1e-12)
        assert res.groups[code].mean_relevance == pytest.approx(u, abs=1e-12)
    p = res.pair("a", "c")
    assert p.difference == pytest.approx(means[0] - means[2], abs=1e-12)
    assert p.ratio == pytest.approx(means[0] / means[2], abs=1e-12)
    assert p.treatment_ratio == pytest.approx(per_rel[0] / per_rel[2], abs=1e-12)
    np.testing.assert_array_equal(check_inputs(s, g, CATS, lists=lists).ranks, ranks)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 2, 0.1, 0.2, 0.35, 1.0])
def test_topk_shares_and_skew_equal_loop(seed: int, k: int | float) -> None:
    s, g, lists, _ = _random_lists(seed, ties=seed % 2 == 1)
    (res,) = topk_shares(s, g, CATS, lists=lists, k=k)
    ranks = _loop_ranks(s, lists)
    top = _loop_top(ranks, lists, k)
    sizes = _loop_sizes(lists)
    total_top = sum(_loop_k(k, n) for n in sizes.values())
    assert res.n_top == total_top == sum(top)
    skews = []
    for code in range(3):
        n_top = sum(1 for i in range(len(s)) if top[i] and g[i] == code)
        share = n_top / total_top
        expected = (
            sum(
                _loop_k(k, n)
                * sum(1 for i in range(len(s)) if lists[i] == lid and g[i] == code)
                / n
                for lid, n in sizes.items()
            )
            / total_top
        )
        skew = math.log(share / expected) if share > 0 else -math.inf
        skews.append(skew)
        row = res.groups[code]
        assert row.n_top == n_top
        assert row.share_top == pytest.approx(share, abs=1e-12)
        assert row.share_expected == pytest.approx(expected, abs=1e-12)
        assert row.skew == pytest.approx(skew, abs=1e-12)
    assert res.min_skew == pytest.approx(min(skews), abs=1e-12)
    assert res.max_skew == pytest.approx(max(skews), abs=1e-12)


def test_one_list_expected_share_is_the_group_share() -> None:
    s, g, _, _ = _random_lists(3)
    (res,) = topk_shares(s, g, CATS, k=0.2)
    for code in range(3):
        assert res.groups[code].share_expected == pytest.approx(np.mean(g == code), abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_ndkl_equals_loop(seed: int) -> None:
    s, g, lists, _ = _random_lists(seed, ties=seed % 2 == 0)
    res = ndkl(s, g, CATS, lists=lists)
    ranks = _loop_ranks(s, lists)
    values = []
    for lid in sorted(set(lists.tolist())):
        rows = sorted((ranks[i], i) for i in range(len(s)) if lists[i] == lid)
        values.append(_loop_ndkl_one([int(g[i]) for _, i in rows], 3))
    assert res.value == pytest.approx(sum(values) / len(values), abs=1e-12)
    assert res.min_list == pytest.approx(min(values), abs=1e-12)
    assert res.max_list == pytest.approx(max(values), abs=1e-12)
    assert res.n_lists == len(values)


def test_ndkl_hand_computed_example() -> None:
    """Geyik et al. (2019) eq. (3) on the list (a, a, b, b), desired D = (1/2, 1/2):
    prefixes (1, 0), (1, 0), (2/3, 1/3), (1/2, 1/2) have d_KL = ln 2, ln 2,
    2/3 ln(4/3) + 1/3 ln(2/3), 0 with weights 1, 1/log2 3, 1/2, 1/log2 5."""
    kl3 = 2 / 3 * math.log(4 / 3) + 1 / 3 * math.log(2 / 3)
    w = [1.0, 1 / math.log2(3), 0.5, 1 / math.log2(5)]
    expected = (w[0] * math.log(2) + w[1] * math.log(2) + w[2] * kl3) / sum(w)
    assert expected == pytest.approx(0.4523, abs=1e-4)  # the number worked out by hand
    res = ndkl([4.0, 3.0, 2.0, 1.0], [0, 0, 1, 1], ["a", "b"])
    assert res.value == pytest.approx(expected, abs=1e-12)
    # alternating (a, b, a, b): prefixes (1, 0), (1/2, 1/2), (2/3, 1/3), (1/2, 1/2)
    alt = ndkl([4.0, 3.0, 2.0, 1.0], [0, 1, 0, 1], ["a", "b"])
    assert alt.value == pytest.approx((math.log(2) + 0.5 * kl3) / sum(w), abs=1e-12)
    assert alt.value < res.value
    assert ndkl([4.0, 3.0], [0, 0], ["a"]).value == 0.0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [None, 2.0])
def test_precision_recall_equal_loop(seed: int, threshold: float | None) -> None:
    s, g, lists, rel = _random_lists(seed)
    res = precision_recall_at_k(s, g, CATS, rel, lists=lists, k=(2, 0.25), threshold=threshold)
    ranks = _loop_ranks(s, lists)
    relevant = [(r > 0) if threshold is None else (r >= threshold) for r in rel]
    for k, pk in zip((2, 0.25), res, strict=True):
        top = _loop_top(ranks, lists, k)
        for code in range(3):
            rows = [i for i in range(len(s)) if g[i] == code]
            shown = [i for i in rows if top[i]]
            hit = [i for i in shown if relevant[i]]
            rel_rows = [i for i in rows if relevant[i]]
            want_p = len(hit) / len(shown) if shown else math.nan
            want_r = len(hit) / len(rel_rows) if rel_rows else math.nan
            got = pk.groups[code]
            assert got.n_top == len(shown) and got.n_relevant_top == len(hit)
            np.testing.assert_allclose(got.precision, want_p, atol=1e-12)
            np.testing.assert_allclose(got.recall, want_r, atol=1e-12)


def test_fraction_cutoffs_round_up_and_name_keys() -> None:
    c = resolve_cutoff(0.1)
    assert (c.token, c.label) == ("10pct", "top 10%")
    np.testing.assert_array_equal(c.per_list(np.array([30, 31, 5, 10])), [3, 4, 1, 1])
    assert resolve_cutoff(0.125).token == "12p5pct"
    assert resolve_cutoff(10).token == "k10"


# ------------------------------------------------------------------ JSON


def test_results_round_trip_through_json() -> None:
    s, g, lists, rel = _random_lists(1)
    res = ranking_statistics(s, g, CATS, lists=lists, relevance=rel, n_permutations=19)
    text = json.dumps(res.to_dict(), allow_nan=False)
    assert RankingStatistics.from_dict(json.loads(text)) == res
    for part, cls in (
        (res.exposure, GroupExposures),
        (res.topk[0], TopKShares),
        (res.ndkl, NDKL),
        (res.precision[0], PrecisionAtK),
    ):
        assert cls.from_dict(json.loads(json.dumps(part.to_dict(), allow_nan=False))) == part
    # a group absent from the top k: skew -inf survives strict JSON
    (t,) = topk_shares([5.0, 4.0, 3.0, 2.0, 1.0], [0, 0, 0, 1, 1], ["a", "b"], k=2)
    assert t.group("b").skew == -math.inf
    back = TopKShares.from_dict(json.loads(json.dumps(t.to_dict(), allow_nan=False)))
    assert back == t


# ------------------------------------------------------------------ bad input


def test_ties_policy() -> None:
    s = [3.0, 1.0, 3.0, 2.0]
    assert check_inputs(s, [0, 1, 0, 1], ["a", "b"]).ranks.tolist() == [1, 4, 2, 3]
    with pytest.raises(DataContractError, match=r"scores has 1 tie.*list '0' at score 3\.0"):
        check_inputs(s, [0, 1, 0, 1], ["a", "b"], ties="error")
    # ties in different lists are no ties
    ranks = check_inputs(s, [0, 1, 0, 1], ["a", "b"], lists=[1, 1, 2, 2], ties="error").ranks
    assert ranks.tolist() == [1, 2, 1, 2]
    with pytest.raises(DataContractError, match="ties must be one of"):
        check_inputs(s, [0, 1, 0, 1], ["a", "b"], ties="random")


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"scores": [1.0, np.nan, 0.0]}, r"scores must hold finite numbers: 1 NaN.*row 1"),
        ({"scores": [1.0, np.inf, 0.0]}, r"scores must hold finite numbers"),
        ({"scores": ["x", "y", "z"]}, r"scores must be numeric"),
        ({"lists": ["q1", "q1", "q2"]}, r"list 'q2' has 1 item\(s\) in lists"),
        ({"lists": [1, 1]}, r"lists must be a 1-D array .* one per item \(3\)"),
        ({"groups": [0, 1, 3]}, r"groups must hold codes 0\.\.1"),
        ({"groups": [0, 0, 0]}, r"group 'b' \(code 1\) has no items"),
        ({"relevance": [1.0, -1.0, 0.0]}, r"relevance must be non-negative"),
        ({"relevance": [1.0, np.nan, 0.0]}, r"relevance must hold finite numbers"),
    ],
)
def test_bad_input_names_the_array(kwargs: dict, pattern: str) -> None:
    args = {"scores": [3.0, 2.0, 1.0], "groups": [0, 1, 0], "lists": None, "relevance": None}
    args.update(kwargs)
    with pytest.raises(DataContractError, match=pattern):
        check_inputs(
            args["scores"],
            args["groups"],
            ["a", "b"],
            lists=args["lists"],
            relevance=args["relevance"],
        )


def test_k_larger_than_a_list_and_bad_k() -> None:
    s, g, lists = [4.0, 3.0, 2.0, 1.0, 0.0], [0, 1, 0, 1, 0], [1, 1, 1, 2, 2]
    with pytest.raises(
        DataContractError, match=r"k\[0\] = 3 is larger than a list: list '2' has 2 items"
    ):
        topk_shares(s, g, ["a", "b"], lists=lists, k=3)
    for bad, pattern in ((0, "at least 1 item"), (1.5, r"\(0, 1\]"), ("10%", "item count")):
        with pytest.raises(DataContractError, match=pattern):
            topk_shares(s, g, ["a", "b"], lists=lists, k=bad)
    with pytest.raises(DataContractError, match="same cutoff twice"):
        topk_shares(s, g, ["a", "b"], k=(0.1, 0.1))
    with pytest.raises(DataContractError, match="relevance is required"):
        precision_recall_at_k(s, g, ["a", "b"], None)
